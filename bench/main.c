/* mlp_bench: benchmarks of mlp_train's kernels against their libraries, on the CPU and the GPU.
 * This file picks the benchmark (the first argument), parses the options with getopt_long,
 * sets up the devices, runs the benchmark and writes its results; exit status 1 when any case
 * failed verification (each named on stderr), 2 on a usage error. */

#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "bench/bench.h"
#include "util/parse_number.h"
#include "bench/gpu_bench.h"
#include "libs/openblas_gemm.h"
#include "profiling/wall_clock.h"

static const char USAGE[] = /* continued below */
    "Usage: mlp_bench gemm|dot|maxpool [OPTIONS]\n"
    "Benchmark mlp_train's kernels against the vendor libraries, on the CPU and the GPU.\n"
    "Every case is verified against a reference before it is timed; the table gives the\n"
    "median time, the throughput, the ratio to the library on the same device (vs_blas,\n"
    "> 1 is faster), the fraction of the device's copy bandwidth and the error.\n"
    "\n"
    "Benchmarks and their implementations (--impl):\n"
    "  gemm      C = A·B, FP32 (no TF32) unless the name says otherwise\n"
    "              cpu: naive, tiled, blas (OpenBLAS)\n"
    "              gpu: the GEMM ladder in its order (cuda/gemm/gemm_ladder.h): naive,\n"
    "                   shared, blocked, warptiled, tiled (--impl tiled's), blas (cuBLAS);\n"
    "                   tensor cores: tf32_mma, tf32_wgmma, tf32_wgmma_tma, tiled_tf32,\n"
    "                   blas_tf32 (TF32); tiled_tf32_fp16_a (TF32, A's TF32 values as FP16,\n"
    "                   made once); tiled_bf16 (FP32 A and B, rounded as they are read);\n"
    "                   bf16_mma, bf16_wgmma, bf16_wgmma_tma, tiled_bf16_stored, blas_bf16\n"
    "                   (BF16 A and B, rounded once before timing; FP32 C and sums);\n"
    "                   *_wgmma* on Hopper only. vs_blas is against cuBLAS in the same\n"
    "                   precision\n"
    "  dot       y = sigmoid(w·x), GB/s of input read\n"
    "              cpu: loop, openmp, blas (cblas_sdot)\n"
    "              gpu: naive (atomics), shared (tree), shuffle (warp shuffles),\n"
    "                   blas (cublasSdot)\n"
    "  maxpool   2-D max pooling of planes × side × side images, GB/s of input + output\n"
    "              cpu: sequential, openmp;  gpu: cuda\n"
    "\n"
    "What to run:\n"
    "  --device cpu|gpu|all   (default: all that are available; gpu fails without a GPU)\n"
    "  --impl LIST            implementations, comma-separated (default: all)\n"
    "  --sizes LIST           gemm: square sizes (default 2:4096); dot: n (default 1K:64M).\n"
    "                         A LIST is values and A:B ranges (A, 2A, 4A, ... up to B),\n"
    "                         comma-separated, with K and M suffixes (x1024): 64,1000,1K:1M\n"
    "  --mlp-shapes           gemm: the MLP's own GEMMs (784-256-10 at batch 16 and 512:\n"
    "                         forward, weight gradient, input gradient, their transposes)\n"
    "  --shape M,N,K[,TT]     gemm: one more shape; TT is NN (default), NT, TN or TT, the\n"
    "                         transposes of A and B (repeatable)\n"
    "  --plan TILE:SPLITS     gemm: GPU blocked and tiled use TILE×TILE blocks (32, 64, 128;\n"
    "                         tiled also 64x128:SPLITS and 128x256:SPLITS) and K cut into\n"
    "                         SPLITS slices (1: no split-K; fewer where K or the workspace is too\n"
    "                         small), instead of their own choice, so that plans can be compared\n"
    "                         on one shape\n"
    "  --naive-max N          gemm: skip CPU naive when M·N·K > N³ (default 1024)\n"
    "  --image-sizes LIST     maxpool: image sides (default 4:8192)\n"
    "  --planes N             maxpool: images per case, batch × channels (default 4)\n"
    "  --kernel K             maxpool: window side (default 2)\n"
    "  --stride S             maxpool: distance between windows (default 2)\n"
    "  --padding P            maxpool: padding on each side, never the maximum; P < K (default 0)\n"
    "  --max-mib N            skip cases needing more host memory than N MiB (default 4096)\n"
    "\n";

/* In two parts: C99 compilers need not take string literals over 4095 characters. */
static const char USAGE_MEASURING_AND_OUTPUT[] =
    "Measuring (the median of the repeats is reported):\n"
    "  --warmup N             untimed runs first (default 1 on the CPU, 3 on the GPU)\n"
    "  --repeats N            timed runs at most (default 5 on the CPU, 10 on the GPU)\n"
    "  --time-cap S           stop repeating after S seconds measured, once 3 runs are done\n"
    "                         (default 1)\n"
    "  --threads N            CPU threads for OpenMP and OpenBLAS (default: all cores)\n"
    "  --with-transfer        gemm: also time copying A and B to the GPU and C back (pinned\n"
    "                         host memory) and give the throughput including them\n"
    "\n"
    "Output:\n"
    "  --csv FILE             write the rows as CSV (tools/tables/plot_bench.py plots it)\n"
    "  --json FILE            write the rows as JSON\n"
    "  --quiet                no progress lines on stderr\n"
    "  --corrupt IMPL         self-test: deliberately perturbs one output element of IMPL to\n"
    "                         show verification catches it (the run then exits with 1)\n"
    "  --help                 this text\n"
    "\n"
    "The table's header names the kernels OpenBLAS chose: a virtual machine that hides the CPU\n"
    "model may leave it on generic ones (Prescott); set OPENBLAS_CORETYPE (e.g. Haswell,\n"
    "SkylakeX) to compare against its best.\n"
    "\n"
    "Exit status: 0 every case verified, 1 a case failed verification (or --device gpu\n"
    "without a GPU, or an output file could not be written), 2 usage error.\n"
    "Example: mlp_bench gemm --device cpu --threads 1 --sizes 256:2048 --csv gemm.csv\n";

typedef struct {
    const char *name;
    void (*run)(const bench_options *o, results *r);
    const char *const *(*impls)(void); /* the --impl names, NULL-terminated */
} benchmark;

static const char *const *dot_names(void) {
    static const char *const names[] = {"loop", "openmp", "naive", "shared", "shuffle", "blas", NULL};
    return names;
}

static const char *const *maxpool_names(void) {
    static const char *const names[] = {"sequential", "openmp", "cuda", NULL};
    return names;
}

static const benchmark BENCHMARKS[] = {
    {"gemm", bench_gemm, bench_gemm_names},
    {"dot", bench_dot, dot_names},
    {"maxpool", bench_maxpool, maxpool_names},
};

enum {
    OPT_DEVICE = 256,
    OPT_IMPL,
    OPT_SIZES,
    OPT_MLP_SHAPES,
    OPT_SHAPE,
    OPT_PLAN,
    OPT_NAIVE_MAX,
    OPT_IMAGE_SIZES,
    OPT_PLANES,
    OPT_KERNEL,
    OPT_STRIDE,
    OPT_PADDING,
    OPT_MAX_MIB,
    OPT_WARMUP,
    OPT_REPEATS,
    OPT_TIME_CAP,
    OPT_THREADS,
    OPT_WITH_TRANSFER,
    OPT_CSV,
    OPT_JSON,
    OPT_QUIET,
    OPT_CORRUPT,
    OPT_HELP,
};

static const struct option LONG_OPTIONS[] = {
    {"device", required_argument, NULL, OPT_DEVICE},
    {"impl", required_argument, NULL, OPT_IMPL},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"mlp-shapes", no_argument, NULL, OPT_MLP_SHAPES},
    {"shape", required_argument, NULL, OPT_SHAPE},
    {"plan", required_argument, NULL, OPT_PLAN},
    {"naive-max", required_argument, NULL, OPT_NAIVE_MAX},
    {"image-sizes", required_argument, NULL, OPT_IMAGE_SIZES},
    {"planes", required_argument, NULL, OPT_PLANES},
    {"kernel", required_argument, NULL, OPT_KERNEL},
    {"stride", required_argument, NULL, OPT_STRIDE},
    {"padding", required_argument, NULL, OPT_PADDING},
    {"max-mib", required_argument, NULL, OPT_MAX_MIB},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"repeats", required_argument, NULL, OPT_REPEATS},
    {"time-cap", required_argument, NULL, OPT_TIME_CAP},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"with-transfer", no_argument, NULL, OPT_WITH_TRANSFER},
    {"csv", required_argument, NULL, OPT_CSV},
    {"json", required_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"corrupt", required_argument, NULL, OPT_CORRUPT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

typedef enum { DEVICES_ALL, DEVICES_CPU, DEVICES_GPU } device_choice;

/* What parsing produced besides the options themselves. */
typedef struct {
    const benchmark *bench;
    device_choice devices;
    bool help;
} parse_state;

static bool usage_error(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "mlp_bench: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\nTry 'mlp_bench --help'.\n");
    va_end(args);
    return false;
}

/* ---- values ---- */

static bool parse_long(const char *option, const char *text, long lo, long hi, long *out) {
    if (parse_long_in(text, lo, hi, out)) return true;
    return usage_error("%s wants an integer from %ld to %ld, not '%s'", option, lo, hi, text);
}

static bool parse_int(const char *option, const char *text, long lo, long hi, int *out) {
    long value = 0;
    if (!parse_long(option, text, lo, hi, &value)) return false;
    *out = (int)value;
    return true;
}

/* A count of 1..hi with an optional K or M suffix (×1024, ×1024²): the first `length`
 * characters of text. */
static bool parse_count(const char *text, size_t length, long hi, long *out) {
    char digits[32];
    if (length == 0 || length >= sizeof digits) return false;
    memcpy(digits, text, length);
    digits[length] = '\0';
    long multiplier = 1;
    char last = digits[length - 1];
    if (last == 'K' || last == 'k')
        multiplier = 1024, digits[--length] = '\0';
    else if (last == 'M' || last == 'm')
        multiplier = 1024 * 1024, digits[--length] = '\0';
    long value;
    if (!parse_long_in(digits, 1, hi / multiplier, &value)) return false;
    *out = value * multiplier;
    return true;
}

/* "64,1000,1K:1M": values, and A:B ranges that double from A up to B. */
static bool parse_list(const char *option, const char *text, long hi, long *list, int *count) {
    *count = 0;
    const char *item = text;
    while (true) {
        size_t length = strcspn(item, ",");
        const char *colon = memchr(item, ':', length);
        long first, last;
        bool ok =
            colon ? parse_count(item, (size_t)(colon - item), hi, &first) &&
                        parse_count(colon + 1, length - (size_t)(colon - item) - 1, hi, &last) &&
                        first <= last
                  : parse_count(item, length, hi, &first);
        if (!ok)
            return usage_error(
                "%s wants sizes from 1 to %ld like 64,1000 or 2:4096 or 1K:64M, not '%s'", option,
                hi, text);
        if (!colon) last = first;
        for (long value = first; value <= last; value *= 2) {
            if (*count == BENCH_MAX_LIST)
                return usage_error("%s: more than %d sizes", option, BENCH_MAX_LIST);
            list[(*count)++] = value;
        }
        if (item[length] == '\0') return true;
        item += length + 1;
    }
}

/* "M,N,K" or "M,N,K,TN". */
static bool parse_shape(const char *text, bench_options *o) {
    if (o->shape_count == BENCH_MAX_LIST)
        return usage_error("--shape: more than %d shapes", BENCH_MAX_LIST);
    gemm_shape *s = &o->shapes[o->shape_count];
    *s = (gemm_shape){0};
    char transposes[3] = "NN";
    int consumed = 0;
    int fields =
        sscanf(text, "%d,%d,%d%n,%2[NT]%n", &s->m, &s->n, &s->k, &consumed, transposes, &consumed);
    bool ok = fields >= 3 && text[consumed] == '\0' && s->m >= 1 && s->n >= 1 && s->k >= 1 &&
              strlen(transposes) == 2;
    if (!ok)
        return usage_error("--shape wants M,N,K or M,N,K,TT (TT: NN, NT, TN, TT), not '%s'", text);
    s->trans_a = transposes[0] == 'T';
    s->trans_b = transposes[1] == 'T';
    o->shape_count++;
    return true;
}

/* TILE:SPLITS (a square tile) or ROWSxCOLS:SPLITS; whether a kernel has that tile is its own
 * question (a row says so where not). */
static bool parse_plan(const char *text, bench_options *o) {
    int rows = 0, cols = 0, splits = 0, consumed = 0;
    bool ok = sscanf(text, "%dx%d:%d%n", &rows, &cols, &splits, &consumed) == 3 ||
              (sscanf(text, "%d:%d%n", &rows, &splits, &consumed) == 2 && (cols = rows) > 0);
    ok = ok && text[consumed] == '\0' && (rows == 32 || rows == 64 || rows == 128) &&
         (cols == 32 || cols == 64 || cols == 128 || cols == 256) && splits >= 1 && splits <= 64;
    if (!ok)
        return usage_error("--plan wants TILE:SPLITS or ROWSxCOLS:SPLITS (TILE and ROWS 32, 64 or "
                           "128; COLS also 256) and SPLITS 1 to 64, not '%s'", text);
    o->plan_rows = rows, o->plan_cols = cols, o->plan_splits = splits;
    return true;
}

static bool parse_seconds(const char *option, const char *text, double *out) {
    if (parse_double_in(text, 0, 3600, out)) return true;
    return usage_error("%s wants seconds from 0 to 3600, not '%s'", option, text);
}

static bool known_impl(const benchmark *bench, const char *name, const char **canonical) {
    const char *const *impls = bench->impls();
    for (int i = 0; impls[i]; i++)
        if (strcmp(impls[i], name) == 0) return *canonical = impls[i], true;
    return false;
}

static void list_impls(const benchmark *bench, char *text, size_t size) {
    text[0] = '\0';
    const char *const *impls = bench->impls();
    for (int i = 0; impls[i]; i++)
        snprintf(text + strlen(text), size - strlen(text), "%s%s", i ? ", " : "", impls[i]);
}

/* "naive,blas": each name checked against the benchmark's; kept as its static spelling. */
static bool parse_impls(const benchmark *bench, const char *text, bench_options *o) {
    o->impl_count = 0;
    const char *item = text;
    while (true) {
        size_t length = strcspn(item, ",");
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)length, item);
        if (o->impl_count == BENCH_MAX_LIST || !known_impl(bench, name, &o->impls[o->impl_count])) {
            char names[256];
            list_impls(bench, names, sizeof names);
            return usage_error("--impl: '%s' is not an implementation of %s (%s)", name,
                               bench->name, names);
        }
        o->impl_count++;
        if (item[length] == '\0') return true;
        item += length + 1;
    }
}

/* ---- options ---- */

static void set_defaults(bench_options *o) {
    memset(o, 0, sizeof *o);
    o->planes = 4;
    o->window = (maxpool_window){2, 2, 0};
    o->naive_max = 1024;
    o->max_bytes = (size_t)4096 << 20;
    o->cpu_timing = (bench_timing){1, 5, 1.0};
    o->gpu_timing = (bench_timing){3, 10, 1.0};
    o->threads = omp_get_max_threads();
}

/* Options that mean something to one benchmark only are refused by the others. */
static bool belongs_to(const parse_state *st, const char *owner, const char *option) {
    if (strcmp(st->bench->name, owner) == 0) return true;
    return usage_error("%s is an option of mlp_bench %s", option, owner);
}

static bool parse_device(const char *text, parse_state *st) {
    if (strcmp(text, "cpu") == 0)
        st->devices = DEVICES_CPU;
    else if (strcmp(text, "gpu") == 0)
        st->devices = DEVICES_GPU;
    else if (strcmp(text, "all") == 0)
        st->devices = DEVICES_ALL;
    else
        return usage_error("--device wants cpu, gpu or all, not '%s'", text);
    return true;
}

static bool parse_option(int code, const char *arg, bench_options *o, parse_state *st) {
    long value = 0;
    switch (code) {
    case OPT_DEVICE: return parse_device(arg, st);
    case OPT_IMPL: return parse_impls(st->bench, arg, o);
    case OPT_SIZES:
        if (strcmp(st->bench->name, "maxpool") == 0)
            return usage_error("--sizes is for gemm and dot; maxpool takes --image-sizes");
        return parse_list("--sizes", arg, 1L << 30, o->sizes, &o->size_count);
    case OPT_MLP_SHAPES: o->mlp_shapes = true; return belongs_to(st, "gemm", "--mlp-shapes");
    case OPT_SHAPE: return belongs_to(st, "gemm", "--shape") && parse_shape(arg, o);
    case OPT_PLAN: return belongs_to(st, "gemm", "--plan") && parse_plan(arg, o);
    case OPT_NAIVE_MAX:
        return belongs_to(st, "gemm", "--naive-max") &&
               parse_long("--naive-max", arg, 1, 1L << 20, &o->naive_max);
    case OPT_WITH_TRANSFER:
        o->with_transfer = true;
        return belongs_to(st, "gemm", "--with-transfer");
    case OPT_IMAGE_SIZES:
        return belongs_to(st, "maxpool", "--image-sizes") &&
               parse_list("--image-sizes", arg, 1L << 16, o->image_sizes, &o->image_size_count);
    case OPT_PLANES:
        return belongs_to(st, "maxpool", "--planes") &&
               parse_long("--planes", arg, 1, 1L << 30, &o->planes);
    case OPT_KERNEL:
        return belongs_to(st, "maxpool", "--kernel") &&
               parse_int("--kernel", arg, 1, 1024, &o->window.kernel);
    case OPT_STRIDE:
        return belongs_to(st, "maxpool", "--stride") &&
               parse_int("--stride", arg, 1, 1024, &o->window.stride);
    case OPT_PADDING:
        return belongs_to(st, "maxpool", "--padding") &&
               parse_int("--padding", arg, 0, 1023, &o->window.padding);
    case OPT_MAX_MIB:
        if (!parse_long("--max-mib", arg, 1, 1L << 30, &value)) return false;
        o->max_bytes = (size_t)value << 20;
        return true;
    case OPT_WARMUP:
        if (!parse_int("--warmup", arg, 0, 1000, &o->cpu_timing.warmup)) return false;
        o->gpu_timing.warmup = o->cpu_timing.warmup;
        return true;
    case OPT_REPEATS:
        if (!parse_int("--repeats", arg, 1, BENCH_MAX_REPEATS, &o->cpu_timing.repeats))
            return false;
        o->gpu_timing.repeats = o->cpu_timing.repeats;
        return true;
    case OPT_TIME_CAP:
        if (!parse_seconds("--time-cap", arg, &o->cpu_timing.time_cap_s)) return false;
        o->gpu_timing.time_cap_s = o->cpu_timing.time_cap_s;
        return true;
    case OPT_THREADS: return parse_int("--threads", arg, 1, 4096, &o->threads);
    case OPT_CSV: o->csv_path = arg; return true;
    case OPT_JSON: o->json_path = arg; return true;
    case OPT_QUIET: o->quiet = true; return true;
    case OPT_CORRUPT:
        if (known_impl(st->bench, arg, &o->corrupt)) return true;
        return usage_error("--corrupt: '%s' is not an implementation of %s", arg, st->bench->name);
    case OPT_HELP: st->help = true; return true;
    default: return usage_error("unknown option");
    }
}

static const benchmark *find_benchmark(const char *name) {
    for (size_t i = 0; i < sizeof BENCHMARKS / sizeof *BENCHMARKS; i++)
        if (strcmp(BENCHMARKS[i].name, name) == 0) return &BENCHMARKS[i];
    return NULL;
}

/* argv[1] is the benchmark; the options follow it. */
static bool parse_command_line(int argc, char **argv, bench_options *o, parse_state *st) {
    set_defaults(o);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return st->help = true;
    if (argc < 2) return usage_error("which benchmark: gemm, dot or maxpool?");
    st->bench = find_benchmark(argv[1]);
    if (!st->bench) return usage_error("unknown benchmark '%s' (gemm, dot or maxpool)", argv[1]);
    opterr = 0;
    int code;
    while ((code = getopt_long(argc - 1, argv + 1, "", LONG_OPTIONS, NULL)) != -1) {
        if (code == '?') return usage_error("unknown option or missing value: '%s'", argv[optind]);
        if (!parse_option(code, optarg, o, st)) return false;
    }
    if (optind < argc - 1) return usage_error("unexpected argument '%s'", argv[optind + 1]);
    if (!maxpool_window_valid(o->window))
        return usage_error("--padding (%d) must be smaller than --kernel (%d)", o->window.padding,
                           o->window.kernel);
    return true;
}

/* ---- devices ---- */

/* Decides which devices run. A GPU that is missing is an error only if asked for by name. */
static bool open_devices(device_choice choice, bench_options *o, results *r) {
    o->run_cpu = choice != DEVICES_GPU;
    o->run_gpu = false;
    if (choice == DEVICES_CPU) return true;
#ifdef MLP_HAVE_CUDA
    char why[256];
    device_presence presence = gpu_bench_open(why, sizeof why);
    if (presence == DEVICE_PRESENT) {
        o->run_gpu = true;
        snprintf(r->gpu_name, sizeof r->gpu_name, "%s", gpu_bench_device_name());
        return true;
    }
    const char *what = presence == DEVICE_ABSENT ? "no GPU here" : "the GPU fails";
    if (choice == DEVICES_GPU) {
        fprintf(stderr, "mlp_bench: --device gpu: %s (%s)\n", what, why);
        return false;
    }
    fprintf(stderr, "mlp_bench: %s (%s): GPU rows skipped\n", what, why);
#else
    (void)r;
    if (choice == DEVICES_GPU) {
        fprintf(stderr, "mlp_bench: --device gpu: built without CUDA (no nvcc at configure)\n");
        return false;
    }
    fprintf(stderr, "mlp_bench: built without CUDA: GPU rows unavailable\n");
#endif
    return true;
}

static void close_devices(const bench_options *o) {
#ifdef MLP_HAVE_CUDA
    if (o->run_gpu) gpu_bench_close();
#else
    (void)o;
#endif
}

/* ---- the run ---- */

static bool write_outputs(const bench_options *o, const results *r) {
    bool ok = true;
    if (o->csv_path) ok = results_write_csv(r, o->csv_path) && ok;
    if (o->json_path) ok = results_write_json(r, o->json_path) && ok;
    return ok;
}

/* The first parallel regions of a process ran a thousand times slow on the 16-core virtual
 * machine, for about 0.1 s (naive 16³ and 32³: 12 and 8 ms a call, multiples of the 4 ms
 * scheduler tick, whichever implementation came first; waiting 0.25 s before did not help). A
 * region that keeps the whole team busy for TEAM_WARM_UP_S first, before any row is timed,
 * gives the threads their cores: with it, naive 16³ took 6 µs a call there. */
#define TEAM_WARM_UP_S 0.2

static void warm_up_team(const bench_options *o) {
    if (!o->run_cpu) return;
    double end = wall_seconds() + TEAM_WARM_UP_S;
#pragma omp parallel
    while (wall_seconds() < end) continue;
}

int main(int argc, char **argv) {
    bench_options o;
    parse_state st = {0};
    if (!parse_command_line(argc, argv, &o, &st)) return 2;
    if (st.help) {
        fputs(USAGE, stdout);
        fputs(USAGE_MEASURING_AND_OUTPUT, stdout);
        return 0;
    }
    omp_set_num_threads(o.threads);
    openblas_threads(o.threads);

    results r;
    results_init(&r, st.bench->name);
    r.cpu_threads = o.threads;
    /* Where a virtual machine hides the CPU model, OpenBLAS falls back to old generic kernels
     * (e.g. "Prescott") several times slower than its best; the table's header says which. */
    snprintf(r.blas_core, sizeof r.blas_core, "%s", openblas_core_name());
    r.with_transfer = o.with_transfer;
    if (!open_devices(st.devices, &o, &r)) return 1;
    warm_up_team(&o);
    st.bench->run(&o, &r);
    close_devices(&o);

    results_finish(&r);
    results_print_table(&r, stdout);
    bool written = write_outputs(&o, &r);
    int failures = results_report_failures(&r, stderr);
    results_free(&r);
    if (failures) {
        fprintf(stderr, "mlp_bench: %d case%s failed verification\n", failures,
                failures == 1 ? "" : "s");
        return 1;
    }
    return written ? 0 : 1;
}

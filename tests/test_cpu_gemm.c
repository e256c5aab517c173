/* Tests of the three CPU GEMMs (naive, tiled, OpenBLAS) against reference_gemm.
 *
 * Every combination of implementation, transposes, shape, thread count (1 and 2) and scaling
 * (alpha = 1, beta = 0 into a C poisoned with NaN; then alpha = 0.5, beta = -1.5 into a C
 * holding random values) is compared with the double-precision reference. Inputs are fresh
 * random values in [-1, 1] on every run (the seed is printed).
 *
 * Stray accesses: in half of the cases lda, ldb and ldc are larger than needed. The padding
 * columns of A and B hold NaN, so a read of them shows up as NaN in C. Everything of C outside
 * its M×N window (padding columns and one guard row after the last) holds -0.0, which any write
 * turns into something else, even adding zero (-0.0 + 0.0 is +0.0): a stray write of a
 * zero-padded lane is caught too.
 *
 * The tiled GEMM's fused epilogue (bias, ReLU, ReLU mask, alone and together) is checked on
 * the same cases against the reference with the epilogue applied in double, and to the bit
 * against the unfused passes of cpu_ops.h. Naive and tiled must give the same bits for 1, 2
 * and 3 threads. The shapes make every path of the tiled GEMM run: edges in M and N, A and B
 * read in place or packed, the transposed product for narrow C, several panels in K and N. */
#include "check.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_ops.h"
#include "libs/openblas_gemm.h"
#include "core/rng.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <string.h>

/* Relative Frobenius error bound. A float32 dot product of K terms, summed in order, has a
 * rounding error of at most about sqrt(K) * 2^-24 relative to its size for random-signed terms
 * (the errors of the additions add like a random walk): ~2e-6 at K = 784, the deepest case here;
 * measured, the naive in-order sum reaches 5e-7 and the blocked ones 3e-7. 1e-5 leaves a 5x
 * margin over the estimate, while a wrong index, a missed edge or a lost beta term gives errors
 * of order 1e-1 or more. */
static const double ERROR_BOUND = 1e-5;

typedef void cpu_gemm_fn(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);

static const struct {
    const char *name;
    cpu_gemm_fn *gemm;
} IMPLEMENTATIONS[] = {
    {"naive", cpu_gemm_naive},
    {"tiled", cpu_gemm_tiled},
    {"blas", cpu_gemm_blas},
};
enum { IMPLEMENTATION_COUNT = sizeof IMPLEMENTATIONS / sizeof IMPLEMENTATIONS[0] };

static const struct {
    int m, n, k;
} SHAPES[] = {
    {1, 1, 1},      {2, 3, 4},       {17, 33, 65},    {1000, 3, 7},
    {7, 1000, 3},   {64, 784, 256},  {513, 257, 129}, {512, 256, 784},
    {9, 2100, 300},   /* wider than the tiled GEMM's panels (NC): its column loop turns */
    {100, 70, 1100},  /* deeper than a panel (KC): C accumulated over K steps; a 6-wide edge */
    {2000, 10, 600},  /* narrow C: computed transposed, several panels in both directions */
    {12, 128, 16},    /* whole register tiles only, no edge anywhere */
    {33, 1024, 70},   /* B's rows 4 KiB apart (unpadded): the tiled GEMM packs it */
};
enum { SHAPE_COUNT = sizeof SHAPES / sizeof SHAPES[0] };

static const int THREAD_COUNTS[] = {1, 2};

/* Implementations whose bits must not depend on the thread count, and the counts compared. */
static const char *const THREAD_INDEPENDENT[] = {"naive", "tiled"};
static const int BIT_CHECK_THREADS[] = {1, 2, 3};

/* A rows×cols matrix of random values with row stride ld = cols + padding, stored in
 * rows + guard_rows rows; every element outside the rows×cols window holds outside_value. */
typedef struct {
    float *values;
    int ld;
    size_t stored; /* floats allocated */
} padded_matrix;

static padded_matrix padded_random(rng *r, int rows, int cols, int padding, int guard_rows,
                                   float outside_value) {
    padded_matrix mat = {NULL, cols + padding, (size_t)(rows + guard_rows) * (cols + padding)};
    mat.values = malloc(sizeof(float) * mat.stored);
    for (size_t at = 0; at < mat.stored; at++) {
        bool inside = at / mat.ld < (size_t)rows && at % mat.ld < (size_t)cols;
        mat.values[at] = inside ? rng_uniform_range(r, -1.0f, 1.0f) : outside_value;
    }
    return mat;
}

/* ‖c − ref‖_F / ‖|product| + |bias|‖_F over the m×n window (absolute when that is zero), bias
 * NULL for none: the error relative to the size of what was added. For a GEMM followed by a bias
 * that is not ‖ref‖: the product and the bias can cancel to almost nothing (seed
 * 1795514329988259700: M = N = K = 1, 1.6e-5 relative to the sum), while each float addition
 * errs by at most 2^-24 of its operands. NaN in c makes the result NaN, which fails every
 * "<= bound" comparison. */
static double error_relative_to_terms(const float *c, const double *ref, const double *product,
                                      const float *bias, int m, int n, int ldc) {
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            size_t at = (size_t)i * ldc + j;
            double d = (double)c[at] - ref[at], size = fabs(product[at]) + (bias ? fabs(bias[j]) : 0.0);
            diff += d * d;
            norm += size * size;
        }
    }
    return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

/* ‖c − ref‖_F / ‖ref‖_F: the same, for a result with nothing added after the product. */
static double relative_error(const float *c, const double *ref, int m, int n, int ldc) {
    return error_relative_to_terms(c, ref, ref, NULL, m, n, ldc);
}

static int count_nan_in_window(const float *c, int m, int n, int ldc) {
    int nans = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) nans += isnan(c[(size_t)i * ldc + j]);
    return nans;
}

/* True when every element of c outside the m×n window has the same bits as in original. */
static bool outside_window_untouched(const float *c, const float *original, size_t stored, int m,
                                     int n, int ldc) {
    for (size_t at = 0; at < stored; at++) {
        bool inside = at / ldc < (size_t)m && at % ldc < (size_t)n;
        if (!inside && memcmp(&c[at], &original[at], sizeof(float)) != 0) return false;
    }
    return true;
}

/* One GEMM problem with its inputs, its initial C and the reference answer. */
typedef struct {
    bool trans_a, trans_b;
    int m, n, k;
    float alpha, beta;
    padded_matrix a, b, c_initial;
    double *reference;
    const char *scaling; /* for messages */
} gemm_case;

static gemm_case make_case(rng *r, bool trans_a, bool trans_b, int m, int n, int k,
                           bool with_beta, bool padded) {
    gemm_case gc = {trans_a, trans_b, m, n, k, 1.0f, 0.0f, {0}, {0}, {0}, NULL,
                    "alpha 1, beta 0, C poisoned with NaN"};
    int pad_a = padded ? 1 + (int)rng_below(r, 7) : 0;
    int pad_b = padded ? 1 + (int)rng_below(r, 7) : 0;
    int pad_c = padded ? 1 + (int)rng_below(r, 7) : 0;
    gc.a = trans_a ? padded_random(r, k, m, pad_a, 0, NAN)
                   : padded_random(r, m, k, pad_a, 0, NAN);
    gc.b = trans_b ? padded_random(r, n, k, pad_b, 0, NAN)
                   : padded_random(r, k, n, pad_b, 0, NAN);
    gc.c_initial = padded_random(r, m, n, pad_c, 1, -0.0f);
    if (with_beta) {
        gc.alpha = 0.5f;
        gc.beta = -1.5f;
        gc.scaling = "alpha 0.5, beta -1.5, C random";
    } else {
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) gc.c_initial.values[(size_t)i * gc.c_initial.ld + j] = NAN;
    }
    gc.reference = malloc(sizeof(double) * (size_t)m * gc.c_initial.ld);
    reference_gemm(trans_a, trans_b, m, n, k, gc.alpha, gc.a.values, gc.a.ld, gc.b.values,
                   gc.b.ld, gc.beta, with_beta ? gc.c_initial.values : NULL, gc.c_initial.ld,
                   gc.reference);
    return gc;
}

static void free_case(gemm_case *gc) {
    free(gc->a.values);
    free(gc->b.values);
    free(gc->c_initial.values);
    free(gc->reference);
}

static void set_threads(int threads) {
    omp_set_num_threads(threads);
    openblas_threads(threads);
}

static void check_implementation(const gemm_case *gc, int which, int threads) {
    const char *impl = IMPLEMENTATIONS[which].name;
    int ldc = gc->c_initial.ld;
    size_t stored = gc->c_initial.stored;
    float *c = malloc(sizeof(float) * stored);
    memcpy(c, gc->c_initial.values, sizeof(float) * stored);

    set_threads(threads);
    IMPLEMENTATIONS[which].gemm(gc->trans_a, gc->trans_b, gc->m, gc->n, gc->k, gc->alpha,
                                gc->a.values, gc->a.ld, gc->b.values, gc->b.ld, gc->beta, c, ldc);

    char what[256];
    snprintf(what, sizeof what,
             "%s trans_a=%d trans_b=%d M=%d N=%d K=%d lda=%d ldb=%d ldc=%d, %s, %d thread(s)", impl,
             gc->trans_a, gc->trans_b, gc->m, gc->n, gc->k, gc->a.ld, gc->b.ld, ldc, gc->scaling,
             threads);
    int nans = count_nan_in_window(c, gc->m, gc->n, ldc);
    CHECK(nans == 0, "%s: %d NaN elements in C", what, nans);
    double error = relative_error(c, gc->reference, gc->m, gc->n, ldc);
    CHECK(error <= ERROR_BOUND, "%s: relative error %.3g > %.1g", what, error, ERROR_BOUND);
    CHECK(outside_window_untouched(c, gc->c_initial.values, stored, gc->m, gc->n, ldc),
          "%s: C changed outside its M×N window", what);
    free(c);
}

static float *copy_of(const float *values, size_t count) {
    float *copy = malloc(sizeof(float) * count);
    memcpy(copy, values, sizeof(float) * count);
    return copy;
}

static size_t bits_differing(const float *x, const float *y, size_t count) {
    size_t differing = 0;
    for (size_t at = 0; at < count; at++) differing += memcmp(&x[at], &y[at], sizeof(float)) != 0;
    return differing;
}

/* C of the case after one run of the implementation named, on the given thread count. */
static float *run_case(const gemm_case *gc, int which, int threads) {
    float *c = copy_of(gc->c_initial.values, gc->c_initial.stored);
    set_threads(threads);
    IMPLEMENTATIONS[which].gemm(gc->trans_a, gc->trans_b, gc->m, gc->n, gc->k, gc->alpha,
                                gc->a.values, gc->a.ld, gc->b.values, gc->b.ld, gc->beta, c,
                                gc->c_initial.ld);
    return c;
}

static int implementation_named(const char *name) {
    for (int which = 0; which < IMPLEMENTATION_COUNT; which++)
        if (strcmp(IMPLEMENTATIONS[which].name, name) == 0) return which;
    return -1;
}

static void check_bits_independent_of_threads(const gemm_case *gc) {
    for (size_t i = 0; i < sizeof THREAD_INDEPENDENT / sizeof THREAD_INDEPENDENT[0]; i++) {
        int which = implementation_named(THREAD_INDEPENDENT[i]);
        float *first = run_case(gc, which, BIT_CHECK_THREADS[0]);
        for (size_t t = 1; t < sizeof BIT_CHECK_THREADS / sizeof BIT_CHECK_THREADS[0]; t++) {
            float *other = run_case(gc, which, BIT_CHECK_THREADS[t]);
            size_t differing = bits_differing(first, other, gc->c_initial.stored);
            CHECK(differing == 0,
                  "%s trans_a=%d trans_b=%d M=%d N=%d K=%d, %s: %zu elements differ between %d "
                  "and %d threads",
                  THREAD_INDEPENDENT[i], gc->trans_a, gc->trans_b, gc->m, gc->n, gc->k,
                  gc->scaling, differing, BIT_CHECK_THREADS[0], BIT_CHECK_THREADS[t]);
            free(other);
        }
        free(first);
    }
}

/* ---- the tiled GEMM's fused epilogue ---- */

/* The epilogues checked: each part alone, bias with ReLU (a hidden layer's forward), and all. */
static const struct {
    bool bias, relu, mask;
} EPILOGUES[] = {
    {true, false, false}, {false, true, false}, {false, false, true},
    {true, true, false},  {true, true, true},
};
enum { EPILOGUE_COUNT = sizeof EPILOGUES / sizeof EPILOGUES[0] };

/* What a ReLU leaves, in an M×N window of row stride ld (NaN outside it, never to be read):
 * zeros of both signs, the smallest positive float and ordinary positive values. */
static float *relu_output(rng *r, int m, int n, int ld, size_t stored) {
    float *mask = malloc(sizeof(float) * stored);
    for (size_t at = 0; at < stored; at++) {
        bool inside = at / ld < (size_t)m && at % ld < (size_t)n;
        float values[4] = {0.0f, -0.0f, 1e-45f, rng_uniform_range(r, 0.001f, 2.0f)};
        mask[at] = inside ? values[rng_below(r, 4)] : NAN;
    }
    return mask;
}

/* The reference with the epilogue applied in double, in backend.h's order. */
static double *reference_with_epilogue(const gemm_case *gc, const float *bias, bool relu,
                                       const float *mask) {
    int ldc = gc->c_initial.ld;
    double *ref = malloc(sizeof(double) * (size_t)gc->m * ldc);
    memcpy(ref, gc->reference, sizeof(double) * (size_t)gc->m * ldc);
    for (int i = 0; i < gc->m; i++) {
        for (int j = 0; j < gc->n; j++) {
            double *value = &ref[(size_t)i * ldc + j];
            if (bias) *value += bias[j];
            if (relu && *value < 0.0) *value = 0.0;
            if (mask && mask[(size_t)i * ldc + j] <= 0.0f) *value = 0.0;
        }
    }
    return ref;
}

static void check_fused_epilogue(rng *r, const gemm_case *gc, int which_epilogue, int threads) {
    int ldc = gc->c_initial.ld;
    size_t stored = gc->c_initial.stored;
    float *bias_values = malloc(sizeof(float) * (size_t)gc->n);
    for (int j = 0; j < gc->n; j++) bias_values[j] = rng_uniform_range(r, -1.0f, 1.0f);
    float *mask_values = relu_output(r, gc->m, gc->n, ldc, stored);
    gemm_epilogue e = {EPILOGUES[which_epilogue].bias ? bias_values : NULL,
                       EPILOGUES[which_epilogue].relu,
                       EPILOGUES[which_epilogue].mask ? mask_values : NULL};

    set_threads(threads);
    float *fused = copy_of(gc->c_initial.values, stored);
    cpu_gemm_tiled_fused(gc->trans_a, gc->trans_b, gc->m, gc->n, gc->k, gc->alpha, gc->a.values,
                         gc->a.ld, gc->b.values, gc->b.ld, gc->beta, fused, ldc, &e);
    float *unfused = copy_of(gc->c_initial.values, stored);
    cpu_gemm_tiled(gc->trans_a, gc->trans_b, gc->m, gc->n, gc->k, gc->alpha, gc->a.values,
                   gc->a.ld, gc->b.values, gc->b.ld, gc->beta, unfused, ldc);
    if (e.bias || e.relu) cpu_bias_activation(unfused, e.bias, gc->m, gc->n, ldc, e.relu);
    if (e.relu_mask) cpu_relu_backward(unfused, e.relu_mask, gc->m, gc->n, ldc);

    char what[256];
    snprintf(what, sizeof what,
             "tiled fused (bias %d, relu %d, mask %d) trans_a=%d trans_b=%d M=%d N=%d K=%d "
             "ldc=%d, %s, %d thread(s)",
             e.bias != NULL, e.relu, e.relu_mask != NULL, gc->trans_a, gc->trans_b, gc->m, gc->n,
             gc->k, ldc, gc->scaling, threads);
    size_t differing = bits_differing(fused, unfused, stored);
    CHECK(differing == 0, "%s: %zu elements differ from the unfused passes", what, differing);
    double *reference = reference_with_epilogue(gc, e.bias, e.relu, e.relu_mask);
    int nans = count_nan_in_window(fused, gc->m, gc->n, ldc);
    CHECK(nans == 0, "%s: %d NaN elements in C", what, nans);
    double error = error_relative_to_terms(fused, reference, gc->reference, e.bias, gc->m, gc->n, ldc);
    CHECK(error <= ERROR_BOUND, "%s: relative error %.3g > %.1g", what, error, ERROR_BOUND);
    free(reference);
    free(fused);
    free(unfused);
    free(bias_values);
    free(mask_values);
}

/* k == 0, or alpha == 0: C = beta * C (zeros for beta 0, even over NaN), then the epilogue;
 * A and B, all NaN here, must not be read. */
static void check_nothing_to_multiply(void) {
    enum { M = 5, N = 70 }; /* N past one register tile */
    float a[M * 3], b[3 * N], bias[N];
    for (int i = 0; i < M * 3; i++) a[i] = NAN;
    for (int i = 0; i < 3 * N; i++) b[i] = NAN;
    for (int j = 0; j < N; j++) bias[j] = (float)(j % 7) - 3.0f;
    const struct {
        int k;
        float alpha, beta;
    } cases[] = {{0, 1.0f, 0.0f}, {0, 1.0f, -1.5f}, {3, 0.0f, 0.0f}, {3, 0.0f, -1.5f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int fused = 0; fused < 3; fused++) { /* naive, tiled, tiled with bias + ReLU */
            float c[M * N], expected[M * N];
            for (int at = 0; at < M * N; at++) {
                c[at] = cases[i].beta == 0.0f ? NAN : (float)(at % 11) - 5.0f;
                expected[at] = cases[i].beta == 0.0f ? 0.0f : cases[i].beta * c[at];
                if (fused == 2) expected[at] += bias[at % N];
                if (fused == 2 && expected[at] < 0.0f) expected[at] = 0.0f;
            }
            gemm_epilogue bias_relu = {bias, true, NULL};
            if (fused == 0)
                cpu_gemm_naive(false, false, M, N, cases[i].k, cases[i].alpha, a, 3, b, N,
                               cases[i].beta, c, N);
            else
                cpu_gemm_tiled_fused(false, false, M, N, cases[i].k, cases[i].alpha, a, 3, b, N,
                                     cases[i].beta, c, N, fused == 2 ? &bias_relu : NULL);
            int wrong = 0;
            for (int at = 0; at < M * N; at++) wrong += !(c[at] == expected[at]);
            CHECK(wrong == 0, "%s, k=%d alpha=%g beta=%g: %d elements of C wrong",
                  fused == 0 ? "naive" : fused == 1 ? "tiled" : "tiled bias+relu", cases[i].k,
                  cases[i].alpha, cases[i].beta, wrong);
        }
    }
}

/* The comparison must be able to fail: a correct result with one element off by 1e-3 of the
 * norm, or one NaN, has to be reported above the bound. */
static void check_error_measure_can_fail(rng *r) {
    gemm_case gc = make_case(r, false, false, 17, 33, 65, false, false); /* unpadded: ldc == n */
    size_t count = (size_t)gc.m * gc.n;
    float *c = malloc(sizeof(float) * count);
    double norm = 0.0;
    for (size_t at = 0; at < count; at++) {
        c[at] = (float)gc.reference[at];
        norm += gc.reference[at] * gc.reference[at];
    }
    CHECK(relative_error(c, gc.reference, gc.m, gc.n, gc.n) <= ERROR_BOUND,
          "self-check: the reference rounded to float should pass");

    size_t victim = 5 * (size_t)gc.n + 7;
    c[victim] += (float)(1e-3 * sqrt(norm));
    CHECK(relative_error(c, gc.reference, gc.m, gc.n, gc.n) > ERROR_BOUND,
          "self-check: one element off by 1e-3 of the norm was not detected");

    c[victim] = NAN;
    CHECK(!(relative_error(c, gc.reference, gc.m, gc.n, gc.n) <= ERROR_BOUND),
          "self-check: a NaN element was not detected by the error measure");
    CHECK(count_nan_in_window(c, gc.m, gc.n, gc.n) == 1, "self-check: the NaN was not counted");
    free(c);
    free_case(&gc);
}

/* OpenMP may give a region fewer threads than omp_get_max_threads() says (OMP_DYNAMIC,
 * OMP_THREAD_LIMIT, nesting): here two threads of an outer region each call the tiled GEMM, whose
 * own region then runs on one thread while 4 are asked for. Every tile must still be computed,
 * to the bits of a run on one thread. */
static void check_smaller_team(rng *r) {
    gemm_case gc = make_case(r, false, false, 512, 256, 784, false, false);
    int tiled = implementation_named("tiled");
    float *alone = run_case(&gc, tiled, 1);
    float *in_team[2] = {copy_of(gc.c_initial.values, gc.c_initial.stored),
                         copy_of(gc.c_initial.values, gc.c_initial.stored)};
    set_threads(4);
    int levels = omp_get_max_active_levels();
    omp_set_max_active_levels(1);
#pragma omp parallel num_threads(2)
    cpu_gemm_tiled(gc.trans_a, gc.trans_b, gc.m, gc.n, gc.k, gc.alpha, gc.a.values, gc.a.ld,
                   gc.b.values, gc.b.ld, gc.beta, in_team[omp_get_thread_num()], gc.c_initial.ld);
    omp_set_max_active_levels(levels);
    for (int t = 0; t < 2; t++) {
        size_t differing = bits_differing(alone, in_team[t], gc.c_initial.stored);
        CHECK(differing == 0, "tiled from inside a parallel region (thread %d): %zu elements "
              "differ from a run on one thread", t, differing);
        free(in_team[t]);
    }
    free(alone);
    free_case(&gc);
}

int main(void) {
    rng r = rng_create(test_seed("test_cpu_gemm"), 0);
    check_error_measure_can_fail(&r);
    check_nothing_to_multiply();
    check_smaller_team(&r);

    for (int s = 0; s < SHAPE_COUNT; s++) {
        for (int transposes = 0; transposes < 4; transposes++) {
            bool trans_a = transposes & 1, trans_b = transposes & 2;
            bool padded = (s + transposes) % 2 == 1; /* each shape gets both, across transposes */
            for (int with_beta = 0; with_beta < 2; with_beta++) {
                gemm_case gc = make_case(&r, trans_a, trans_b, SHAPES[s].m, SHAPES[s].n,
                                         SHAPES[s].k, with_beta, padded);
                for (int which = 0; which < IMPLEMENTATION_COUNT; which++)
                    for (size_t t = 0; t < sizeof THREAD_COUNTS / sizeof THREAD_COUNTS[0]; t++)
                        check_implementation(&gc, which, THREAD_COUNTS[t]);
                check_bits_independent_of_threads(&gc);
                for (int e = 0; e < EPILOGUE_COUNT; e++)
                    check_fused_epilogue(&r, &gc, e, 1 + (s + transposes + e) % 2);
                free_case(&gc);
            }
        }
    }
    return test_exit_status("test_cpu_gemm");
}

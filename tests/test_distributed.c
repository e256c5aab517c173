/* Data parallelism, run under mpirun -np N by mpi_test.sh. Each rank trains with a backend joined
 * to the ranks (its share of every batch, the gradients summed by MPI on the CPU, NCCL on the GPU)
 * and, alone, with a backend of its own (every row, no communication); the two must agree within
 * float summation error after one step and after an epoch whose last batch is short, shorter
 * than N included (some ranks then have no rows), with SGD and Adam, for two implementations (on
 * the GPU each with steps queued directly and recorded as CUDA graphs, the all-reduce inside).
 * With one rank they must agree to the bit, and every rank must hold the same bits as rank 0.
 * Where the backend can start each layer's all-reduce in the backward pass (the GPU's), doing so
 * must give the bits of the whole gradient's all-reduce after it; a sharded update (each rank
 * sums and updates its shard, then the shards are gathered) must give the bits of the whole
 * update where the sums' order is the same (check_sharded).
 * On the GPU this runs with each all-reduce (the p2p one where the GPUs can read each other's
 * memory, NCCL's where built), and the two all-reduces, and their reduce-scatters and
 * all-gathers, are compared on their own: on sizes from 1 float to past the two-shot threshold,
 * queued and recorded (replayed with new data), each must give the float sum in rank order of
 * every rank's data (p2p: to the bit; NCCL: to the bit on 2 ranks, where the order does not
 * matter, within float summation error on more), or every rank's shard.
 *
 * Usage: test_distributed [cpu|gpu]   (gpu: one GPU per rank; exits 77 without a GPU)
 *        test_distributed allreduce   the GPU all-reduces and their halves alone (for
 *                                     compute-sanitizer: no training)
 *        test_distributed exit RANK   that rank exits with status 1 while the others wait in an
 *                                     all-reduce: distributed.c's exit hook must end the job
 *        test_distributed stall RANK  GPU, p2p all-reduce, MLP_P2P_TIMEOUT_S=2: that rank stops
 *                                     calling the all-reduce; the others must give up on it and
 *                                     end the job with a message */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/backend_select.h"
#include "check.h"
#include "cpu/cpu_backend.h" /* cpu_set_threads */
#include "core/distributed.h"
#include "core/rng.h"
#include "model_checks.h"

/* The ranks add their shares' gradients where one rank adds all rows at once: a different order
 * of float additions, carried through a few updates. With SGD that measured at most 1.3e-8 (24
 * runs of 2 and 4 ranks on the CPU). Adam divides each gradient by its own magnitude, so an
 * element that sums to nearly zero may move by the whole learning rate either way: up to 7e-6
 * measured. A wrong share or scale is off by 1e-2 or more. */
#define SGD_ONE_STEP_BOUND 1e-6
#define SGD_EPOCH_BOUND 1e-5
#define ADAM_BOUND 1e-4

/* Global batch 48 splits evenly across 1, 2, 3, 4, 6 and 8 ranks. */
enum { BATCH = 48 };

typedef struct {
    const char *device, *impl;
    bool record_steps;
    bool overlap_all_reduce; /* each layer's all-reduce started in the backward pass */
    bool shard_update;       /* each rank sums and updates its shard, then the shards gather */
    bool regularized;        /* with weight decay and label smoothing */
    optimizer_kind optimizer;
    int samples; /* BATCH: one step; else steps with a short last batch */
    uint64_t seed;
    bool profile; /* --profile: among ranks, a recorded step in parts */
} case_spec;

/* The parameters after `epochs` epochs (0: one) of the 64-32-10 model on c->samples synthetic
 * images. */
static float *train(backend *be, const case_spec *c, size_t *count, int epochs,
                    synthetic_result *result) {
    synthetic_run run = {.optimizer = c->optimizer, .batch = BATCH, .seed = c->seed, .hidden = 32,
                         .record_steps = c->record_steps, .samples = c->samples, .epochs = epochs,
                         .overlap_all_reduce = c->overlap_all_reduce,
                         .shard_update = c->shard_update, .regularized = c->regularized,
                         .profile = c->profile};
    synthetic_result ignored;
    return train_synthetic(be, &run, count, result ? result : &ignored);
}

/* Agreeing with one rank is not enough (a trainer that learns nothing agrees too): the ranks
 * together must learn, over 3 epochs of 20 batches, what one rank alone learns. */
static void check_learns(backend *joined, const char *device, const char *impl, uint64_t seed) {
    case_spec c = {.device = device, .impl = impl, .optimizer = OPTIMIZER_SGD,
                   .samples = 20 * BATCH, .seed = seed};
    synthetic_result result;
    size_t n;
    free(train(joined, &c, &n, 3, &result));
    CHECK(result.test_loss < 0.8 * result.initial_test_loss,
          "rank %d of %d, %s %s: test loss %.4g from %.4g after 3 epochs: it did not learn",
          distributed_rank(), distributed_ranks(), device, impl, result.test_loss,
          result.initial_test_loss);
    if (distributed_rank() == 0)
        printf("%d ranks, %s %s: test loss %.4g from %.4g after 3 epochs\n", distributed_ranks(),
               device, impl, result.test_loss, result.initial_test_loss);
}

/* Rank 0's parameters, to compare every rank's bits with. */
static bool same_as_rank_0(const float *params, size_t count) {
    float *rank_0 = malloc(count * sizeof(float));
    memcpy(rank_0, params, count * sizeof(float));
    distributed_broadcast(rank_0, count * sizeof(float));
    bool same = memcmp(rank_0, params, count * sizeof(float)) == 0;
    free(rank_0);
    return same;
}

static const char *const allreduce_names[] = {"auto", "nccl", "p2p"};

static backend *create(const char *device, const char *impl, bool joined, allreduce_choice choice) {
    char err[256];
    backend *be = backend_create(device, impl, PRECISION_FP32, err, sizeof err);
    if (!be || (joined && !backend_join_ranks(be, choice, err, sizeof err))) {
        fprintf(stderr, "test_distributed: %s\n", err);
        exit(1);
    }
    return be;
}

static double bound_for(const case_spec *c) {
    if (distributed_ranks() == 1) return 0.0;
    if (c->optimizer == OPTIMIZER_ADAM) return ADAM_BOUND;
    return c->samples == BATCH ? SGD_ONE_STEP_BOUND : SGD_EPOCH_BOUND;
}

/* ‖shared − reference‖ / ‖reference‖, reference being the run alone; among ranks, where it is
 * past bound, the least such difference from the device's implementations each trained alone
 * (one rank must give the bits of its own implementation's run alone).
 * Each is a correct trainer with its own order of sums, and a run that passes within rounding of
 * a ReLU's kink has more than one correct outcome: on seed 1795681615850523046 (2 CPU ranks,
 * tiled, Adam, 151 samples) hidden unit 10 flips, and the ranks end 4.5e-4 from tiled alone and
 * 1.7e-8 from naive alone (0 of 240 Adam cases on 40 other seeds past 1.3e-5). A wrong share or
 * scale is far from all three. */
static double nearest_alone(const case_spec *c, const float *shared, const float *reference,
                            size_t n, double bound) {
    static const char *const impls[] = {"blas", "tiled", "naive"};
    double nearest = relative_difference(shared, reference, n);
    for (int i = 0; i < 3 && distributed_ranks() > 1 && nearest > bound; i++) {
        backend *other = create(c->device, impls[i], false, ALLREDUCE_AUTO);
        size_t count;
        float *params = train(other, c, &count, 0, NULL);
        double difference = count == n ? relative_difference(shared, params, n) : INFINITY;
        if (difference < nearest) nearest = difference;
        free(params);
        other->destroy(other);
    }
    return nearest;
}

/* The update shared out among the ranks (each sums and updates its shard, then they gather the
 * shards) against every rank updating all of it (whole), with steps as c says and with
 * --profile's (recorded in four parts where they are recorded): each element is summed over the
 * same ranks, so the bits are the same where the order of the sum is: on 2 ranks or fewer
 * (a + b = b + a), and always with the p2p all-reduce (rank order). Elsewhere MPI's or NCCL's
 * reduce-scatter may add in another order than its all-reduce: then within bound_for, of the
 * whole update or of the nearest implementation alone (nearest_alone's ReLU kinks). */
static void check_sharded(backend *joined, const case_spec *c, const float *whole, size_t n,
                          const char *what) {
    int rank = distributed_rank(), ranks = distributed_ranks();
    bool same_order = ranks <= 2 || strstr(joined->all_reduce_name, "p2p") != NULL;
    for (int profile = 0; profile <= 1; profile++) {
        case_spec sharded = *c;
        sharded.shard_update = true;
        sharded.profile = profile;
        synthetic_result result;
        size_t m;
        float *params = train(joined, &sharded, &m, 0, &result);
        CHECK(result.update_sharded, "rank %d of %d, %s: the update was not sharded", rank, ranks,
              what);
        double difference = m != n       ? INFINITY
                            : same_order ? relative_difference(params, whole, n)
                                         : nearest_alone(c, params, whole, n, bound_for(c));
        CHECK(m == n && (same_order ? difference == 0.0 : difference <= bound_for(c)),
              "rank %d of %d, %s%s%s: the sharded update's parameters differ from the whole "
              "update's by %.3g (%s)", rank, ranks, what, c->regularized ? ", regularized" : "",
              profile ? ", --profile" : "", difference,
              same_order ? "the same order of sums: they must be the same bits" : "bound_for");
        CHECK(same_as_rank_0(params, n), "rank %d of %d, %s, sharded: not the bits of rank 0",
              rank, ranks, what);
        free(params);
    }
}

/* alone: a backend of this process only; joined: one of the ranks. */
static void check_case(backend *alone, backend *joined, const case_spec *c) {
    int rank = distributed_rank(), ranks = distributed_ranks();
    size_t n, m;
    float *reference = train(alone, c, &n, 0, NULL);
    float *shared = train(joined, c, &m, 0, NULL);
    double bound = bound_for(c);
    double difference = m == n ? nearest_alone(c, shared, reference, n, bound) : INFINITY;
    char what[160];
    snprintf(what, sizeof what, "%s %s%s (%s), %s, %d samples (%s)", c->device, c->impl,
             c->record_steps ? " recorded" : "", joined->all_reduce_name,
             optimizer_name(c->optimizer), c->samples,
             c->samples == BATCH ? "one step" : "one epoch");
    CHECK(m == n && difference <= bound,
          "rank %d of %d, %s: parameters differ from the nearest run alone by %.3g (bound %.0e)",
          rank, ranks,
          what, difference, bound);
    CHECK(same_as_rank_0(shared, n), "rank %d of %d, %s: not the bits of rank 0", rank, ranks, what);
    if (joined->all_reduce_start) {
        /* each element is summed over the same ranks in the same order either way */
        case_spec overlapped = *c;
        overlapped.overlap_all_reduce = true;
        synthetic_result result;
        float *each_layer = train(joined, &overlapped, &m, 0, &result);
        CHECK(result.all_reduces_early == 1, "rank %d of %d, %s: %d all-reduces started before the "
              "backward pass's end, not 1 (the output layer's)", rank, ranks, what,
              result.all_reduces_early);
        CHECK(m == n && memcmp(each_layer, shared, n * sizeof(float)) == 0,
              "rank %d of %d, %s: each layer's all-reduce beside the backward pass gave other bits "
              "than the whole gradient's after it", rank, ranks, what);
        free(each_layer);
    }

    if (joined->reduce_scatter_sum) {
        check_sharded(joined, c, shared, n, what);
        case_spec regularized = *c;
        regularized.regularized = true;
        float *whole = train(joined, &regularized, &m, 0, NULL);
        check_sharded(joined, &regularized, whole, m, what);
        free(whole);
    }

    if (rank == 0) printf("%d ranks, %s: relative difference %.3g\n", ranks, what, difference);
    free(reference);
    free(shared);
}

static void check_implementation(const char *device, const char *impl, uint64_t seed,
                                 allreduce_choice choice) {
    backend *alone = create(device, impl, false, choice);
    backend *joined = create(device, impl, true, choice);
    /* one step; 3 full batches and 7 rows; 3 full batches and 1 row (fewer rows than ranks) */
    const int samples[] = {BATCH, 3 * BATCH + 7, 3 * BATCH + 1};
    bool can_record = alone->record_begin != NULL;
    for (int recorded = 0; recorded <= (can_record ? 1 : 0); recorded++)
        for (int kind = OPTIMIZER_SGD; kind <= OPTIMIZER_ADAM; kind++)
            for (int s = 0; s < 3; s++)
                check_case(alone, joined,
                           &(case_spec){.device = device, .impl = impl, .record_steps = recorded,
                                        .optimizer = (optimizer_kind)kind, .samples = samples[s],
                                        .seed = seed + s});
    check_learns(joined, device, impl, seed);
    alone->destroy(alone);
    joined->destroy(joined);
}

/* Rank r's data for an all-reduce of n floats, the rep-th time: uniform in [-1, 1). */
static void fill(float *x, size_t n, uint64_t seed, int rank, int rep) {
    rng r = rng_create(seed, 7000u + 100u * (uint64_t)rep + (uint64_t)rank);
    for (size_t i = 0; i < n; i++) x[i] = rng_uniform_range(&r, -1.0f, 1.0f);
}

/* The collectives a GPU rank's backend runs: the all-reduce, and its two halves for a sharded
 * update. */
typedef enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, COLLECTIVES } collective;
static const char *const collective_names[] = {"all-reduce", "reduce-scatter", "all-gather"};

static void queue_collective(backend *be, collective c, float *device, size_t n) {
    if (c == ALL_REDUCE) be->all_reduce_sum(be, device, n);
    else if (c == REDUCE_SCATTER) be->reduce_scatter_sum(be, device, n);
    else be->all_gather(be, device, n);
}

/* Rank r's first element of its shard of n floats (r = ranks: n). */
static size_t shard_first(size_t n, int rank) { return shard_begin(n, rank, distributed_ranks()); }

/* This rank's data before collective c: every element filled, but for an all-gather only its
 * shard, the rest NaN (what it receives). */
static void fill_before(float *x, size_t n, collective c, uint64_t seed, int rep) {
    int rank = distributed_rank();
    fill(x, n, seed, rank, rep);
    if (c != ALL_GATHER) return;
    for (size_t i = 0; i < n; i++)
        if (i < shard_first(n, rank) || i >= shard_first(n, rank + 1)) x[i] = NAN;
}

/* What collective c must give in [*lo, *hi) (the rest is left as it may be): the all-reduce and
 * this rank's shard of the reduce-scatter the float sum in rank order (want) and in double
 * (exact, for its bound); the all-gather every rank's shard of its data. */
static void expected(float *want, double *exact, size_t n, collective c, uint64_t seed, int rep,
                     size_t *lo, size_t *hi) {
    int rank = distributed_rank();
    *lo = c == REDUCE_SCATTER ? shard_first(n, rank) : 0;
    *hi = c == REDUCE_SCATTER ? shard_first(n, rank + 1) : n;
    float *x = malloc(n * sizeof(float));
    for (int r = 0; r < distributed_ranks(); r++) {
        fill(x, n, seed, r, rep);
        for (size_t i = 0; i < n; i++) {
            bool owner = i >= shard_first(n, r) && i < shard_first(n, r + 1);
            if (c == ALL_GATHER) {
                if (owner) want[i] = x[i], exact[i] = x[i];
                continue;
            }
            want[i] = r == 0 ? x[i] : want[i] + x[i];
            exact[i] = r == 0 ? x[i] : exact[i] + x[i];
        }
    }
    free(x);
}

/* Collective c of be on n floats, queued (rep 0) or replayed from a recording (reps 1..3; queued
 * again where be cannot record), with new data each time, against what it must give. */
static void check_collective(backend *be, collective c, size_t n, uint64_t seed, bool exact_order) {
    float *device = be->alloc(be, n * sizeof(float));
    float *x = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    double *exact = malloc(n * sizeof(double));
    recording *recorded = NULL;
    const char *name = collective_names[c];
    for (int rep = 0; rep < 4; rep++) {
        fill_before(x, n, c, seed, rep);
        be->upload(be, device, x, n * sizeof(float));
        if (rep == 0 || !be->record_begin) {
            queue_collective(be, c, device, n);
        } else {
            if (!recorded) {
                be->record_begin(be);
                queue_collective(be, c, device, n);
                recorded = be->record_end(be);
            }
            be->replay(be, recorded);
        }
        for (size_t i = 0; i < n; i++) x[i] = NAN;
        be->download(be, x, device, n * sizeof(float));
        size_t lo, hi;
        expected(want, exact, n, c, seed, rep, &lo, &hi);
        size_t differing = 0, first = n;
        double worst = 0.0;
        for (size_t i = lo; i < hi; i++) {
            if (memcmp(&x[i], &want[i], sizeof(float)) != 0 && differing++ == 0) first = i;
            double error = fabs(x[i] - exact[i]) / (fabs(exact[i]) + 1e-3);
            if (!(error <= worst)) worst = error; /* NaN too */
        }
        const char *how = recorded ? "replayed" : "queued";
        if (exact_order || c == ALL_GATHER)
            CHECK(differing == 0,
                  "rank %d of %d, %s's %s, %zu floats, %s: %zu of [%zu, %zu) differ from %s, the "
                  "first at %zu (%.9g, wanted %.9g)",
                  distributed_rank(), distributed_ranks(), be->all_reduce_name, name, n, how,
                  differing, lo, hi,
                  c == ALL_GATHER ? "the ranks' shards" : "the sum in rank order",
                  first, first < n ? x[first] : 0.0, first < n ? want[first] : 0.0);
        /* the sum of R floats of magnitude up to 1, in float: error up to R units of 2^-24 */
        double bound = distributed_ranks() * 6e-8 * 4;
        CHECK(worst <= bound, "rank %d of %d, %s's %s, %zu floats, %s: error %.3g over %.1e",
              distributed_rank(), distributed_ranks(), be->all_reduce_name, name, n, how, worst,
              bound);
    }
    if (distributed_rank() == 0)
        printf("%d ranks, %s's %s, %zu floats: %s give %s%s\n", distributed_ranks(),
               be->all_reduce_name, name, n, recorded ? "queued and 3 replays" : "queued 4 times",
               c == ALL_GATHER ? "every rank's shard" : "the sum in rank order",
               exact_order || c == ALL_GATHER ? ", bit for bit" : "");
    if (recorded) be->recording_destroy(be, recorded);
    be->release(be, device);
    free(x);
    free(want);
    free(exact);
}

/* The CPU ranks' collectives (MPI) on odd sizes, fewer floats than ranks included: each rank's
 * shard, empty ones too. MPI's sums are in rank order on 2 ranks (a + b = b + a). */
static void check_cpu_collectives(uint64_t seed) {
    const size_t sizes[] = {203530, 1001, 17, 3, 1};
    backend *be = create("cpu", "tiled", true, ALLREDUCE_AUTO);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int k = ALL_REDUCE; k < COLLECTIVES; k++)
            check_collective(be, (collective)k, sizes[i], seed + i, distributed_ranks() <= 2);
    be->destroy(be);
}

/* Each GPU all-reduce, and its halves, on odd sizes, largest first (the p2p one sizes its buffers
 * at its first call): one float, past the vector width, a gradient's size, past the two-shot
 * threshold. */
static void check_all_reduces(uint64_t seed) {
    const size_t sizes[] = {1000003, 262147, 203530, 1001, 17, 2, 1};
    for (int c = ALLREDUCE_NCCL; c <= ALLREDUCE_P2P; c++) {
#ifndef MLP_HAVE_NCCL
        if (c == ALLREDUCE_NCCL) continue;
#endif
        char err[256];
        backend *be = backend_create("gpu", "tiled", PRECISION_FP32, err, sizeof err);
        if (!backend_join_ranks(be, (allreduce_choice)c, err, sizeof err)) {
            if (distributed_rank() == 0) printf("not tested: %s\n", err);
            be->destroy(be);
            continue;
        }
        /* NCCL's order is its own: the same as rank order on 2 ranks, where a + b == b + a */
        bool exact_order = c == ALLREDUCE_P2P || distributed_ranks() <= 2;
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            for (int k = ALL_REDUCE; k < COLLECTIVES; k++)
                check_collective(be, (collective)k, sizes[i], seed + i, exact_order);
        be->destroy(be);
    }
}

/* A rank stops taking part in the p2p all-reduce (it sleeps): the others must give up on it
 * after MLP_P2P_TIMEOUT_S (2 s here) and end the job with a message. */
static int stall_on_rank(int stalling) {
    setenv("MLP_P2P_TIMEOUT_S", "2", 1);
    char err[256];
    backend *be = backend_create("gpu", "tiled", PRECISION_FP32, err, sizeof err);
    if (!be || !backend_join_ranks(be, ALLREDUCE_P2P, err, sizeof err)) {
        fprintf(stderr, "test_distributed: %s\n", err);
        return distributed_finish(1);
    }
    float *x = be->alloc(be, 1000 * sizeof(float));
    be->all_reduce_sum(be, x, 1000); /* sets up: every rank */
    be->synchronize(be);
    if (distributed_rank() == stalling) {
        fprintf(stderr, "test_distributed: rank %d stops, on purpose\n", stalling);
        sleep(300);
    }
    be->all_reduce_sum(be, x, 1000);
    be->synchronize(be); /* exits here, with the message */
    fprintf(stderr, "test_distributed: FAIL: the all-reduce completed without rank %d\n", stalling);
    return distributed_finish(1);
}

/* One rank leaves with an error while the others wait for it in an all-reduce. */
static int exit_on_rank(int failing) {
    if (distributed_rank() == failing) {
        fprintf(stderr, "test_distributed: rank %d exits with status 1, on purpose\n", failing);
        exit(1);
    }
    float x = 1.0f;
    distributed_sum(&x, 1);
    fprintf(stderr, "test_distributed: FAIL: the all-reduce completed without rank %d\n", failing);
    return distributed_finish(1);
}

int main(int argc, char **argv) {
    distributed_start(&argc, &argv);
    if (argc == 3 && strcmp(argv[1], "exit") == 0) return exit_on_rank(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "stall") == 0) return stall_on_rank(atoi(argv[2]));
    bool all_reduces_only = argc > 1 && strcmp(argv[1], "allreduce") == 0;
    const char *device = all_reduces_only ? "gpu" : argc > 1 ? argv[1] : "cpu";
    char why[256] = "run it under mpirun (mpi_test.sh does)";
    device_presence gpu = strcmp(device, "gpu") == 0 ? gpu_presence(why, sizeof why) : DEVICE_PRESENT;
    if (gpu == DEVICE_BROKEN) {
        fprintf(stderr, "test_distributed: FAIL: a GPU is here but unusable: %s\n", why);
        return distributed_finish(1);
    }
    if (!distributed_launched() || gpu == DEVICE_ABSENT) {
        fprintf(stderr, "test_distributed: skipped: %s\n", why);
        distributed_finish(0);
        return TEST_SKIP_STATUS;
    }
    cpu_set_threads(1, "tiled");
    uint64_t seed = distributed_rank() == 0 ? test_seed("test_distributed") : 0;
    distributed_broadcast(&seed, sizeof seed); /* every rank trains on the same data */
    if (all_reduces_only) {
        check_all_reduces(seed);
    } else if (strcmp(device, "gpu") == 0) {
        check_all_reduces(seed);
        for (int c = ALLREDUCE_AUTO; c <= ALLREDUCE_NCCL; c++) { /* auto: p2p where it can run */
#ifndef MLP_HAVE_NCCL
            if (c == ALLREDUCE_NCCL) continue;
#endif
            if (distributed_rank() == 0) printf("--allreduce %s\n", allreduce_names[c]);
            check_implementation(device, "blas", seed, (allreduce_choice)c);
            check_implementation(device, "tiled", seed, (allreduce_choice)c);
        }
    } else {
        check_cpu_collectives(seed);
        check_implementation(device, "blas", seed, ALLREDUCE_AUTO);
        check_implementation(device, "tiled", seed, ALLREDUCE_AUTO);
    }
    /* The verdict, the same on every rank: the failures summed over the ranks. Agreed on, it
     * needs no MPI_Abort: every rank finishes cleanly, then exits with it. */
    float failures = (float)test_failures;
    distributed_sum(&failures, 1);
    test_exit_status("test_distributed");
    distributed_finish(0);
    return failures > 0 ? 1 : 0;
}

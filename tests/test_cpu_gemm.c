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
 * zero-padded lane is caught too. */
#include "check.h"
#include "cpu_gemm.h"
#include "openblas_gemm.h"
#include "rng.h"

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
    {9, 2100, 300}, /* wider than the tiled GEMM's NC and deeper than its KC: all its loops turn */
};
enum { SHAPE_COUNT = sizeof SHAPES / sizeof SHAPES[0] };

static const int THREAD_COUNTS[] = {1, 2};

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

/* ‖c - ref‖_F / ‖ref‖_F over the m×n window (absolute when ref is all zero); NaN in c makes
 * the result NaN, which fails every "<= bound" comparison. */
static double relative_error(const float *c, const double *ref, int m, int n, int ldc) {
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            size_t at = (size_t)i * ldc + j;
            double d = (double)c[at] - ref[at];
            diff += d * d;
            norm += ref[at] * ref[at];
        }
    }
    return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
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

int main(void) {
    rng r = rng_create(test_seed("test_cpu_gemm"), 0);
    check_error_measure_can_fail(&r);

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
                free_case(&gc);
            }
        }
    }
    return test_exit_status("test_cpu_gemm");
}

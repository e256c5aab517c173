/* Tests for every operation of cpu_ops.h (and the tiled implementation's output layer,
 * cpu_output_layer.h) against references: plain loops for the
 * exact float operations (bias, ReLU, gather), double precision for the softmax and the sums,
 * hand-computed numbers for the optimizers. Operations with an OpenMP path run with 1 and 2
 * threads, on shapes large enough to take it (cpu_ops.c goes parallel from 32768 elements).
 * Exact comparisons rely on ISO C mode (-std=c11), where the compiler does not fuse a*b+c. */
#include "check.h"
#include "cpu/cpu_ops.h"
#include "cpu/cpu_output_layer.h"
#include "output_layer_reference.h"
#include "core/rng.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <string.h>

static const int THREAD_COUNTS[] = {1, 2};
static const int ROW_COUNTS[] = {1, 17, 1000};
static const int COLUMN_COUNTS[] = {1, 10, 33, 256};
static const int CLASS_COUNTS[] = {10, 3, 37};

#define COUNT_OF(array) (sizeof(array) / sizeof(array[0]))

/* Half a unit in the last place of 1.0f: the relative error of one float rounding. */
#define FLOAT_ROUNDING (FLT_EPSILON / 2)

static void *allocate(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static float *random_floats(rng *r, size_t n, float lo, float hi) {
    float *x = allocate(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = rng_uniform_range(r, lo, hi);
    return x;
}

static float *copy_floats(const float *x, size_t n) {
    float *copy = allocate(n * sizeof(float));
    memcpy(copy, x, n * sizeof(float));
    return copy;
}

static void fill_floats(float *x, size_t n, float value) {
    for (size_t i = 0; i < n; i++) x[i] = value;
}

/* How many of the n floats differ in their bits. */
static size_t bit_differences(const float *a, const float *b, size_t n) {
    size_t differences = 0;
    for (size_t i = 0; i < n; i++) differences += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return differences;
}

/* |got - expected| <= tolerance * magnitude; magnitude is the size of the terms that made
 * expected, so a result near zero after cancellation is held to the rounding of its terms. */
static bool within(double got, double expected, double tolerance, double magnitude) {
    return fabs(got - expected) <= tolerance * magnitude;
}

/* ---- bias + activation, ReLU backward: exact ---- */

static void check_bias_activation(rng *r, int threads, int rows, int cols, bool relu) {
    size_t count = (size_t)rows * cols;
    float *z = random_floats(r, count, -1.0f, 1.0f);
    float *bias = random_floats(r, (size_t)cols, -1.0f, 1.0f);
    float *expected = copy_floats(z, count);
    for (int row = 0; row < rows; row++) {
        for (int col = 0; col < cols; col++) {
            float *value = &expected[(size_t)row * cols + col];
            *value += bias[col];
            if (relu && *value < 0.0f) *value = 0.0f;
        }
    }
    cpu_bias_activation(z, bias, rows, cols, cols, relu);
    CHECK(bit_differences(z, expected, count) == 0,
          "bias_activation %dx%d relu=%d threads=%d: %zu of %zu values differ", rows, cols, relu,
          threads, bit_differences(z, expected, count), count);
    free(z);
    free(bias);
    free(expected);
}

/* Activations as a ReLU leaves them: zeros of both signs, the smallest positive float, and
 * ordinary positive values. */
static float *random_activations(rng *r, size_t count) {
    float *activation = allocate(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        switch (rng_below(r, 4)) {
        case 0: activation[i] = 0.0f; break;
        case 1: activation[i] = -0.0f; break;
        case 2: activation[i] = FLT_TRUE_MIN; break;
        default: activation[i] = rng_uniform_range(r, 0.001f, 2.0f); break;
        }
    }
    return activation;
}

static void check_relu_backward(rng *r, int threads, int rows, int cols) {
    size_t count = (size_t)rows * cols;
    float *grad = random_floats(r, count, -1.0f, 1.0f);
    float *activation = random_activations(r, count);
    float *expected = allocate(count * sizeof(float));
    for (size_t i = 0; i < count; i++) expected[i] = activation[i] > 0.0f ? grad[i] : 0.0f;
    cpu_relu_backward(grad, activation, rows, cols, cols);
    CHECK(bit_differences(grad, expected, count) == 0,
          "relu_backward %dx%d threads=%d: %zu values differ", rows, cols, threads,
          bit_differences(grad, expected, count));
    free(grad);
    free(activation);
    free(expected);
}

static void test_elementwise(rng *r) {
    for (size_t t = 0; t < COUNT_OF(THREAD_COUNTS); t++) {
        omp_set_num_threads(THREAD_COUNTS[t]);
        for (size_t i = 0; i < COUNT_OF(ROW_COUNTS); i++) {
            for (size_t j = 0; j < COUNT_OF(COLUMN_COUNTS); j++) {
                int rows = ROW_COUNTS[i], cols = COLUMN_COUNTS[j];
                check_bias_activation(r, THREAD_COUNTS[t], rows, cols, false);
                check_bias_activation(r, THREAD_COUNTS[t], rows, cols, true);
                check_relu_backward(r, THREAD_COUNTS[t], rows, cols);
            }
        }
    }
}

/* ---- softmax cross-entropy: against double precision ---- */

/* Bounds for the float implementation against the double reference. It sums at most 37
 * exponentials in float and takes expf/logf of the result: the relative error of the sum is
 * at most about (classes + 4) float roundings, 2.5e-6 for 37 classes, and the loss and every
 * probability inherit about that much (the loss as an absolute error, being a log). 1e-5 leaves
 * a factor of 4 over that worst case (observed errors are below 2e-6). A gradient entry is
 * probability - one-hot, so it also carries the rounding of p - 1 and of the scaling: at most
 * 2^-23 absolute, below SOFTMAX_GRAD_ABSOLUTE. */
#define SOFTMAX_LOSS_TOLERANCE 1e-5      /* of max(1, |loss|) */
#define SOFTMAX_GRAD_RELATIVE 1e-5       /* of the probability */
#define SOFTMAX_GRAD_ABSOLUTE 2e-7       /* p - 1 and the scaling */
#define SOFTMAX_ROW_SUM_TOLERANCE 1e-5   /* sum of a row's gradient, of |grad_scale| */
/* A row's largest logit minus its smallest: what smoothed_loss_rounding's bound scales with. */
static double logit_range(const float *logits, int classes) {
    float lo = logits[0], hi = logits[0];
    for (int c = 1; c < classes; c++) lo = fminf(lo, logits[c]), hi = fmaxf(hi, logits[c]);
    return (double)hi - lo;
}

typedef struct {
    int rows, classes;
    float grad_scale;
    float smoothing; /* of the labels (label_smoothing.h) */
    float *logits;   /* rows x classes */
    uint8_t *labels; /* rows */
} softmax_case;

typedef struct {
    float *grad;
    float *loss;
    float *correct;
    int32_t *prediction;
} softmax_outputs;

static softmax_outputs poisoned_outputs(int rows, int classes) {
    size_t count = (size_t)rows * classes;
    softmax_outputs out = {allocate(count * sizeof(float)), allocate(rows * sizeof(float)),
                           allocate(rows * sizeof(float)), allocate(rows * sizeof(int32_t))};
    fill_floats(out.grad, count, NAN);
    fill_floats(out.loss, (size_t)rows, NAN);
    fill_floats(out.correct, (size_t)rows, NAN);
    for (int row = 0; row < rows; row++) out.prediction[row] = -1;
    return out;
}

static void free_outputs(softmax_outputs *out) {
    free(out->grad);
    free(out->loss);
    free(out->correct);
    free(out->prediction);
}

/* The call under test, passing NULL for grad or prediction when asked to. */
static void run_softmax(const softmax_case *sc, softmax_outputs *out, bool with_grad,
                        bool with_prediction) {
    cpu_softmax_cross_entropy(sc->logits, sc->labels, sc->rows, sc->classes, sc->grad_scale,
                              sc->smoothing, with_grad ? out->grad : NULL, out->loss, out->correct,
                              with_prediction ? out->prediction : NULL);
}

static int first_maximum(const float *values, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (values[i] > values[best]) best = i;
    return best;
}

/* The smoothed one-hot target of class c, in double. */
static double reference_target(const softmax_case *sc, int c, int label) {
    return (c == label ? 1.0 - sc->smoothing : 0.0) + (double)sc->smoothing / sc->classes;
}

/* Softmax of one row in double into probability; returns log-sum-exp. */
static double reference_softmax(const float *logits, int classes, double *probability) {
    double max = logits[first_maximum(logits, classes)];
    double sum = 0.0;
    for (int c = 0; c < classes; c++) sum += exp((double)logits[c] - max);
    double log_sum_exp = max + log(sum);
    for (int c = 0; c < classes; c++) probability[c] = exp((double)logits[c] - log_sum_exp);
    return log_sum_exp;
}

static void check_row_gradient(const softmax_case *sc, int row, const float *grad,
                               const double *probability) {
    int label = sc->labels[row];
    double scale = fabs((double)sc->grad_scale), row_sum = 0.0;
    int wrong = 0;
    for (int c = 0; c < sc->classes; c++) {
        double expected = sc->grad_scale * (probability[c] - reference_target(sc, c, label));
        double bound = scale * (SOFTMAX_GRAD_RELATIVE * probability[c] + SOFTMAX_GRAD_ABSOLUTE);
        wrong += !(fabs(grad[c] - expected) <= bound);
        row_sum += grad[c];
    }
    CHECK(wrong == 0, "softmax %dx%d row %d: %d gradient entries off", sc->rows, sc->classes, row,
          wrong);
    CHECK(fabs(row_sum) <= SOFTMAX_ROW_SUM_TOLERANCE * scale,
          "softmax %dx%d row %d: gradient sums to %g", sc->rows, sc->classes, row, row_sum);
}

/* Every output of out (grad and prediction only where given) against the double reference. */
static void check_softmax_outputs(const softmax_case *sc, const softmax_outputs *out,
                                  bool with_grad, bool with_prediction) {
    double *probability = allocate((size_t)sc->classes * sizeof(double));
    for (int row = 0; row < sc->rows; row++) {
        const float *logits = sc->logits + (size_t)row * sc->classes;
        int label = sc->labels[row], best = first_maximum(logits, sc->classes);
        double loss = reference_softmax(logits, sc->classes, probability), bound =
            SOFTMAX_LOSS_TOLERANCE * fmax(1.0, fabs(loss));
        for (int c = 0; c < sc->classes; c++) loss -= reference_target(sc, c, label) * logits[c];
        if (sc->smoothing != 0.0f)
            bound += smoothed_loss_rounding(sc->classes, logit_range(logits, sc->classes));
        CHECK(fabs(out->loss[row] - loss) <= bound,
              "softmax %dx%d row %d, smoothing %g: loss %.9g, expected %.9g", sc->rows,
              sc->classes, row, sc->smoothing, out->loss[row], loss);
        CHECK(out->correct[row] == (best == label ? 1.0f : 0.0f),
              "softmax %dx%d row %d: correct %g, argmax %d, label %d", sc->rows, sc->classes, row,
              out->correct[row], best, label);
        if (with_prediction)
            CHECK(out->prediction[row] == best, "softmax %dx%d row %d: prediction %d, expected %d",
                  sc->rows, sc->classes, row, (int)out->prediction[row], best);
        if (with_grad)
            check_row_gradient(sc, row, out->grad + (size_t)row * sc->classes, probability);
    }
    free(probability);
}

static bool all_nan(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i])) return false;
    return true;
}

/* Leaving out grad or prediction leaves that buffer as it was and changes no other output. */
static void check_skipped_outputs(const softmax_case *sc, const softmax_outputs *full) {
    size_t rows = (size_t)sc->rows, count = rows * sc->classes;
    softmax_outputs out = poisoned_outputs(sc->rows, sc->classes);
    run_softmax(sc, &out, false, true);
    CHECK(all_nan(out.grad, count), "softmax %dx%d: grad written though NULL", sc->rows,
          sc->classes);
    CHECK(bit_differences(out.loss, full->loss, rows) == 0 &&
              bit_differences(out.correct, full->correct, rows) == 0 &&
              memcmp(out.prediction, full->prediction, rows * sizeof(int32_t)) == 0,
          "softmax %dx%d: outputs change when grad is NULL", sc->rows, sc->classes);
    free_outputs(&out);

    out = poisoned_outputs(sc->rows, sc->classes);
    run_softmax(sc, &out, true, false);
    bool untouched = true;
    for (size_t row = 0; row < rows; row++) untouched &= out.prediction[row] == -1;
    CHECK(untouched, "softmax %dx%d: prediction written though NULL", sc->rows, sc->classes);
    CHECK(bit_differences(out.grad, full->grad, count) == 0 &&
              bit_differences(out.loss, full->loss, rows) == 0 &&
              bit_differences(out.correct, full->correct, rows) == 0,
          "softmax %dx%d: outputs change when prediction is NULL", sc->rows, sc->classes);
    free_outputs(&out);
}

/* Runs sc with every output, checks them all, then the NULL variants. */
static void check_softmax_case(const softmax_case *sc) {
    softmax_outputs out = poisoned_outputs(sc->rows, sc->classes);
    run_softmax(sc, &out, true, true);
    check_softmax_outputs(sc, &out, true, true);
    check_skipped_outputs(sc, &out);
    free_outputs(&out);
}

/* Half the labels are the argmax, the others random, so both values of correct occur. */
static void assign_labels(rng *r, softmax_case *sc) {
    for (int row = 0; row < sc->rows; row++) {
        const float *logits = sc->logits + (size_t)row * sc->classes;
        sc->labels[row] = (uint8_t)(rng_below(r, 2) ? first_maximum(logits, sc->classes)
                                                    : (int)rng_below(r, (uint32_t)sc->classes));
    }
}

/* A case of rows x classes with a random grad_scale, and label smoothing in one case of two;
 * logits and labels still to be filled. */
static softmax_case new_softmax_case(rng *r, int rows, int classes) {
    float scale = rng_uniform_range(r, 0.01f, 4.0f);
    float smoothing = rng_below(r, 2) ? rng_uniform_range(r, 0.01f, 0.5f) : 0.0f;
    return (softmax_case){rows, classes, scale, smoothing,
                          allocate((size_t)rows * classes * sizeof(float)), allocate(rows)};
}

/* Random logits in [-5, 5]. */
static softmax_case random_softmax_case(rng *r, int rows, int classes) {
    softmax_case sc = new_softmax_case(r, rows, classes);
    for (size_t i = 0; i < (size_t)rows * classes; i++)
        sc.logits[i] = rng_uniform_range(r, -5.0f, 5.0f);
    assign_labels(r, &sc);
    return sc;
}

static void test_softmax_random(rng *r) {
    for (size_t t = 0; t < COUNT_OF(THREAD_COUNTS); t++) {
        omp_set_num_threads(THREAD_COUNTS[t]);
        for (size_t i = 0; i < COUNT_OF(ROW_COUNTS); i++) {
            for (size_t j = 0; j < COUNT_OF(CLASS_COUNTS); j++) {
                softmax_case sc = random_softmax_case(r, ROW_COUNTS[i], CLASS_COUNTS[j]);
                check_softmax_case(&sc);
                free(sc.logits);
                free(sc.labels);
            }
        }
    }
}

/* Rows of 3 classes written out: huge logits, mixes of signs, and ties. */
static void test_softmax_fixed(void) {
    float logits[] = {1e4f,  -1e4f, 0.0f,  /* label 0 holds the big logit: loss 0 */
                      1e4f,  -1e4f, 0.0f,  /* label 1 is 2e4 below it */
                      1e4f,  -1e4f, 0.0f,  /* label 2 is 1e4 below it */
                      -1e4f, 1e4f,  -1e4f, /* label 0 is 2e4 below it */
                      1e4f,  1e4f,  -1e4f, /* a tie at the top: loss log 2, argmax 0 */
                      -1e4f, -1e4f, -1e4f, /* all equal: loss log 3, argmax 0 */
                      3.0f,  7.0f,  7.0f,  /* the first maximum wins, label on it... */
                      3.0f,  7.0f,  7.0f}; /* ...and on the second: not correct */
    uint8_t labels[] = {0, 1, 2, 0, 1, 1, 1, 2};
    float expected_loss[] = {0.0f, 2e4f, 1e4f, 2e4f, 0.6931472f, 1.0986123f, 0.7022633f,
                             0.7022633f}; /* log 2, log 3, log(1 + 1 + e^-4) */
    int32_t expected_prediction[] = {0, 0, 0, 1, 0, 0, 1, 1};
    softmax_case sc = {8, 3, 0.5f, 0.0f, logits, labels};
    softmax_outputs out = poisoned_outputs(sc.rows, sc.classes);
    run_softmax(&sc, &out, true, true);
    for (int row = 0; row < sc.rows; row++) {
        CHECK(isfinite(out.loss[row]) && within(out.loss[row], expected_loss[row], 1e-6,
                                                fmax(1.0, expected_loss[row])),
              "fixed softmax row %d: loss %.9g, expected %.9g", row, out.loss[row],
              expected_loss[row]);
        CHECK(out.prediction[row] == expected_prediction[row],
              "fixed softmax row %d: prediction %d, expected %d", row, (int)out.prediction[row],
              (int)expected_prediction[row]);
        for (int c = 0; c < sc.classes; c++)
            CHECK(isfinite(out.grad[row * sc.classes + c]), "fixed softmax row %d: grad[%d] = %g",
                  row, c, out.grad[row * sc.classes + c]);
    }
    check_softmax_outputs(&sc, &out, true, true);
    free_outputs(&out);
}

/* Random rows with one strict maximum of 1e4, the rest -1e4 (two times in three) or 0: loss 0
 * when the label holds the maximum, 1e4 or 2e4 when not; nothing may overflow. */
static void test_softmax_extreme(rng *r) {
    const float others[] = {-1e4f, 0.0f, -1e4f};
    for (size_t j = 0; j < COUNT_OF(CLASS_COUNTS); j++) {
        softmax_case sc = new_softmax_case(r, 200, CLASS_COUNTS[j]);
        for (int row = 0; row < sc.rows; row++) {
            float *logits = sc.logits + (size_t)row * sc.classes;
            for (int c = 0; c < sc.classes; c++) logits[c] = others[rng_below(r, 3)];
            logits[rng_below(r, (uint32_t)sc.classes)] = 1e4f;
        }
        assign_labels(r, &sc);
        check_softmax_case(&sc);
        free(sc.logits);
        free(sc.labels);
    }
}

/* ---- column sums and the total: against double precision ---- */

/* Recursive summation of n floats in float is within (n - 1) roundings of the sum of their
 * magnitudes (Higham, Accuracy and Stability, 4.2); rows * FLOAT_ROUNDING bounds that. */
static void check_column_sums(rng *r, int rows, int cols) {
    float *matrix = random_floats(r, (size_t)rows * cols, -1.0f, 1.0f);
    float *sums[2] = {allocate(cols * sizeof(float)), allocate(cols * sizeof(float))};
    for (size_t t = 0; t < COUNT_OF(THREAD_COUNTS); t++) {
        omp_set_num_threads(THREAD_COUNTS[t]);
        fill_floats(sums[t], (size_t)cols, NAN);
        cpu_column_sums(matrix, rows, cols, sums[t]);
    }
    int wrong = 0;
    for (int c = 0; c < cols; c++) {
        double sum = 0.0, magnitude = 0.0;
        for (int row = 0; row < rows; row++) {
            sum += matrix[(size_t)row * cols + c];
            magnitude += fabs(matrix[(size_t)row * cols + c]);
        }
        wrong += !within(sums[0][c], sum, rows * FLOAT_ROUNDING, magnitude);
    }
    CHECK(wrong == 0, "column_sums %dx%d: %d columns off", rows, cols, wrong);
    CHECK(bit_differences(sums[0], sums[1], (size_t)cols) == 0,
          "column_sums %dx%d: 1 and 2 threads disagree", rows, cols);
    free(matrix);
    free(sums[0]);
    free(sums[1]);
}

/* cpu_ops.h promises a double sum in index order rounded once, so the result is exact. */
static void check_sum(rng *r, size_t n) {
    float *x = random_floats(r, n, -1.0f, 1.0f);
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += x[i];
    float expected = (float)total, got = cpu_sum(x, n);
    CHECK(memcmp(&got, &expected, sizeof got) == 0, "sum of %zu: %.9g, expected %.9g", n, got,
          expected);
    free(x);
}

/* 1e8 then 1000 ones: floats are 8 apart at 1e8, so a float accumulator rounds every 1e8 + 1
 * back to 1e8 and ends at 1e8; a double one reaches 100001000, which a float holds exactly. */
static void check_sum_in_double(void) {
    enum { ONES = 1000 };
    float x[1 + ONES];
    x[0] = 1e8f;
    fill_floats(x + 1, ONES, 1.0f);
    float expected = 100001000.0f, got = cpu_sum(x, 1 + ONES);
    CHECK(got == expected, "sum of 1e8 and %d ones: %.9g, expected %.9g", ONES, got, expected);
}

static void test_reductions(rng *r) {
    for (size_t i = 0; i < COUNT_OF(ROW_COUNTS); i++)
        for (size_t j = 0; j < COUNT_OF(COLUMN_COUNTS); j++)
            check_column_sums(r, ROW_COUNTS[i], COLUMN_COUNTS[j]);
    check_column_sums(r, 4000, 10); /* parallel, with fewer column blocks than threads */
    check_sum(r, 0);
    check_sum(r, 1);
    check_sum(r, 60000);
    check_sum_in_double();
}

/* ---- optimizers: hand-computed steps, then random vectors against double ---- */

#define OPTIMIZER_TOLERANCE 1e-6 /* relative; about 17 float roundings */

static void check_value(const char *what, float got, double expected) {
    CHECK(within(got, expected, OPTIMIZER_TOLERANCE, fabs(expected)), "%s = %.9g, expected %.9g",
          what, got, expected);
}

/* lr 0.1, momentum 0.9, starting from p = 1, v = 0.5:
 *   g =  0.2: v = 0.9 * 0.5  + 0.2 = 0.65,  p = 1     - 0.1 * 0.65  = 0.935
 *   g = -0.4: v = 0.9 * 0.65 - 0.4 = 0.185, p = 0.935 - 0.1 * 0.185 = 0.9165 */
static void test_sgd_by_hand(void) {
    float param = 1.0f, velocity = 0.5f, grad = 0.2f;
    cpu_sgd_momentum_step(&param, &velocity, &grad, 1, 0.1f, 0.9f);
    check_value("sgd step 1 velocity", velocity, 0.65);
    check_value("sgd step 1 param", param, 0.935);
    grad = -0.4f;
    cpu_sgd_momentum_step(&param, &velocity, &grad, 1, 0.1f, 0.9f);
    check_value("sgd step 2 velocity", velocity, 0.185);
    check_value("sgd step 2 param", param, 0.9165);
}

/* lr 0.01, betas 0.9 and 0.999, eps 1e-8; two parameters, 1 and 0, get the same gradients
 * (the one at 0 shows the update itself). Step 1, g = 0.2:
 *   m = 0.1 * 0.2 = 0.02             m^ = 0.02 / (1 - 0.9) = 0.2
 *   v = 0.001 * 0.04 = 4e-5          v^ = 4e-5 / (1 - 0.999) = 0.04, sqrt 0.2
 *   update = 0.01 * 0.2 / (0.2 + 1e-8) = 0.0099999995
 * Step 2, g = -0.1:
 *   m = 0.9 * 0.02 + 0.1 * -0.1 = 0.008           m^ = 0.008 / (1 - 0.81) = 0.0421052632
 *   v = 0.999 * 4e-5 + 0.001 * 0.01 = 4.996e-5    v^ = 4.996e-5 / (1 - 0.998001) = 0.0249924962
 *   sqrt v^ = 0.1580901523;  update = 0.01 * 0.0421052632 / 0.1580901623 = 0.0026633702
 * The stored v is the exception: 0.999f is 0.999000012874603, so 1 - beta2 is 0.000999987125
 * in float, 1.3e-5 below 0.001, and v carries that factor (m^ and v^ do not: the bias
 * correction divides it out):
 *   v1 = 0.000999987125 * 0.04 = 3.99994850e-5
 *   v2 = 0.999000012875 * 3.99994850e-5 + 0.000999987125 * 0.01 = 4.99593573e-5 */
static void test_adam_by_hand(void) {
    float param[2] = {1.0f, 0.0f}, m[2] = {0}, v[2] = {0}, grad[2] = {0.2f, 0.2f};
    cpu_adam_step(param, m, v, grad, 2, 0.01f, 0.9f, 0.999f, 1e-8f, 1);
    check_value("adam step 1 m", m[0], 0.02);
    check_value("adam step 1 v", v[0], 3.99994850e-5);
    check_value("adam step 1 param from 1", param[0], 0.9900000005);
    check_value("adam step 1 param from 0", param[1], -0.0099999995);
    grad[0] = grad[1] = -0.1f;
    cpu_adam_step(param, m, v, grad, 2, 0.01f, 0.9f, 0.999f, 1e-8f, 2);
    check_value("adam step 2 m", m[0], 0.008);
    check_value("adam step 2 v", v[0], 4.99593573e-5);
    check_value("adam step 2 param from 1", param[0], 0.9873366303);
    check_value("adam step 2 param from 0", param[1], -0.0126633697);
}

typedef struct {
    size_t n;
    float *param, *state[2], *grad; /* SGD: state[0] velocity; Adam: m, v */
} optimizer_case;

/* Random params, gradients and first state in [-1, 1]; the second state (Adam's v) in [0, 1). */
static optimizer_case random_optimizer_case(rng *r, size_t n) {
    optimizer_case oc = {n, NULL, {NULL, NULL}, NULL};
    oc.param = random_floats(r, n, -1.0f, 1.0f); /* one at a time, so a seed replays */
    oc.state[0] = random_floats(r, n, -1.0f, 1.0f);
    oc.state[1] = random_floats(r, n, 0.0f, 1.0f);
    oc.grad = random_floats(r, n, -1.0f, 1.0f);
    return oc;
}

static void free_optimizer_case(optimizer_case *oc) {
    free(oc->param);
    free(oc->state[0]);
    free(oc->state[1]);
    free(oc->grad);
}

static void check_sgd_vector(rng *r, int threads, size_t n) {
    const float lr = 0.05f, momentum = 0.9f;
    optimizer_case oc = random_optimizer_case(r, n);
    optimizer_case before = {n, copy_floats(oc.param, n), {copy_floats(oc.state[0], n), NULL},
                             NULL};
    cpu_sgd_momentum_step(oc.param, oc.state[0], oc.grad, n, lr, momentum);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        double velocity = (double)momentum * before.state[0][i] + oc.grad[i];
        double velocity_size = fabs((double)momentum * before.state[0][i]) + fabs(oc.grad[i]);
        double param = before.param[i] - (double)lr * velocity;
        double param_size = fabs(before.param[i]) + lr * velocity_size;
        wrong += !within(oc.state[0][i], velocity, OPTIMIZER_TOLERANCE, velocity_size) ||
                 !within(oc.param[i], param, OPTIMIZER_TOLERANCE, param_size);
    }
    CHECK(wrong == 0, "sgd n=%zu threads=%d: %zu of %zu elements off", n, threads, wrong, n);
    free_optimizer_case(&oc);
    free_optimizer_case(&before);
}

static void check_adam_vector(rng *r, int threads, size_t n) {
    const float lr = 0.001f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    const int step = 1 + (int)rng_below(r, 100);
    optimizer_case oc = random_optimizer_case(r, n);
    optimizer_case before = {n, copy_floats(oc.param, n),
                             {copy_floats(oc.state[0], n), copy_floats(oc.state[1], n)}, NULL};
    cpu_adam_step(oc.param, oc.state[0], oc.state[1], oc.grad, n, lr, beta1, beta2, eps, step);
    double m_correction = 1.0 / (1.0 - pow(beta1, step));
    double v_correction = 1.0 / (1.0 - pow(beta2, step));
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        double g = oc.grad[i];
        double m = beta1 * (double)before.state[0][i] + (1.0 - beta1) * g;
        double m_size = fabs(beta1 * (double)before.state[0][i]) + fabs((1.0 - beta1) * g);
        double v = beta2 * (double)before.state[1][i] + (1.0 - beta2) * g * g;
        double denominator = sqrt(v * v_correction) + eps;
        double param = before.param[i] - lr * m * m_correction / denominator;
        double param_size = fabs(before.param[i]) + lr * m_size * m_correction / denominator;
        wrong += !within(oc.state[0][i], m, OPTIMIZER_TOLERANCE, m_size) ||
                 !within(oc.state[1][i], v, OPTIMIZER_TOLERANCE, v) ||
                 !within(oc.param[i], param, OPTIMIZER_TOLERANCE, param_size);
    }
    CHECK(wrong == 0, "adam n=%zu step %d threads=%d: %zu of %zu elements off", n, step, threads,
          wrong, n);
    free_optimizer_case(&oc);
    free_optimizer_case(&before);
}

/* Weight decay over spans of n parameters (one of them 40000 long, for the OpenMP loop): each
 * weight in a span becomes weight·(1 - lr·rate), a float product, exactly; the others stay as
 * they were, bit for bit; with no spans nothing changes. */
static void check_decay(rng *r, int threads, size_t n) {
    const float lr = 0.5f, rate = rng_uniform_range(r, 0.01f, 0.2f), keep = 1.0f - lr * rate;
    float *param = random_floats(r, n, -1.0f, 1.0f), *before = copy_floats(param, n);
    weight_decay decay = {.rate = rate, .spans = 2, .begin = {0, (int64_t)n / 3},
                          .end = {(int64_t)n / 5, (int64_t)n - 7}};
    cpu_decay_weights(param, &decay, lr);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        float expected = weight_decays(&decay, (int64_t)i) ? before[i] * keep : before[i];
        wrong += memcmp(&param[i], &expected, sizeof expected) != 0;
    }
    CHECK(wrong == 0, "decay n=%zu threads=%d: %zu of %zu elements off", n, threads, wrong, n);
    float *decayed = copy_floats(param, n);
    weight_decay none = {.rate = rate};
    cpu_decay_weights(param, &none, lr);
    CHECK(bit_differences(param, decayed, n) == 0, "decay without spans changed parameters");
    free(param);
    free(before);
    free(decayed);
}

/* 1000 elements take the serial loop, 40000 the OpenMP one. */
static void test_optimizers(rng *r) {
    test_sgd_by_hand();
    test_adam_by_hand();
    const size_t sizes[] = {1000, 40000};
    for (size_t t = 0; t < COUNT_OF(THREAD_COUNTS); t++) {
        omp_set_num_threads(THREAD_COUNTS[t]);
        for (size_t i = 0; i < COUNT_OF(sizes); i++) {
            check_sgd_vector(r, THREAD_COUNTS[t], sizes[i]);
            check_adam_vector(r, THREAD_COUNTS[t], sizes[i]);
        }
        check_decay(r, THREAD_COUNTS[t], 1000);
        check_decay(r, THREAD_COUNTS[t], 200000);
    }
}

/* ---- gather + normalize: exact ---- */

static void check_gather(rng *r, int threads, int rows, int features) {
    const int samples = 50;
    uint8_t *pixels = allocate((size_t)samples * features), *labels = allocate(samples);
    int32_t *indices = allocate(rows * sizeof(int32_t));
    for (size_t i = 0; i < (size_t)samples * features; i++) pixels[i] = (uint8_t)rng_below(r, 256);
    for (int s = 0; s < samples; s++) labels[s] = (uint8_t)rng_below(r, 10);
    for (int row = 0; row < rows; row++) indices[row] = (int32_t)rng_below(r, samples);
    float scale = rng_uniform_range(r, 0.001f, 0.1f), shift = rng_uniform_range(r, -1.0f, 1.0f);

    size_t count = (size_t)rows * features;
    float *x = allocate(count * sizeof(float)), *expected = allocate(count * sizeof(float));
    uint8_t *y = allocate(rows);
    fill_floats(x, count, NAN);
    memset(y, 0xFF, rows);
    cpu_gather_normalize(pixels, labels, indices, rows, features, scale, shift, x, y);
    int wrong_labels = 0;
    for (int row = 0; row < rows; row++) {
        const uint8_t *source = pixels + (size_t)indices[row] * features;
        for (int f = 0; f < features; f++)
            expected[(size_t)row * features + f] = (float)source[f] * scale + shift;
        wrong_labels += y[row] != labels[indices[row]];
    }
    CHECK(bit_differences(x, expected, count) == 0, "gather %dx%d threads=%d: %zu values differ",
          rows, features, threads, bit_differences(x, expected, count));
    CHECK(wrong_labels == 0, "gather %dx%d threads=%d: %d labels differ", rows, features, threads,
          wrong_labels);
    free(pixels);
    free(labels);
    free(indices);
    free(x);
    free(expected);
    free(y);
}

static void test_gather(rng *r) {
    /* rows, features; 100×784 runs in parallel, and rows past the gather's prefetch distance */
    const int shapes[][2] = {{1, 1}, {9, 5}, {17, 33}, {100, 784}};
    for (size_t t = 0; t < COUNT_OF(THREAD_COUNTS); t++) {
        omp_set_num_threads(THREAD_COUNTS[t]);
        for (size_t i = 0; i < COUNT_OF(shapes); i++)
            check_gather(r, THREAD_COUNTS[t], shapes[i][0], shapes[i][1]);
    }
}

/* ---- the tiled implementation's output layer (cpu_output_layer.c) ---- */

/* Relative to the size of each sum's terms. The logits' float rounding, which every gradient
 * inherits, grows with their length: 1e-5 holds to 256 inputs with margin (measured), and the
 * bound grows in proportion past that. */
static double output_layer_bound(int in) { return 1e-5 * fmax(1.0, in / 256.0); }

static float *poisoned(size_t n) {
    float *x = allocate(n * sizeof(float));
    fill_floats(x, n, NAN);
    return x;
}

/* The outputs of one run, poisoned (NaN) before it. */
typedef struct {
    float *weight_grad, *bias_grad, *delta, *hidden_bias_grad, *loss, *correct, *scratch;
} output_layer_outputs;

enum { METRICS_OFFSET = 5 }; /* the cursor's row: where the metrics land */

static output_layer_outputs run_output_layer(const output_layer_step *shape, int threads) {
    int rows = shape->rows, in = shape->in, classes = shape->classes;
    output_layer_outputs out = {
        poisoned((size_t)in * classes), poisoned((size_t)classes), poisoned((size_t)rows * in),
        poisoned((size_t)in), poisoned((size_t)METRICS_OFFSET + rows),
        poisoned((size_t)METRICS_OFFSET + rows),
        poisoned(cpu_output_layer_scratch_floats(rows, in, classes)),
    };
    pass_cursor cursor = {METRICS_OFFSET, 0};
    output_layer_step step = *shape;
    step.weight_grad = out.weight_grad, step.bias_grad = out.bias_grad;
    step.hidden_delta = out.delta, step.hidden_bias_grad = out.hidden_bias_grad;
    step.row_loss = out.loss, step.row_correct = out.correct, step.cursor = &cursor;
    omp_set_num_threads(threads);
    cpu_output_layer(&step, out.scratch);
    return out;
}

static void free_output_layer_outputs(output_layer_outputs *out) {
    float *arrays[] = {out->weight_grad, out->bias_grad, out->delta, out->hidden_bias_grad,
                       out->loss, out->correct, out->scratch};
    for (size_t i = 0; i < COUNT_OF(arrays); i++) free(arrays[i]);
}

/* h is a ReLU's output (about half zeros). Each thread count against the reference, and the
 * same bits from every thread count. */
static void check_output_layer(rng *r, int rows, int in, int classes) {
    float *h = random_floats(r, (size_t)rows * in, -1, 1);
    for (size_t i = 0; i < (size_t)rows * in; i++) h[i] = fmaxf(h[i], 0.0f);
    float *w = random_floats(r, (size_t)in * classes, -0.5f, 0.5f);
    float *b = random_floats(r, (size_t)classes, -0.5f, 0.5f);
    uint8_t *labels = allocate((size_t)rows);
    for (int i = 0; i < rows; i++) labels[i] = (uint8_t)rng_below(r, classes);
    float scale = rows > 0 ? 1.0f / rows : 1.0f;
    float smoothing = rng_below(r, 2) ? rng_uniform_range(r, 0.05f, 0.4f) : 0.0f;
    output_layer_reference ref;
    output_layer_reference_compute(&ref, h, w, b, labels, rows, in, classes, scale, smoothing);
    output_layer_step shape = {.hidden = h, .weights = w, .bias = b, .labels = labels,
                               .rows = rows, .in = in, .classes = classes, .grad_scale = scale,
                               .label_smoothing = smoothing};
    output_layer_outputs first = run_output_layer(&shape, THREAD_COUNTS[0]);
    for (size_t t = 0; t < COUNT_OF(THREAD_COUNTS); t++) {
        output_layer_outputs out = t == 0 ? first : run_output_layer(&shape, THREAD_COUNTS[t]);
        output_layer_errors e = output_layer_compare(&ref, out.loss + METRICS_OFFSET,
                                                     out.correct + METRICS_OFFSET, out.weight_grad,
                                                     out.bias_grad, out.delta, out.hidden_bias_grad);
        CHECK(output_layer_worst_error(&e) <= output_layer_bound(in) && e.flipped == 0,
              "output layer %dx%d->%d, smoothing %g, %d threads: loss %.3g, dW %.3g, db %.3g, "
              "hidden delta %.3g, hidden db %.3g (bound %g); %d rows' correctness differs",
              rows, in, classes, smoothing, THREAD_COUNTS[t], e.loss, e.weight_grad, e.bias_grad,
              e.hidden_delta, e.hidden_bias_grad, output_layer_bound(in), e.flipped);
        if (t == 0) continue;
        size_t differ = bit_differences(out.weight_grad, first.weight_grad, (size_t)in * classes) +
                        bit_differences(out.bias_grad, first.bias_grad, (size_t)classes) +
                        bit_differences(out.delta, first.delta, (size_t)rows * in) +
                        bit_differences(out.hidden_bias_grad, first.hidden_bias_grad, (size_t)in);
        CHECK(differ == 0, "output layer %dx%d->%d: %zu gradients differ between %d and %d threads",
              rows, in, classes, differ, THREAD_COUNTS[0], THREAD_COUNTS[t]);
        free_output_layer_outputs(&out);
    }
    free_output_layer_outputs(&first);
    output_layer_reference_free(&ref);
    free(h), free(w), free(b), free(labels);
}

static void test_output_layer(rng *r) {
    const int rows[] = {0, 1, 17, 1000}; /* 0: a rank's share of a batch shorter than the ranks */
    const int inputs[] = {1, 17, 256, 1000};
    const int classes[] = {1, 10, 37};
    for (size_t i = 0; i < COUNT_OF(rows); i++)
        for (size_t j = 0; j < COUNT_OF(inputs); j++)
            for (size_t c = 0; c < COUNT_OF(classes); c++)
                check_output_layer(r, rows[i], inputs[j], classes[c]);
}

int main(void) {
    rng r = rng_create(test_seed("test_cpu_ops"), 0);
    test_elementwise(&r);
    test_softmax_random(&r);
    test_softmax_fixed();
    test_softmax_extreme(&r);
    test_reductions(&r);
    test_optimizers(&r);
    test_gather(&r);
    test_output_layer(&r);
    return test_exit_status("test_cpu_ops");
}

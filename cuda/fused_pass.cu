/* Planning and launching the fused pass. The plan: the fewest hidden units per block (1, 2, 4
 * or 8) such that one block per group of units fits on the GPU at once, which a cooperative
 * launch requires, with as many rows of pixels per shared-memory stage (up to 64) as then fit.
 * 784-256-10 on a 132-SM H100 or H200: 2 units a block, 128 blocks, 64 rows a stage. */
#include <cstdio>

#include "core/model.h"
#include "core/optimizer.h"
#include "libs/cuda_check.h"
#include "cuda/kernels/fused_mlp.h"
#include "cuda/fused_pass.h"
#include "cuda/fused_rule.h"
#include "cuda/gpu_state.h"

namespace {

struct plan {
    int units_per_block, blocks, stage_rows;
};

/* What a plan depends on: the model's widths, the optimizer's state arrays, the batch. */
struct plan_key {
    int features, hidden, classes, layers, state_arrays, batch;
};

bool same_key(const plan_key &x, const plan_key &y) {
    return x.features == y.features && x.hidden == y.hidden && x.classes == y.classes &&
           x.layers == y.layers && x.state_arrays == y.state_arrays && x.batch == y.batch;
}

} // namespace

struct fused_pass {
    bool whole_always; /* the kernel wherever it fits, not only where it is faster (fused_rule.h) */
    void *scratch;
    size_t scratch_bytes;
    /* the last plan made, kept: planning queries the device (occupancy, limits), and a pass
     * runs every epoch with the same model and batch */
    bool planned;
    plan_key planned_for;
    plan last_plan;
    char last_why[256];
};

namespace {

int state_arrays(const optimizer_config *o) { return o->kind == OPTIMIZER_ADAM ? 2 : 1; }

/* The plan for this model, or {0, 0, 0} with the reason in why. */
plan make_plan(const training_pass *pass, char *why, size_t why_size) {
    const mlp_shape *shape = pass->shape;
    int features = shape->width[0], classes = shape->width[shape->layers];
    if (shape->layers != 2) {
        std::snprintf(why, why_size, "the fused kernel holds one hidden layer; this model has %d",
                      shape->layers - 1);
        return {0, 0, 0};
    }
    if (features % FUSED_FEATURE_MULTIPLE != 0 || features > FUSED_MAX_FEATURES) {
        std::snprintf(why, why_size,
                      "the fused kernel reads inputs %d bytes at a time, at most %d of them; "
                      "this data set has %d",
                      FUSED_FEATURE_MULTIPLE, FUSED_MAX_FEATURES, features);
        return {0, 0, 0};
    }
    if (classes > FUSED_MAX_CLASSES) {
        std::snprintf(why, why_size, "the fused kernel holds at most %d classes", FUSED_MAX_CLASSES);
        return {0, 0, 0};
    }
    int hidden = shape->width[1];
    int most_stage_rows = pass->batch < FUSED_MAX_STAGE_ROWS ? pass->batch : FUSED_MAX_STAGE_ROWS;
    for (int units = 1; units <= FUSED_MAX_UNITS_PER_BLOCK; units *= 2) {
        int blocks = (hidden + units - 1) / units;
        for (int rows = most_stage_rows; rows >= 1; rows /= 2) {
            size_t shared = fused_mlp_shared_bytes(units, features, classes,
                                                   state_arrays(pass->optimizer), pass->batch, rows);
            if (blocks <= fused_mlp_resident_blocks(units, shared)) return {units, blocks, rows};
        }
    }
    std::snprintf(why, why_size,
                  "%d hidden units at batch %d do not fit the GPU at %d units per block (the fused "
                  "kernel needs every block resident at once, and a block keeps its units' "
                  "activations for the whole batch in shared memory)",
                  hidden, pass->batch, FUSED_MAX_UNITS_PER_BLOCK);
    return {0, 0, 0};
}

plan_key key_of(const training_pass *pass) {
    const mlp_shape *shape = pass->shape;
    return {shape->width[0], shape->layers >= 2 ? shape->width[1] : 0, shape->width[shape->layers],
            shape->layers, state_arrays(pass->optimizer), pass->batch};
}

/* make_plan, made once for each new key. */
plan cached_plan(fused_pass *fused, const training_pass *pass, char *why, size_t why_size) {
    const plan_key key = key_of(pass);
    if (!fused->planned || !same_key(fused->planned_for, key)) {
        fused->last_why[0] = '\0';
        fused->last_plan = make_plan(pass, fused->last_why, sizeof fused->last_why);
        fused->planned_for = key;
        fused->planned = true;
    }
    std::snprintf(why, why_size, "%s", fused->last_why);
    return fused->last_plan;
}

void ensure_scratch(fused_pass *fused, size_t bytes) {
    if (fused->scratch_bytes >= bytes) return;
    if (fused->scratch) CUDA_CHECK(cudaFree(fused->scratch));
    fused->scratch = gpu_alloc_or_exit(bytes);
    fused->scratch_bytes = bytes;
}

/* Offsets in the scratch: partial logits, dlogits (floats), then the ordered pixels and labels. */
struct scratch_layout {
    size_t dlogits, pixels, labels, bytes;
};

scratch_layout lay_out_scratch(const training_pass *pass, const plan &p, int classes) {
    size_t partial_bytes = (size_t)pass->batch * classes * p.blocks * sizeof(float);
    size_t dlogits_bytes = (size_t)pass->batch * classes * sizeof(float);
    size_t pixel_bytes = (size_t)pass->samples * pass->shape->width[0];
    scratch_layout l;
    l.dlogits = partial_bytes;
    l.pixels = (l.dlogits + dlogits_bytes + 15) / 16 * 16; /* rows are copied 16 bytes at a time */
    l.labels = l.pixels + pixel_bytes;
    l.bytes = l.labels + pass->samples;
    return l;
}

} // namespace

fused_pass *fused_pass_create(void) { return new fused_pass{}; }

void fused_pass_destroy(fused_pass *fused) {
    if (fused->scratch) CUDA_CHECK(cudaFree(fused->scratch));
    delete fused;
}

bool fused_pass_supported(backend *be, const training_pass *pass, char *why, size_t why_size) {
    if (be->all_reduce_sum) {
        std::snprintf(why, why_size,
                      "the fused kernel runs a whole epoch in one launch and cannot sum the "
                      "gradients across ranks (mpirun) between its steps");
        return false;
    }
    if (!gpu_feed_recordable(pass->feed)) {
        std::snprintf(why, why_size,
                      "the fused kernel reads the data set on the device (--data device)");
        return false;
    }
    fused_pass *fused = gpu_of(be)->fused;
    if (cached_plan(fused, pass, why, why_size).blocks == 0) return false;
    const int hidden = pass->shape->width[1];
    if (!fused->whole_always && !fused_whole_epoch_pays(pass->batch, hidden)) {
        std::snprintf(why, why_size,
                      "at batch %d with %d hidden units the recorded tiled step is faster than "
                      "the whole-epoch kernel (--fused-pass whole runs the kernel)",
                      pass->batch, hidden);
        return false;
    }
    return true;
}

void fused_pass_whole_always(fused_pass *fused, bool always) { fused->whole_always = always; }

void fused_pass_run(backend *be, const training_pass *pass) {
    char why[256];
    gpu_state *gpu = gpu_of(be);
    plan p = cached_plan(gpu->fused, pass, why, sizeof why);
    if (p.blocks == 0) {
        std::fprintf(stderr, "mlp_train: internal error: fused pass not supported: %s\n", why);
        std::exit(1);
    }
    const mlp_shape *shape = pass->shape;
    int classes = shape->width[2];
    scratch_layout layout = lay_out_scratch(pass, p, classes);
    ensure_scratch(gpu->fused, layout.bytes);
    uint8_t *scratch = static_cast<uint8_t *>(gpu->fused->scratch);
    gpu_resident_data data = gpu_feed_resident_data(pass->feed);
    const optimizer_config *o = pass->optimizer;

    fused_mlp_args args{};
    args.pixels = data.pixels;
    args.labels = data.labels;
    args.order = data.order;
    args.features = shape->width[0];
    args.hidden = shape->width[1];
    args.classes = classes;
    args.scale = data.scale;
    args.shift = data.shift;
    args.params = pass->params;
    args.state[0] = pass->optimizer_state[0];
    args.state[1] = pass->optimizer_state[1];
    args.w1 = shape->weight_offset[0];
    args.b1 = shape->bias_offset[0];
    args.w2 = shape->weight_offset[1];
    args.b2 = shape->bias_offset[1];
    args.adam = o->kind == OPTIMIZER_ADAM;
    args.lr = optimizer_schedule(o);
    args.momentum = o->momentum;
    args.beta1 = o->beta1;
    args.beta2 = o->beta2;
    args.eps = o->eps;
    args.weight_decay = o->weight_decay;
    args.label_smoothing = pass->label_smoothing;
    args.targets = label_targets(pass->label_smoothing, classes);
    args.samples = pass->samples;
    args.batch = pass->batch;
    args.row_loss = pass->row_loss;
    args.row_correct = pass->row_correct;
    args.cursor = pass->cursor;
    args.partial_logits = reinterpret_cast<float *>(scratch);
    args.dlogits = reinterpret_cast<float *>(scratch + layout.dlogits);
    args.ordered_pixels = scratch + layout.pixels;
    args.ordered_labels = scratch + layout.labels;
    args.units_per_block = p.units_per_block;
    args.blocks = p.blocks;
    args.stage_rows = p.stage_rows;
    gpu_join_side_streams(gpu); /* nothing of an earlier step still runs beside the pass */
    gpu_fused_mlp_pass(gpu->stream, args);
}

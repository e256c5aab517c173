/* The learning rate of each update (--schedule, --warmup): a closed form of the update's number,
 * so that the device computes it from the pass cursor's optimizer_steps and a recorded step (a
 * CUDA graph) or a whole-epoch kernel stays valid from step to step. C and CUDA.
 *
 * For update t (0 for the first), with w warm-up steps and T steps in the whole run:
 *   t < w:      lr · (t + 1) / w                            (linear warm-up, every kind)
 *   then, with p = (t - w) / (T - w), the share of the rest done (at most 1):
 *   constant:   lr
 *   step:       lr, then lr / 10 from p = 1/2, then lr / 100 from p = 3/4
 *   cosine:     lr · (1 + cos(π p)) / 2
 *   onecycle:   lr · (1 - p)                                (a linear fall to 0)
 * The constant schedule without warm-up is lr itself, to the bit. */
#ifndef MLP_LR_SCHEDULE_H
#define MLP_LR_SCHEDULE_H

#include <math.h>
#include <stdint.h>

#include "core/host_device.h"

typedef enum { SCHEDULE_CONSTANT, SCHEDULE_STEP, SCHEDULE_COSINE, SCHEDULE_ONECYCLE, SCHEDULE_KINDS } schedule_kind;

typedef struct {
    schedule_kind kind;
    float lr;             /* the peak rate (--lr) */
    int32_t warmup_steps; /* w */
    int32_t total_steps;  /* T: every update of the run, resumed epochs included */
} lr_schedule;

/* The updates an epoch of `samples` training samples makes at a global batch of `batch`: one a
 * batch, the last possibly partial; total_steps counts these. Ranks share each batch and all
 * make every update, so this is the global count for each rank, never a rank's share. */
static inline int updates_per_epoch(int samples, int batch) {
    return (samples + batch - 1) / batch;
}

static inline const char *schedule_name(schedule_kind kind) {
    static const char *const names[SCHEDULE_KINDS] = {"constant", "step", "cosine", "onecycle"};
    return (unsigned)kind < SCHEDULE_KINDS ? names[kind] : "?";
}

MLP_HOST_DEVICE static inline float schedule_lr(lr_schedule s, int32_t t) {
    if (t < s.warmup_steps) return s.lr * (float)(t + 1) / (float)s.warmup_steps;
    if (s.kind == SCHEDULE_CONSTANT) return s.lr;
    int32_t rest = s.total_steps - s.warmup_steps;
    float p = rest > 0 ? (float)(t - s.warmup_steps) / (float)rest : 1.0f;
    if (p > 1.0f) p = 1.0f;
    switch (s.kind) {
    case SCHEDULE_STEP: return p >= 0.75f ? s.lr * 0.01f : p >= 0.5f ? s.lr * 0.1f : s.lr;
    case SCHEDULE_COSINE: return s.lr * 0.5f * (1.0f + cosf(3.14159265358979f * p));
    case SCHEDULE_ONECYCLE: return s.lr * (1.0f - p);
    default: return s.lr;
    }
}

/* Whether the rate changes from update to update (else every update uses lr). */
MLP_HOST_DEVICE static inline int schedule_varies(lr_schedule s) {
    return s.kind != SCHEDULE_CONSTANT || s.warmup_steps > 0;
}

#endif

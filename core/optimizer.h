/* Optimizers over the model's flat parameter array: SGD with momentum, and Adam. Their state
 * lives on the backend beside the parameters. */
#ifndef MLP_OPTIMIZER_H
#define MLP_OPTIMIZER_H

#include <stddef.h>

#include "core/backend.h"
#include "core/lr_schedule.h"
#include "core/model.h"

typedef enum { OPTIMIZER_SGD, OPTIMIZER_ADAM } optimizer_kind;

typedef struct optimizer_config {
    optimizer_kind kind;
    float lr;       /* the peak rate; each update's: schedule_lr (lr_schedule.h) */
    schedule_kind schedule;
    int32_t warmup_steps, total_steps;
    float momentum; /* SGD */
    float beta1;    /* Adam */
    float beta2;
    float eps;
    float weight_decay; /* decoupled, of the weights only (backend.h); 0: none */
} optimizer_config;

typedef struct {
    optimizer_config config;
    backend *be;
    mlp_shape shape;
    size_t count;        /* the parameters */
    size_t first, last;  /* those an update changes, [first, last): all, or a shard of them */
    weight_decay *decay; /* config.weight_decay over [first, last)'s weights, counted from first,
                          * in the backend's memory; NULL without decay */
    float *state[2]; /* SGD: velocity; Adam: first and second moments */
    int state_arrays; /* 1 for SGD, 2 for Adam */
    int step;         /* updates made so far, as the host counts them (for checkpoints); the
                       * device's count is the pass cursor's optimizer_steps */
} optimizer;

const char *optimizer_name(optimizer_kind kind);

/* For the parameters of a model of this shape. State arrays start at zero. */
optimizer *optimizer_create(backend *be, optimizer_config config, const mlp_shape *shape);
void optimizer_destroy(optimizer *opt);

/* The rate of each update, as config describes it. */
static inline lr_schedule optimizer_schedule(const optimizer_config *config) {
    lr_schedule s = {config->schedule, config->lr, config->warmup_steps, config->total_steps};
    return s;
}

/* From now on an update changes params[first, last) alone, with the state and gradients of
 * those: this rank's shard of a sharded update (trainer.c). The other parameters' state is left
 * as it is. */
void optimizer_shard(optimizer *opt, size_t first, size_t last);

/* One update of params from grads, at the schedule's rate: update number
 * cursor->optimizer_steps + 1, which ends the step of `rows` rows: the cursor moves on by them
 * (backend.h). Queued like any operation; opt->step is the caller's to count. */
void optimizer_step(optimizer *opt, float *params, const float *grads, pass_cursor *cursor,
                    int rows);

#endif

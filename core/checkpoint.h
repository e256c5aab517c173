/* Checkpoints: the model's shape and parameters, the optimizer's state and the input
 * normalization, so a run can be resumed or evaluated later.
 *
 * Format (all integers and floats little-endian):
 *   "MLPCKPT\0"  u32 version  u32 layers  u32 width[layers + 1]
 *   u32 optimizer (0 sgd, 1 adam)  u32 optimizer_step  u32 epochs_done  u32 state_arrays
 *   u32 schedule (lr_schedule.h's kind)  u32 warmup_steps  u32 total_steps  f32 lr   (version 2)
 *   f32 input_scale  f32 input_shift
 *   f32 params[param_count]  f32 state[state_arrays * param_count]
 *   u32 crc32 of every byte before it
 * Saving goes through atomic_file_write: a crash, or a power cut, leaves either the old
 * checkpoint or the new one, never half of one, and a target that is not a regular file is
 * refused. A temporary file left by a crash is never taken for the target; loading one fails
 * (size or checksum) unless it was complete. tests/test_checkpoint_crash.c proves it.
 * Loading refuses a checkpoint whose parameters or optimizer state hold NaN or infinities.
 * Version 1 (without the schedule) still loads: its schedule is constant at lr 0 (unknown). */
#ifndef MLP_CHECKPOINT_H
#define MLP_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/model.h"
#include "core/lr_schedule.h"
#include "core/optimizer.h"

#define CHECKPOINT_VERSION 2

typedef struct {
    mlp_shape shape;
    optimizer_kind optimizer;
    int optimizer_step;
    int epochs_done;
    int state_arrays;    /* 1 for SGD (velocity), 2 for Adam (moments) */
    lr_schedule schedule; /* the run's learning rates; optimizer_step is where it stands */
    float input_scale;   /* the normalization the model was trained with */
    float input_shift;
    float *params;       /* shape.param_count */
    float *state;        /* state_arrays * shape.param_count */
} checkpoint;

/* Replaces the file at path with c, crash-safely (see above and atomic_file.h). On failure the
 * target is as it was, no temporary file is left, and err holds "PATH: problem". */
bool checkpoint_save(const char *path, const checkpoint *c, char *err, size_t err_size);

/* Writes c in the format above to out; false (errno set) if a write fails. No file handling:
 * checkpoint_save is the way to write a file. */
bool checkpoint_write(FILE *out, const checkpoint *c);

/* Reads and validates a checkpoint (magic, version, sizes against the file's length, checksum).
 * On success c->params and c->state are malloc'd; checkpoint_free releases them. */
bool checkpoint_load(const char *path, checkpoint *c, char *err, size_t err_size);

void checkpoint_free(checkpoint *c);

#endif

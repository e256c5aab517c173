/* When the fused implementation trains an epoch with its persistent kernel rather than with the
 * recorded tiled step: where the kernel is faster. Plain C, so the program's default
 * implementation (app/main.c) and the fused pass (fused_pass.cu) read the same rule.
 *
 * Each block of the persistent kernel reads the whole batch's pixels for its few hidden units,
 * so its step grows with batch × blocks, while the tiled step grows little below batch 512.
 * Measured, 784-H-10 on one H200, 4 epochs each, same run (2026-11-26): the kernel is faster at
 * batch 32, 64 and 128 for H = 64 to 512 (1.13-1.63x) and at 32 and 64 for H = 1024, and slower
 * everywhere else measured (batch 256 and 512; 128 with H = 1024: 0.50-0.88x). */
#ifndef MLP_FUSED_RULE_H
#define MLP_FUSED_RULE_H

#include <stdbool.h>

enum { FUSED_WHOLE_EPOCH_MAX_BATCH = 128, FUSED_WHOLE_EPOCH_MAX_ROWS_BY_UNITS = 128 * 512 };

static inline bool fused_whole_epoch_pays(int batch, int hidden) {
    return batch <= FUSED_WHOLE_EPOCH_MAX_BATCH &&
           (long)batch * hidden <= FUSED_WHOLE_EPOCH_MAX_ROWS_BY_UNITS;
}

#endif

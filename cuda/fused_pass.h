/* The fused implementation's host side: whether the persistent kernel (kernels/fused_mlp.cu) can
 * train a model, and running a pass with it. Fills the optional pass_supported / run_pass
 * entries of the operation table (backend.h). */
#ifndef MLP_FUSED_PASS_H
#define MLP_FUSED_PASS_H

#include <cstddef>

#include "core/backend.h"

struct fused_pass;

fused_pass *fused_pass_create(void);
void fused_pass_destroy(fused_pass *fused);

/* Whether the kernel trains this pass: it can hold the model and read the feed, and it is faster
 * than the recorded step for this batch and width (fused_rule.h) unless whole_always; if not,
 * why (one line). */
bool fused_pass_supported(backend *be, const training_pass *pass, char *why, size_t why_size);

/* always: the kernel wherever it can run, also where the recorded step is faster (to study or
 * test the kernel there). Off at creation. */
void fused_pass_whole_always(fused_pass *fused, bool always);

/* Runs the whole pass in one launch; queued on the backend's stream. */
void fused_pass_run(backend *be, const training_pass *pass);

#endif

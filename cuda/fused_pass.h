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

/* Whether the kernel can hold this model and read this feed; if not, why (one line). */
bool fused_pass_supported(backend *be, const training_pass *pass, char *why, size_t why_size);

/* Runs the whole pass in one launch; queued on the backend's stream. */
void fused_pass_run(backend *be, const training_pass *pass);

#endif

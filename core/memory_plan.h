/* What a training run will need in memory, item by item, checked before anything is
 * allocated. On Linux a large malloc usually succeeds and fails only when its pages are
 * touched, and then the kernel's OOM killer ends the process (or another one) with no message;
 * an allocation that does fail names only a byte count. So the run's footprint is estimated up
 * front from the model's shape and compared with what the machine has, and a run that cannot
 * fit is refused with a message naming the items that did not fit.
 * The estimate follows the allocations of trainer.c, model.c and optimizer.c (the large ones;
 * small ones are below the estimate's precision). */
#ifndef MLP_MEMORY_PLAN_H
#define MLP_MEMORY_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "core/model.h"

#define MEMORY_PLAN_MAX_ITEMS 12

typedef struct {
    const char *what; /* "parameters", "gradients", ... */
    size_t bytes;
} memory_item;

typedef struct {
    memory_item items[MEMORY_PLAN_MAX_ITEMS];
    int count;
    size_t total; /* saturates at SIZE_MAX */
} memory_plan;

/* Adds an item (sizes saturate rather than wrap). */
void memory_plan_add(memory_plan *plan, const char *what, size_t bytes);

/* What the trainer allocates in its backend's memory (host memory for the CPU, GPU memory for
 * the GPU) for a model of this shape: parameters, gradients, the optimizer's state_arrays
 * arrays, each layer's activations and the two layer-gradient buffers for batches of
 * trainer_max_rows(batch) rows, the batch inputs, and the per-sample metrics of both passes. */
void memory_plan_trainer(memory_plan *plan, const mlp_shape *shape, int batch, int state_arrays,
                         int train_count, int test_count);

/* True if plan fits in available bytes. Otherwise writes into err, e.g.
 *   "the model 784-60000-60000-10 needs about 44.0 GB of host memory (parameters 14.6 GB,
 *    gradients 14.6 GB, ...), and 3.8 GB is available"
 * where `what` is "the model 784-60000-60000-10" and `where` is "host memory". */
bool memory_plan_fits(const memory_plan *plan, size_t available, const char *what,
                      const char *where, char *err, size_t err_size);

/* Bytes this process can still allocate on the host: the smaller of the kernel's MemAvailable
 * and what the address-space limit (ulimit -v) leaves. SIZE_MAX when neither is known. */
size_t host_memory_available(void);

#endif

/* The GPU implementations (naive CUDA, tiled CUDA, cuBLAS) behind the operation table of
 * core/backend.h. This header is C: the rest of the program is. */
#ifndef MLP_GPU_BACKEND_H
#define MLP_GPU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this machine has a GPU CUDA can use. Absent: no NVIDIA driver, or no device; broken:
 * a driver is installed but CUDA fails (a driver older than the runtime, a device in a bad
 * state). Where not present, `why` says why. */
device_presence gpu_probe(char *why, size_t why_size);

/* CUDA devices this process can use (0 where there is no driver or no device). */
int gpu_device_count(void);

/* impl "naive", "tiled", "blas" or "fused" on CUDA device `device` (0 alone; a rank's place on
 * its host under mpirun), its GEMMs multiplying in `precision` (tiled, blas and fused: FP32, TF32
 * or BF16; naive: FP32 only); NULL for another name or a precision the implementation lacks.
 * Exits with a message if the device cannot be set up. */
backend *gpu_backend_create(const char *impl, int device, gemm_precision precision);

/* --impl fused: the persistent kernel wherever it can train the pass (always), or only where it
 * is faster than the recorded step (fused_rule.h; the default). Nothing for other impls. */
void gpu_backend_fused_whole_always(backend *be, bool always);

/* Makes device the calling thread's current CUDA device (gpu_backend_create does so only for
 * the thread that calls it). */
void gpu_use_device(int device);

#ifdef __cplusplus
}
#endif

#endif

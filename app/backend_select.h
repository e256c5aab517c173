/* Choosing an implementation by device and name, and finding out whether a GPU is there. */
#ifndef MLP_BACKEND_SELECT_H
#define MLP_BACKEND_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h"

/* Whether this build has CUDA and this machine a GPU it can use; where not, why not in `why`:
 * absent (no GPU, or a build without CUDA), or broken (a GPU that CUDA fails on). */
device_presence gpu_presence(char *why, size_t why_size);

/* The rule for --precision, in one place: FP32 everywhere; TF32 and BF16 only on the GPU's
 * tiled, blas and fused implementations (the CPU and the naive kernels multiply in FP32 only).
 * device or impl NULL: not chosen yet (then only what is known is checked). False, with the
 * reason in `why`, where the combination cannot multiply in `precision`. */
bool precision_supported(const char *device, const char *impl, gemm_precision precision, char *why,
                         size_t why_size);

/* device "cpu" or "gpu", impl "naive", "tiled" or "blas" ("fused" on the GPU), its GEMMs
 * multiplying in `precision` (the CPU and the naive kernels: FP32 only). NULL, with the reason in
 * err, if the combination cannot be had here. On the GPU each rank of a host takes its
 * own device: the rank's place on the host (device 0 alone). */
backend *backend_create(const char *device, const char *impl, gemm_precision precision,
                        char *err, size_t err_size);

/* --fused-pass whole: --impl fused trains with its persistent kernel wherever that can run, not
 * only where it is faster than the recorded step. Nothing for other implementations. */
void backend_fused_whole_always(backend *be, bool always);

/* Makes the calling thread one that may drive be: on the GPU, CUDA's current device is the
 * calling thread's own, and be may have been created on another thread. */
void backend_bind_this_thread(const backend *be);

/* How GPU ranks sum their gradients (--allreduce): NCCL; the hand-written p2p all-reduce, where
 * every rank's GPU can read every other's (one host, peer access); auto: p2p where it can run,
 * else NCCL. The CPU's ranks always use MPI. */
typedef enum { ALLREDUCE_AUTO, ALLREDUCE_NCCL, ALLREDUCE_P2P } allreduce_choice;

/* Under mpirun (distributed_launched), makes be one of the ranks: the gradients are summed across
 * them, with MPI on the CPU and `choice` on the GPU. Does nothing for a process alone. False, with
 * the reason in err, where the choice cannot run here (a build without NCCL, GPUs without peer
 * access, a choice for the GPU on the CPU). Every rank calls it, with the same choice. */
bool backend_join_ranks(backend *be, allreduce_choice choice, char *err, size_t err_size);

#endif

/* The GPU backend as one of several ranks: its gradients summed across them by an NCCL all-reduce
 * on the backend's stream, one GPU per rank. Built only where NCCL is found (MLP_HAVE_NCCL). */
#ifndef MLP_GPU_NCCL_H
#define MLP_GPU_NCCL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gpu_nccl;

/* Makes be (a GPU backend) one of the ranks distributed_start joined: sets up the NCCL
 * communicator, its unique id sent from rank 0 by MPI, and fills in all_reduce_sum. Every rank
 * calls it. Exits with a message where NCCL fails. */
void gpu_backend_join(backend *be);

/* Ends the communicator (from the backend's destroy). */
void gpu_nccl_leave(struct gpu_nccl *nccl);

#ifdef __cplusplus
}
#endif

#endif

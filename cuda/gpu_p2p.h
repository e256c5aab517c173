/* The GPU backend as one of several ranks on one host, its gradients summed by a hand-written
 * all-reduce that reads the other GPUs' memory over NVLink or PCIe (--allreduce p2p), beside
 * NCCL's (gpu_nccl.h). Built where MPI is (MLP_HAVE_MPI): MPI passes the CUDA IPC handles once. */
#ifndef MLP_GPU_P2P_H
#define MLP_GPU_P2P_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gpu_p2p;

/* Whether every rank's GPU can read every other's: all ranks on this host, each pair with peer
 * access. The same answer on every rank; where false, why names the pair or the hosts. Every
 * rank calls it. */
bool gpu_p2p_possible(char *why, size_t why_size);

/* Makes be (a GPU backend) one of the ranks distributed_start joined, with the p2p all-reduce in
 * all_reduce_sum. Its buffers are set up at its first call (which must not be recorded: the
 * trainer's warm-up makes it). Every rank calls it. */
void gpu_backend_join_p2p(backend *be);

/* After the host has waited for the device: exits with a message where an all-reduce gave up
 * waiting for a rank (MLP_P2P_TIMEOUT_S seconds, 60 by default; 0 waits for ever). */
void gpu_p2p_check(const struct gpu_p2p *p2p);

/* Unmaps the peers' buffers and frees this rank's (from the backend's destroy). */
void gpu_p2p_leave(struct gpu_p2p *p2p);

#ifdef __cplusplus
}
#endif

#endif

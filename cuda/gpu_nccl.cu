/* NCCL for the GPU backend (see gpu_nccl.h). The communicator is set up once, through MPI: rank 0
 * asks NCCL for a unique id, MPI broadcasts it, and every rank joins with it on its own GPU (the
 * backend's device, its place on the host). The all-reduce is queued on the backend's stream like
 * any kernel, so it runs inside a recorded step too: NCCL supports capture into CUDA graphs (since
 * NCCL 2.9), in the thread-local capture mode the backend uses, provided every rank records and
 * replays the same collectives in the same order, which every rank's trainer does. */
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#include "core/distributed.h"
#include "libs/cuda_check.h"
#include "cuda/gpu_nccl.h"
#include "cuda/gpu_state.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 9, 0)
#error "NCCL 2.9 or later is needed: earlier ones cannot be captured into CUDA graphs"
#endif

struct gpu_nccl {
    ncclComm_t comm;
    char name[48]; /* "NCCL 2.28.9 all-reduce": all_reduce_name */
};

namespace {

/* NCCL's own account of its last error, where it keeps one (2.13 on). */
const char *last_error(ncclComm_t comm) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    return ncclGetLastError(comm);
#else
    (void)comm;
    return nullptr;
#endif
}

[[noreturn]] void nccl_fail(const char *call, ncclResult_t status, ncclComm_t comm,
                            const char *file, int line) {
    const char *detail = last_error(comm);
    std::fprintf(stderr, "mlp_train: rank %d of %d: NCCL error: %s%s%s\n  in %s\n  at %s:%d\n",
                 distributed_rank(), distributed_ranks(), ncclGetErrorString(status),
                 detail && *detail ? ": " : "", detail ? detail : "", call, file, line);
    std::exit(1); /* distributed.c's exit hook ends the other ranks */
}

#define NCCL_CHECK(call, comm)                                                                     \
    do {                                                                                           \
        ncclResult_t status_ = (call);                                                             \
        if (status_ != ncclSuccess) nccl_fail(#call, status_, comm, __FILE__, __LINE__);           \
    } while (0)

void all_reduce_sum(backend *be, float *data, size_t n) {
    gpu_state *gpu = gpu_of(be);
    gpu_narrow_copies_written(&gpu->narrow_copies, data, n * sizeof(float));
    gpu_join_output_sums(gpu); /* the gradients include the output layer's sums */
    gpu_join_reduces(gpu);     /* every rank's calls run one after the other, in order */
    NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat, ncclSum, gpu->nccl->comm, gpu->stream),
               gpu->nccl->comm);
}

/* The same on reduce_stream, beside the stream's work from here on. */
void all_reduce_start(backend *be, float *data, size_t n) {
    gpu_state *gpu = gpu_of(be);
    gpu_narrow_copies_written(&gpu->narrow_copies, data, n * sizeof(float));
    cudaStream_t side = gpu_fork_reduce(gpu);
    NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat, ncclSum, gpu->nccl->comm, side),
               gpu->nccl->comm);
    gpu_reduce_queued(gpu);
}

/* Each shard summed onto its rank (ncclReduce, root r for shard r), in one group: the shards may
 * differ in size, where ncclReduceScatter wants them equal. */
void reduce_scatter_sum(backend *be, float *data, size_t n) {
    gpu_state *gpu = gpu_of(be);
    gpu_narrow_copies_written(&gpu->narrow_copies, data, n * sizeof(float));
    gpu_join_output_sums(gpu);
    gpu_join_reduces(gpu);
    ncclComm_t comm = gpu->nccl->comm;
    NCCL_CHECK(ncclGroupStart(), comm);
    for (int r = 0; r < be->ranks; r++) {
        size_t first = shard_begin(n, r, be->ranks);
        size_t count = shard_begin(n, r + 1, be->ranks) - first;
        if (count == 0) continue; /* an empty shard (the last may be): the same on every rank */
        NCCL_CHECK(ncclReduce(data + first, data + first, count, ncclFloat, ncclSum, r, comm,
                              gpu->stream),
                   comm);
    }
    NCCL_CHECK(ncclGroupEnd(), comm);
}

/* Each shard from its rank to every rank (ncclBroadcast, root r for shard r), in one group. */
void all_gather(backend *be, float *data, size_t n) {
    gpu_state *gpu = gpu_of(be);
    ncclComm_t comm = gpu->nccl->comm;
    NCCL_CHECK(ncclGroupStart(), comm);
    for (int r = 0; r < be->ranks; r++) {
        size_t first = shard_begin(n, r, be->ranks);
        size_t count = shard_begin(n, r + 1, be->ranks) - first;
        if (count == 0) continue;
        NCCL_CHECK(ncclBroadcast(data + first, data + first, count, ncclFloat, r, comm,
                                 gpu->stream),
                   comm);
    }
    NCCL_CHECK(ncclGroupEnd(), comm);
    gpu_refresh_narrow_copies(gpu, data, n * sizeof(float)); /* the shards of the others */
}

} // namespace

void gpu_backend_join(backend *be) {
    gpu_state *gpu = gpu_of(be);
    gpu_nccl *nccl = new gpu_nccl{};
    ncclUniqueId id{};
    if (distributed_rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
    distributed_broadcast(&id, sizeof id);
    NCCL_CHECK(ncclCommInitRank(&nccl->comm, distributed_ranks(), id, distributed_rank()), nullptr);
    int version = 0;
    NCCL_CHECK(ncclGetVersion(&version), nccl->comm);
    std::snprintf(nccl->name, sizeof nccl->name, "NCCL %d.%d.%d all-reduce", version / 10000,
                  version / 100 % 100, version % 100);
    gpu->nccl = nccl;
    be->rank = distributed_rank();
    be->ranks = distributed_ranks();
    be->all_reduce_sum = all_reduce_sum;
    be->all_reduce_start = all_reduce_start;
    be->all_reduce_finish = gpu_all_reduce_finish;
    be->reduce_scatter_sum = reduce_scatter_sum;
    be->all_gather = all_gather;
    be->all_reduce_name = nccl->name;
}

void gpu_nccl_leave(gpu_nccl *nccl) {
    NCCL_CHECK(ncclCommDestroy(nccl->comm), nccl->comm);
    delete nccl;
}

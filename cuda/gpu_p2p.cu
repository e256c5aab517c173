/* The p2p all-reduce's set-up (see gpu_p2p.h; the kernel is kernels/p2p_all_reduce.cu).
 *
 * Each rank allocates one block of device memory: its flags (P2P_MAX_RANKS × P2P_BLOCKS marks,
 * which the peers write) and two staging buffers of `capacity` floats (which the peers read). It
 * exports the block as a CUDA IPC handle; MPI gathers every rank's handle, and each rank maps its
 * peers' blocks into its own address space (cudaIpcOpenMemHandle, which enables peer access).
 * From then on the all-reduce is one kernel on the backend's stream, recordable in a CUDA graph:
 * its arguments (the mapped addresses) never change, and the call count it needs lives in
 * device memory. The kernel's flag waits are bounded: where a rank stops answering, the kernel
 * records it in host memory, and the host reports it after its next wait for the device. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/distributed.h"
#include "cuda/gpu_p2p.h"
#include "cuda/gpu_state.h"
#include "libs/cuda_check.h"
#include "util/parse_number.h"

/* Messages of this many bytes or more go two-shot (measured on 2 H100s: docs/distributed.md);
 * MLP_P2P_TWO_SHOT_FROM (bytes) sets another threshold, for measuring. */
constexpr size_t TWO_SHOT_FROM_BYTES = 1 << 20;
constexpr double DEFAULT_TIMEOUT_S = 60.0;

struct gpu_p2p {
    int rank, ranks;
    size_t capacity;   /* floats in each staging buffer; 0 before the first call */
    void *block;       /* this rank's flags and staging buffers */
    void *mapped[P2P_MAX_RANKS]; /* the peers' blocks, mapped here; this rank's: block */
    unsigned long long *generation; /* P2P_BLOCKS call counts */
    p2p_failure *failure;           /* host memory the device writes */
    size_t two_shot_from;           /* bytes */
    unsigned long long timeout_ns;
    char name[64];
};

namespace {

constexpr size_t FLAGS_BYTES = sizeof(unsigned long long) * P2P_MAX_RANKS * P2P_BLOCKS;

/* A setting from the environment: a number of 0 or more, else fallback where it is unset. */
double env_number(const char *name, double fallback) {
    const char *text = std::getenv(name);
    double value = fallback;
    if (text && *text && !parse_double_in(text, 0.0, 1e18, &value)) {
        std::fprintf(stderr, "mlp_train: %s wants a number of 0 or more, not '%s'\n", name, text);
        std::exit(1);
    }
    return value;
}

void unmap(gpu_p2p *p) {
    if (!p->block) return;
    distributed_barrier(); /* no peer reads this rank's block any more */
    for (int r = 0; r < p->ranks; r++)
        if (r != p->rank && p->mapped[r]) CUDA_CHECK(cudaIpcCloseMemHandle(p->mapped[r]));
    distributed_barrier(); /* no peer has this rank's block mapped any more */
    CUDA_CHECK(cudaFree(p->block));
    p->block = nullptr;
    p->capacity = 0;
}

/* Blocks with staging buffers of at least n floats on every rank, flags and call counts at 0. */
void map_blocks(gpu_p2p *p, size_t n) {
    unmap(p);
    size_t staging_floats = (n + 63) / 64 * 64;
    void *block = gpu_alloc_or_exit(FLAGS_BYTES + 2 * staging_floats * sizeof(float));
    CUDA_CHECK(cudaMemset(block, 0, FLAGS_BYTES));
    CUDA_CHECK(cudaMemset(p->generation, 0, P2P_BLOCKS * sizeof *p->generation));
    CUDA_CHECK(cudaDeviceSynchronize()); /* zero before any peer can write a mark */
    cudaIpcMemHandle_t mine, all[P2P_MAX_RANKS];
    CUDA_CHECK(cudaIpcGetMemHandle(&mine, block));
    distributed_all_gather(&mine, all, sizeof mine);
    for (int r = 0; r < p->ranks; r++) {
        p->mapped[r] = block;
        if (r != p->rank)
            CUDA_CHECK(cudaIpcOpenMemHandle(&p->mapped[r], all[r], cudaIpcMemLazyEnablePeerAccess));
    }
    p->block = block;
    p->capacity = staging_floats;
}

p2p_all_reduce_args kernel_arguments(const gpu_p2p *p, float *data, size_t n,
                                     p2p_pattern pattern) {
    p2p_all_reduce_args a{};
    a.data = data;
    a.n = n;
    a.rank = p->rank;
    a.ranks = p->ranks;
    a.pattern = pattern;
    a.chunk_floats = shard_begin(n, 1, pattern == P2P_ONE_SHOT ? 1 : p->ranks);
    for (int r = 0; r < p->ranks; r++) {
        char *base = static_cast<char *>(p->mapped[r]);
        a.flags[r] = reinterpret_cast<unsigned long long *>(base);
        a.staging[r][0] = reinterpret_cast<const float *>(base + FLAGS_BYTES);
        a.staging[r][1] = a.staging[r][0] + p->capacity;
    }
    a.generation = p->generation;
    a.timeout_ns = p->timeout_ns;
    a.failure = p->failure;
    return a;
}

/* The whole sum: one-shot below two_shot_from bytes, two-shot from there. */
p2p_pattern all_reduce_pattern(const gpu_p2p *p, size_t n) {
    return p->ranks > 1 && n * sizeof(float) >= p->two_shot_from ? P2P_TWO_SHOT : P2P_ONE_SHOT;
}

/* Queues a call of the kernel on the stream, in order after the stream's work and every sum
 * started before. Buffers too small for n floats are made anew at a call not being recorded
 * (the trainer's warm-up sums the whole gradient). */
void queue_on_stream(backend *be, float *data, size_t n, p2p_pattern pattern) {
    gpu_state *gpu = gpu_of(be);
    gpu_p2p *p = gpu->p2p;
    gpu_join_output_sums(gpu); /* the gradients include the output layer's sums */
    gpu_join_reduces(gpu);     /* every rank's calls run one after the other, in order */
    if (n > p->capacity) {
        cudaStreamCaptureStatus capturing;
        CUDA_CHECK(cudaStreamIsCapturing(gpu->stream, &capturing));
        if (capturing != cudaStreamCaptureStatusNone) {
            std::fprintf(stderr, "mlp_train: internal error: the p2p all-reduce's first call of "
                                 "%zu floats is being recorded; it sets up its buffers\n", n);
            std::exit(1);
        }
        CUDA_CHECK(cudaStreamSynchronize(gpu->stream));
        map_blocks(p, n);
    }
    gpu_p2p_all_reduce(gpu->stream, kernel_arguments(p, data, n, pattern));
}

void all_reduce_sum(backend *be, float *data, size_t n) {
    gpu_narrow_copies_written(&gpu_of(be)->narrow_copies, data, n * sizeof(float));
    queue_on_stream(be, data, n, all_reduce_pattern(gpu_of(be)->p2p, n));
}

void reduce_scatter_sum(backend *be, float *data, size_t n) {
    gpu_narrow_copies_written(&gpu_of(be)->narrow_copies, data, n * sizeof(float));
    queue_on_stream(be, data, n, P2P_REDUCE_SCATTER);
}

void all_gather(backend *be, float *data, size_t n) {
    queue_on_stream(be, data, n, P2P_ALL_GATHER);
    gpu_refresh_narrow_copies(gpu_of(be), data, n * sizeof(float)); /* the shards of the others */
}

/* The same on reduce_stream, beside the stream's work from here on: after the warm-up's call of
 * the whole gradient (trainer.c), so the buffers hold any layer's. */
void all_reduce_start(backend *be, float *data, size_t n) {
    gpu_narrow_copies_written(&gpu_of(be)->narrow_copies, data, n * sizeof(float));
    gpu_state *gpu = gpu_of(be);
    gpu_p2p *p = gpu->p2p;
    if (n > p->capacity) {
        std::fprintf(stderr, "mlp_train: internal error: the p2p all-reduce started on %zu floats "
                             "before its buffers were set up\n", n);
        std::exit(1);
    }
    gpu_p2p_all_reduce(gpu_fork_reduce(gpu),
                       kernel_arguments(p, data, n, all_reduce_pattern(p, n)));
    gpu_reduce_queued(gpu);
}

} // namespace

bool gpu_p2p_possible(char *why, size_t why_size) {
    int ranks = distributed_ranks();
    if (ranks > P2P_MAX_RANKS) {
        std::snprintf(why, why_size, "the p2p all-reduce joins at most %d ranks, not %d",
                      P2P_MAX_RANKS, ranks);
        return false;
    }
    if (distributed_local_ranks() != ranks) {
        std::snprintf(why, why_size, "the ranks are on more than one host");
        return false;
    }
    int device, devices[P2P_MAX_RANKS];
    CUDA_CHECK(cudaGetDevice(&device));
    distributed_all_gather(&device, devices, sizeof device);
    int missing = -1; /* the first rank this one's GPU cannot read */
    for (int r = 0; r < ranks && missing < 0; r++) {
        int can = 1;
        if (devices[r] != device) CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, devices[r]));
        if (!can) missing = r;
    }
    int missings[P2P_MAX_RANKS];
    distributed_all_gather(&missing, missings, sizeof missing);
    for (int r = 0; r < ranks; r++)
        if (missings[r] >= 0) {
            std::snprintf(why, why_size, "GPU %d (rank %d) cannot read GPU %d's memory (rank %d)",
                          devices[r], r, devices[missings[r]], missings[r]);
            return false;
        }
    return true;
}

void gpu_backend_join_p2p(backend *be) {
    gpu_state *gpu = gpu_of(be);
    gpu_p2p *p = new gpu_p2p{};
    p->rank = distributed_rank();
    p->ranks = distributed_ranks();
    p->generation = static_cast<unsigned long long *>(
        gpu_alloc_or_exit(P2P_BLOCKS * sizeof(unsigned long long)));
    CUDA_CHECK(cudaHostAlloc(&p->failure, sizeof *p->failure, cudaHostAllocMapped));
    std::memset(p->failure, 0, sizeof *p->failure);
    p->two_shot_from = (size_t)env_number("MLP_P2P_TWO_SHOT_FROM", (double)TWO_SHOT_FROM_BYTES);
    p->timeout_ns = (unsigned long long)(env_number("MLP_P2P_TIMEOUT_S", DEFAULT_TIMEOUT_S) * 1e9);
    std::snprintf(p->name, sizeof p->name, "p2p all-reduce (CUDA IPC)");
    gpu->p2p = p;
    be->rank = p->rank;
    be->ranks = p->ranks;
    be->all_reduce_sum = all_reduce_sum;
    be->all_reduce_start = all_reduce_start;
    be->all_reduce_finish = gpu_all_reduce_finish;
    be->reduce_scatter_sum = reduce_scatter_sum;
    be->all_gather = all_gather;
    be->all_reduce_name = p->name;
}

void gpu_p2p_check(const gpu_p2p *p) {
    if (!p || !p->failure->failed) return;
    std::fprintf(stderr,
                 "mlp_train: rank %d of %d: the p2p all-reduce waited %.0f s for rank %d, which "
                 "did not arrive (it died or stalled); ending the job\n",
                 p->rank, p->ranks, p->timeout_ns / 1e9, p->failure->waited_for_rank);
    std::exit(1); /* distributed.c's exit hook ends the other ranks */
}

void gpu_p2p_leave(gpu_p2p *p) {
    unmap(p);
    CUDA_CHECK(cudaFree(p->generation));
    CUDA_CHECK(cudaFreeHost(p->failure));
    delete p;
}

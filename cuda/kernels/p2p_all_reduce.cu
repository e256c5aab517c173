/* The hand-written all-reduce of GPUs that read each other's memory (gpu_kernels.h has the
 * contract; cuda/gpu_p2p.cu sets it up), and its two halves. One launch of P2P_BLOCKS blocks;
 * block b of every rank handles the same elements and meets block b of the other ranks at each
 * barrier, so no block waits for the whole grid. The data move in 16-byte units (4 floats) where
 * the buffer allows.
 *
 * Per call, with g the call's number (the same on every block and rank), s = staging[g % 2] and
 * chunk k rank k's shard:
 *   one-shot:        s_mine = data;  barrier 2g;    data = sum over ranks k of s_k
 *   two-shot:        s_mine = data, but for chunk r (this rank's);  barrier 2g;
 *                    chunk r of data (and of s_mine) = sum over ranks k of chunk r of s_k;
 *                    barrier 2g+1;  chunk k of data = chunk k of s_k, for every other rank k
 *   reduce-scatter:  two-shot to its sum of chunk r, into data alone
 *   all-gather:      chunk r of s_mine = chunk r of data;  barrier 2g;
 *                    chunk k of data = chunk k of s_k, for every other rank k
 * The rank's own contribution is read from data, the others' from their staging, in rank order.
 *
 * Why two staging buffers: a peer may still be reading s_mine when this rank's next call starts
 * writing; the call after it cannot start writing s_mine again before every peer's block has
 * reached this rank's previous barrier, which each does only after its previous call ended. */
#include "libs/cuda_check.h"
#include "cuda/kernels/dependent_launch.cuh"
#include "cuda/kernels/gpu_kernels.h"

namespace {

constexpr int THREADS = 512;

__device__ __forceinline__ unsigned long long global_timer_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void store_release(unsigned long long *flag, unsigned long long value) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(flag), "l"(value) : "memory");
}

__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long *flag) {
    unsigned long long value;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(flag) : "memory");
    return value;
}

/* Block b tells every peer's block b that it reached `mark` (after this block's writes), then
 * waits until each has told it the same. One thread per peer. False where a wait timed out. */
__device__ bool barrier(const p2p_all_reduce_args &a, unsigned long long mark) {
    __syncthreads();
    bool timed_out = false;
    int peer = threadIdx.x;
    if (peer < a.ranks && peer != a.rank) {
        __threadfence_system();
        store_release(a.flags[peer] + a.rank * P2P_BLOCKS + blockIdx.x, mark);
        const unsigned long long *arrived = a.flags[a.rank] + peer * P2P_BLOCKS + blockIdx.x;
        unsigned long long start = global_timer_ns();
        while (!timed_out && load_acquire(arrived) < mark)
            if (a.timeout_ns && global_timer_ns() - start > a.timeout_ns) {
                *a.failure = p2p_failure{1, peer, mark};
                __threadfence_system();
                timed_out = true;
            }
    }
    return !__syncthreads_or(timed_out);
}

/* This block's part of chunk k of n floats, the chunk being cut into units of WIDTH floats (the
 * last unit possibly short) and those into P2P_BLOCKS slices: units [begin, end), unit u being
 * the floats from first + u·WIDTH. A chunk starts on a multiple of 4 floats, so 4-float units
 * stay aligned. */
struct slice {
    size_t first, begin, end;
};

template <int WIDTH> __device__ slice slice_of(const p2p_all_reduce_args &a, int k) {
    size_t first = k * a.chunk_floats, last = first + a.chunk_floats;
    first = first < a.n ? first : a.n;
    last = last < a.n ? last : a.n;
    size_t units = (last - first + WIDTH - 1) / WIDTH;
    size_t per_slice = (units + P2P_BLOCKS - 1) / P2P_BLOCKS;
    size_t begin = blockIdx.x * per_slice, end = begin + per_slice;
    return slice{first, begin < units ? begin : units, end < units ? end : units};
}

/* A unit of WIDTH floats at float offset i: whole (vector load and store) or, the last unit,
 * float by float up to n. */
template <int WIDTH> struct unit {
    float v[WIDTH];

    __device__ static unit load(const float *p, size_t i, size_t n, bool from_peer) {
        unit u;
        if constexpr (WIDTH == 4) {
            if (i + 4 <= n) {
                const float4 *q = reinterpret_cast<const float4 *>(p + i);
                float4 f = from_peer ? __ldcg(q) : *q;
                u.v[0] = f.x, u.v[1] = f.y, u.v[2] = f.z, u.v[3] = f.w;
                return u;
            }
        }
        for (int j = 0; j < WIDTH; j++)
            u.v[j] = i + j >= n ? 0.0f : from_peer ? __ldcg(p + i + j) : p[i + j];
        return u;
    }
    __device__ void store(float *p, size_t i, size_t n) const {
        if constexpr (WIDTH == 4) {
            if (i + 4 <= n) {
                *reinterpret_cast<float4 *>(p + i) = make_float4(v[0], v[1], v[2], v[3]);
                return;
            }
        }
        for (int j = 0; j < WIDTH && i + j < n; j++) p[i + j] = v[j];
    }
    __device__ void add(const unit &o) {
        for (int j = 0; j < WIDTH; j++) v[j] += o.v[j];
    }
};

/* dst[the slice's floats] = src[same] */
template <int WIDTH>
__device__ void copy_slice(const slice &s, size_t n, const float *src, bool from_peer, float *dst) {
    for (size_t u = s.begin + threadIdx.x; u < s.end; u += THREADS) {
        size_t i = s.first + u * WIDTH;
        unit<WIDTH>::load(src, i, n, from_peer).store(dst, i, n);
    }
}

/* data[the slice's floats] = sum over ranks, in rank order (own from data); also into mine if
 * not NULL (two-shot: the summed chunk the peers will copy). */
template <int WIDTH>
__device__ void sum_slice(const p2p_all_reduce_args &a, const slice &s, int parity, float *mine) {
    for (size_t u = s.begin + threadIdx.x; u < s.end; u += THREADS) {
        size_t i = s.first + u * WIDTH;
        unit<WIDTH> total = unit<WIDTH>::load(a.rank == 0 ? a.data : a.staging[0][parity], i, a.n,
                                              a.rank != 0);
#pragma unroll /* constant indices: the pointers stay in the parameter space */
        for (int r = 1; r < P2P_MAX_RANKS; r++)
            if (r < a.ranks)
                total.add(unit<WIDTH>::load(r == a.rank ? a.data : a.staging[r][parity], i, a.n,
                                            r != a.rank));
        total.store(a.data, i, a.n);
        if (mine) total.store(mine, i, a.n);
    }
}

template <int WIDTH>
__global__ void __launch_bounds__(THREADS) p2p_all_reduce_kernel(p2p_all_reduce_args a) {
    wait_for_previous_kernel();
    unsigned long long call = a.generation[blockIdx.x] + 1;
    int parity = int(call & 1);
    float *mine = const_cast<float *>(a.staging[a.rank][parity]);
    const bool one_shot = a.pattern == P2P_ONE_SHOT, gather = a.pattern == P2P_ALL_GATHER;
    const int chunks = one_shot ? 1 : a.ranks;
    /* what the peers read: one-shot all of data; all-gather this rank's chunk; the others every
     * chunk but this rank's, which each peer sums */
    for (int k = 0; k < chunks; k++)
        if (one_shot || (k == a.rank) == gather)
            copy_slice<WIDTH>(slice_of<WIDTH>(a, k), a.n, a.data, false, mine);
    if (!barrier(a, 2 * call)) return;
    if (!gather)
        sum_slice<WIDTH>(a, slice_of<WIDTH>(a, one_shot ? 0 : a.rank), parity,
                         a.pattern == P2P_TWO_SHOT ? mine : nullptr);
    if (a.pattern == P2P_TWO_SHOT && !barrier(a, 2 * call + 1)) return;
    if (a.pattern == P2P_TWO_SHOT || gather) {
#pragma unroll /* constant indices: the pointers stay in the parameter space */
        for (int k = 0; k < P2P_MAX_RANKS; k++)
            if (k < a.ranks && k != a.rank)
                copy_slice<WIDTH>(slice_of<WIDTH>(a, k), a.n, a.staging[k][parity], true, a.data);
    }
    if (threadIdx.x == 0) a.generation[blockIdx.x] = call;
}

} // namespace

void gpu_p2p_all_reduce(cudaStream_t stream, const p2p_all_reduce_args &args) {
    bool aligned = reinterpret_cast<uintptr_t>(args.data) % 16 == 0;
    if (aligned)
        launch_dependent(p2p_all_reduce_kernel<4>, P2P_BLOCKS, THREADS, 0, stream, 1, args);
    else
        launch_dependent(p2p_all_reduce_kernel<1>, P2P_BLOCKS, THREADS, 0, stream, 1, args);
}

/* Max pooling on the GPU, with the contract of bench/kernels/cpu_maxpool.h (whose maxpool_output_size
 * gives the output shape, so both sides agree on it).
 *
 * One thread per output element, numbered in output order (plane, oy, ox) with ox fastest:
 * the 32 threads of a warp write 32 consecutive floats (one coalesced 128-byte store) and read
 * the windows under them, which for stride s lie s floats apart along the same input rows, so a
 * warp's loads of one window row cover a contiguous stretch of 32·s floats; whatever a load
 * instruction fetches beyond its own elements is the next instruction's (k > 1), hit in L1. Each
 * input byte thus comes from memory about once and each output byte goes once: the kernel moves
 * the minimum traffic, and its speed is the memory bandwidth. Windows are clipped to the image
 * (padded positions never win), which handles padding, odd sizes and partial windows with no
 * special cases. The comparisons are those of the CPU version (`value > best`, so NaN never
 * wins): the results equal the CPU's exactly (only a window holding both +0 and -0 could
 * give either sign, which compare equal).
 *
 * The most common window, 2×2 with stride 2 and no padding, on images of even width, has a
 * kernel of its own: a window's two pixels of a row are adjacent and 8-byte aligned, so each
 * thread reads them with one float2 load per row, and a warp's load instruction covers 256
 * contiguous bytes that it uses whole, instead of two scalar instructions that each use half of
 * what they fetch. The comparisons are the same, in the same order.
 *
 * Index arithmetic is 32-bit whenever output indices fit in 32 bits (64-bit division is several
 * times dearer), 64-bit otherwise; the grid covers the output with a grid-stride loop. */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "libs/cuda_check.h"
#include "bench/kernels/cpu_maxpool.h"
#include "bench/kernels/gpu_bench_kernels.h"

namespace {

constexpr unsigned MAXPOOL_THREADS = 256;
constexpr unsigned MAXPOOL_MAX_BLOCKS = 1u << 20; /* beyond this, threads loop */

struct pool_geometry {
    int height, width, out_height, out_width;
    int kernel, stride, padding;
};

template <typename Index>
__global__ void maxpool_kernel(const float *__restrict__ in, float *__restrict__ out,
                               pool_geometry g, Index total) {
    const Index step = (Index)gridDim.x * blockDim.x;
    for (Index o = (Index)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += step) {
        int ox = (int)(o % (Index)g.out_width);
        Index rest = o / (Index)g.out_width;
        int oy = (int)(rest % (Index)g.out_height);
        Index plane = rest / (Index)g.out_height;
        int y0 = oy * g.stride - g.padding, x0 = ox * g.stride - g.padding;
        int y_begin = max(y0, 0), y_end = min(y0 + g.kernel, g.height);
        int x_begin = max(x0, 0), x_end = min(x0 + g.kernel, g.width);
        const float *image = in + (size_t)plane * g.height * g.width;
        float best = -INFINITY;
        for (int y = y_begin; y < y_end; y++) {
            const float *row = image + (size_t)y * g.width;
            for (int x = x_begin; x < x_end; x++) {
                float value = row[x];
                if (value > best) best = value;
            }
        }
        out[o] = best;
    }
}

/* Kernel 2, stride 2, padding 0, even width: each row of an image is out_width float2 pairs, and
 * output (oy, ox) is the maximum of pair ox of rows 2·oy and 2·oy + 1. */
template <typename Index>
__global__ void maxpool_2x2_kernel(const float2 *__restrict__ in, float *__restrict__ out,
                                   int height, int out_height, int out_width, Index total) {
    const Index step = (Index)gridDim.x * blockDim.x;
    for (Index o = (Index)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += step) {
        int ox = (int)(o % (Index)out_width);
        Index rest = o / (Index)out_width;
        int oy = (int)(rest % (Index)out_height);
        Index plane = rest / (Index)out_height;
        const float2 *top = in + ((size_t)plane * height + 2 * oy) * out_width + ox;
        float2 upper = top[0], lower = top[out_width];
        float best = -INFINITY;
        if (upper.x > best) best = upper.x;
        if (upper.y > best) best = upper.y;
        if (lower.x > best) best = lower.x;
        if (lower.y > best) best = lower.y;
        out[o] = best;
    }
}

template <typename Index>
void launch(cudaStream_t stream, const float *in, float *out, const pool_geometry &g,
            size_t total) {
    unsigned blocks =
        (unsigned)std::min<size_t>(blocks_for(total, MAXPOOL_THREADS), MAXPOOL_MAX_BLOCKS);
    bool two_by_two = g.kernel == 2 && g.stride == 2 && g.padding == 0 && g.width % 2 == 0 &&
                      reinterpret_cast<uintptr_t>(in) % sizeof(float2) == 0;
    if (two_by_two)
        maxpool_2x2_kernel<Index><<<blocks, MAXPOOL_THREADS, 0, stream>>>(
            reinterpret_cast<const float2 *>(in), out, g.height, g.out_height, g.out_width,
            (Index)total);
    else
        maxpool_kernel<Index><<<blocks, MAXPOOL_THREADS, 0, stream>>>(in, out, g, (Index)total);
    CUDA_CHECK_LAUNCH();
}

} // namespace

void gpu_maxpool(cudaStream_t stream, const float *in, size_t planes, int height, int width,
                 int kernel, int stride, int padding, float *out) {
    pool_geometry g{height, width, 0, 0, kernel, stride, padding};
    if (!maxpool_output_size(height, width, maxpool_window{kernel, stride, padding}, &g.out_height,
                             &g.out_width)) {
        std::fprintf(stderr,
                     "gpu_maxpool: no output for a %dx%d image, kernel %d, stride %d, padding %d\n",
                     height, width, kernel, stride, padding);
        std::exit(1);
    }
    size_t total = planes * (size_t)g.out_height * (size_t)g.out_width;
    if (total == 0) return;
    if (total <= UINT32_MAX - (size_t)MAXPOOL_THREADS * MAXPOOL_MAX_BLOCKS)
        launch<uint32_t>(stream, in, out, g, total);
    else
        launch<uint64_t>(stream, in, out, g, total);
}

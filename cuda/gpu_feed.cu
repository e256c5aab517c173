/* Batch feeds on the GPU: how each batch's samples get to the device.
 *
 * resident (--data device, the default): the whole data set (bytes) is copied to the device
 *   once; each batch is gathered there from the pass's shuffled order by one kernel, which
 *   finds its batch through the pass cursor in device memory: so it can be recorded. The next
 *   batch is gathered ahead, on feed_stream beside the current step, into the other of two
 *   buffers (see next_resident).
 * host (--data host): each batch is gathered on the host into a staging buffer (pixel bytes,
 *   then labels), copied host→device, and converted to floats on the device. Bytes travel, not
 *   floats: a quarter of the traffic. The staging buffer is
 *   - pageable (plain malloc): the driver copies through its own pinned buffer, and
 *     cudaMemcpyAsync waits for the stream first, so the host stalls every step;
 *   - pinned (--pinned): the copy is a true asynchronous DMA;
 *   - pinned and overlapped (--overlap): the copy of batch s+1 runs on a second stream while
 *     batch s computes; events order the two streams (copied[b]: the compute stream waits for
 *     it; consumed[b]: the next copy into device buffer b waits for it).
 * Two staging buffers alternate, so the host fills one while the other may still be in flight.
 * Under --precision bf16 (tiled, fused) every batch also gets a BF16 copy in the same launch,
 * and under tf32 a copy of its TF32 values in FP16, where every normalized pixel value fits
 * (gpu_narrow_copies.h). */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/dataset.h"
#include "util/host_memory.h"
#include "util/tf32.h"
#include "libs/cuda_check.h"
#include "cuda/kernels/gpu_kernels.h"
#include "cuda/gpu_state.h"

struct batch_feed {
    backend *be;
    const dataset *data;
    int max_rows;
    feed_options options;
    int count;             /* samples in the current pass (at most data->count) */
    int position;          /* host feeds: next sample of the pass to hand out */
    float *x[2];           /* the batches handed out, max_rows × features on the device, and */
    uint8_t *y[2];         /* their labels; buffer 1 only where batches are gathered ahead */
    void *x_copy[2];       /* their 16-bit copies, written with them (nullptr: none) */

    /* resident */
    uint8_t *device_pixels, *device_labels;
    int32_t *device_order;
    int32_t *device_pass_rows;    /* the pass's count, on the device: where gathers ahead stop */
    int next_buffer;              /* the buffer of the next batch */
    bool gathered_ahead;          /* the next batch is in it, or being gathered there... */
    unsigned long ahead_serial;   /* ...by a gather queued under this capture_serial */
    unsigned ahead_blocks;        /* the grid of a gather ahead (see next_resident) */

    /* host */
    int32_t *host_order;
    uint8_t *host_stage[2];   /* rows × features pixels, then rows labels */
    uint8_t *device_stage[2];
    cudaEvent_t copied[2];    /* the copy into device_stage[b] is complete */
    cudaEvent_t consumed[2];  /* the batch in device_stage[b] has been converted */
    cudaStream_t copy_stream; /* --overlap */
    int buffer;               /* staging buffer of the next batch */
    int fetch_position;       /* --overlap: first sample not yet copied */
    int prefetched_rows;      /* --overlap: rows in flight into host_stage[buffer] */
};

namespace {

/* A gather ahead's blocks take at most this many rows each (see next_resident). */
constexpr int AHEAD_ROWS_PER_BLOCK = 40;

size_t stage_bytes(const batch_feed *f, int rows) {
    return (size_t)rows * f->data->features + (size_t)rows;
}

bool pinned(const batch_feed *f) { return f->options.placement == DATA_HOST_PINNED; }

void create_batch_buffer(batch_feed *f, int b) {
    const size_t floats = (size_t)f->max_rows * f->data->features;
    gpu_state *gpu = gpu_of(f->be);
    f->x[b] = static_cast<float *>(gpu_alloc_or_exit(floats * sizeof(float)));
    f->y[b] = static_cast<uint8_t *>(gpu_alloc_or_exit(f->max_rows));
    const gpu_narrow_format format = gpu->narrow_copies.format;
    const dataset *d = f->data;
    if (format == NARROW_NONE ||
        (format == NARROW_TF32_IN_FP16 && !gpu_pixels_fit_tf32_in_fp16(d->scale, d->shift)))
        return;
    f->x_copy[b] = gpu_alloc_or_exit(floats * sizeof(uint16_t)); /* BF16 or FP16 */
    gpu_narrow_copy_add_stale(&gpu->narrow_copies, f->x_copy[b], f->x[b], floats);
}

/* Where the gather writes batch b's copy: as BF16, or as FP16 (TF32 values); nullptr: none. */
__nv_bfloat16 *bf16_copy(const batch_feed *f, int b) {
    const bool bf16 = gpu_of(f->be)->narrow_copies.format == NARROW_BF16;
    return bf16 ? static_cast<__nv_bfloat16 *>(f->x_copy[b]) : nullptr;
}
__half *tf32_copy(const batch_feed *f, int b) {
    const bool tf32 = gpu_of(f->be)->narrow_copies.format == NARROW_TF32_IN_FP16;
    return tf32 ? static_cast<__half *>(f->x_copy[b]) : nullptr;
}

/* Batch b's rows (and their copy's) have just been queued for writing. */
void batch_written(batch_feed *f, int b, int rows) {
    if (f->x_copy[b])
        gpu_narrow_copy_bind(&gpu_of(f->be)->narrow_copies, f->x_copy[b], f->x[b], (size_t)rows * f->data->features);
}

void create_resident(batch_feed *f) {
    const dataset *d = f->data;
    size_t pixel_bytes = (size_t)d->count * d->features;
    f->device_pixels = static_cast<uint8_t *>(gpu_alloc_or_exit(pixel_bytes));
    f->device_labels = static_cast<uint8_t *>(gpu_alloc_or_exit(d->count));
    f->device_order = static_cast<int32_t *>(gpu_alloc_or_exit((size_t)d->count * sizeof(int32_t)));
    f->device_pass_rows = static_cast<int32_t *>(gpu_alloc_or_exit(sizeof(int32_t)));
    create_batch_buffer(f, 0);
    if (gpu_of(f->be)->gather_ahead) {
        create_batch_buffer(f, 1);
        int device, sms;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        const unsigned quarter = (unsigned)(sms + 3) / 4;
        const unsigned by_rows = blocks_for(f->max_rows, AHEAD_ROWS_PER_BLOCK);
        f->ahead_blocks = quarter > by_rows ? quarter : by_rows;
    }
    f->be->upload(f->be, f->device_pixels, d->pixels, pixel_bytes);
    f->be->upload(f->be, f->device_labels, d->labels, d->count);
}

void create_staging(batch_feed *f) {
    size_t bytes = stage_bytes(f, f->max_rows);
    create_batch_buffer(f, 0);
    f->host_order = static_cast<int32_t *>(
        alloc_or_exit((size_t)f->data->count * sizeof(int32_t), "the batch order"));
    for (int b = 0; b < 2; b++) {
        if (pinned(f)) {
            CUDA_CHECK(cudaMallocHost(&f->host_stage[b], bytes));
        } else {
            f->host_stage[b] = static_cast<uint8_t *>(alloc_or_exit(bytes, "the staging buffer"));
        }
        f->device_stage[b] = static_cast<uint8_t *>(gpu_alloc_or_exit(bytes));
        CUDA_CHECK(cudaEventCreateWithFlags(&f->copied[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&f->consumed[b], cudaEventDisableTiming));
    }
    if (f->options.overlap) CUDA_CHECK(cudaStreamCreateWithFlags(&f->copy_stream, cudaStreamNonBlocking));
}

/* Gathers samples [start, start + rows) of the pass into host_stage[b]. The copy that last read
 * that buffer must be complete first (it is long done unless the host runs far ahead). */
void gather_on_host(batch_feed *f, int b, int start, int rows) {
    const dataset *d = f->data;
    CUDA_CHECK(cudaEventSynchronize(f->copied[b]));
    uint8_t *pixels = f->host_stage[b];
    uint8_t *labels = pixels + (size_t)rows * d->features;
    for (int r = 0; r < rows; r++) {
        int sample = f->host_order[start + r];
        std::memcpy(pixels + (size_t)r * d->features, d->pixels + (size_t)sample * d->features,
                    d->features);
        labels[r] = d->labels[sample];
    }
}

void copy_stage(batch_feed *f, int b, int rows, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(f->device_stage[b], f->host_stage[b], stage_bytes(f, rows),
                               cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaEventRecord(f->copied[b], stream));
}

/* Converts the staged batch b into the floats and labels handed out, on the compute stream. */
void convert_stage(batch_feed *f, int b, int rows) {
    const dataset *d = f->data;
    const uint8_t *pixels = f->device_stage[b];
    const gpu_batch_source staged = {pixels, pixels + (size_t)rows * d->features, nullptr, nullptr,
                                     nullptr, 0};
    gpu_gather_normalize(gpu_of(f->be)->stream, staged, rows, d->features, d->scale, d->shift,
                         f->x[0], bf16_copy(f, 0), tf32_copy(f, 0), f->y[0], 0);
    batch_written(f, 0, rows);
}

/* --overlap: starts copying the next batch on the copy stream. */
void prefetch(batch_feed *f) {
    int rows = f->count - f->fetch_position;
    if (rows > f->max_rows) rows = f->max_rows;
    f->prefetched_rows = rows;
    if (rows <= 0) return;
    int b = f->buffer;
    gather_on_host(f, b, f->fetch_position, rows);
    CUDA_CHECK(cudaStreamWaitEvent(f->copy_stream, f->consumed[b], 0));
    copy_stage(f, b, rows, f->copy_stream);
    f->fetch_position += rows;
}

/* Gathers into buffer b, on `stream`, the batch `ahead` rows past the cursor's: max_rows rows
 * of the pass's order, or its rest. */
void gather_resident(batch_feed *f, cudaStream_t stream, int b, int rows, const pass_cursor *cursor,
                     int ahead, unsigned max_blocks) {
    const dataset *d = f->data;
    const gpu_batch_source source = {f->device_pixels, f->device_labels, f->device_order,
                                     f->device_pass_rows, cursor, ahead};
    gpu_gather_normalize(stream, source, rows, d->features, d->scale, d->shift, f->x[b],
                         bf16_copy(f, b), tf32_copy(f, b), f->y[b], max_blocks);
    batch_written(f, b, rows);
}

/* Forks the gather of the batch `ahead` rows past the cursor's into buffer b onto feed_stream,
 * once the stream has queued everything before this point; the stream joins it later
 * (batch_pending). */
void gather_beside(batch_feed *f, int b, const pass_cursor *cursor, int ahead) {
    gpu_state *gpu = gpu_of(f->be);
    CUDA_CHECK(cudaEventRecord(gpu->batch_wanted, gpu->stream));
    CUDA_CHECK(cudaStreamWaitEvent(gpu->feed_stream, gpu->batch_wanted, 0));
    gather_resident(f, gpu->feed_stream, b, f->max_rows, cursor, ahead, f->ahead_blocks);
    CUDA_CHECK(cudaEventRecord(gpu->batch_ready, gpu->feed_stream));
    gpu->batch_pending = true;
}

/* The batch at the cursor, and the next one gathered ahead, beside the step that uses this one:
 *
 *   stream:       ...update(s−1) | wait batch_ready(s) | forward(s) ... update(s) ...
 *                                 \ batch_wanted                      / joined first
 *   feed_stream:                   gather(s + 1) into the other buffer --- batch_ready(s + 1)
 *
 * gather(s + 1) starts once step s − 1, which read that buffer, is done, and reads the cursor
 * before update(s) moves it: everything that moves a cursor joins the side streams first
 * (gpu_join_side_streams), so it finds step s's batch there and takes the max_rows after it
 * (fewer at the pass's end: nothing past it). Batches come in order (backend.h), so that is
 * the next one (a batch shorter than max_rows is the pass's last, and has none). It runs in
 * ahead_blocks blocks, a quarter of the multiprocessors' worth, or one for each
 * AHEAD_ROWS_PER_BLOCK rows where that is more: the forward product's blocks, launched early
 * (dependent_launch.cuh) while update(s − 1) runs, are in place first, and the gather takes
 * threads they leave spare. Measured on an H200 (tiled, epoch ms, same run): 3.713 → 3.634 at
 * batch 512, 2.131 → 2.115 at 2048; a grid as large as the rows want gave 3.707 at 512, and one
 * of 16 blocks, too slow to finish within the step, 2.345 at 2048. The rows' share is for large
 * batches in short steps: a quarter's 33 blocks gathered 2048 rows in 44 µs of a 47 µs BF16 step,
 * which the update, joining the gather, waited for; 52 blocks took that epoch from 1.422 to
 * 1.370 ms on an H100 (docs/kernels.md).
 *
 * Where no gather ahead is usable (a pass's or a recording's first step), this batch and the
 * next are gathered on the stream, one after the other: a gather that starts beside the first
 * forward product, whose blocks wait for the gather before them, is placed first and slowed
 * that product from 28.6 to 48.2 µs. naive and blas gather each batch on the stream
 * (gpu_state::gather_ahead): beside cuBLAS's forward product, one wave of blocks, the gather
 * slowed it from 22.6 to 31.8 µs (blas, epoch at 2048: 3.05 → 3.40 ms), and naive's epoch at
 * 512 went 14.31 → 14.65 ms. */
batch_view next_resident(batch_feed *f, int rows, const pass_cursor *cursor) {
    gpu_state *gpu = gpu_of(f->be);
    const int b = f->next_buffer;
    if (!gpu->gather_ahead) {
        gather_resident(f, gpu->stream, b, rows, cursor, 0, 0);
        return {f->x[b], f->y[b], rows};
    }
    const bool last = rows < f->max_rows; /* the pass's last batch (backend.h): none follows */
    if (!f->gathered_ahead || f->ahead_serial != gpu->capture_serial) {
        gather_resident(f, gpu->stream, b, rows, cursor, 0, 0);
        if (!last) gather_resident(f, gpu->stream, b ^ 1, f->max_rows, cursor, rows, 0);
    } else {
        gpu_join_batch_ahead(gpu);
        if (!last) gather_beside(f, b ^ 1, cursor, rows);
    }
    f->next_buffer = b ^ 1;
    f->gathered_ahead = !last;
    f->ahead_serial = gpu->capture_serial;
    return {f->x[b], f->y[b], rows};
}

batch_view next_staged(batch_feed *f, int rows) {
    int b = f->buffer;
    gather_on_host(f, b, f->position, rows);
    copy_stage(f, b, rows, gpu_of(f->be)->stream);
    convert_stage(f, b, rows);
    f->buffer ^= 1;
    return {f->x[0], f->y[0], rows};
}

batch_view next_overlapped(batch_feed *f, int rows) {
    int b = f->buffer;
    if (rows != f->prefetched_rows) {
        std::fprintf(stderr, "mlp_train: internal error: asked for %d rows, %d were prefetched\n",
                     rows, f->prefetched_rows);
        std::exit(1);
    }
    cudaStream_t stream = gpu_of(f->be)->stream;
    CUDA_CHECK(cudaStreamWaitEvent(stream, f->copied[b], 0));
    convert_stage(f, b, rows);
    CUDA_CHECK(cudaEventRecord(f->consumed[b], stream));
    f->buffer ^= 1;
    prefetch(f);
    return {f->x[0], f->y[0], rows};
}

} // namespace

batch_feed *gpu_feed_create(backend *be, const dataset *data, int max_rows, feed_options options) {
    batch_feed *f = new batch_feed{};
    f->be = be;
    f->data = data;
    f->max_rows = max_rows;
    f->options = options;
    if (options.placement == DATA_RESIDENT)
        create_resident(f);
    else
        create_staging(f);
    return f;
}

/* order NULL: the last pass's order and count, which the device (resident) or the host order
 * still holds. Uploading MNIST's test order every epoch took 50 µs of a 0.28 ms test pass
 * (H100, batch 512). */
void gpu_feed_start_pass(batch_feed *f, const int32_t *order, int count) {
    if (order) f->count = count;
    size_t bytes = (size_t)f->count * sizeof(int32_t);
    f->position = 0;
    if (f->options.placement == DATA_RESIDENT) {
        if (order) {
            const int32_t pass_rows = count;
            f->be->upload(f->be, f->device_order, order, bytes); /* waits for any gather ahead */
            f->be->upload(f->be, f->device_pass_rows, &pass_rows, sizeof pass_rows);
        } else {
            gpu_join_side_streams(gpu_of(f->be)); /* the next gather waits for any gather ahead */
        }
        f->gathered_ahead = false;
        return;
    }
    if (order) std::memcpy(f->host_order, order, bytes);
    if (f->options.overlap) {
        f->fetch_position = 0;
        prefetch(f);
    }
}

/* The resident feed reads its batch's place from the cursor on the device; the host feeds
 * gather on the host, so they keep their own count of the rows handed out (the same place). */
batch_view gpu_feed_next(batch_feed *f, int rows, const pass_cursor *cursor) {
    if (f->options.placement == DATA_RESIDENT) return next_resident(f, rows, cursor);
    if (rows > f->max_rows || f->position + rows > f->count) {
        std::fprintf(stderr, "mlp_train: internal error: batch of %d rows past the feed's end\n", rows);
        std::exit(1);
    }
    batch_view batch = f->options.overlap ? next_overlapped(f, rows) : next_staged(f, rows);
    f->position += rows;
    return batch;
}

bool gpu_feed_recordable(const batch_feed *f) { return f->options.placement == DATA_RESIDENT; }

gpu_resident_data gpu_feed_resident_data(const batch_feed *f) {
    return {f->device_pixels, f->device_labels, f->device_order, f->data->count,
            f->data->features, f->data->scale, f->data->shift};
}

bool gpu_pixels_fit_tf32_in_fp16(float scale, float shift) {
    for (int pixel = 0; pixel <= UINT8_MAX; pixel++) {
        const float value = std::fabs(round_tf32(std::fmaf((float)pixel, scale, shift)));
        if (value != 0.0f && !(value >= 0x1p-14f && value <= 65504.0f)) return false;
    }
    return true;
}

void gpu_feed_destroy(batch_feed *f) {
    if (!f) return;
    gpu_join_side_streams(gpu_of(f->be)); /* a gather ahead writes this feed's buffers */
    CUDA_CHECK(cudaStreamSynchronize(gpu_of(f->be)->stream));
    if (f->copy_stream) {
        CUDA_CHECK(cudaStreamSynchronize(f->copy_stream));
        CUDA_CHECK(cudaStreamDestroy(f->copy_stream));
    }
    for (int b = 0; b < 2; b++) {
        if (f->x_copy[b]) gpu_narrow_copies_forget_copy(&gpu_of(f->be)->narrow_copies, f->x_copy[b]);
        CUDA_CHECK(cudaFree(f->x_copy[b]));
        CUDA_CHECK(cudaFree(f->x[b]));
        CUDA_CHECK(cudaFree(f->y[b]));
    }
    CUDA_CHECK(cudaFree(f->device_pixels));
    CUDA_CHECK(cudaFree(f->device_pass_rows));
    CUDA_CHECK(cudaFree(f->device_labels));
    CUDA_CHECK(cudaFree(f->device_order));
    for (int b = 0; b < 2; b++) {
        if (pinned(f)) CUDA_CHECK(cudaFreeHost(f->host_stage[b]));
        else std::free(f->host_stage[b]);
        CUDA_CHECK(cudaFree(f->device_stage[b]));
        if (f->copied[b]) CUDA_CHECK(cudaEventDestroy(f->copied[b]));
        if (f->consumed[b]) CUDA_CHECK(cudaEventDestroy(f->consumed[b]));
    }
    std::free(f->host_order);
    delete f;
}

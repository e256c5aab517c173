/* Batch feeds on the GPU: how each batch's samples get to the device.
 *
 * resident (--data device, the default): the whole data set (bytes) is copied to the device
 *   once; each batch is gathered there from the pass's shuffled order by one kernel, which
 *   finds its batch through the pass cursor in device memory: so it can be recorded.
 * host (--data host): each batch is gathered on the host into a staging buffer (pixel bytes,
 *   then labels), copied host→device, and converted to floats on the device. Bytes travel, not
 *   floats: a quarter of the traffic. The staging buffer is
 *   - pageable (plain malloc): the driver copies through its own pinned buffer, and
 *     cudaMemcpyAsync waits for the stream first, so the host stalls every step;
 *   - pinned (--pinned): the copy is a true asynchronous DMA;
 *   - pinned and overlapped (--overlap): the copy of batch s+1 runs on a second stream while
 *     batch s computes; events order the two streams (copied[b]: the compute stream waits for
 *     it; consumed[b]: the next copy into device buffer b waits for it).
 * Two staging buffers alternate, so the host fills one while the other may still be in flight. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../src/dataset.h"
#include "cuda_check.h"
#include "gpu_kernels.h"
#include "gpu_state.h"

struct batch_feed {
    backend *be;
    const dataset *data;
    int max_rows;
    feed_options options;
    int count;             /* samples in the current pass (at most data->count) */
    int position;          /* host feeds: next sample of the pass to hand out */
    float *x;              /* the batch handed out: max_rows × features, on the device */
    uint8_t *y;            /* its labels */

    /* resident */
    uint8_t *device_pixels, *device_labels;
    int32_t *device_order;

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

size_t stage_bytes(const batch_feed *f, int rows) {
    return (size_t)rows * f->data->features + (size_t)rows;
}

bool pinned(const batch_feed *f) { return f->options.placement == DATA_HOST_PINNED; }

void create_resident(batch_feed *f) {
    const dataset *d = f->data;
    size_t pixel_bytes = (size_t)d->count * d->features;
    f->device_pixels = static_cast<uint8_t *>(gpu_alloc_or_exit(pixel_bytes));
    f->device_labels = static_cast<uint8_t *>(gpu_alloc_or_exit(d->count));
    f->device_order = static_cast<int32_t *>(gpu_alloc_or_exit((size_t)d->count * sizeof(int32_t)));
    f->be->upload(f->be, f->device_pixels, d->pixels, pixel_bytes);
    f->be->upload(f->be, f->device_labels, d->labels, d->count);
}

void create_staging(batch_feed *f) {
    size_t bytes = stage_bytes(f, f->max_rows);
    f->host_order = static_cast<int32_t *>(std::malloc((size_t)f->data->count * sizeof(int32_t)));
    if (!f->host_order) {
        std::fprintf(stderr, "mlp_train: out of host memory for the batch order\n");
        std::exit(1);
    }
    for (int b = 0; b < 2; b++) {
        if (pinned(f)) {
            CUDA_CHECK(cudaMallocHost(&f->host_stage[b], bytes));
        } else {
            f->host_stage[b] = static_cast<uint8_t *>(std::malloc(bytes));
            if (!f->host_stage[b]) {
                std::fprintf(stderr, "mlp_train: out of host memory for the staging buffer\n");
                std::exit(1);
            }
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
    gpu_gather_normalize(gpu_of(f->be)->stream, pixels, pixels + (size_t)rows * d->features,
                         nullptr, nullptr, rows, d->features, d->scale, d->shift, f->x, f->y);
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

batch_view next_resident(batch_feed *f, int rows, const pass_cursor *cursor) {
    const dataset *d = f->data;
    gpu_gather_normalize(gpu_of(f->be)->stream, f->device_pixels, f->device_labels,
                         f->device_order, cursor, rows, d->features, d->scale, d->shift, f->x,
                         f->y);
    return {f->x, f->y, rows};
}

batch_view next_staged(batch_feed *f, int rows) {
    int b = f->buffer;
    gather_on_host(f, b, f->position, rows);
    copy_stage(f, b, rows, gpu_of(f->be)->stream);
    convert_stage(f, b, rows);
    f->buffer ^= 1;
    return {f->x, f->y, rows};
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
    return {f->x, f->y, rows};
}

} // namespace

batch_feed *gpu_feed_create(backend *be, const dataset *data, int max_rows, feed_options options) {
    batch_feed *f = new batch_feed{};
    f->be = be;
    f->data = data;
    f->max_rows = max_rows;
    f->options = options;
    f->x = static_cast<float *>(gpu_alloc_or_exit((size_t)max_rows * data->features * sizeof(float)));
    f->y = static_cast<uint8_t *>(gpu_alloc_or_exit(max_rows));
    if (options.placement == DATA_RESIDENT)
        create_resident(f);
    else
        create_staging(f);
    return f;
}

void gpu_feed_start_pass(batch_feed *f, const int32_t *order, int count) {
    size_t bytes = (size_t)count * sizeof(int32_t);
    f->count = count;
    f->position = 0;
    if (f->options.placement == DATA_RESIDENT) {
        f->be->upload(f->be, f->device_order, order, bytes);
        return;
    }
    std::memcpy(f->host_order, order, bytes);
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

void gpu_feed_destroy(batch_feed *f) {
    if (!f) return;
    CUDA_CHECK(cudaStreamSynchronize(gpu_of(f->be)->stream));
    if (f->copy_stream) {
        CUDA_CHECK(cudaStreamSynchronize(f->copy_stream));
        CUDA_CHECK(cudaStreamDestroy(f->copy_stream));
    }
    CUDA_CHECK(cudaFree(f->x));
    CUDA_CHECK(cudaFree(f->y));
    CUDA_CHECK(cudaFree(f->device_pixels));
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

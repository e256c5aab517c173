/* Loading a split (images and labels) from a directory of IDX files, and the input normalization
 * computed from the training set. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "core/dataset.h"

#include "core/idx.h"
#include "core/rng.h"
#include "util/host_memory.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Sanity bound on image rows and columns. */
#define DATASET_MAX_IMAGE_SIDE 4096
#define DATASET_PATH_SIZE 4096
#define PIXEL_MAX 255.0

static bool file_exists(const char *path) {
    struct stat info;
    return stat(path, &info) == 0;
}

/* Writes into path the file `name` in dir: the raw one if present, else the one with ".gz". */
static bool find_file(const char *dir, const char *name, char *path, char *err, size_t err_size) {
    size_t dir_length = strlen(dir);
    const char *separator = dir_length > 0 && dir[dir_length - 1] == '/' ? "" : "/";
    const char *suffixes[] = {"", ".gz"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        int length =
            snprintf(path, DATASET_PATH_SIZE, "%s%s%s%s", dir, separator, name, suffixes[i]);
        if (length < 0 || length >= DATASET_PATH_SIZE) {
            snprintf(err, err_size, "%s: path too long", dir);
            return false;
        }
        if (file_exists(path)) return true;
    }
    snprintf(err, err_size, "%s: found neither %s nor %s.gz (tools/fetch_data.sh downloads MNIST)",
             dir, name, name);
    return false;
}

static bool check_labels(const char *path, const idx_array *labels, char *err, size_t err_size) {
    if (labels->shape[0] > INT_MAX) {
        snprintf(err, err_size, "%s: %" PRIu32 " labels, more than the %d this program handles",
                 path, labels->shape[0], INT_MAX);
        return false;
    }
    for (size_t i = 0; i < labels->size; i++) {
        if (labels->data[i] >= DATASET_CLASSES) {
            snprintf(err, err_size, "%s: label %d at index %zu is not a class (0..%d)", path,
                     labels->data[i], i, DATASET_CLASSES - 1);
            return false;
        }
    }
    return true;
}

static bool check_images(const char *path, const idx_array *images, char *err, size_t err_size) {
    if (images->shape[1] > DATASET_MAX_IMAGE_SIDE || images->shape[2] > DATASET_MAX_IMAGE_SIDE) {
        snprintf(err, err_size,
                 "%s: images of %" PRIu32 " x %" PRIu32 " pixels, above the bound of %d x %d", path,
                 images->shape[1], images->shape[2], DATASET_MAX_IMAGE_SIDE,
                 DATASET_MAX_IMAGE_SIDE);
        return false;
    }
    return true;
}

static bool check_counts(const char *image_path, const idx_array *images, const char *label_path,
                         const idx_array *labels, char *err, size_t err_size) {
    if (images->shape[0] != labels->shape[0]) {
        snprintf(err, err_size,
                 "%s: count mismatch: %" PRIu32 " images, but %s has %" PRIu32 " labels",
                 image_path, images->shape[0], label_path, labels->shape[0]);
        return false;
    }
    return true;
}

/* Reads and checks both files; on success the caller owns images and labels. */
static bool read_split(const char *image_path, const char *label_path, idx_array *images,
                       idx_array *labels, char *err, size_t err_size) {
    if (!idx_read(label_path, 1, labels, err, err_size)) return false;
    bool ok = check_labels(label_path, labels, err, err_size) &&
              idx_read(image_path, 3, images, err, err_size) &&
              check_images(image_path, images, err, err_size) &&
              check_counts(image_path, images, label_path, labels, err, err_size);
    if (!ok) {
        idx_free(labels);
        idx_free(images);
    }
    return ok;
}

bool dataset_load(const char *dir, dataset_split split, dataset *out, char *err, size_t err_size) {
    memset(out, 0, sizeof *out);
    bool train = split == SPLIT_TRAIN;
    char image_path[DATASET_PATH_SIZE], label_path[DATASET_PATH_SIZE];
    if (!find_file(dir, train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte", image_path,
                   err, err_size) ||
        !find_file(dir, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte", label_path,
                   err, err_size))
        return false;
    idx_array images = {0}, labels = {0};
    if (!read_split(image_path, label_path, &images, &labels, err, err_size)) return false;
    out->count = (int)labels.shape[0];
    out->image_rows = (int)images.shape[1];
    out->image_cols = (int)images.shape[2];
    out->features = out->image_rows * out->image_cols;
    out->pixels = images.data;
    out->labels = labels.data;
    out->scale = (float)(1.0 / PIXEL_MAX);
    out->shift = 0.0f;
    return true;
}

/* Adds to histogram the count of each value among n pixels. Four tables of 32-bit counts, one
 * for each position modulo 4, summed at the end of each chunk: neighbouring pixels are often
 * equal (MNIST's black borders), and with one table each increment would wait for the one
 * before it (it took 90-145 ms of the start-up for MNIST's 47 million pixels; four: 25-35). */
static void count_pixel_values(const uint8_t *pixels, size_t n, uint64_t histogram[256]) {
    enum { TABLES = 4 };
    const size_t chunk_pixels = (size_t)1 << 31; /* each count stays under 2^29 */
    uint32_t counts[TABLES][256];
    for (size_t start = 0; start < n; start += chunk_pixels) {
        size_t end = n - start < chunk_pixels ? n : start + chunk_pixels, i = start;
        memset(counts, 0, sizeof counts);
        for (; i + TABLES <= end; i += TABLES) {
            counts[0][pixels[i]]++;
            counts[1][pixels[i + 1]]++;
            counts[2][pixels[i + 2]]++;
            counts[3][pixels[i + 3]]++;
        }
        for (; i < end; i++) counts[0][pixels[i]]++;
        for (int v = 0; v < 256; v++)
            histogram[v] += (uint64_t)counts[0][v] + counts[1][v] + counts[2][v] + counts[3][v];
    }
}

/* Mean and standard deviation of pixel/255, from a histogram of the 256 pixel values: the pixel
 * sum is exact in integers, so a constant image set gets a standard deviation of exactly 0. */
void dataset_normalization(const dataset *reference, float *scale, float *shift) {
    uint64_t histogram[256] = {0};
    size_t n = (size_t)reference->count * (size_t)reference->features;
    count_pixel_values(reference->pixels, n, histogram);
    uint64_t pixel_sum = 0;
    for (int v = 0; v < 256; v++) pixel_sum += (uint64_t)v * histogram[v];
    double pixel_mean = n ? (double)pixel_sum / (double)n : 0.0;
    double squares = 0.0;
    for (int v = 0; v < 256; v++)
        squares += (double)histogram[v] * (v - pixel_mean) * (v - pixel_mean);
    double mean = pixel_mean / PIXEL_MAX;
    double std = n ? sqrt(squares / (double)n) / PIXEL_MAX : 0.0;
    if (std == 0.0) std = 1.0;
    *scale = (float)(1.0 / (PIXEL_MAX * std));
    *shift = (float)(-mean / std);
}

void dataset_hold_out(dataset *data, int count, uint64_t seed, dataset *held_out) {
    int total = data->count, features = data->features;
    int32_t *order = alloc_or_exit((size_t)total * sizeof *order, "the held-out split");
    uint8_t *chosen = zalloc_or_exit((size_t)total, "the held-out split");
    rng draw = rng_create(seed, 2000u);
    rng_permutation(&draw, order, total);
    for (int i = 0; i < count; i++) chosen[order[i]] = 1;
    *held_out = *data;
    held_out->count = count;
    held_out->pixels = alloc_or_exit((size_t)count * features, "the held-out images");
    held_out->labels = alloc_or_exit((size_t)count, "the held-out labels");
    int kept = 0, out = 0;
    for (int i = 0; i < total; i++) { /* in file order on both sides */
        bool held = chosen[i];
        uint8_t *pixels = held ? held_out->pixels + (size_t)out * features
                               : data->pixels + (size_t)kept * features;
        memmove(pixels, data->pixels + (size_t)i * features, (size_t)features);
        if (held) held_out->labels[out++] = data->labels[i];
        else data->labels[kept++] = data->labels[i];
    }
    data->count = kept;
    free(order);
    free(chosen);
}

void dataset_free(dataset *d) {
    free(d->pixels);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

/* Reading IDX files, the format MNIST and Fashion-MNIST ship in, raw or gzip-compressed.
 *
 * An IDX file is a 4-byte magic (0, 0, type, dimension count), then one big-endian uint32 per
 * dimension, then the items. Only unsigned-byte files (type 0x08) are read here. */
#ifndef MLP_IDX_H
#define MLP_IDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest file accepted, in bytes of data: far above MNIST (47 MB) and below any absurd header. */
#define IDX_MAX_DATA_BYTES ((size_t)1 << 31)

typedef struct {
    int dims;            /* number of dimensions: 1 for labels, 3 for images */
    uint32_t shape[3];   /* shape[0] is the item count; shape[1], shape[2] the image rows, cols */
    uint8_t *data;       /* shape[0] * shape[1] * shape[2] bytes (unused dimensions are set to 1) */
    size_t size;         /* bytes in data */
} idx_array;

/* Reads an unsigned-byte IDX file with `expected_dims` dimensions from `path`; a gzip-compressed
 * file is recognized by its content, not its name. Validates the magic, the dimension count, the
 * sizes (no overflow, at most IDX_MAX_DATA_BYTES), that the file holds exactly that much data
 * (truncated data, trailing bytes and gzip CRC errors are failures).
 * On failure returns false, leaves *out empty and writes "PATH: what is wrong" into err. */
bool idx_read(const char *path, int expected_dims, idx_array *out, char *err, size_t err_size);

void idx_free(idx_array *a);

#endif

/* libFuzzer harness for idx_read (core/idx.c), raw and gzip. Each input is read as a 1-, 2- and
 * 3-dimensional IDX file. Properties checked besides the sanitizers' (memory errors, leaks,
 * undefined behaviour) and libFuzzer's own limits (time, memory):
 *   - a refusal says "PATH: problem";
 *   - an accepted file holds exactly the product of its dimensions in bytes, and an accepted
 *     raw (not gzip) file is exactly its header followed by those bytes. */
#include "fuzz_input.h"
#include "core/idx.h"

#define GZIP_FIRST_BYTE 0x1f

static uint32_t big_endian_u32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void check_accepted(const idx_array *a, int dims, const uint8_t *bytes, size_t size) {
    size_t product = (size_t)a->shape[0] * a->shape[1] * a->shape[2];
    if (a->dims != dims || a->size != product || !a->data)
        fuzz_fail("accepted", "dimensions, size and data disagree");
    if (size > 0 && bytes[0] == GZIP_FIRST_BYTE) return;
    size_t header = 4 + 4 * (size_t)dims;
    if (size != header + a->size) fuzz_fail("accepted raw file", "size is not header + data");
    for (int d = 0; d < dims; d++)
        if (a->shape[d] != big_endian_u32(bytes + 4 + 4 * d))
            fuzz_fail("accepted raw file", "shape differs from the header");
    if (memcmp(a->data, bytes + header, a->size) != 0)
        fuzz_fail("accepted raw file", "data differs from the file's bytes");
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size) {
    const char *path = fuzz_input_path(bytes, size);
    for (int dims = 1; dims <= 3; dims++) {
        idx_array a;
        char err[FUZZ_ERR_SIZE] = "";
        if (idx_read(path, dims, &a, err, sizeof err)) {
            check_accepted(&a, dims, bytes, size);
            idx_free(&a);
        } else {
            fuzz_check_refusal(path, err);
            if (a.data) fuzz_fail("refused", "data left allocated");
        }
    }
    return 0;
}

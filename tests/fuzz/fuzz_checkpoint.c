/* libFuzzer harness for checkpoint_load (core/checkpoint.c). Each input is loaded as it is, and
 * again with its last four bytes replaced by the right CRC-32, so the fuzzer also explores
 * what lies behind the checksum. Properties checked besides the sanitizers' (memory errors,
 * leaks, undefined behaviour) and libFuzzer's own limits (time, memory):
 *   - a refusal says "PATH: problem" and leaves no arrays allocated;
 *   - an accepted checkpoint, written back with checkpoint_write, gives the same bytes (the
 *     format has one encoding of each checkpoint, and the loader keeps every bit); a version 1
 *     checkpoint gives its version 2 encoding: a constant schedule, lr 0, inserted. */
#include "fuzz_input.h"
#include "core/checkpoint.h"

#include <zlib.h>

/* The version 2 encoding of a version 1 checkpoint (bytes, size): version 2, the schedule's 16
 * bytes of zeros after the four optimizer fields, the CRC-32 made again. */
static uint8_t *upgraded(const uint8_t *bytes, size_t size, size_t *upgraded_size) {
    uint32_t layers;
    memcpy(&layers, bytes + 12, 4);
    size_t at = 16 + 4 * ((size_t)layers + 1) + 16;
    *upgraded_size = size + 16;
    uint8_t *out = calloc(1, *upgraded_size);
    if (!out) fuzz_fail("calloc", "no memory for the upgraded checkpoint");
    memcpy(out, bytes, at);
    out[8] = 2;
    memcpy(out + at + 16, bytes + at, size - at - 4);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), out, (uInt)(*upgraded_size - 4));
    for (int i = 0; i < 4; i++) out[*upgraded_size - 4 + i] = (uint8_t)(crc >> (8 * i));
    return out;
}

static void check_written_back(const checkpoint *c, const uint8_t *bytes, size_t size) {
    uint8_t *expected = NULL;
    if (bytes[8] == 1) { /* version 1: loaded, so its header is whole */
        expected = upgraded(bytes, size, &size);
        bytes = expected;
    }
    char *written = NULL;
    size_t written_size = 0;
    FILE *out = open_memstream(&written, &written_size);
    if (!out) fuzz_fail("open_memstream", "no memory stream");
    bool ok = checkpoint_write(out, c);
    if (fclose(out) != 0 || !ok) fuzz_fail("checkpoint_write", "failed on a memory stream");
    if (written_size != size || memcmp(written, bytes, size) != 0)
        fuzz_fail("accepted checkpoint", "writing it back gives other bytes");
    free(expected);
    free(written);
}

static void check_load(const uint8_t *bytes, size_t size) {
    const char *path = fuzz_input_path(bytes, size);
    checkpoint c;
    char err[FUZZ_ERR_SIZE] = "";
    if (checkpoint_load(path, &c, err, sizeof err)) {
        check_written_back(&c, bytes, size);
        checkpoint_free(&c);
    } else {
        fuzz_check_refusal(path, err);
        if (c.params || c.state) fuzz_fail("refused", "arrays left allocated");
    }
}

/* bytes with the trailing CRC-32 made right for what precedes it; NULL if it already is. */
static uint8_t *with_right_crc(const uint8_t *bytes, size_t size) {
    if (size < 4) return NULL;
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), bytes, (uInt)(size - 4));
    uint8_t trailer[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16),
                          (uint8_t)(crc >> 24)};
    if (memcmp(bytes + size - 4, trailer, 4) == 0) return NULL;
    uint8_t *copy = malloc(size);
    if (!copy) fuzz_fail("malloc", "no memory for the input's copy");
    memcpy(copy, bytes, size - 4);
    memcpy(copy + size - 4, trailer, 4);
    return copy;
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size) {
    check_load(bytes, size);
    uint8_t *fixed = with_right_crc(bytes, size);
    if (fixed) {
        check_load(fixed, size);
        free(fixed);
    }
    return 0;
}

/* For the fuzz harnesses: idx_read and checkpoint_load read files by path, so each input is
 * written to an anonymous in-memory file (memfd) and read back through /proc/self/fd/N: the
 * real entry points are fuzzed, and nothing touches the disk. A harness that finds a property
 * broken calls fuzz_fail, which aborts: libFuzzer reports that as a crash, with the input. */
#ifndef MLP_FUZZ_INPUT_H
#define MLP_FUZZ_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_ERR_SIZE 1024

static void fuzz_fail(const char *why, const char *detail) {
    fprintf(stderr, "fuzz property broken: %s: %s\n", why, detail);
    abort();
}

/* A path that reads as the bytes given; valid until the next call. */
static const char *fuzz_input_path(const uint8_t *bytes, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz-input", MFD_CLOEXEC);
        if (fd < 0) fuzz_fail("memfd_create", "no in-memory file");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, bytes, size, 0) != (ssize_t)size))
        fuzz_fail("writing the input to its in-memory file", path);
    return path;
}

/* A refusal must explain itself as "PATH: problem". */
static void fuzz_check_refusal(const char *path, const char *err) {
    size_t length = strlen(path);
    if (strncmp(err, path, length) != 0 || strncmp(err + length, ": ", 2) != 0 ||
        err[length + 2] == '\0')
        fuzz_fail("a refusal without a \"PATH: problem\" message", err);
}

#endif

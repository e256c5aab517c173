/* Reading unsigned-byte IDX files through zlib, which passes raw files through unchanged, so one
 * code path serves raw and gzip-compressed files. Every failure is reported as "PATH: problem". */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "core/idx.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_TYPE_UNSIGNED_BYTE 0x08
#define IDX_MAX_DIMS 3
#define IDX_MAGIC_BYTES 4
/* gzread takes an unsigned count and returns an int, so large reads go in pieces. */
#define READ_CHUNK_BYTES ((size_t)1 << 30)
/* The data buffer starts this large and doubles as data arrives (see read_data). */
#define FIRST_BUFFER_BYTES ((size_t)16 << 20)

typedef struct {
    const char *path;
    int fd;
    gzFile file;
    char *err;
    size_t err_size;
} idx_reader;

static bool fail(const idx_reader *r, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes "PATH: problem" into the caller's buffer. Returns false, for `return fail(...)`. */
static bool fail(const idx_reader *r, const char *format, ...) {
    int prefix = snprintf(r->err, r->err_size, "%s: ", r->path);
    if (prefix >= 0 && (size_t)prefix < r->err_size) {
        va_list args;
        va_start(args, format);
        vsnprintf(r->err + prefix, r->err_size - (size_t)prefix, format, args);
        va_end(args);
    }
    return false;
}

/* zlib's pending error for the file: errnum is Z_OK if there is none. Z_BUF_ERROR is zlib's soft
 * error for input that ended inside a gzip stream; the others are hard errors. */
typedef struct {
    int errnum;
    const char *message;
} zlib_status;

static zlib_status zlib_status_of(const idx_reader *r) {
    zlib_status z;
    z.message = gzerror(r->file, &z.errnum);
    /* zlib names a file opened by gzdopen "<fd:N>" in its messages; our messages name the path. */
    char fd_name[32];
    int length = snprintf(fd_name, sizeof fd_name, "<fd:%d>: ", r->fd);
    if (strncmp(z.message, fd_name, (size_t)length) == 0) z.message += length;
    return z;
}

static bool is_hard_error(zlib_status z) { return z.errnum != Z_OK && z.errnum != Z_BUF_ERROR; }

/* The problem behind a zlib error number, in words. */
static const char *zlib_problem(int errnum) {
    switch (errnum) {
    case Z_ERRNO: return "read error";
    case Z_BUF_ERROR: return "truncated gzip stream";
    case Z_DATA_ERROR: return "corrupt gzip data";
    case Z_MEM_ERROR: return "out of memory in zlib";
    default: return "zlib error";
    }
}

static bool fail_zlib(const idx_reader *r, zlib_status z) {
    return fail(r, "%s: %s", zlib_problem(z.errnum), z.message);
}

/* Appended to a "file ends after" message when the end came inside a gzip stream. */
static const char *gzip_cut_note(zlib_status z) {
    return z.errnum == Z_BUF_ERROR ? " (truncated gzip stream)" : "";
}

/* Opens path for reading; a directory or a file that cannot be opened is an error. */
static bool open_file(idx_reader *r) {
    r->fd = open(r->path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) return fail(r, "cannot open: %s", strerror(errno));
    struct stat info;
    if (fstat(r->fd, &info) != 0) {
        int saved = errno;
        close(r->fd);
        return fail(r, "cannot stat: %s", strerror(saved));
    }
    if (S_ISDIR(info.st_mode)) {
        close(r->fd);
        return fail(r, "is a directory, not an IDX file");
    }
    r->file = gzdopen(r->fd, "rb");
    if (!r->file) {
        close(r->fd);
        return fail(r, "cannot open: out of memory in zlib");
    }
    return true;
}

/* Reads up to n bytes and returns how many came: fewer at the end of the file or on an error. */
static size_t read_up_to(const idx_reader *r, void *buffer, size_t n) {
    size_t got = 0;
    while (got < n) {
        size_t want = n - got < READ_CHUNK_BYTES ? n - got : READ_CHUNK_BYTES;
        int count = gzread(r->file, (uint8_t *)buffer + got, (unsigned)want);
        if (count <= 0) break;
        got += (size_t)count;
    }
    return got;
}

static bool read_magic(const idx_reader *r, int expected_dims, idx_array *a) {
    uint8_t magic[IDX_MAGIC_BYTES];
    size_t got = read_up_to(r, magic, sizeof magic);
    if (got < sizeof magic) {
        zlib_status z = zlib_status_of(r);
        if (is_hard_error(z)) return fail_zlib(r, z);
        if (got == 0 && z.errnum == Z_OK) return fail(r, "empty file");
        return fail(r, "truncated header: file ends after %zu of %d magic bytes%s", got,
                    IDX_MAGIC_BYTES, gzip_cut_note(z));
    }
    if (magic[0] != 0 || magic[1] != 0)
        return fail(r, "bad magic %02x %02x %02x %02x: not an IDX file", magic[0], magic[1],
                    magic[2], magic[3]);
    if (magic[2] != IDX_TYPE_UNSIGNED_BYTE)
        return fail(r, "wrong type byte 0x%02x: only unsigned-byte IDX files (0x%02x) are read",
                    magic[2], IDX_TYPE_UNSIGNED_BYTE);
    if (magic[3] != expected_dims)
        return fail(r, "wrong dimension count %d, expected %d", magic[3], expected_dims);
    a->dims = magic[3];
    return true;
}

/* Reads the big-endian dimension sizes; unused dimensions are set to 1. */
static bool read_shape(const idx_reader *r, idx_array *a) {
    uint8_t sizes[IDX_MAX_DIMS * 4];
    size_t want = (size_t)a->dims * 4;
    size_t got = read_up_to(r, sizes, want);
    if (got < want) {
        zlib_status z = zlib_status_of(r);
        if (is_hard_error(z)) return fail_zlib(r, z);
        return fail(r, "truncated header: file ends after %zu of %zu dimension size bytes%s", got,
                    want, gzip_cut_note(z));
    }
    for (int d = 0; d < IDX_MAX_DIMS; d++) {
        const uint8_t *b = sizes + 4 * d;
        a->shape[d] = d >= a->dims ? 1
                                   : (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
                                         (uint32_t)b[2] << 8 | (uint32_t)b[3];
        if (a->shape[d] == 0) return fail(r, "zero size in dimension %d", d);
    }
    return true;
}

/* Sets a->size to the product of the dimensions, refusing anything above IDX_MAX_DATA_BYTES. */
static bool check_size(const idx_reader *r, idx_array *a) {
    /* The running product stays at most 2^31 before each multiplication by a factor below 2^32,
     * so it never exceeds 2^63 and cannot overflow uint64_t. */
    uint64_t total = 1;
    bool absurd = false;
    for (int d = 0; d < a->dims && !absurd; d++) {
        total *= a->shape[d];
        absurd = total > IDX_MAX_DATA_BYTES;
    }
    if (absurd) {
        char shape[64];
        int used = snprintf(shape, sizeof shape, "%" PRIu32, a->shape[0]);
        for (int d = 1; d < a->dims; d++)
            used += snprintf(shape + used, sizeof shape - (size_t)used, " x %" PRIu32, a->shape[d]);
        return fail(r, "absurd sizes %s: more than %zu bytes of data", shape, IDX_MAX_DATA_BYTES);
    }
    a->size = (size_t)total;
    return true;
}

static const char *item_name(int dims) {
    switch (dims) {
    case 1: return "labels";
    case 3: return "images";
    default: return "items";
    }
}

/* Reads the a->size bytes of data into a buffer that grows as they arrive (FIRST_BUFFER_BYTES,
 * then doubling up to a->size), so a header that claims more data than the file holds costs no
 * more memory than the file does. */
static bool read_data(const idx_reader *r, idx_array *a) {
    size_t capacity = a->size < FIRST_BUFFER_BYTES ? a->size : FIRST_BUFFER_BYTES;
    a->data = malloc(capacity);
    if (!a->data) return fail(r, "out of memory reading %zu bytes of data", capacity);
    size_t got = 0;
    while (true) {
        got += read_up_to(r, a->data + got, capacity - got);
        if (got < capacity || capacity == a->size) break; /* the file ended, or all is read */
        size_t bigger = capacity <= a->size / 2 ? 2 * capacity : a->size;
        uint8_t *grown = realloc(a->data, bigger);
        if (!grown) return fail(r, "out of memory reading %zu bytes of data", bigger);
        a->data = grown;
        capacity = bigger;
    }
    if (got == a->size) return true;
    zlib_status z = zlib_status_of(r);
    if (is_hard_error(z)) return fail_zlib(r, z);
    return fail(r, "truncated: expected %" PRIu32 " %s (%zu bytes of data), "
                   "file ends after %zu bytes%s",
                a->shape[0], item_name(a->dims), a->size, got, gzip_cut_note(z));
}

/* The data must end the file. Reading past it also makes zlib check the gzip trailer (CRC and
 * length), whose errors would otherwise go unnoticed. */
static bool check_end(const idx_reader *r, const idx_array *a) {
    uint8_t extra;
    if (gzread(r->file, &extra, 1) > 0)
        return fail(r, "trailing bytes after the %zu bytes of data", a->size);
    zlib_status z = zlib_status_of(r);
    return z.errnum == Z_OK || fail_zlib(r, z);
}

/* Closes the file; gzclose is the last place zlib reports a truncated gzip stream. */
static bool close_file(idx_reader *r, bool ok) {
    int status = gzclose(r->file);
    r->file = NULL;
    if (ok && status != Z_OK) return fail(r, "%s (reported on close)", zlib_problem(status));
    return ok;
}

bool idx_read(const char *path, int expected_dims, idx_array *out, char *err, size_t err_size) {
    memset(out, 0, sizeof *out);
    idx_reader r = {path, -1, NULL, err, err_size};
    if (expected_dims < 1 || expected_dims > IDX_MAX_DIMS)
        return fail(&r, "cannot read %d-dimensional IDX files", expected_dims);
    if (!open_file(&r)) return false;
    idx_array a = {0};
    bool ok = read_magic(&r, expected_dims, &a) && read_shape(&r, &a) && check_size(&r, &a) &&
              read_data(&r, &a) && check_end(&r, &a);
    ok = close_file(&r, ok);
    if (!ok) {
        idx_free(&a);
        return false;
    }
    *out = a;
    return true;
}

void idx_free(idx_array *a) {
    free(a->data);
    memset(a, 0, sizeof *a);
}

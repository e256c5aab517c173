/* Writing and reading checkpoints; the format is described in checkpoint.h. */
#define _POSIX_C_SOURCE 200809L
#include "core/checkpoint.h"

#include "util/atomic_file.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

static const char MAGIC[8] = {'M', 'L', 'P', 'C', 'K', 'P', 'T', '\0'};

/* Larger than any model this tool trains; keeps a corrupt length from asking for terabytes. */
#define CHECKPOINT_MAX_BYTES ((size_t)1 << 32)

/* ---- a buffered little-endian writer that keeps the CRC-32 of what it wrote ---- */

#define WRITER_CHUNK_BYTES 65536

typedef struct {
    FILE *file;
    uLong crc;
    bool failed; /* a write failed; errno says why */
    size_t used;
    uint8_t chunk[WRITER_CHUNK_BYTES];
} crc_writer;

/* Writes out the buffered bytes, adding them to the CRC; after a failed write, only discards. */
static void writer_flush(crc_writer *w) {
    if (!w->failed && w->used > 0) {
        w->crc = crc32(w->crc, w->chunk, (uInt)w->used);
        w->failed = fwrite(w->chunk, 1, w->used, w->file) != w->used;
    }
    w->used = 0;
}

static void put_bytes(crc_writer *w, const void *bytes, size_t n) {
    const uint8_t *next = bytes;
    while (n > 0) {
        if (w->used == sizeof w->chunk) writer_flush(w);
        size_t room = sizeof w->chunk - w->used;
        size_t step = n < room ? n : room;
        memcpy(w->chunk + w->used, next, step);
        w->used += step;
        next += step;
        n -= step;
    }
}

static void put_u32(crc_writer *w, uint32_t v) {
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put_bytes(w, le, 4);
}

static void put_floats(crc_writer *w, const float *values, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &values[i], 4);
        put_u32(w, bits);
    }
}

/* Writes out what is buffered, then the CRC-32 of everything before it (not summed itself). */
static bool writer_finish(crc_writer *w) {
    writer_flush(w);
    put_u32(w, (uint32_t)w->crc);
    return !w->failed && fwrite(w->chunk, 1, w->used, w->file) == w->used;
}

/* ---- a bounds-checked reader ---- */

typedef struct {
    const uint8_t *bytes;
    size_t size, position;
    bool overrun;
} byte_reader;

static uint32_t get_u32(byte_reader *r) {
    if (r->position + 4 > r->size) {
        r->overrun = true;
        return 0;
    }
    const uint8_t *p = r->bytes + r->position;
    r->position += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float get_float(byte_reader *r) {
    uint32_t bits = get_u32(r);
    float value;
    memcpy(&value, &bits, 4);
    return value;
}

static bool get_floats(byte_reader *r, float *out, size_t n) {
    if (n > (r->size - r->position) / 4) {
        r->overrun = true;
        return false;
    }
    for (size_t i = 0; i < n; i++) out[i] = get_float(r);
    return true;
}

static uint32_t crc_of(const uint8_t *bytes, size_t n) {
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) { /* zlib's crc32 takes a uInt length */
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, bytes, chunk);
        bytes += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

/* ---- saving ---- */

bool checkpoint_write(FILE *out, const checkpoint *c) {
    crc_writer *w = malloc(sizeof *w);
    if (!w) return false;
    w->file = out;
    w->crc = crc32(0L, Z_NULL, 0);
    w->failed = false;
    w->used = 0;
    put_bytes(w, MAGIC, sizeof MAGIC);
    put_u32(w, CHECKPOINT_VERSION);
    put_u32(w, (uint32_t)c->shape.layers);
    for (int l = 0; l <= c->shape.layers; l++) put_u32(w, (uint32_t)c->shape.width[l]);
    put_u32(w, c->optimizer == OPTIMIZER_ADAM ? 1u : 0u);
    put_u32(w, (uint32_t)c->optimizer_step);
    put_u32(w, (uint32_t)c->epochs_done);
    put_u32(w, (uint32_t)c->state_arrays);
    put_u32(w, (uint32_t)c->schedule.kind);
    put_u32(w, (uint32_t)c->schedule.warmup_steps);
    put_u32(w, (uint32_t)c->schedule.total_steps);
    put_floats(w, &c->schedule.lr, 1);
    put_floats(w, &c->input_scale, 1);
    put_floats(w, &c->input_shift, 1);
    put_floats(w, c->params, c->shape.param_count);
    put_floats(w, c->state, c->shape.param_count * (size_t)c->state_arrays);
    bool ok = writer_finish(w);
    free(w);
    return ok;
}

static bool write_checkpoint(FILE *out, const void *c) { return checkpoint_write(out, c); }

bool checkpoint_save(const char *path, const checkpoint *c, char *err, size_t err_size) {
    return atomic_file_write(path, write_checkpoint, c, err, err_size);
}

/* ---- loading ---- */

static bool read_file(const char *path, uint8_t **bytes, size_t *size, char *err, size_t err_size) {
    struct stat info;
    if (stat(path, &info) != 0) {
        snprintf(err, err_size, "%s: %s", path, strerror(errno));
        return false;
    }
    if (!S_ISREG(info.st_mode)) {
        snprintf(err, err_size, "%s: not a regular file", path);
        return false;
    }
    if ((size_t)info.st_size > CHECKPOINT_MAX_BYTES) {
        snprintf(err, err_size, "%s: %lld bytes is too large for a checkpoint", path,
                 (long long)info.st_size);
        return false;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "%s: %s", path, strerror(errno));
        return false;
    }
    *size = (size_t)info.st_size;
    *bytes = malloc(*size ? *size : 1);
    bool ok = *bytes && fread(*bytes, 1, *size, f) == *size;
    fclose(f);
    if (!*bytes)
        snprintf(err, err_size, "%s: out of host memory reading its %zu bytes", path, *size);
    else if (!ok)
        snprintf(err, err_size, "%s: cannot read the file", path);
    if (!ok) {
        free(*bytes);
        *bytes = NULL;
    }
    return ok;
}

/* Header fields up to (not including) the parameters; false with a message if they make no sense. */
static bool parse_header(byte_reader *r, checkpoint *c, const char *path, char *err,
                         size_t err_size) {
    if (r->size == 0) {
        snprintf(err, err_size, "%s: empty file, not an mlp_train checkpoint", path);
        return false;
    }
    if (r->size < sizeof MAGIC || memcmp(r->bytes, MAGIC, sizeof MAGIC) != 0) {
        snprintf(err, err_size, "%s: not an mlp_train checkpoint (bad magic)", path);
        return false;
    }
    r->position = sizeof MAGIC;
    uint32_t version = get_u32(r);
    uint32_t layers = get_u32(r);
    if (r->overrun) {
        snprintf(err, err_size, "%s: corrupt checkpoint: the header is cut short", path);
        return false;
    }
    if (version < 1 || version > CHECKPOINT_VERSION) {
        snprintf(err, err_size, "%s: checkpoint version %u; this mlp_train reads versions 1 to %d",
                 path, version, CHECKPOINT_VERSION);
        return false;
    }
    if (layers < 1 || layers > MLP_MAX_LAYERS) {
        snprintf(err, err_size, "%s: corrupt checkpoint: %u layers", path, layers);
        return false;
    }
    int width[MLP_MAX_LAYERS + 1];
    for (uint32_t l = 0; l <= layers; l++) {
        uint32_t w = get_u32(r);
        width[l] = w > MLP_MAX_WIDTH ? 0 : (int)w;
    }
    char shape_err[128];
    if (r->overrun ||
        !mlp_shape_make(&c->shape, width[0], width + 1, (int)layers - 1, width[layers], shape_err,
                        sizeof shape_err)) {
        snprintf(err, err_size, "%s: corrupt checkpoint: bad layer widths", path);
        return false;
    }
    uint32_t kind = get_u32(r);
    c->optimizer_step = (int)get_u32(r);
    c->epochs_done = (int)get_u32(r);
    c->state_arrays = (int)get_u32(r);
    uint32_t schedule = SCHEDULE_CONSTANT;
    c->schedule = (lr_schedule){SCHEDULE_CONSTANT, 0.0f, 0, 0};
    if (version >= 2) {
        schedule = get_u32(r);
        c->schedule.kind = schedule < SCHEDULE_KINDS ? (schedule_kind)schedule : SCHEDULE_CONSTANT;
        c->schedule.warmup_steps = (int32_t)get_u32(r);
        c->schedule.total_steps = (int32_t)get_u32(r);
        c->schedule.lr = get_float(r);
    }
    c->input_scale = get_float(r);
    c->input_shift = get_float(r);
    c->optimizer = kind == 1 ? OPTIMIZER_ADAM : OPTIMIZER_SGD;
    int expected_arrays = kind == 1 ? 2 : 1;
    if (r->overrun || kind > 1 || c->state_arrays != expected_arrays || c->optimizer_step < 0 ||
        c->epochs_done < 0 || schedule >= SCHEDULE_KINDS || c->schedule.warmup_steps < 0 ||
        c->schedule.total_steps < 0 || !(c->schedule.lr >= 0.0f) || !isfinite(c->schedule.lr)) {
        snprintf(err, err_size, "%s: corrupt checkpoint: bad optimizer fields", path);
        return false;
    }
    return true;
}

/* A checksum proves the file is what was written, not that it is worth loading: a run that
 * diverged is never saved, but a file written by another tool could hold NaN or infinities. */
static bool check_finite(const char *path, const char *what, const float *values, size_t n,
                         char *err, size_t err_size) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(values[i])) {
            snprintf(err, err_size, "%s: %s %zu is %g: the checkpoint holds no usable model", path,
                     what, i, values[i]);
            return false;
        }
    }
    return true;
}

bool checkpoint_load(const char *path, checkpoint *c, char *err, size_t err_size) {
    memset(c, 0, sizeof *c);
    uint8_t *bytes;
    size_t size;
    if (!read_file(path, &bytes, &size, err, err_size)) return false;
    byte_reader r = {bytes, size, 0, false};
    bool ok = false;
    if (!parse_header(&r, c, path, err, err_size)) goto done;
    size_t floats = c->shape.param_count * (size_t)(1 + c->state_arrays);
    size_t expected = r.position + 4 * floats + 4;
    if (size != expected) {
        snprintf(err, err_size, "%s: corrupt checkpoint: %zu bytes, the header implies %zu", path,
                 size, expected);
        goto done;
    }
    byte_reader trailer = {bytes, size, size - 4, false};
    if (get_u32(&trailer) != crc_of(bytes, size - 4)) {
        snprintf(err, err_size, "%s: corrupt checkpoint: checksum mismatch", path);
        goto done;
    }
    c->params = malloc(c->shape.param_count * sizeof(float));
    c->state = malloc(c->shape.param_count * c->state_arrays * sizeof(float));
    if (!c->params || !c->state) {
        snprintf(err, err_size, "%s: out of host memory for its %zu parameters and optimizer state",
                 path, c->shape.param_count);
        goto done;
    }
    get_floats(&r, c->params, c->shape.param_count);
    get_floats(&r, c->state, c->shape.param_count * (size_t)c->state_arrays);
    ok = check_finite(path, "parameter", c->params, c->shape.param_count, err, err_size) &&
         check_finite(path, "optimizer state value", c->state,
                      c->shape.param_count * (size_t)c->state_arrays, err, err_size);
done:
    free(bytes);
    if (!ok) checkpoint_free(c);
    return ok;
}

void checkpoint_free(checkpoint *c) {
    free(c->params);
    free(c->state);
    c->params = c->state = NULL;
}

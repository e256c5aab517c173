/* Writing and reading checkpoints; the format is described in checkpoint.h. */
#define _POSIX_C_SOURCE 200809L
#include "checkpoint.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char MAGIC[8] = {'M', 'L', 'P', 'C', 'K', 'P', 'T', '\0'};

/* Larger than any model this tool trains; keeps a corrupt length from asking for terabytes. */
#define CHECKPOINT_MAX_BYTES ((size_t)1 << 32)

/* ---- a growable byte buffer with little-endian writers ---- */

typedef struct {
    uint8_t *bytes;
    size_t size, capacity;
} byte_buffer;

static void buffer_put(byte_buffer *b, const void *data, size_t n) {
    if (b->size + n > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 4096;
        while (capacity < b->size + n) capacity *= 2;
        uint8_t *bigger = realloc(b->bytes, capacity);
        if (!bigger) {
            fprintf(stderr, "mlp_train: out of host memory writing a checkpoint\n");
            exit(1);
        }
        b->bytes = bigger;
        b->capacity = capacity;
    }
    memcpy(b->bytes + b->size, data, n);
    b->size += n;
}

static void put_u32(byte_buffer *b, uint32_t v) {
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    buffer_put(b, le, 4);
}

static void put_floats(byte_buffer *b, const float *values, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &values[i], 4);
        put_u32(b, bits);
    }
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

static void serialize(const checkpoint *c, byte_buffer *b) {
    buffer_put(b, MAGIC, sizeof MAGIC);
    put_u32(b, CHECKPOINT_VERSION);
    put_u32(b, (uint32_t)c->shape.layers);
    for (int l = 0; l <= c->shape.layers; l++) put_u32(b, (uint32_t)c->shape.width[l]);
    put_u32(b, c->optimizer == OPTIMIZER_ADAM ? 1u : 0u);
    put_u32(b, (uint32_t)c->optimizer_step);
    put_u32(b, (uint32_t)c->epochs_done);
    put_u32(b, (uint32_t)c->state_arrays);
    put_floats(b, &c->input_scale, 1);
    put_floats(b, &c->input_shift, 1);
    put_floats(b, c->params, c->shape.param_count);
    put_floats(b, c->state, c->shape.param_count * (size_t)c->state_arrays);
    put_u32(b, crc_of(b->bytes, b->size));
}

static bool write_all(FILE *f, const uint8_t *bytes, size_t n) {
    return fwrite(bytes, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
}

bool checkpoint_save(const char *path, const checkpoint *c, char *err, size_t err_size) {
    byte_buffer b = {0};
    serialize(c, &b);
    size_t temp_size = strlen(path) + 16;
    char *temp = malloc(temp_size);
    if (!temp) {
        free(b.bytes);
        snprintf(err, err_size, "%s: out of memory", path);
        return false;
    }
    snprintf(temp, temp_size, "%s.tmp.%ld", path, (long)getpid());
    bool ok = false;
    FILE *f = fopen(temp, "wb");
    if (!f) {
        snprintf(err, err_size, "%s: cannot create its temporary file %s: %s", path, temp,
                 strerror(errno));
    } else if (!write_all(f, b.bytes, b.size)) {
        snprintf(err, err_size, "%s: cannot write: %s", temp, strerror(errno));
        fclose(f);
        remove(temp);
    } else if (fclose(f) != 0) {
        snprintf(err, err_size, "%s: cannot write: %s", temp, strerror(errno));
        remove(temp);
    } else if (rename(temp, path) != 0) {
        snprintf(err, err_size, "%s: cannot replace: %s", path, strerror(errno));
        remove(temp);
    } else {
        ok = true;
    }
    free(temp);
    free(b.bytes);
    return ok;
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
    if (!ok) {
        free(*bytes);
        *bytes = NULL;
        snprintf(err, err_size, "%s: cannot read the file", path);
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
    if (version != CHECKPOINT_VERSION) {
        snprintf(err, err_size, "%s: checkpoint version %u; this mlp_train reads version %d", path,
                 version, CHECKPOINT_VERSION);
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
    c->input_scale = get_float(r);
    c->input_shift = get_float(r);
    c->optimizer = kind == 1 ? OPTIMIZER_ADAM : OPTIMIZER_SGD;
    int expected_arrays = kind == 1 ? 2 : 1;
    if (r->overrun || kind > 1 || c->state_arrays != expected_arrays || c->optimizer_step < 0 ||
        c->epochs_done < 0) {
        snprintf(err, err_size, "%s: corrupt checkpoint: bad optimizer fields", path);
        return false;
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
        snprintf(err, err_size, "%s: out of memory", path);
        goto done;
    }
    get_floats(&r, c->params, c->shape.param_count);
    get_floats(&r, c->state, c->shape.param_count * (size_t)c->state_arrays);
    ok = true;
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

/* Tests for checkpoint_save and checkpoint_load: random checkpoints must read back with every
 * field and every float bit-identical; every kind of damage must be refused with a message that
 * names the file and the problem; saving must replace the target whole and leave no temporary
 * file behind, also when it fails. All files live in a fresh temporary directory, removed at
 * the end. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "check.h"
#include "temp_dir.h"
#include "core/checkpoint.h"
#include "core/rng.h"

#include <dirent.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define ERR_SIZE 1024

/* Byte offsets in the format of checkpoint.h. */
#define VERSION_OFFSET 8
#define LAYERS_OFFSET 12

typedef struct {
    uint8_t *bytes;
    size_t size;
} buffer;

static void *allocate(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static void write_raw(const char *path, const uint8_t *bytes, size_t size) {
    FILE *file = fopen(path, "wb");
    CHECK(file != NULL, "cannot create %s", path);
    if (!file) return;
    CHECK(fwrite(bytes, 1, size, file) == size, "cannot write %s", path);
    CHECK(fclose(file) == 0, "cannot close %s", path);
}

/* The whole file; a file that cannot be read stops the test. */
static buffer read_raw(const char *path) {
    FILE *file = fopen(path, "rb");
    buffer b = {NULL, 0};
    bool ok = file && fseek(file, 0, SEEK_END) == 0;
    long size = ok ? ftell(file) : -1;
    if (size >= 0 && fseek(file, 0, SEEK_SET) == 0) {
        b = (buffer){allocate((size_t)size), (size_t)size};
        ok = fread(b.bytes, 1, b.size, file) == b.size;
    }
    if (file) fclose(file);
    if (!ok || size < 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    return b;
}

/* ---- random checkpoints ---- */

/* Finite floats of random bits: subnormals and -0 appear (NaN and infinities are refused on
 * load, and tested apart). */
static float *random_bit_floats(rng *r, size_t n) {
    float *x = allocate(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        do bits = rng_next_u32(r);
        while ((bits & 0x7F800000u) == 0x7F800000u);
        memcpy(&x[i], &bits, sizeof bits);
    }
    return x;
}

static checkpoint random_checkpoint(rng *r, const int *widths, int layers, optimizer_kind kind) {
    checkpoint c = {0};
    char err[ERR_SIZE];
    if (!mlp_shape_make(&c.shape, widths[0], widths + 1, layers - 1, widths[layers], err,
                        sizeof err)) {
        fprintf(stderr, "mlp_shape_make: %s\n", err);
        exit(1);
    }
    c.optimizer = kind;
    c.optimizer_step = (int)rng_below(r, 1000000);
    c.epochs_done = (int)rng_below(r, 1000);
    c.state_arrays = kind == OPTIMIZER_ADAM ? 2 : 1;
    c.input_scale = rng_uniform_range(r, 0.001f, 1.0f);
    c.input_shift = rng_uniform_range(r, -1.0f, 1.0f);
    c.params = random_bit_floats(r, c.shape.param_count);
    c.state = random_bit_floats(r, c.shape.param_count * (size_t)c.state_arrays);
    return c;
}

static const int SGD_WIDTHS[] = {7, 5, 3};
static const int ADAM_WIDTHS[] = {12, 6, 4, 3};

static checkpoint sgd_checkpoint(rng *r) {
    return random_checkpoint(r, SGD_WIDTHS, 2, OPTIMIZER_SGD);
}

static checkpoint adam_checkpoint(rng *r) {
    return random_checkpoint(r, ADAM_WIDTHS, 3, OPTIMIZER_ADAM);
}

static bool same_shape(const mlp_shape *a, const mlp_shape *b) {
    if (!mlp_shape_equal(a, b) || a->param_count != b->param_count) return false;
    for (int l = 0; l < a->layers; l++)
        if (a->weight_offset[l] != b->weight_offset[l] || a->bias_offset[l] != b->bias_offset[l])
            return false;
    return true;
}

/* Every field of got equals expected's, the floats bit for bit. */
static void check_same(const char *what, const checkpoint *got, const checkpoint *expected) {
    CHECK(same_shape(&got->shape, &expected->shape), "%s: shape differs", what);
    CHECK(got->optimizer == expected->optimizer &&
              got->optimizer_step == expected->optimizer_step &&
              got->epochs_done == expected->epochs_done &&
              got->state_arrays == expected->state_arrays,
          "%s: optimizer %d step %d epochs %d arrays %d, expected %d %d %d %d", what,
          (int)got->optimizer, got->optimizer_step, got->epochs_done, got->state_arrays,
          (int)expected->optimizer, expected->optimizer_step, expected->epochs_done,
          expected->state_arrays);
    CHECK(memcmp(&got->input_scale, &expected->input_scale, sizeof(float)) == 0 &&
              memcmp(&got->input_shift, &expected->input_shift, sizeof(float)) == 0,
          "%s: normalization %g %g, expected %g %g", what, got->input_scale, got->input_shift,
          expected->input_scale, expected->input_shift);
    if (!same_shape(&got->shape, &expected->shape) || got->state_arrays != expected->state_arrays)
        return;
    size_t count = expected->shape.param_count;
    CHECK(memcmp(got->params, expected->params, count * sizeof(float)) == 0,
          "%s: parameters differ", what);
    CHECK(memcmp(got->state, expected->state, count * expected->state_arrays * sizeof(float)) == 0,
          "%s: optimizer state differs", what);
}

static void save_or_stop(const char *path, const checkpoint *c) {
    char err[ERR_SIZE] = "";
    if (!checkpoint_save(path, c, err, sizeof err)) {
        fprintf(stderr, "checkpoint_save: %s\n", err);
        exit(1);
    }
}

static void check_loads_as(const char *what, const char *path, const checkpoint *expected) {
    checkpoint loaded;
    char err[ERR_SIZE] = "";
    bool ok = checkpoint_load(path, &loaded, err, sizeof err);
    CHECK(ok, "%s: checkpoint_load %s: %s", what, path, err);
    if (!ok) return;
    check_same(what, &loaded, expected);
    checkpoint_free(&loaded);
    CHECK(loaded.params == NULL && loaded.state == NULL, "checkpoint_free left arrays behind");
}

/* Names in temp_dir (not below it) that look like a temporary file of checkpoint_save. */
static int temporary_files_left(void) {
    int found = 0;
    DIR *dir = opendir(temp_dir);
    struct dirent *entry;
    while (dir && (entry = readdir(dir)) != NULL) found += strstr(entry->d_name, ".tmp.") != NULL;
    if (dir) closedir(dir);
    return found;
}

static void test_round_trips(rng *r) {
    char path[PATH_SIZE];
    checkpoint sgd = sgd_checkpoint(r), adam = adam_checkpoint(r);
    temp_path(path, "sgd.ckpt");
    save_or_stop(path, &sgd);
    check_loads_as("sgd round trip", path, &sgd);
    temp_path(path, "adam.ckpt");
    save_or_stop(path, &adam);
    check_loads_as("adam round trip", path, &adam);
    CHECK(temporary_files_left() == 0, "a temporary file is left after saving");

    save_or_stop(path, &sgd); /* over the Adam checkpoint */
    check_loads_as("saved over another checkpoint", path, &sgd);
    CHECK(temporary_files_left() == 0, "a temporary file is left after saving over a file");
    checkpoint_free(&sgd);
    checkpoint_free(&adam);
}

/* ---- refusals ---- */

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* err starts with "path: " and holds every needle. */
static void check_message(const char *what, const char *err, const char *path,
                          const char *const *needles) {
    CHECK(strncmp(err, path, strlen(path)) == 0 && strncmp(err + strlen(path), ": ", 2) == 0,
          "%s: message does not start with \"%s: \": %s", what, path, err);
    for (; *needles; needles++)
        CHECK(strstr(err, *needles) != NULL, "%s: message lacks \"%s\": %s", what, *needles, err);
}

/* checkpoint_load(path) must fail, own no arrays, and explain itself. */
static void expect_refusal(const char *what, const char *path, const char *const *needles) {
    checkpoint c;
    memset(&c, 0xAB, sizeof c);
    char err[ERR_SIZE] = "";
    bool ok = checkpoint_load(path, &c, err, sizeof err);
    CHECK(!ok, "%s: checkpoint_load accepted %s", what, path);
    if (ok) checkpoint_free(&c);
    CHECK(c.params == NULL && c.state == NULL, "%s: arrays not released on failure", what);
    check_message(what, err, path, needles);
}

/* Writes size bytes to a file of their own and expects the load to be refused. */
static void expect_bytes_refused(const char *what, const uint8_t *bytes, size_t size,
                                 const char *const *needles) {
    char path[PATH_SIZE];
    temp_path(path, "damaged.ckpt");
    write_raw(path, bytes, size);
    expect_refusal(what, path, needles);
}

static void put_u32(uint8_t *at, uint32_t value) {
    for (int k = 0; k < 4; k++) at[k] = (uint8_t)(value >> (8 * k));
}

/* A copy of b with the u32 at offset replaced and the trailing CRC-32 made right again, so
 * that the field itself, not the checksum, is what the loader objects to. */
static buffer with_field(const buffer *b, size_t offset, uint32_t value) {
    buffer copy = {allocate(b->size), b->size};
    memcpy(copy.bytes, b->bytes, b->size);
    put_u32(copy.bytes + offset, value);
    put_u32(copy.bytes + copy.size - 4, (uint32_t)crc32(0L, copy.bytes, (uInt)(copy.size - 4)));
    return copy;
}

static void expect_field_refused(const char *what, const buffer *b, size_t offset, uint32_t value,
                                 const char *const *needles) {
    buffer copy = with_field(b, offset, value);
    expect_bytes_refused(what, copy.bytes, copy.size, needles);
    free(copy.bytes);
}

/* Bytes before the parameters: magic, version, layers, widths, four u32, the schedule (three
 * u32 and an f32) and two f32. */
static size_t header_size(const checkpoint *c) {
    return 8 + 4 + 4 + 4 * (size_t)(c->shape.layers + 1) + 16 + 16 + 8;
}

/* Flips the bits of mask in byte `at` of b, expects the load refused, and flips them back. */
static void expect_flip_refused(const char *what, buffer *b, size_t at, uint8_t mask,
                                const char *const *needles) {
    b->bytes[at] ^= mask;
    expect_bytes_refused(what, b->bytes, b->size, needles);
    b->bytes[at] ^= mask;
}

/* Every shorter prefix of b, from empty to one byte short, must be refused. */
static void test_every_truncation(const buffer *b) {
    for (size_t size = 0; size < b->size; size++) {
        char what[64];
        snprintf(what, sizeof what, "cut to %zu of %zu bytes", size, b->size);
        expect_bytes_refused(what, b->bytes, size, NEEDLES("checkpoint"));
    }
}

/* Every header byte flipped, one at a time, must be refused, whatever the reason given. */
static void test_header_flips(buffer *b, size_t header) {
    for (size_t i = 0; i < header; i++) {
        char what[64];
        snprintf(what, sizeof what, "header byte %zu flipped", i);
        expect_flip_refused(what, b, i, 0xFF, NEEDLES("checkpoint"));
    }
}

static void test_damage(rng *r) {
    checkpoint c = sgd_checkpoint(r);
    char path[PATH_SIZE];
    temp_path(path, "good.ckpt");
    save_or_stop(path, &c);
    buffer b = read_raw(path);
    size_t header = header_size(&c);

    size_t at = header + rng_below(r, (uint32_t)(4 * c.shape.param_count));
    uint8_t bit = (uint8_t)(1u << rng_below(r, 8));
    expect_flip_refused("parameter bit flipped", &b, at, bit, NEEDLES("checksum"));
    expect_flip_refused("checksum bit flipped", &b, b.size - 1, 0x01, NEEDLES("checksum"));
    test_header_flips(&b, header);

    char one_short[64], half[64];
    snprintf(one_short, sizeof one_short, "%zu bytes", b.size - 1);
    snprintf(half, sizeof half, "%zu bytes", b.size / 2);
    expect_bytes_refused("one byte short", b.bytes, b.size - 1, NEEDLES("corrupt", one_short));
    expect_bytes_refused("half the file", b.bytes, b.size / 2, NEEDLES("corrupt", half));
    test_every_truncation(&b);
    expect_bytes_refused("empty file", b.bytes, 0, NEEDLES("not an mlp_train checkpoint"));
    const char text[] = "this is a text file, not a checkpoint\n";
    expect_bytes_refused("text file", (const uint8_t *)text, sizeof text - 1, NEEDLES("magic"));

    char future[32];
    snprintf(future, sizeof future, "version %d", CHECKPOINT_VERSION + 1);
    expect_field_refused("future version", &b, VERSION_OFFSET, CHECKPOINT_VERSION + 1,
                         NEEDLES(future));
    expect_field_refused("1000 layers", &b, LAYERS_OFFSET, 1000, NEEDLES("corrupt", "1000 layers"));
    expect_field_refused("no layers", &b, LAYERS_OFFSET, 0, NEEDLES("corrupt", "0 layers"));
    free(b.bytes);
    checkpoint_free(&c);
}

static void test_unopenable(void) {
    char path[PATH_SIZE];
    temp_path(path, "no-such-file.ckpt");
    expect_refusal("missing file", path, NEEDLES("No such file"));
    temp_path(path, "a-directory");
    CHECK(mkdir(path, 0700) == 0, "cannot create %s", path);
    expect_refusal("directory", path, NEEDLES("not a regular file"));
}

/* checkpoint_save(path) must fail with a message naming path and leave no temporary file. */
static void expect_save_failure(const char *what, const char *path, const checkpoint *c,
                                const char *needle) {
    char err[ERR_SIZE] = "";
    CHECK(!checkpoint_save(path, c, err, sizeof err), "%s: checkpoint_save accepted %s", what,
          path);
    CHECK(strstr(err, path) != NULL && strstr(err, needle) != NULL,
          "%s: message lacks \"%s\" or \"%s\": %s", what, path, needle, err);
    CHECK(temporary_files_left() == 0, "%s: a temporary file is left", what);
}

static void test_failed_saves(rng *r) {
    checkpoint c = sgd_checkpoint(r);
    char dir[PATH_SIZE], path[PATH_SIZE];
    temp_path(dir, "no-such-dir");
    join_path(path, dir, "model.ckpt");
    expect_save_failure("directory missing", path, &c, "No such file");
    struct stat info;
    CHECK(stat(dir, &info) != 0, "saving created %s", dir);

    /* The temporary file is written, then renaming it over a directory fails. */
    temp_path(path, "a-directory-target");
    CHECK(mkdir(path, 0700) == 0, "cannot create %s", path);
    expect_save_failure("target is a directory", path, &c, "not a regular file");

    /* A FIFO (like a device such as /dev/full) is refused, not replaced by a checkpoint. */
    temp_path(path, "a-fifo");
    CHECK(mkfifo(path, 0600) == 0, "cannot create %s", path);
    expect_save_failure("target is a FIFO", path, &c, "not a regular file");
    CHECK(stat(path, &info) == 0 && S_ISFIFO(info.st_mode), "the FIFO %s was replaced", path);

    /* A symbolic link to nothing is refused; the link is left as it was. */
    char target[PATH_SIZE];
    temp_path(path, "dangling.ckpt");
    temp_path(target, "nothing-here");
    CHECK(symlink(target, path) == 0, "cannot create the link %s", path);
    expect_save_failure("link to nothing", path, &c, "symbolic link to nothing");
    CHECK(lstat(path, &info) == 0 && S_ISLNK(info.st_mode), "the link %s was replaced", path);
    checkpoint_free(&c);
}

/* Saving through a symbolic link replaces the file it points to and keeps the link. */
static void test_save_through_link(rng *r) {
    checkpoint old = sgd_checkpoint(r), new_one = sgd_checkpoint(r);
    char target[PATH_SIZE], link[PATH_SIZE];
    temp_path(target, "linked.ckpt");
    temp_path(link, "link.ckpt");
    save_or_stop(target, &old);
    CHECK(symlink(target, link) == 0, "cannot create the link %s", link);
    save_or_stop(link, &new_one);
    struct stat info;
    CHECK(lstat(link, &info) == 0 && S_ISLNK(info.st_mode), "saving replaced the link %s", link);
    check_loads_as("saved through a link", target, &new_one);
    CHECK(temporary_files_left() == 0, "a temporary file is left after saving through a link");
    checkpoint_free(&old);
    checkpoint_free(&new_one);
}

/* A checkpoint whose checksum is right but whose numbers are not finite is refused, naming
 * the value: NaN in a parameter, an infinity in the optimizer state. */
static void test_non_finite(rng *r) {
    checkpoint c = adam_checkpoint(r);
    char path[PATH_SIZE];
    temp_path(path, "nan.ckpt");
    size_t at = rng_below(r, (uint32_t)c.shape.param_count);
    float saved = c.params[at];
    c.params[at] = NAN;
    save_or_stop(path, &c);
    char index[32];
    snprintf(index, sizeof index, "parameter %zu is nan", at);
    expect_refusal("NaN parameter", path, NEEDLES(index, "no usable model"));
    c.params[at] = saved;
    c.state[c.shape.param_count + at] = -INFINITY;
    save_or_stop(path, &c);
    expect_refusal("infinite state", path, NEEDLES("optimizer state value", "-inf"));
    checkpoint_free(&c);
}

int main(void) {
    rng r = rng_create(test_seed("test_checkpoint"), 0);
    if (!temp_dir_create("test_checkpoint")) return 1;
    test_round_trips(&r);
    test_damage(&r);
    test_unopenable();
    test_failed_saves(&r);
    test_save_through_link(&r);
    test_non_finite(&r);
    remove_tree(temp_dir);
    return test_exit_status("test_checkpoint");
}

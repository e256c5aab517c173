/* Tests for the IDX reader and the data set loader: random raw and gzip files written here must
 * read back byte for byte, and every kind of damage must fail with a message that names the file
 * and the problem. All files live in a fresh temporary directory, removed at the end. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "check.h"
#include "temp_dir.h"
#include "core/dataset.h"
#include "core/idx.h"
#include "core/rng.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define ERR_SIZE 1024
#define IDX_UBYTE 0x08

typedef struct {
    uint8_t *bytes;
    size_t size;
} buffer;

/* An IDX file in memory: the shape and the data it describes (shape entries past dims unused). */
typedef struct {
    int dims;
    uint32_t shape[3];
    buffer data;
} idx_file;

static buffer random_bytes(rng *r, size_t size, uint32_t bound) {
    buffer b = {malloc(size ? size : 1), size};
    for (size_t i = 0; i < size; i++) b.bytes[i] = (uint8_t)rng_below(r, bound);
    return b;
}

/* A file of random contents: `count` items of rows x cols (dims 3), rows (dims 2) or one byte. */
static idx_file random_idx(rng *r, int dims, uint32_t count, uint32_t rows, uint32_t cols,
                           uint32_t bound) {
    idx_file f = {dims, {count, dims > 1 ? rows : 1, dims > 2 ? cols : 1}, {NULL, 0}};
    f.data = random_bytes(r, (size_t)f.shape[0] * f.shape[1] * f.shape[2], bound);
    return f;
}

/* The bytes of an IDX file with the given type byte, dimension count and header sizes. */
static buffer encode(uint8_t type, int dims, const uint32_t *shape, const buffer *data) {
    size_t header = 4 + 4 * (size_t)dims;
    buffer b = {malloc(header + data->size), header + data->size};
    b.bytes[0] = 0;
    b.bytes[1] = 0;
    b.bytes[2] = type;
    b.bytes[3] = (uint8_t)dims;
    for (int d = 0; d < dims; d++)
        for (int k = 0; k < 4; k++) b.bytes[4 + 4 * d + k] = (uint8_t)(shape[d] >> (24 - 8 * k));
    if (data->size) memcpy(b.bytes + header, data->bytes, data->size);
    return b;
}

static buffer encode_idx(const idx_file *f) {
    return encode(IDX_UBYTE, f->dims, f->shape, &f->data);
}

static void write_raw(const char *path, const uint8_t *bytes, size_t size) {
    FILE *file = fopen(path, "wb");
    CHECK(file != NULL, "cannot create %s", path);
    if (!file) return;
    CHECK(fwrite(bytes, 1, size, file) == size, "cannot write %s", path);
    CHECK(fclose(file) == 0, "cannot close %s", path);
}

static void write_gz(const char *path, const uint8_t *bytes, size_t size) {
    gzFile file = gzopen(path, "wb");
    CHECK(file != NULL, "cannot create %s", path);
    if (!file) return;
    CHECK(size == 0 || gzwrite(file, bytes, (unsigned)size) == (int)size, "cannot write %s", path);
    CHECK(gzclose(file) == Z_OK, "cannot close %s", path);
}

static void write_file(const char *path, const buffer *b, bool gz) {
    (gz ? write_gz : write_raw)(path, b->bytes, b->size);
}

static void write_idx(const char *path, const idx_file *f, bool gz) {
    buffer b = encode_idx(f);
    write_file(path, &b, gz);
    free(b.bytes);
}

/* The whole file; a file that cannot be read stops the test. */
static buffer read_raw(const char *path) {
    FILE *file = fopen(path, "rb");
    buffer b = {NULL, 0};
    bool ok = file && fseek(file, 0, SEEK_END) == 0;
    long size = ok ? ftell(file) : -1;
    if (size >= 0 && fseek(file, 0, SEEK_SET) == 0) {
        b = (buffer){malloc((size_t)size + 1), (size_t)size};
        ok = fread(b.bytes, 1, b.size, file) == b.size;
    }
    if (file) fclose(file);
    if (!ok || size < 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    return b;
}

static bool contains_all(const char *text, const char *const *needles, const char **missing) {
    for (; *needles; needles++) {
        if (!strstr(text, *needles)) {
            *missing = *needles;
            return false;
        }
    }
    return true;
}

static void check_message(const char *what, const char *err, const char *path,
                          const char *const *needles) {
    const char *missing = NULL;
    CHECK(strncmp(err, path, strlen(path)) == 0 && strncmp(err + strlen(path), ": ", 2) == 0,
          "%s: message does not start with \"%s: \": %s", what, path, err);
    CHECK(contains_all(err, needles, &missing), "%s: message lacks \"%s\": %s", what, missing,
          err);
}

/* idx_read(path) must fail, leave its output empty, and give "PATH: ..." with every needle. */
static void expect_idx_failure(const char *what, const char *path, int dims,
                               const char *const *needles) {
    idx_array a;
    memset(&a, 0xAB, sizeof a);
    char err[ERR_SIZE] = "";
    bool ok = idx_read(path, dims, &a, err, sizeof err);
    CHECK(!ok, "%s: idx_read accepted %s", what, path);
    if (ok) idx_free(&a);
    CHECK(a.data == NULL && a.size == 0 && a.dims == 0 && a.shape[0] == 0,
          "%s: output not emptied on failure", what);
    check_message(what, err, path, needles);
}

/* dataset_load(dir) must fail with a message that starts with `subject` and holds every needle. */
static void expect_dataset_failure(const char *what, const char *dir, dataset_split split,
                                   const char *subject, const char *const *needles) {
    dataset d;
    memset(&d, 0xAB, sizeof d);
    char err[ERR_SIZE] = "";
    bool ok = dataset_load(dir, split, &d, err, sizeof err);
    CHECK(!ok, "%s: dataset_load accepted %s", what, dir);
    if (ok) dataset_free(&d);
    CHECK(d.pixels == NULL && d.labels == NULL && d.count == 0, "%s: output not emptied", what);
    check_message(what, err, subject, needles);
}

/* Writes only the first `keep` bytes of f's raw file. */
static void write_prefix(const char *path, const idx_file *f, size_t keep) {
    buffer b = encode_idx(f);
    write_raw(path, b.bytes, keep < b.size ? keep : b.size);
    free(b.bytes);
}

static void check_round_trip(const char *path, const idx_file *f) {
    idx_array a;
    char err[ERR_SIZE] = "";
    bool ok = idx_read(path, f->dims, &a, err, sizeof err);
    CHECK(ok, "idx_read %s: %s", path, err);
    if (!ok) return;
    CHECK(a.dims == f->dims, "%s: dims %d, expected %d", path, a.dims, f->dims);
    for (int d = 0; d < 3; d++)
        CHECK(a.shape[d] == f->shape[d], "%s: shape[%d] = %lu, expected %lu", path, d,
              (unsigned long)a.shape[d], (unsigned long)f->shape[d]);
    CHECK(a.size == f->data.size, "%s: size %zu, expected %zu", path, a.size, f->data.size);
    size_t mismatches = 0;
    for (size_t i = 0; i < a.size && i < f->data.size; i++)
        mismatches += a.data[i] != f->data.bytes[i];
    CHECK(mismatches == 0, "%s: %zu bytes differ", path, mismatches);
    idx_free(&a);
    CHECK(a.data == NULL && a.size == 0, "idx_free did not empty the array");
}

static void test_round_trips(rng *r) {
    for (int dims = 1; dims <= 3; dims++) {
        for (int gz = 0; gz <= 1; gz++) {
            idx_file f = random_idx(r, dims, 1 + rng_below(r, 40), 1 + rng_below(r, 8),
                                    1 + rng_below(r, 8), 256);
            char path[PATH_SIZE];
            temp_path(path, gz ? "round-trip.gz" : "round-trip");
            write_idx(path, &f, gz);
            check_round_trip(path, &f);
            free(f.data.bytes);
        }
    }
    /* Large enough to take many passes through zlib's buffers. */
    idx_file big = random_idx(r, 3, 100 + rng_below(r, 100), 28, 28, 256);
    char path[PATH_SIZE];
    temp_path(path, "big.gz");
    write_idx(path, &big, true);
    check_round_trip(path, &big);
    free(big.data.bytes);
}

/* The contents of one split's two files. */
typedef struct {
    idx_file images;
    idx_file labels;
} split_files;

/* Writes a split of random contents into dir, the names with ".gz" when gz is set. */
static split_files write_split(rng *r, const char *dir, const char *prefix, bool gz) {
    uint32_t count = 1 + rng_below(r, 50);
    split_files s = {random_idx(r, 3, count, 1 + rng_below(r, 10), 1 + rng_below(r, 10), 256),
                     random_idx(r, 1, count, 0, 0, DATASET_CLASSES)};
    char name[64], path[PATH_SIZE];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", prefix, gz ? ".gz" : "");
    join_path(path, dir, name);
    write_idx(path, &s.images, gz);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", prefix, gz ? ".gz" : "");
    join_path(path, dir, name);
    write_idx(path, &s.labels, gz);
    return s;
}

static void free_split(split_files *s) {
    free(s->images.data.bytes);
    free(s->labels.data.bytes);
}

static void check_dataset(const char *dir, dataset_split split, const split_files *s) {
    dataset d;
    char err[ERR_SIZE] = "";
    bool ok = dataset_load(dir, split, &d, err, sizeof err);
    CHECK(ok, "dataset_load %s: %s", dir, err);
    if (!ok) return;
    bool same_shape = d.count == (int)s->labels.shape[0] &&
                      d.image_rows == (int)s->images.shape[1] &&
                      d.image_cols == (int)s->images.shape[2];
    CHECK(same_shape, "%s: %d images of %d x %d, expected %lu of %lu x %lu", dir, d.count,
          d.image_rows, d.image_cols, (unsigned long)s->images.shape[0],
          (unsigned long)s->images.shape[1], (unsigned long)s->images.shape[2]);
    CHECK(d.features == d.image_rows * d.image_cols, "features %d", d.features);
    if (same_shape) {
        CHECK(memcmp(d.pixels, s->images.data.bytes, s->images.data.size) == 0,
              "%s: pixels differ", dir);
        CHECK(memcmp(d.labels, s->labels.data.bytes, s->labels.data.size) == 0,
              "%s: labels differ", dir);
    }
    CHECK(d.scale == 1.0f / 255.0f && d.shift == 0.0f, "scale %g shift %g", d.scale, d.shift);
    dataset_free(&d);
    CHECK(d.pixels == NULL && d.labels == NULL && d.count == 0, "dataset_free left data behind");
}

static void make_dir(char *path, const char *name) {
    temp_path(path, name);
    CHECK(mkdir(path, 0700) == 0, "cannot create %s", path);
}

static void test_dataset_round_trips(rng *r) {
    char dir[PATH_SIZE];
    make_dir(dir, "mixed");
    split_files train = write_split(r, dir, "train", false);
    split_files test = write_split(r, dir, "t10k", true);
    check_dataset(dir, SPLIT_TRAIN, &train);
    check_dataset(dir, SPLIT_TEST, &test);
    free_split(&train);
    free_split(&test);

    /* With both present, the raw files win. */
    make_dir(dir, "both");
    split_files compressed = write_split(r, dir, "train", true);
    split_files raw = write_split(r, dir, "train", false);
    check_dataset(dir, SPLIT_TRAIN, &raw);
    free_split(&compressed);
    free_split(&raw);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_header_damage(rng *r) {
    idx_file labels = random_idx(r, 1, 20, 0, 0, 256);
    idx_file images = random_idx(r, 3, 5, 4, 3, 256);
    char path[PATH_SIZE];

    temp_path(path, "empty");
    write_raw(path, (const uint8_t *)"", 0);
    expect_idx_failure("empty file", path, 1, NEEDLES("empty"));
    temp_path(path, "empty.gz");
    write_gz(path, (const uint8_t *)"", 0);
    expect_idx_failure("empty gz file", path, 1, NEEDLES("empty"));

    temp_path(path, "short-magic");
    write_prefix(path, &labels, 2);
    expect_idx_failure("truncated magic", path, 1, NEEDLES("truncated header"));
    temp_path(path, "short-sizes");
    write_prefix(path, &images, 4 + 5);
    expect_idx_failure("truncated sizes", path, 3, NEEDLES("truncated header"));

    buffer b = encode_idx(&labels);
    b.bytes[0] = 1;
    temp_path(path, "bad-magic");
    write_raw(path, b.bytes, b.size);
    expect_idx_failure("bad magic", path, 1, NEEDLES("magic"));
    const char text[] = "this is not an IDX file\n";
    temp_path(path, "text");
    write_raw(path, (const uint8_t *)text, sizeof text - 1);
    expect_idx_failure("text file", path, 1, NEEDLES("magic"));
    free(b.bytes);

    b = encode(0x09, labels.dims, labels.shape, &labels.data);
    temp_path(path, "signed-bytes");
    write_raw(path, b.bytes, b.size);
    expect_idx_failure("wrong type byte", path, 1, NEEDLES("type", "0x09"));
    free(b.bytes);

    temp_path(path, "three-dims");
    write_idx(path, &images, false);
    expect_idx_failure("wrong dimension count", path, 1, NEEDLES("dimension count 3"));
    expect_idx_failure("unsupported dimension count", path, 4, NEEDLES("4-dimensional"));

    uint32_t zero_shape[3] = {5, 0, 3};
    buffer none = {NULL, 0};
    b = encode(IDX_UBYTE, 3, zero_shape, &none);
    temp_path(path, "zero-dim");
    write_raw(path, b.bytes, b.size);
    expect_idx_failure("zero dimension", path, 3, NEEDLES("zero", "dimension 1"));
    free(b.bytes);
    free(labels.data.bytes);
    free(images.data.bytes);
}

static void expect_absurd(const char *what, int dims, const uint32_t *shape, const char *shown) {
    buffer none = {NULL, 0};
    buffer b = encode(IDX_UBYTE, dims, shape, &none);
    char path[PATH_SIZE];
    temp_path(path, "absurd");
    write_raw(path, b.bytes, b.size);
    expect_idx_failure(what, path, dims, NEEDLES("absurd", shown));
    free(b.bytes);
}

static void test_absurd_sizes(void) {
    const uint32_t huge[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    expect_absurd("sizes overflowing 64 bits", 3, huge,
                  "4294967295 x 4294967295 x 4294967295");
    const uint32_t wide[3] = {65536, 65536, 2};
    expect_absurd("sizes overflowing 32 bits only", 3, wide, "65536 x 65536 x 2");
    const uint32_t many[1] = {0x80000001u};
    expect_absurd("labels above the limit", 1, many, "2147483649");
}

static void test_data_damage(rng *r) {
    idx_file images = random_idx(r, 3, 30, 7, 5, 256);
    buffer b = encode_idx(&images);
    buffer shorter = {b.bytes, b.size - 3};
    char path[PATH_SIZE];
    temp_path(path, "truncated");
    write_file(path, &shorter, false);
    expect_idx_failure("truncated raw data", path, 3, NEEDLES("truncated", "expected 30 images"));
    temp_path(path, "truncated.gz");
    write_file(path, &shorter, true);
    expect_idx_failure("truncated gz data", path, 3, NEEDLES("truncated", "expected 30 images"));

    buffer longer = {malloc(b.size + 2), b.size + 2};
    memcpy(longer.bytes, b.bytes, b.size);
    longer.bytes[b.size] = longer.bytes[b.size + 1] = 0;
    temp_path(path, "trailing");
    write_file(path, &longer, false);
    expect_idx_failure("trailing bytes raw", path, 3, NEEDLES("trailing"));
    temp_path(path, "trailing.gz");
    write_file(path, &longer, true);
    expect_idx_failure("trailing bytes gz", path, 3, NEEDLES("trailing"));
    free(longer.bytes);
    free(b.bytes);
    free(images.data.bytes);
}

/* Ways to damage a gzip file (gzopen writes a 10-byte header, then deflate data, then an 8-byte
 * trailer: CRC-32 and length, little-endian). */
static void cut_in_half(buffer *gz) { gz->size /= 2; }
static void cut_inside_trailer(buffer *gz) { gz->size -= 4; }
static void flip_crc_byte(buffer *gz) { gz->bytes[gz->size - 8] ^= 0xFF; }
static void flip_length_byte(buffer *gz) { gz->bytes[gz->size - 1] ^= 0xFF; }
static void reserved_block_type(buffer *gz) { gz->bytes[10] |= 0x07; } /* final, type 3 */

/* Writes f as gz, damages the compressed bytes and expects the read to fail with needle. */
static void expect_gz_damage(const char *what, const idx_file *f, void (*damage)(buffer *),
                             const char *needle) {
    char path[PATH_SIZE];
    temp_path(path, "damaged.gz");
    write_idx(path, f, true);
    buffer gz = read_raw(path);
    damage(&gz);
    write_raw(path, gz.bytes, gz.size);
    expect_idx_failure(what, path, f->dims, NEEDLES(needle));
    free(gz.bytes);
}

static void test_gz_damage(rng *r) {
    idx_file images = random_idx(r, 3, 20, 9, 9, 256);
    expect_gz_damage("gz cut in half", &images, cut_in_half, "truncated");
    expect_gz_damage("gz cut inside the trailer", &images, cut_inside_trailer, "truncated");
    expect_gz_damage("gz with a bad CRC", &images, flip_crc_byte, "corrupt");
    expect_gz_damage("gz with a bad length", &images, flip_length_byte, "corrupt");
    expect_gz_damage("gz with a bad block type", &images, reserved_block_type, "corrupt");
    free(images.data.bytes);
}

static void test_unopenable(void) {
    char path[PATH_SIZE];
    temp_path(path, "no-such-file");
    expect_idx_failure("missing file", path, 1, NEEDLES("cannot open", "No such file"));
    make_dir(path, "a-directory");
    expect_idx_failure("directory", path, 1, NEEDLES("directory"));
    /* a file that cannot be opened, for root too (who reads files without permissions): a
     * path through a regular file */
    char file[PATH_SIZE];
    temp_path(file, "a-file");
    write_raw(file, (const uint8_t *)"", 0);
    join_path(path, file, "inside");
    expect_idx_failure("path through a file", path, 1, NEEDLES("cannot open", "Not a directory"));
    if (geteuid() != 0) { /* root reads anything */
        temp_path(path, "unreadable");
        write_raw(path, (const uint8_t *)"", 0);
        chmod(path, 0);
        expect_idx_failure("unreadable file", path, 1, NEEDLES("cannot open", "denied"));
    }
}

static void test_dataset_damage(rng *r) {
    char dir[PATH_SIZE], images_path[PATH_SIZE], labels_path[PATH_SIZE];
    make_dir(dir, "nothing");
    /* The trailing space tells the raw name from the start of the .gz one. */
    expect_dataset_failure("no files", dir, SPLIT_TRAIN, dir,
                           NEEDLES("train-images-idx3-ubyte ", "train-images-idx3-ubyte.gz"));
    expect_dataset_failure("missing directory", "/nonexistent-dir", SPLIT_TEST,
                           "/nonexistent-dir", NEEDLES("t10k-images-idx3-ubyte.gz"));

    make_dir(dir, "damaged");
    join_path(images_path, dir, "train-images-idx3-ubyte");
    join_path(labels_path, dir, "train-labels-idx1-ubyte");
    split_files s = write_split(r, dir, "train", false);
    uint32_t count = s.labels.shape[0];
    idx_file extra = random_idx(r, 1, count + 1, 0, 0, DATASET_CLASSES);
    write_idx(labels_path, &extra, false);
    char images_count[32], labels_count[32];
    snprintf(images_count, sizeof images_count, "%lu images", (unsigned long)count);
    snprintf(labels_count, sizeof labels_count, "%lu labels", (unsigned long)count + 1);
    expect_dataset_failure("count mismatch", dir, SPLIT_TRAIN, images_path,
                           NEEDLES("mismatch", images_count, labels_path, labels_count));
    free(extra.data.bytes);

    uint32_t index = rng_below(r, count);
    s.labels.data.bytes[index] = DATASET_CLASSES;
    write_idx(labels_path, &s.labels, false);
    char where[32];
    snprintf(where, sizeof where, "index %lu", (unsigned long)index);
    expect_dataset_failure("label 10", dir, SPLIT_TRAIN, labels_path, NEEDLES("label 10", where));

    s.labels.data.bytes[index] = 0;
    write_idx(labels_path, &s.labels, false);
    write_idx(images_path, &s.labels, false);
    expect_dataset_failure("labels as images", dir, SPLIT_TRAIN, images_path,
                           NEEDLES("dimension count 1"));
    free_split(&s);

    idx_file wide = random_idx(r, 3, 1, 1, 5000, 256);
    idx_file label = random_idx(r, 1, 1, 0, 0, DATASET_CLASSES);
    write_idx(images_path, &wide, false);
    write_idx(labels_path, &label, false);
    expect_dataset_failure("images too large", dir, SPLIT_TRAIN, images_path,
                           NEEDLES("1 x 5000"));
    free(wide.data.bytes);
    free(label.data.bytes);
}

static void check_normalization(const char *what, uint8_t *pixels, int count, int features,
                                double scale, double shift) {
    dataset d = {.count = count, .image_rows = 1, .image_cols = features, .features = features,
                 .pixels = pixels};
    float got_scale, got_shift;
    dataset_normalization(&d, &got_scale, &got_shift);
    CHECK(fabs(got_scale - scale) <= 1e-6 * fabs(scale), "%s: scale %.9g, expected %.9g", what,
          got_scale, scale);
    CHECK(fabs(got_shift - shift) <= 1e-6 * fabs(shift) + 1e-7, "%s: shift %.9g, expected %.9g",
          what, got_shift, shift);
}

/* Random pixels against the textbook two-pass mean and standard deviation of pixel/255. */
static void check_random_normalization(rng *r) {
    enum { COUNT = 37, FEATURES = 29 };
    buffer pixels = random_bytes(r, COUNT * FEATURES, 256);
    double sum = 0.0, squares = 0.0;
    for (size_t i = 0; i < pixels.size; i++) sum += pixels.bytes[i] / 255.0;
    double mean = sum / (double)pixels.size;
    for (size_t i = 0; i < pixels.size; i++)
        squares += (pixels.bytes[i] / 255.0 - mean) * (pixels.bytes[i] / 255.0 - mean);
    double std = sqrt(squares / (double)pixels.size);
    check_normalization("random", pixels.bytes, COUNT, FEATURES, 1.0 / (255.0 * std), -mean / std);
    free(pixels.bytes);
}

static void test_normalization(rng *r) {
    /* pixel/255 = 0, 1, 1, 1: mean 3/4, variance 3/16, std sqrt(3)/4. */
    uint8_t quarter_dark[4] = {0, 255, 255, 255};
    check_normalization("0,255,255,255", quarter_dark, 2, 2, 4.0 / (255.0 * sqrt(3.0)),
                        -sqrt(3.0));
    /* pixel/255 = 0.2 everywhere: std 0 counts as 1, so only the mean is removed. */
    uint8_t flat[6] = {51, 51, 51, 51, 51, 51};
    check_normalization("constant", flat, 3, 2, 1.0 / 255.0, -0.2);
    check_random_normalization(r);
}

int main(void) {
    rng r = rng_create(test_seed("test_idx"), 0);
    if (!temp_dir_create("test_idx")) return 1;
    test_round_trips(&r);
    test_dataset_round_trips(&r);
    test_header_damage(&r);
    test_absurd_sizes();
    test_data_damage(&r);
    test_gz_damage(&r);
    test_unopenable();
    test_dataset_damage(&r);
    test_normalization(&r);
    remove_tree(temp_dir);
    return test_exit_status("test_idx");
}

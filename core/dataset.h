/* A labelled image data set held in host memory, as read from a directory of IDX files. */
#ifndef MLP_DATASET_H
#define MLP_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DATASET_CLASSES 10

typedef enum { SPLIT_TRAIN, SPLIT_TEST } dataset_split;

struct dataset {
    int count;          /* number of samples */
    int image_rows;     /* 28 for MNIST */
    int image_cols;     /* 28 for MNIST */
    int features;       /* image_rows * image_cols */
    uint8_t *pixels;    /* count × features bytes, row-major, 0..255 */
    uint8_t *labels;    /* count labels, each in 0..DATASET_CLASSES-1 */
    /* How a pixel becomes a model input: x = pixel * scale + shift (see dataset_normalization). */
    float scale;
    float shift;
};
typedef struct dataset dataset;

/* Loads the split from dir, which holds the four files under their usual names
 * (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
 * t10k-labels-idx1-ubyte), each raw or with a .gz suffix. Checks that image and label counts match
 * and that every label is a class. scale/shift are set to 1/255 and 0.
 * On failure returns false and writes a message naming the file and the problem into err. */
bool dataset_load(const char *dir, dataset_split split, dataset *out, char *err, size_t err_size);

/* Sets scale and shift so that inputs have zero mean and unit variance over `reference`
 * (the training set): x = (pixel/255 - mean) / std. */
void dataset_normalization(const dataset *reference, float *scale, float *shift);

/* Moves `count` samples of data, chosen by a permutation drawn from seed (the same ones for a
 * seed), into held_out (allocated here): data keeps the rest, in its order. 0 < count < data->count. */
void dataset_hold_out(dataset *data, int count, uint64_t seed, dataset *held_out);

void dataset_free(dataset *d);

#endif

/* Choosing an implementation by device and name, and finding out whether a GPU is there. */
#ifndef MLP_BACKEND_SELECT_H
#define MLP_BACKEND_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"

/* True if this build has CUDA and a usable device is present; otherwise why not, in `why`. */
bool gpu_available(char *why, size_t why_size);

/* device "cpu" or "gpu", impl "naive", "tiled" or "blas". NULL, with the reason in err, if the
 * combination cannot be had here. */
backend *backend_create(const char *device, const char *impl, char *err, size_t err_size);

#endif

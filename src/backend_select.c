#include "backend_select.h"

#include <stdio.h>
#include <string.h>

#include "cpu_backend.h"
#ifdef MLP_HAVE_CUDA
#include "../cuda/gpu_backend.h"
#endif

bool gpu_available(char *why, size_t why_size) {
#ifdef MLP_HAVE_CUDA
    return gpu_device_available(why, why_size);
#else
    snprintf(why, why_size, "this mlp_train was built without CUDA");
    return false;
#endif
}

backend *backend_create(const char *device, const char *impl, char *err, size_t err_size) {
    backend *be = NULL;
    if (strcmp(device, "cpu") == 0) {
        be = cpu_backend_create(impl);
    } else {
        char why[256];
        if (!gpu_available(why, sizeof why)) {
            snprintf(err, err_size, "--device gpu: no usable GPU: %s", why);
            return NULL;
        }
#ifdef MLP_HAVE_CUDA
        be = gpu_backend_create(impl);
#endif
    }
    if (!be) snprintf(err, err_size, "no implementation '%s' on the %s", impl, device);
    return be;
}

/* Loading cuBLAS at run time (see cublas_library.h). The library is looked for where the build
 * found the CUDA toolkit (MLP_CUDA_LIBRARY_DIR), then by its name alone (the loader's usual
 * search: LD_LIBRARY_PATH, the system's directories). */
#include "libs/cublas_library.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

#define MLP_STRING(x) #x
#define MLP_STRINGIFY(x) MLP_STRING(x)

namespace {

constexpr const char *LIBRARY_NAME = "libcublas.so." MLP_STRINGIFY(CUBLAS_VER_MAJOR);

void *open_library() {
    char path[4096];
    std::snprintf(path, sizeof path, "%s/%s", MLP_CUDA_LIBRARY_DIR, LIBRARY_NAME);
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) library = dlopen(LIBRARY_NAME, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        std::fprintf(stderr, "mlp_train: cannot load cuBLAS (%s): %s\n", LIBRARY_NAME, dlerror());
        std::exit(1);
    }
    return library;
}

template <typename F> void resolve(void *library, const char *name, F &function) {
    function = reinterpret_cast<F>(dlsym(library, name));
    if (!function) {
        std::fprintf(stderr, "mlp_train: %s has no %s: %s\n", LIBRARY_NAME, name, dlerror());
        std::exit(1);
    }
}

cublas_functions load() {
    void *library = open_library();
    cublas_functions f;
    resolve(library, "cublasCreate_v2", f.create);
    resolve(library, "cublasDestroy_v2", f.destroy);
    resolve(library, "cublasSetStream_v2", f.set_stream);
    resolve(library, "cublasGetStream_v2", f.get_stream);
    resolve(library, "cublasSetMathMode", f.set_math_mode);
    resolve(library, "cublasSetWorkspace_v2", f.set_workspace);
    resolve(library, "cublasGetPointerMode_v2", f.get_pointer_mode);
    resolve(library, "cublasSetPointerMode_v2", f.set_pointer_mode);
    resolve(library, "cublasSgemm_v2", f.sgemm);
    resolve(library, "cublasGemmEx", f.gemm_ex);
    resolve(library, "cublasSdot_v2_64", f.sdot_64);
    resolve(library, "cublasGetStatusString", f.status_string);
    return f;
}

} // namespace

const cublas_functions &cublas_library() {
    static std::once_flag loaded;
    static cublas_functions functions;
    std::call_once(loaded, [] { functions = load(); });
    return functions;
}

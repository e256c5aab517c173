/* cuBLAS, loaded when first used. Linking it would load libcublas and libcublasLt (about 0.6 GB)
 * at every start of mlp_train, which took 65-100 ms of a run's wall time on the GPU host, also for
 * runs that never call it (every implementation but blas, the CPU, --help). So the calls go
 * through this table of the few functions the project uses, which the first call of
 * cublas_library() fills in with dlopen and dlsym. */
#ifndef MLP_CUBLAS_LIBRARY_H
#define MLP_CUBLAS_LIBRARY_H

#include <cublas_v2.h>

#include "libs/cuda_check.h"

struct cublas_functions {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasGetStream_v2) get_stream;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    decltype(&cublasGetPointerMode_v2) get_pointer_mode;
    decltype(&cublasSetPointerMode_v2) set_pointer_mode;
    decltype(&cublasSgemm_v2) sgemm;
    /* the library's own cublasGemmEx (C++ sees a second, inline one taking cudaDataType) */
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void *, const void *, cudaDataType, int, const void *,
                              cudaDataType, int, const void *, void *, cudaDataType, int,
                              cublasComputeType_t, cublasGemmAlgo_t);
    decltype(&cublasSdot_v2_64) sdot_64;
    decltype(&cublasGetStatusString) status_string;
};

/* The table, loading the library on the first call; a library that cannot be loaded, or lacks
 * one of the functions, ends the process with status 1 and a message naming it. */
const cublas_functions &cublas_library();

#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        cublasStatus_t status_ = (call);                                                           \
        if (status_ != CUBLAS_STATUS_SUCCESS)                                                      \
            cuda_fail(#call, cublas_library().status_string(status_), __FILE__, __LINE__);         \
    } while (0)

#endif

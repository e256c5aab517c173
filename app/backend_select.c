/* Choosing an implementation (see backend_select.h): the one place that knows the CPU and GPU
 * libraries, and which GPU and which all-reduce a rank takes. */
#include "app/backend_select.h"

#include <stdio.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "core/distributed.h"
#ifdef MLP_HAVE_CUDA
#include "cuda/gpu_backend.h"
#endif
#ifdef MLP_HAVE_NCCL
#include "cuda/gpu_nccl.h"
#endif
#if defined(MLP_HAVE_CUDA) && defined(MLP_HAVE_MPI)
#include "cuda/gpu_p2p.h"
#endif

device_presence gpu_presence(char *why, size_t why_size) {
#ifdef MLP_HAVE_CUDA
    return gpu_probe(why, why_size);
#else
    snprintf(why, why_size, "this mlp_train was built without CUDA");
    return DEVICE_ABSENT;
#endif
}

#ifdef MLP_HAVE_CUDA
/* One GPU per rank: the rank's place among the ranks on its host. */
static backend *gpu_backend_for_rank(const char *impl, gemm_precision precision, char *err,
                                     size_t err_size) {
    int gpus = gpu_device_count(), ranks_here = distributed_local_ranks();
    if (ranks_here > gpus) {
        snprintf(err, err_size,
                 "%d ranks on this host but %d GPU%s: each rank takes a GPU of its own; start at "
                 "most %d rank%s per host (mpirun -np %d)",
                 ranks_here, gpus, gpus == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s", gpus);
        return NULL;
    }
    backend *be = gpu_backend_create(impl, distributed_local_rank(), precision);
    if (!be)
        snprintf(err, err_size, "no implementation '%s' on the gpu in %s", impl,
                 gemm_precision_name(precision));
    return be;
}
#endif

bool precision_supported(const char *device, const char *impl, gemm_precision precision, char *why,
                         size_t why_size) {
    const char *name = gemm_precision_name(precision);
    if (precision == PRECISION_FP32) return true;
    if (device && strcmp(device, "cpu") == 0) {
        snprintf(why, why_size,
                 "--precision %s needs the GPU's tensor cores; the CPU implementations multiply in "
                 "FP32 only (use --device gpu, or --precision fp32)",
                 name);
        return false;
    }
    if (impl && strcmp(impl, "naive") == 0) {
        snprintf(why, why_size,
                 "--precision %s applies to --impl tiled, blas and fused; the naive kernels "
                 "multiply in FP32 only",
                 name);
        return false;
    }
    return true;
}

backend *backend_create(const char *device, const char *impl, gemm_precision precision,
                        char *err, size_t err_size) {
    if (!precision_supported(device, impl, precision, err, err_size)) return NULL;
    if (strcmp(device, "cpu") == 0) {
        backend *be = cpu_backend_create(impl);
        if (!be) snprintf(err, err_size, "no implementation '%s' on the cpu", impl);
        return be;
    }
    char why[256];
    switch (gpu_presence(why, sizeof why)) {
    case DEVICE_PRESENT: break;
    case DEVICE_ABSENT: snprintf(err, err_size, "--device gpu: no GPU here: %s", why); return NULL;
    case DEVICE_BROKEN: snprintf(err, err_size, "--device gpu: the GPU fails: %s", why); return NULL;
    }
#ifdef MLP_HAVE_CUDA
    return gpu_backend_for_rank(impl, precision, err, err_size);
#else
    return NULL; /* not reached: gpu_available is false without CUDA */
#endif
}

void backend_fused_whole_always(backend *be, bool always) {
#ifdef MLP_HAVE_CUDA
    if (strcmp(be->device_name, "gpu") == 0) gpu_backend_fused_whole_always(be, always);
#else
    (void)be, (void)always;
#endif
}

void backend_bind_this_thread(const backend *be) {
#ifdef MLP_HAVE_CUDA
    if (strcmp(be->device_name, "gpu") == 0) gpu_use_device(distributed_local_rank());
#else
    (void)be;
#endif
}

#ifdef MLP_HAVE_CUDA
/* The GPU ranks' all-reduce: p2p (MPI builds), NCCL (builds with it), or whichever can run. */
static bool gpu_join_ranks(backend *be, allreduce_choice choice, char *err, size_t err_size) {
    char why[256] = "";
#ifdef MLP_HAVE_MPI
    bool p2p = choice != ALLREDUCE_NCCL && gpu_p2p_possible(why, sizeof why);
    if (p2p) {
        gpu_backend_join_p2p(be);
        return true;
    }
#endif
    if (choice == ALLREDUCE_P2P) {
        snprintf(err, err_size, "--allreduce p2p: %s; use --allreduce nccl", why);
        return false;
    }
#ifdef MLP_HAVE_NCCL
    gpu_backend_join(be);
    return true;
#else
    if (*why)
        snprintf(err, err_size,
                 "--device gpu under mpirun: the p2p all-reduce cannot run (%s), and this "
                 "mlp_train was built without NCCL: install NCCL (libnccl-dev) and rebuild, or "
                 "train with --device cpu",
                 why);
    else
        snprintf(err, err_size,
                 "--allreduce nccl: this mlp_train was built without NCCL: install NCCL "
                 "(libnccl-dev) and rebuild, or use --allreduce p2p");
    return false;
#endif
}
#endif

bool backend_join_ranks(backend *be, allreduce_choice choice, char *err, size_t err_size) {
    if (!distributed_launched()) return true;
    if (strcmp(be->device_name, "cpu") == 0) {
        if (choice != ALLREDUCE_AUTO) {
            snprintf(err, err_size,
                     "--allreduce chooses how GPU ranks sum their gradients; the CPU's ranks use "
                     "MPI_Allreduce");
            return false;
        }
        cpu_backend_join(be);
        return true;
    }
#ifdef MLP_HAVE_CUDA
    return gpu_join_ranks(be, choice, err, err_size);
#else
    return false; /* not reached: a GPU backend needs CUDA */
#endif
}

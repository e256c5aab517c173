/* cblas_sgemm in row-major order; see openblas_gemm.h for why no transposition tricks are
 * needed. OpenBLAS itself is loaded on first use (openblas_library.h). */
#include "libs/openblas_gemm.h"

#include <stdio.h>
#include <strings.h>

#include "libs/openblas_library.h"

void cpu_gemm_blas(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    openblas_library()->sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
                              beta, c, ldc);
}

void openblas_threads(int n) { openblas_library()->set_num_threads(n); }

bool openblas_has_own_threads(void) { return openblas_library()->get_parallel() == 1; }

const char *openblas_core_name(void) { return openblas_library()->get_corename(); }

const char *openblas_description(void) {
    static char description[96];
    static const char *const builds[] = {"sequential", "pthreads", "OpenMP"};
    int parallel = openblas_library()->get_parallel();
    char version[32] = "";
    sscanf(openblas_library()->get_config(), "OpenBLAS %31s", version);
    snprintf(description, sizeof description, "OpenBLAS %s, %s build, %s kernels", version,
             parallel >= 0 && parallel <= 2 ? builds[parallel] : "unknown", openblas_core_name());
    return description;
}

/* OpenBLAS's x86 kernel sets older than AVX2 (its core names, as openblas_get_corename says). */
static bool core_lacks_avx2(const char *core) {
    static const char *const pre_avx2[] = {
        "Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2", "Penryn",
        "Dunnington", "Nehalem", "Sandybridge", "Athlon", "Opteron", "Opteron_SSE3", "Barcelona",
        "Bobcat", "Bulldozer", "Piledriver", "Steamroller", "Nano"};
    for (size_t i = 0; i < sizeof pre_avx2 / sizeof pre_avx2[0]; i++)
        if (strcasecmp(core, pre_avx2[i]) == 0) return true;
    return false;
}

bool openblas_core_advice(char *advice, size_t size) {
#if defined(__x86_64__) && defined(__GNUC__)
    const char *core = openblas_core_name();
    if (!__builtin_cpu_supports("avx2") || !core_lacks_avx2(core)) return false;
    bool avx512 = __builtin_cpu_supports("avx512f");
    snprintf(advice, size,
             "OpenBLAS did not recognise this CPU and uses its %s kernels, without the %s this CPU "
             "has; OPENBLAS_CORETYPE=%s in the environment selects the right ones",
             core, avx512 ? "AVX-512" : "AVX2", avx512 ? "SkylakeX" : "Haswell");
    return true;
#else
    (void)advice;
    (void)size;
    return false;
#endif
}

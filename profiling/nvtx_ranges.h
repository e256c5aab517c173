/* NVTX ranges in the domain "mlp_train", so Nsight Systems shows run → epoch → step → phase.
 * Built with NVTX v3 (header-only) when the CUDA toolkit is present; otherwise every call
 * compiles to nothing. Ranges nest: each push is matched by a pop on the same thread. */
#ifndef MLP_NVTX_RANGES_H
#define MLP_NVTX_RANGES_H

#ifdef MLP_HAVE_NVTX
void nvtx_range_push(const char *name);
void nvtx_range_pop(void);
#else
static inline void nvtx_range_push(const char *name) { (void)name; }
static inline void nvtx_range_pop(void) {}
#endif

#endif

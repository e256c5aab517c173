/* The CPU implementations: naive loops, cache-tiled + OpenMP, or OpenBLAS for the GEMM; every
 * other operation from cpu_ops.c. */
#ifndef MLP_CPU_BACKEND_H
#define MLP_CPU_BACKEND_H

#include "core/backend.h"

/* impl is "naive", "tiled" or "blas"; returns NULL for any other name. */
backend *cpu_backend_create(const char *impl);

/* Makes be one of the ranks distributed_start joined: its gradients are summed across them by
 * MPI (all_reduce_sum). */
void cpu_backend_join(backend *be);

/* Threads for the CPU implementation `impl`: its OpenMP loops and OpenBLAS alike. With
 * OpenBLAS's pthreads build, the blas implementation keeps its OpenMP loops on one thread
 * (cpu_backend.c says why). */
void cpu_set_threads(int threads, const char *impl);

#endif

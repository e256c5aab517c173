/* A stand-in for the NVIDIA driver's library (libcuda.so.1) that is installed but fails: it
 * reports a driver version and fails cuInit with CUDA_ERROR_UNKNOWN, as a driver in a bad state
 * does. broken_gpu_test.sh puts it first on LD_LIBRARY_PATH. */
int cuDriverGetVersion(int *version) {
    *version = 13000;
    return 0;
}

int cuInit(unsigned int flags) {
    (void)flags;
    return 999; /* CUDA_ERROR_UNKNOWN */
}

/* Ranks through MPI (see distributed.h). Built without MPI (MLP_HAVE_MPI undefined), every
 * process is alone, and refuses to run as one of several ranks, which would train the model
 * several times over and have every copy write the same files. */
#define _POSIX_C_SOURCE 200809L
#include "core/distributed.h"
#include "core/backend.h"
#include "util/host_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MLP_HAVE_MPI
#include <limits.h>
#include <mpi.h>
#endif

static struct {
    bool launched;
    int rank, ranks, local_rank, local_ranks;
    char library[96];
    int *shard_counts, *shard_firsts; /* ranks each, for the sharded update's MPI calls */
} world = {false, 0, 1, 0, 1, "no MPI", NULL, NULL};

bool distributed_launched(void) { return world.launched; }
int distributed_rank(void) { return world.rank; }
int distributed_ranks(void) { return world.ranks; }
int distributed_local_rank(void) { return world.local_rank; }
int distributed_local_ranks(void) { return world.local_ranks; }
const char *distributed_library(void) { return world.library; }

#ifdef MLP_HAVE_MPI

static bool finished;

/* Only rank 0 prints results. */
static void silence_stdout(void) {
    if (world.rank != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "mlp_train: rank %d: cannot send stdout to /dev/null\n", world.rank);
        exit(1);
    }
}

static void check_mpi(int status, const char *call) {
    if (status == MPI_SUCCESS) return;
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, message, &length);
    fprintf(stderr, "mlp_train: rank %d of %d: %s failed: %s\n", world.rank, world.ranks, call,
            message);
    exit(1); /* abort_job_at_exit ends the other ranks */
}

/* exit() before distributed_finish means an error: end every rank, not only this one. */
static void abort_job_at_exit(void) {
    if (finished) return;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static bool launcher_present(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

static void describe_library(void) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    version[strcspn(version, ",\n")] = '\0'; /* the first clause: name and version */
    snprintf(world.library, sizeof world.library, "%.*s", (int)sizeof world.library - 1, version);
}

void distributed_start(int *argc, char ***argv) {
    if (!launcher_present()) return;
    /* FUNNELED: the process has other threads (OpenMP's, OpenBLAS's, the one that sets up the
     * backend), but only the main thread calls MPI */
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "mlp_train: MPI_Init_thread failed: cannot join the ranks mpirun started\n");
        exit(1);
    }
    if (provided < MPI_THREAD_FUNNELED) {
        fprintf(stderr, "mlp_train: this MPI library does not allow threads beside the one that "
                        "calls it (MPI_THREAD_FUNNELED), which mlp_train has\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    world.launched = true;
    atexit(abort_job_at_exit);
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world.rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world.ranks), "MPI_Comm_size");
    MPI_Comm host;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world.rank, MPI_INFO_NULL,
                                  &host),
              "MPI_Comm_split_type");
    check_mpi(MPI_Comm_rank(host, &world.local_rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(host, &world.local_ranks), "MPI_Comm_size");
    check_mpi(MPI_Comm_free(&host), "MPI_Comm_free");
    world.shard_counts = alloc_or_exit(2 * (size_t)world.ranks * sizeof(int), "the shards' layout");
    world.shard_firsts = world.shard_counts + world.ranks;
    describe_library();
    silence_stdout();
}

/* MPI counts are ints: larger arrays go in pieces. */
enum { MPI_PIECE = INT_MAX / 2 };

void distributed_sum(float *data, size_t n) {
    for (size_t done = 0; done < n; done += MPI_PIECE) {
        int count = n - done < MPI_PIECE ? (int)(n - done) : MPI_PIECE;
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + done, count, MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD),
                  "MPI_Allreduce");
    }
}

void distributed_broadcast(void *data, size_t bytes) {
    for (size_t done = 0; done < bytes; done += MPI_PIECE) {
        int count = bytes - done < MPI_PIECE ? (int)(bytes - done) : MPI_PIECE;
        check_mpi(MPI_Bcast((char *)data + done, count, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    }
}

void distributed_barrier(void) { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void distributed_all_gather(const void *mine, void *all, size_t bytes) {
    if (bytes > INT_MAX) {
        fprintf(stderr, "mlp_train: internal error: an all-gather of %zu bytes a rank\n", bytes);
        exit(1);
    }
    check_mpi(MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD),
              "MPI_Allgather");
}

/* Every rank's shard of n floats (backend.h's shard_begin) into world: its count and first
 * element. */
static void shard_layout(size_t n) {
    if (n > INT_MAX) {
        fprintf(stderr, "mlp_train: the sharded update across CPU ranks takes at most %d "
                        "parameters (MPI counts them in ints), not %zu\n", INT_MAX, n);
        exit(1);
    }
    for (int r = 0; r < world.ranks; r++) {
        world.shard_firsts[r] = (int)shard_begin(n, r, world.ranks);
        world.shard_counts[r] = (int)shard_begin(n, r + 1, world.ranks) - world.shard_firsts[r];
    }
}

void distributed_reduce_scatter(float *data, size_t n) {
    shard_layout(n);
    /* in place, the sum of this rank's shard lands at the start of data */
    check_mpi(MPI_Reduce_scatter(MPI_IN_PLACE, data, world.shard_counts, MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD),
              "MPI_Reduce_scatter");
    memmove(data + world.shard_firsts[world.rank], data,
            (size_t)world.shard_counts[world.rank] * sizeof(float));
}

void distributed_all_gather_shards(float *data, size_t n) {
    shard_layout(n);
    check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, world.shard_counts,
                             world.shard_firsts, MPI_FLOAT, MPI_COMM_WORLD),
              "MPI_Allgatherv");
}

int distributed_finish(int status) {
    if (!world.launched) return status;
    fflush(stdout);
    fflush(stderr);
    if (status != 0 && status != 2) {
        MPI_Abort(MPI_COMM_WORLD, status);
        return status; /* not reached */
    }
    finished = true;
    free(world.shard_counts);
    MPI_Finalize();
    return status;
}

#else /* no MPI */

/* Whether a launcher started this process as one of several ranks: Open MPI, MPICH and Intel
 * MPI say how many there are; a PMIx launcher (srun --mpi=pmix) only which one this is. */
static bool launched_among_ranks(void) {
    const char *sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (int i = 0; i < 2; i++) {
        const char *value = getenv(sizes[i]);
        if (value && atoi(value) > 1) return true;
    }
    const char *rank = getenv("PMIX_RANK");
    return rank && atoi(rank) > 0;
}

void distributed_start(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (launched_among_ranks()) {
        fprintf(stderr,
                "mlp_train: launched as one of several ranks, but this mlp_train was built "
                "without MPI, so each rank would train alone; install an MPI (tools/setup.sh "
                "installs Open MPI) and rebuild (cmake -DMLP_MPI=ON)\n");
        exit(1);
    }
}

void distributed_sum(float *data, size_t n) {
    (void)data;
    (void)n; /* one rank: its data is the sum */
}

void distributed_broadcast(void *data, size_t bytes) {
    (void)data;
    (void)bytes; /* one rank: it has rank 0's data */
}

void distributed_barrier(void) {} /* one rank */

void distributed_all_gather(const void *mine, void *all, size_t bytes) {
    memcpy(all, mine, bytes); /* one rank */
}

void distributed_reduce_scatter(float *data, size_t n) {
    (void)data;
    (void)n; /* one rank: its shard is all of data, and its sum */
}

void distributed_all_gather_shards(float *data, size_t n) {
    (void)data;
    (void)n; /* one rank: it holds every shard */
}

int distributed_finish(int status) { return status; }

#endif

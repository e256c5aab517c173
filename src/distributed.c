/* Ranks through MPI (see distributed.h). Built without MPI (MLP_HAVE_MPI undefined), every
 * process is alone, and refuses to run as one of several ranks, which would train the model
 * several times over and have every copy write the same files. */
#define _POSIX_C_SOURCE 200809L
#include "distributed.h"

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
} world = {false, 0, 1, 0, 1, "no MPI"};

bool distributed_launched(void) { return world.launched; }
int distributed_rank(void) { return world.rank; }
int distributed_ranks(void) { return world.ranks; }
int distributed_local_rank(void) { return world.local_rank; }
int distributed_local_ranks(void) { return world.local_ranks; }
const char *distributed_library(void) { return world.library; }

#ifdef MLP_HAVE_MPI

static bool finished;

/* The ranks on this process's host. */
static MPI_Comm host_comm = MPI_COMM_NULL;

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

/* MLP_ALL_REDUCE=mpi: MPI_Allreduce even where the ranks share a host (to compare the two). */
static bool mpi_all_reduce_asked;

static void read_all_reduce_choice(void) {
    const char *choice = getenv("MLP_ALL_REDUCE");
    if (!choice || strcmp(choice, "shared") == 0) return;
    if (strcmp(choice, "mpi") != 0) {
        fprintf(stderr, "mlp_train: rank %d: MLP_ALL_REDUCE=%s: expected 'shared' or 'mpi'\n",
                world.rank, choice);
        exit(2);
    }
    mpi_all_reduce_asked = true;
}

void distributed_start(int *argc, char ***argv) {
    if (!launcher_present()) return;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "mlp_train: MPI_Init failed: cannot join the ranks mpirun started\n");
        exit(1);
    }
    world.launched = true;
    atexit(abort_job_at_exit);
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world.rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world.ranks), "MPI_Comm_size");
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world.rank, MPI_INFO_NULL,
                                  &host_comm),
              "MPI_Comm_split_type");
    check_mpi(MPI_Comm_rank(host_comm, &world.local_rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(host_comm, &world.local_ranks), "MPI_Comm_size");
    describe_library();
    read_all_reduce_choice();
    silence_stdout();
}

/* MPI counts are ints: larger arrays go in pieces. */
enum { MPI_PIECE = INT_MAX / 2 };

/* ---- the sum among the ranks of one host, through shared memory ----
 *
 * Where every rank is on one host, each rank copies its array into a window of memory that all
 * of them map (MPI-3 shared memory); after a barrier, rank r sums slice r of all the arrays, in
 * rank order, and leaves the sum in its own slot; after a second barrier, every rank copies the
 * N sums into its array. Each value crosses between cores about twice, against MPI_Allreduce's
 * messages between 16 ranks (0.9 ms a step on the 16-core host, 61% of it). Every element is
 * summed by one rank and copied by all: every rank holds the same bits.
 *
 * The window holds two slots per rank, used in turn: a rank may start the next sum, and write
 * its other slot, while a slower one still copies sums out of this one; it cannot get two sums
 * ahead, since each sum waits at a barrier for every rank to have finished copying the one
 * before. */
static struct {
    MPI_Win window;
    float **slots; /* slots[2 * r + b]: rank r's slot b, as mapped in this process */
    size_t capacity; /* floats per slot */
    int turn;        /* the slot b the next sum uses */
} shared;

static bool sums_in_shared_memory(void) {
    return !mpi_all_reduce_asked && world.ranks > 1 && world.local_ranks == world.ranks;
}

/* Collective: every rank calls it with the same n. */
static void reserve_shared(size_t n) {
    if (n <= shared.capacity) return;
    if (shared.capacity) {
        check_mpi(MPI_Win_unlock_all(shared.window), "MPI_Win_unlock_all");
        check_mpi(MPI_Win_free(&shared.window), "MPI_Win_free");
    }
    float *mine = NULL;
    check_mpi(MPI_Win_allocate_shared((MPI_Aint)(2 * n * sizeof(float)), sizeof(float),
                                      MPI_INFO_NULL, host_comm, &mine, &shared.window),
              "MPI_Win_allocate_shared");
    free(shared.slots);
    shared.slots = malloc(2 * (size_t)world.ranks * sizeof *shared.slots);
    if (!shared.slots) {
        fprintf(stderr, "mlp_train: rank %d: out of memory\n", world.rank);
        exit(1);
    }
    for (int r = 0; r < world.ranks; r++) {
        MPI_Aint bytes;
        int unit;
        float *base;
        check_mpi(MPI_Win_shared_query(shared.window, r, &bytes, &unit, &base),
                  "MPI_Win_shared_query");
        shared.slots[2 * r] = base;
        shared.slots[2 * r + 1] = base + n;
    }
    check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, shared.window), "MPI_Win_lock_all");
    shared.capacity = n;
}

/* Every rank's writes to the window before it, visible to every rank after it. */
static void shared_barrier(void) {
    check_mpi(MPI_Win_sync(shared.window), "MPI_Win_sync");
    check_mpi(MPI_Barrier(host_comm), "MPI_Barrier");
    check_mpi(MPI_Win_sync(shared.window), "MPI_Win_sync");
}

static size_t slice_start(size_t n, int rank) { return n * (size_t)rank / (size_t)world.ranks; }

static void sum_in_shared_memory(float *data, size_t n) {
    reserve_shared(n);
    int b = shared.turn;
    shared.turn ^= 1;
    float *mine = shared.slots[2 * world.rank + b];
    memcpy(mine, data, n * sizeof *data);
    shared_barrier();
    size_t first = slice_start(n, world.rank), end = slice_start(n, world.rank + 1);
    for (size_t i = first; i < end; i++) data[i] = shared.slots[b][i]; /* rank 0's */
    for (int r = 1; r < world.ranks; r++) {
        const float *theirs = shared.slots[2 * r + b];
        for (size_t i = first; i < end; i++) data[i] += theirs[i];
    }
    memcpy(mine + first, data + first, (end - first) * sizeof *data);
    shared_barrier();
    for (int r = 0; r < world.ranks; r++) {
        if (r == world.rank) continue;
        size_t from = slice_start(n, r), to = slice_start(n, r + 1);
        memcpy(data + from, shared.slots[2 * r + b] + from, (to - from) * sizeof *data);
    }
}

const char *distributed_sum_method(void) {
    return sums_in_shared_memory() ? "an MPI-3 shared-memory window" : "MPI_Allreduce";
}

void distributed_sum(float *data, size_t n) {
    if (sums_in_shared_memory()) {
        sum_in_shared_memory(data, n);
        return;
    }
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

int distributed_finish(int status) {
    if (!world.launched) return status;
    fflush(stdout);
    fflush(stderr);
    if (status != 0 && status != 2) {
        MPI_Abort(MPI_COMM_WORLD, status);
        return status; /* not reached */
    }
    finished = true;
    if (shared.capacity) {
        MPI_Win_unlock_all(shared.window);
        MPI_Win_free(&shared.window);
    }
    MPI_Finalize();
    return status;
}

#else /* no MPI */

/* The ranks a launcher announces in the environment (Open MPI, MPICH and Intel MPI), 1 if none. */
static int announced_ranks(void) {
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (int i = 0; i < 2; i++) {
        const char *value = getenv(names[i]);
        if (value && atoi(value) > 0) return atoi(value);
    }
    return 1;
}

void distributed_start(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    int ranks = announced_ranks();
    if (ranks > 1) {
        fprintf(stderr,
                "mlp_train: launched as one of %d ranks, but this mlp_train was built without "
                "MPI, so each rank would train alone; install an MPI (tools/setup.sh installs "
                "Open MPI) and rebuild (cmake -DMLP_MPI=ON)\n",
                ranks);
        exit(1);
    }
}

const char *distributed_sum_method(void) { return "none (one rank)"; }

void distributed_sum(float *data, size_t n) {
    (void)data;
    (void)n; /* one rank: its data is the sum */
}

void distributed_broadcast(void *data, size_t bytes) {
    (void)data;
    (void)bytes; /* one rank: it has rank 0's data */
}

int distributed_finish(int status) { return status; }

#endif

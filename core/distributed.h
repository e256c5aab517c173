/* The processes that train one model together: data parallelism across ranks (docs/distributed.md).
 *
 * Launched by mpirun (or another MPI launcher) in a build with MPI, the process is one rank of
 * MPI_COMM_WORLD. Otherwise it is alone, rank 0 of 1, and nothing here communicates. Under a
 * launcher the gradients are summed across the ranks every step (backend.h, all_reduce_sum), even
 * with one rank, so `mpirun -np 1` runs the communicating path.
 *
 * Only rank 0 prints results: the other ranks' stdout is /dev/null (their stderr stays, for
 * errors). A rank that fails must not leave the others waiting in a collective that never
 * completes: once started, a process that calls exit() before distributed_finish, or finishes
 * with an error status, calls MPI_Abort, and mpirun ends every rank. */
#ifndef MLP_DISTRIBUTED_H
#define MLP_DISTRIBUTED_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Joins the launcher's ranks if launched by one (MPI_Init). Exits with status 1 and a message if
 * MPI cannot start, or if this build has no MPI but was launched as one of several ranks. */
void distributed_start(int *argc, char ***argv);

/* Under a launcher: the gradients go through all_reduce_sum, even with one rank. */
bool distributed_launched(void);

int distributed_rank(void);        /* 0 alone */
int distributed_ranks(void);       /* 1 alone */
int distributed_local_rank(void);  /* place among the ranks on this host: which GPU it takes */
int distributed_local_ranks(void); /* ranks on this host */

/* The MPI library, e.g. "Open MPI v4.1.4", or "no MPI". */
const char *distributed_library(void);

/* data[0..n) = its sum over the ranks, in place, in host memory (MPI_Allreduce). Every rank calls
 * it with the same n. */
void distributed_sum(float *data, size_t n);

/* The two halves of distributed_sum, for a sharded update (backend.h's reduce_scatter_sum and
 * all_gather, in host memory): this rank's shard of data[0..n) becomes its sum over the ranks
 * (MPI_Reduce_scatter), the rest of data left as it may be; and every rank's shard of data[0..n)
 * is copied to every rank (MPI_Allgatherv). Every rank calls them with the same n. */
void distributed_reduce_scatter(float *data, size_t n);
void distributed_all_gather_shards(float *data, size_t n);

/* bytes of data from rank 0 to every rank (MPI_Bcast). */
void distributed_broadcast(void *data, size_t bytes);

/* Returns once every rank has called it (MPI_Barrier). */
void distributed_barrier(void);

/* Every rank's `bytes` of mine, in rank order, into all (ranks × bytes) on every rank
 * (MPI_Allgather; bytes at most INT_MAX). */
void distributed_all_gather(const void *mine, void *all, size_t bytes);

/* The end of the process, returning the exit status for main. Status 0, or 2 (a usage error, the
 * same on every rank, since every rank parses the same command line): MPI_Finalize. Any other
 * status: the message has been printed; MPI_Abort ends every rank with this status. */
int distributed_finish(int status);

#ifdef __cplusplus
}
#endif

#endif

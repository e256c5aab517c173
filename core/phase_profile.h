/* Where the time of a training run goes, phase by phase.
 *
 * Each phase of a step (h2d, forward, backward, the all-reduce among ranks, update), the metric read-back (d2h) and the
 * evaluation are bracketed by phase_begin/phase_end. That always emits an NVTX range of the
 * phase's name; when timing is on, it also records two timing stamps of the backend (CUDA events
 * on the GPU, the monotonic clock on the CPU), so the durations are those of the device's stream,
 * not of the host that queued the work. Stamps live in a ring and are read back lazily, long
 * after the device passed them, so timing adds no host synchronization inside a step.
 *
 * Where the backend times its operations (take_operation_times in backend.h: the CPU), each
 * phase's time is split further into GEMM, the other operations, and the rest (host code
 * between operations): on the CPU the rest and part of the other operations run on one
 * thread, which is what limits the speed-up from more threads (Amdahl's law). */
#ifndef MLP_PHASE_PROFILE_H
#define MLP_PHASE_PROFILE_H

#include <stdbool.h>

#include "core/backend.h"

typedef enum {
    PHASE_H2D,      /* getting the batch onto the device: a device gather, or a host→device copy */
    PHASE_FORWARD,  /* layers, softmax and loss */
    PHASE_BACKWARD, /* gradients */
    PHASE_ALLREDUCE, /* the gradients summed across ranks (mpirun; distributed.h) */
    PHASE_UPDATE,   /* optimizer step */
    PHASE_COMPUTE,  /* "compute": a step replayed from a recording, or a whole pass in one call:
                     * the phases above, which then cannot be told apart (but the all-reduce,
                     * which --profile records apart) */
    PHASE_D2H,      /* reducing the epoch's loss and accuracy and copying them to the host (the
                     * host then waits for the epoch's work: an NVTX range "wait", no phase) */
    PHASE_EVAL,     /* the test-set pass */
    PHASE_COUNT
} phase_id;

extern const char *const phase_names[PHASE_COUNT];

typedef struct {
    double ms[PHASE_COUNT];   /* total milliseconds per phase */
    long count[PHASE_COUNT];  /* how many times each phase ran */
    bool split;               /* whether the two below were measured */
    double gemm_ms[PHASE_COUNT];      /* of ms: inside GEMMs */
    double operations_ms[PHASE_COUNT]; /* of ms: inside the other operations */
} phase_totals;

typedef struct phase_profile phase_profile;

/* timed == false: NVTX ranges only, no stamps (no cost beyond NVTX's). */
phase_profile *phase_profile_create(backend *be, bool timed);
void phase_profile_destroy(phase_profile *p);

/* p == NULL: nothing at all (while work is being recorded rather than run). */
void phase_begin(phase_profile *p, phase_id phase);
void phase_end(phase_profile *p, phase_id phase);

/* Waits for every recorded phase, returns the totals since the previous collect and resets them. */
phase_totals phase_profile_collect(phase_profile *p);

#endif

#include "core/phase_profile.h"
#include "util/host_memory.h"

#include <stdio.h>
#include <stdlib.h>

#include "profiling/nvtx_ranges.h"

const char *const phase_names[PHASE_COUNT] = {"h2d",     "forward", "backward", "allreduce",
                                              "update",  "compute", "d2h",      "eval"};

/* Enough slots that a slot comes round again only after the device has long passed it
 * (a step has four or five phases, so this is a hundred steps of lag or more). */
enum { PHASE_RING = 512 };

typedef struct {
    timing_stamp *start, *end;
    phase_id phase;
    bool pending; /* recorded, not yet read back */
} phase_slot;

struct phase_profile {
    backend *be;
    bool timed;
    phase_slot ring[PHASE_RING];
    int next;    /* slot the next phase_begin uses */
    int current; /* slot of the phase in progress, or -1 */
    phase_totals totals;
};

phase_profile *phase_profile_create(backend *be, bool timed) {
    phase_profile *p = zalloc_or_exit(sizeof *p, "the phase profile");
    p->be = be;
    p->timed = timed;
    p->current = -1;
    if (timed) {
        for (int i = 0; i < PHASE_RING; i++) {
            p->ring[i].start = be->stamp_create(be);
            p->ring[i].end = be->stamp_create(be);
        }
    }
    return p;
}

void phase_profile_destroy(phase_profile *p) {
    if (!p) return;
    if (p->timed) {
        for (int i = 0; i < PHASE_RING; i++) {
            p->be->stamp_destroy(p->be, p->ring[i].start);
            p->be->stamp_destroy(p->be, p->ring[i].end);
        }
    }
    free(p);
}

static void harvest(phase_profile *p, phase_slot *slot) {
    if (!slot->pending) return;
    p->totals.ms[slot->phase] += p->be->stamp_elapsed_ms(p->be, slot->start, slot->end);
    p->totals.count[slot->phase]++;
    slot->pending = false;
}

/* The backend's operation times since phase_begin, added to the phase's. */
static void add_operation_times(phase_profile *p, phase_id phase) {
    if (!p->be->take_operation_times) return;
    double gemm_ms, other_ms;
    p->be->take_operation_times(p->be, &gemm_ms, &other_ms);
    p->totals.split = true;
    p->totals.gemm_ms[phase] += gemm_ms;
    p->totals.operations_ms[phase] += other_ms;
}

void phase_begin(phase_profile *p, phase_id phase) {
    if (!p) return;
    nvtx_range_push(phase_names[phase]);
    if (!p->timed) return;
    if (p->current >= 0) {
        fprintf(stderr, "mlp_train: internal error: phase %s begun inside %s\n", phase_names[phase],
                phase_names[p->ring[p->current].phase]);
        exit(1);
    }
    phase_slot *slot = &p->ring[p->next];
    harvest(p, slot);
    slot->phase = phase;
    if (p->be->take_operation_times) {
        double discarded[2]; /* operations before the phase belong to none */
        p->be->take_operation_times(p->be, &discarded[0], &discarded[1]);
    }
    p->be->stamp_record(p->be, slot->start);
    p->current = p->next;
    p->next = (p->next + 1) % PHASE_RING;
}

void phase_end(phase_profile *p, phase_id phase) {
    if (!p) return;
    if (p->timed) {
        if (p->current < 0 || p->ring[p->current].phase != phase) {
            fprintf(stderr, "mlp_train: internal error: phase %s ended but not begun\n",
                    phase_names[phase]);
            exit(1);
        }
        phase_slot *slot = &p->ring[p->current];
        p->be->stamp_record(p->be, slot->end);
        slot->pending = true;
        p->current = -1;
        add_operation_times(p, phase);
    }
    nvtx_range_pop();
}

phase_totals phase_profile_collect(phase_profile *p) {
    for (int i = 0; i < PHASE_RING; i++) harvest(p, &p->ring[i]);
    phase_totals result = p->totals;
    p->totals = (phase_totals){0};
    return result;
}

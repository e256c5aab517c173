/* The 16-bit copies' bookkeeping (gpu_narrow_copies.h): host-side, in the order operations are
 * queued. */
#include "cuda/gpu_narrow_copies.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

gpu_narrow_copy *entry_of_copy(gpu_narrow_copies *copies, const void *copy) {
    for (int i = 0; i < copies->count; i++)
        if (copies->entries[i].copy == copy) return &copies->entries[i];
    return nullptr;
}

void drop(gpu_narrow_copies *copies, int i) {
    copies->entries[i] = copies->entries[--copies->count];
}

void set(gpu_narrow_copies *copies, void *copy, const float *origin, size_t count, bool current) {
    /* one array, one copy: another copy's entry for the same array is dropped */
    for (int i = copies->count - 1; i >= 0; i--)
        if (copies->entries[i].origin == origin && copies->entries[i].copy != copy) drop(copies, i);
    gpu_narrow_copy *e = entry_of_copy(copies, copy);
    if (!e) {
        if (copies->count == GPU_NARROW_COPIES_MAX) {
            std::fprintf(stderr, "mlp_train: internal error: more than %d 16-bit copies\n", GPU_NARROW_COPIES_MAX);
            std::exit(1);
        }
        e = &copies->entries[copies->count++];
    }
    *e = gpu_narrow_copy{origin, count, copy, current};
}

} // namespace

void gpu_narrow_copy_bind(gpu_narrow_copies *copies, void *copy, const float *origin, size_t count) {
    set(copies, copy, origin, count, true);
}

void gpu_narrow_copy_add_stale(gpu_narrow_copies *copies, void *copy, const float *origin,
                               size_t count) {
    set(copies, copy, origin, count, false);
}

bool gpu_narrow_copy_overlaps(const gpu_narrow_copy *e, const void *p, size_t bytes) {
    const char *begin = static_cast<const char *>(p), *origin = reinterpret_cast<const char *>(e->origin);
    return begin < origin + e->count * sizeof(float) && origin < begin + bytes;
}

void gpu_narrow_copies_written(gpu_narrow_copies *copies, const void *p, size_t bytes) {
    for (int i = 0; i < copies->count; i++)
        if (gpu_narrow_copy_overlaps(&copies->entries[i], p, bytes)) copies->entries[i].current = false;
}

gpu_narrow_copy *gpu_narrow_copy_covering(gpu_narrow_copies *copies, const float *p, size_t count) {
    for (int i = 0; i < copies->count; i++) {
        gpu_narrow_copy &e = copies->entries[i];
        if (p >= e.origin && p + count <= e.origin + e.count) return &e;
    }
    return nullptr;
}

const void *gpu_narrow_copy_of(gpu_narrow_copies *copies, const float *p, size_t count) {
    const gpu_narrow_copy *e = gpu_narrow_copy_covering(copies, p, count);
    if (!e || !e->current) return nullptr;
    return static_cast<const uint16_t *>(e->copy) + (p - e->origin); /* 2 bytes an element */
}

void gpu_narrow_copies_forget_origin(gpu_narrow_copies *copies, const void *p) {
    for (int i = copies->count - 1; i >= 0; i--)
        if (copies->entries[i].origin == p) drop(copies, i);
}

void gpu_narrow_copies_forget_copy(gpu_narrow_copies *copies, const void *copy) {
    for (int i = copies->count - 1; i >= 0; i--)
        if (copies->entries[i].copy == copy) drop(copies, i);
}

gpu_narrow_copies_snapshot gpu_narrow_copies_current(const gpu_narrow_copies *copies) {
    gpu_narrow_copies_snapshot s = {};
    for (int i = 0; i < copies->count; i++)
        if (copies->entries[i].current) s.current[s.count++] = copies->entries[i].copy;
    return s;
}

bool gpu_narrow_copies_still_current(const gpu_narrow_copies *copies, const gpu_narrow_copies_snapshot &then) {
    for (int i = 0; i < then.count; i++) {
        bool current = false;
        for (int j = 0; j < copies->count; j++)
            if (copies->entries[j].copy == then.current[i]) current = copies->entries[j].current;
        if (!current) return false;
    }
    return true;
}

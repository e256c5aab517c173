#include "core/rng.h"

static const uint64_t PCG_MULTIPLIER = 6364136223846793005ULL;

rng rng_create(uint64_t seed, uint64_t stream) {
    rng r = {0, (stream << 1u) | 1u};
    rng_next_u32(&r);
    r.state += seed;
    rng_next_u32(&r);
    return r;
}

uint32_t rng_next_u32(rng *r) {
    uint64_t old = r->state;
    r->state = old * PCG_MULTIPLIER + r->increment;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

float rng_uniform(rng *r) { return (float)(rng_next_u32(r) >> 8) * (1.0f / 16777216.0f); }

float rng_uniform_range(rng *r, float lo, float hi) { return lo + (hi - lo) * rng_uniform(r); }

/* Lemire's multiply-shift with rejection of the biased low range. */
uint32_t rng_below(rng *r, uint32_t bound) {
    uint64_t product = (uint64_t)rng_next_u32(r) * bound;
    uint32_t low = (uint32_t)product;
    if (low < bound) {
        uint32_t threshold = (uint32_t)(-bound) % bound;
        while (low < threshold) {
            product = (uint64_t)rng_next_u32(r) * bound;
            low = (uint32_t)product;
        }
    }
    return (uint32_t)(product >> 32);
}

void rng_permutation(rng *r, int32_t *order, int n) {
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)i + 1u);
        int32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

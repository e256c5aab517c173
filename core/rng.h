/* The project's own seeded random generator (PCG32, O'Neill 2014): the same seed gives the same
 * weights and the same batch order on every implementation, device and platform. */
#ifndef MLP_RNG_H
#define MLP_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t state;
    uint64_t increment; /* odd; selects the stream */
} rng;

/* A generator for (seed, stream): distinct streams give independent sequences from one seed. */
rng rng_create(uint64_t seed, uint64_t stream);

uint32_t rng_next_u32(rng *r);

/* Uniform in [0, 1), 24 random bits. */
float rng_uniform(rng *r);

/* Uniform in [lo, hi). */
float rng_uniform_range(rng *r, float lo, float hi);

/* Uniform integer in [0, bound), without modulo bias. bound > 0. */
uint32_t rng_below(rng *r, uint32_t bound);

/* order[0..n) becomes a uniformly random permutation of 0..n-1 (Fisher-Yates). */
void rng_permutation(rng *r, int32_t *order, int n);

#ifdef __cplusplus
}
#endif

#endif

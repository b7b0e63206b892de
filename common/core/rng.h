/* rng.h - a small seeded random number generator (xorshift64*).
 *
 * The same seed gives the same stream on every machine, so every program's
 * output is reproducible bit for bit. No global state: each user holds an Rng.
 */
#ifndef RNG_H
#define RNG_H

#include <stdint.h>
#include <stddef.h>

typedef struct {
    uint64_t state;
} Rng;

void rng_seed(Rng *r, uint64_t seed);
uint32_t rng_u32(Rng *r);
/* uniform in [0, 1) with 24 random bits (exactly representable in float32) */
float rng_uniform(Rng *r);
/* standard normal N(0, 1) by Box-Muller */
float rng_normal(Rng *r);
/* integer uniform in [0, n) */
int rng_int(Rng *r, int n);
void rng_fill_uniform(Rng *r, float *x, size_t n, float lo, float hi);
void rng_fill_normal(Rng *r, float *x, size_t n, float mean, float std);

#endif

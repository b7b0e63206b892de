/* rng.c - xorshift64* (Vigna 2014): tiny, fast, and the same everywhere. */
#include "core/rng.h"

#include <math.h>

void rng_seed(Rng *r, uint64_t seed) {
    /* splitmix64 scrambles the seed so 0, 1, 2... give unrelated streams,
     * and never leaves the state at 0 (xorshift's one fixed point). */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    r->state = z ? z : 0x2545F4914F6CDD1Dull;
}

uint32_t rng_u32(Rng *r) {
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return (uint32_t)((r->state * 0x2545F4914F6CDD1Dull) >> 32);
}

float rng_uniform(Rng *r) {
    return (rng_u32(r) >> 8) / 16777216.0f;
}

float rng_normal(Rng *r) {
    /* Box-Muller; 1 - u keeps log() away from 0. Computed in double. */
    double u1 = 1.0 - rng_uniform(r);
    double u2 = rng_uniform(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

int rng_int(Rng *r, int n) {
    return (int)(((uint64_t)rng_u32(r) * (uint64_t)n) >> 32);
}

void rng_fill_uniform(Rng *r, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(r);
}

void rng_fill_normal(Rng *r, float *x, size_t n, float mean, float std) {
    for (size_t i = 0; i < n; i++) x[i] = mean + std * rng_normal(r);
}

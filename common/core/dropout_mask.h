/* dropout_mask.h - the one dropout generator, shared by the CPU and the GPU.
 *
 * Inverted dropout (Sec. 5.4) needs one random bit per element. A stream
 * generator (rng.h) hands them out in order, so the i-th element's bit
 * depends on every draw before it: a GPU thread could not find its own.
 * A counter-based generator (Salmon et al. 2011, "Random numbers: as easy
 * as 1, 2, 3") computes bit i directly from a hash of its coordinates:
 *
 *   key    one 64-bit number per forward pass half (model.c draws it from
 *          the model's dropout Rng, so it stands for (seed, step): the
 *          k-th draw of a stream seeded once; a checkpoint saves that
 *          stream, so a resumed run draws the same keys)
 *   tensor which dropout site in that pass (0 = the embeddings, 1.. the
 *          sub-layers in order)
 *   index  the element's position in that tensor
 *
 *   z    = mix64(mix64(key ^ (tensor * 0xD1B54A32D192ED03)) + index)
 *   u    = (z >> 40) / 2^24                 24 random bits, in [0, 1)
 *   keep = u >= p ? 1/(1-p) : 0             P(keep) = 1 - p
 *
 * mix64 is splitmix64's finaliser (Steele et al. 2014): a bijection on 64
 * bits whose every output bit depends on every input bit. The functions are
 * static inline C with no library calls, so nvcc compiles the very same
 * lines into the kernels (cuda/backend_kernels.cu); the CPU and the GPU draw
 * bit-identical masks.
 */
#ifndef DROPOUT_MASK_H
#define DROPOUT_MASK_H

#include <stdint.h>

#ifdef __CUDACC__
#define DROPOUT_FN static inline __host__ __device__
#else
#define DROPOUT_FN static inline
#endif

DROPOUT_FN uint64_t dropout_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) for element index of dropout site tensor under key */
DROPOUT_FN float dropout_uniform(uint64_t key, uint32_t tensor, uint64_t index) {
    uint64_t z = dropout_mix64(dropout_mix64(key ^ ((uint64_t)tensor * 0xD1B54A32D192ED03ull)) + index);
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* The inverse of dropout_mix64: undo each step, last first. A right
 * xorshift y = z ^ (z >> s) is undone by repeating z = y ^ (z >> s) (each
 * pass fixes s more top bits); an odd multiplier has an inverse mod 2^64,
 * found by Newton's iteration x <- x (2 - a x) (each pass doubles the
 * correct low bits: 5 passes from x = a give 64). */
DROPOUT_FN uint64_t dropout_unshift(uint64_t y, int s) {
    uint64_t z = y;
    for (int i = 0; i < 64 / s + 1; i++) z = y ^ (z >> s);
    return z;
}
DROPOUT_FN uint64_t dropout_inv_odd(uint64_t a) {
    uint64_t x = a;
    for (int i = 0; i < 5; i++) x *= 2 - a * x;
    return x;
}
DROPOUT_FN uint64_t dropout_unmix64(uint64_t z) {
    z = dropout_unshift(z, 31);
    z = dropout_unshift(z * dropout_inv_odd(0x94D049BB133111EBull), 27);
    z = dropout_unshift(z * dropout_inv_odd(0xBF58476D1CE4E5B9ull), 30);
    return z - 0x9E3779B97F4A7C15ull;
}

/* Data parallelism (common/dist/dist.h): a rank whose slice of the batch starts
 * at element off of a dropout site's tensor must draw the bits one process
 * draws there. The ops count index from 0, so the rank gets a key of its
 * own instead: since z = mix64(mix64(key ^ t) + index), the key k' with
 * mix64(k' ^ t) = mix64(key ^ t) + off (mix64 is a bijection: invert it)
 * gives, for every i,
 *   dropout_uniform(dropout_key_shift(key, tensor, off), tensor, i)
 *     == dropout_uniform(key, tensor, i + off).
 * off = 0 returns key itself (one process: unchanged). */
DROPOUT_FN uint64_t dropout_key_shift(uint64_t key, uint32_t tensor, uint64_t off) {
    if (!off) return key;
    uint64_t t = (uint64_t)tensor * 0xD1B54A32D192ED03ull;
    return dropout_unmix64(dropout_mix64(key ^ t) + off) ^ t;
}

/* the scale element index gets: 0 (dropped) or 1/(1-p) (kept); p in [0, 1) */
DROPOUT_FN float dropout_keep(uint64_t key, uint32_t tensor, uint64_t index, float p) {
    return dropout_uniform(key, tensor, index) >= p ? 1.0f / (1.0f - p) : 0.0f;
}

#endif

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

/* the scale element index gets: 0 (dropped) or 1/(1-p) (kept); p in [0, 1) */
DROPOUT_FN float dropout_keep(uint64_t key, uint32_t tensor, uint64_t index, float p) {
    return dropout_uniform(key, tensor, index) >= p ? 1.0f / (1.0f - p) : 0.0f;
}

#endif

/* hash.h - FNV-1a, the library's one hash of strings.
 *
 * FNV-1a (Fowler, Noll, Vo): start from a fixed offset, then for every byte
 * xor it in and multiply by a fixed prime. Short, no tables, and good
 * enough to spread words over an open-addressing table (bpe.c) or to rank
 * sentences in an order that depends on the text alone (corpus.c).
 *
 * Like crc32_update, it goes on from a running value, so the hash of two
 * pieces is fnv1a_update(fnv1a_update(FNV1A_INIT, a, na), b, nb): the same
 * as the hash of a then b in one buffer.
 *
 * static inline: hashing sits in the inner loop of BPE word counting.
 */
#ifndef HASH_H
#define HASH_H

#include <stddef.h>
#include <stdint.h>

/* The starting value. FNV's published 64-bit offset basis is
 * 14695981039346656037; this library has always started from the same
 * digits one short. Any start spreads keys as well, and the fixed split of
 * the Ding corpus (corpus_split_fixed) ranks sentences by this hash, so it
 * stays: a new start would move every dev and test sentence. */
#define FNV1A_INIT 1469598103934665603ull
#define FNV1A_PRIME 1099511628211ull   /* FNV's 64-bit prime, 2^40 + 2^8 + 0xb3 */

/* h with the n bytes at data hashed in */
static inline uint64_t fnv1a_update(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV1A_PRIME;
    return h;
}

/* h with the bytes of s hashed in, up to its NUL */
static inline uint64_t fnv1a_str(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * FNV1A_PRIME;
    return h;
}

#endif

/* checkpoint.h - the byte layer under model_save / model_load (model.h).
 *
 * File format, version 1 (every number little-endian; documented with an
 * example in chapters/07_transformer/README.md):
 *
 *   offset  bytes  field
 *   0       8      magic "AIYNCKPT"
 *   8       4      u32 version (1)
 *   12      8      u64 file size in bytes, CRC included (tells truncation apart
 *                  from corruption)
 *   20      4      u32 flags: bit 0 = a TrainState follows the config,
 *                  bit 1 = learned positional embeddings (Config.pos, Table 3
 *                  (E); a tensor "pos_embed" follows "embed"); older files
 *                  never set it, so they load as sinusoids
 *   24      44     Config: i32 N, d_model, d_ff, h, d_k, d_v, vocab, max_len,
 *                  f32 dropout, i32 pre_ln, i32 pad_id
 *   68      4      u32 number of tensors
 *   72             [TrainState] u64 step, u64 rng_state[0], u64 rng_state[1],
 *                  u64 n (parameters), f32 adam_m[n], f32 adam_v[n]
 *   ...            each tensor, in Params order (model.c):
 *                  u32 name length L (<= 47), L bytes of name (no NUL),
 *                  u32 ndim (1 or 2), u32 shape[ndim], f32 data[product]
 *   size-4  4      u32 CRC-32 of every byte before it
 */
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_MAGIC         "AIYNCKPT"
#define CKPT_VERSION       1u
#define CKPT_OFF_VERSION   8
#define CKPT_OFF_SIZE      12
#define CKPT_OFF_FLAGS     20
#define CKPT_OFF_CONFIG    24
#define CKPT_OFF_NTENSORS  68
#define CKPT_HEADER_BYTES  72
#define CKPT_FLAG_TRAIN    1u
#define CKPT_FLAG_LEARNED_PE 2u   /* Config.pos == POS_LEARNED (Table 3 (E)); clear: sinusoids */

/* What a loaded config may ask for beyond the numbers the file holds: the
 * positional-encoding table, max_len x d_model floats (2^22 floats = 16 MiB:
 * max_len 4096 at Table 3's big d_model 1024, 8192 at base's 512; the paper
 * uses 512). A file's parameters are paid for by its own size, which is
 * checked before anything is allocated. */
#define CKPT_MAX_PE_FLOATS  (1 << 22)
/* A file refused on its header is checksummed, to tell damage from a file
 * written for another layout, only up to this size (the cost of a refusal
 * stays bounded: a 32 GiB file is refused without reading it). */
#define CKPT_DIAG_CRC_BYTES (64ull << 20)

/* Tests only: when non-NULL, called by the loader right after it has opened
 * path (and before it reads a byte), so a test can change the file on disk
 * in the middle of a load. */
extern void (*checkpoint_test_hook)(const char *path);

/* CRC-32 (IEEE 802.3, the polynomial zlib, PNG and gzip use). Chains:
 * crc32_update(crc32_update(0, a, na), b, nb) is the CRC of a then b.
 * crc32_update(0, "123456789", 9) == 0xCBF43926 (the standard check value). */
uint32_t crc32_update(uint32_t crc, const void *data, size_t n);

#endif

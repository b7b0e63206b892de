/* checkpoint.h - a Model, or a whole training run, saved to one file and
 * loaded back (model_save / model_load, trainer_save / trainer_resume).
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
 *   ...            each tensor, in Params order (params.c):
 *                  u32 name length L (<= 47), L bytes of name (no NUL),
 *                  u32 ndim (1 or 2), u32 shape[ndim], f32 data[product]
 *   size-4  4      u32 CRC-32 of every byte before it
 */
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "model/model.h"
#include "model/train.h"

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

/* ---- models ----------------------------------------------------------------
 * Saving writes a uniquely named temporary in path's folder and renames it
 * over path, so an interrupted or failed save never destroys the previous
 * file; it refuses (2) weights or Adam moments that are not all finite. The
 * load order and its messages: checkpoint.c and chapters/07_transformer/README.md. */
typedef struct {
    uint64_t step;          /* optimizer steps taken                         */
    uint64_t rng_state[2];  /* data RNG and dropout RNG                       */
    float *adam_m, *adam_v; /* (n params) each, owned by the caller           */
} TrainState;

/* ts may be NULL (weights only). Returns 0; 2 (state not finite) or 1 (I/O)
 * with err set. */
int model_save(const Model *m, const char *path, const TrainState *ts, char *err, size_t errlen);
/* Builds *m from the file's config and weights (capacity as in model_build).
 * If ts is non-NULL and the file has a TrainState, fills ts (ts->adam_m/v
 * must point at n-params floats each) and sets *has_train_state.
 * Not a regular file (a FIFO), truncated, corrupted (checksum), wrong-magic,
 * wrong-version, inconsistent or non-finite files return 2 with a message;
 * *m is left freed. */
int model_load(Model *m, const char *path, int max_B, int max_Ts, int max_Tt,
               TrainState *ts, int *has_train_state, char *err, size_t errlen);
/* For resuming, in one read: the file must hold a TrainState; ts->adam_m and
 * ts->adam_v are allocated here with m->params.n floats each (sized by the
 * validated config, never by a number read later) and belong to the caller
 * (free). Returns 0, or 2 with a message; *m and ts's arrays are then freed. */
int model_load_train(Model *m, const char *path, int max_B, int max_Ts, int max_Tt, TrainState *ts,
                     char *err, size_t errlen);

/* ---- training runs --------------------------------------------------------- */

/* Saves the model with the TrainState (step, data and dropout RNG, Adam
 * m/v), first brought to the host (trainer_pull). Atomic: model_save writes
 * a unique temporary and renames it; it refuses a state with NaN or inf in
 * it. Returns 0, 2 (state not finite) or 1 (I/O) with err set. */
int trainer_save(Trainer *t, const char *path, char *err, size_t errlen);
/* Resumes a run: builds *m from the checkpoint (capacity max_B sequences,
 * at least B; lengths T, T-1) and sets up *t as trainer_init does, then
 * restores step, both RNGs and the Adam moments from the file. The file's
 * Config wins over any size the caller has in mind. Returns 0, or 2 with a
 * message (bad file, no training state, vocabulary or length that does not
 * fit the copy task); m and t are then freed. */
int trainer_resume(Trainer *t, Model *m, const char *path, const TrainHyper *hp,
                   int B, int T, int max_B, char *err, size_t errlen);

#endif

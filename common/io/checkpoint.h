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
 *                  never set it, so they load as sinusoids; bit 2 =
 *                  decoder only (Config.arch, chapter 14: no encoder.* and
 *                  no cross-attention tensors); bit 3 = RMSNorm
 *                  (Config.norm: each Norm a "gamma" without "beta");
 *                  bit 4 = SwiGLU FFN (Config.ffn: w1, w2, w3, no b1, b2);
 *                  bits 2 to 4 are clear in every older file
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
#include "text/bpe.h"

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
#define CKPT_FLAG_DECODER  4u     /* Config.arch == ARCH_DECODER; clear: encoder-decoder */
#define CKPT_FLAG_RMSNORM  8u     /* Config.norm == NORM_RMS; clear: LayerNorm */
#define CKPT_FLAG_SWIGLU   16u    /* Config.ffn == FFN_SWIGLU; clear: ReLU (Eq. 2) */

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

/* ---- Config's fields, listed once -------------------------------------------
 * The checkpoint's config block (the CFG_I32 and CFG_F32 fields, 4 bytes
 * each, in this order), the grad dump's metadata (grad_dump.c: every field
 * but dropout) and config_differs all read this one table. */
typedef enum { CFG_I32, CFG_F32, CFG_FLAG } ConfigFieldKind;
typedef struct {
    const char *name;        /* as files and messages name it: "d_model"             */
    size_t offset;           /* offsetof(Config, field)                              */
    ConfigFieldKind kind;    /* CFG_F32: dropout; CFG_FLAG: pos, arch, norm, ffn: a bit of the */
                             /* flags each (set only off the 2017 default, so files */
                             /* of the paper's model stay byte for byte as before)  */
} ConfigField;
enum { CONFIG_N_FIELDS = 15 };
extern const ConfigField CONFIG_FIELDS[CONFIG_N_FIELDS];

int config_field_int(const Config *c, const ConfigField *f);   /* an int field's value (not dropout) */
/* 0 if a and b are one architecture: every field but dropout (a run's
 * setting, which changes no weight's meaning); else 1, and the first field
 * that differs in why: "h 2, this run's 4" (a's value, then b's). */
int config_differs(const Config *a, const Config *b, char *why, size_t cap);

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

/* ---- is a file a save of this run? -------------------------------------------
 * A checkpoint holds no run id, so a run is known by what its files hold:
 * the model's config, field for field (config_differs; h 2 and h 4 have the
 * same parameter count); its training state, the step and the data RNG (a
 * chapter that seeds it from --seed and never draws from it names the seed
 * with it); and the vocabulary saved beside it, PATH.bpe, symbol for symbol
 * (the same corpus, split and --vocab). Two runs equal in all of these
 * differ at most in what only steers training (--factor, --warmup,
 * --dropout, --tokens), which no file records. */
typedef struct {
    const Config *cfg;       /* the run's model                                       */
    const Bpe *bpe;          /* NULL, or the run's vocabulary: PATH.bpe must be it    */
    int state;               /* 1: a TrainState saved at `step` with data RNG state   */
    uint64_t step, data_rng; /* `data_rng` must be in the file                        */
} CkptRun;

/* 0 if path is a save of run (m non-NULL: the model it holds is built into
 * *m, capacity 1 x 1 x 1, the caller's to free); else 1 (the file or its
 * .bpe cannot be read: the loader's message in why) or 2 (another run's:
 * what differs in why, e.g. "another model (h 2, this run's 4)"). */
int checkpoint_of_run(const char *path, const CkptRun *run, Model *m, char *why, size_t cap);

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

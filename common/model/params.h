/* params.h - the Transformer's sizes (Config) and its parameters (Params).
 *
 * Config holds the numbers of Table 3 (N, d_model, d_ff, h, d_k, d_v, ...);
 * config_validate says in words what is wrong with one. Params is every
 * weight of Figure 1 in one allocation (Params.mem), with a named tensor
 * ("encoder.0.self_attn.w_q") and a struct field pointing into it for each:
 * the embedding shared three ways (Sec. 3.4), N encoder and N decoder
 * layers. The order of the tensors (also the order in a checkpoint) and
 * their initialisation are written out in params.c. The model (model.h)
 * holds two Params of the same layout, weights and gradients.
 */
#ifndef PARAMS_H
#define PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include "layers/multihead.h"

typedef struct {
    int N;          /* layers in the encoder and in the decoder           */
    int d_model;    /* width of every sub-layer output                    */
    int d_ff;       /* FFN inner width (Eq. 2)                            */
    int h;          /* attention heads                                    */
    int d_k, d_v;   /* per-head query/key and value widths                */
    int vocab;      /* shared source/target vocabulary (Sec. 3.4)         */
    int max_len;    /* longest sequence: rows of the PE table             */
    float dropout;  /* P_drop (Sec. 5.4); used only when training         */
    int pre_ln;     /* 0: post-LN (paper), 1: pre-LN (for comparison)     */
    int pad_id;     /* padding token id, or -1 when there is none         */
    int pos;        /* POS_SINUSOID (Sec. 3.5, the paper's base) or       */
                    /* POS_LEARNED: a trained (max_len, d_model) table,   */
                    /* "pos_embed" (Sec. 3.5's alternative, Table 3 (E))  */
    int arch;       /* ARCH_ENC_DEC (Figure 1, the paper) or ARCH_DECODER:*/
                    /* Figure 1's right half alone, without its cross-    */
                    /* attention: a language model (chapter 14)           */
    int norm;       /* NormKind: NORM_LAYER (LayerNorm, the paper) or     */
                    /* NORM_RMS (RMSNorm: a gain, no bias; sublayer.h)    */
    int ffn;        /* FFN_RELU (Eq. 2, the paper) or FFN_SWIGLU:         */
                    /* (silu(x W1) * (x W3)) W2, no biases, width d_ff    */
} Config;

enum { POS_SINUSOID = 0, POS_LEARNED = 1 };
/* Which stacks a model has. ARCH_DECODER: no encoder, no cross-attention;
 * each decoder layer is masked self-attention then the FFN, and the model
 * reads tgt alone (model_forward_lm). */
enum { ARCH_ENC_DEC = 0, ARCH_DECODER = 1 };
/* Which Norm every Add & Norm (and a pre-LN stack's final Norm) uses: the
 * paper's LayerNorm (Ba et al. 2016), or RMSNorm (Zhang & Sennrich 2019:
 * x / rms(x) * g, no mean, no bias), which most 2026 models use. */
typedef enum { NORM_LAYER = 0, NORM_RMS = 1 } NormKind;
/* Which FFN every layer has: Eq. 2's max(0, x W1 + b1) W2 + b2, or SwiGLU
 * (Shazeer 2020; layers/lm_ffn.h), whose d_ff for the ReLU FFN's parameters
 * is swiglu_d_ff(d_ff): about 2/3 of it. */
enum { FFN_RELU = 0, FFN_SWIGLU = 1 };

/* Upper limits config_validate enforces, so that a typo ("--d-model 5120000")
 * is a plain error instead of an attempt to allocate terabytes. */
#define MODEL_MAX_N        256
#define MODEL_MAX_WIDTH    65536        /* d_model, d_ff, d_k, d_v            */
#define MODEL_MAX_HEADS    1024
#define MODEL_MAX_VOCAB    (1 << 24)
#define MODEL_MAX_LEN      (1 << 20)
#define MODEL_MAX_PARAMS   ((size_t)1 << 31)   /* 8 GiB of float32 weights  */

/* Table 3 "base": N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=64, P_drop=0.1,
 * vocab 37000, max_len 512, post-LN, pad_id 0. */
Config config_base(void);
/* 0 if c is usable; otherwise 2 with a plain message in err, e.g.
 * "d_k is 0; it must be between 1 and 65536". Every size must be positive
 * and below the MODEL_MAX_* limits, dropout in [0, 1), pad_id -1 or a token
 * id, and the parameter count at most MODEL_MAX_PARAMS. d_model == h*d_k is
 * NOT required (Table 3 row B varies d_k alone); a program that derives
 * d_k = d_model / h checks the divisibility itself. */
int config_validate(const Config *c, char *err, size_t errlen);

/* A named parameter tensor inside Params.mem (for checkpoints, summaries). */
typedef struct {
    char name[48];      /* "encoder.0.self_attn.w_q"        */
    float *data;
    int ndim;
    int shape[2];
} NamedTensor;

typedef struct {
    MhaParams self_attn;
    float *ln1_g, *ln1_b;                    /* (d_model)                          */
    float *ffn_w1, *ffn_b1, *ffn_w2, *ffn_b2;/* (d_model,d_ff) (d_ff) (d_ff,d_model) (d_model) */
    float *ffn_w3;                           /* (d_model,d_ff) SwiGLU's gate input; b1, b2 NULL */
    float *ln2_g, *ln2_b;
} EncoderLayer;

/* ARCH_DECODER leaves cross_attn and ln2 out (NULL): ln1 and ln3 keep their
 * names, the Norms of the self-attention and of the FFN. With NORM_RMS every
 * Norm's bias (*_b) is NULL: RMSNorm has a gain only. */
typedef struct {
    MhaParams self_attn;                     /* masked (causal)                    */
    float *ln1_g, *ln1_b;
    MhaParams cross_attn;                    /* queries from decoder, K/V = memory */
    float *ln2_g, *ln2_b;
    float *ffn_w1, *ffn_b1, *ffn_w2, *ffn_b2;
    float *ffn_w3;                           /* SwiGLU only, as in EncoderLayer     */
    float *ln3_g, *ln3_b;
} DecoderLayer;

typedef struct {
    float *embed;           /* (vocab, d_model), shared three ways (Sec. 3.4)   */
    float *pos_embed;       /* (max_len, d_model) learned PE; NULL for sinusoids */
    EncoderLayer *enc;      /* [N]; NULL for ARCH_DECODER                      */
    DecoderLayer *dec;      /* [N]                                             */
    float *enc_ln_g, *enc_ln_b, *dec_ln_g, *dec_ln_b; /* final LNs, pre-LN only (NULL in post-LN) */
    float *mem;             /* the one allocation every pointer above is in    */
    size_t n;               /* floats in mem == model_param_count(cfg)         */
    NamedTensor *tensors;   /* every parameter tensor, in a fixed order        */
    int n_tensors;
} Params;

/* Closed-form parameter count for c (what --summary and Table 3 print). */
size_t model_param_count(const Config *c);

/* ---- lookup ---------------------------------------------------------------- */

/* Elements of one named tensor (shape[0] * shape[1] for ndim 2). */
size_t named_tensor_numel(const NamedTensor *t);
/* The tensor called name in p, or NULL. */
const NamedTensor *params_find(const Params *p, const char *name);

/* ---- allocation and initialisation (what model_build calls) ----------------
 * One allocation per Params: params_alloc takes model_param_count(c) floats
 * (zeroed) and points every field and named tensor into them, in the order
 * params.c documents. Returns 0, or -1 out of memory (p is then freed). */
int params_alloc(Params *p, const Config *c);
/* Points every field of p into p->mem (p->n floats, already there: the
 * host's own block, or a backend's copy laid out the same way) and
 * allocates the pointer tables (enc, dec, tensors). Returns 0 or -1 out of
 * memory. */
int params_layout(Params *p, const Config *c);
/* Frees p->mem (free(NULL) when the memory belongs to someone else and the
 * caller has set it to NULL) and the pointer tables; p is zeroed. */
void params_free(Params *p);
/* Fills every tensor from one Rng seeded with seed, in their fixed order:
 * the embedding N(0, 1/d_model), W_Q, W_K, W_V Xavier-uniform times
 * 1/sqrt(2), the other matrices Xavier-uniform, LayerNorm gamma 1, beta 0,
 * biases 0 (params.c says why). */
void params_init(Params *p, uint64_t seed);

#endif

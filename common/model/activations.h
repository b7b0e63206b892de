/* activations.h - the model's saved activations: what forward keeps for
 * backward, in one block laid out anew for each batch (model.c's forward
 * writes it, its backward reads it; nothing outside model/ looks inside).
 */
#ifndef ACTIVATIONS_H
#define ACTIVATIONS_H

#include <stddef.h>
#include <stdint.h>
#include "model/model.h"
#include "layers/multihead.h"
#include "model/sublayer.h"

/* One allocation holds three regions, laid out again by every call for the
 * actual B, Ts, Tt (the pointers move, nothing is allocated), one after
 * the other from the start of the block:
 *   encoder region  written by model_encode          (depends on B, Ts)
 *   decoder region  written by model_decode          (B, Ts, Tt), after the encoder's
 *   backward region gradients flowing through layers (B, Ts, Tt), after both
 * Token ids and byte masks are carved out of the same float block. The
 * block is the backend's memory (device memory on a GPU): the counting
 * pass (base NULL) sizes it, model_acts_floats(B, Ts, Tt) = the three
 * regions of one batch. Its size is the largest such sum of the batches
 * the caller will run (model_build_cap), not the sum for the most rows of
 * any batch times the longest of any (model_build's per-dimension limits):
 * under a token budget, 96 short rows or 24 long ones, never 96 long ones.
 * Every call checks that its own three regions fit (acts_fit). Masks are
 * built on the host (attention.h's mask_* functions) in small host buffers
 * and uploaded. A decoder-only model (ARCH_DECODER, Ts = 0) has an empty
 * encoder region and, in the decoder's, no sub[1] and no cross. */

typedef struct {
    SubActs sub[2];     /* 0 self-attention, 1 FFN: Add & Norm's (sublayer.h)   */
    MhaActs attn;       /* (Ts,Ts): the attention layer's (layers/multihead.h)  */
    float *hidden;      /* (B,Ts,d_ff) FFN's ReLU output (SwiGLU: silu(a) * b)  */
    float *ffn_a, *ffn_b;/* (B,Ts,d_ff) SwiGLU's x W1, x W3 (NULL for ReLU)     */
} EncActs;

typedef struct {
    SubActs sub[3];     /* 0 masked self-attention, 1 cross-attention, 2 FFN    */
    MhaActs self, cross;/* (Tt,Tt), (Tt,Ts)                                     */
    float *hidden;      /* (B,Tt,d_ff)                                          */
    float *ffn_a, *ffn_b;/* (B,Tt,d_ff) as in EncActs                           */
} DecActs;

struct ModelActs {
    float *mem;                 /* (cap) the one allocation                      */
    size_t cap;                 /* floats in mem: the build's capacity           */
    size_t used_enc, used_dec;  /* floats the last encode's and decode's regions
                                   take: where the next region starts            */
    EncActs *enc;               /* [N] (pointer tables, not activations)         */
    DecActs *dec;               /* [N]                                           */
    int encoded, decoded;       /* which halves hold a valid forward pass        */
    int backward_done;
    uint64_t drop_key;          /* dropout key of this half-pass (dropout_mask.h) */
    uint32_t drop_site;         /* dropout sites used so far in it               */
    uint64_t drop_off;          /* element where this batch starts in the global
                                   batch's tensors (Model.drop_row0), else 0    */
    DropoutSite drop;           /* the site model.c's dropout_next handed out last */

    /* host memory, whatever the backend: what masks are built in, and what
     * the inspection functions hand out */
    int *h_src;                 /* (max_B,max_Ts) the last source ids            */
    uint8_t *h_enc_mask, *h_dec_mask, *h_cross_mask, *h_pad;  /* as below        */

    /* encoder region */
    int *src;                   /* (B,Ts) copy of the source ids                 */
    float *src_emb, *src_keep;  /* (B,Ts,D) embedding*sqrt(D)+PE after dropout   */
    uint8_t *enc_mask;          /* (B,Ts,Ts) padding keys blocked, or NULL       */
    float *enc_ln, *enc_mean, *enc_rstd;  /* final LayerNorm (pre-LN only)       */
    const float *memory;        /* (B,Ts,D) the encoder's output                 */

    /* decoder region */
    int *tgt;                   /* (B,Tt)                                        */
    float *tgt_emb, *tgt_keep;  /* (B,Tt,D)                                      */
    uint8_t *dec_mask;          /* (B,Tt,Tt) causal AND target padding           */
    uint8_t *cross_mask;        /* (B,Tt,Ts) source padding, or NULL             */
    uint8_t *pad_tmp;           /* (B,Tt,Tt) target padding, before the AND      */
    float *dec_ln, *dec_mean, *dec_rstd;  /* final LayerNorm (pre-LN only)       */
    const float *dec_out;       /* (B,Tt,D) input of the output projection       */
    float *logits, *logp;       /* (B*Tt, vocab)                                 */

    /* backward region: (B,T,D) with T = max(Ts, Tt) unless noted */
    float *d_y, *d_x;           /* gradient at a sub-layer's output / input      */
    float *d_ln, *d_sub;        /* at the Sublayer's input Norm(x) (pre-LN), output */
    float *d_mem;               /* (B,Ts,D) memory, summed over cross-attentions */
    float *d_hidden;            /* (B,T,d_ff), SwiGLU (B,T,3 d_ff): FFN scratch  */
    float *d_scratch;           /* mha_backward's work space                     */
    float *d_src_emb, *d_tgt_emb;  /* model_input_grad                           */
    float *ones;                /* (B) all 1: sums the learned PE's gradient over the batch */
    float *h_ones;              /* (max_B) host copy of it                       */
};

/* Lay out a region of the block for one call's sizes from base (base NULL:
 * count only, with a->enc / a->dec NULL too), pointing a's fields into it;
 * each returns the floats its region takes. The encoder region starts at
 * the block's start, the decoder's after the encoder's (a->used_enc), the
 * backward region after both. */
size_t acts_layout_encoder(ModelActs *a, const Config *c, float *base, int B, int Ts);
size_t acts_layout_decoder(ModelActs *a, const Config *c, float *base, int B, int Ts, int Tt);
size_t acts_layout_backward(ModelActs *a, const Config *c, float *base, int B, int Ts, int Tt);
/* Stops at an assertion, shapes printed, unless need floats (from the start
 * of the block to the end of the caller's region) fit m's block; who names
 * the caller. */
void acts_fit(const Model *m, const char *who, size_t need, int B, int Ts, int Tt);

#endif

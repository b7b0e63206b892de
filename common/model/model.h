/* model.h - the encoder-decoder Transformer of Figure 1 (Section 3).
 *
 *   src ids -> Embedding * sqrt(d_model) + PE -> dropout -> N x EncoderLayer -> memory
 *   tgt ids -> Embedding * sqrt(d_model) + PE -> dropout -> N x DecoderLayer(memory)
 *           -> x E^T (the same embedding matrix, Sec. 3.4) -> log-softmax
 *
 *   EncoderLayer (post-LN, as the paper):
 *       x = LayerNorm(x + Dropout(SelfAttn(x)))
 *       x = LayerNorm(x + Dropout(FFN(x)))
 *   DecoderLayer:
 *       x = LayerNorm(x + Dropout(MaskedSelfAttn(x)))
 *       x = LayerNorm(x + Dropout(CrossAttn(x, memory)))
 *       x = LayerNorm(x + Dropout(FFN(x)))
 *   pre_ln = 1 switches every sub-layer to x + Dropout(Sublayer(LayerNorm(x)))
 *   and adds a final LayerNorm after each stack (what many later
 *   implementations do; not the paper).
 *   arch = ARCH_DECODER (params.h) keeps the decoder alone, a language
 *   model (chapter 14): no encoder, and each DecoderLayer without its
 *   CrossAttn line; tgt ids -> ... -> log-softmax, one token ahead.
 *   Two more of Config's switches from 2017 to 2026, in either stack:
 *   norm = NORM_RMS makes every Norm above RMSNorm (sublayer.h), ffn =
 *   FFN_SWIGLU every FFN (silu(x W1) * (x W3)) W2 (model.c's
 *   ffn_any_forward); both run on the CPU only so far. Each line above is one residual
 *   sub-layer, Add & Norm around a Sublayer: sublayer.h has its forward,
 *   its backward and what it saves, for both placements of the Norm.
 *
 * Memory: parameters live in one allocation (Params.mem, params.h) with
 * named tensors pointing into it; gradients in a second with the same
 * layout; activations in a third sized at build time for the largest batch
 * the caller will run (model_acts_floats; model_build: B, Ts, Tt at their
 * maxima). Nothing is allocated inside a forward or backward pass.
 *
 * Backends: every op runs through m->be (backend.h), the CPU's table after
 * model_build; model_to(m, be) moves the model to another backend (the
 * GPU). params and grads are always host memory (checkpoints, inspection);
 * m->be_w and m->be_dw are the backend's view of them: the very same memory on
 * the CPU, device copies laid out the same way on a GPU. model_pull copies
 * the device's weights and gradients back into params/grads, model_push the
 * other way (both do nothing on the CPU).
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "ref/attention.h"
#include "model/backend.h"
#include "model/params.h"
#include "core/rng.h"

typedef struct ModelActs ModelActs;   /* laid out in activations.h */

typedef struct {
    Config cfg;
    Params params;          /* weights                                         */
    Params grads;           /* same layout; model_backward accumulates here    */
    float *pe;              /* (max_len, d_model) sinusoid table (Sec. 3.5);   */
                            /* with POS_LEARNED, params.pos_embed is used instead */
    ModelActs *acts;        /* saved activations for backward (in be's memory) */
    const Backend *be;      /* where forward and backward run (backend.h)      */
    Params be_w, be_dw;           /* params, grads as be sees them (see the top)     */
    float *be_pe;              /* pe as be sees it                                */
    int max_B, max_Ts, max_Tt;  /* per-dimension limits of any batch            */
    size_t acts_floats;     /* floats in acts' one block: the largest batch's  */
                            /* model_acts_floats (model_build_cap)             */
    int B, Ts, Tt;          /* sizes of the last forward pass                  */
    /* The dropout stream: the model's own state, read by anyone (a
     * checkpoint saves dropout_rng), set only through model_set_dropout. */
    Rng dropout_rng;        /* each training half-pass draws its key here      */
    int drop_row0;          /* row of the global batch where this forward's    */
                            /* batch starts (data parallelism); 0 otherwise    */
} Model;

/* Builds a model with weights initialised from seed (the embedding
 * N(0, 1/d_model); W_Q, W_K, W_V Xavier-uniform times 1/sqrt(2); the other
 * matrices Xavier-uniform; LayerNorm gamma=1 beta=0, biases 0: params.c's
 * params_init says why), gradients zeroed, and
 * activations for up to max_B sequences of max_Ts source and max_Tt target
 * tokens. Returns 0, or non-zero with a message in err (invalid config, out
 * of memory) and m left safe to model_free. */
int model_build(Model *m, const Config *c, int max_B, int max_Ts, int max_Tt,
                uint64_t seed, char *err, size_t errlen);
/* Floats of activations one batch of B sequences of Ts source and Tt target
 * tokens takes, training backward included: encoder, decoder and backward
 * regions as activations.c lays them out (exactly what model_build(c, B, Ts, Tt)
 * allocates). 0 for an invalid c or a size below 1; SIZE_MAX where the
 * count would not fit a size_t. Grows with each of B, Ts, Tt. */
size_t model_acts_floats(const Config *c, int B, int Ts, int Tt);
/* model_build with the activation block given in floats: acts_floats, the
 * largest model_acts_floats of the batches the caller will run (for batches
 * cut under a token budget - many short rows or few long ones - far less
 * than the per-dimension maxima's product, which no one batch reaches).
 * max_B, max_Ts, max_Tt stay the limits of any one dimension (host buffers,
 * the checks); a capacity above model_acts_floats(c, max_B, max_Ts, max_Tt)
 * is cut to it. Every forward and backward checks that its own batch's
 * regions fit, and stops at an assertion with the shapes printed if not;
 * model_check_sizes says so beforehand with a message. model_build is
 * model_build_cap(..., model_acts_floats(c, max_B, max_Ts, max_Tt), ...). */
int model_build_cap(Model *m, const Config *c, int max_B, int max_Ts, int max_Tt, size_t acts_floats,
                    uint64_t seed, char *err, size_t errlen);
void model_free(Model *m);   /* model_free on a zeroed or freed Model is a no-op */

/* Moves m to backend be (from whichever it is on): weights and PE table
 * shared with be, activations reallocated in its memory. Returns 0, or 2
 * with a message (out of device memory; m is then back on the CPU). */
int model_to(Model *m, const Backend *be, char *err, size_t errlen);
/* be -> host: params and grads get the backend's latest values (CPU: no-op) */
void model_pull(Model *m);
/* host -> be: the backend's weights get params' values (CPU: no-op) */
void model_push(Model *m);
/* bytes at p (backend memory: a pointer from the functions below, or
 * model_forward's logp) copied to host (CPU: memcpy unless host == p) */
void model_read(const Model *m, void *host, const void *p, size_t bytes);

/* Checks every id is in [0, vocab); returns 0 or 2 with a message naming the
 * first bad position. Call before forward on any user-supplied input. */
int model_check_tokens(const Config *c, const int *ids, int n, const char *what,
                       char *err, size_t errlen);

/* ---- forward --------------------------------------------------------------
 * src (B,Ts), tgt (B,Tt) token ids, already validated. training=1 applies
 * dropout (with m->dropout_rng), 0 is inference. model_forward = encode then
 * decode and returns logp (B*Tt, vocab) = log-softmax of the output
 * projection, pointing into the activations (valid until the next call).
 * Padding masks come from cfg.pad_id (src keys), plus the causal mask in
 * the decoder's self-attention. */
const float *model_forward(Model *m, const int *src, const int *tgt, int B, int Ts, int Tt,
                           int training);
/* The decoder-only model's forward (cfg.arch == ARCH_DECODER): tgt (B,T)
 * through the embedding, N x (masked self-attention, FFN) and x E^T; returns
 * logp (B*T, vocab) as model_forward does, position t predicting token t+1
 * (the caller shifts the targets). model_forward(m, NULL, tgt, B, 0, T, .)
 * is the same call (train.c's path); such a model is built with max_Ts 0
 * and its sizes checked with Ts 0. model_backward undoes it. */
const float *model_forward_lm(Model *m, const int *tgt, int B, int T, int training);
/* Where the next training forwards draw their dropout masks (Sec. 5.4):
 * each half-pass (encode, decode) draws one key from stream, so setting a
 * saved stream again repeats the same masks (a checkpoint resumed, a
 * gradient check, every micro-batch of one step). row0: the row of the
 * global batch where the next forwards' batch starts, so that a slice of
 * a batch (a data-parallel rank's, a micro-batch) draws the very bits the
 * whole batch would there (dropout_mask.h); 0 for a whole batch. */
void model_set_dropout(Model *m, Rng stream, int row0);
/* The two halves, for greedy decoding: encode once, decode as tgt grows. */
void model_encode(Model *m, const int *src, int B, int Ts, int training);
const float *model_decode(Model *m, const int *tgt, int Tt, int training);

/* The encoder output ("memory", (B,Ts,d_model)) of the last encode. */
const float *model_memory(const Model *m);

typedef enum { ATTN_ENC_SELF, ATTN_DEC_SELF, ATTN_DEC_CROSS } AttnKind;
/* Attention weights saved by the last forward pass for one layer:
 * (B,h,Tq,Tk) with Tq,Tk = (Ts,Ts), (Tt,Tt) or (Tt,Ts). */
const float *model_attention(const Model *m, AttnKind kind, int layer);

/* ---- backward -------------------------------------------------------------
 * Given dlogits (B*Tt, vocab), the gradient of the loss with respect to the
 * pre-softmax logits of the last model_forward (training or not), accumulates
 * every parameter's gradient into m->grads. */
void model_backward(Model *m, const float *dlogits);
void model_zero_grad(Model *m);

/* ---- added: sizes, lookup and inspection -----------------------------------
 * (for chapters that print every stage of Figure 1, and for tests) */

/* 0 if a forward pass of B x Ts source and B x Tt target tokens, and its
 * backward, fit the model (the per-dimension limits and the activation
 * block from model_build / model_build_cap, and the PE table's max_len);
 * otherwise 2 with a plain message. Call before forward on user-chosen
 * sizes. */
int model_check_sizes(const Model *m, int B, int Ts, int Tt, char *err, size_t errlen);

/* Saved activations of the last forward pass (valid until the next call),
 * in the backend's memory (host memory on the CPU; model_read copies).   
 * decoder = 0: the encoder side (T = Ts), 1: the decoder side (T = Tt).   */
/* (B,T,d_model) Embedding * sqrt(d_model) + PE, after dropout.             */
const float *model_embedded(const Model *m, int decoder);
/* One residual sub-layer of layer `layer`: sub = SUB_SELF_ATTN, SUB_FFN
 * (encoder: 0, 1) or SUB_SELF_ATTN, SUB_CROSS_ATTN, SUB_DEC_FFN (decoder:
 * 0, 1, 2). part = SUB_OUT: Sublayer(.) after dropout; SUB_SUM: the
 * residual sum x + Sublayer(.); SUB_Y: the sub-layer's output (post-LN:
 * LayerNorm of the sum; pre-LN: the sum itself). (B,T,d_model) each.       */
typedef enum { SUB_SELF_ATTN = 0, SUB_FFN = 1, SUB_CROSS_ATTN = 1, SUB_DEC_FFN = 2 } SubKind;
typedef enum { SUB_OUT = 0, SUB_SUM = 1, SUB_Y = 2 } SubPart;
const float *model_sublayer(const Model *m, int decoder, int layer, SubKind sub, SubPart part);
/* (B,Tt,d_model) what feeds the output projection (after the final
 * LayerNorm in pre-LN).                                                     */
const float *model_decoder_output(const Model *m);
/* (B*Tt, vocab) the pre-softmax logits x E^T.                              */
const float *model_logits(const Model *m);
/* The attention mask a layer of that kind used, (B,Tq,Tk) as in
 * model_attention, or NULL when there was none (no padding id). Host
 * memory on every backend.                                                */
const uint8_t *model_mask(const Model *m, AttnKind kind);
/* After model_backward: (B,T,d_model) the gradient with respect to the
 * embedding-plus-PE sums (before dropout) of the source (decoder = 0) or
 * target (decoder = 1) tokens. Padding positions must get exactly zero.   */
const float *model_input_grad(const Model *m, int decoder);

#endif

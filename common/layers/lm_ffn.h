/* lm_ffn.h - the feed-forward networks of a 2026 language model: the SwiGLU
 * FFN (Shazeer 2020) and a mixture of experts (Switch Transformer, Fedus et
 * al. 2021; Mixtral, Jiang et al. 2024), forward and backward.
 *
 * Conventions as in linear.h: outputs first, shapes in comments, nothing
 * allocates, backward ACCUMULATES (+=) into gradients. N is a count of rows
 * (B*T). The products are linear.h's linear_forward / linear_backward (no
 * biases: a 2026 model has none), the elementwise gate ref/lm_ops.h's
 * swiglu_forward_ref, the ReLU expert linear.h's ffn_forward.
 */
#ifndef LM_FFN_H
#define LM_FFN_H

#include <stddef.h>

/* ---- the SwiGLU FFN ----------------------------------------------------------
 *   FFN_SwiGLU(x) = (silu(x W1) * (x W3)) W2
 * out (N,d_model), x (N,d_model), W1 and W3 (d_model,d_ff), W2 (d_ff,d_model);
 * saved for backward: a = x W1, b = x W3, hidden = silu(a) * b, each (N,d_ff). */
void swiglu_ffn_forward(float *out, float *a, float *b, float *hidden, const float *x,
                        const float *W1, const float *W3, const float *W2, int N, int d_model, int d_ff);
/* dx (N,d_model) +=, dW1, dW3 (d_model,d_ff) +=, dW2 (d_ff,d_model) += (any
 * of them NULL: not wanted); scratch holds 3*N*d_ff floats. */
void swiglu_ffn_backward(float *dx, float *dW1, float *dW3, float *dW2, float *scratch, const float *dout,
                         const float *a, const float *b, const float *hidden, const float *x,
                         const float *W1, const float *W3, const float *W2, int N, int d_model, int d_ff);
/* The SwiGLU width with the parameters of a two-matrix FFN of width d_ff
 * (no biases): 3 * d_model * w = 2 * d_model * d_ff, so w = 2/3 d_ff, which
 * is 8/3 d_model at the paper's d_ff = 4 d_model. Rounded to the nearest
 * multiple of multiple_of (half way: up; with 1, the nearest integer, 2/3
 * d_ff is never half way), at least multiple_of: d_model 128, d_ff 512
 * gives 341 (1) or 344 (8). The parameter count then differs from the ReLU
 * FFN's by at most 3 * d_model * multiple_of / 2. */
int swiglu_d_ff(int d_ff, int multiple_of);

/* ---- mixture of experts ------------------------------------------------------
 * E experts, each an FFN of width d_ff (ReLU, Eq. 2 without biases, or
 * SwiGLU); a router sends each token to k of them:
 *   p       = softmax(x W_r)                      (N,E), W_r (d_model,E)
 *   chosen  = the k largest p of the row, largest first (ties: lower index)
 *   gate_j  = p_j / sum of the chosen p           renormalised over the k chosen
 *             (Mixtral's softmax over the top-k logits is the same number);
 *             with renorm = 0, gate_j = p_j, as Switch Transformer does (at
 *             k = 1 a renormalised gate is always 1 and the router would
 *             learn from the balance loss alone)
 *   out     = sum_j gate_j * Expert_chosen_j(x)
 * The load-balancing loss (Switch Transformer, Eq. 4), to add to the model's
 * loss times a coefficient alpha (Switch uses 0.01):
 *   aux = E * sum_e f_e * P_e
 *   f_e = (tokens that chose e) / (N * k)  the share of the N*k assignments
 *   P_e = mean over tokens of p_e          the router's mean probability
 * f_e counts, which has no gradient: aux teaches the router through P_e,
 * lowering the probability of the experts that get more than their share.
 * Perfect balance gives aux = 1 (Hugging Face's Mixtral loss, which sums f
 * over the k slots, is k times this). */
typedef enum { EXPERT_RELU, EXPERT_SWIGLU } ExpertKind;

typedef struct {
    int d_model, d_ff;     /* each expert: d_model -> d_ff -> d_model    */
    int E, k;              /* experts, experts per token (1 <= k <= E)   */
    ExpertKind kind;
    int renorm;            /* 1: gates renormalised over the k chosen    */
} MoeConfig;

/* Parameters, each expert's matrices back to back. */
typedef struct {
    float *w_r;            /* (d_model,E)        the router              */
    float *w1;             /* (E,d_model,d_ff)                           */
    float *w3;             /* (E,d_model,d_ff)   SwiGLU only (else NULL) */
    float *w2;             /* (E,d_ff,d_model)                           */
} MoeParams;

/* What the forward saves. The N*k (token, choice) assignments are grouped
 * by expert: slot s holds assignment order[s] = t*k + j, and expert e's
 * rows are slots offset[e] .. offset[e+1]-1, in token order. */
typedef struct {
    float *probs;          /* (N,E)      softmax of the router's logits    */
    float *gate;           /* (N,k)      the chosen experts' weights       */
    float *xg;             /* (N*k,d_model)  x, gathered by slot           */
    float *a, *b, *hidden; /* (N*k,d_ff) each expert's hidden layer by slot
                              (ReLU: hidden only, a and b NULL)            */
    float *yg;             /* (N*k,d_model)  each expert's output by slot  */
    int *choice;           /* (N,k)      the chosen experts                */
    int *order;            /* (N*k)      slot -> assignment t*k + j        */
    int *slot;             /* (N*k)      assignment -> slot                */
    int *offset;           /* (E+1)      expert e's first slot             */
} MoeActs;

/* 0 when the sizes make sense; otherwise 1 and a sentence in err. */
int moe_check(const MoeConfig *c, char *err, size_t errlen);
/* Floats and ints of MoeActs for N rows; moe_acts_layout points a's fields
 * into fbuf and ibuf. */
size_t moe_acts_floats(const MoeConfig *c, int N);
size_t moe_acts_ints(const MoeConfig *c, int N);
void moe_acts_layout(MoeActs *a, float *fbuf, int *ibuf, const MoeConfig *c, int N);
/* Floats of scratch moe_backward needs. */
size_t moe_scratch_floats(const MoeConfig *c, int N);

/* out (N,d_model) = the mixture for x (N,d_model); returns aux. */
float moe_forward(float *out, MoeActs *a, const MoeParams *p, const float *x, const MoeConfig *c, int N);
/* dx (N,d_model) +=, g's matrices += (g->w3 NULL for ReLU; dx may be NULL),
 * from dout (N,d_model) and d_aux, the gradient of the total loss with
 * respect to aux (alpha when the loss is task + alpha * aux). The gradient
 * reaches the router through the chosen gates and through P_e; the choice
 * itself is a step function, with no gradient. */
void moe_backward(float *dx, MoeParams *g, float *scratch, const float *dout, float d_aux,
                  const MoeActs *a, const MoeParams *p, const float *x, const MoeConfig *c, int N);
/* The expert width at equal ACTIVE parameters: k experts of width w and the
 * router hold what one dense FFN of width d_ff holds (the same kind, m = 2
 * matrices for ReLU, 3 for SwiGLU):
 *   k * m * d_model * w + d_model * E = m * d_model * d_ff
 * so w = d_ff / k - E / (m * k), rounded to the nearest integer (half way:
 * up), at least 1. The total parameters are about E/k times the dense FFN's. */
int moe_expert_width(int d_model, int d_ff, int E, int k, ExpertKind kind);

#endif

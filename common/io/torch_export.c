/* torch_export.c - the weights in torch.nn.Transformer's layout (see
 * torch_export.h for the tensor list).
 *
 * Two passes over the same code: the first only counts the tensors and
 * their floats, the second (with the buffers allocated) fills them. Every
 * tensor is a copy, transposed where PyTorch wants [out, in]; the whole
 * export then goes to safetensors_write in one call.
 */
#include "io/torch_export.h"
#include "core/fail.h"
#include "io/safetensors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LayerNorm's epsilon, as in the model (common/ref/nn.c) and nn.Transformer's default */
#define TORCH_LN_EPS "1e-05"

typedef struct {
    SafeTensor *t;                  /* [n] the tensors (NULL while counting)        */
    char (*names)[TORCH_NAME_MAX];  /* [n] their names (NULL while counting)        */
    float *mem;                     /* [used] their floats, zeroed (NULL while counting) */
    int n;                          /* tensors so far                               */
    size_t used;                    /* floats so far                                */
} Export;

/* Appends a tensor of shape (d0) (d1 = 0) or (d0, d1) named by fmt; returns
 * where its d0*d1 floats go, or NULL while counting. */
__attribute__((format(printf, 4, 5)))
static float *add(Export *x, int d0, int d1, const char *fmt, ...) {
    size_t numel = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    float *p = NULL;
    if (x->t) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->names[x->n], TORCH_NAME_MAX, fmt, ap);
        va_end(ap);
        p = x->mem + x->used;
        x->t[x->n] = (SafeTensor){x->names[x->n], SAFETENSORS_F32, p, d1 ? 2 : 1, {d0, d1}};
    }
    x->n++;
    x->used += numel;
    return p;
}

/* dst (out, in) = W^T for W (in, out): the project's x W is nn.Linear's x dst^T */
static void transpose_into(float *dst, const float *W, int in, int out) {
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) dst[(size_t)o * in + i] = W[(size_t)i * out + o];
}

/* dst = src (n floats); nothing while counting (dst NULL) or for src NULL (dst stays 0) */
static void copy_into(float *dst, const float *src, size_t n) {
    if (dst && src) memcpy(dst, src, n * sizeof(float));
}

/* nn.Linear(in, out): "<p>.weight" [out, in] = W^T, "<p>.bias" [out] = b (zeros for b NULL) */
static void add_linear(Export *x, const char *p, const float *W, const float *b, int in, int out) {
    float *w = add(x, out, in, "%s.weight", p);
    if (w) transpose_into(w, W, in, out);
    copy_into(add(x, out, 0, "%s.bias", p), b, (size_t)out);
}

/* nn.MultiheadAttention(d, h): in_proj_weight [3d, d] holds W^Q^T, W^K^T,
 * W^V^T one under the other. Head i of the queries is rows i*d_k..(i+1)*d_k-1
 * of W^Q^T in both conventions (columns of W^Q here), so the heads line up
 * without reordering. No biases in the paper: in_proj_bias, out_proj.bias 0. */
static void add_mha(Export *x, const char *p, const MhaParams *w, int d) {
    float *in = add(x, 3 * d, d, "%s.in_proj_weight", p);
    if (in) {
        transpose_into(in, w->w_q, d, d);
        transpose_into(in + (size_t)d * d, w->w_k, d, d);
        transpose_into(in + (size_t)2 * d * d, w->w_v, d, d);
    }
    add(x, 3 * d, 0, "%s.in_proj_bias", p);
    char op[TORCH_NAME_MAX];
    snprintf(op, sizeof op, "%s.out_proj", p);
    add_linear(x, op, w->w_o, NULL, d, d);
}

/* nn.LayerNorm(d): weight = gamma, bias = beta */
static void add_norm(Export *x, const char *p, const float *g, const float *b, int d) {
    copy_into(add(x, d, 0, "%s.weight", p), g, (size_t)d);
    copy_into(add(x, d, 0, "%s.bias", p), b, (size_t)d);
}

/* buf = "<p>.<part>" */
static const char *join(char *buf, const char *p, const char *part) {
    snprintf(buf, TORCH_NAME_MAX, "%s.%s", p, part);
    return buf;
}

/* The stack-final norms of a post-LN model. The paper's last layer ends in
 * LN_{g,b}(z) (z = x + Sublayer(x), v = var(z)); nn.Transformer's ends in the
 * layer's own norm and then applies the stack's final norm F. No weights
 * alone make that pair the paper's one LayerNorm: F divides by the standard
 * deviation of whatever it gets, and the eps of two norms in a row cannot
 * add up to one eps. (Weight 1, bias 0 in the layer and (g, b) in F gives
 * LN_{g,b} with eps * (v + eps) in place of eps: off by a relative 5e-6,
 * which on logits of size 4 is 2e-5.)
 *
 * So the layer's last norm only centres. With weight K and eps K^2:
 *     K (z - mean) / sqrt(v + K^2) = (z - mean) / sqrt(1 + v / K^2)  ~  z - mean
 * (K = 2^20: a relative v / 2^41; in float32 v + 2^40 rounds to 2^40 and
 * the norm gives z - mean exactly), and F = (g, b) with the paper's eps is
 * LN_{g,b}(z - mean) = LN_{g,b}(z). eps is not a weight: the loader sets
 * encoder.layers[-1].norm2.eps and decoder.layers[-1].norm3.eps to K^2 (the
 * metadata's "last_norm_eps"; tools/parity/torch_layout.py does). Without
 * that, F sees K times a unit-variance row and its eps counts for nothing:
 * LN_{g,b} with eps 0, a relative eps / (2 v) from the paper's.
 * The other layers' norms are the model's own. In pre-LN the final norms
 * exist in both models and are copied as they are. */
#define TORCH_CENTRE_K   1048576.0f             /* 2^20 */
#define TORCH_CENTRE_EPS "1099511627776"        /* 2^40 = K^2 */

/* a norm that only centres (see above): weight K, bias 0 */
static void add_centring_norm(Export *x, const char *p, int d) {
    float *w = add(x, d, 0, "%s.weight", p);
    if (w) for (int j = 0; j < d; j++) w[j] = TORCH_CENTRE_K;
    add(x, d, 0, "%s.bias", p);
}

/* The encoder's layers and final norm, then the decoder's (nn.Transformer's state_dict order) */
static void add_layers(Export *x, const Model *m) {
    const Config *c = &m->cfg;
    const Params *P = &m->params;
    int d = c->d_model, last = c->N - 1, post = !c->pre_ln;
    char p[40], q[TORCH_NAME_MAX];   /* "transformer.decoder.layers.<l>", "<p>.<part>" */
    for (int l = 0; l < c->N; l++) {
        const EncoderLayer *e = &P->enc[l];
        snprintf(p, sizeof p, "transformer.encoder.layers.%d", l);
        add_mha(x, join(q, p, "self_attn"), &e->self_attn, d);
        add_linear(x, join(q, p, "linear1"), e->ffn_w1, e->ffn_b1, d, c->d_ff);
        add_linear(x, join(q, p, "linear2"), e->ffn_w2, e->ffn_b2, c->d_ff, d);
        add_norm(x, join(q, p, "norm1"), e->ln1_g, e->ln1_b, d);
        if (post && l == last) add_centring_norm(x, join(q, p, "norm2"), d);   /* (g, b) go to encoder.norm */
        else add_norm(x, join(q, p, "norm2"), e->ln2_g, e->ln2_b, d);
    }
    if (post) add_norm(x, "transformer.encoder.norm", P->enc[last].ln2_g, P->enc[last].ln2_b, d);
    else add_norm(x, "transformer.encoder.norm", P->enc_ln_g, P->enc_ln_b, d);
    for (int l = 0; l < c->N; l++) {
        const DecoderLayer *dl = &P->dec[l];
        snprintf(p, sizeof p, "transformer.decoder.layers.%d", l);
        add_mha(x, join(q, p, "self_attn"), &dl->self_attn, d);
        add_mha(x, join(q, p, "multihead_attn"), &dl->cross_attn, d);
        add_linear(x, join(q, p, "linear1"), dl->ffn_w1, dl->ffn_b1, d, c->d_ff);
        add_linear(x, join(q, p, "linear2"), dl->ffn_w2, dl->ffn_b2, c->d_ff, d);
        add_norm(x, join(q, p, "norm1"), dl->ln1_g, dl->ln1_b, d);
        add_norm(x, join(q, p, "norm2"), dl->ln2_g, dl->ln2_b, d);
        if (post && l == last) add_centring_norm(x, join(q, p, "norm3"), d);   /* to decoder.norm */
        else add_norm(x, join(q, p, "norm3"), dl->ln3_g, dl->ln3_b, d);
    }
    if (post) add_norm(x, "transformer.decoder.norm", P->dec[last].ln3_g, P->dec[last].ln3_b, d);
    else add_norm(x, "transformer.decoder.norm", P->dec_ln_g, P->dec_ln_b, d);
}

/* Every tensor of the export, in the wrapper's state_dict order */
static void add_all(Export *x, const Model *m) {
    const Config *c = &m->cfg;
    int V = c->vocab, d = c->d_model;
    copy_into(add(x, V, d, "embed.weight"), m->params.embed, (size_t)V * d);
    if (c->pos == POS_LEARNED)
        copy_into(add(x, c->max_len, d, "pos_embed.weight"), m->params.pos_embed, (size_t)c->max_len * d);
    add_layers(x, m);
    /* nn.Linear(d, vocab, bias=False).weight is [vocab, d] = E: logits = x E^T */
    copy_into(add(x, V, d, "generator.weight"), m->params.embed, (size_t)V * d);
}

int torch_export_check(const Config *c, char *err, size_t errlen) {
    if (c->arch != ARCH_ENC_DEC || c->norm != NORM_LAYER || c->ffn != FFN_RELU)
        return fail_rc(2, err, errlen, "torch.nn.Transformer is the paper's encoder-decoder with LayerNorm and a "
                       "ReLU FFN; this model (arch %d, norm %d, ffn %d) has no twin there", c->arch, c->norm, c->ffn);
    if (c->h * c->d_k != c->d_model || c->d_v != c->d_k)
        return fail_rc(2, err, errlen,
                       "torch.nn.MultiheadAttention needs d_k = d_v = d_model / h; this model has "
                       "d_model %d, h %d, d_k %d, d_v %d (Table 3 row B sizes have no nn.Transformer twin)",
                       c->d_model, c->h, c->d_k, c->d_v);
    return 0;
}

int model_export_torch(const Model *m, const char *path, char *err, size_t errlen) {
    const Config *c = &m->cfg;
    if (torch_export_check(c, err, errlen)) return 2;
    Export count = {0};
    add_all(&count, m);
    Export x = {0};
    x.t = malloc((size_t)count.n * sizeof *x.t);
    x.names = malloc((size_t)count.n * sizeof *x.names);
    x.mem = calloc(count.used, sizeof(float));   /* zeros: the biases the paper does not have */
    int rc = 1;
    if (!x.t || !x.names || !x.mem) {
        fail_rc(1, err, errlen, "torch export: out of memory (%zu floats)", count.used);
        goto done;
    }
    add_all(&x, m);

    char val[8][32];
    const int num[] = {c->d_model, c->h, c->N, c->N, c->d_ff, c->vocab, c->max_len, c->pad_id};
    for (int i = 0; i < 8; i++) snprintf(val[i], sizeof val[i], "%d", num[i]);
    const char *meta[] = {
        "format", "torch.nn.Transformer (tools/parity/torch_layout.py)",
        "d_model", val[0], "nhead", val[1], "num_encoder_layers", val[2], "num_decoder_layers", val[3],
        "dim_feedforward", val[4], "dropout", "0.0", "activation", "relu", "batch_first", "True",
        "norm_first", c->pre_ln ? "True" : "False", "layer_norm_eps", TORCH_LN_EPS,
        "vocab", val[5], "max_len", val[6], "pad_id", val[7],
        "positions", c->pos == POS_LEARNED ? "learned" : "sinusoidal", "embed_scale", "sqrt(d_model)",
        "last_norm_eps", c->pre_ln ? TORCH_LN_EPS : TORCH_CENTRE_EPS,
        "last_norm_eps_goes_to", "transformer.encoder.layers[-1].norm2.eps, transformer.decoder.layers[-1].norm3.eps",
    };
    rc = safetensors_write(path, x.t, x.n, meta, (int)(sizeof meta / sizeof meta[0]) / 2, err, errlen);
done:
    free(x.t), free(x.names), free(x.mem);
    return rc;
}

/* 07_transformer - the whole encoder-decoder of Figure 1, one forward pass.
 *
 * Paper: Section 3 and Figure 1. Every piece of the earlier chapters now
 * sits in one model (common/model/model.c):
 *
 *   source ids -> Embedding * sqrt(d_model) + PE  (Sec. 3.4, 3.5)
 *              -> N x [ self-attention, Add & Norm, FFN, Add & Norm ]  -> memory
 *   target ids -> the SAME embedding * sqrt(d_model) + PE
 *              -> N x [ masked self-attention, Add & Norm,
 *                       cross-attention over memory, Add & Norm,
 *                       FFN, Add & Norm ]
 *              -> x E^T (the same matrix once more) -> softmax: next-token probabilities
 *
 * The program builds a small model with seeded (untrained) weights, runs a
 * toy English -> French pair through it and prints every stage with its
 * shape, the top next-token guesses, and heatmaps of the three kinds of
 * attention (terminal + PNG). Other modes:
 *   --summary             the architecture as a tree, parameters per module
 *   --table3              Table 3's model sizes: our count beside the paper's
 *   --save F / --load F   checkpoints (format in README.md)
 *   --config base --batch 8 --len 32
 *                         time the paper's base model on a random batch
 * Checking these numbers against other implementations (a logits dump for
 * reference.py, gradients and an Adam step against PyTorch, safetensors and
 * torch.nn.Transformer exports) is build/parity_dump's job, from a checkpoint
 * this program saves: tools/parity/parity_dump.c, `make parity`.
 *
 * --device cuda runs the same model (common/model/model.c) with the CUDA backend's
 * kernels: the numbers printed, the guesses and the heatmaps are the GPU's;
 * at the end the model moves back to the CPU for the same forward pass, and
 * the program prints how far the two are apart ("cuda vs CPU: max |diff|");
 * a run on the CPU (the default, or no GPU found) has nothing to compare and
 * says so.
 *
 * Run:  make && ./build/07_transformer [--layers 2] [--d-model 32] [--heads 4]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/cli.h"
#include "model/device.h"
#include "core/fileio.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "core/rng.h"
#include "io/show.h"
#include "io/plot.h"
#include "core/tensor.h"

#define PROG "07_transformer"

/* ---- the toy vocabulary ---------------------------------------------------
 * Twelve named tokens: padding, start, end, a little English and French.
 * Ids past 11 (bigger --vocab) print as t12, t13, ... */
static const char *TOY[12] = {"<pad>", "<s>", "</s>", "the", "cat", "sat", "on", "mat",
                              "le", "chat", "assis", "sur"};
enum { TOY_N = 12 };
/* "the cat sat on the mat </s>" -> "<s> le chat assis": predict the next word */
static const int TOY_SRC[] = {3, 4, 5, 6, 3, 7, 2};
static const int TOY_TGT[] = {1, 8, 9, 10};

enum { LABELS = 512 };                /* token labels for up to 512 source + 512 target positions */
static char label_buf[2 * LABELS][16];

static const char *token_name(int id, int vocab, int slot) {
    if (id >= 0 && id < TOY_N && vocab <= 1000) return TOY[id];
    snprintf(label_buf[slot], sizeof label_buf[slot], "t%d", id);
    return label_buf[slot];
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- --summary: parameters per module, written as the formulas ---------- */

static size_t count_mha(const Config *c) {
    /* W^Q, W^K (d_model, h d_k); W^V (d_model, h d_v); W^O (h d_v, d_model) */
    return (size_t)c->d_model * c->h * c->d_k * 2 + (size_t)c->d_model * c->h * c->d_v * 2;
}
static size_t count_ffn(const Config *c) {
    /* W1 (d_model, d_ff) + b1 (d_ff) + W2 (d_ff, d_model) + b2 (d_model), Eq. 2 */
    return (size_t)c->d_model * c->d_ff * 2 + c->d_ff + c->d_model;
}
static size_t count_ln(const Config *c) { return 2 * (size_t)c->d_model; }

/* One layer of the tree: "<lead>+-- layer n" ("`--" for the last) and its k
 * parts under it, the last part with "`--". */
static void tree_layer(const char *lead, int last, int n, size_t total, const char *const *part,
                       const size_t *size, int k) {
    printf("%s%s-- layer %-48d %12zu\n", lead, last ? "`" : "+", n, total);
    const char *bar = last ? "    " : "|   ";
    for (int i = 0; i < k; i++)
        printf("%s%s%s-- %-50s %12zu\n", lead, bar, i == k - 1 ? "`" : "+", part[i], size[i]);
}

static void print_summary(const Config *c, const Model *m) {
    size_t mha = count_mha(c), ffn = count_ffn(c), ln = count_ln(c);
    size_t emb = (size_t)c->vocab * c->d_model;
    size_t enc = mha + ffn + 2 * ln, dec = 2 * mha + ffn + 3 * ln;
    show_section("Summary: Figure 1 as a tree, with parameter counts");
    printf("%-62s %12s\n", "module", "parameters");
    printf("Transformer (%s, N=%d, d_model=%d, d_ff=%d, h=%d, d_k=%d, d_v=%d, vocab=%d)\n",
           c->pre_ln ? "pre-LN" : "post-LN", c->N, c->d_model, c->d_ff, c->h, c->d_k, c->d_v, c->vocab);
    printf("+-- %-58s %12zu\n", "embed E (vocab x d_model), shared 3 ways (Sec. 3.4)", emb);
    if (c->pos == POS_LEARNED)
        printf("+-- %-58s %12zu\n", "pos_embed (max_len x d_model), learned, Table 3 (E)", (size_t)c->max_len * c->d_model);
    printf("+-- %-58s %12zu\n", "encoder", (size_t)c->N * enc + (c->pre_ln ? ln : 0));
    const char *enc_part[] = {"self_attn: W_Q, W_K, W_V, W_O (no biases)", "ln1: gamma, beta",
                              "ffn: W1, b1, W2, b2 (Eq. 2)", "ln2: gamma, beta"};
    const size_t enc_size[] = {mha, ln, ffn, ln};
    for (int l = 0; l < c->N; l++)
        tree_layer("|   ", l == c->N - 1 && !c->pre_ln, l + 1, enc, enc_part, enc_size, 4);
    if (c->pre_ln) printf("|   `-- %-54s %12zu\n", "ln (final, pre-LN only)", ln);
    printf("`-- %-58s %12zu\n", "decoder", (size_t)c->N * dec + (c->pre_ln ? ln : 0));
    const char *dec_part[] = {"self_attn (masked): W_Q, W_K, W_V, W_O", "ln1",
                              "cross_attn (K, V from memory)", "ln2", "ffn", "ln3"};
    const size_t dec_size[] = {mha, ln, mha, ln, ffn, ln};
    for (int l = 0; l < c->N; l++)
        tree_layer("    ", l == c->N - 1 && !c->pre_ln, l + 1, dec, dec_part, dec_size, 6);
    if (c->pre_ln) printf("    `-- %-54s %12zu\n", "ln (final, pre-LN only)", ln);
    printf("    (output projection: x E^T reuses embed, 0 new parameters)\n");
    size_t total = model_param_count(c);
    printf("%-62s %12zu  (%.2fM)\n", "total", total, total / 1e6);
    if (m) {
        size_t sum = 0;
        for (int i = 0; i < m->params.n_tensors; i++) sum += named_tensor_numel(&m->params.tensors[i]);
        printf("check: %d named tensors in the model hold %zu floats: %s\n", m->params.n_tensors, sum,
               sum == total ? "equal to the closed form" : "DIFFERENT from the closed form");
    }
}

/* ---- --table3: the paper's model sizes ----------------------------------- */

typedef struct {
    const char *row;
    int N, d_model, d_ff, h, d_k, d_v;
    double paper_m;   /* Table 3's "params x10^6", 0 where the paper leaves it blank */
} Table3Row;

static const Table3Row TABLE3[] = {
    {"base", 6, 512, 2048, 8, 64, 64, 65},
    {"(A) h=1", 6, 512, 2048, 1, 512, 512, 0},
    {"(A) h=4", 6, 512, 2048, 4, 128, 128, 0},
    {"(A) h=16", 6, 512, 2048, 16, 32, 32, 0},
    {"(A) h=32", 6, 512, 2048, 32, 16, 16, 0},
    {"(B) d_k=16", 6, 512, 2048, 8, 16, 64, 58},
    {"(B) d_k=32", 6, 512, 2048, 8, 32, 64, 60},
    {"(C) N=2", 2, 512, 2048, 8, 64, 64, 36},
    {"(C) N=4", 4, 512, 2048, 8, 64, 64, 50},
    {"(C) N=8", 8, 512, 2048, 8, 64, 64, 80},
    {"(C) d_model=256", 6, 256, 2048, 8, 32, 32, 28},
    {"(C) d_model=1024", 6, 1024, 2048, 8, 128, 128, 168},
    {"(C) d_ff=1024", 6, 512, 1024, 8, 64, 64, 53},
    {"(C) d_ff=4096", 6, 512, 4096, 8, 64, 64, 90},
    {"big", 6, 1024, 4096, 16, 64, 64, 213},
};

static void print_table3(void) {
    show_section("Table 3: model sizes (shared vocabulary of 37000 assumed, Sec. 5.1)");
    printf("%-18s %2s %7s %5s %3s %4s %4s %11s %9s %7s\n", "row", "N", "d_model", "d_ff", "h", "d_k",
           "d_v", "ours", "paper", "diff");
    for (size_t i = 0; i < sizeof TABLE3 / sizeof TABLE3[0]; i++) {
        const Table3Row *r = &TABLE3[i];
        Config c = config_base();
        c.N = r->N, c.d_model = r->d_model, c.d_ff = r->d_ff, c.h = r->h, c.d_k = r->d_k, c.d_v = r->d_v;
        double ours = model_param_count(&c) / 1e6;
        printf("%-18s %2d %7d %5d %3d %4d %4d %10.2fM", r->row, r->N, r->d_model, r->d_ff, r->h, r->d_k,
               r->d_v, ours);
        if (r->paper_m > 0) printf(" %8.0fM %+6.2fM\n", r->paper_m, ours - r->paper_m);
        else printf(" %9s %7s\n", "-", "");
    }
    Config b = config_base();
    printf("Rows (D) (dropout, label smoothing) and (E) (learned positions) have base's size.\n");
    printf("With a separate output projection instead of the shared E (as in many code\n"
           "sketches) base would have %.2fM; without sharing the source and target\n"
           "embeddings either, %.2fM. See README.md for what may explain the differences.\n",
           (model_param_count(&b) + (size_t)b.vocab * b.d_model) / 1e6,
           (model_param_count(&b) + 2 * (size_t)b.vocab * b.d_model) / 1e6);
}

/* ---- printing the stages ---------------------------------------------------- */

/* A view with named dims for show_shape (printing only). */
static void shape3(const char *name, const float *x, int B, int T, const char *tdim, int C, const char *cdim,
                   const char *note) {
    char dims[64];
    snprintf(dims, sizeof dims, "batch %s %s", tdim, cdim);
    Tensor t = tensor_wrap((float *)x, name, dims, B, T, C);
    show_shape(&t, note);
}

/* A host copy of the first n floats at p, which the model holds wherever it
 * runs (model_read; on the CPU a plain copy). Four rotating buffers, so a
 * few can be alive at once; host_free() at the end. */
static float *host_buf[4];
static size_t host_cap[4];
static int host_next;

static const float *host(const Model *m, const float *p, size_t n) {
    int i = host_next++ % 4;
    if (n > host_cap[i]) {
        free(host_buf[i]);
        if (!(host_buf[i] = malloc(n * sizeof(float)))) cli_fail(PROG, "out of memory");
        host_cap[i] = n;
    }
    model_read(m, host_buf[i], p, n * sizeof(float));
    return host_buf[i];
}

static void host_free(void) {
    for (int i = 0; i < 4; i++) free(host_buf[i]), host_buf[i] = NULL, host_cap[i] = 0;
}

/* The first few numbers of position 0: enough to watch a vector change. */
static void peek(const char *what, const float *x, int C) {
    char name[64];
    snprintf(name, sizeof name, "    %s", what);
    show_vector(name, x, C < 6 ? C : 6);
}

static void row_stats(const float *x, int C, double *mean, double *std) {
    double s = 0, s2 = 0;
    for (int j = 0; j < C; j++) s += x[j];
    *mean = s / C;
    for (int j = 0; j < C; j++) s2 += (x[j] - *mean) * (x[j] - *mean);
    *std = sqrt(s2 / C);
}

static void print_addnorm(const Model *m, int dec, int l, SubKind sub, int rows_T, const char *tdim) {
    int B = m->B, D = m->cfg.d_model;
    const float *y = model_sublayer(m, dec, l, sub, SUB_Y);
    double mean, sd;
    row_stats(host(m, y, (size_t)D), D, &mean, &sd);   /* position 0 */
    char note[128];
    if (m->cfg.pre_ln) snprintf(note, sizeof note, "x + Sublayer(LayerNorm(x))  (pre-LN)");
    else snprintf(note, sizeof note, "LayerNorm(x + Sublayer(x)); pos 0: mean %.3f, std %.3f", mean, sd);
    shape3("Add & Norm", y, B, rows_T, tdim, D, "d_model", note);
}

static void print_stages(const Model *m, const float *logp, const int *src, int Ts, int Tt) {
    const Config *c = &m->cfg;
    int B = m->B, D = c->d_model, V = c->vocab;

    show_section("2. Embedding * sqrt(d_model) + positional encoding (Sec. 3.4, 3.5)");
    Tensor E = tensor_wrap(m->params.embed, "E", "vocab d_model", V, D);
    show_shape(&E, "the ONE embedding matrix: source, target and output projection");
    const float *emb = model_embedded(m, 0);
    const float *emb0 = host(m, emb, (size_t)D);
    const float *e_row = m->params.embed + (size_t)src[0] * D;
    float scaled[8];
    int k = D < 6 ? D : 6;
    for (int j = 0; j < k; j++) scaled[j] = e_row[j] * sqrtf((float)D);
    printf("  source position 0, token '%s':\n", token_name(src[0], V, 0));
    peek("E[id]                ", e_row, D);
    peek("E[id] * sqrt(d_model)", scaled, k);
    /* the position table: the sinusoids of Eq. (3)-(4), or row (E)'s learned one */
    const float *pe = c->pos == POS_LEARNED ? m->params.pos_embed : m->pe;
    peek(c->pos == POS_LEARNED ? "P(pos=0), learned (E)" : "PE(pos=0)            ", pe, D);
    peek("sum (encoder input)  ", emb0, D);
    /* Does x sqrt(d_model) bring the rows to PE's size? Measured, not claimed:
     * the rms of every entry of E * sqrt(d_model) against the rms of PE's
     * entries over the source positions (sqrt(1/2) for sin/cos pairs). */
    double se = 0, sp = 0;
    for (size_t i = 0; i < (size_t)V * D; i++) se += (double)m->params.embed[i] * m->params.embed[i] * D;
    for (size_t i = 0; i < (size_t)Ts * D; i++) sp += (double)pe[i] * pe[i];
    double rms_e = sqrt(se / ((double)V * D)), rms_pe = sqrt(sp / ((double)Ts * D)), r = rms_e / rms_pe;
    const char *pn = c->pos == POS_LEARNED ? "learned P" : "PE";
    printf("  sqrt(d_model) = %.3f; rms of E * sqrt(d_model) %.3f, of %s %.3f (ratio %.2f):\n",
           sqrt((double)D), rms_e, pn, rms_pe, r);
    if (r >= 0.5 && r <= 2)
        printf("  here the scale makes the two comparable, so neither drowns the other.\n");
    else if (r < 0.5)
        printf("  even scaled, these initial rows are %.1fx smaller than %s: position dominates\n"
               "  the sum until training grows E.\n", 1 / r, pn);
    else
        printf("  scaled, these rows are %.1fx larger than %s: meaning dominates the sum.\n", r, pn);
    shape3("encoder input", emb, B, Ts, "seq", D, "d_model", "(dropout P_drop here when training)");
    shape3("decoder input", model_embedded(m, 1), B, Tt, "seq", D, "d_model", "same E, same PE");

    show_section("3. Encoder: N identical layers (Figure 1, left; Sec. 3.1)");
    for (int l = 0; l < c->N; l++) {
        printf(" encoder layer %d of %d\n", l + 1, c->N);
        char note[96];
        snprintf(note, sizeof note, "MultiHead(x, x, x), %d heads of d_k=%d, d_v=%d", c->h, c->d_k, c->d_v);
        shape3("self-attention", model_sublayer(m, 0, l, SUB_SELF_ATTN, SUB_OUT), B, Ts, "seq", D, "d_model", note);
        Tensor w = tensor_wrap((float *)model_attention(m, ATTN_ENC_SELF, l), "weights",
                               "batch heads query key", B, c->h, Ts, Ts);
        show_shape(&w, "softmax(Q K^T / sqrt(d_k)), Eq. (1)");
        print_addnorm(m, 0, l, SUB_SELF_ATTN, Ts, "seq");
        shape3("feed-forward", model_sublayer(m, 0, l, SUB_FFN, SUB_OUT), B, Ts, "seq", D, "d_model",
               "max(0, x W1 + b1) W2 + b2, Eq. (2)");
        print_addnorm(m, 0, l, SUB_FFN, Ts, "seq");
    }
    shape3("memory", model_memory(m), B, Ts, "seq", D, "d_model", "the encoder's output: keys and values "
           "for every decoder layer");

    show_section("4. Decoder: N layers with a third sub-layer (Figure 1, right)");
    for (int l = 0; l < c->N; l++) {
        printf(" decoder layer %d of %d\n", l + 1, c->N);
        shape3("masked self-attn", model_sublayer(m, 1, l, SUB_SELF_ATTN, SUB_OUT), B, Tt, "seq", D, "d_model",
               "position i sees positions <= i only (Sec. 3.2.3)");
        print_addnorm(m, 1, l, SUB_SELF_ATTN, Tt, "seq");
        Tensor w = tensor_wrap((float *)model_attention(m, ATTN_DEC_CROSS, l), "cross weights",
                               "batch heads query key", B, c->h, Tt, Ts);
        shape3("cross-attention", model_sublayer(m, 1, l, SUB_CROSS_ATTN, SUB_OUT), B, Tt, "seq", D, "d_model",
               "queries from the decoder, keys/values = memory");
        show_shape(&w, "one row per target position over the source");
        print_addnorm(m, 1, l, SUB_CROSS_ATTN, Tt, "seq");
        shape3("feed-forward", model_sublayer(m, 1, l, SUB_DEC_FFN, SUB_OUT), B, Tt, "seq", D, "d_model", "Eq. (2)");
        print_addnorm(m, 1, l, SUB_DEC_FFN, Tt, "seq");
    }

    show_section("5. Output: linear (= E^T) and softmax (Sec. 3.4)");
    shape3("decoder output", model_decoder_output(m), B, Tt, "seq", D, "d_model", NULL);
    shape3("logits", model_logits(m), B, Tt, "seq", V, "vocab", "x E^T: a score for every token");
    shape3("log-probabilities", logp, B, Tt, "seq", V, "vocab", "log softmax: log p(next token)");
}

static void print_next_token(const Model *m, const float *logp, const int *tgt, int Tt, int top) {
    int V = m->cfg.vocab;
    const float *row = host(m, logp + (size_t)(Tt - 1) * V, (size_t)V);   /* batch 0, last position */
    printf("  after '%s' (target position %d) the model's next-token guesses:\n",
           token_name(tgt[Tt - 1], V, 0), Tt - 1);
    int used[16] = {0}, nused = 0;
    for (int r = 0; r < top && r < V; r++) {
        int best = -1;
        for (int v = 0; v < V; v++) {
            int seen = 0;
            for (int u = 0; u < nused; u++) seen |= used[u] == v;
            if (!seen && (best < 0 || row[v] > row[best])) best = v;
        }
        used[nused++] = best;
        printf("    %d. %-8s p = %.4f\n", r + 1, token_name(best, V, 1), exp((double)row[best]));
    }
    printf("  (the weights are random, so are these guesses: chapter 08 trains them;\n"
           "   the uniform guess would be 1/%d = %.4f)\n", V, 1.0 / V);
}

/* ---- heatmaps ------------------------------------------------------------- */

static void heatmaps(const Model *m, const int *src, const int *tgt, int Ts, int Tt,
                     int layer, int head, const char *out) {
    const Config *c = &m->cfg;
    int V = c->vocab;
    const char *sl[LABELS], *tl[LABELS];
    for (int i = 0; i < Ts && i < LABELS; i++) sl[i] = token_name(src[i], V, i);
    for (int i = 0; i < Tt && i < LABELS; i++) tl[i] = token_name(tgt[i], V, LABELS + i);
    const char *const *slp = Ts <= LABELS ? sl : NULL, *const *tlp = Tt <= LABELS ? tl : NULL;
    char title[160], name[64];
    struct { AttnKind kind; const char *what, *file; int tq, tk; const char *const *ql, *const *kl; } maps[3] = {
        {ATTN_ENC_SELF, "encoder self-attention", "enc_self", Ts, Ts, slp, slp},
        {ATTN_DEC_SELF, "decoder masked self-attention", "dec_self", Tt, Tt, tlp, tlp},
        {ATTN_DEC_CROSS, "cross-attention (target x source)", "cross", Tt, Ts, tlp, slp},
    };
    for (int i = 0; i < 3; i++) {
        size_t n = (size_t)maps[i].tq * maps[i].tk;   /* batch 0, one head: (Tq,Tk) */
        const float *all = host(m, model_attention(m, maps[i].kind, layer), c->h * n);   /* (h,Tq,Tk) */
        const float *w = all + head * n;
        /* layers and heads are numbered from 1 in everything a reader sees */
        snprintf(title, sizeof title, "%s, layer %d of %d, head %d of %d", maps[i].what, layer + 1, c->N,
                 head + 1, c->h);
        show_heatmap(title, w, maps[i].tq, maps[i].tk, maps[i].ql, maps[i].kl);
        snprintf(name, sizeof name, "%s_layer%d_head%d", maps[i].file, layer + 1, head + 1);
        plot_heatmap(out, name, title, w, maps[i].tq, maps[i].tk, maps[i].ql, maps[i].kl, "key", "query");
        snprintf(name, sizeof name, "%s_heads_layer%d", maps[i].file, layer + 1);
        snprintf(title, sizeof title, "%s, layer %d of %d", maps[i].what, layer + 1, c->N);
        plot_heads_grid(out, name, title, all, c->h, maps[i].tq, maps[i].tk, maps[i].ql, maps[i].kl, "key", "query");
    }
}

/* ---- the run: flags, then one function per section ------------------------------ */

typedef struct {
    /* size flags: 0 (or -1 for dropout) means "what --config says" */
    int N, d_model, d_ff, h, d_k, d_v, vocab, max_len;
    float dropout;
    int pre_ln, learned_pe, summary, table3, layer, head, batch, len;
    uint64_t seed;
    const char *config, *out, *device, *save, *load, *src_s, *tgt_s;
    const Backend *be;   /* where the forward pass runs */
} Opts;

typedef struct {
    int B, Ts, Tt;
    int *src, *tgt;      /* (B,Ts), (B,Tt) token ids */
} Input;

static void parse_flags(Opts *o, int argc, char **argv) {
    *o = (Opts){.dropout = -1.0f, .seed = 42, .config = "small", .out = "out/07_transformer", .device = "cpu",
                 .layer = 1, .head = 1};
    CliOption opts[] = {
        {"--config",    CLI_STRING, &o->config,   "size preset: small, base (Table 3) or big (Table 3)", 0, 0},
        {"--layers",    CLI_INT,    &o->N,        "N, layers per stack (0: preset; small 2)", 0, MODEL_MAX_N},
        {"--d-model",   CLI_INT,    &o->d_model,  "d_model (0: preset; small 32)", 0, MODEL_MAX_WIDTH},
        {"--d-ff",      CLI_INT,    &o->d_ff,     "d_ff, FFN inner width (0: preset; small 64)", 0, MODEL_MAX_WIDTH},
        {"--heads",     CLI_INT,    &o->h,        "h, attention heads (0: preset; small 4)", 0, MODEL_MAX_HEADS},
        {"--d-k",       CLI_INT,    &o->d_k,      "d_k per head (0: d_model / h)", 0, MODEL_MAX_WIDTH},
        {"--d-v",       CLI_INT,    &o->d_v,      "d_v per head (0: d_model / h)", 0, MODEL_MAX_WIDTH},
        {"--vocab",     CLI_INT,    &o->vocab,    "vocabulary size (0: preset; small 12 named toy tokens)", 0, MODEL_MAX_VOCAB},
        {"--max-len",   CLI_INT,    &o->max_len,  "longest sequence, rows of PE (0: preset; small 64)", 0, MODEL_MAX_LEN},
        {"--dropout",   CLI_FLOAT,  &o->dropout,  "P_drop, used only in training (-1: preset)", -1, 0.99},
        {"--pre-ln",    CLI_FLAG,   &o->pre_ln,   "LayerNorm before each sub-layer (not the paper)", 0, 0},
        {"--learned-pe", CLI_FLAG,  &o->learned_pe, "learned positional embeddings, Table 3 row (E)", 0, 0},
        {"--seed",      CLI_U64,    &o->seed,     "random seed for the weights (and --batch tokens)", 0, 0},
        {"--src",       CLI_STRING, &o->src_s,    "source token ids, e.g. \"3 4 5 6 3 7 2\" (default: the toy sentence)", 0, 0},
        {"--tgt",       CLI_STRING, &o->tgt_s,    "target token ids, e.g. \"1 8 9\"", 0, 0},
        {"--batch",     CLI_INT,    &o->batch,    "instead: a random batch of this many sequences (timing)", 0, 4096},
        {"--len",       CLI_INT,    &o->len,      "tokens per random sequence (with --batch; default 32)", 0, MODEL_MAX_LEN},
        {"--layer",     CLI_INT,    &o->layer,    "which layer's attention to draw (1 = first)", 1, MODEL_MAX_N},
        {"--head",      CLI_INT,    &o->head,     "which head's attention to draw (1 = first)", 1, MODEL_MAX_HEADS},
        {"--summary",   CLI_FLAG,   &o->summary,  "print the architecture tree with parameter counts and stop", 0, 0},
        {"--table3",    CLI_FLAG,   &o->table3,   "print Table 3's model sizes, ours beside the paper's, and stop", 0, 0},
        {"--save",      CLI_STRING, &o->save,     "write the model's weights to this checkpoint file", 0, 0},
        {"--load",      CLI_STRING, &o->load,     "read the model from this checkpoint (its config wins)", 0, 0},
        {"--device",    CLI_STRING, &o->device,   "cpu or cuda (cuda: the forward pass runs on the GPU)", 0, 0},
        {"--out",       CLI_STRING, &o->out,      "output folder for heatmap data and PNGs", 0, 0},
    };
    cli_parse(argc, argv, PROG, "the encoder-decoder Transformer of Figure 1, one forward pass, stage by stage",
              opts, CLI_COUNT(opts));
    show_lecture_sections(8);   /* its banners: "1." .. "8." */
    if (!(o->be = backend_select(o->device))) cli_fail(PROG, "--device must be cpu or cuda, got '%s'", o->device);
    /* the checkpoint it writes must not be the one it reads: `--load m.ckpt
     * --save m.ckpt` is refused before anything is written */
    const FioArg files[] = {{"--load", o->load, FIO_READS}, {"--save", o->save, FIO_WRITES}};
    char err[1400];
    if (fio_check_outputs(files, (int)(sizeof files / sizeof files[0]), err, sizeof err)) cli_fail(PROG, "%s", err);
}

/* the config: the preset, then the size flags on top */
static Config make_config(const Opts *o) {
    Config c = config_base();   /* pad_id 0, post-LN */
    if (!strcmp(o->config, "small")) {
        c.N = 2, c.d_model = 32, c.d_ff = 64, c.h = 4, c.vocab = TOY_N, c.max_len = 64, c.dropout = 0.1f;
    } else if (!strcmp(o->config, "big")) {
        c.d_model = 1024, c.d_ff = 4096, c.h = 16, c.dropout = 0.3f;
    } else if (strcmp(o->config, "base")) {
        cli_fail(PROG, "--config must be small, base or big, got '%s'", o->config);
    }
    if (o->N) c.N = o->N;
    if (o->d_model) c.d_model = o->d_model;
    if (o->d_ff) c.d_ff = o->d_ff;
    if (o->h) c.h = o->h;
    if (o->vocab) c.vocab = o->vocab;
    if (o->max_len) c.max_len = o->max_len;
    if (o->dropout >= 0) c.dropout = o->dropout;
    c.pre_ln = o->pre_ln;
    if (o->learned_pe) c.pos = POS_LEARNED;
    if ((!o->d_k || !o->d_v) && c.d_model % c.h != 0)
        cli_fail(PROG, "d_model (%d) must be divisible by h (%d) when --d-k/--d-v are derived from it; "
                 "give --d-k and --d-v", c.d_model, c.h);
    c.d_k = o->d_k ? o->d_k : c.d_model / c.h;
    c.d_v = o->d_v ? o->d_v : c.d_model / c.h;
    return c;
}

/* --table3, and --summary without a model to load: print and stop (1), else 0 */
static int info_only(const Opts *o, const Config *c) {
    char err[512];
    if (o->table3) {
        print_table3();
        return 1;
    }
    if (!o->load && config_validate(c, err, sizeof err)) cli_fail(PROG, "%s", err);
    if (!o->summary || o->load) return 0;
    /* small models are also built, to check the formulas against the tensors that really exist */
    Model sm;
    int built = model_param_count(c) <= 20000000 && model_build(&sm, c, 1, 1, 1, o->seed, err, sizeof err) == 0;
    print_summary(c, built ? &sm : NULL);
    if (built) model_free(&sm);
    return 1;
}

/* the input's sizes and buffers: the toy pair, given ids, or a random batch */
static void input_alloc(const Opts *o, Input *in) {
    in->B = 1, in->Ts = in->Tt = 0;
    if (o->batch > 0 || o->len > 0) {
        if (o->src_s || o->tgt_s) cli_fail(PROG, "--batch/--len make random tokens; do not combine with --src/--tgt");
        in->B = o->batch > 0 ? o->batch : 1;
        in->Ts = in->Tt = o->len > 0 ? o->len : 32;
        cli_check_floats(PROG, "--batch x --len", 2, (size_t)in->B, (size_t)in->Ts);
        in->src = malloc((size_t)in->B * in->Ts * sizeof(int));
        in->tgt = malloc((size_t)in->B * in->Tt * sizeof(int));
    } else {
        in->src = malloc(MODEL_MAX_LEN * sizeof(int));
        in->tgt = malloc(MODEL_MAX_LEN * sizeof(int));
        if (in->src && in->tgt) {
            in->Ts = o->src_s ? cli_parse_ids(PROG, "--src", o->src_s, in->src, MODEL_MAX_LEN) : 7;
            in->Tt = o->tgt_s ? cli_parse_ids(PROG, "--tgt", o->tgt_s, in->tgt, MODEL_MAX_LEN) : (o->src_s ? 1 : 4);
        }
    }
    if (!in->src || !in->tgt) cli_fail(PROG, "out of memory");
}

/* the model: built from the config or loaded (its config wins), with room for the input */
static void build_model(const Opts *o, Config *c, const Input *in, Model *m) {
    char err[512];
    if (o->load) {
        if (model_load(m, o->load, in->B, in->Ts, in->Tt, NULL, NULL, err, sizeof err)) cli_fail(PROG, "--load: %s", err);
        *c = m->cfg;
        printf("loaded %s: %zu parameters (config from the file; size flags are not used)\n", o->load, m->params.n);
    } else {
        if (in->Ts > c->max_len || in->Tt > c->max_len)
            cli_fail(PROG, "%d tokens do not fit --max-len %d (the rows of the PE table)",
                     in->Ts > in->Tt ? in->Ts : in->Tt, c->max_len);
        if (model_build(m, c, in->B, in->Ts, in->Tt, o->seed, err, sizeof err)) cli_fail(PROG, "%s", err);
    }
}

/* the input's token ids (random, the toy pair, or what --src/--tgt gave), checked */
static void input_fill(const Opts *o, const Model *m, Input *in) {
    const Config *c = &m->cfg;
    char err[512];
    if (o->batch > 0 || o->len > 0) {
        Rng r;
        rng_seed(&r, o->seed + 1);
        for (int i = 0; i < in->B * in->Ts; i++) in->src[i] = 3 + rng_int(&r, c->vocab - 3 > 0 ? c->vocab - 3 : 1);
        for (int i = 0; i < in->B * in->Tt; i++)
            in->tgt[i] = i % in->Tt == 0 ? 1 : 3 + rng_int(&r, c->vocab - 3 > 0 ? c->vocab - 3 : 1);
    } else {
        if (!o->src_s) for (int i = 0; i < in->Ts; i++) in->src[i] = TOY_SRC[i] % c->vocab;
        if (!o->tgt_s) {
            if (o->src_s) in->tgt[0] = 1 % c->vocab;
            else for (int i = 0; i < in->Tt; i++) in->tgt[i] = TOY_TGT[i] % c->vocab;
        }
    }
    if (model_check_tokens(c, in->src, in->B * in->Ts, "--src", err, sizeof err)) cli_fail(PROG, "%s", err);
    if (model_check_tokens(c, in->tgt, in->B * in->Tt, "--tgt", err, sizeof err)) cli_fail(PROG, "%s", err);
    if (model_check_sizes(m, in->B, in->Ts, in->Tt, err, sizeof err)) cli_fail(PROG, "%s", err);
    if (o->layer > c->N) cli_fail(PROG, "--layer %d: the model has layers 1..%d", o->layer, c->N);
    if (o->head > c->h) cli_fail(PROG, "--head %d: the model has heads 1..%d", o->head, c->h);
    if (plot_mkdir(o->out) != 0) cli_fail(PROG, "--out: cannot use folder '%s'", o->out);
}

static void section_input(const Opts *o, const Model *m, const Input *in) {
    const Config *c = &m->cfg;
    show_section("1. Input: source and (shifted-right) target token ids");
    printf("  %s, N=%d, d_model=%d, d_ff=%d, h=%d, d_k=%d, d_v=%d, vocab=%d, %zu params, seed %llu\n",
           c->pre_ln ? "pre-LN" : "post-LN (the paper)", c->N, c->d_model, c->d_ff, c->h, c->d_k, c->d_v, c->vocab,
           m->params.n, (unsigned long long)o->seed);
    printf("  backend: %s (every op of common/model/model.c runs through its table)\n", m->be->name);
    Tensor ts = tensor_wrap(NULL, "source ids", "batch seq", in->B, in->Ts);
    Tensor tt = tensor_wrap(NULL, "target ids", "batch seq", in->B, in->Tt);
    show_shape(&ts, NULL);
    show_shape(&tt, "the decoder reads the target so far and predicts the next token");
    if (in->B != 1) return;
    if (c->vocab < TOY_N && (!o->src_s || !o->tgt_s))
        printf("  (--vocab %d < 12: the toy sentence's ids are taken modulo %d)\n", c->vocab, c->vocab);
    printf("  source:");
    for (int i = 0; i < in->Ts; i++) printf(" %s(%d)", token_name(in->src[i], c->vocab, 0), in->src[i]);
    printf("\n  target:");
    for (int i = 0; i < in->Tt; i++) printf(" %s(%d)", token_name(in->tgt[i], c->vocab, 0), in->tgt[i]);
    printf("\n");
}

/* Section 7: the forward pass timed. Matrix-product FLOPs counted by hand.
 * wall, cpu: seconds per pass, the mean of reps passes (main times as many
 * as fill a tenth of a second, so that a pass far below a millisecond is
 * still measured); no rate from a time too short to measure. */
static void section_time(const Model *m, const Input *in, double wall, double cpu, int reps) {
    const Config *c = &m->cfg;
    int B = in->B, Ts = in->Ts, Tt = in->Tt;
    show_section("7. Time");
    double D = c->d_model, Fd = c->d_ff, hk = (double)c->h * c->d_k, hv = (double)c->h * c->d_v;
    double rs = (double)B * Ts, rt = (double)B * Tt;
    double enc = rs * (2 * D * hk + 2 * D * hv + 2 * D * Fd) + (double)B * c->h * Ts * Ts * (c->d_k + c->d_v);
    double dec = rt * (2 * D * hk + 2 * D * hv + 2 * D * Fd) + (double)B * c->h * Tt * Tt * (c->d_k + c->d_v)
               + rt * (D * hk + D * hv) + rs * (D * hk + D * hv) + (double)B * c->h * Tt * Ts * (c->d_k + c->d_v);
    double flops = 2 * (c->N * (enc + dec) + rt * D * c->vocab);   /* multiply-adds x 2 */
    printf("  forward pass of %d x (%d source, %d target) tokens on the %s backend, the mean of %d pass%s:\n"
           "  %.3g ms wall clock, %.3g ms CPU time (all threads);\n  %.3g GFLOP in matrix products",
           B, Ts, Tt, m->be->name, reps, reps == 1 ? "" : "es", 1e3 * wall, 1e3 * cpu, flops / 1e9);
    if (wall > 1e-7)
        printf(" = %.3g GFLOP/s.\n", flops / 1e9 / wall);
    else   /* below what the clock resolves: a rate from it would be noise */
        printf(": too short a time to measure, so no rate.\n");
    printf("  --config base --batch 8 --len 32 times the paper's base model.\n");
}

/* Section 8: the model moves to the CPU (the reference; on the CPU nothing
 * moves) and runs the same pass; the difference says how far the backend's
 * float32 rounding took it. logp_be: the backend's result, on the host. */
static void section_check(Model *m, const Input *in, const float *logp_be, int asked_gpu) {
    char err[512];
    const char *name = m->be->name;
    show_section("8. The same forward pass on the CPU");
    if (m->be == backend_cpu()) {   /* the pass above was the CPU's: comparing it with itself says nothing */
        if (asked_gpu)
            printf("  no GPU was found (the note above says why): the pass ran on the CPU, the reference,\n"
                   "  so there is nothing to compare it with.\n");
        else
            printf("  the pass ran on the CPU, the reference: nothing to compare it with here.\n"
                   "  --device cuda runs it on a GPU and compares the two.\n");
        return;
    }
    if (model_to(m, backend_cpu(), err, sizeof err)) cli_fail(PROG, "%s", err);
    const float *logp = model_forward(m, in->src, in->tgt, in->B, in->Ts, in->Tt, 0);
    Diff d = diff_arrays(logp_be, logp, (size_t)in->B * in->Tt * m->cfg.vocab);
    printf("  %s vs CPU: max |diff| = %.3g (log-probabilities, the whole forward pass)\n", name, d.max_abs);
}

/* Sections 2-5's forward pass (inference: no dropout), once to warm up (a
 * GPU's first call loads cuBLAS), then timed: as many passes as fill 0.1 s,
 * at least one (the toy model's pass takes well under a millisecond).
 * Returns the log-probabilities (B*Tt, vocab) on the host, malloc'd;
 * *wall, *cpu: seconds per pass, *reps: passes timed. */
static float *forward_timed(Model *m, const Input *in, double *wall, double *cpu, int *reps) {
    model_forward(m, in->src, in->tgt, in->B, in->Ts, in->Tt, 0);
    size_t nl = (size_t)in->B * in->Tt * m->cfg.vocab;
    float *logp = malloc(nl * sizeof(float));
    if (!logp) cli_fail(PROG, "out of memory");
    int n = 0;
    double t0 = now_s(), w;
    clock_t c0 = clock();
    do {   /* the read waits for the pass */
        model_read(m, logp, model_forward(m, in->src, in->tgt, in->B, in->Ts, in->Tt, 0), nl * sizeof(float));
        n++;
        w = now_s() - t0;
    } while (w < 0.1);
    *wall = w / n, *cpu = (double)(clock() - c0) / CLOCKS_PER_SEC / n, *reps = n;
    return logp;
}

static void section_attention(const Opts *o, const Model *m, const Input *in) {
    show_section("6. Attention weights (terminal + PNG)");
    printf("Rows are queries, columns keys; each row sums to 1. The decoder's self-attention\n"
           "is lower-triangular: the mask of Sec. 3.2.3 gives later positions weight 0.\n");
    heatmaps(m, in->src, in->tgt, in->Ts, in->Tt, o->layer - 1, o->head - 1, o->out);
}

/* --save: the weights (the model is on the CPU now) */
static void save(const Opts *o, const Model *m) {
    char err[512];
    int rc = model_save(m, o->save, NULL, err, sizeof err);   /* 1: I/O, 2: bad state */
    if (rc == 1) fio_fail(PROG, "--save: %s", err);
    if (rc) cli_fail(PROG, "--save: %s", err);
    printf("  saved the weights to %s (format: chapters/07_transformer/README.md)\n", o->save);
}

int main(int argc, char **argv) {
    Opts o;
    parse_flags(&o, argc, argv);
    Config c = make_config(&o);
    if (info_only(&o, &c)) return 0;            /* --table3, --summary */
    Input in;
    input_alloc(&o, &in);
    Model m;
    build_model(&o, &c, &in, &m);
    if (o.summary) {                            /* --summary of a loaded model */
        print_summary(&c, &m);
        model_free(&m), free(in.src), free(in.tgt);
        return 0;
    }
    input_fill(&o, &m, &in);
    char err[512];
    if (model_to(&m, o.be, err, sizeof err)) cli_fail(PROG, "--device %s: %s", o.device, err);

    section_input(&o, &m, &in);                                  /* 1. the ids */
    double wall, cpu;
    int reps;
    float *logp = forward_timed(&m, &in, &wall, &cpu, &reps);
    print_stages(&m, logp, in.src, in.Ts, in.Tt);                /* 2.-5. stage by stage */
    print_next_token(&m, logp, in.tgt, in.Tt, c.vocab < 5 ? c.vocab : 5);
    section_attention(&o, &m, &in);                              /* 6. heatmaps */
    section_time(&m, &in, wall, cpu, reps);                      /* 7. */
    section_check(&m, &in, logp, strcmp(o.device, "cpu") != 0); /* 8. the same pass on the CPU */
    if (o.save) save(&o, &m);

    host_free();
    free(logp);
    model_free(&m);
    free(in.src), free(in.tgt);
    return 0;
}

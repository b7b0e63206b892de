/* 04_multihead - multi-head attention, Section 3.2.2, with every shape.
 *
 * Paper: Section 3.2.2 and Figure 2 (right):
 *
 *     MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O
 *         head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
 *
 * with W_i^Q, W_i^K in R^{d_model x d_k}, W_i^V in R^{d_model x d_v},
 * W^O in R^{h d_v x d_model}, and d_k = d_v = d_model / h.
 *
 * What it prints:
 *   1. self-attention over "the cat is sleeping ." written out step by step:
 *      input [batch, seq, d_model] -> projected -> split [batch, heads, seq,
 *      d_head] -> scores [batch, heads, query, key] -> weighted [batch, heads,
 *      query, d_head] -> concat [batch, query, d_model] -> output; the heads'
 *      weights side by side in the terminal and one PNG per head; and the
 *      library's mha_forward compared with the step-by-step result;
 *   2. cross-attention: English queries over a French source of a different
 *      length ("le chat dort ."), the shape of the decoder's encoder-decoder
 *      attention (Section 3.2.3);
 *   3. the parameter count: h heads of d_model/h cost what one head of
 *      d_model costs, 4 d_model^2 (Section 3.2.2's "similar total cost").
 *
 * The inputs and weights are random (seeded): the patterns are not learned,
 * the shapes and the arithmetic are the point.
 *
 * Run:  build/04_multihead [--d-model N] [--heads N] [--batch N] [--seq N]
 *                          [--src-len N] [--seed N] [--device cpu|cuda] [--out DIR]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/linear.h"
#include "layers/multihead.h"
#include "io/cli.h"
#include "model/device.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "io/show.h"
#include "io/plot.h"
#include "core/tensor.h"

#define PROG "04_multihead"

static const char *ENGLISH[] = {"the", "cat", "is", "sleeping", "."};
static const char *FRENCH[] = {"le", "chat", "dort", "."};

/* ---- labels --------------------------------------------------------------------- */

/* T labels: the sentence's words, then "w5", "w6", ... past its end.
 * One block; the caller frees it with free(). */
static char **make_labels(const char *const *words, int nwords, int T) {
    char **l = malloc((size_t)T * (sizeof(char *) + 16));
    if (!l) cli_fail(PROG, "out of memory");
    char *text = (char *)(l + T);
    for (int t = 0; t < T; t++) {
        l[t] = text + 16 * t;
        if (t < nwords) snprintf(l[t], 16, "%s", words[t]);
        else snprintf(l[t], 16, "w%d", t);
    }
    return l;
}

/* ---- heads side by side ---------------------------------------------------------------
 * w (h,Tq,Tk): one batch element's weights. Each cell is two shade
 * characters (plus a space between columns when every head then still fits
 * on one line), on the same 0..1 scale for every head so heads can be
 * compared; as many heads per band as fit in 80 columns. */
static void show_heads(const char *title, const float *w, int h, int Tq, int Tk,
                       const char *const *qlab, const char *const *klab) {
    static const char SHADES[] = " .:-=+*#%@";
    const int screen = 80;
    int lw = 1;
    for (int i = 0; i < Tq; i++) lw = (int)strlen(qlab[i]) > lw ? (int)strlen(qlab[i]) : lw;
    if (lw > 8) lw = 8;
    int cw = lw + 1 + h * (3 * Tk + 2) <= screen ? 3 : 2;   /* cell width */
    int kshow = Tk;
    if (lw + 1 + cw * kshow + 2 > screen) kshow = (screen - lw - 3) / cw;
    int qshow = Tq < 24 ? Tq : 24;
    int block = cw * kshow + 2;   /* the cells, then a gap of 2 */
    int per_band = (screen - lw - 1) / block;
    if (per_band < 1) per_band = 1;
    int color = show_color(), key = 0;
    if (kshow > 52) kshow = 52;
    for (int j = 0; j < kshow; j++) key |= strlen(klab[j]) > 2;

    printf("%s\n", title);
    for (int h0 = 0; h0 < h; h0 += per_band) {
        int h1 = h0 + per_band < h ? h0 + per_band : h;
        printf("%*s ", lw, "");
        for (int hh = h0; hh < h1; hh++) {
            char name[32];
            snprintf(name, sizeof name, "head %d", hh + 1);
            printf("%-*.*s", block, block - 1, name);
        }
        printf("\n%*s ", lw, "");
        for (int hh = h0; hh < h1; hh++) {
            /* whole labels when they fit 2 columns, else letters and a key:
             * never a label cut short ("w10" -> "w1" reads as another token) */
            for (int j = 0; j < kshow; j++)
                if (key) printf("%c %s", j < 26 ? 'a' + j : 'A' + j - 26, cw == 3 ? " " : "");
                else printf("%2s%s", klab[j], cw == 3 ? " " : "");
            printf("  ");
        }
        printf("\n");
        for (int i = 0; i < qshow; i++) {
            printf("%-*.*s ", lw, lw, qlab[i]);
            for (int hh = h0; hh < h1; hh++) {
                for (int j = 0; j < kshow; j++) {
                    float v = w[((size_t)hh * Tq + i) * Tk + j];
                    int l = v > 0 ? 1 + (int)(v * 9.0f) : 0;   /* blank only for exactly 0, as in show.c */
                    l = l < 0 ? 0 : l > 9 ? 9 : l;
                    if (color) printf("\033[48;5;%dm  \033[0m", 232 + (l * 23) / 9);
                    else printf("%c%c", SHADES[l], SHADES[l]);
                    if (cw == 3) printf(" ");
                }
                printf("  ");
            }
            printf("\n");
        }
    }
    if (qshow < Tq || kshow < Tk) printf("(first %d queries and %d keys shown)\n", qshow, kshow);
    for (int j = 0, col = 0; key && j < kshow; j++) {
        if (col + 4 + (int)strlen(klab[j]) > screen) col = printf("\n    ") - 1;
        col += printf("%s %c=%s", j ? "" : "key:", j < 26 ? 'a' + j : 'A' + j - 26, klab[j]);
        if (j + 1 == kshow) printf("\n");
    }
    printf("shade: fixed scale, weight 0 %s .. 1 %s, the same for every head\n",
           color ? "dark" : "' '", color ? "light" : "'@' (\" .:-=+*#%@\")");
}

/* ---- multi-head attention written out -------------------------------------------------
 * out (B,Tq,d_model), weights (B,h,Tq,Tk); x_q (B,Tq,d_model), x_kv
 * (B,Tk,d_model); p: W_Q, W_K, W_V (d_model, d_model), W_O (d_model, d_model)
 * since h*d_k = h*d_v = d_model here. Prints the shape at every step.
 * Allocates its own intermediate tensors (a chapter may; library ops may not).
 * The library's plain version of these steps, without the printing, is
 * mha_forward_ref (ref/multihead_ref.c); compare_with_library below checks
 * them against the tuned mha_forward the model runs. */
static void mha_step_by_step(float *out, float *weights, const MhaParams *p,
                             float *x_q, float *x_kv, int B, int Tq, int Tk, int d_model, int h) {
    int d_k = d_model / h;   /* = d_v = d_head */
    Tensor xq = tensor_wrap(x_q, "input x_q", "batch query d_model", B, Tq, d_model);
    Tensor xkv = tensor_wrap(x_kv, "input x_kv", "batch key d_model", B, Tk, d_model);
    show_shape(&xq, "the queries come from here");
    if (x_kv != x_q) show_shape(&xkv, "the keys and values from here");
    else printf("  (self-attention: keys and values come from the same x)\n");

    /* project: q = x_q W_Q. W_Q's column block i*d_k .. i*d_k+d_k-1 is the
     * paper's W_i^Q, so one matmul projects for all h heads at once. */
    Tensor *q = tensor_new("q = x_q W_Q", "batch query h*d_k", B, Tq, d_model);
    Tensor *k = tensor_new("k = x_kv W_K", "batch key h*d_k", B, Tk, d_model);
    Tensor *v = tensor_new("v = x_kv W_V", "batch key h*d_v", B, Tk, d_model);
    matmul_forward(q->data, x_q, p->w_q, B * Tq, d_model, d_model);
    matmul_forward(k->data, x_kv, p->w_k, B * Tk, d_model, d_model);
    matmul_forward(v->data, x_kv, p->w_v, B * Tk, d_model, d_model);
    show_shape(q, "projected (W_Q is [d_model, h*d_k])");
    show_shape(k, NULL);
    show_shape(v, NULL);

    /* split: [batch, seq, h*d] is the same memory as [batch, seq, heads, d];
     * swapping the seq and heads axes (a view) gives each head its own
     * [seq, d] block, which the copy makes contiguous */
    Tensor *qh = tensor_new("qh", "batch heads query d_head", B, h, Tq, d_k);
    Tensor *kh = tensor_new("kh", "batch heads key d_head", B, h, Tk, d_k);
    Tensor *vh = tensor_new("vh", "batch heads key d_head", B, h, Tk, d_k);
    Tensor r = tensor_reshape(q, "q", "batch query heads d_head", B, Tq, h, d_k);
    Tensor t = tensor_transpose(&r, 1, 2);
    tensor_copy(qh, &t);
    r = tensor_reshape(k, "k", "batch key heads d_head", B, Tk, h, d_k);
    t = tensor_transpose(&r, 1, 2);
    tensor_copy(kh, &t);
    r = tensor_reshape(v, "v", "batch key heads d_head", B, Tk, h, d_k);
    t = tensor_transpose(&r, 1, 2);
    tensor_copy(vh, &t);
    char note[96];
    snprintf(note, sizeof note, "split: d_model=%d -> heads=%d x d_head=%d", d_model, h, d_k);
    show_shape(qh, note);
    show_shape(kh, NULL);
    show_shape(vh, NULL);

    /* every head attends on its own: Eq. (1) per (batch, head) */
    Tensor *sc = tensor_new("scores", "batch heads query key", B, h, Tq, Tk);
    float inv = 1.0f / sqrtf((float)d_k);
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < h; hh++)
            for (int i = 0; i < Tq; i++)
                for (int j = 0; j < Tk; j++) {
                    float s = 0.0f;
                    for (int c = 0; c < d_k; c++)
                        s += *tensor_at(qh, b, hh, i, c) * *tensor_at(kh, b, hh, j, c);
                    *tensor_at(sc, b, hh, i, j) = s * inv;
                }
    snprintf(note, sizeof note, "= qh kh^T / sqrt(d_head=%d), one matrix per head", d_k);
    show_shape(sc, note);
    softmax_forward(weights, sc->data, B * h * Tq, Tk);
    Tensor wt = tensor_wrap(weights, "weights", "batch heads query key", B, h, Tq, Tk);
    show_shape(&wt, "softmax over the key axis");

    Tensor *oh = tensor_new("weighted", "batch heads query d_head", B, h, Tq, d_k);
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < h; hh++)
            for (int i = 0; i < Tq; i++)
                for (int c = 0; c < d_k; c++) {
                    float s = 0.0f;
                    for (int j = 0; j < Tk; j++) s += *tensor_at(&wt, b, hh, i, j) * *tensor_at(vh, b, hh, j, c);
                    *tensor_at(oh, b, hh, i, c) = s;
                }
    show_shape(oh, "= weights vh: head_i for every i");

    /* Concat(head_1, ..., head_h): swap heads and query back, then read the
     * last two axes [heads, d_head] as one row of d_model numbers */
    Tensor *cat = tensor_new("concat", "batch query heads d_head", B, Tq, h, d_k);
    t = tensor_transpose(oh, 1, 2);
    tensor_copy(cat, &t);
    Tensor concat = tensor_reshape(cat, "concat", "batch query d_model", B, Tq, d_model);
    show_shape(&concat, "Concat(head_1..head_h)");

    matmul_forward(out, concat.data, p->w_o, B * Tq, d_model, d_model);
    Tensor o = tensor_wrap(out, "output", "batch query d_model", B, Tq, d_model);
    show_shape(&o, "= concat W_O (W_O is [h*d_v, d_model])");

    tensor_free(q); tensor_free(k); tensor_free(v);
    tensor_free(qh); tensor_free(kh); tensor_free(vh);
    tensor_free(sc); tensor_free(oh); tensor_free(cat);
}

/* Runs the library's mha_forward on the same inputs and prints how far it
 * is from the step-by-step result. Returns 1 if they agree. */
static int compare_with_library(const float *out_hand, const float *w_hand, const MhaParams *p,
                                const float *x_q, const float *x_kv, int B, int Tq, int Tk, int d_model, int h,
                                Device dev) {
    int d_k = d_model / h;
    size_t n_out = (size_t)B * Tq * d_model, n_w = (size_t)B * h * Tq * Tk;
    float *out = malloc(sizeof(float) * n_out);
    float *acts = malloc(sizeof(float) * mha_acts_size(B, Tq, Tk, h, d_k, d_k));
    if (!out || !acts) cli_fail(PROG, "out of memory");
    MhaActs a;
    mha_acts_layout(&a, acts, B, Tq, Tk, h, d_k, d_k);
    mha_forward(out, &a, p, x_q, x_kv, NULL, B, Tq, Tk, d_model, h, d_k, d_k);
    Diff dout = diff_arrays(out, out_hand, n_out), dw = diff_arrays(a.weights, w_hand, n_w);
    int ok = dout.max_abs < 1e-4 && dw.max_abs < 1e-5;
    printf("library mha_forward vs the steps above: max |diff| output %.3g, weights %.3g: %s\n",
           dout.max_abs, dw.max_abs, ok ? "they agree" : "THEY DISAGREE (a bug)");
    if (dev == DEVICE_CUDA) {
        /* the same layer on the GPU: upload, projections + cuda_sdpa_forward + W^O, download */
        float *out_gpu = malloc(sizeof(float) * n_out), *w_gpu = malloc(sizeof(float) * n_w);
        char err[256];
        if (!out_gpu || !w_gpu) cli_fail(PROG, "out of memory");
        if (gpu_mha_forward_host(out_gpu, w_gpu, p, x_q, x_kv, NULL, B, Tq, Tk, d_model, h, d_k, d_k,
                                 err, sizeof err))
            cli_fail(PROG, "--device cuda: %s", err);
        Diff gout = diff_arrays(out_gpu, out, n_out), gw = diff_arrays(w_gpu, a.weights, n_w);
        printf("GPU vs CPU: max |diff| = %.3g (output), %.3g (weights)  [cuda/backend_cuda.c]\n",
               gout.max_abs, gw.max_abs);
        ok &= gout.max_abs < 1e-4 && gw.max_abs < 1e-5;
        free(out_gpu);
        free(w_gpu);
    }
    free(out);
    free(acts);
    return ok;
}

static void fill_params(MhaParams *p, float *buf, int d_model, Rng *rng) {
    /* std 1/sqrt(d_model) keeps x W about as large as x (each entry is a sum
     * of d_model terms); W_Q and W_K get 1.5x that, so the scaled scores
     * have a spread of about 2 and the random heads show clear patterns */
    size_t n = (size_t)d_model * d_model;
    float sd = 1.0f / sqrtf((float)d_model);
    rng_fill_normal(rng, buf, 2 * n, 0.0f, 1.5f * sd);
    rng_fill_normal(rng, buf + 2 * n, 2 * n, 0.0f, sd);
    p->w_q = buf;
    p->w_k = buf + n;
    p->w_v = buf + 2 * n;
    p->w_o = buf + 3 * n;
}

/* PNGs, one per head, of batch element 0's weights w (h,Tq,Tk) */
static void plot_heads(const char *dir, const char *prefix, const char *what, const float *w,
                       int h, int Tq, int Tk, const char *const *ql, const char *const *kl) {
    for (int hh = 0; hh < h; hh++) {
        char name[64], title[128];
        snprintf(name, sizeof name, "%s_head%d", prefix, hh + 1);
        snprintf(title, sizeof title, "%s, head %d of %d", what, hh + 1, h);
        plot_heatmap(dir, name, title, w + (size_t)hh * Tq * Tk, Tq, Tk, ql, kl, "key", "query");
    }
    char name[64];
    snprintf(name, sizeof name, "%s_heads_layer1", prefix);   /* all h heads in one PNG */
    plot_heads_grid(dir, name, what, w, h, Tq, Tk, ql, kl, "key", "query");
}

/* Refuses a d_model that the heads cannot share, naming a size that works. */
static void check_heads(int d_model, int h) {
    if (d_model % h == 0) return;
    int lower = h;
    while (d_model % lower) lower--;
    cli_fail(PROG, "--d-model %d is not divisible by --heads %d: each head gets d_model/heads "
             "columns (Section 3.2.2). Try --heads %d, or a --d-model that is a multiple of %d.",
             d_model, h, lower, h);
}

/* Refuses sizes whose tensors would not fit in memory, naming the flags. */
static void check_sizes(int d_model, int h, int B, int T, int S) {
    int L = T > S ? T : S;
    cli_check_floats(PROG, "the attention weights (--batch x --heads x --seq x --seq)", 4,
                     (size_t)B, (size_t)h, (size_t)L, (size_t)L);
    cli_check_floats(PROG, "the activations (--batch x --seq x --d-model x 16)", 4,
                     (size_t)B, (size_t)L, (size_t)d_model, (size_t)16);
    cli_check_floats(PROG, "the weights (8 x --d-model^2)", 3, (size_t)8, (size_t)d_model, (size_t)d_model);
}

/* Everything the sections share: sizes, the labelled inputs, two sets of
 * weights, and the buffers for one attention's output and weights. */
typedef struct {
    int d_model, h, B, T, S;
    Device dev;
    char **en, **fr;            /* T English, S French labels              */
    float *x_en, *x_fr;         /* (B,T,d_model), (B,S,d_model)            */
    float *pbuf;                /* 8 d_model^2: the weights of self, cross */
    MhaParams self, cross;
    float *out, *w;             /* (B,T,d_model); (B,h,T,T) or (B,h,T,S)   */
} Setup;

static void setup_build(Setup *x, uint64_t seed) {
    int d_model = x->d_model, B = x->B, T = x->T, S = x->S, L = T > S ? T : S;
    Rng rng;
    rng_seed(&rng, seed);
    x->en = make_labels(ENGLISH, 5, T), x->fr = make_labels(FRENCH, 4, S);
    x->x_en = malloc(sizeof(float) * B * T * d_model);
    x->x_fr = malloc(sizeof(float) * B * S * d_model);
    x->pbuf = malloc(sizeof(float) * 8 * d_model * d_model);
    x->out = malloc(sizeof(float) * B * T * d_model);
    x->w = malloc(sizeof(float) * B * x->h * T * L);
    if (!x->x_en || !x->x_fr || !x->pbuf || !x->out || !x->w) cli_fail(PROG, "out of memory");
    rng_fill_normal(&rng, x->x_en, (size_t)B * T * d_model, 0.0f, 1.0f);
    rng_fill_normal(&rng, x->x_fr, (size_t)B * S * d_model, 0.0f, 1.0f);
    fill_params(&x->self, x->pbuf, d_model, &rng);
    fill_params(&x->cross, x->pbuf + 4 * (size_t)d_model * d_model, d_model, &rng);
    printf("Inputs and weights are random (seed %llu), standing in for the token\n"
           "embeddings (chapter 05 adds positions) and for trained weights. Device: %s.\n",
           (unsigned long long)seed, device_name(x->dev));
}

static void setup_free(Setup *x) {
    free(x->en); free(x->fr); free(x->x_en); free(x->x_fr); free(x->pbuf); free(x->out); free(x->w);
}

/* ---- 1. self-attention ---------------------------------------------------------- */

/* Returns 1 if the library agrees with the steps. */
static int section_self(Setup *x, const char *out_dir) {
    const char *const *en = (const char *const *)x->en;
    show_section("1. Multi-head self-attention, step by step (Section 3.2.2, Figure 2)");
    printf("d_model = %d, h = %d heads, d_k = d_v = d_model / h = %d, batch = %d.\n"
           "Queries, keys and values all come from the English sequence x.\n\n",
           x->d_model, x->h, x->d_model / x->h, x->B);
    mha_step_by_step(x->out, x->w, &x->self, x->x_en, x->x_en, x->B, x->T, x->T, x->d_model, x->h);
    printf("\n");
    show_heads("Each head's weights (batch element 0; row = query, column = key):",
               x->w, x->h, x->T, x->T, en, en);
    plot_heads(out_dir, "self", "Self-attention weights", x->w, x->h, x->T, x->T, en, en);
    printf("Every head sees the same tokens through its own W_i^Q, W_i^K, so each\n"
           "draws its own pattern (Section 3.2.2: \"jointly attend to information\n"
           "from different representation subspaces\").\n");
    return compare_with_library(x->out, x->w, &x->self, x->x_en, x->x_en, x->B, x->T, x->T,
                                x->d_model, x->h, x->dev);
}

/* ---- 2. cross-attention --------------------------------------------------------- */

static int section_cross(Setup *x, const char *out_dir) {
    const char *const *en = (const char *const *)x->en, *const *fr = (const char *const *)x->fr;
    int T = x->T, S = x->S;
    show_section("2. Cross-attention: English queries over a French source (Section 3.2.3)");
    printf("In the decoder's encoder-decoder attention the queries come from the\n"
           "target sequence and the keys and values from the encoder's output, so\n"
           "the score matrices are [query=%d, key=%d]: not square.\n\n", T, S);
    mha_step_by_step(x->out, x->w, &x->cross, x->x_en, x->x_fr, x->B, T, S, x->d_model, x->h);
    printf("\n");
    show_heads("Each head's weights, English query (row) over French key (column):",
               x->w, x->h, T, S, en, fr);
    plot_heads(out_dir, "cross", "Cross-attention weights", x->w, x->h, T, S, en, fr);
    printf("The output has one row per English query, whatever the source length:\n"
           "that is how the decoder reads a sentence of another length.\n");
    return compare_with_library(x->out, x->w, &x->cross, x->x_en, x->x_fr, x->B, T, S,
                                x->d_model, x->h, x->dev);
}

/* ---- 3. parameters -------------------------------------------------------------- */

/* Returns 1 if h heads of d_model/h cost what one head of d_model costs. */
static int section_params(int d_model, int h) {
    int d_k = d_model / h;
    show_section("3. h heads of d_model/h cost what one head of d_model costs");
    long long dm = d_model, hk = (long long)h * d_k;
    long long multi = dm * hk + dm * hk + dm * hk + hk * dm;   /* W_Q, W_K, W_V, W_O */
    long long single = dm * dm * 4;                            /* one head with d_k = d_model */
    printf("  h = %d heads, d_k = d_v = %d: W_Q %lldx%lld + W_K %lldx%lld + W_V %lldx%lld + W_O %lldx%lld\n"
           "                    = %lld parameters\n", h, d_k, dm, hk, dm, hk, dm, hk, hk, dm, multi);
    printf("  1 head, d_k = d_v = %d:  4 x %d x %d = %lld parameters\n", d_model, d_model, d_model, single);
    printf("  4 d_model^2 = %lld both ways: %s\n", 4 * dm * dm, multi == single ? "equal" : "NOT EQUAL");
    printf("  The scores cost h x query x key x d_k = query x key x d_model multiply-adds\n"
           "  either way too. Paper base model (Table 3: d_model 512, h 8, d_k 64):\n"
           "  4 x 512^2 = %d parameters per attention layer, 8 heads or 1.\n", 4 * 512 * 512);
    return multi == single;
}

int main(int argc, char **argv) {
    uint64_t seed = 42;
    int d_model = 16, h = 4, B = 1, T = 5, S = 4;
    const char *device = "cpu", *out_dir = "out/04_multihead";
    CliOption opts[] = {
        {"--d-model", CLI_INT,    &d_model, "model width d_model (512 in the paper)", 1, 4096},
        {"--heads",   CLI_INT,    &h,       "number of heads h (8 in the paper); must divide --d-model", 1, 512},
        {"--batch",   CLI_INT,    &B,       "sequences per batch", 1, 64},
        {"--seq",     CLI_INT,    &T,       "length of the English (query) sequence", 1, 512},
        {"--src-len", CLI_INT,    &S,       "length of the French source for cross-attention", 1, 512},
        {"--seed",    CLI_U64,    &seed,    "random seed for inputs and weights", 0, 0},
        CLI_OPT_DEVICE(device),
        CLI_OPT_OUT(out_dir),
    };
    cli_parse(argc, argv, PROG, "multi-head attention (Section 3.2.2): shapes, heads, parameters",
              opts, CLI_COUNT(opts));
    show_lecture_sections(3);   /* its banners: "1." .. "3." */
    check_heads(d_model, h);
    Device dev;
    if (device_select(device, &dev) != 0) cli_fail(PROG, "--device must be cpu or cuda, got '%s'", device);
    check_sizes(d_model, h, B, T, S);
    if (plot_mkdir(out_dir) != 0) cli_fail(PROG, "--out: cannot use folder '%s'", out_dir);

    Setup x = {.d_model = d_model, .h = h, .B = B, .T = T, .S = S, .dev = dev};
    setup_build(&x, seed);                   /* random inputs and weights           */
    int ok = section_self(&x, out_dir);      /* 1. self-attention, every shape      */
    ok &= section_cross(&x, out_dir);        /* 2. English queries, French keys     */
    ok &= section_params(d_model, h);        /* 3. 4 d_model^2 parameters either way */
    setup_free(&x);
    return ok ? 0 : 1;
}

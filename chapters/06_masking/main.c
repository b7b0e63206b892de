/* 06_masking - causal and padding masks: who may attend to whom.
 *
 * Paper: Section 3.2.3 ("We implement this inside of scaled dot-product
 * attention by masking out (setting to -inf) all values in the input of the
 * softmax which correspond to illegal connections") and Section 3.1 (the
 * decoder's masking, with outputs offset by one position, makes "the
 * predictions for position i depend only on the known outputs at positions
 * less than i").
 *
 * What it prints:
 *   1. the causal mask: query i may see keys 0..i (heatmap + PNG);
 *   2. padding: a batch of sentences of different lengths padded to one
 *      length; the padding mask, and causal AND padding (heatmaps + PNGs);
 *   3. masked attention weights from sdpa_forward: every blocked entry
 *      (upper triangle, padded keys) checked to be exactly 0.0;
 *   4. a fully masked row: the textbook softmax gives NaN (0/0), the library
 *      gives zeros, and why;
 *   5. additive masking (scores + M, M = 0 or -inf) against multiplicative
 *      masking (exp(scores) * mask, renormalised): the same weights.
 *
 * Run:  build/06_masking [--lengths 6,4,2] [--d-k N] [--seed N]
 *                        [--device cpu|cuda] [--out DIR]
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/attention.h"
#include "fast/attention_fast.h"
#include "io/cli.h"
#include "model/device.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "io/show.h"
#include "io/plot.h"
#include "core/tensor.h"

#define PROG "06_masking"
#define MAX_B 16
#define MAX_T 64

static const char *SENTENCES[][6] = {
    {"the", "cat", "sat", "on", "the", "mat"},
    {"a", "dog", "ran", "home", NULL, NULL},
    {"birds", "sing", NULL, NULL, NULL, NULL},
};

/* "6,4,2" -> len[0..n-1]; returns n. Anything else is the user's mistake:
 * a message naming --lengths and exit 2. */
static int parse_lengths(const char *s, int *len) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || (*end && *end != ','))
            cli_fail(PROG, "--lengths expects whole numbers separated by commas, like 6,4,2; got '%s'", s);
        if (v < 0 || v > MAX_T) cli_fail(PROG, "--lengths: each length must be 0..%d, got %ld", MAX_T, v);
        if (n == MAX_B) cli_fail(PROG, "--lengths: at most %d sequences", MAX_B);
        len[n++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) cli_fail(PROG, "--lengths ends with a comma: '%s'", s);
    }
    if (n == 0) cli_fail(PROG, "--lengths needs at least one length, like 6,4,2");
    return n;
}

/* Token labels (B,T): the sentence's words, "w<i>" beyond them, "<pad>" from
 * len[b] on. One block, freed with free(). */
static char **batch_labels(const int *len, int B, int T) {
    char **l = malloc((size_t)B * T * (sizeof(char *) + 16));
    if (!l) cli_fail(PROG, "out of memory");
    char *text = (char *)(l + (size_t)B * T);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            char *s = l[b * T + t] = text + 16 * ((size_t)b * T + t);
            const char *word = b < 3 && t < 6 ? SENTENCES[b][t] : NULL;
            if (t >= len[b]) snprintf(s, 16, "<pad>");
            else if (word) snprintf(s, 16, "%s", word);
            else snprintf(s, 16, "w%d", t);
        }
    return l;
}

/* The mask bytes of one sequence as floats (1 = may attend), for plotting */
static void mask_to_float(float *dst, const uint8_t *m, int n) {
    for (int i = 0; i < n; i++) dst[i] = m[i];
}

/* The batch every section works on. */
typedef struct {
    int B, T, d_k;
    int len[MAX_B];             /* real tokens of each sequence                  */
    char **lab;                 /* (B,T) token labels                            */
    size_t nm, nx;              /* B*T*T mask entries, B*T*d_k vector entries    */
    uint8_t *causal, *pad, *both;   /* (B,T,T) each: causal, padding, both       */
    float *fmask;               /* (B,T,T) a mask as floats, for drawing         */
    float *Q, *K, *V;           /* (B,1,T,d_k) each, from section 3 on           */
    float *out, *w;             /* (B,1,T,d_k), (B,1,T,T): sdpa_forward's        */
} Batch;

/* ---- 1. causal ------------------------------------------------------------------- */

static void section_causal(Batch *x, const char *out_dir) {
    int T = x->T;
    show_section("1. The causal mask (Section 3.2.3: decoder self-attention)");
    mask_causal(x->causal, x->B, T, T);
    Tensor tm = tensor_wrap(x->fmask, "mask", "batch query key", x->B, T, T);
    show_shape(&tm, "1 = may attend, 0 = blocked (bytes in the library)");
    mask_to_float(x->fmask, x->causal, T * T);
    const char *const *l0 = (const char *const *)x->lab;   /* sequence 0's labels */
    show_heatmap("causal mask, sequence 0 (row = query, column = key)", x->fmask, T, T, l0, l0);
    plot_heatmap(out_dir, "causal_mask", "Causal mask: 1 = may attend (Section 3.2.3)",
                 x->fmask, T, T, l0, l0, "key", "query");
    printf("Query i sees keys 0..i, itself included, never a later one. The decoder's\n"
           "input is the output shifted right by one (Section 3.1), so what predicts\n"
           "token i+1 has seen tokens up to i only: it cannot copy the answer.\n");
}

/* ---- 2. padding ------------------------------------------------------------------ */

static void section_padding(Batch *x, const char *out_dir) {
    int B = x->B, T = x->T;
    show_section("2. Padding: sentences of different lengths in one batch");
    printf("A batch is one [batch, T] block, so shorter sentences are filled with a\n"
           "<pad> token up to T. Nobody may attend to a <pad> key.\n");
    for (int b = 0; b < B; b++) {
        printf("  sequence %d (length %2d):", b, x->len[b]);
        for (int t = 0; t < T && t < 12; t++) printf(" %s", x->lab[b * T + t]);
        printf("%s\n", T > 12 ? " ..." : "");
    }
    mask_padding(x->pad, x->len, B, T, T);
    /* one row per sequence: its keys, allowed or not (the same for every query) */
    float *keys_ok = malloc(sizeof(float) * B * T);   /* (B,T) */
    char **seq_names = malloc(sizeof(char *) * B + (size_t)B * 16);
    if (!keys_ok || !seq_names) cli_fail(PROG, "out of memory");
    for (int b = 0; b < B; b++) {
        seq_names[b] = (char *)(seq_names + B) + 16 * b;
        snprintf(seq_names[b], 16, "seq %d", b);
        for (int j = 0; j < T; j++) keys_ok[b * T + j] = x->pad[(size_t)b * T * T + j];
    }
    show_heatmap("padding mask: may a query attend to key j of sequence b?", keys_ok, B, T,
                 (const char *const *)seq_names, NULL);
    plot_heatmap(out_dir, "padding_mask", "Padding mask: 1 = real key, 0 = <pad>", keys_ok, B, T,
                 (const char *const *)seq_names, NULL, "key position", "sequence");
    memcpy(x->both, x->causal, x->nm);
    mask_and(x->both, x->pad, (int)x->nm);
    int show_b = B > 1 ? 1 : 0;
    const char *const *lb = (const char *const *)x->lab + (size_t)show_b * T;
    mask_to_float(x->fmask, x->both + (size_t)show_b * T * T, T * T);
    char title[128];
    snprintf(title, sizeof title, "causal AND padding, sequence %d (length %d)", show_b, x->len[show_b]);
    show_heatmap(title, x->fmask, T, T, lb, lb);
    plot_heatmap(out_dir, "causal_and_padding", title, x->fmask, T, T, lb, lb, "key", "query");
    printf("mask_and() combines them: the decoder's self-attention uses both.\n");
    free(keys_ok);
    free(seq_names);
}

/* ---- 3. masked attention --------------------------------------------------------- */

/* Draws Q, K, V and runs sdpa_forward under causal AND padding (on --device
 * cuda also the GPU, whose numbers are then checked). Returns 1 if every
 * blocked weight is exactly 0 and every row sums to 1 (0 if fully masked). */
static int section_masked(Batch *x, uint64_t seed, Device dev, const char *out_dir) {
    int B = x->B, T = x->T, d_k = x->d_k;
    size_t nx = x->nx, nm = x->nm;
    char title[128];
    show_section("3. Masked attention weights: blocked entries are exactly 0");
    x->Q = malloc(sizeof(float) * nx), x->K = malloc(sizeof(float) * nx), x->V = malloc(sizeof(float) * nx);
    x->out = malloc(sizeof(float) * nx), x->w = malloc(sizeof(float) * nm);
    if (!x->Q || !x->K || !x->V || !x->out || !x->w) cli_fail(PROG, "out of memory");
    float *w = x->w;
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal(&rng, x->Q, nx, 0.0f, 1.0f);
    rng_fill_normal(&rng, x->K, nx, 0.0f, 1.0f);
    rng_fill_normal(&rng, x->V, nx, 0.0f, 1.0f);
    sdpa_forward(x->out, w, x->Q, x->K, x->V, x->both, B, 1, T, T, d_k, d_k);
    int gpu_ok = 1;
    if (dev == DEVICE_CUDA) {
        /* the same call on the GPU (upload, cuda_sdpa_forward, download); from
         * here on the heatmaps and the checks below use the GPU's numbers */
        float *out_gpu = malloc(sizeof(float) * nx), *w_gpu = malloc(sizeof(float) * nm);
        char err[256];
        if (!out_gpu || !w_gpu) cli_fail(PROG, "out of memory");
        if (gpu_sdpa_forward_host(out_gpu, w_gpu, x->Q, x->K, x->V, x->both, B, 1, T, T, d_k, d_k, err, sizeof err))
            cli_fail(PROG, "--device cuda: %s", err);
        Diff gw = diff_arrays(w_gpu, w, nm), go = diff_arrays(out_gpu, x->out, nx);
        printf("GPU vs CPU: max |diff| = %.3g (weights), %.3g (out)  [cuda_sdpa_forward with the mask]\n",
               gw.max_abs, go.max_abs);
        gpu_ok = gw.max_abs < 1e-5 && go.max_abs < 1e-4;
        memcpy(w, w_gpu, sizeof(float) * nm);
        memcpy(x->out, out_gpu, sizeof(float) * nx);
        free(out_gpu);
        free(w_gpu);
    }
    Tensor tw = tensor_wrap(w, "weights", "batch heads query key", B, 1, T, T);
    show_shape(&tw, "softmax(Q K^T / sqrt(d_k), -inf where mask = 0)");
    for (int b = 0; b < B && b < 3; b++) {
        snprintf(title, sizeof title, "weights, sequence %d (length %d), causal AND padding", b, x->len[b]);
        const char *const *l = (const char *const *)x->lab + (size_t)b * T;
        show_heatmap(title, w + (size_t)b * T * T, T, T, l, l);
        char name[32];
        snprintf(name, sizeof name, "weights_seq%d", b);
        plot_heatmap(out_dir, name, title, w + (size_t)b * T * T, T, T, l, l, "key", "query");
    }
    if (B > 3) printf("(sequences 3..%d not drawn; all are checked below)\n", B - 1);
    long n_upper = 0, n_pad = 0, bad = 0, rows = 0, bad_rows = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            double sum = 0;
            int any = 0;
            for (int j = 0; j < T; j++) {
                float v = w[((size_t)b * T + i) * T + j];
                sum += v;
                any |= x->both[((size_t)b * T + i) * T + j];
                if (j > i) { n_upper++; bad += v != 0.0f; }
                else if (j >= x->len[b]) { n_pad++; bad += v != 0.0f; }
            }
            rows++;
            bad_rows += any ? fabs(sum - 1.0) > 1e-5 : sum != 0.0;
        }
    printf("Check over all %d sequences:\n"
           "  upper triangle (key after query): %ld entries, padded keys: %ld more\n"
           "  entries not exactly 0.0: %ld  -> %s\n"
           "  rows summing to 1 (or 0 if fully masked): %ld of %ld  -> %s\n",
           B, n_upper, n_pad, bad, bad ? "FAILED" : "all exactly zero",
           rows - bad_rows, rows, bad_rows ? "FAILED" : "ok");
    printf("Exactly, not nearly: exp(-inf) = 0 in IEEE floats, so a blocked key\n"
           "contributes nothing to the output and receives no gradient.\n");
    printf("Padded QUERY rows (past a sentence's length) still attend to the real\n"
           "keys; their outputs are ignored later (the loss skips <pad> targets).\n");
    return !bad && !bad_rows && gpu_ok;
}

/* ---- 4. fully masked row ------------------------------------------------------------ */

/* The textbook softmax and the library's on a row of -inf, then sdpa forward
 * and backward with query 0 of sequence 0 blocked from every key. Returns 1
 * if everything stays finite and that query's output and dQ are 0. */
static int section_fully_masked(Batch *x) {
    int B = x->B, T = x->T, d_k = x->d_k;
    size_t nx = x->nx, nm = x->nm;
    show_section("4. A row with nothing to attend to");
    printf("Sentences of length 0, or a query blocked from every key, give a score\n"
           "row that is -inf everywhere. Take query 0 of sequence 0 and block it all:\n");
    enum { FT = 4 };
    float srow[FT], naive[FT], lib[FT];
    for (int j = 0; j < FT; j++) srow[j] = -INFINITY;
    softmax_naive(naive, srow, 1, FT);
    softmax_forward(lib, srow, 1, FT);
    show_vector("  scores               ", srow, FT);
    show_vector("  textbook exp/sum     ", naive, FT);
    show_vector("  library softmax      ", lib, FT);
    printf("The textbook formula divides 0 by 0: NaN. One NaN would spread through\n"
           "every matrix multiply after it and ruin the whole batch. The library\n"
           "returns zero weights, so the output row is the zero vector (nothing to\n"
           "mix) and no gradient flows through it. Through sdpa_forward:\n");
    uint8_t *none = malloc(nm);
    if (!none) cli_fail(PROG, "out of memory");
    memcpy(none, x->both, nm);
    memset(none, 0, (size_t)T);    /* sequence 0, query 0: every key blocked */
    float *dQ = calloc(nx, sizeof(float)), *dK = calloc(nx, sizeof(float)), *dV = calloc(nx, sizeof(float));
    float *dout = malloc(sizeof(float) * nx), *scratch = malloc(sizeof(float) * nm);
    if (!dQ || !dK || !dV || !dout || !scratch) cli_fail(PROG, "out of memory");
    float *out = x->out, *w = x->w;
    sdpa_forward(out, w, x->Q, x->K, x->V, none, B, 1, T, T, d_k, d_k);
    fill(dout, 1.0f, nx);
    sdpa_backward(dQ, dK, dV, scratch, dout, w, x->Q, x->K, x->V, B, 1, T, T, d_k, d_k);
    show_vector("  weights, query 0     ", w, T < 8 ? T : 8);
    show_vector("  output,  query 0     ", out, d_k < 8 ? d_k : 8);
    show_vector("  dQ,      query 0     ", dQ, d_k < 8 ? d_k : 8);
    int finite = 1;
    for (size_t i = 0; i < nx; i++) finite &= isfinite(out[i]) && isfinite(dQ[i]) && isfinite(dK[i]) && isfinite(dV[i]);
    int zero_row = 1;
    for (int c = 0; c < d_k; c++) zero_row &= out[c] == 0.0f && dQ[c] == 0.0f;
    printf("  every output and gradient finite: %s; query 0's output and dQ all 0: %s\n",
           finite ? "yes" : "NO", zero_row ? "yes" : "NO");
    free(none); free(dQ); free(dK); free(dV); free(dout); free(scratch);
    return finite && zero_row;
}

/* ---- 5. additive vs multiplicative -------------------------------------------------- */

/* Returns 1 if masking by -inf and masking by multiplying with 0 give the
 * same weights. */
static int section_additive(Batch *x) {
    int B = x->B, T = x->T, d_k = x->d_k;
    size_t nm = x->nm;
    show_section("5. Two ways to mask: add -inf, or multiply by 0 and renormalise");
    printf("additive (the paper, the library):  w = softmax(s + M), M = 0 or -inf\n"
           "multiplicative:  e_j = exp(s_j - max) * mask_j,  w_j = e_j / sum_l e_l\n"
           "(max over the allowed keys, so the allowed exponents cannot all underflow)\n");
    sdpa_forward(x->out, x->w, x->Q, x->K, x->V, x->both, B, 1, T, T, d_k, d_k);
    float *wm = malloc(sizeof(float) * nm);   /* (B,T,T) */
    if (!wm) cli_fail(PROG, "out of memory");
    float inv = 1.0f / sqrtf((float)d_k);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            const float *q = x->Q + ((size_t)b * T + i) * d_k;
            const uint8_t *m = x->both + ((size_t)b * T + i) * T;
            float *e = wm + ((size_t)b * T + i) * T;
            float max = -INFINITY, sum = 0.0f;
            for (int j = 0; j < T; j++) {
                e[j] = dot(q, x->K + ((size_t)b * T + j) * d_k, d_k) * inv;
                if (m[j] && e[j] > max) max = e[j];
            }
            for (int j = 0; j < T; j++) {
                e[j] = m[j] ? expf(e[j] - max) : 0.0f;   /* exp(s - max) * mask */
                sum += e[j];
            }
            for (int j = 0; j < T; j++) e[j] = sum > 0.0f ? e[j] / sum : 0.0f;
        }
    Diff d = diff_arrays(x->w, wm, nm);
    printf("max |additive - multiplicative| over the batch = %.3g  -> %s\n", d.max_abs,
           d.max_abs < 1e-6 ? "the same weights" : "DIFFERENT (a bug)");
    printf("Both give exact zeros on blocked keys. The paper names the -inf form\n"
           "(Sec. 3.2.3: \"masking out (setting to −∞)\"); it needs no second pass\n"
           "and fits inside the softmax.\n");
    free(wm);
    return d.max_abs < 1e-6;
}

int main(int argc, char **argv) {
    uint64_t seed = 42;
    int d_k = 4;
    const char *lengths = "6,4,2", *device = "cpu", *out_dir = "out/06_masking";
    CliOption opts[] = {
        {"--lengths", CLI_STRING, &lengths, "lengths of the sentences in the batch (comma-separated, 0..64)", 0, 0},
        {"--d-k",     CLI_INT,    &d_k,     "width of queries, keys and values", 1, 256},
        {"--seed",    CLI_U64,    &seed,    "random seed for Q, K, V", 0, 0},
        CLI_OPT_DEVICE(device),
        CLI_OPT_OUT(out_dir),
    };
    cli_parse(argc, argv, PROG, "causal and padding masks (Sections 3.1, 3.2.3)", opts, CLI_COUNT(opts));
    show_lecture_sections(5);   /* its banners: "1." .. "5." */
    Batch x = {.d_k = d_k};
    x.B = parse_lengths(lengths, x.len);
    for (int b = 0; b < x.B; b++) x.T = x.len[b] > x.T ? x.len[b] : x.T;
    if (x.T == 0) cli_fail(PROG, "--lengths: every sentence is empty; give at least one length above 0");
    Device dev;
    if (device_select(device, &dev) != 0) cli_fail(PROG, "--device must be cpu or cuda, got '%s'", device);
    if (plot_mkdir(out_dir) != 0) cli_fail(PROG, "--out: cannot use folder '%s'", out_dir);
    printf("Batch of %d sentences, padded to T = %d; d_k = d_v = %d; seed %llu; device %s.\n",
           x.B, x.T, d_k, (unsigned long long)seed, device_name(dev));

    x.lab = batch_labels(x.len, x.B, x.T);
    x.nm = (size_t)x.B * x.T * x.T, x.nx = (size_t)x.B * x.T * d_k;
    x.causal = malloc(x.nm), x.pad = malloc(x.nm), x.both = malloc(x.nm);
    x.fmask = malloc(sizeof(float) * x.nm);
    if (!x.causal || !x.pad || !x.both || !x.fmask) cli_fail(PROG, "out of memory");

    section_causal(&x, out_dir);                     /* 1. query i sees keys 0..i     */
    section_padding(&x, out_dir);                    /* 2. nobody sees a <pad> key    */
    int ok = section_masked(&x, seed, dev, out_dir); /* 3. blocked weights are 0.0    */
    ok &= section_fully_masked(&x);                  /* 4. nothing to see: zeros      */
    ok &= section_additive(&x);                      /* 5. + -inf == * 0, renormalise */

    free(x.lab); free(x.causal); free(x.pad); free(x.both); free(x.fmask);
    free(x.Q); free(x.K); free(x.V); free(x.out); free(x.w);
    return ok ? 0 : 1;
}

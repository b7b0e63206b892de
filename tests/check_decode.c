/* check_decode.c - the KV cache changes nothing; greedy and beam search
 * (Sec. 6.1) behave as decode.h defines them.
 *
 * "Cache": cached decoding against the uncached reference (the whole prefix
 *          through model_decode every step): same tokens, log-probs within
 *          1e-5, for greedy and beam, post-LN and pre-LN, padded sources.
 * "Search": the reference's log-probs are the model's own (teacher forcing);
 *          beam size 1 is greedy; textbook beam search with K >= vocabulary
 *          on two tokens finds the exhaustive optimum.
 * "Core":  the length penalty's values; cache bytes and FLOPs; the step's
 *          tuned row ops (fast/rows_fast.h) against their plain twins (ref/rows.h).
 * "Rule":  the paper's code's beam search (tensor2tensor, BEAM_RULE_T2T) against
 *          the textbook one on a model with a fixed next-word distribution,
 *          where each answer can be worked out by hand: an end symbol ranked
 *          below the K-th live beam, and the length cap; then decode_beam
 *          (batched, cached) against beam_ref (one sentence, no cache): both
 *          rules on random models, the paper's settings on trained ones.
 * "Limits": bad options and sizes are refused with rc 2 and a message.
 * "Program": chapter 09's bad flags exit 2; its output has what its README quotes. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fast/parallel.h"
#include "fast/rows_fast.h"
#include "io/checkpoint.h"
#include "model/beam_ref.h"
#include "model/decode.h"
#include "model/model.h"
#include "model/train.h"
#include "ref/ops.h"
#include "testutil.h"
#include "text/copy_data.h"

enum { V = 11, PAD = 0, START = 1, END = 2, NB = 3, TS = 8, MAXOUT = 16, KMAX = 12 };

/* Three sources of 7, 5 and 2 tokens, padded to TS = 8. */
static const int SRC[NB * TS] = {
    1, 5, 3, 9, 4, 7, 6, 0,
    1, 8, 8, 3, 10, 0, 0, 0,
    1, 4, 0, 0, 0, 0, 0, 0,
};

static void build_pos(Model *m, int pre_ln, uint64_t seed, int pos) {
    Config c = test_config(2, 16, 32, 2, 8, 8, V, 24, 0.0f);
    c.pre_ln = pre_ln, c.pad_id = PAD, c.pos = pos;
    char err[256];
    ck_assert_msg(model_build(m, &c, NB * KMAX, TS, MAXOUT, seed, err, sizeof err) == 0, "model_build: %s", err);
}

static void build(Model *m, int pre_ln, uint64_t seed) { build_pos(m, pre_ln, seed, POS_SINUSOID); }

static void new_decoder(Decoder *d, Model *m) {
    char err[256];
    ck_assert_msg(decoder_new(d, m, NB, KMAX, TS, MAXOUT, err, sizeof err) == 0, "decoder_new: %s", err);
}

/* the usual start of a test: the model of build() and its decoder */
static void open_case(Model *m, Decoder *d, int pre_ln, uint64_t seed) {
    build(m, pre_ln, seed);
    new_decoder(d, m);
}

static void close_case(Model *m, Decoder *d) {
    decoder_free(d);
    model_free(m);
}

/* Copies of a decode's results, to compare two runs. */
typedef struct {
    int out[NB * MAXOUT], len[NB], steps;
    float lp[NB * MAXOUT], sum[NB], score[NB];
} Result;

static void grab(Result *r, const Decoder *d) {
    memcpy(r->out, d->out, sizeof r->out);
    memcpy(r->lp, d->out_lp, sizeof r->lp);
    memcpy(r->len, d->out_len, sizeof r->len);
    memcpy(r->sum, d->out_sum, sizeof r->sum);
    memcpy(r->score, d->out_score, sizeof r->score);
    r->steps = d->steps;
}

static void run(Result *r, Decoder *d, DecodeOpts o, int cached, int greedy) {
    char err[256];
    o.cached = cached;
    int rc = greedy ? decode_greedy(d, &o, SRC, NB, TS, err, sizeof err)
                    : decode_beam(d, &o, SRC, NB, TS, err, sizeof err);
    ck_assert_msg(rc == 0, "decode: %s", err);
    grab(r, d);
}

static void assert_same(const Result *a, const Result *b, double tol) {
    ck_assert_int_eq(a->steps, b->steps);
    for (int i = 0; i < NB; i++) {
        ck_assert_int_eq(a->len[i], b->len[i]);
        ck_assert_msg(fabsf(a->sum[i] - b->sum[i]) <= tol, "sum %d: %g vs %g", i, a->sum[i], b->sum[i]);
        ck_assert_msg(fabsf(a->score[i] - b->score[i]) <= tol, "score %d: %g vs %g", i, a->score[i], b->score[i]);
    }
    for (int i = 0; i < NB * MAXOUT; i++) ck_assert_int_eq(a->out[i], b->out[i]);
    ck_assert_close_arrays(a->lp, b->lp, NB * MAXOUT, tol);
}

/* ---- Core ------------------------------------------------------------------ */
START_TEST(test_length_penalty) {
    ck_assert(fabs(length_penalty(1, 0.6) - 1.0) < 1e-12);           /* lp(1) = 1 for any alpha */
    ck_assert(fabs(length_penalty(7, 0.0) - 1.0) < 1e-12);           /* alpha 0: no penalty     */
    ck_assert(fabs(length_penalty(4, 1.0) - 1.5) < 1e-12);           /* (5+4)/6                  */
    ck_assert(fabs(length_penalty(10, 0.6) - pow(2.5, 0.6)) < 1e-12); /* (15/6)^0.6 = 1.7329...  */
    ck_assert(fabs(length_penalty(10, 0.6) - 1.732862) < 1e-6);
    ck_assert(length_penalty(20, 0.6) > length_penalty(10, 0.6));     /* grows with length       */
}
END_TEST

START_TEST(test_cache_bytes_and_flops) {
    Config c = config_base();
    /* K and V: 2 * d_model floats per token per layer = 4096 bytes at d_model 512;
     * the base model's 6 layers at 1,000 tokens: 24.6 MB (chapter 09's README) */
    ck_assert_uint_eq(decode_cache_bytes_per_token_layer(&c), 2 * 512 * 4);
    ck_assert_uint_eq(decode_cache_bytes_per_token_layer(&c) * 6 * 1000, 24576000);
    /* the first token costs the same both ways except for the memory's K, V
     * (recomputed each step without a cache); later ones grow with t uncached */
    double d0 = decode_flops_uncached(&c, 0, 10) - decode_flops_cached(&c, 0, 10);
    ck_assert(fabs(d0 - c.N * 2.0 * 10 * 512 * 1024) < 1);
    ck_assert(decode_flops_uncached(&c, 255, 10) > 100 * decode_flops_cached(&c, 255, 10));
}
END_TEST

/* The step's few-row products against their plain twins at small sizes,
 * DECODE_FEW_ROWS rows and one more (the tuned ones then call gemm). */
START_TEST(test_rows_twins) {
    enum { IN = 37, OUT = 53, RMAX = DECODE_FEW_ROWS + 1 };
    static float x[RMAX * IN], W[IN * OUT], b[OUT], got[RMAX * OUT], want[RMAX * OUT];
    for (int i = 0; i < RMAX * IN; i++) x[i] = sinf(0.3f * i);
    for (int i = 0; i < IN * OUT; i++) W[i] = cosf(0.7f * i);
    for (int i = 0; i < OUT; i++) b[i] = 0.1f * i;
    static const int rows[] = {1, 3, DECODE_FEW_ROWS, RMAX};
    for (int k = 0; k < 4; k++) {
        int R = rows[k];
        for (int bias = 0; bias < 2; bias++) {
            linear_rows_forward(got, x, W, bias ? b : NULL, R, IN, OUT);
            linear_rows_forward_ref(want, x, W, bias ? b : NULL, R, IN, OUT);
            ck_assert_close_arrays(got, want, (size_t)R * OUT, 1e-4);
        }
        /* logits: x (R,IN) against W viewed as E (OUT rows of IN) */
        logits_rows_forward(got, x, W, R, IN, OUT);
        logits_rows_forward_ref(want, x, W, R, IN, OUT);
        ck_assert_close_arrays(got, want, (size_t)R * OUT, 1e-4);
    }
    /* the plain logits are the plain product: x W^T by the triple loop */
    gemm_ref(0, 1, RMAX, OUT, IN, 1.0f, x, IN, W, IN, 0.0f, got, OUT);
    ck_assert_close_arrays(got, want, (size_t)RMAX * OUT, 1e-4);
}
END_TEST

/* The tuned row ops (the ones the CPU backend's step calls) against their
 * plain _ref versions, at sizes big enough to be shared among threads:
 *   - linear_rows_forward cuts W's input rows into slices and adds the
 *     slices' partial sums: the same products summed in another order, so
 *     close to the plain loop, not equal; but the slices depend only on the
 *     shapes, so 1 thread and all threads give the same bits;
 *   - logits and attention cut their outputs and sum each dot product in
 *     vector lanes: close to the plain chains; both give the same bits on
 *     any thread count. */
START_TEST(test_rows_tuned_vs_plain) {
    /* IN not a multiple of 4 nor of the 128-row slice; OUT not of 16; the
     * last case's partial sums do not fit the scratch (fewer, longer slices),
     * the one before it not even two (one slice: the plain order) */
    static const int cases[][3] = {{1, 517, 131}, {3, 512, 512}, {1, 2048, 512}, {16, 600, 1000}, {16, 300, 2100}};
    enum { MAXF = 16 * 2100 * 2 };
    float *x = malloc(sizeof(float) * 16 * 2048), *W = malloc(sizeof(float) * 2048 * 2100);
    float *b = malloc(sizeof(float) * 2100), *got = malloc(sizeof(float) * MAXF), *want = malloc(sizeof(float) * MAXF);
    float *one = malloc(sizeof(float) * MAXF);
    for (int i = 0; i < 16 * 2048; i++) x[i] = sinf(0.37f * i);
    for (int i = 0; i < 2048 * 2100; i++) W[i] = 0.05f * cosf(0.71f * i);
    for (int i = 0; i < 2100; i++) b[i] = 0.01f * i;
    int threads = parallel_threads();
    for (int k = 0; k < 5; k++) {
        int R = cases[k][0], IN = cases[k][1], OUT = cases[k][2];
        size_t n = (size_t)R * OUT;
        for (int bias = 0; bias < 2; bias++) {
            linear_rows_forward_ref(want, x, W, bias ? b : NULL, R, IN, OUT);
            linear_rows_forward(got, x, W, bias ? b : NULL, R, IN, OUT);
            /* two orders of the same float sums of up to 2048 terms: within
             * 1e-5 of the largest output (float's epsilon is 1.2e-7) */
            double big = 0;
            for (size_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
            ck_assert_close_arrays(got, want, n, 1e-5 * big);
            parallel_set_threads(1);
            linear_rows_forward(one, x, W, bias ? b : NULL, R, IN, OUT);
            parallel_set_threads(threads);
            ck_assert_msg(memcmp(one, got, n * sizeof(float)) == 0, "linear_rows_forward %dx%dx%d: 1 thread "
                          "differs from %d", R, IN, OUT, threads);
        }
        /* logits: x (R,IN) against W viewed as E (OUT rows of IN) */
        logits_rows_forward_ref(want, x, W, R, IN, OUT);
        logits_rows_forward(got, x, W, R, IN, OUT);
        /* within 1e-5 of the largest logit, or 1e-7 of the largest sum of
         * a dot product's terms' sizes, which is what its rounding scales
         * with: in the first case the terms (up to 0.05) cancel to logits
         * of 0.01, and a sum in 4 lanes (SSE2, NEON: builds without AVX2)
         * lands 1.5e-7 from the chain: 1e-5 of the logit, 1.4e-8 of the terms */
        double big = 0, terms = 0;
        for (size_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
        for (int r = 0; r < R; r++)
            for (int v = 0; v < OUT; v++) {
                double t = 0;
                for (int c = 0; c < IN; c++) t += fabs(x[(size_t)r * IN + c] * W[(size_t)v * IN + c]);
                terms = fmax(terms, t);
            }
        ck_assert_close_arrays(got, want, n, fmax(1e-5 * big, 1e-7 * terms));
        parallel_set_threads(1);
        logits_rows_forward(one, x, W, R, IN, OUT);
        parallel_set_threads(threads);
        ck_assert_msg(memcmp(one, got, n * sizeof(float)) == 0, "logits_rows_forward %dx%dx%d: 1 thread "
                      "differs from %d", R, IN, OUT, threads);
    }
    /* attention: 4 rows in 2 groups (beams sharing a sentence's keys), 8 heads,
     * 300 keys of stride 320, a padding mask with one fully blocked sentence */
    enum { AR = 4, AG = 2, AH = 8, AN = 300, AS = 320, AD = 64 };
    static uint8_t keep[(AR / AG) * AN];
    for (int j = 0; j < AN; j++) keep[j] = j % 7 != 3, keep[AN + j] = 0;
    float *q = x, *Kc = W, *Vc = W + (size_t)(AR / AG) * AH * AS * AD;
    float *wg = malloc(sizeof(float) * AR * AH * AN), *ww = malloc(sizeof(float) * AR * AH * AN);
    for (int masked = 0; masked < 2; masked++) {
        const uint8_t *kp = masked ? keep : NULL;
        attend_rows_forward_ref(want, ww, q, Kc, Vc, kp, AR, AG, AH, AN, AS, AD, AD);
        attend_rows_forward(got, wg, q, Kc, Vc, kp, AR, AG, AH, AN, AS, AD, AD);
        /* the scores are summed in vector lanes (the plain twin: Eq. (1) by
         * sdpa_forward_ref, one (row, head) at a time): the same up to rounding */
        ck_assert_close_arrays(got, want, AR * AH * AD, 1e-6);
        ck_assert_close_arrays(wg, ww, AR * AH * AN, 1e-6);
        parallel_set_threads(1);
        attend_rows_forward(one, ww, q, Kc, Vc, kp, AR, AG, AH, AN, AS, AD, AD);
        parallel_set_threads(threads);
        ck_assert_msg(memcmp(one, got, sizeof(float) * AR * AH * AD) == 0 &&
                      memcmp(ww, wg, sizeof(float) * AR * AH * AN) == 0, "attention: 1 thread differs from %d",
                      threads);
    }
    for (int i = 0; i < AR * AH * AD; i++) ck_assert(isfinite(got[i]));   /* blocked rows: zeros, not NaN */
    ck_assert(got[(AR - 1) * AH * AD] == 0.0f);
    free(x); free(W); free(b); free(got); free(want); free(one); free(wg); free(ww);
}
END_TEST

/* ---- Cache ----------------------------------------------------------------- */
static void cache_case_pos(int pre_ln, int greedy, int pos) {
    Model m;
    Decoder d;
    build_pos(&m, pre_ln, 7 + pre_ln, pos);
    new_decoder(&d, &m);
    DecodeOpts o = decode_opts_paper(START, END);
    o.beam = 3, o.offset = 3;
    Result a, b;
    run(&a, &d, o, 1, greedy);
    run(&b, &d, o, 0, greedy);
    assert_same(&a, &b, 1e-5);
    if (!greedy) {
        /* the beams were pruned and reordered on the way, so the cache was */
        int moved = 0;
        for (int t = 0; t < d.steps; t++)
            for (int r = 0; r < d.R; r++) moved += d.trace[t * d.R + r].parent >= 0 && d.trace[t * d.R + r].parent != r;
        ck_assert_int_gt(moved, 5);
    }
    /* and the source padding mattered: sentence 2 has 2 tokens, so at most 5 */
    ck_assert_int_le(a.len[2], 5);
    close_case(&m, &d);
}
static void cache_case(int pre_ln, int greedy) { cache_case_pos(pre_ln, greedy, POS_SINUSOID); }
START_TEST(test_greedy_post_ln) { cache_case(0, 1); }
END_TEST
START_TEST(test_greedy_pre_ln) { cache_case(1, 1); }
END_TEST
START_TEST(test_beam_post_ln) { cache_case(0, 0); }
END_TEST
START_TEST(test_beam_pre_ln) { cache_case(1, 0); }
END_TEST
/* learned positional embeddings (Table 3 (E)): the cache reads the same table */
START_TEST(test_beam_learned_pe) { cache_case_pos(0, 0, POS_LEARNED); }
END_TEST

/* ---- Search ---------------------------------------------------------------- */

/* The recorded log-probs are what the full model gives the output with
 * teacher forcing: model_forward over [<s>, y_1..y_{n-1}]. */
START_TEST(test_logp_is_model_forward) {
    Model m;
    Decoder d;
    open_case(&m, &d, 0, 3);
    DecodeOpts o = decode_opts_paper(START, END);
    o.beam = 4, o.offset = 3;
    Result r;
    run(&r, &d, o, 1, 0);
    for (int b = 0; b < NB; b++) {
        int n = r.len[b], tgt[MAXOUT];
        tgt[0] = START;
        for (int j = 1; j < n; j++) tgt[j] = r.out[b * MAXOUT + j - 1];
        const float *logp = model_forward(&m, SRC + b * TS, tgt, 1, TS, n, 0);
        double sum = 0;
        for (int j = 0; j < n; j++) {
            float want = logp[(size_t)j * V + r.out[b * MAXOUT + j]];
            ck_assert_msg(fabsf(r.lp[b * MAXOUT + j] - want) <= 1e-5, "sentence %d token %d: %g vs %g", b, j,
                          r.lp[b * MAXOUT + j], want);
            sum += want;
        }
        ck_assert(fabs(sum - r.sum[b]) < 1e-4);
        ck_assert(fabs(r.score[b] - r.sum[b] / length_penalty(n, o.alpha)) < 1e-5);
    }
    close_case(&m, &d);
}
END_TEST

/* Beam size 1 is greedy decoding: with the textbook rule at alpha 0 and an
 * end symbol, and with either rule and no end symbol. (Not with t2t's rule
 * and an end symbol: its 2K = 2 candidates per step also finish an end
 * symbol ranked second, which greedy never does; on this model the two
 * then take 11 and 9 steps.) */
START_TEST(test_beam1_is_greedy) {
    Model m;
    Decoder d;
    open_case(&m, &d, 0, 11);
    Result g, b;
    DecodeOpts o = decode_opts_paper(START, END);
    o.beam = 1, o.offset = 4, o.alpha = 0, o.rule = BEAM_RULE_TOPK_ONLY;
    run(&g, &d, o, 1, 1);
    run(&b, &d, o, 1, 0);
    assert_same(&g, &b, 1e-6);
    o.end_id = -1, o.alpha = 0.6f;
    run(&g, &d, o, 1, 1);
    run(&b, &d, o, 1, 0);
    assert_same(&g, &b, 1e-6);
    o.rule = BEAM_RULE_T2T;
    run(&g, &d, o, 1, 1);
    run(&b, &d, o, 1, 0);
    assert_same(&g, &b, 1e-6);
    ck_assert_int_eq(g.len[0], 7 + 4);    /* no end symbol: always |x| + offset tokens */
    o.max_out = 5;                         /* or max_out, for every sentence alike */
    run(&g, &d, o, 1, 1);
    for (int b = 0; b < NB; b++) ck_assert_int_eq(g.len[b], 5);
    close_case(&m, &d);
}
END_TEST

/* At most 2 tokens and a beam as wide as the vocabulary: every 1-token
 * prefix survives, so the textbook rule is exhaustive. Checked against
 * scoring every output of length 1 (<end>) and 2 with model_forward. (t2t's
 * rule is not: at step 2 it looks at the 2K best of 90 candidates only, and
 * returns a live 2-token output only when nothing ended in <end>.) */
START_TEST(test_beam_exhaustive) {
    Model m;
    Decoder d;
    open_case(&m, &d, 1, 5);
    DecodeOpts o = decode_opts_paper(START, END);
    o.beam = V, o.alpha = 1.0f, o.rule = BEAM_RULE_TOPK_ONLY;
    const int *src = SRC + 2 * TS;     /* 2 tokens: L = 2 + offset 0 */
    o.offset = 0;
    char err[256];
    ck_assert_int_eq(decode_beam(&d, &o, src, 1, TS, err, sizeof err), 0);
    double best = -INFINITY;
    int tgt[2] = {START, 0};
    const float *lp = model_forward(&m, src, tgt, 1, TS, 1, 0);
    float first[V];
    memcpy(first, lp, sizeof first);
    best = first[END] / length_penalty(1, o.alpha);
    for (int w = 0; w < V; w++) {
        if (w == PAD || w == END) continue;
        tgt[1] = w;
        lp = model_forward(&m, src, tgt, 1, TS, 2, 0);
        for (int u = 0; u < V; u++) {
            if (u == PAD) continue;
            double s = (first[w] + lp[V + u]) / length_penalty(2, o.alpha);
            if (s > best) best = s;
        }
    }
    ck_assert_msg(fabs(d.out_score[0] - best) < 1e-5, "beam %g, exhaustive %g", d.out_score[0], best);
    close_case(&m, &d);
}
END_TEST

/* The cache is reordered when beams are pruned: step by step, a cached and an
 * uncached decoder given the same tokens and the same permutation agree. */
START_TEST(test_reorder) {
    Model m;
    Decoder a, b;
    build(&m, 0, 9);
    new_decoder(&a, &m);
    new_decoder(&b, &m);
    char err[256];
    ck_assert_int_eq(decoder_begin(&a, SRC, NB, TS, 2, 1, err, sizeof err), 0);
    int tok[NB * 2] = {START, START, START, START, START, START};
    int perm[NB * 2] = {1, 0, 2, 2, 5, 4};
    float la[NB * 2 * V];
    for (int t = 0; t < 5; t++) {
        memcpy(la, decoder_step(&a, tok), sizeof la);
        /* b reruns the whole history uncached: begin again each time */
        ck_assert_int_eq(decoder_begin(&b, SRC, NB, TS, 2, 0, err, sizeof err), 0);
        for (int j = 0; j <= t; j++) {
            int hist[NB * 2];
            for (int r = 0; r < NB * 2; r++) hist[r] = a.hist[0][r * a.max_T + j];
            decoder_step(&b, hist);
        }
        ck_assert_close_arrays(la, b.logp, NB * 2 * V, 1e-5);
        decoder_reorder(&a, perm);
        for (int r = 0; r < NB * 2; r++) tok[r] = 3 + (r + t) % 8;
    }
    decoder_free(&a);
    decoder_free(&b);
    model_free(&m);
}
END_TEST

/* ---- Rule: t2t's beam search against the textbook one ----------------------- */

/* A model whose next-token distribution is p at every step, whatever the
 * source and the prefix. Every decoder LayerNorm gets gain 0 and bias e_0
 * (post-LN: each layer's output is LN(x + sublayer(x)) = 0 * x_hat + e_0),
 * so the decoder outputs e_0 however its input came; the logits e_0 E^T
 * are column 0 of the shared embedding E (Sec. 3.4), set to log p. A
 * hypothesis' sum is then the sum of log p over its tokens: beam search by
 * hand. */
static void build_fixed(Model *m, const double p[V]) {
    build(m, 0, 1);
    const Config *c = &m->cfg;
    int D = c->d_model;
    for (int l = 0; l < c->N; l++) {
        DecoderLayer *w = &m->params.dec[l];
        float *g[3] = {w->ln1_g, w->ln2_g, w->ln3_g}, *b[3] = {w->ln1_b, w->ln2_b, w->ln3_b};
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < D; i++) g[j][i] = 0.0f, b[j][i] = i == 0;
    }
    for (int w = 0; w < V; w++) m->params.embed[(size_t)w * D] = (float)log(p[w]);
    model_push(m);
}

/* p with the named probabilities; the rest shared equally by the other
 * tokens (padding and <s> included: the softmax covers them). */
static void fixed_p(double p[V], double p3, double p4, double p_end) {
    double rest = (1.0 - p3 - p4 - p_end) / (V - 3);
    for (int w = 0; w < V; w++) p[w] = rest;
    p[3] = p3, p[4] = p4, p[END] = p_end;
}

/* One sentence, SRC's third (2 tokens: L = 2 + offset), beam 2. */
static void decode_fixed(Decoder *d, float alpha, int offset, BeamRule rule) {
    char err[256];
    DecodeOpts o = decode_opts_paper(START, END);
    o.beam = 2, o.alpha = alpha, o.offset = offset, o.rule = rule;
    ck_assert_msg(decode_beam(d, &o, SRC + 2 * TS, 1, TS, err, sizeof err) == 0, "%s", err);
}

static void assert_output(const Decoder *d, const int *want, int n, double sum) {
    ck_assert_int_eq(d->out_len[0], n);
    for (int j = 0; j < n; j++) ck_assert_int_eq(d->out[j], want[j]);
    ck_assert_msg(fabs(d->out_sum[0] - sum) < 1e-5, "sum %.6f, want %.6f", d->out_sum[0], sum);
}

/* An end symbol ranked below the K-th live candidate. p(3) = 0.5, p(4) =
 * 0.3, p(</s>) = 0.15; beam K = 2, alpha 0, L = 5. Step 1 ranks
 *     3 (-0.693)   4 (-1.204)   </s> (-1.897)   <s> (-5.075) ...
 * Both rules keep 3 and 4 live: </s> is third, below the 2nd live one.
 *   t2t: the 2K = 4 best include </s>, so [</s>] is finished, score -1.897.
 *        No later end candidate reaches the top 4 (3 </s> is -2.590, under
 *        4 4's -2.408). After step 3 the best live beam, 3 3 3 at -2.079,
 *        cannot beat -1.897 any more (alpha 0: lp = 1): stop; [</s>] wins.
 *   textbook: the walk down the list stops at the 2nd live one: </s> is
 *        dropped. Every later end candidate ranks below two live ones too,
 *        so nothing finishes until step L, where the live 3 3 3 3 3 ends as
 *        it is: sum 5 log 0.5 = -3.466, less probable than [</s>], which
 *        the search had in its hands at step 1. */
START_TEST(test_rule_end_below_kth_live) {
    Model m;
    Decoder d;
    double p[V];
    fixed_p(p, 0.5, 0.3, 0.15);
    build_fixed(&m, p);
    new_decoder(&d, &m);
    for (int rule = BEAM_RULE_T2T; rule <= BEAM_RULE_TOPK_ONLY; rule++) {
        decode_fixed(&d, 0.0f, 3, (BeamRule)rule);
        /* step 1's live beams: 3 and 4, from <s> (row 0); </s> ranked below them */
        ck_assert_int_eq(d.trace[0].token, 3);
        ck_assert_int_eq(d.trace[1].token, 4);
        ck_assert_int_eq(d.trace[0].parent, 0);
        ck_assert_int_eq(d.trace[1].parent, 0);
        ck_assert(log(p[END]) < d.trace[1].sum);
        ck_assert(fabs(d.trace[1].sum - log(0.3)) < 1e-5);
        if (rule == BEAM_RULE_T2T) {
            const int want[] = {END};
            assert_output(&d, want, 1, log(0.15));
            ck_assert_int_eq(d.steps, 3);
            ck_assert_int_eq(d.n_fin, 1);                /* found at step 1, the only one */
            ck_assert_int_eq(d.fin[0].step, 1);
            ck_assert_int_eq(d.fin[0].token, END);
        } else {
            const int want[] = {3, 3, 3, 3, 3};
            assert_output(&d, want, 5, 5 * log(0.5));
            ck_assert_int_eq(d.steps, 5);
            ck_assert_int_eq(d.n_fin, 2);                /* the two live beams, at step L */
            for (int i = 0; i < d.n_fin; i++) ck_assert_int_eq(d.fin[i].step, 5);
        }
    }
    close_case(&m, &d);
}
END_TEST

/* At the length cap, L = 2 + offset.
 * (a) Nothing finished: p(</s>) = 1e-6 never reaches the 2K best, K = 2,
 *     alpha 0.6, L = 5. t2t returns the best live beam, 3 3 3 3 3 with no
 *     end symbol, and has no finished hypothesis at all; the textbook rule
 *     returns the same tokens as one of the two live beams it finished.
 * (b) Something finished: p(3) = 0.6, p(</s>) = 0.3, K = 2, alpha 0, L = 2.
 *     Step 1: 3 (-0.511) live, </s> (-1.204) finished (both rules: it ranks
 *     above the 2nd live one), <s> (-4.500) live. Step 2 is the last:
 *     3 3 (-1.022) is the best live beam, 3 </s> (-1.715) finishes. t2t
 *     returns a finished one when there is one: [</s>], -1.204, though 3 3
 *     scores more; the textbook rule finishes 3 3 at step L and returns it. */
START_TEST(test_rule_length_cap) {
    Model m;
    Decoder d;
    double p[V];
    fixed_p(p, 0.5, 0.3, 1e-6);
    build_fixed(&m, p);
    new_decoder(&d, &m);
    const int five[] = {3, 3, 3, 3, 3}, end[] = {END}, two[] = {3, 3};
    for (int rule = BEAM_RULE_T2T; rule <= BEAM_RULE_TOPK_ONLY; rule++) {
        decode_fixed(&d, 0.6f, 3, (BeamRule)rule);
        assert_output(&d, five, 5, 5 * log(0.5));
        ck_assert(fabs(d.out_score[0] - 5 * log(0.5) / length_penalty(5, 0.6)) < 1e-5);
        ck_assert_int_eq(d.steps, 5);
        ck_assert_int_eq(d.n_fin, rule == BEAM_RULE_T2T ? 0 : 2);
    }
    model_free(&m);
    fixed_p(p, 0.6, 0.1 / 8, 0.3);
    build_fixed(&m, p);
    decode_fixed(&d, 0.0f, 0, BEAM_RULE_T2T);
    assert_output(&d, end, 1, log(0.3));
    ck_assert_int_eq(d.steps, 2);
    ck_assert_int_eq(d.n_fin, 2);                        /* [</s>] and [3 </s>] */
    decode_fixed(&d, 0.0f, 0, BEAM_RULE_TOPK_ONLY);
    assert_output(&d, two, 2, 2 * log(0.6));
    close_case(&m, &d);
}
END_TEST

/* decode_beam's answer for sentence b against beam_ref's on the same source
 * (SRC's row b): the same tokens, sum and score. Returns beam_ref's steps
 * when they were compared, 0 when beam_ref met a near tie (its margin under
 * 1e-4), where float rounding of two correct searches may decide either way. */
static int same_as_beam_ref(const Decoder *d, Model *m, const DecodeOpts *o, int b, const char *what) {
    int out[MAXOUT];
    BeamRefResult ref;
    char err[256];
    ck_assert_msg(beam_ref(m, o, SRC + b * TS, TS, out, MAXOUT, &ref, err, sizeof err) == 0, "%s", err);
    if (ref.margin < 1e-4) return 0;
    ck_assert_msg(d->out_len[b] == ref.len, "%s sentence %d: length %d, beam_ref %d", what, b, d->out_len[b], ref.len);
    ck_assert_msg(!memcmp(d->out + b * MAXOUT, out, sizeof(int) * ref.len), "%s sentence %d: other tokens than "
                  "beam_ref's", what, b);
    ck_assert_float_eq_tol(d->out_sum[b], ref.sum, 1e-4);
    ck_assert_float_eq_tol(d->out_score[b], ref.score, 1e-4);
    ck_assert_int_le(ref.steps, d->steps);          /* the batch runs until its last sentence ends */
    return ref.steps;
}

/* The models of the sweeps below: random, sharpened (E x 4: the logits x 4)
 * so that the decoder is sure of some words, and </s>'s row 1.25x longer
 * again so that </s> often ranks just below the live beams, where the two
 * rules part. */
static void build_sharp(Model *m, int seed) {
    build(m, seed & 1, 100 + seed);
    for (size_t i = 0; i < (size_t)V * m->cfg.d_model; i++) m->params.embed[i] *= 4.0f;
    for (int j = 0; j < m->cfg.d_model; j++) m->params.embed[END * m->cfg.d_model + j] *= 1.25f;
    model_push(m);
}

/* decode_beam against beam_ref on random models: 3 sentences of 7, 5 and 2
 * tokens decoded together (each stops on its own), beams 1 to 4, alpha 0,
 * 0.6 and 1, both rules. The sweep must hold both ways the rules part, or
 * it would prove little: t2t's answer scoring higher (an end symbol the
 * textbook rule dropped) and lower (a live beam at step L that t2t does
 * not return). */
START_TEST(test_rule_vs_reference) {
    static const float alphas[3] = {0.0f, 0.6f, 1.0f};
    int cases = 0, close = 0, differ = 0, higher = 0, lower = 0;
    for (int seed = 1; seed <= 6; seed++) {
        Model m;
        Decoder d;
        build_sharp(&m, seed);
        new_decoder(&d, &m);
        for (int K = 1; K <= 4; K++)
            for (int a = 0; a < 3; a++) {
                int answers[2][NB * MAXOUT + NB];
                float scores[2][NB];
                for (int rule = BEAM_RULE_T2T; rule <= BEAM_RULE_TOPK_ONLY; rule++) {
                    char err[256], what[64];
                    DecodeOpts o = decode_opts_paper(START, END);
                    o.beam = K, o.alpha = alphas[a], o.offset = 3, o.rule = (BeamRule)rule;
                    ck_assert_msg(decode_beam(&d, &o, SRC, NB, TS, err, sizeof err) == 0, "%s", err);
                    memcpy(answers[rule], d.out, sizeof(int) * NB * MAXOUT);
                    memcpy(answers[rule] + NB * MAXOUT, d.out_len, sizeof(int) * NB);
                    memcpy(scores[rule], d.out_score, sizeof(float) * NB);
                    snprintf(what, sizeof what, "seed %d K %d alpha %.1f rule %d", seed, K, alphas[a], rule);
                    int steps = 0, skip = 0;
                    for (int b = 0; b < NB; b++, cases++) {
                        int st = same_as_beam_ref(&d, &m, &o, b, what);
                        close += !st, skip |= !st;
                        steps = st > steps ? st : steps;
                    }
                    if (!skip) ck_assert_int_eq(d.steps, steps);   /* the batch stops with its last sentence */
                }
                for (int b = 0; b < NB; b++)
                    if (answers[0][NB * MAXOUT + b] != answers[1][NB * MAXOUT + b] ||
                        memcmp(answers[0] + b * MAXOUT, answers[1] + b * MAXOUT, sizeof(int) * MAXOUT)) {
                        differ++;
                        higher += scores[0][b] > scores[1][b], lower += scores[0][b] < scores[1][b];
                    }
            }
        decoder_free(&d);
        model_free(&m);
    }
    fprintf(stderr, "check_decode: rules vs beam_ref: %d cases, %d near ties skipped; the rules differ on %d "
            "of %d sentences (t2t's answer higher on %d, lower on %d)\n", cases, close, differ, cases / 2,
            higher, lower);
    ck_assert_int_le(close * 20, cases);   /* at most 5% skipped */
    ck_assert_int_gt(higher, 0);
    ck_assert_int_gt(lower, 0);
}
END_TEST

/* A model partly trained to copy (chapter 08's task, sequences of TS
 * tokens, Sec. 5's step): sure of some words and unsure of others, as a
 * model in training is, where a random one mostly ends at once. */
static void build_trained(Model *m, uint64_t seed, int steps) {
    enum { B = 32 };
    build(m, 0, seed);
    Trainer t;
    char err[256];
    TrainHyper hp = train_hyper_paper();
    hp.warmup = 50;
    ck_assert_msg(trainer_init(&t, m, &hp, B, TS, seed, err, sizeof err) == 0, "%s", err);
    int src[B * TS], tin[B * (TS - 1)], tout[B * (TS - 1)];
    StepStats st;
    for (int s = 0; s < steps; s++) {
        copy_batch(src, tin, tout, B, TS, V, &t.data_rng);
        ck_assert_int_eq(train_step_batch(&t, src, tin, tout, B, TS, TS - 1, &st), TRAIN_OK);
    }
    trainer_free(&t);
}

/* At the paper's settings (beam 4, alpha 0.6, t2t's rule; offset 8, not 50,
 * for the decoder's 16 tokens): decode_beam, batched and cached, and
 * beam_ref, one sentence at a time without a cache, give the same answer
 * for every sentence, on models trained 100 to 400 steps; each printed. */
START_TEST(test_beam_ref_paper) {
    int compared = 0;
    for (int k = 1; k <= 4; k++) {
        Model m;
        Decoder d;
        build_trained(&m, 300 + k, 100 * k);
        new_decoder(&d, &m);
        char err[256], what[32];
        DecodeOpts o = decode_opts_paper(START, END);
        o.offset = 8;
        ck_assert_msg(decode_beam(&d, &o, SRC, NB, TS, err, sizeof err) == 0, "%s", err);
        snprintf(what, sizeof what, "%d steps", 100 * k);
        for (int b = 0; b < NB; b++) {
            int same = same_as_beam_ref(&d, &m, &o, b, what) > 0;
            compared += same;
            fprintf(stderr, "check_decode: beam 4, alpha 0.6, %3d steps, sentence %d: decode_beam [", 100 * k, b);
            for (int j = 0; j < d.out_len[b]; j++) fprintf(stderr, j ? " %d" : "%d", d.out[b * MAXOUT + j]);
            fprintf(stderr, "] score %.5f; beam_ref %s\n", d.out_score[b], same ? "the same" : "a near tie: skipped");
        }
        decoder_free(&d);
        model_free(&m);
    }
    ck_assert_int_ge(compared, 10);        /* of 12 */
}
END_TEST

/* ---- Limits ---------------------------------------------------------------- */
START_TEST(test_bad_arguments) {
    Model m;
    Decoder d;
    open_case(&m, &d, 0, 1);
    char err[256];
    DecodeOpts good = decode_opts_paper(START, END), o;
    o = good, o.beam = 0;
    ck_assert_int_eq(decode_beam(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "beam"));
    o = good, o.alpha = -0.5f;
    ck_assert_int_eq(decode_beam(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "alpha"));
    o = good, o.alpha = NAN;
    ck_assert_int_eq(decode_beam(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    o = good, o.alpha = INFINITY;
    ck_assert_int_eq(decode_greedy(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    o = good, o.start_id = PAD;
    ck_assert_int_eq(decode_greedy(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    o = good, o.end_id = V;
    ck_assert_int_eq(decode_greedy(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    o = good, o.rule = (BeamRule)7;
    ck_assert_int_eq(decode_beam(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "rule"));
    o = good, o.beam = KMAX + 1;       /* more beams than the decoder was built for */
    ck_assert_int_eq(decode_beam(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    o = good, o.offset = 40;           /* 47 tokens: clipped to max_len 24 > capacity 16 */
    ck_assert_int_eq(decode_greedy(&d, &o, SRC, NB, TS, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "decoder was built for"));
    o = good;
    int bad[TS] = {1, 5, 99, 0, 0, 0, 0, 0};
    ck_assert_int_eq(decode_greedy(&d, &o, bad, 1, TS, err, sizeof err), 2);
    ck_assert_int_eq(decode_greedy(&d, &o, SRC, NB + 1, TS, err, sizeof err), 2);
    Decoder d2;
    ck_assert_int_eq(decoder_new(&d2, &m, 1, 1, 1, 0, err, sizeof err), 2);
    decoder_free(&d2);                 /* safe after a refusal */
    ck_assert_int_eq(decoder_new(&d2, &m, 1, 1, 1, 25, err, sizeof err), 2);  /* beyond max_len */
    decoder_free(&d);
    decoder_free(&d);                  /* twice: a no-op */
    model_free(&m);
}
END_TEST

/* Chapter 09 refuses bad flags with status 2: beam 0, alpha negative or NaN,
 * a checkpoint of another kind (here: a model with 12 tokens, not the copy
 * task's 11) or not a checkpoint at all. Then a short run prints what the
 * chapter's README quotes. Needs $BUILD_DIR (make test). */
START_TEST(test_chapter_bad_flags) {
    char bin[1024], ck[1100], err[256], flags[1200];
    if (!chapter_binary(bin, sizeof bin, "check_decode", "09_decoding")) return;
    const char *build = getenv("BUILD_DIR");
    snprintf(ck, sizeof ck, "%s/check_decode_%d.ckpt", build, (int)getpid());
    Model m;
    Config c = test_config(1, 8, 8, 2, 4, 4, 12, 16, 0.1f);
    ck_assert_int_eq(model_build(&m, &c, 1, 4, 4, 1, err, sizeof err), 0);
    ck_assert_int_eq(model_save(&m, ck, NULL, err, sizeof err), 0);
    model_free(&m);
    snprintf(flags, sizeof flags, "--load '%s'", ck);
    const char *bad[] = {"--beam 0", "--alpha -0.6", "--alpha nan", "--end 0", "--device tpu", "--load Makefile",
                         flags};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(sh("'%s' %s --out /tmp >/dev/null 2>&1", bin, bad[i]) == 2, "09_decoding %s: not refused "
                      "with status 2", bad[i]);
    unlink(ck);

    /* a short run prints what the chapter's README quotes */
    static const char *short_run = "--train-steps 5 --search 64 --cost-len 16 --no-color";
    char *text;
    ck_assert_int_eq(sh_captured(&text, NULL, "'%s' %s --out '%s/cd09'", bin, short_run, build), 0);
    ck_assert_ptr_nonnull(strstr(text, "k_cache [batch=1, heads=4, pos=3, d_k=16]"));
    ck_assert_ptr_nonnull(strstr(text, "[batch=1, heads=4, src=10, d_k=16]"));
    ck_assert_ptr_nonnull(strstr(text, "4096 bytes per token per layer"));
    ck_assert_ptr_nonnull(strstr(text, "24.6 MB for 1,000 tokens"));
    ck_assert_ptr_nonnull(strstr(text, "device: cpu"));
    ck_assert_ptr_nonnull(strstr(text, "Both made exactly one sequential step per output token"));
    ck_assert_ptr_nonnull(strstr(text, "decode_greedy gives the same tokens"));
    assert_lines_fit(text, 100, "  [plot] ");   /* 100 columns, but --out's path */
    free(text);
    /* --device cuda through the CUDA backend's code with the host shim (no GPU
     * needed): it runs, on that backend (tests/check_cuda.c compares the numbers) */
    char shim[1100];
    snprintf(shim, sizeof shim, "%s/libaiyn_cuda_shim.so", build);
    if (access(shim, R_OK) == 0) {
        ck_assert_int_eq(sh_captured(&text, NULL, "AIYN_CUDA_LIB='%s' '%s' %s --device cuda --out '%s/cd09'", shim,
                                     bin, short_run, build), 0);
        ck_assert_ptr_nonnull(strstr(text, "device: cuda"));
        ck_assert_ptr_nonnull(strstr(text, "k_cache [batch=1, heads=4, pos=3, d_k=16]"));
        free(text);
    }
}
END_TEST

/* Issue 35 item 5: chapter 09 took about 5 s at its defaults, a third of
 * it timing outputs of 256 tokens uncached in section 5. The default is now
 * 128 (--cost-len 256 and up by flag), and the totals table has a row per
 * doubling of the output length, so a shorter default still shows the
 * uncached total growing as the square: rows 16, 32, 64 for --cost-len 64.
 * A checkpoint that is cut short or not chapter 08's is refused with a
 * message naming --load and the file. */
START_TEST(test_chapter_defaults_and_load) {
    char bin[1024], *text, *err;
    if (!chapter_binary(bin, sizeof bin, "check_decode", "09_decoding")) return;
    const char *build = getenv("BUILD_DIR");
    ck_assert_int_eq(sh_captured(&text, NULL, "'%s' --help", bin), 0);
    const char *line = strstr(text, "--cost-len N");
    ck_assert_msg(line && strstr(line, "[128]") && strstr(line, "[128]") < strchr(line, '\n'),
                  "--cost-len's default is not 128:\n%s", text);
    free(text);
    ck_assert_int_eq(sh_captured(&text, NULL, "'%s' --train-steps 5 --search 64 --cost-len 64 --no-color --section 5 "
                                 "--out '%s/cd09'", bin, build), 0);
    for (int n = 16; n <= 64; n *= 2) {
        char row[32];
        snprintf(row, sizeof row, "\n  %13d | ", n);
        ck_assert_msg(strstr(text, row), "no totals row for %d tokens:\n%s", n, text);
    }
    free(text);
    /* a checkpoint cut short, and one of another model (vocabulary 12) */
    char ck[1100], cut[1100];
    snprintf(ck, sizeof ck, "%s/check_decode_load_%d.ckpt", build, (int)getpid());
    snprintf(cut, sizeof cut, "%s/check_decode_cut_%d.ckpt", build, (int)getpid());
    Model m;
    char e[256];
    Config c = test_config(1, 8, 8, 2, 4, 4, 12, 16, 0.1f);
    ck_assert_int_eq(model_build(&m, &c, 1, 4, 4, 1, e, sizeof e), 0);
    ck_assert_int_eq(model_save(&m, ck, NULL, e, sizeof e), 0);
    model_free(&m);
    ck_assert_int_eq(sh("head -c 100 '%s' > '%s'", ck, cut), 0);
    const char *files[2] = {cut, ck}, *why[2] = {"truncated", "not chapter 08's copy model"};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sh_captured(&text, &err, "'%s' --load '%s' --out '%s/cd09'", bin, files[i], build), 2);
        ck_assert_msg(strstr(err, "--load") && strstr(err, files[i]) && strstr(err, why[i]),
                      "--load %s: message lacks '--load', the file or '%s':\n%s", files[i], why[i], err);
        ck_assert_msg(*text == '\0', "--load %s printed before refusing:\n%s", files[i], text);
        free(text), free(err);
    }
    unlink(ck), unlink(cut);
}
END_TEST

Suite *decode_suite(void) {
    Suite *s = suite_create("decode");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_length_penalty);
    tcase_add_test(core, test_cache_bytes_and_flops);
    tcase_add_test(core, test_rows_twins);
    tcase_add_test(core, test_rows_tuned_vs_plain);
    suite_add_tcase(s, core);
    TCase *cache = tcase_create("Cache");
    tcase_add_test(cache, test_greedy_post_ln);
    tcase_add_test(cache, test_greedy_pre_ln);
    tcase_add_test(cache, test_beam_post_ln);
    tcase_add_test(cache, test_beam_pre_ln);
    tcase_add_test(cache, test_beam_learned_pe);
    tcase_add_test(cache, test_reorder);
    tcase_set_timeout(cache, 30);
    suite_add_tcase(s, cache);
    TCase *search = tcase_create("Search");
    tcase_add_test(search, test_logp_is_model_forward);
    tcase_add_test(search, test_beam1_is_greedy);
    tcase_add_test(search, test_beam_exhaustive);
    tcase_set_timeout(search, 30);
    suite_add_tcase(s, search);
    TCase *rule = tcase_create("Rule");
    tcase_add_test(rule, test_rule_end_below_kth_live);
    tcase_add_test(rule, test_rule_length_cap);
    tcase_add_test(rule, test_rule_vs_reference);
    tcase_add_test(rule, test_beam_ref_paper);
    tcase_set_timeout(rule, 60);
    suite_add_tcase(s, rule);
    TCase *lim = tcase_create("Limits");
    tcase_add_test(lim, test_bad_arguments);
    suite_add_tcase(s, lim);
    TCase *prog = tcase_create("Program");     /* runs build/09_decoding: slow under sanitizers */
    tcase_add_test(prog, test_chapter_bad_flags);
    tcase_add_test(prog, test_chapter_defaults_and_load);
    tcase_set_timeout(prog, 60);
    suite_add_tcase(s, prog);
    return s;
}

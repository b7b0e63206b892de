/* 09_decoding - generating output: greedy, beam search, the KV cache (Sec. 6.1).
 *
 * Training is parallel over target positions (teacher forcing + the causal
 * mask); generation is not: the token at step t+1 depends on the one chosen
 * at step t. This chapter decodes chapter 08's copy model with the decoder of
 * common/model/decode.h and shows:
 *   1. why generation is sequential (steps = output length, cached or not);
 *   2. greedy decoding step by step, with the KV cache growing one position
 *      per step (k_cache [batch=1, heads=4, pos=3, d_k=16]);
 *   3. beam search (Sec. 6.1: beam 4) as a tree of hypotheses, on an input
 *      where it finds a more probable output than greedy;
 *   4. the length penalty lp(Y) = (5+|Y|)^alpha / 6^alpha (Wu et al. 2016,
 *      the paper's alpha = 0.6) at alpha 0, 0.6, 1.0, with the end symbol
 *      handled as the paper's code, tensor2tensor, does (decode.h), and
 *      how often the textbook rule would answer otherwise;
 *   5. cost: time and FLOPs per token with and without the cache (plot);
 *   6. the cache's memory, here and for the paper's base model;
 *   7. the cross-attention of the decoded output as a heatmap.
 *
 *   build/09_decoding                                   trains a small copy model (~1 s) first
 *   build/08_training && build/09_decoding --load out/08_training/copy.ckpt
 *   build/09_decoding --beam 8 --alpha 1.0 --end 5
 *   build/09_decoding --device cuda                      the decoder on the GPU (CPU if none)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fast/parallel.h"

#include "core/clock.h"
#include "io/cli.h"
#include "model/decode.h"
#include "model/device.h"
#include "model/model.h"
#include "io/show.h"
#include "io/plot.h"
#include "core/tensor.h"
#include "model/train.h"
#include "io/checkpoint.h"
#include "task/copy_task.h"

static const char *PROG = "09_decoding";
enum { T = COPY_LEN, NS = 64, MAXK = 16 };   /* NS: inputs searched per batch */

typedef struct {
    Model m;          /* the copy model: loaded or trained here             */
    Decoder d;        /* NS sentences x MAXK beams of T tokens               */
    const Backend *be;/* --device: where the decoder's ops run (backend.h)   */
    int beam, offset, end_id, n_search, cost_len;
    float alpha;
    uint64_t seed;
    const char *out;
    int ex[T];        /* the example of sections 1, 2 and 7                  */
} Ch;

static const char *label(int id) {
    static char buf[8][8];
    static int i;
    char *b = buf[i++ % 8];
    if (id == COPY_PAD) snprintf(b, 8, "<pad>");
    else if (id == COPY_START) snprintf(b, 8, "<s>");
    else snprintf(b, 8, "%d", id);
    return b;
}

static void print_ids(const int *ids, int n) {
    for (int i = 0; i < n; i++) printf(" %s", label(ids[i]));
}

static DecodeOpts opts(const Ch *c, int beam, float alpha, int end_id) {
    DecodeOpts o = decode_opts_paper(COPY_START, end_id);
    o.beam = beam, o.alpha = alpha, o.offset = c->offset;
    return o;
}

static void run_or_die(int rc, const char *err) {
    if (rc) cli_fail(PROG, "%s", err);
}

/* ---- setup: load chapter 08's checkpoint, or train for about a second ------ */
static void setup_model(Ch *c, const char *load, int steps) {
    char err[512];
    int cap = NS > MAXK ? NS : MAXK;
    if (load) {
        if (model_load(&c->m, load, cap, T, T, NULL, NULL, err, sizeof err))
            cli_fail(PROG, "--load %s: %s", load, err);
        const Config *k = &c->m.cfg;
        if (k->vocab != COPY_VOCAB || k->max_len < T || k->pad_id != COPY_PAD) {
            int v = k->vocab, ml = k->max_len;
            model_free(&c->m);
            cli_fail(PROG, "--load %s: a model with vocabulary %d and max_len %d is not chapter 08's copy "
                     "model (vocabulary %d, max_len >= %d, padding 0)", load, v, ml, COPY_VOCAB, T);
        }
        printf("loaded %s (N=%d, d_model=%d, h=%d)\n", load, k->N, k->d_model, k->h);
        return;
    }
    Config k = config_base();
    k.N = 2, k.d_model = 64, k.d_ff = 128, k.h = 4, k.d_k = k.d_v = 16;
    k.vocab = COPY_VOCAB, k.max_len = T, k.dropout = 0.1f, k.pad_id = COPY_PAD;
    if (model_build(&c->m, &k, cap, T, T, c->seed, err, sizeof err)) cli_fail(PROG, "%s", err);
    Trainer tr;
    TrainHyper hp = train_hyper_paper();
    hp.warmup = 200;
    if (trainer_init(&tr, &c->m, &hp, NS, T, c->seed ^ 0xDA7A5EEDull, err, sizeof err)) cli_fail(PROG, "%s", err);
    CopyBatch cb;
    if (copy_batch_alloc(&cb, NS, T)) cli_fail(PROG, "out of memory");
    double t0 = clock_wall_s();
    StepStats st = {0};
    for (int i = 0; i < steps; i++)
        if (copy_train_step(&tr, &cb, &st) != TRAIN_OK) cli_fail(PROG, "training diverged at step %d", i + 1);
    copy_batch_free(&cb);
    trainer_free(&tr);
    printf("no --load: trained chapter 08's small copy model here (N=2, d_model=64, h=4) for %d steps\n"
           "of %d sequences in %.1f s; loss %.3f. It is only partly trained, on purpose: its mistakes\n"
           "are where search matters. (build/08_training trains it fully; pass its checkpoint to --load.)\n",
           steps, NS, clock_wall_s() - t0, st.loss);
}

/* ---- 1. why generation is sequential ------------------------------------------ */
static void section_sequential(Ch *c) {
    show_section("1. Why generation is sequential (Sec. 3.2.3, 6.1)");
    char err[256];
    DecodeOpts o = opts(c, 1, 0, -1);
    int steps[2], len = 0;
    double secs[2];
    for (int cached = 1; cached >= 0; cached--) {
        o.cached = cached;
        double t0 = clock_wall_s();
        run_or_die(decode_greedy(&c->d, &o, c->ex, 1, T, err, sizeof err), err);
        secs[cached] = clock_wall_s() - t0, steps[cached] = c->d.steps, len = c->d.out_len[0];
    }
    printf("training: ONE decoder pass over all %d target positions at once (teacher forcing: the\n"
           "input is the known target shifted right; the causal mask hides the future).\n", T - 1);
    printf("generation: the input of step t+1 is the token chosen at step t, so it cannot start\n"
           "before step t ends. Decoding the example to %d tokens took\n", len);
    printf("  uncached: %d decoder calls, each over the whole prefix (%.2f ms)\n", steps[0], 1e3 * secs[0]);
    printf("  cached:   %d decoder calls, each over one new position (%.2f ms)\n", steps[1], 1e3 * secs[1]);
    printf("%s\n", steps[0] == len && steps[1] == len
                       ? "Both made exactly one sequential step per output token: the cache makes each step\n"
                         "cheaper; it cannot make the steps fewer."
                       : "The step counts differ from the output length (unexpected).");
}

/* ---- 2. greedy step by step, the cache growing --------------------------------- */
static void section_greedy(Ch *c, float *heat, int *ys, int *n_out) {
    show_section("2. Greedy decoding step by step: the KV cache grows by one position");
    char err[256];
    Decoder *d = &c->d;
    const Config *k = &c->m.cfg;
    DecodeOpts o = opts(c, 1, 0, -1);
    int V = k->vocab, h = k->h, L = decode_max_len(k, &o, c->ex, T);   /* |x| + offset (decode.h) */
    run_or_die(decoder_begin(d, c->ex, 1, T, 1, 1, err, sizeof err), err);
    printf("source:");
    print_ids(c->ex, T);
    printf("\nencoded once: memory [batch=1, src=%d, d_model=%d]; per layer cross K, V\n"
           "[batch=1, heads=%d, src=%d, d_k=%d] (memory W^K, memory W^V), computed once for all steps\n",
           T, k->d_model, h, T, k->d_k);
    printf("each step appends one position to k_cache and v_cache in each of the %d layers:\n", k->N);
    int tok = COPY_START;
    for (int t = 0; t < L; t++) {
        const float *lp = decoder_step(d, &tok);
        int best = -1;
        for (int v = 0; v < V; v++)
            if (v != k->pad_id && (best < 0 || lp[v] > lp[best])) best = v;
        printf("step %d: input %-3s -> k_cache [batch=1, heads=%d, pos=%d, d_k=%d] -> %-2s (log p %.3f)\n",
               t + 1, label(tok), h, d->pos, k->d_k, label(best), lp[best]);
        for (int j = 0; j < T; j++) {            /* last layer's cross-attention, mean of heads */
            float s = 0;
            for (int i = 0; i < h; i++) s += d->cross_w[(((size_t)(k->N - 1) * d->R) * h + i) * T + j];
            heat[t * T + j] = s / h;
        }
        ys[t] = tok, tok = best;
    }
    *n_out = L;
    run_or_die(decode_greedy(d, &o, c->ex, 1, T, err, sizeof err), err);
    float cached_lp[T];
    int same = 1;
    for (int t = 0; t < L; t++) same &= d->out[t] == (t + 1 < L ? ys[t + 1] : tok);
    memcpy(cached_lp, d->out_lp, sizeof(float) * L);
    o.cached = 0;
    run_or_die(decode_greedy(d, &o, c->ex, 1, T, err, sizeof err), err);
    Diff df = diff_arrays(cached_lp, d->out_lp, L);
    printf("decode_greedy gives %s tokens; recomputing the whole prefix each step (no cache) gives\n"
           "log-probs within %.1e of these (tests/check_decode.c holds it to 1e-5).\n",
           same ? "the same" : "DIFFERENT", df.max_abs);
}

/* ---- 3. beam search as a tree ------------------------------------------------- */

/* The tokens of row r after step t, following the parents back. */
static int trace_prefix(const Decoder *d, int t, int r, int *ys) {
    for (int s = t; s >= 0; s--) {
        ys[s] = d->trace[(size_t)s * d->R + r].token;
        r = d->trace[(size_t)s * d->R + r].parent;
    }
    return t + 1;
}

/* The tokens of row r after step t, " 7 8 9", into ids; -1 for a dead row. */
static int tree_ids(char *ids, size_t cap, const Decoder *d, int t, int r) {
    if (d->trace[(size_t)t * d->R + r].parent < 0) return -1;
    int ys[T * 4], n = trace_prefix(d, t, r, ys);
    size_t o = 0;
    ids[0] = '\0';
    for (int i = 0; i < n && o < cap; i++) o += (size_t)snprintf(ids + o, cap - o, " %s", label(ys[i]));
    return (int)strlen(ids);
}

/* One hypothesis: "[row<-parent] tokens   sum -1.234", the tokens padded
 * to w columns; "" for a dead row. Returns its length. */
static int tree_cell(char *buf, size_t cap, const Decoder *d, int t, int r, int w) {
    char ids[T * 8];
    buf[0] = '\0';
    if (tree_ids(ids, sizeof ids, d, t, r) < 0) return 0;
    const BeamNode *nd = &d->trace[(size_t)t * d->R + r];
    return snprintf(buf, cap, "[%d<-%d]%-*s sum %.3f", r, nd->parent, w, ids, nd->sum);
}

/* Every step's hypotheses: steps 1..ceil(m/2) down the left column, the
 * rest down the right, so the section fits a 45-row screen; one column
 * when two would be wider than 100. */
static void print_tree(const Decoder *d, int K) {
    char ids[T * 8], left[T * 8 + 40], right[T * 8 + 40];
    int steps = d->steps, half = (steps + 1) / 2, w[2] = {0, 0}, cw[2] = {0, 0};
    for (int t = 0; t < steps; t++)          /* column widths: tokens, then whole cells */
        for (int r = 0; r < K; r++) {
            int n = tree_ids(ids, sizeof ids, d, t, r);
            if (n > w[t >= half]) w[t >= half] = n;
        }
    for (int t = 0; t < steps; t++)
        for (int r = 0; r < K; r++) {
            int n = tree_cell(left, sizeof left, d, t, r, w[t >= half]);
            if (n > cw[t >= half]) cw[t >= half] = n;
        }
    int two = steps > 1 && 9 + cw[0] + 3 + 9 + cw[1] <= 100;
    if (!two) half = steps, w[0] = w[0] > w[1] ? w[0] : w[1];
    for (int t = 0; t < half; t++) {
        int u = t + half;                    /* the step beside it, in the right column */
        for (int r = 0, line = 0; r < K; r++) {
            int lr = tree_cell(left, sizeof left, d, t, r, w[0]) > 0;
            int rr = two && u < steps && tree_cell(right, sizeof right, d, u, r, w[1]) > 0;
            if (!lr && !rr) continue;
            char lh[24] = "", rh[24] = "";
            if (line++ == 0) snprintf(lh, sizeof lh, "step %d:", t + 1), snprintf(rh, sizeof rh, "step %d:", u + 1);
            printf("%-9s%-*s", lh, rr ? cw[0] : 0, left);
            if (rr) printf("   %-9s%s", rh, right);
            printf("\n");
        }
    }
}

static void section_beam(Ch *c) {
    show_section("3. Beam search (Sec. 6.1: beam size 4): a tree of hypotheses");
    char err[256];
    Decoder *d = &c->d;
    int src[NS * T], tin[NS * T], tout[NS * T];
    float g_sum[NS];
    Rng rng;
    rng_seed(&rng, c->seed ^ 0xBEA5ull);
    DecodeOpts g = opts(c, 1, 0, -1), b = opts(c, c->beam, c->alpha, -1);
    int found = -1, tried = 0;
    while (found < 0 && tried < c->n_search) {
        copy_batch(src, tin, tout, NS, T, COPY_VOCAB, &rng);
        run_or_die(decode_greedy(d, &g, src, NS, T, err, sizeof err), err);
        for (int s = 0; s < NS; s++) g_sum[s] = d->out_sum[s];
        run_or_die(decode_beam(d, &b, src, NS, T, err, sizeof err), err);
        for (int s = 0; s < NS && found < 0 && tried + s < c->n_search; s++)
            if (d->out_sum[s] > g_sum[s] + 1e-4f) found = s;
        tried += found < 0 ? NS : found + 1;
    }
    printf("tried %d random copy input%s for one where beam search (K=%d) beats greedy\n", tried,
           tried == 1 ? "" : "s", c->beam);
    if (found < 0) {
        printf("none found: on every one greedy's output was as probable as beam search's. (Cases are\n"
               "likelier with a less trained model, longer outputs, a wider --beam or more --search.)\n");
        return;
    }
    int *x = src + found * T, gy[T];
    run_or_die(decode_greedy(d, &g, x, 1, T, err, sizeof err), err);
    float gsum = d->out_sum[0], glp[T];
    int L = d->out_len[0];
    memcpy(gy, d->out, sizeof(int) * L);
    memcpy(glp, d->out_lp, sizeof(float) * L);
    run_or_die(decode_beam(d, &b, x, 1, T, err, sizeof err), err);
    printf("input %d:", tried);
    print_ids(x, T);
    printf("\nevery step keeps the %d best extensions of the live hypotheses ([row<-parent row],\n"
           "sum = sum of log-probs; the first step has one parent, <s>; no end symbol here, so\n"
           "nothing finishes before the length limit):\n", c->beam);
    print_tree(d, c->beam);
    printf("greedy:");
    print_ids(gy, L);
    printf("   sum log p = %.3f\nbeam:  ", gsum);
    print_ids(d->out, d->out_len[0]);
    printf("   sum log p = %.3f\n", d->out_sum[0]);
    int t = 0;
    while (t < L && gy[t] == d->out[t]) t++;
    printf("Beam search's output is %.2fx as probable (%.3f nats more). They part at step %d: greedy\n"
           "took %s (log p %.3f), the locally best word; beam search also kept %s (log p %.3f), whose\n"
           "continuation scored better. Right answer (the input copied): greedy %s, beam %s.\n",
           exp(d->out_sum[0] - gsum), d->out_sum[0] - gsum, t + 1, label(gy[t]), glp[t], label(d->out[t]),
           d->out_lp[t], memcmp(gy, x + 1, sizeof(int) * (T - 1)) ? "no" : "yes",
           memcmp(d->out, x + 1, sizeof(int) * (T - 1)) ? "no" : "yes");
    float beam_sum = d->out_sum[0];
    b.cached = 0;
    run_or_die(decode_beam(d, &b, x, 1, T, err, sizeof err), err);
    printf("without the cache (every step recomputed): sum %.3f, difference %.1e\n", d->out_sum[0],
           fabs(d->out_sum[0] - beam_sum));
}

/* ---- 4. the length penalty ------------------------------------------------------ */

/* The two rules of decode.h on n inputs at the paper's alpha. Their live
 * beams are the same at every step (the K best candidates not ending in
 * </s>); the textbook rule finishes a subset of t2t's (only the </s> above
 * the K-th live one). So where t2t's answer scores higher it is an </s> the
 * textbook rule dropped; where lower, the textbook rule's is a live beam cut
 * at the length limit, which t2t returns only when nothing finished. */
static void section_rules(Ch *c, const int *src, int n) {
    char err[256];
    Decoder *d = &c->d;
    int out[NS * T], len[NS], differ = 0, higher = 0, lower = 0;
    float score[NS];
    DecodeOpts o = opts(c, c->beam, 0.6f, c->end_id);
    run_or_die(decode_beam(d, &o, src, n, T, err, sizeof err), err);
    memcpy(out, d->out, sizeof(int) * n * T), memcpy(len, d->out_len, sizeof(int) * n);
    memcpy(score, d->out_score, sizeof(float) * n);
    o.rule = BEAM_RULE_TOPK_ONLY;
    run_or_die(decode_beam(d, &o, src, n, T, err, sizeof err), err);
    for (int s = 0; s < n; s++)
        if (len[s] != d->out_len[s] || memcmp(out + s * T, d->out + s * T, sizeof(int) * len[s])) {
            differ++;
            higher += score[s] > d->out_score[s], lower += score[s] < d->out_score[s];
        }
    printf("The textbook rule (BEAM_RULE_TOPK_ONLY: an </s> ranked below the K-th live candidate is\n"
           "dropped; at the limit the live beams compete on score) ");
    if (!differ) {
        printf("gives the same answers on all %d inputs\nof that batch at alpha 0.6.\n", n);
        return;
    }
    printf("answers differently on %d of the\n%d inputs of that batch at alpha 0.6: the paper's rule scores "
           "higher on %d (an </s> the\ntextbook dropped), lower on %d (a better live beam cut at the limit, "
           "which the paper's\ncode returns only when nothing finished)%s.\n", differ, n, higher, lower,
           higher + lower < differ ? "; the rest tie" : "");
}

static void section_length_penalty(Ch *c) {
    show_section("4. The length penalty lp(Y) = (5+|Y|)^alpha / (5+1)^alpha (Wu et al. 2016)");
    static const float alphas[3] = {0.0f, 0.6f, 1.0f};
    printf("   |Y|:");
    for (int n = 1; n <= 9; n += 2) printf("  %6d", n);
    printf("\n");
    for (int a = 0; a < 3; a++) {
        printf("a=%.1f: ", alphas[a]);
        for (int n = 1; n <= 9; n += 2) printf("  %6.3f", length_penalty(n, alphas[a]));
        printf("\n");
    }
    printf("A hypothesis is ranked by (sum of log-probs) / lp(|Y|). The sum only falls as words are\n"
           "added, so with alpha = 0 short outputs win; a larger alpha divides long sums by more.\n");
    if (c->end_id < 0) {
        printf("--end -1: no end symbol, every output has the same length and lp changes nothing.\n");
        return;
    }
    printf("The copy task has no end-of-sentence word; here word %d plays </s> (--end). The search\n"
           "is the paper's code's (tensor2tensor; decode.h, BEAM_RULE_T2T): of each step's 2K best\n"
           "candidates, every one ending in </s> is finished, the K best others stay live.\n", c->end_id);
    char err[256];
    Decoder *d = &c->d;
    int src[NS * T], tin[NS * T], tout[NS * T], len0[NS];
    Rng rng;
    rng_seed(&rng, c->seed ^ 0x1E9ull);
    int found = -1, tried = 0;
    while (found < 0 && tried < c->n_search) {
        copy_batch(src, tin, tout, NS, T, COPY_VOCAB, &rng);
        DecodeOpts o = opts(c, c->beam, 0.0f, c->end_id);
        run_or_die(decode_beam(d, &o, src, NS, T, err, sizeof err), err);
        memcpy(len0, d->out_len, sizeof len0);
        o.alpha = 1.0f;
        run_or_die(decode_beam(d, &o, src, NS, T, err, sizeof err), err);
        for (int s = 0; s < NS && found < 0; s++)
            if (d->out_len[s] != len0[s]) found = s;
        tried += found < 0 ? NS : found + 1;
    }
    if (found < 0) {
        printf("searched %d inputs: alpha 0 and 1 chose outputs of the same length on all of them.\n", tried);
        return;
    }
    int *x = src + found * T, lens[3], early = 0;
    printf("input no. %d searched, where alpha changes the answer:", tried);
    print_ids(x, T);
    printf("\n");
    for (int a = 0; a < 3; a++) {
        DecodeOpts o = opts(c, c->beam, alphas[a], c->end_id);
        run_or_die(decode_beam(d, &o, x, 1, T, err, sizeof err), err);
        lens[a] = d->out_len[0];
        early += d->steps < d->maxlen[0];
        printf("alpha %.1f:", alphas[a]);
        print_ids(d->out, d->out_len[0]);
        printf("%*s |Y| %d, sum %.3f / lp %.3f = score %.3f (%d of %d steps)\n", 2 * (T - d->out_len[0]),
               "", d->out_len[0], d->out_sum[0], length_penalty(d->out_len[0], alphas[a]), d->out_score[0],
               d->steps, d->maxlen[0]);
    }
    printf("From alpha 0 to 1.0 the chosen output went from %d to %d tokens%s;\nthe paper's 0.6 gave %d.",
           lens[0], lens[2], lens[2] > lens[0] ? " (longer, as the penalty intends)" : "", lens[1]);
    printf("%s\n", early ? " Where it took fewer steps than the limit, the search stopped early: the best\n"
                           "live beam could no longer beat the worst of the K best finished ones (decode.h)." : "");
    section_rules(c, src, NS);
}

/* ---- 5. cost: time and FLOPs per token, cached vs uncached -------------------- */
static void section_cost(Ch *c) {
    show_section("5. Cost per generated token: cached vs recomputing the prefix");
    char err[256];
    Config k = c->m.cfg;
    k.max_len = c->cost_len;
    Model m;
    Decoder d;
    /* timing does not depend on the weights: a fresh model of the same shape */
    if (model_build(&m, &k, 1, T, c->cost_len, c->seed, err, sizeof err) || model_to(&m, c->be, err, sizeof err) ||
        decoder_new(&d, &m, 1, 1, T, c->cost_len, err, sizeof err))
        cli_fail(PROG, "%s", err);
    int L = c->cost_len, *toks = calloc((size_t)L + 1, sizeof *toks);
    float *x = calloc((size_t)L, sizeof *x), *ms[2] = {calloc((size_t)L, sizeof(float)), calloc((size_t)L, sizeof(float))};
    if (!toks || !x || !ms[0] || !ms[1]) cli_fail(PROG, "out of memory");
    toks[0] = COPY_START;
    /* one thread both ways: on a busy machine a team of threads waits for its
     * slowest member, which turns some steps into scheduler time slices */
    int threads = parallel_threads();
    parallel_set_threads(1);
    for (int cached = 1; cached >= 0; cached--) {
        run_or_die(decoder_begin(&d, c->ex, 1, T, 1, cached, err, sizeof err), err);
        for (int t = 0; t < L; t++) {
            /* best of 3: stepping position t again rewrites the same cache row */
            const float *lp = NULL;
            for (int rep = 0; rep < 3; rep++) {
                d.pos = t;
                double t0 = clock_wall_s();
                lp = decoder_step(&d, toks + t);
                float dt = (float)(1e3 * (clock_wall_s() - t0));
                ms[cached][t] = rep == 0 || dt < ms[cached][t] ? dt : ms[cached][t];
            }
            if (cached) {                    /* the uncached pass replays these tokens */
                int best = 2;
                for (int v = 2; v < k.vocab; v++) best = lp[v] > lp[best] ? v : best;
                toks[t + 1] = best;
            }
            x[t] = (float)(t + 1);
        }
    }
    parallel_set_threads(threads);
    printf("model N=%d, d_model=%d, h=%d, source %d tokens; 1 thread, best of 3 per position (a busy\n"
           "machine is noisy: compare the two columns, not the absolute times)\n", k.N, k.d_model, k.h, T);
    printf("  position | ms cached | ms uncached | MFLOP cached | MFLOP uncached\n");
    static const int at[] = {1, 16, 64, 128, 256, 512, 1024};
    for (int i = 0; i < 7 && at[i] <= L; i++) {
        int t = at[i] - 1;
        printf("  %8d | %9.3f | %11.3f | %12.3f | %14.3f\n", t + 1, ms[1][t], ms[0][t],
               decode_flops_cached(&k, t, T) / 1e6, decode_flops_uncached(&k, t, T) / 1e6);
    }
    printf("  output length | total ms cached | total ms uncached | ratio\n");
    for (int n = 16; n <= L; n *= 2) {
        double s[2] = {0, 0};
        for (int t = 0; t < n; t++) s[0] += ms[0][t], s[1] += ms[1][t];
        printf("  %13d | %15.2f | %17.2f | %5.1fx\n", n, s[1], s[0], s[0] / s[1]);
    }
    printf("Uncached, step t redoes all t positions: time per token grows with t and the total with t^2;\n"
           "cached, only attention over the t cached keys grows (%.3f of %.3f MFLOP at the last position).\n",
           (decode_flops_cached(&k, L - 1, T) - decode_flops_cached(&k, 0, T)) / 1e6,
           decode_flops_cached(&k, L - 1, T) / 1e6);
    const float *series[2] = {ms[1], ms[0]};
    const char *names[2] = {"cached", "uncached (whole prefix)"};
    plot_lines(c->out, "time_per_token", "Time per generated token", "position (tokens generated)", "ms",
               x, L, series, names, 2, 0, 1);
    free(toks), free(x), free(ms[0]), free(ms[1]);
    decoder_free(&d);
    model_free(&m);
}

/* ---- 6. the cache's memory ---------------------------------------------------- */
static void section_memory(const Ch *c) {
    show_section("6. The cache's memory: K and V, per token, per layer");
    const Config *k = &c->m.cfg;
    Config base = config_base();
    size_t here = decode_cache_bytes_per_token_layer(k), pb = decode_cache_bytes_per_token_layer(&base);
    printf("per token per layer: K and V, h*(d_k+d_v) = 2 d_model floats = 2 x %d x 4 = %zu bytes here\n",
           k->d_model, here);
    printf("this model (N=%d): %zu bytes per generated token per beam; %zu bytes for %d tokens x %d beams\n",
           k->N, here * k->N, here * k->N * T * c->beam, T, c->beam);
    printf("base model (Table 3, N=6, d_model=512): %zu bytes per token per layer, %zu per token,\n"
           "%.1f MB for 1,000 tokens (x 4 beams: %.1f MB), plus the same per source token for the\n"
           "cross-attention K, V.\n", pb, pb * 6, pb * 6 * 1000 / 1e6, pb * 6 * 4000 / 1e6);
}

/* ---- 7. attention of the decoded output --------------------------------------- */
static void section_attention(const Ch *c, const float *heat, const int *ys, int n) {
    show_section("7. Cross-attention of the greedy output (last layer, mean of heads)");
    const char *rl[T * 2], *cl[T];
    char rb[T * 2][8], cb[T][8];
    for (int i = 0; i < n; i++) snprintf(rb[i], 8, "%s", label(ys[i])), rl[i] = rb[i];
    for (int j = 0; j < T; j++) snprintf(cb[j], 8, "%s", label(c->ex[j])), cl[j] = cb[j];
    show_heatmap("rows: decoder input at each step; columns: source tokens", heat, n, T, rl, cl);
    int diag = 0;
    for (int i = 0; i < n && i + 1 < T; i++) {
        int best = 0;
        for (int j = 1; j < T; j++) best = heat[i * T + j] > heat[i * T + best] ? j : best;
        diag += best == i + 1;
    }
    printf("%d of %d steps look hardest at the source position they must copy next (i+1).\n",
           diag, n < T - 1 ? n : T - 1);
    plot_heatmap(c->out, "cross_attention", "Cross-attention while decoding (last layer, mean of heads)",
                 heat, n, T, rl, cl, "source token", "decoder input");
}

int main(int argc, char **argv) {
    Ch c = {.beam = 4, .alpha = 0.6f, .offset = -1, .end_id = 2, .n_search = 512, .cost_len = 128,
            .seed = 42, .out = "out/09_decoding"};
    const char *load = NULL, *device = "cpu";
    int steps = 120, quick = 0;
    if (cli_given(argc, argv, "--quick")) steps = 5, c.n_search = 64, c.cost_len = 16;
    CliOption o[] = {
        {"--load", CLI_STRING, &load, "chapter 08's checkpoint (default: train a small one here)", 0, 0},
        {"--train-steps", CLI_INT, &steps, "without --load: training steps (partly trained on purpose)", 0, 100000},
        {"--beam", CLI_INT, &c.beam, "beam size K (paper 4)", 1, MAXK},
        {"--alpha", CLI_FLOAT, &c.alpha, "length penalty alpha (paper 0.6)", 0, 10},
        {"--offset", CLI_INT, &c.offset, "max output = input length + offset (paper +50; copy: -1)", -9, 50},
        {"--end", CLI_INT, &c.end_id, "word that plays </s> in section 4 (-1: none)", -1, COPY_VOCAB - 1},
        {"--search", CLI_INT, &c.n_search, "inputs tried when looking for examples", 1, 100000},
        {"--cost-len", CLI_INT, &c.cost_len, "longest output timed in section 5", 16, 1024},
        {"--device", CLI_STRING, &device, "cpu or cuda: where the decoder runs (training: the CPU)", 0, 0},
        {"--seed", CLI_U64, &c.seed, "seed for the weights, training data and inputs", 0, 0},
        {"--out", CLI_STRING, &c.out, "output folder for plots", 0, 0},
        {"--quick", CLI_FLAG, &quick, "a short run: --train-steps 5 --search 64 --cost-len 16 (make smoke)", 0, 0},
    };
    cli_parse(argc, argv, PROG, "greedy decoding, beam search with the length penalty, and the KV cache "
              "(Sec. 6.1)", o, CLI_COUNT(o));
    show_lecture_sections(7);   /* its banners: "1." .. "7." */
    if (c.end_id == COPY_PAD || c.end_id == COPY_START)
        cli_fail(PROG, "--end %d: 0 is padding and 1 the start symbol; pick a word 2..%d or -1",
                 c.end_id, COPY_VOCAB - 1);
    if (!(c.be = backend_select(device))) cli_fail(PROG, "--device must be cpu or cuda, got '%s'", device);
    if (plot_mkdir(c.out)) cli_fail(PROG, "cannot create the output folder --out %s", c.out);
    setup_model(&c, load, steps);
    char err[256];
    /* the model, then the decoder (its cache and activations), on the device */
    if (model_to(&c.m, c.be, err, sizeof err) || decoder_new(&c.d, &c.m, NS, MAXK, T, T, err, sizeof err))
        cli_fail(PROG, "--device %s: %s", c.be->name, err);
    printf("device: %s (every op of the decoder's step runs through this backend's table; the beam\n"
           "search's scores and choices stay on the host)\n", c.be->name);
    Rng rng;
    int tin[T], tout[T], ys[T * 2], n_out = 0;
    rng_seed(&rng, c.seed ^ 0xE8A3D1Eull);
    copy_batch(c.ex, tin, tout, 1, T, COPY_VOCAB, &rng);
    float heat[T * T * 2];

    section_sequential(&c);
    section_greedy(&c, heat, ys, &n_out);
    section_beam(&c);
    section_length_penalty(&c);
    section_cost(&c);
    section_memory(&c);
    section_attention(&c, heat, ys, n_out);

    decoder_free(&c.d);
    model_free(&c.m);
    return 0;
}

/* alignment.c - chapter 11's sections 6 and 7: one sentence through the
 * trained model, its cross-attention as an alignment (Figures 3-5's kind
 * of reading), the heads that trace the verb to the end of a German
 * clause, every encoder head, and the encoder drawn as lines. --translate
 * (translate_cli.c) shows its sentence the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fail.h"
#include "core/fileio.h"
#include "core/tensor.h"
#include "io/cli.h"
#include "io/lineview.h"
#include "io/plot.h"
#include "io/show.h"
#include "model/decode.h"
#include "text/grammar.h"
#include "translation.h"

/* Section 6's sentence.
 * The generated corpus: "The man laughs , because the woman sees the big
 * dog ." built from the grammar, so the German verb of the clause is known
 * ("sieht", clause-final). Any other corpus: the first dev sentence of 6 to
 * 12 English words (none: the first dev sentence), its reference beside it.
 * build_model (main.c) sizes the model's positional table to cover it. */
void tr_demo_sentence(const TrTask *t, int generated, char *en, size_t enlen, char *de, size_t delen) {
    if (generated) {
        Sentence s = {.adverb = -1, .conj = CONJ_BECAUSE};
        s.main = (Clause){.subj = {DET_THE, 1, -1, corpus_noun("man")}, .verb = corpus_verb("laugh")};
        s.sub = (Clause){.subj = {DET_THE, 1, -1, corpus_noun("woman")}, .verb = corpus_verb("see"),
                         .obj = {DET_THE, 1, corpus_adj("big"), corpus_noun("dog")}};
        char err[256];
        if (corpus_render(&s, en, enlen, de, delen, err, sizeof err)) cli_fail(PROG, "%s", err);
        return;
    }
    int pick = 0;
    for (int i = 0; i < t->dev.n; i++) {
        int words = 1;
        for (const char *p = t->dev.src[i]; *p; p++) words += *p == ' ';
        if (words >= 6 && words <= 12) {
            pick = i;
            break;
        }
    }
    snprintf(en, enlen, "%s", t->dev.src[pick]);
    snprintf(de, delen, "%s", t->dev.tgt[pick]);
}

/* A copy of src's weights in a model with room for one sentence of Ts
 * source and Tt target tokens: the trained model's activations hold
 * training batches, not an output of input + 50 tokens fed back whole. */
void tr_model_for_one(Model *dst, const Model *src, int Ts, int Tt) {
    char err[512];
    if (model_build(dst, &src->cfg, 1, Ts, Tt, 0, err, sizeof err)) cli_fail(PROG, "%s", err);
    memcpy(dst->params.mem, src->params.mem, src->params.n * sizeof(float));
    model_push(dst);
}

/* Beam search (Sec. 6.1's settings, chapter 09's decoder) on one sentence,
 * then a teacher-forced pass over the output to read the attention
 * weights. m must hold (1, Ts, Ts + 50). Returns the output length (tokens
 * after <s>, </s> included); ys (Ts + 51) gets <s> y1 .. */
static int translate_one(Model *m, const int *src, int Ts, int *ys) {
    DecodeOpts o = decode_opts_paper(BPE_BOS, BPE_EOS);
    Decoder dec;
    char err[512];
    if (decoder_new(&dec, m, 1, o.beam, Ts, Ts + o.offset, err, sizeof err) ||
        decode_beam(&dec, &o, src, 1, Ts, err, sizeof err))
        cli_fail(PROG, "beam search: %s", err);
    int n = dec.out_len[0];
    ys[0] = BPE_BOS;
    memcpy(ys + 1, dec.out, (size_t)n * sizeof(int));
    decoder_free(&dec);
    model_forward(m, src, ys, 1, Ts, n > 0 ? n : 1, 0);
    return n;
}

/* Where word w (its BPE segmentation) starts in ids[0..n): the first
 * occurrence, or the last when last = 1; -1 if absent. *end gets the
 * position after it. */
static int find_word(const Bpe *b, const int *ids, int n, const char *w, int last, int *end) {
    int seg[64], k = bpe_encode(b, w, seg, 64), at = -1;
    for (int j = 0; k <= 64 && j + k <= n; j++)
        if (!memcmp(ids + j, seg, (size_t)k * sizeof(int)) && (j == 0 || b->sym[ids[j - 1]].eow)) {
            at = j;
            if (!last) break;
        }
    if (end) *end = at + k;
    return at;
}

/* The words the generated demonstration sentence traces: the English verb
 * of the clause, the German verb it becomes (clause-final), their subjects */
typedef struct {
    const char *en_verb, *de_verb, *en_subj, *de_subj;
} Trace;

/* labels for a heatmap: symbol strings of ids[0..n), in one block */
static const char **symbol_labels(const Bpe *b, const int *ids, int n) {
    const char **p = xmalloc(((size_t)n + 1) * (sizeof(char *) + 64));
    char *text = (char *)(p + n + 1);
    for (int i = 0; i < n; i++) bpe_symbol_str(b, ids[i], text + 64 * i, 64), p[i] = text + 64 * i;
    return p;
}

/* The generated sentence's verb, traced through the heads: the decoder
 * head whose query for the German verb looks most at the English verb, the
 * encoder head linking the verb to its subject, the decoder head looking
 * back at the subject (Figures 3-5's kind of reading). */
static void trace_verb(Model *m, const Bpe *bpe, const int *src, int Ts, const int *ys, int Tt, const Trace *tr,
                       const char **tlp, const char **slp, const char *out) {
    int L = m->cfg.N, h = m->cfg.h;
    char title[160];
    int qi = find_word(bpe, ys + 1, Tt, tr->de_verb, 1, NULL);
    int kj1 = 0, kj0 = find_word(bpe, src, Ts, tr->en_verb, 0, &kj1);
    if (qi < 0 || kj0 < 0) {
        printf("(the output has no \"%s\" to trace back to \"%s\")\n", tr->de_verb, tr->en_verb);
        return;
    }
    int bl = 0, bh = 0;
    double best = -1, mean = 0;
    for (int l = 0; l < L; l++) {
        const float *wl = model_attention(m, ATTN_DEC_CROSS, l);
        for (int k = 0; k < h; k++) {
            double s = 0;
            for (int j = kj0; j < kj1; j++) s += wl[((size_t)k * Tt + qi) * Ts + j];
            mean += s / (L * h);
            if (s > best) best = s, bl = l, bh = k;
        }
    }
    printf("writing \"%s\" (position %d of %d, after the object: verb-final), decoder layer %d head %d\n"
           "puts %.2f of its attention on English \"%s\" (position %d of %d); mean over all %d heads %.2f\n",
           tr->de_verb, qi + 1, Tt, bl + 1, bh + 1, best, tr->en_verb, kj0 + 1, Ts, L * h, mean);
    const float *wb = model_attention(m, ATTN_DEC_CROSS, bl);
    snprintf(title, sizeof title, "cross-attention, decoder layer %d head %d", bl + 1, bh + 1);
    plot_heatmap(out, "cross_head", title, wb + (size_t)bh * Tt * Ts, Tt, Ts, tlp, slp,
                 "English (source)", "German (output)");
    /* and in the encoder: which head links the verb to its subject? */
    int sj1 = 0, sj0 = find_word(bpe, src, Ts, tr->en_subj, 0, &sj1);
    if (sj0 >= 0 && sj0 < kj0) {
        double sbest = -1;
        int sl_ = 0, sh = 0;
        for (int l = 0; l < L; l++)
            for (int k = 0; k < h; k++) {
                const float *we = model_attention(m, ATTN_ENC_SELF, l) + (size_t)k * Ts * Ts;
                double sum = 0;
                for (int j = sj0; j < sj1; j++) sum += we[(size_t)kj0 * Ts + j];
                if (sum > sbest) sbest = sum, sl_ = l, sh = k;
            }
        double uni = (double)(sj1 - sj0) / Ts;
        printf("encoder: from \"%s\" to its subject \"%s\" the strongest head is layer %d head %d, weight %.2f\n"
               "(uniform attention over the %d source tokens: %.2f): %s\n", tr->en_verb, tr->en_subj, sl_ + 1,
               sh + 1, sbest, Ts, uni, sbest >= 2 * uni ? "this head links the verb to its subject"
                                                        : "no head here links the verb to its subject");
    }
    /* and in the decoder: writing the verb needs its subject's number
     * (sieht, not sehen). Row qi writes the verb; the subject is an input
     * token of the decoder, at its position in ys. */
    int fi = find_word(bpe, ys + 1, Tt, tr->de_subj, 0, NULL);
    if (fi >= 0 && fi + 1 <= qi) {
        double dbest = -1;
        int dl = 0, dh = 0;
        for (int l = 0; l < L; l++)
            for (int k = 0; k < h; k++) {
                double v = model_attention(m, ATTN_DEC_SELF, l)[((size_t)k * Tt + qi) * Tt + fi + 1];
                if (v > dbest) dbest = v, dl = l, dh = k;
            }
        double uni = 1.0 / (qi + 1);
        printf("decoder: writing \"%s\", the strongest look back at its subject \"%s\" is layer %d head %d,\n"
               "weight %.2f (uniform over the %d tokens so far: %.2f): %s\n", tr->de_verb, tr->de_subj, dl + 1,
               dh + 1, dbest, qi + 1, uni, dbest >= 2 * uni ? "this head links the verb to its subject"
                                                            : "no decoder head links them more than uniform");
        const float *wd = model_attention(m, ATTN_DEC_SELF, dl) + (size_t)dh * Tt * Tt;
        snprintf(title, sizeof title, "decoder self-attention, layer %d head %d", dl + 1, dh + 1);
        /* column j is the decoder's input j: <s>, then the output shifted */
        const char **ilp = xmalloc(((size_t)Tt + 1) * sizeof(char *));
        ilp[0] = "<s>";
        for (int j = 1; j < Tt; j++) ilp[j] = tlp[j - 1];
        plot_heatmap(out, "dec_head", title, wd, Tt, Tt, tlp, ilp, "decoder input (shifted output)",
                     "German output");
        free(ilp);
    }
}

/* Every encoder head to a PNG, a layer's heads in one; with say = 1 also
 * what each does, in words: its mean weight on the token before, the token
 * itself, the token after and the final </s>; the largest names the head
 * when it is at least twice what uniform attention would give, else
 * "spread out". (The generated sentence's section traces its verb instead,
 * and a 45-row screen holds one or the other.) */
static void encoder_heads(Model *m, int Ts, const char **slp, const char *out, int say) {
    int L = m->cfg.N, h = m->cfg.h;
    static const char *const what[4] = {"previous token", "itself", "next token", "</s>"};
    for (int l = 0; l < L; l++) {
        const float *w = model_attention(m, ATTN_ENC_SELF, l);   /* (1,h,Ts,Ts) */
        char line[1024] = "", label[48];
        size_t len = 0;
        for (int k = 0; k < h && len < sizeof line; k++) {
            const float *wk = w + (size_t)k * Ts * Ts;
            double mean[4] = {0}, n[4] = {0};
            for (int i = 0; i < Ts; i++) {
                const float *row = wk + (size_t)i * Ts;
                if (i > 0) mean[0] += row[i - 1], n[0]++;
                mean[1] += row[i], n[1]++;
                if (i + 1 < Ts) mean[2] += row[i + 1], n[2]++;
                mean[3] += row[Ts - 1], n[3]++;
            }
            int best = 1;
            for (int c = 0; c < 4; c++) {
                mean[c] = n[c] ? mean[c] / n[c] : 0;
                if (mean[c] > mean[best]) best = c;
            }
            len += (size_t)snprintf(line + len, sizeof line - len, mean[best] >= 2.0 / Ts ? "%shead %d %s %.2f"
                                    : "%shead %d %s (at most %.2f)", k ? ", " : "", k + 1,
                                    mean[best] >= 2.0 / Ts ? what[best] : "spread out", mean[best]);
        }
        snprintf(label, sizeof label, "  encoder layer %d: ", l + 1);
        if (say) tr_print_wrapped(label, line);
        char nm[64], title[160];
        snprintf(nm, sizeof nm, "enc_heads_layer%d", l + 1);
        snprintf(title, sizeof title, "encoder self-attention, layer %d of %d, every head", l + 1, L);
        plot_heads_grid(out, nm, title, w, h, Ts, Ts, slp, slp, "key", "query");
    }
    if (say) printf("  (mean weight of each head; uniform attention over the %d tokens gives %.2f)\n", Ts, 1.0 / Ts);
}

/* The alignment avg (Tt,Ts) in words: how sharp (each row's largest weight
 * against uniform's 1/Ts), how many source tokens the rows' strongest ones
 * cover, and how ordered they are (does the strongest move left to right?) */
static void alignment_in_words(const float *avg, int Tt, int Ts) {
    double sharp = 0;
    int back = 0, covered = 0, prev = -1;
    char *hit = xcalloc((size_t)Ts, 1);
    for (int i = 0; i < Tt; i++) {
        int a = 0;
        for (int j = 1; j < Ts; j++) a = avg[(size_t)i * Ts + j] > avg[(size_t)i * Ts + a] ? j : a;
        sharp += avg[(size_t)i * Ts + a] / Tt;
        back += i > 0 && a < prev;
        covered += !hit[a];
        hit[a] = 1;
        prev = a;
    }
    free(hit);
    printf("each output row's strongest source token takes %.2f on average (uniform: %.2f); these cover\n"
           "%d of the %d source tokens and step back %d of %d times: %s\n", sharp, 1.0 / Ts, covered, Ts, back,
           Tt - 1, sharp < 3.0 / Ts ? "close to uniform, no alignment to read yet"
           : 3 * covered < Ts ? "a few source tokens draw every row, not a word-by-word alignment"
           : 4 * back <= Tt - 1 ? "mostly in order, a near-diagonal alignment"
                                : "often backwards: the output reorders the input");
}

/* Sentence en through m (room for (1, Ts, Ts + 50)): its translation, the
 * last decoder layer's cross-attention (mean of the heads) printed and
 * plotted as `name`; then, with trace = 1, the generated sentence's verb
 * traced through the heads (sees -> sieht, its subject woman / Frau), else
 * the alignment in words; heads = 1: every encoder head to PNGs (and what
 * each does, in words, without trace) and the encoder as lines. */
void tr_show_alignment(Model *m, const Bpe *bpe, const char *en, int trace, int heads, const char *out,
                       const char *name) {
    static const Trace verb = {"sees", "sieht", "woman", "Frau"};
    const Trace *tr = trace ? &verb : NULL;
    int ns = bpe_encode(bpe, en, NULL, 0), Ts = ns + 1;
    int *src = xmalloc(((size_t)Ts + 1) * sizeof(int)), *ys = xmalloc(((size_t)Ts + OUT_OFFSET + 2) * sizeof(int));
    bpe_encode(bpe, en, src, ns);
    src[ns] = BPE_EOS;
    int Tt = translate_one(m, src, Ts, ys);
    size_t dl = bpe_decode(bpe, ys + 1, Tt, NULL, 0) + 1;
    char *de = xmalloc(dl);
    bpe_decode(bpe, ys + 1, Tt, de, dl);
    tr_print_wrapped("en: ", en);
    tr_print_wrapped("de: ", de);
    if (!tr) tr_print_ids(bpe, "output", ys + 1, Tt);   /* the model's own tokens, </s> last if it ended */
    const char **slp = symbol_labels(bpe, src, Ts), **tlp = symbol_labels(bpe, ys + 1, Tt);   /* row i predicts y_{i+1} */
    int L = m->cfg.N, h = m->cfg.h;
    float *avg = xcalloc((size_t)Tt * Ts, sizeof(float));
    const float *w = model_attention(m, ATTN_DEC_CROSS, L - 1);   /* (1,h,Tt,Ts) */
    for (int i = 0; i < Tt * Ts; i++) {
        for (int k = 0; k < h; k++) avg[i] += w[(size_t)k * Tt * Ts + i] / h;
    }
    Tensor wt = tensor_wrap((float *)w, "cross-attention", "batch heads query key", 1, h, Tt, Ts);
    show_shape(&wt, "(rows: German output, columns: English)");
    char title[160];
    snprintf(title, sizeof title, "cross-attention, decoder layer %d of %d, mean of %d heads", L, L, h);
    show_heatmap(title, avg, Tt, Ts, tlp, slp);
    plot_heatmap(out, name, title, avg, Tt, Ts, tlp, slp, "English (source)", "German (output)");
    if (tr) {   /* the generated sentence: its verb is traced instead (a 45-row screen holds one) */
        trace_verb(m, bpe, src, Ts, ys, Tt, tr, tlp, slp, out);
    } else {
        alignment_in_words(avg, Tt, Ts);
    }
    if (heads) encoder_heads(m, Ts, slp, out, !tr);
    if (heads) {   /* section 6's sentence, its encoder drawn as the paper draws Figures 3-5 */
        show_section("7. Attention as lines: Figures 3-5 as the paper draws them");
        lineview_encoder(out, m, Ts, slp, tr ? "translation, generated corpus" : "translation, a dev sentence");
    }
    free(avg);
    free(slp);
    free(tlp);
    free(de);
    free(src);
    free(ys);
}

void tr_section_attention(const Opts *o, Run *r, const TrTask *t) {
    show_section(o->generated ? "6. What the heads learned: the verb moves to the end (Figures 3-5)"
                              : "6. What the heads learned: one dev sentence (Figures 3-5)");
    char en[CORPUS_MAX_LINE + 1], de[CORPUS_MAX_LINE + 1];
    tr_demo_sentence(t, o->generated, en, sizeof en, de, sizeof de);
    if (!o->generated) printf("the first dev sentence of 6 to 12 English words (none: the first dev sentence)\n");
    int seen = 0;
    for (int i = 0; i < t->train.n && !seen; i++) seen = !strcmp(t->train.src[i], en);
    printf("this sentence is %s the training set\n", seen ? "in" : "not in");
    tr_print_wrapped("reference: ", de);
    int Ts = bpe_encode(&t->bpe, en, NULL, 0) + 1;
    if (Ts + OUT_OFFSET > r->m.cfg.max_len) {   /* build_model sized max_len for it: a resumed model's may not be */
        printf("(%d tokens: with %d more for the output it does not fit the model's max_len %d; skipped)\n", Ts,
               OUT_OFFSET, r->m.cfg.max_len);
        return;
    }
    Model one;
    tr_model_for_one(&one, &r->m, Ts, Ts + OUT_OFFSET);
    tr_show_alignment(&one, &t->bpe, en, o->generated, 1, o->out, "cross_attn");
    model_free(&one);
}


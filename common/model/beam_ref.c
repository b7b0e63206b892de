/* beam_ref.c - beam search for one sentence, plainly (beam_ref.h). */
#include "model/beam_ref.h"
#include "core/fail.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A hypothesis: tokens y_1..y_n (the start symbol is not counted) and
 * s(y), the sum of their log-probs. */
typedef struct {
    int *tok, n;
    float sum;
} Hyp;

/* A candidate: hypothesis number `beam` extended by token w, sum s + log p(w). */
typedef struct {
    float sum;
    int beam, w;
} Cand;

/* best first; a tie goes to the lower beam, then the lower token id */
static int cand_cmp(const void *pa, const void *pb) {
    const Cand *a = pa, *b = pb;
    if (a->sum != b->sum) return a->sum > b->sum ? -1 : 1;
    return a->beam != b->beam ? a->beam - b->beam : a->w - b->w;
}

static void extend(Hyp *dst, const Hyp *h, int w, float sum) {
    memcpy(dst->tok, h->tok, (size_t)h->n * sizeof(int));
    dst->tok[h->n] = w, dst->n = h->n + 1, dst->sum = sum;
}

static void answer(BeamRefResult *res, int *out, const Hyp *h, float score) {
    memcpy(out, h->tok, (size_t)h->n * sizeof(int));
    res->len = h->n, res->sum = h->sum, res->score = score;
}

int beam_ref(Model *m, const DecodeOpts *o, const int *src, int Ts, int *out, int out_cap,
             BeamRefResult *res, char *err, size_t errlen) {
    const Config *c = &m->cfg;
    int rc = decode_check_opts(c, o, err, errlen);
    if (!rc) rc = model_check_tokens(c, src, Ts, "source", err, errlen);
    if (rc) return rc;
    int K = o->beam, V = c->vocab, L = decode_max_len(c, o, src, Ts), t2t = o->rule == BEAM_RULE_T2T;
    if (L > out_cap) return fail(err, errlen, "the answer may have %d tokens; out has room for %d", L, out_cap);
    if ((rc = model_check_sizes(m, 1, Ts, L, err, errlen))) return rc;
    Hyp *hyps = calloc(2 * (size_t)K + 1, sizeof *hyps), *live = hyps, *next = hyps + K, *done = hyps + 2 * K;
    int *toks = malloc((2 * (size_t)K + 2) * L * sizeof *toks), *prefix = toks + (2 * (size_t)K + 1) * L;
    Cand *cand = malloc((size_t)K * V * sizeof *cand);
    float *fin = malloc((size_t)K * sizeof *fin), *lp = malloc((size_t)V * sizeof *lp);
    if (!hyps || !toks || !cand || !fin || !lp) {
        free(hyps), free(toks), free(cand), free(fin), free(lp);
        return fail(err, errlen, "out of memory for a beam of %d over %d words", K, V);
    }
    for (int k = 0; k <= 2 * K; k++) hyps[k].tok = toks + (size_t)k * L;

    double lpL = length_penalty(L, o->alpha);
    res->len = 0, res->sum = res->score = -INFINITY, res->steps = 0, res->margin = INFINITY;
    model_encode(m, src, 1, Ts, 0);          /* once: the source does not change */
    int n_live = 1, n_fin = 0;               /* fin: the finished set's scores, best first */
    live[0].n = 0, live[0].sum = 0.0f;
    for (int t = 0; t < L; t++) {
        /* every live hypothesis y, extended by every token w but padding: s(y) + log p(w | y) */
        int nc = 0;
        for (int k = 0; k < n_live; k++) {
            prefix[0] = o->start_id;
            memcpy(prefix + 1, live[k].tok, (size_t)live[k].n * sizeof(int));
            const float *logp = model_decode(m, prefix, live[k].n + 1, 0);            /* (n+1, V) */
            model_read(m, lp, logp + (size_t)live[k].n * V, (size_t)V * sizeof(float)); /* the last row */
            for (int w = 0; w < V; w++)
                if (w != c->pad_id && lp[w] > -INFINITY) cand[nc++] = (Cand){live[k].sum + lp[w], k, w};
        }
        qsort(cand, (size_t)nc, sizeof *cand, cand_cmp);
        for (int j = 0; j + 1 < nc && j <= 2 * K; j++) res->margin = fmin(res->margin, cand[j].sum - cand[j + 1].sum);
        /* Down the ranking: an end symbol finishes, the first K others live on.
         * t2t looks at the 2K best and finishes every end symbol among them;
         * the textbook rule stops at the K-th live one. */
        int n_next = 0, top = t2t && nc > 2 * K ? 2 * K : nc;
        for (int j = 0; j < top && (t2t || n_next < K); j++) {
            const Cand *cd = &cand[j];
            if (cd->w != o->end_id) {
                if (n_next < K) extend(&next[n_next++], &live[cd->beam], cd->w, cd->sum);
                continue;
            }
            extend(done, &live[cd->beam], cd->w, cd->sum);
            float score = (float)(done->sum / length_penalty(done->n, o->alpha));
            if (n_fin > 0) res->margin = fmin(res->margin, fabs(score - res->score));
            if (score > res->score) answer(res, out, done, score);
            if (n_fin < K) fin[n_fin++] = -INFINITY;      /* the set keeps the K best, */
            int i = n_fin - 1;                            /* after equal ones found earlier */
            if (score > fin[i]) {
                for (; i > 0 && score > fin[i - 1]; i--) fin[i] = fin[i - 1];
                fin[i] = score;
            }
        }
        Hyp *h = live;
        live = next, next = h, n_live = n_next, res->steps = t + 1;
        if (t + 1 == L) {
            /* out of room: t2t answers with the best live beam only when nothing
             * finished; the textbook rule finishes every live one as it is */
            for (int k = 0; k < n_live; k++) {
                float score = (float)(live[k].sum / lpL);
                if (!t2t && n_fin + k > 0) res->margin = fmin(res->margin, fabs(score - res->score));
                if (t2t ? n_fin == 0 && k == 0 : score > res->score) answer(res, out, &live[k], score);
            }
            break;
        }
        if (n_live == 0) break;
        /* Early stop: no descendant of a live beam can score more than the
         * best one's s / lp(L). t2t stops when the worst of the finished set
         * beats that, the textbook rule when the best one reaches it. */
        double bound = live[0].sum / lpL;
        if (n_fin > 0) {
            float edge = t2t ? fin[n_fin - 1] : res->score;
            res->margin = fmin(res->margin, fabs(edge - bound));
            if (t2t ? edge > bound : edge >= bound) break;
        }
    }
    free(hyps), free(toks), free(cand), free(fin), free(lp);
    return 0;
}

/* translate.c - the English-German translation task as library calls
 * (translate.h). */
#include "task/translate.h"
#include "core/fail.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int encode_split(Encoded *e, const Corpus *c, const Bpe *b, char *err, size_t errlen) {
    memset(e, 0, sizeof *e);
    e->s = calloc((size_t)c->n + 1, sizeof(int *));
    e->t = calloc((size_t)c->n + 1, sizeof(int *));
    e->slen = calloc((size_t)c->n + 1, sizeof(int));
    e->tlen = calloc((size_t)c->n + 1, sizeof(int));
    if (!e->s || !e->t || !e->slen || !e->tlen) goto oom;
    for (int i = 0; i < c->n; i++) {
        int ns = bpe_encode(b, c->src[i], NULL, 0), nt = bpe_encode(b, c->tgt[i], NULL, 0);
        e->s[i] = calloc((size_t)ns + 1, sizeof(int));
        e->t[i] = calloc((size_t)nt + 1, sizeof(int));
        e->n = i + 1;   /* what encoded_free must release */
        if (!e->s[i] || !e->t[i]) goto oom;
        bpe_encode(b, c->src[i], e->s[i], ns);
        bpe_encode(b, c->tgt[i], e->t[i], nt);
        e->s[i][ns] = BPE_EOS;
        e->slen[i] = ns + 1;
        e->tlen[i] = nt + 1;     /* tgt_in = <s> t, tgt_out = t </s> */
        if (e->slen[i] > e->max_s) e->max_s = e->slen[i];
        if (e->tlen[i] > e->max_t) e->max_t = e->tlen[i];
    }
    e->n = c->n;
    return 0;
oom:
    encoded_free(e);
    fail(err, errlen, "out of memory encoding %d sentence pairs", c->n);
    return 1;
}

void encoded_free(Encoded *e) {
    for (int i = 0; i < e->n; i++) {
        free(e->s[i]);
        free(e->t[i]);
    }
    free(e->s);
    free(e->t);
    free(e->slen);
    free(e->tlen);
    memset(e, 0, sizeof *e);
}

void fill_batch(const Encoded *e, const Batch *b, int *src, int *tin, int *tout) {
    for (int r = 0; r < b->n; r++) {
        int p = b->idx[r];
        for (int j = 0; j < b->Ts; j++) src[r * b->Ts + j] = j < e->slen[p] ? e->s[p][j] : BPE_PAD;
        for (int j = 0; j < b->Tt; j++) {
            int n = e->tlen[p] - 1;   /* BPE tokens of the target */
            tin[r * b->Tt + j] = j == 0 ? BPE_BOS : j <= n ? e->t[p][j - 1] : BPE_PAD;
            tout[r * b->Tt + j] = j < n ? e->t[p][j] : j == n ? BPE_EOS : BPE_PAD;
        }
    }
}

const Batch *batch_for_step(const Batches *bs, uint64_t step, uint64_t seed, int *perm) {
    uint64_t epoch = step / (uint64_t)bs->n;
    int pos = (int)(step % (uint64_t)bs->n);
    Rng r;
    rng_seed(&r, seed ^ (0xE90C0000ull + epoch * 0x9E3779B97F4A7C15ull));
    for (int i = 0; i < bs->n; i++) perm[i] = i;
    for (int i = bs->n - 1; i > 0; i--) {
        int j = rng_int(&r, i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return &bs->b[perm[pos]];
}

/* ---- the task ---------------------------------------------------------------- */

int trtask_build(TrTask *t, int n_train, int n_dev, int vocab, int tokens, int max_rows, uint64_t seed,
                 char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    Corpus train, dev, test;
    int rc = corpus_generate(&train, &dev, &test, n_train, n_dev, 1, seed, err, errlen);
    if (!rc) rc = trtask_build_from(t, &train, &dev, vocab, tokens, max_rows, seed, err, errlen);
    corpus_free(&train);
    corpus_free(&dev);
    corpus_free(&test);
    return rc;
}

int trtask_max_len(int longest_src, int longest_tgt, int out_mul, int out_add) {
    int decode = out_mul * longest_src + out_add + 1;   /* <s> + the longest output */
    return decode > longest_tgt ? decode : longest_tgt;
}

int trtask_build_from(TrTask *t, const Corpus *train, const Corpus *dev, int vocab, int tokens, int max_rows,
                      uint64_t seed, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    corpus_copy(&t->train, train);
    corpus_copy(&t->dev, dev);
    int rc = trtask_learn_bpe(t, vocab, err, errlen);
    if (!rc) rc = trtask_encode(t, err, errlen);
    if (!rc) rc = trtask_batch(t, tokens, max_rows, seed, err, errlen);
    return rc;
}

int trtask_learn_bpe(TrTask *t, int vocab, char *err, size_t errlen) {
    int rc = bpe_learn(&t->bpe, t->train.src, t->train.n, t->train.tgt, t->train.n, vocab, err, errlen);
    if (!rc) bpe_set_words(&t->bpe, t->train.src, t->train.n);
    return rc;
}

int trtask_encode(TrTask *t, char *err, size_t errlen) {
    int rc = encode_split(&t->etrain, &t->train, &t->bpe, err, errlen);
    if (!rc) rc = encode_split(&t->edev, &t->dev, &t->bpe, err, errlen);
    if (!rc) rc = encode_split(&t->etest, &t->test, &t->bpe, err, errlen);
    return rc;
}

int trtask_batch(TrTask *t, int tokens, int max_rows, uint64_t seed, char *err, size_t errlen) {
    int rc;
    if ((rc = batches_make(&t->train_b, t->etrain.slen, t->etrain.tlen, t->etrain.n, tokens, max_rows, 1, seed,
                           err, (int)errlen)))
        return rc;
    if ((rc = batches_make(&t->dev_b, t->edev.slen, t->edev.tlen, t->edev.n, tokens, t->train_b.max_B, 1, 1, err,
                           (int)errlen)))
        return rc;
    if (t->etest.n && (rc = batches_make(&t->test_b, t->etest.slen, t->etest.tlen, t->etest.n, tokens,
                                         t->train_b.max_B, 1, 1, err, (int)errlen)))
        return rc;
    /* the longest source of train and dev, counting a target + 1 as one (the
     * trainer's shape: T source and T - 1 target tokens, train.h) */
    int T = t->train_b.max_Ts > t->train_b.max_Tt + 1 ? t->train_b.max_Ts : t->train_b.max_Tt + 1;
    if (t->edev.max_s > T) T = t->edev.max_s;
    t->max_len = trtask_max_len(T, t->train_b.max_Tt, 2, 7);
    int B = t->train_b.max_B > t->dev_b.max_B ? t->train_b.max_B : t->dev_b.max_B;
    int Tmax = t->max_len > t->test_b.max_Ts ? t->max_len : t->test_b.max_Ts;
    size_t cells = (size_t)B * (size_t)Tmax;
    t->src = calloc(cells, sizeof(int));
    t->tin = calloc(cells, sizeof(int));
    t->tout = calloc(cells, sizeof(int));
    t->perm = calloc((size_t)t->train_b.n, sizeof(int));
    if (!t->src || !t->tin || !t->tout || !t->perm) {
        fail(err, errlen, "out of memory for batches of %d x %d tokens", B, Tmax);
        return 1;
    }
    return 0;
}

void trtask_free(TrTask *t) {
    corpus_free(&t->train);
    corpus_free(&t->dev);
    corpus_free(&t->test);
    bpe_free(&t->bpe);
    encoded_free(&t->etrain);
    encoded_free(&t->edev);
    encoded_free(&t->etest);
    batches_free(&t->train_b);
    batches_free(&t->dev_b);
    batches_free(&t->test_b);
    free(t->src);
    free(t->tin);
    free(t->tout);
    free(t->perm);
    memset(t, 0, sizeof *t);
}

TrainStatus trtask_train(Trainer *tr, TrTask *t, uint64_t to, uint64_t seed, long *tokens, StepStats *st,
                         TrStepFn each, void *ctx) {
    while (tr->step < to) {
        const Batch *b = batch_for_step(&t->train_b, tr->step, seed, t->perm);
        fill_batch(&t->etrain, b, t->src, t->tin, t->tout);
        /* one process: the whole batch; data parallel (dist.h): this rank's slice */
        TrainStatus s = train_step_global(tr, t->src, t->tin, t->tout, b->n, b->Ts, b->Tt, st);
        if (s != TRAIN_OK) return s;
        *tokens += st->n_tokens;
        if (each) each(ctx, st);
    }
    return TRAIN_OK;
}

double perplexity_of(Model *m, const Encoded *e, const Batches *bs, int *src, int *tin, int *tout) {
    double nll = 0;
    long n = 0;
    int V = m->cfg.vocab;
    for (int k = 0; k < bs->n; k++) {
        const Batch *b = &bs->b[k];
        fill_batch(e, b, src, tin, tout);
        const float *logp = model_forward(m, src, tin, b->n, b->Ts, b->Tt, 0);
        for (int i = 0; i < b->n * b->Tt; i++)
            if (tout[i] != BPE_PAD) nll -= logp[(size_t)i * V + tout[i]], n++;
    }
    return exp(nll / (n ? n : 1));
}

double trtask_perplexity(Model *m, TrTask *t) {
    return perplexity_of(m, &t->edev, &t->dev_b, t->src, t->tin, t->tout);
}

int trtask_bleu_greedy(Model *m, TrTask *t, Bleu *out) {
    /* decode_greedy batch by batch, every sentence of a batch to at most
     * 2 Ts + 7 tokens (Ts its longest source: room for a German sentence a
     * little longer than the English), within the model's target length */
    int T_cap = m->max_Tt;
    char err[256], buf[4096];
    Decoder d;
    if (decoder_new(&d, m, t->dev_b.max_B, 1, t->dev_b.max_Ts, T_cap, err, sizeof err)) return 1;
    DecodeOpts o = decode_opts_paper(BPE_BOS, BPE_EOS);
    BleuStats st;
    memset(&st, 0, sizeof st);
    int rc = 0;
    for (int k = 0; k < t->dev_b.n && !rc; k++) {
        const Batch *b = &t->dev_b.b[k];
        fill_batch(&t->edev, b, t->src, t->tin, t->tout);
        o.max_out = 2 * b->Ts + 7 < T_cap ? 2 * b->Ts + 7 : T_cap;
        rc = decode_greedy(&d, &o, t->src, b->n, b->Ts, err, sizeof err);
        for (int r = 0; r < b->n && !rc; r++) {
            bpe_decode(&t->bpe, d.out + (size_t)r * d.max_T, d.out_len[r], buf, sizeof buf);
            bleu_add_tok(&st, buf, t->dev.tgt[b->idx[r]], BLEU_TOK_13A);   /* sacreBLEU's standard */
        }
    }
    decoder_free(&d);
    if (!rc) *out = bleu_compute(&st);
    return rc ? 1 : 0;
}

/* ---- translating a split ------------------------------------------------------ */

int translate_split(Model *m, const Bpe *bpe, const Encoded *e, const Batches *bs, const DecodeOpts *o,
                    int greedy, char **hyp, char *err, size_t errlen) {
    /* room for the longest output any sentence may write: the longest
     * source + offset (set_max_lengths in decode.c gives each its own) */
    int max_out = bs->max_Ts + o->offset;
    if (max_out > m->cfg.max_len) max_out = m->cfg.max_len;
    if (max_out < 1) max_out = 1;
    Decoder dec;
    int rc = decoder_new(&dec, m, bs->max_B, greedy ? 1 : o->beam, bs->max_Ts, max_out, err, errlen);
    if (rc) return rc;
    int *src = calloc((size_t)bs->max_B * bs->max_Ts, sizeof(int));     /* (B,Ts) */
    int *tin = calloc((size_t)bs->max_B * bs->max_Tt, sizeof(int));     /* (B,Tt), unused */
    int *tout = calloc((size_t)bs->max_B * bs->max_Tt, sizeof(int));
    if (!src || !tin || !tout) {
        rc = fail(err, errlen, "out of memory for batches of %d x %d tokens", bs->max_B, bs->max_Ts);
        goto done;
    }
    for (int k = 0; k < bs->n && !rc; k++) {
        const Batch *b = &bs->b[k];
        fill_batch(e, b, src, tin, tout);
        rc = greedy ? decode_greedy(&dec, o, src, b->n, b->Ts, err, errlen)
                    : decode_beam(&dec, o, src, b->n, b->Ts, err, errlen);
        for (int r = 0; r < b->n && !rc; r++) {
            const int *ids = dec.out + (size_t)r * dec.max_T;   /* (out_len[r]) tokens, </s> last if it ended */
            size_t need = bpe_decode(bpe, ids, dec.out_len[r], NULL, 0) + 1;
            char *text = malloc(need);
            if (!text) {
                rc = fail(err, errlen, "out of memory for a translation of %zu bytes", need);
                break;
            }
            bpe_decode(bpe, ids, dec.out_len[r], text, need);
            free(hyp[b->idx[r]]);
            hyp[b->idx[r]] = text;
        }
    }
done:
    decoder_free(&dec);
    free(src);
    free(tin);
    free(tout);
    return rc;
}

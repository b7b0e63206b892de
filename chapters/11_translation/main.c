/* 11_translation - English to German end to end: Sections 5.1, 6.1, Table 2.
 *
 * The paper's task, in miniature and offline: a parallel corpus generated
 * from a small grammar (common/corpus.h: gender, case, adjective endings,
 * plurals, verb second, verb-final subordinate clauses, the perfect),
 * byte-pair encoding learned on the training side with one vocabulary for
 * both languages (Sec. 5.1, common/bpe.h), batches by length under a token
 * budget (Sec. 5.1, common/batch.h), the Transformer of chapters 07-08
 * (post-LN, tied embeddings, Adam with the Sec. 5.3 schedule, label
 * smoothing, dropout), corpus BLEU-4 (Sec. 6.1, common/bleu.h) of greedy decoding
 * and of the paper's beam search (beam 4, alpha 0.6; chapter 09's decoder), the average
 * of the last 5 checkpoints (Sec. 6.1), dev perplexity per subword (Table 3)
 * and the cross-attention alignment of a sentence whose verb moves to the
 * end (Figures 3-5).
 *
 *   build/11_translation                          generate, BPE, train, evaluate
 *   build/11_translation --corpus pairs.tsv       the same on your own data
 *   build/11_translation --translate "the man sees the big dog"
 *   build/11_translation --resume out/11_translation/model.ckpt --steps 3000
 *   build/11_translation --threads 2              a second thread (the default is 1)
 *   mpirun -np 2 build/11_translation             data parallel (chapter 13): the same flags,
 *                                                 the same training loop; rank 0 prints and saves
 *
 * Files in --out: model.ckpt (+ model.ckpt.bpe, the vocabulary), the
 * checkpoints ckpt_STEP.ckpt of the last 5 saves, model_avg.ckpt, the
 * heatmaps as PNG, test hypotheses as text.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#include "batch.h"
#include "bleu.h"
#include "bpe.h"
#include "cli.h"
#include "corpus.h"
#include "decode.h"
#include "dist.h"
#include "fail.h"
#include "model.h"
#include "show.h"
#include "tensor.h"
#include "train.h"
#include "translate.h"
#include "parallel.h"

static const char *PROG = "11_translation";
#define N_AVG_MAX 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}


/* Prints "label text", wrapped at spaces so no line passes 100 columns
 * (continuation lines indented under the text). */
static void print_wrapped(const char *label, const char *text) {
    int indent = 0;
    for (const char *q = label; *q; q++) indent += ((unsigned char)*q & 0xC0) != 0x80;
    int col = indent;
    printf("%s", label);
    const char *p = text;
    while (*p) {
        const char *w = p;
        while (*p && *p != ' ') p++;
        int cols = 0;
        for (const char *q = w; q < p; q++) cols += ((unsigned char)*q & 0xC0) != 0x80;
        if (col > indent && col + 1 + cols > 100) printf("\n%*s", col = indent, "");
        else if (col > indent) putchar(' '), col++;
        for (const char *q = w; q < p; q++) {   /* a word wider than a line is cut */
            if (((unsigned char)*q & 0xC0) != 0x80 && col == 100) printf("\n%*s", col = indent, "");
            putchar(*q);
            col += ((unsigned char)*q & 0xC0) != 0x80;
        }
        while (*p == ' ') p++;
    }
    putchar('\n');
}

/* ---- the run's settings ------------------------------------------------------ */
typedef struct {
    int n_train, n_dev, n_test, vocab, tokens, max_rows;
    int layers, d_model, d_ff, heads, steps, warmup, ckpt_every, n_avg, threads, micro;
    float factor, eps_ls, dropout;
    uint64_t seed;
    const char *corpus, *resume, *translate, *model, *out;
} Opts;

typedef struct {
    Corpus train, dev, test;
    Bpe bpe;
    Encoded etrain, edev, etest;
} Data;

/* ---- section 1: the corpus ------------------------------------------------------- */
static void count_words(const Corpus *c, int side, long *tokens, int *types) {
    Bpe tmp = {0};
    bpe_set_words(&tmp, side ? c->tgt : c->src, c->n);
    *types = tmp.n_words;
    *tokens = 0;
    for (int i = 0; i < c->n; i++) {
        const char *s = side ? c->tgt[i] : c->src[i];
        for (const char *p = s; *p; p++) *tokens += *p == ' ';
        *tokens += 1;
    }
    bpe_free(&tmp);
}

static void section_corpus(const Opts *o, Data *d) {
    char err[512];
    show_section("1. A parallel corpus (stand-in for WMT 2014 English-German, Sec. 5.1)");
    if (o->corpus) {
        Corpus all;
        int rc = corpus_load_tsv(&all, o->corpus, err, sizeof err);
        if (rc) {
            fprintf(stderr, "%s: error: --corpus %s\n", PROG, err);
            exit(rc);
        }
        rc = corpus_split(&all, &d->train, &d->dev, &d->test, o->n_dev, o->n_test, o->seed, err, sizeof err);
        printf("read %d pairs from %s\n", all.n, o->corpus);
        corpus_free(&all);
        if (rc) cli_fail(PROG, "--corpus %s: %s", o->corpus, err);
    } else if (corpus_generate(&d->train, &d->dev, &d->test, o->n_train, o->n_dev, o->n_test, o->seed, err,
                               sizeof err)) {
        cli_fail(PROG, "%s", err);
    } else {
        printf("generated from a grammar (common/corpus.c), seed %llu; every sentence distinct,\n"
               "so train, dev and test share none\n", (unsigned long long)o->seed);
    }
    long te, tg;
    int ve, vg;
    count_words(&d->train, 0, &te, &ve);
    count_words(&d->train, 1, &tg, &vg);
    printf("pairs: train %d, dev %d, test %d\n", d->train.n, d->dev.n, d->test.n);
    printf("train words: English %ld (%d distinct), German %ld (%d distinct)\n", te, ve, tg, vg);
    for (int i = 0; i < 4 && i < d->train.n; i++) {
        print_wrapped("  en: ", d->train.src[i]);
        print_wrapped("  de: ", d->train.tgt[i]);
    }
}

/* ---- section 2: byte-pair encoding ------------------------------------------------- */
static void print_segmentation(const Bpe *b, const char *label, const char *s) {
    int ids[256], n = bpe_encode(b, s, ids, 256);
    char line[1024] = "", sym[128];
    size_t len = 0;
    for (int i = 0; i < n && i < 256; i++) {
        bpe_symbol_str(b, ids[i], sym, sizeof sym);
        len += (size_t)snprintf(line + len, len < sizeof line ? sizeof line - len : 0, "%s%s", i ? " " : "", sym);
        if (len >= sizeof line) break;
    }
    int w = 0;   /* pad to 10 columns by characters, not bytes (großen) */
    for (const char *q = label; *q; q++) w += ((unsigned char)*q & 0xC0) != 0x80;
    char head[256], text[1200];
    snprintf(head, sizeof head, "  %s%*s -> ", label, w < 10 ? 10 - w : 0, "");
    snprintf(text, sizeof text, "%s  (%d token%s)", line, n, n == 1 ? "" : "s");
    print_wrapped(head, text);
}

static void section_bpe(const Opts *o, Data *d) {
    char err[512];
    show_section("2. Byte-pair encoding, one vocabulary for both languages (Sec. 5.1)");
    if (bpe_learn(&d->bpe, d->train.src, d->train.n, d->train.tgt, d->train.n, o->vocab, err, sizeof err))
        cli_fail(PROG, "--vocab: %s", err);
    bpe_set_words(&d->bpe, d->train.src, d->train.n);
    printf("learned on the %d training pairs (both sides):\n%d symbols = 4 special + %d characters "
           "+ %d merges%s\n", d->train.n, d->bpe.vocab, d->bpe.n_chars, d->bpe.n_merges,
           d->bpe.vocab < o->vocab ? " (no pair occurs twice any more: stopped early)" : "");
    printf("first merges (most frequent pair first):");
    for (int i = 0; i < 8 && i < d->bpe.n_merges; i++) {
        const BpeSymbol *s = &d->bpe.sym[BPE_N_SPECIAL + d->bpe.n_chars + i];
        char l[64], r[64];
        bpe_symbol_str(&d->bpe, s->left, l, sizeof l);
        bpe_symbol_str(&d->bpe, s->right, r, sizeof r);
        printf("%s %s+%s", i % 4 == 0 ? "\n " : "", l, r);
    }
    printf("\nhow words segment (</w> marks the end of a word):\n");
    static const char *const words[] = {"the", "großen", "Bäumen", "Mädchen", "gesehen", "children", "weil"};
    for (int i = 0; i < (int)(sizeof words / sizeof words[0]); i++) print_segmentation(&d->bpe, words[i], words[i]);
    if (encode_split(&d->etrain, &d->train, &d->bpe, err, sizeof err) ||
        encode_split(&d->edev, &d->dev, &d->bpe, err, sizeof err) ||
        encode_split(&d->etest, &d->test, &d->bpe, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        exit(1);
    }
    long ns = 0, nt = 0;
    for (int i = 0; i < d->etrain.n; i++) ns += d->etrain.slen[i] - 1, nt += d->etrain.tlen[i] - 1;
    printf("train subwords per sentence: English %.2f, German %.2f; longest (with </s>): %d, %d\n",
           (double)ns / d->etrain.n, (double)nt / d->etrain.n, d->etrain.max_s, d->etrain.max_t);
}

/* ---- section 3: batches by length under a token budget ------------------------------ */
static void section_batches(const Opts *o, const Data *d, Batches *bs) {
    char err[256];
    show_section("3. Batches by approximate length, a token budget per batch (Sec. 5.1)");
    Batches flat;
    if (batches_make(&flat, d->etrain.slen, d->etrain.tlen, d->etrain.n, o->tokens, o->max_rows, 0, o->seed, err,
                     sizeof err) ||
        batches_make(bs, d->etrain.slen, d->etrain.tlen, d->etrain.n, o->tokens, o->max_rows, 1, o->seed, err,
                     sizeof err))
        cli_fail(PROG, "%s", err);
    printf("paper: ~25000 source + 25000 target tokens a batch; here --tokens %d a side\n"
           "(padding counted), at most %d rows a batch\n", o->tokens, o->max_rows);
    printf("  %-22s %8s %10s %10s %9s\n", "", "batches", "rows/batch", "real tok", "padding");
    printf("  %-22s %8d %10.1f %10ld %8.1f%%\n", "random order", flat.n, (double)d->etrain.n / flat.n, flat.real,
           100 * batches_padding(&flat));
    printf("  %-22s %8d %10.1f %10ld %8.1f%%\n", "sorted by length", bs->n, (double)d->etrain.n / bs->n, bs->real,
           100 * batches_padding(bs));
    double ratio = (double)flat.n / bs->n;
    printf("bucketing by length cuts the padding from %.1f%% to %.1f%%: an epoch takes %.2fx %s steps\n",
           100 * batches_padding(&flat), 100 * batches_padding(bs), ratio > 1 ? ratio : 1 / ratio,
           ratio >= 1 ? "fewer" : "more");
    printf("largest batch: src [batch=%d, seq=%d], tgt [batch=%d, seq=%d] (not all at once)\n", bs->max_B,
           bs->max_Ts, bs->max_B, bs->max_Tt);
    batches_free(&flat);
}

/* ---- evaluation helpers -------------------------------------------------------------- */

/* Dev perplexity per subword (translate.h's perplexity_of, Table 3's PPL) */
static double perplexity(Model *m, const Encoded *e, const Batches *bs) {
    int *src = xcalloc((size_t)bs->max_B * bs->max_Ts, sizeof(int));
    int *tin = xcalloc((size_t)bs->max_B * bs->max_Tt, sizeof(int));
    int *tout = xcalloc((size_t)bs->max_B * bs->max_Tt, sizeof(int));
    double ppl = perplexity_of(m, e, bs, src, tin, tout);
    free(src);
    free(tin);
    free(tout);
    return ppl;
}

/* Translations of every pair of e (in the order of e) into hyp[i] (owned
 * strings), decoded in batches of length-sorted pairs: greedy (train.c's
 * greedy_decode) when beam is NULL, else beam search with those options
 * (chapter 09's decoder, common/decode.h, with its KV cache). Both give
 * token ids that bpe_decode turns back into text the same way. */
static void translate_all(Model *m, const Bpe *bpe, const Encoded *e, const Batches *bs, char **hyp,
                          const DecodeOpts *beam) {
    int T_cap = m->max_Tt + 1;
    int *src = xcalloc((size_t)bs->max_B * bs->max_Ts, sizeof(int));
    int *tin = xcalloc((size_t)bs->max_B * bs->max_Tt, sizeof(int));
    int *tout = xcalloc((size_t)bs->max_B * bs->max_Tt, sizeof(int));
    int *ys = xcalloc((size_t)bs->max_B * T_cap, sizeof(int));
    int *prefix = xcalloc((size_t)bs->max_B * T_cap, sizeof(int));
    char buf[4096], err[512];
    Decoder dec = {0};
    /* Sec. 6.1: at most input length + offset output tokens (within the PE table) */
    int beam_T = beam ? bs->max_Ts + beam->offset : 0;
    if (beam_T > m->cfg.max_len) beam_T = m->cfg.max_len;
    if (beam && decoder_new(&dec, m, bs->max_B, beam->beam, bs->max_Ts, beam_T, err, sizeof err))
        cli_fail(PROG, "beam search: %s", err);
    for (int k = 0; k < bs->n; k++) {
        const Batch *b = &bs->b[k];
        fill_batch(e, b, src, tin, tout);
        if (beam) {
            if (decode_beam(&dec, beam, src, b->n, b->Ts, err, sizeof err)) cli_fail(PROG, "beam search: %s", err);
            for (int r = 0; r < b->n; r++) {
                bpe_decode(bpe, dec.out + (size_t)r * dec.max_T, dec.out_len[r], buf, sizeof buf);
                free(hyp[b->idx[r]]);
                hyp[b->idx[r]] = strdup(buf);
            }
            continue;
        }
        /* room for a German sentence a little longer than the English */
        int T_out = 2 * b->Ts + 8 < T_cap ? 2 * b->Ts + 8 : T_cap;
        greedy_decode(m, ys, prefix, src, b->n, b->Ts, T_out, BPE_BOS, BPE_EOS, BPE_PAD);
        for (int r = 0; r < b->n; r++) {
            bpe_decode(bpe, ys + (size_t)r * T_out + 1, T_out - 1, buf, sizeof buf);
            free(hyp[b->idx[r]]);
            hyp[b->idx[r]] = strdup(buf);
        }
    }
    decoder_free(&dec);
    free(src);
    free(tin);
    free(tout);
    free(ys);
    free(prefix);
}

static Bleu corpus_bleu(char **hyp, char *const *ref, int n, BleuStats *st) {
    memset(st, 0, sizeof *st);
    for (int i = 0; i < n; i++) bleu_add(st, hyp[i] ? hyp[i] : "", ref[i]);
    return bleu_compute(st);
}

/* ---- section 4: training ---------------------------------------------------------------- */
typedef struct {
    Model m;
    Trainer tr;
    DistTrainer dt;               /* data parallel under mpirun (dist.h); one rank: inert */
    Batches dev_b, test_b;
    char ckpt[N_AVG_MAX][1024];   /* the last saved checkpoints, oldest first */
    int n_ckpt;
    double train_s;
    long tokens;
} Run;

/* model.ckpt and model.ckpt.bpe, written together (each atomically), by
 * rank 0 alone; every rank stops if it could not */
static void save_with_bpe(Run *r, const Data *d, const char *path) {
    char err[512] = "", bp[1100];
    snprintf(bp, sizeof bp, "%s.bpe", path);
    int bad = dist_rank() == 0 && (trainer_save(&r->tr, path, err, sizeof err) || bpe_save(&d->bpe, bp, err, sizeof err));
    if (dist_max_int(bad)) dist_exit(1, "%s", bad ? err : "rank 0 could not save a checkpoint");
}

static void remember_ckpt(Run *r, const char *path, int keep) {
    if (r->n_ckpt > 0 && !strcmp(r->ckpt[r->n_ckpt - 1], path)) return;   /* saved again (resume at the end) */
    if (r->n_ckpt == keep) {   /* drop the oldest file and its vocabulary (rank 0's files) */
        char bp[1100];
        snprintf(bp, sizeof bp, "%s.bpe", r->ckpt[0]);
        if (dist_rank() == 0) remove(r->ckpt[0]), remove(bp);
        memmove(r->ckpt[0], r->ckpt[1], sizeof r->ckpt[0] * (size_t)(keep - 1));
        r->n_ckpt--;
    }
    snprintf(r->ckpt[r->n_ckpt++], sizeof r->ckpt[0], "%s", path);
}

static void build_model(const Opts *o, const Data *d, const Batches *bs, Run *r) {
    char err[512];
    int T = bs->max_Ts > bs->max_Tt + 1 ? bs->max_Ts : bs->max_Tt + 1;
    int eval_T = d->edev.max_s > d->etest.max_s ? d->edev.max_s : d->etest.max_s;
    /* decoding may run past the longest target: leave room */
    int max_len = T > eval_T ? T : eval_T;
    max_len = max_len * 2 + 8;
    TrainHyper hp = train_hyper_paper();
    hp.eps_ls = o->eps_ls;
    hp.warmup = o->warmup;
    hp.factor = o->factor;
    if (o->resume) {
        if (trainer_resume(&r->tr, &r->m, o->resume, &hp, bs->max_B, max_len, bs->max_B, err, sizeof err))
            cli_fail(PROG, "--resume: %s", err);
        /* the vocabulary saved beside the checkpoint must be this run's, symbol for symbol */
        char bp[1100];
        Bpe saved;
        snprintf(bp, sizeof bp, "%s.bpe", o->resume);
        if (bpe_load(&saved, bp, err, sizeof err)) cli_fail(PROG, "--resume: %s", err);
        int same = saved.vocab == d->bpe.vocab && saved.n_chars == d->bpe.n_chars && r->m.cfg.vocab == saved.vocab;
        for (int i = 0; same && i < saved.vocab; i++)
            same = !strcmp(saved.sym[i].text, d->bpe.sym[i].text) && saved.sym[i].eow == d->bpe.sym[i].eow;
        bpe_free(&saved);
        if (!same)
            cli_fail(PROG, "--resume %s: its vocabulary (%s) is not this run's: the corpus, --seed or --vocab "
                     "differ from the run that saved it", o->resume, bp);
        r->m.cfg.dropout = o->dropout;
        printf("resumed %s at step %llu\n", o->resume, (unsigned long long)r->tr.step);
        /* the checkpoints the earlier run left, for the average */
        char found[N_AVG_MAX][1024];
        int nf = 0;
        for (uint64_t s = o->ckpt_every > 0 ? r->tr.step / o->ckpt_every * o->ckpt_every : 0;
             o->ckpt_every > 0 && s > 0 && nf < o->n_avg; s -= (uint64_t)o->ckpt_every) {
            snprintf(found[nf], sizeof found[nf], "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)s);
            if (access(found[nf], R_OK) == 0) nf++;
        }
        while (nf > 0) remember_ckpt(r, found[--nf], o->n_avg);
    } else {
        Config c = config_base();
        c.N = o->layers;
        c.d_model = o->d_model;
        c.d_ff = o->d_ff;
        c.h = o->heads;
        c.d_k = c.d_v = o->d_model / o->heads;
        c.vocab = d->bpe.vocab;
        c.max_len = max_len;
        c.dropout = o->dropout;
        c.pad_id = BPE_PAD;
        if (model_build(&r->m, &c, bs->max_B, max_len, max_len - 1, o->seed, err, sizeof err) ||
            trainer_init(&r->tr, &r->m, &hp, bs->max_B, max_len, o->seed ^ 0xDA7A5EEDull, err, sizeof err))
            cli_fail(PROG, "%s", err);
    }
    const Config *c = &r->m.cfg;
    printf("model: N=%d d_model=%d d_ff=%d h=%d d_k=%d vocab=%d (shared: source, target, output; "
           "Sec. 3.4)\n       post-LN, P_drop %.2f, %zu parameters\n", c->N, c->d_model, c->d_ff, c->h, c->d_k,
           c->vocab, (double)c->dropout, model_param_count(c));
    if (trainer_set_micro(&r->tr, o->micro, err, sizeof err)) cli_fail(PROG, "--micro-batches: %s", err);
    /* data parallel (chapter 13): every rank has every batch; each needs a row of the smallest */
    int P = dist_size(), rows = bs->max_B;
    for (int k = 0; k < bs->n; k++) rows = bs->b[k].n < rows ? bs->b[k].n : rows;
    if (rows < P)
        dist_exit(2, "a training batch has only %d sentence pair%s, too few for %d ranks: raise --tokens or run fewer ranks",
                  rows, rows == 1 ? "" : "s", P);
    if (dist_attach(&r->dt, &r->tr, 50, err, sizeof err)) dist_exit(2, "%s", err);
    if (P > 1) {
        int L = train_leaves(o->micro, rows, P);
        printf("data parallel: %d ranks (%s), each on its slice of every batch (chapter 13); %d slices a step,\n", P,
               dist_library(), L);
        if (L == train_leaves(o->micro, rows, 1)) printf("  added as one process adds them: the same bits as one process\n");
        else if (P & (P - 1)) printf("  added in another order than one process: equal to float rounding\n");
        else printf("  added in another order than one process: equal to float rounding (--micro-batches %d: the same bits)\n", P);
    }
    if (batches_make(&r->dev_b, d->edev.slen, d->edev.tlen, d->edev.n, o->tokens, bs->max_B, 1, 1, err, sizeof err) ||
        batches_make(&r->test_b, d->etest.slen, d->etest.tlen, d->etest.n, o->tokens, bs->max_B, 1, 1, err,
                     sizeof err))
        cli_fail(PROG, "%s", err);
}

static void section_train(const Opts *o, const Data *d, const Batches *bs, Run *r) {
    show_section("4. Training: Adam, warmup, label smoothing, dropout (Sec. 5.3, 5.4)");
    build_model(o, d, bs, r);
    int *src = xcalloc((size_t)bs->max_B * bs->max_Ts, sizeof(int));
    int *tin = xcalloc((size_t)bs->max_B * bs->max_Tt, sizeof(int));
    int *tout = xcalloc((size_t)bs->max_B * bs->max_Tt, sizeof(int));
    int *perm = xcalloc((size_t)bs->n, sizeof(int));
    uint64_t first = r->tr.step;
    int todo = (uint64_t)o->steps > first ? o->steps - (int)first : 0;
    int every = todo / 8 > 1 ? todo / 8 : 1;
    printf("%d steps (%llu to %d), %d batches an epoch; warmup %d, factor %g, eps_ls %.2f\n", todo,
           (unsigned long long)first, o->steps, bs->n, o->warmup, (double)o->factor, (double)o->eps_ls);
    double t0 = now_s();
    StepStats st = {0};
    char path[1100];
    for (int i = 0; i < todo; i++) {
        const Batch *b = batch_for_step(bs, r->tr.step, o->seed, perm);
        fill_batch(&d->etrain, b, src, tin, tout);
        /* one process: the whole batch; under mpirun: this rank's slice, gradients summed (dist.h) */
        TrainStatus ts = train_step_global(&r->tr, src, tin, tout, b->n, b->Ts, b->Tt, &st);
        if (ts != TRAIN_OK)   /* the global loss and gradients: every rank meets it at the same step */
            dist_exit(1, "training stopped at step %llu: %s; try a smaller --factor",
                      (unsigned long long)r->tr.step + 1, train_status_str(ts));
        r->tokens += st.n_tokens;
        if (o->ckpt_every > 0 && r->tr.step % (uint64_t)o->ckpt_every == 0 && i != todo - 1) {
            snprintf(path, sizeof path, "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)r->tr.step);
            save_with_bpe(r, d, path);
            remember_ckpt(r, path, o->n_avg);
        }
        if (dist_rank() == 0 && (i == 0 || (i + 1) % every == 0 || i == todo - 1)) {
            double el = now_s() - t0, ppl = perplexity(&r->m, &d->edev, &r->dev_b);
            double eta = el / (i + 1) * (todo - i - 1);
            printf("  step %5llu/%d  loss %.3f  dev ppl %6.3f  lr %.2e  %6.0f tok/s  %5.1fs  ETA %5.1fs\n",
                   (unsigned long long)r->tr.step, o->steps, st.loss, ppl, st.lr, r->tokens / (el > 0 ? el : 1),
                   el, eta);
            fflush(stdout);
        }
    }
    r->train_s = now_s() - t0;
    snprintf(path, sizeof path, "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)r->tr.step);
    save_with_bpe(r, d, path);
    remember_ckpt(r, path, o->n_avg);
    snprintf(path, sizeof path, "%s/model.ckpt", o->out);
    save_with_bpe(r, d, path);
    printf("trained %d steps in %.1f s (%.0f target tokens/s), last loss %.9f\nsaved %s (+ .bpe)\n", todo,
           r->train_s, r->tokens / (r->train_s > 0 ? r->train_s : 1), st.loss, path);
    free(src);
    free(tin);
    free(tout);
    free(perm);
}

/* ---- section 5: evaluation --------------------------------------------------------------- */

/* The element-wise mean of the weights in files[0..n) into *avg (built from
 * the last file, capacity as m's). */
static void average_checkpoints(Model *avg, const Model *like, char (*files)[1024], int n) {
    char err[512];
    if (model_load(avg, files[n - 1], like->max_B, like->max_Ts, like->max_Tt, NULL, NULL, err, sizeof err))
        cli_fail(PROG, "%s", err);
    for (int k = 0; k < n - 1; k++) {
        Model t;
        if (model_load(&t, files[k], 1, 1, 1, NULL, NULL, err, sizeof err)) cli_fail(PROG, "%s", err);
        if (t.params.n != avg->params.n) cli_fail(PROG, "%s: a different model than %s", files[k], files[n - 1]);
        for (size_t i = 0; i < t.params.n; i++) avg->params.mem[i] += t.params.mem[i];
        model_free(&t);
    }
    for (size_t i = 0; i < avg->params.n; i++) avg->params.mem[i] /= (float)n;
}

/* One row of the BLEU table: a checkpoint decoded one way. */
typedef struct {
    char name[48];
    Bleu bleu;
    double ppl, secs;
    int exact;
    char **hyp;   /* (test.n) owned strings */
} System;

static void run_system(System *s, const char *name, Model *m, const Data *d, Run *r, const DecodeOpts *beam,
                       double ppl) {
    BleuStats st;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->hyp = xcalloc((size_t)d->test.n, sizeof(char *));
    double t0 = now_s();
    translate_all(m, &d->bpe, &d->etest, &r->test_b, s->hyp, beam);
    s->secs = now_s() - t0;
    s->bleu = corpus_bleu(s->hyp, d->test.tgt, d->test.n, &st);
    s->ppl = ppl;
    s->exact = 0;
    for (int i = 0; i < d->test.n; i++) s->exact += s->hyp[i] && !strcmp(s->hyp[i], d->test.tgt[i]);
}

static void write_hyps(const Opts *o, const char *file, char **hyp, int n) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", o->out, file);
    FILE *f = fopen(path, "w");
    if (!f) return;
    for (int i = 0; i < n; i++) fprintf(f, "%s\n", hyp[i] ? hyp[i] : "");
    fclose(f);
}

static void section_evaluate(const Opts *o, const Data *d, Run *r) {
    show_section("5. Evaluation: greedy and beam BLEU, averaging, PPL (Sec. 6.1, Table 3)");
    double t0 = now_s();
    /* Sec. 6.1: beam 4, alpha 0.6, at most input length + 50 tokens, early stop */
    DecodeOpts paper = decode_opts_paper(BPE_BOS, BPE_EOS);
    System sys[4];
    int ns = 0, n_avg = r->n_ckpt;
    double ppl_last = perplexity(&r->m, &d->edev, &r->dev_b);
    run_system(&sys[ns++], "last checkpoint, greedy", &r->m, d, r, NULL, ppl_last);
    run_system(&sys[ns++], "last checkpoint, beam 4, alpha 0.6", &r->m, d, r, &paper, ppl_last);
    if (n_avg >= 2) {
        Model am;
        char name[64];
        average_checkpoints(&am, &r->m, r->ckpt, n_avg);
        double ppl_avg = perplexity(&am, &d->edev, &r->dev_b);
        snprintf(name, sizeof name, "average of last %d checkpoints, greedy", n_avg);
        run_system(&sys[ns++], name, &am, d, r, NULL, ppl_avg);
        snprintf(name, sizeof name, "average of last %d, beam 4, alpha 0.6", n_avg);
        run_system(&sys[ns++], name, &am, d, r, &paper, ppl_avg);
        char path[1100], err[512];
        snprintf(path, sizeof path, "%s/model_avg.ckpt", o->out);
        if (model_save(&am, path, NULL, err, sizeof err)) fprintf(stderr, "%s: %s\n", PROG, err);
        model_free(&am);
    }
    printf("test set: %d sentences; BLEU as sacrebleu computes it (tokenize='none': the text is\n"
           "tokenised already); a test checks bleu.c against sacrebleu to 0.01.\n"
           "greedy: train.c's greedy_decode (reruns the decoder over the whole prefix every step);\n"
           "beam: chapter 09's decoder (common/decode.h, KV cache) with Sec. 6.1's settings:\n"
           "beam %d, length penalty alpha %.1f, at most input + %d tokens, early stop\n",
           d->test.n, paper.beam, (double)paper.alpha, paper.offset);
    printf("  %-37s %7s %20s %8s %6s %7s\n", "system", "BLEU", "1/2/3/4-gram prec.", "dev PPL", "exact", "decode");
    for (int i = 0; i < ns; i++) {
        const Bleu *b = &sys[i].bleu;
        printf("  %-37s %7.2f %5.1f/%4.1f/%4.1f/%4.1f %8.3f %6d %6.1fs\n", sys[i].name, b->score, b->prec[0],
               b->prec[1], b->prec[2], b->prec[3], sys[i].ppl, sys[i].exact, sys[i].secs);
    }
    if (n_avg < 2) printf("  average: only %d checkpoint saved (use --checkpoint-every K)\n", n_avg);
    printf("exact: sentences identical to the reference, of %d\n", d->test.n);
    for (int i = 1; i < ns; i += 2) {
        double gain = sys[i].bleu.score - sys[i - 1].bleu.score;
        int differ = 0;
        for (int j = 0; j < d->test.n; j++) differ += strcmp(sys[i].hyp[j], sys[i - 1].hyp[j]) != 0;
        printf("%s: beam %s BLEU by %.2f (%d of %d outputs differ from greedy's), %.1fx its time\n",
               i == 1 ? "last" : "averaged", gain >= 0 ? "raised" : "lowered", fabs(gain), differ, d->test.n,
               sys[i].secs / (sys[i - 1].secs > 1e-9 ? sys[i - 1].secs : 1e-9));
    }
    if (n_avg >= 2)
        printf("averaging the last %d checkpoints %s greedy BLEU by %.2f\n", n_avg,
               sys[2].bleu.score >= sys[0].bleu.score ? "raised" : "lowered",
               fabs(sys[2].bleu.score - sys[0].bleu.score));
    for (int i = 0, shown = 0; i < d->test.n && shown < 3; i++) {
        if (!strcmp(sys[1].hyp[i], d->test.tgt[i])) continue;
        print_wrapped("  a miss (last, beam):  en  ", d->test.src[i]);
        print_wrapped("                        ref ", d->test.tgt[i]);
        print_wrapped("                        hyp ", sys[1].hyp[i]);
        shown++;
    }
    write_hyps(o, "test_hyp.txt", sys[0].hyp, d->test.n);
    write_hyps(o, "test_hyp_beam.txt", sys[1].hyp, d->test.n);
    printf("evaluation took %.1f s\ntest hypotheses: %s/test_hyp.txt (greedy), test_hyp_beam.txt (beam)\n",
           now_s() - t0, o->out);
    for (int k = 0; k < ns; k++) {
        for (int i = 0; i < d->test.n; i++) free(sys[k].hyp[i]);
        free(sys[k].hyp);
    }
}

/* ---- section 6 and --translate: the alignment ------------------------------------------- */

/* Normalises typed text to the corpus's form: a capital first letter, ","
 * and "." as tokens of their own, a final " .". */
static void normalise(const char *in, char *out, size_t len) {
    size_t o = 0;
    for (const char *p = in; *p && o + 4 < len; p++) {
        if (*p == ',' || *p == '.') {
            out[o++] = ' ';
            out[o++] = *p;
            out[o++] = ' ';
        } else {
            out[o++] = *p == '\t' || *p == '\n' ? ' ' : *p;
        }
    }
    out[o] = 0;
    /* squeeze spaces */
    char *w = out;
    int sp = 1;
    for (char *p = out; *p; p++) {
        if (*p == ' ') {
            if (!sp) *w++ = ' ';
            sp = 1;
        } else *w++ = *p, sp = 0;
    }
    if (w > out && w[-1] == ' ') w--;
    *w = 0;
    if (out[0] >= 'a' && out[0] <= 'z') out[0] = (char)(out[0] - 'a' + 'A');
    size_t n = strlen(out);
    if ((n < 2 || strcmp(out + n - 2, " .")) && n + 3 < len) strcat(out, n ? " ." : ".");
}

/* Beam search (Sec. 6.1's settings, chapter 09's decoder) on one sentence,
 * then a teacher-forced pass over the output to read the attention
 * weights. Returns the output length (tokens after <s>, </s> included); ys
 * gets <s> y1 .. */
static int translate_one(Model *m, const int *src, int Ts, int *ys, int cap) {
    DecodeOpts o = decode_opts_paper(BPE_BOS, BPE_EOS);
    int T_out = Ts + o.offset;   /* input + 50 (Sec. 6.1), within the model and ys */
    if (T_out > m->cfg.max_len) T_out = m->cfg.max_len;
    if (T_out > m->max_Tt) T_out = m->max_Tt;
    if (T_out > cap - 1) T_out = cap - 1;
    Decoder dec;
    char err[512];
    if (decoder_new(&dec, m, 1, o.beam, Ts, T_out, err, sizeof err) ||
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

/* The cross-attention of the last decoder layer (mean of the heads) for
 * sentence en, printed and plotted; then the head whose query for the
 * German word `de_word` looks most at the English word `en_word`, and the
 * encoder head whose query for `en_word` looks most at `subj_word`. */
static void show_alignment(Model *m, const Bpe *bpe, const char *en, const char *en_word, const char *de_word,
                           const char *subj_word, const char *de_subj, const char *out, const char *name) {
    int src[256], ys[512];
    int ns = bpe_encode(bpe, en, src, 255);
    src[ns] = BPE_EOS;
    int Ts = ns + 1, Tt = translate_one(m, src, Ts, ys, 512);
    char de[2048];
    bpe_decode(bpe, ys + 1, Tt, de, sizeof de);
    print_wrapped("en: ", en);
    print_wrapped("de: ", de);
    if (!de_word) print_segmentation(bpe, "output", de);
    static char sl[256][64], tl[512][64];
    const char *slp[256], *tlp[512];
    for (int j = 0; j < Ts; j++) bpe_symbol_str(bpe, src[j], sl[j], 64), slp[j] = sl[j];
    for (int i = 0; i < Tt; i++) bpe_symbol_str(bpe, ys[i + 1], tl[i], 64), tlp[i] = tl[i];   /* row i predicts y_{i+1} */
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
    /* which head links the clause-final German verb to its English verb?
     * Rows and columns of the word's first subword. */
    int qi = de_word ? find_word(bpe, ys + 1, Tt, de_word, 1, NULL) : -1;
    int kj1 = 0, kj0 = en_word ? find_word(bpe, src, Ts, en_word, 0, &kj1) : -1;
    if (!de_word || !en_word) {   /* --translate: no word to trace */
        free(avg);
        return;
    }
    if (qi < 0 || kj0 < 0) {
        printf("(the output has no \"%s\" to trace back to \"%s\")\n", de_word ? de_word : "", en_word ? en_word : "");
        free(avg);
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
           de_word, qi + 1, Tt, bl + 1, bh + 1, best, en_word, kj0 + 1, Ts, L * h, mean);
    const float *wb = model_attention(m, ATTN_DEC_CROSS, bl);
    snprintf(title, sizeof title, "cross-attention, decoder layer %d head %d", bl + 1, bh + 1);
    plot_heatmap(out, "cross_head", title, wb + (size_t)bh * Tt * Ts, Tt, Ts, tlp, slp,
                 "English (source)", "German (output)");
    /* and in the encoder: which head links the verb to its subject? */
    int sj1 = 0, sj0 = subj_word ? find_word(bpe, src, Ts, subj_word, 0, &sj1) : -1;
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
               "(uniform attention over the %d source tokens: %.2f): %s\n", en_word, subj_word, sl_ + 1, sh + 1,
               sbest, Ts, uni, sbest >= 2 * uni ? "this head links the verb to its subject"
                                                : "no head here links the verb to its subject");
    }
    /* and in the decoder: writing the verb needs its subject's number
     * (sieht, not sehen). Row qi writes the verb; the subject is an input
     * token of the decoder, at its position in ys. */
    int fi = de_subj ? find_word(bpe, ys + 1, Tt, de_subj, 0, NULL) : -1;
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
               "weight %.2f (uniform over the %d tokens so far: %.2f): %s\n", de_word, de_subj, dl + 1, dh + 1,
               dbest, qi + 1, uni, dbest >= 2 * uni ? "this head links the verb to its subject"
                                                    : "no decoder head links them more than uniform");
        const float *wd = model_attention(m, ATTN_DEC_SELF, dl) + (size_t)dh * Tt * Tt;
        snprintf(title, sizeof title, "decoder self-attention, layer %d head %d", dl + 1, dh + 1);
        static char il[512][64];   /* column j is the decoder's input j: <s>, then the output shifted */
        const char *ilp[512];
        for (int j = 0; j < Tt; j++) {
            snprintf(il[j], sizeof il[j], "%s", j ? tl[j - 1] : "<s>");
            ilp[j] = il[j];
        }
        plot_heatmap(out, "dec_head", title, wd, Tt, Tt, tlp, ilp, "decoder input (shifted output)",
                     "German output");
    }
    /* the encoder's self-attention: every head of a layer in one PNG */
    for (int l = 0; l < L; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, "enc_heads_layer%d", l + 1);
        snprintf(title, sizeof title, "encoder self-attention, layer %d of %d, every head", l + 1, L);
        plot_heads_grid(out, nm, title, model_attention(m, ATTN_ENC_SELF, l), h, Ts, Ts, slp, slp, "key", "query");
    }
    free(avg);
}

static void section_attention(const Opts *o, Run *r, const Data *d) {
    show_section("6. What the heads learned: the verb moves to the end (Figures 3-5)");
    /* "The man laughs , because the woman sees the big dog ." built from
     * the grammar, so the German verb of the clause is known: "sieht". */
    Sentence s = {.adverb = -1, .conj = CONJ_BECAUSE};
    s.main = (Clause){.subj = {DET_THE, 1, -1, corpus_noun("man")}, .verb = corpus_verb("laugh")};
    s.sub = (Clause){.subj = {DET_THE, 1, -1, corpus_noun("woman")}, .verb = corpus_verb("see"),
                     .obj = {DET_THE, 1, corpus_adj("big"), corpus_noun("dog")}};
    char en[512], de[512], err[256];
    if (corpus_render(&s, en, sizeof en, de, sizeof de, err, sizeof err)) cli_fail(PROG, "%s", err);
    int seen = 0;
    for (int i = 0; i < d->train.n && !seen; i++) seen = !strcmp(d->train.src[i], en);
    printf("this sentence is %s the training set\n", seen ? "in" : "not in");
    print_wrapped("reference: ", de);
    show_alignment(&r->m, &d->bpe, en, "sees", "sieht", "woman", "Frau", o->out, "cross_attn");
}

/* --translate: load the checkpoint and its vocabulary, translate one sentence. */
static int run_translate(const Opts *o) {
    char err[512], path[1100], bp[1200], text[2048], unk[256];
    snprintf(path, sizeof path, "%s", o->model ? o->model : "");
    if (!o->model) snprintf(path, sizeof path, "%s/model.ckpt", o->out);
    snprintf(bp, sizeof bp, "%s.bpe", path);
    Bpe bpe;
    Model m;
    int rc = bpe_load(&bpe, bp, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: error: %s\n  (train first: build/11_translation --out %s)\n", PROG, err, o->out);
        return rc;
    }
    normalise(o->translate, text, sizeof text);
    if (bpe_unknown_word(&bpe, text, unk, sizeof unk)) {
        fprintf(stderr, "%s: error: --translate: the word \"%s\" never appears in the training corpus,\n"
                "  so the model cannot know it (it knows %d English words, e.g. \"%s\", \"%s\")\n", PROG,
                unk, bpe.n_words, bpe.n_words > 0 ? bpe.words[bpe.n_words / 3] : "",
                bpe.n_words > 1 ? bpe.words[2 * bpe.n_words / 3] : "");
        bpe_free(&bpe);
        return 2;
    }
    if (model_load(&m, path, 1, 1, 1, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "%s: error: %s\n", PROG, err);
        bpe_free(&bpe);
        return 2;
    }
    int max_len = m.cfg.max_len, n = bpe_encode(&bpe, text, NULL, 0);
    model_free(&m);
    if (n + 1 > max_len / 2 - 4) {
        fprintf(stderr, "%s: error: --translate: %d subword tokens; this model takes at most %d\n"
                "  (its max_len %d leaves room for an output twice as long)\n", PROG, n, max_len / 2 - 5, max_len);
        bpe_free(&bpe);
        return 2;
    }
    if (model_load(&m, path, 1, max_len, max_len - 1, NULL, NULL, err, sizeof err)) cli_fail(PROG, "%s", err);
    show_section("Translate (beam search: beam 4, alpha 0.6; Sec. 6.1)");
    print_segmentation(&bpe, "source", text);
    show_alignment(&m, &bpe, text, NULL, NULL, NULL, NULL, o->out, "translate_attn");
    model_free(&m);
    bpe_free(&bpe);
    return 0;
}

int main(int argc, char **argv) {
    Opts o = {.n_train = 10000, .n_dev = 300, .n_test = 500, .vocab = 800, .tokens = 1000, .max_rows = 96,
              .layers = 2, .d_model = 64, .d_ff = 256, .heads = 4, .steps = 1500, .warmup = 200,
              .ckpt_every = 50, .n_avg = 5, .threads = 1, .micro = 1, .factor = 0.6f, .eps_ls = 0.1f, .dropout = 0.1f, .seed = 42,
              .out = "out/11_translation"};
    CliOption opts[] = {
        {"--train-size", CLI_INT, &o.n_train, "generated training pairs", 1, 2000000},
        {"--dev-size", CLI_INT, &o.n_dev, "dev pairs (perplexity)", 1, 100000},
        {"--test-size", CLI_INT, &o.n_test, "test pairs (BLEU)", 1, 100000},
        {"--corpus", CLI_STRING, &o.corpus, "your own corpus: source<TAB>target lines, UTF-8", 0, 0},
        {"--vocab", CLI_INT, &o.vocab, "BPE vocabulary size, shared (paper: 37000)", 1, 1000000},
        {"--tokens", CLI_INT, &o.tokens, "token budget per batch and side (paper: 25000)", 1, 10000000},
        {"--max-rows", CLI_INT, &o.max_rows, "at most this many sentence pairs per batch", 1, 100000},
        {"--layers", CLI_INT, &o.layers, "N (paper 6)", 1, 64},
        {"--d-model", CLI_INT, &o.d_model, "d_model (paper 512)", 2, 4096},
        {"--d-ff", CLI_INT, &o.d_ff, "d_ff (paper 2048)", 1, 16384},
        {"--heads", CLI_INT, &o.heads, "h; must divide d_model (paper 8)", 1, 256},
        {"--steps", CLI_INT, &o.steps, "train until this many steps in total", 0, 100000000},
        {"--warmup", CLI_INT, &o.warmup, "warmup_steps of Sec. 5.3 (paper 4000)", 1, 100000000},
        {"--factor", CLI_FLOAT, &o.factor, "multiplies the Sec. 5.3 learning rate", 1e-6, 1e6},
        {"--label-smoothing", CLI_FLOAT, &o.eps_ls, "eps_ls (paper 0.1)", 0, 0.99},
        {"--dropout", CLI_FLOAT, &o.dropout, "P_drop (paper 0.1)", 0, 0.95},
        {"--checkpoint-every", CLI_INT, &o.ckpt_every, "save every K steps (0: only at the end)", 0, 100000000},
        {"--average", CLI_INT, &o.n_avg, "average the last this many checkpoints (paper 5)", 1, N_AVG_MAX},
        {"--resume", CLI_STRING, &o.resume, "continue the run saved in this checkpoint", 0, 0},
        {"--translate", CLI_STRING, &o.translate, "translate this English sentence with --model", 0, 0},
        {"--model", CLI_STRING, &o.model, "checkpoint for --translate (default OUT/model.ckpt)", 0, 0},
        {"--threads", CLI_INT, &o.threads, "OpenMP threads (1: steadiest on a shared machine)", 1, 256},
        {"--micro-batches", CLI_INT, &o.micro, "G slices per step, gradients added as a fixed tree: mpirun -np P (P dividing G) gives one process's bits (chapter 13)", 1, TRAIN_MAX_MICRO},
        {"--seed", CLI_U64, &o.seed, "seed for the corpus, weights, batches, dropout", 0, 0},
        {"--out", CLI_STRING, &o.out, "output folder", 0, 0},
    };
    setvbuf(stdout, NULL, _IOLBF, 0);   /* errors (stderr) land after what was printed */
    dist_init(&argc, &argv, PROG);      /* one rank unless started by mpirun (chapter 13) */
    cli_parse(argc, argv, PROG, "English->German translation end to end (Sec. 5.1, 6.1, Table 2)", opts,
              CLI_COUNT(opts));
    if (o.d_model % o.heads) cli_fail(PROG, "--d-model (%d) must be divisible by --heads (%d)", o.d_model, o.heads);
    if (o.translate && dist_size() > 1) dist_exit(2, "--translate runs as one process, not under mpirun");
    dist_quiet_others();                /* rank 0 alone prints and writes */
    if (dist_max_int(dist_rank() == 0 && plot_mkdir(o.out))) dist_exit(1, "cannot create the output folder --out %s", o.out);
    parallel_set_threads(o.threads);
    if (o.translate) {
        int rc = run_translate(&o);
        dist_finalize();
        return rc;
    }
    double t0 = now_s();
    Data d = {0};
    Batches bs;
    Run r = {0};
    section_corpus(&o, &d);
    section_bpe(&o, &d);
    section_batches(&o, &d, &bs);
    section_train(&o, &d, &bs, &r);
    dist_detach(&r.dt);
    if (dist_rank() == 0) {             /* the others trained; evaluation is rank 0's */
        section_evaluate(&o, &d, &r);
        section_attention(&o, &r, &d);
        printf("\nwhole run: %.1f s\n", now_s() - t0);
    }
    trainer_free(&r.tr);
    model_free(&r.m);
    batches_free(&bs), batches_free(&r.dev_b), batches_free(&r.test_b);
    encoded_free(&d.etrain), encoded_free(&d.edev), encoded_free(&d.etest);
    corpus_free(&d.train), corpus_free(&d.dev), corpus_free(&d.test);
    bpe_free(&d.bpe);
    dist_finalize();
    return 0;
}

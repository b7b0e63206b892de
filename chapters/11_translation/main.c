/* 11_translation - English to German end to end: Sections 5.1, 6.1, Table 2.
 *
 * The paper's task, in miniature and offline: a parallel corpus generated
 * from a small grammar (common/text/grammar.h: gender, case, adjective endings,
 * plurals, verb second, verb-final subordinate clauses, the perfect) or a
 * real one (the Ding dictionary's example sentences, or a TSV file),
 * byte-pair encoding learned on the training side with one vocabulary for
 * both languages (Sec. 5.1, common/text/bpe.h), batches by length under a token
 * budget (Sec. 5.1, common/text/batch.h), the Transformer of chapters 07-08
 * (post-LN, tied embeddings, Adam with the Sec. 5.3 schedule, label
 * smoothing, dropout), corpus BLEU-4 (Sec. 6.1, common/text/bleu.h) of greedy decoding
 * and of the paper's beam search (beam 4, alpha 0.6; chapter 09's decoder), the average
 * of the last 5 checkpoints (Sec. 6.1), dev perplexity per subword (Table 3),
 * what the run's memory went to, and the cross-attention alignment of a
 * sentence (for the generated corpus one whose verb moves to the end;
 * Figures 3-5), then its encoder self-attention drawn as the paper draws
 * Figures 3-5: lines whose opacity is the weight (common/io/lineview.h).
 *
 *   build/11_translation                          generate, BPE, train, evaluate
 *   build/11_translation --corpus ding            the Ding dictionary's ~14,700 sentence pairs
 *                                                 (apt-get install trans-de-en), a fixed split
 *   build/11_translation --corpus pairs.tsv       the same on your own data
 *   build/11_translation --corpus ding --dev mydev.tsv --test mytest.tsv
 *   build/11_translation --translate "the man sees the big dog"
 *   build/11_translation --resume out/11_translation/model.ckpt --steps 3000
 *   build/11_translation --threads 2              a second thread (the default is 1)
 *   mpirun -np 2 build/11_translation             data parallel (chapter 13): the same flags,
 *                                                 the same training loop; rank 0 prints and saves
 *
 * Files in --out: model.ckpt (+ model.ckpt.bpe, the vocabulary), the
 * checkpoints ckpt_STEP.ckpt of the last 5 saves, model_avg.ckpt (+ .bpe),
 * the heatmaps as PNG, the test hypotheses of the four systems as text.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>


#include "text/batch.h"
#include "text/bleu.h"
#include "text/bpe.h"
#include "io/checkpoint.h"
#include "io/cli.h"
#include "text/corpus.h"
#include "text/grammar.h"
#include "model/decode.h"
#include "dist/dist.h"
#include "core/fail.h"
#include "core/fileio.h"
#include "model/model.h"
#include "io/show.h"
#include "io/plot.h"
#include "io/lineview.h"
#include "core/tensor.h"
#include "model/train.h"
#include "task/translate.h"
#include "fast/parallel.h"

static const char *PROG = "11_translation";
#define N_AVG_MAX 16
/* Sec. 6.1: "maximum output length to input length + 50" */
#define OUT_OFFSET 50

static double cpu_s(void) {   /* this process's CPU time, every thread */
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}


/* Prints "label text", wrapped at spaces so no line passes 100 columns
 * (continuation lines indented under the text). The text comes from a
 * corpus, a .bpe file or the command line, so it goes through fio_escape
 * first: a control byte, a C1 control or invalid UTF-8 prints as \xHH (and
 * '\' as "\\"), never as itself; printable UTF-8 (großen, 你好) is
 * unchanged. The label is the caller's own text (print_ids escapes the
 * word it puts in one). */
static void print_wrapped(const char *label, const char *raw) {
    size_t cap = 4 * strlen(raw) + 4;   /* the worst case: every byte \xHH */
    char *safe = xmalloc(cap);
    const char *text = fio_escape(safe, cap, raw, (size_t)-1);
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
    free(safe);
}

static int max2(int a, int b) { return a > b ? a : b; }

/* ---- the run's settings ------------------------------------------------------ */
typedef struct {
    int n_train, n_dev, n_test, vocab, tokens, max_rows;
    int layers, d_model, d_ff, heads, steps, warmup, ckpt_every, n_avg, threads, micro, ding_phrases, eval_every;
    float factor, eps_ls, dropout;
    uint64_t seed;
    const char *corpus, *dev, *test, *resume, *translate, *model, *out, *dump;
} Opts;

typedef struct {
    Corpus train, dev, test;
    Bpe bpe;
    Encoded etrain, edev, etest;
    int generated;      /* 1: the grammar's corpus (tokenised, structure known); 0: read (--corpus) */
    int ding;           /* 1: --corpus ding                                                       */
} Data;

/* ---- the configuration: one for the generated corpus, one for real text ----------------
 * Flags not given take the corpus's values. The generated corpus keeps
 * the settings tuned for it (chapter 11's README: they still win there).
 * A real corpus (--corpus ding or a file) of some 15,000 short pairs is
 * 1/300 of WMT 2014's 4.5M and far more varied than the grammar's text:
 *   - a wider model, d_model 128 and N = 3 (1.6M parameters with 2000
 *     symbols), held back by dropout 0.3: on so little data overfitting,
 *     not capacity, is what stops a model (Table 3 (D): dropout matters);
 *   - 2000 BPE symbols: a few thousand is what small corpora need (every
 *     symbol must be seen often enough to learn);
 *   - batches of 2000 tokens a side: 164 steps an epoch of the Ding split;
 *   - a checkpoint every 250 steps, so the average of the last 5 (Sec. 6.1)
 *     spans 1250 steps, a quarter of the run, as the generated corpus's
 *     every 50 of 1500 span a sixth;
 *   - 5000 steps (30 epochs), warmup 800 (5 epochs) at factor 1: the
 *     paper's 4000 warmup steps were 4% of its 100K; 800 are 16% here, as
 *     a small corpus's first epochs are noisy.
 * On 2 cores the real-data run takes about 20 minutes (README). */
static void corpus_config(Opts *o) {
    int real = o->corpus != NULL;
    if (!o->vocab) o->vocab = real ? 2000 : 800;
    if (!o->tokens) o->tokens = real ? 2000 : 1000;
    if (!o->layers) o->layers = real ? 3 : 2;
    if (!o->d_model) o->d_model = real ? 128 : 64;
    if (!o->d_ff) o->d_ff = real ? 512 : 256;
    if (!o->heads) o->heads = 4;
    if (o->steps < 0) o->steps = real ? 5000 : 1500;
    if (!o->warmup) o->warmup = real ? 800 : 200;
    if (o->factor < 0) o->factor = real ? 1.0f : 0.6f;
    if (o->dropout < 0) o->dropout = real ? 0.3f : 0.1f;
    if (o->ckpt_every < 0) o->ckpt_every = real ? 250 : 50;   /* the last 5 span 1250 steps, 250 */
}

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

/* Moves every pair of *from to the end of *to; *from is left empty. */
static void append_pairs(Corpus *to, Corpus *from) {
    to->src = xrealloc(to->src, ((size_t)to->n + from->n + 1) * sizeof(char *));
    to->tgt = xrealloc(to->tgt, ((size_t)to->n + from->n + 1) * sizeof(char *));
    memcpy(to->src + to->n, from->src, (size_t)from->n * sizeof(char *));
    memcpy(to->tgt + to->n, from->tgt, (size_t)from->n * sizeof(char *));
    to->n += from->n;
    free(from->src);
    free(from->tgt);
    memset(from, 0, sizeof *from);
}

/* The pairs of a TSV file given to flag, or the file's problem and exit
 * (1: cannot read it, 2: bad content). */
static void load_tsv(Corpus *c, const char *flag, const char *path) {
    char err[512];
    int rc = corpus_load_tsv(c, path, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: error: %s %s\n", PROG, flag, err);
        exit(rc);
    }
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* How many English sentences of c also occur in the training set (a test
 * sentence seen in training measures memory, not translation). */
static int seen_in_training(const Corpus *c, const Corpus *train) {
    char **sorted = xmalloc(((size_t)train->n + 1) * sizeof(char *));
    memcpy(sorted, train->src, (size_t)train->n * sizeof(char *));
    qsort(sorted, (size_t)train->n, sizeof(char *), str_cmp);
    int seen = 0;
    for (int i = 0; i < c->n; i++)
        seen += bsearch(&c->src[i], sorted, (size_t)train->n, sizeof(char *), str_cmp) != NULL;
    free(sorted);
    return seen;
}

/* Where the data come from: the grammar, the Ding dictionary (a fixed
 * split) or a TSV file (a seeded split); --dev / --test FILE replace those
 * splits, and what a split no longer needs trains. */
static void section_corpus(const Opts *o, Data *d) {
    char err[512];
    show_section("1. A parallel corpus (stand-in for WMT 2014 English-German, Sec. 5.1)");
    d->ding = o->corpus && !strcmp(o->corpus, "ding");
    d->generated = !o->corpus;
    /* dev: 300 pairs of the grammar's or a file's, 500 of the dictionary's */
    int n_dev = o->n_dev ? o->n_dev : d->ding ? 500 : 300, n_test = o->n_test;
    if (d->generated) {
        /* a split a file replaces is generated with one pair and dropped */
        if (corpus_generate(&d->train, &d->dev, &d->test, o->n_train, o->dev ? 1 : n_dev, o->test ? 1 : n_test,
                            o->seed, err, sizeof err))
            cli_fail(PROG, "%s", err);
        printf("generated from a grammar (common/text/grammar.c), seed %llu; every sentence distinct,\n"
               "so train, dev and test share none\n", (unsigned long long)o->seed);
        if (o->dev) corpus_free(&d->dev);
        if (o->test) corpus_free(&d->test);
    } else {
        Corpus all, phrases = {0};
        int rc;
        if (d->ding) {
            rc = corpus_load_ding(&all, o->ding_phrases ? &phrases : NULL, DING_PATH, err, sizeof err);
            if (rc) {
                fprintf(stderr, "%s: error: --corpus ding: %s\n", PROG, err);
                exit(rc);
            }
            printf("the Ding dictionary (trans-de-en, GPL-2+), read from %s at run time; fixed split\n"
                   "%d example sentence pairs; dev and test ranked by a hash of the English sentence\n"
                   "(corpus_split_fixed: the same split on every machine and with every --seed)\n",
                   DING_PATH, all.n);
        } else {
            load_tsv(&all, "--corpus", o->corpus);
            printf("read %d pairs from %s\n", all.n, o->corpus);
        }
        if (o->dev && o->test) {   /* nothing to split off: the whole corpus trains */
            append_pairs(&d->train, &all);
            printf("--dev and --test given: every pair of it trains\n");
        } else {
            rc = d->ding ? corpus_split_fixed(&all, &d->train, &d->dev, &d->test, n_dev, n_test, err, sizeof err)
                         : corpus_split(&all, &d->train, &d->dev, &d->test, n_dev, n_test, o->seed, err, sizeof err);
            corpus_free(&all);
            if (rc) cli_fail(PROG, "--corpus %s: %s", o->corpus, err);
            if (o->dev) append_pairs(&d->train, &d->dev);     /* the file replaces it: back to training */
            if (o->test) append_pairs(&d->train, &d->test);
        }
        if (o->ding_phrases) {
            printf("--ding-phrases: %d word and phrase pairs of the dictionary added to the training\n"
                   "split only (dev and test stay sentences)\n", phrases.n);
            append_pairs(&d->train, &phrases);
        }
    }
    if (o->dev) {
        load_tsv(&d->dev, "--dev", o->dev);
        printf("dev: %d pairs read from %s\n", d->dev.n, o->dev);
    }
    if (o->test) {
        load_tsv(&d->test, "--test", o->test);
        printf("test: %d pairs read from %s\n", d->test.n, o->test);
    }
    long te, tg;
    int ve, vg;
    count_words(&d->train, 0, &te, &ve);
    count_words(&d->train, 1, &tg, &vg);
    printf("pairs: train %d, dev %d, test %d\n", d->train.n, d->dev.n, d->test.n);
    printf("train words: English %ld (%d distinct), German %ld (%d distinct)\n", te, ve, tg, vg);
    if (!d->generated)
        printf("English sentences also in training: dev %d of %d, test %d of %d\n", seen_in_training(&d->dev, &d->train),
               d->dev.n, seen_in_training(&d->test, &d->train), d->test.n);
    for (int i = 0; i < 4 && i < d->train.n; i++) {
        print_wrapped("  en: ", d->train.src[i]);
        print_wrapped("  de: ", d->train.tgt[i]);
    }
}

/* ---- section 2: byte-pair encoding ------------------------------------------------- */
/* "  label      -> sym sym ...  (n tokens)", wrapped; the label (a word of
 * the corpus or of the user) escaped as print_wrapped escapes the symbols */
static void print_ids(const Bpe *b, const char *raw_label, const int *ids, int n) {
    char label[4 * 160 + 4];
    fio_escape(label, sizeof label, raw_label, (size_t)-1);
    size_t cap = 64, len = 0;
    char *line = xmalloc(cap), sym[128];
    line[0] = 0;
    for (int i = 0; i < n; i++) {
        bpe_symbol_str(b, ids[i], sym, sizeof sym);
        size_t need = len + strlen(sym) + 2;
        if (need > cap) line = xrealloc(line, cap = 2 * need);
        len += (size_t)sprintf(line + len, "%s%s", i ? " " : "", sym);
    }
    int w = 0;   /* pad to 10 columns by characters, not bytes (großen) */
    for (const char *q = label; *q; q++) w += ((unsigned char)*q & 0xC0) != 0x80;
    char head[sizeof label + 32];
    snprintf(head, sizeof head, "  %s%*s -> ", label, w < 10 ? 10 - w : 0, "");
    char *text = xmalloc(len + 32);
    sprintf(text, "%s  (%d token%s)", line, n, n == 1 ? "" : "s");
    print_wrapped(head, text);
    free(text);
    free(line);
}

/* how sentence s segments */
static void print_segmentation(const Bpe *b, const char *label, const char *s) {
    int n = bpe_encode(b, s, NULL, 0);
    int *ids = xmalloc(((size_t)n + 1) * sizeof(int));
    bpe_encode(b, s, ids, n);
    print_ids(b, label, ids, n);
    free(ids);
}

/* 1 if the code point starting at s (l bytes) is a letter: a-z, A-Z or a
 * Latin letter with a diacritic (U+00C0..U+024F but for × and ÷) */
static int is_letter(const unsigned char *s, int l) {
    if (l == 1) return (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z');
    if (l != 2) return 0;
    int cp = (s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    return cp >= 0xC0 && cp <= 0x24F && cp != 0xD7 && cp != 0xF7;
}

typedef struct {
    const char *w;
    int n, count;       /* letters, occurrences */
} WordCount;

static int wc_text_cmp(const void *a, const void *b) {
    return strcmp(((const WordCount *)a)->w, ((const WordCount *)b)->w);
}

static int wc_cmp(const void *a, const void *b) {
    const WordCount *x = a, *y = b;
    if (x->count != y->count) return y->count - x->count;
    if (x->n != y->n) return y->n - x->n;
    return strcmp(x->w, y->w);
}

/* The k most frequent words of at least `least` letters (letters only: no
 * punctuation, no digits) among sentences[0..n); ties: longer first, then
 * byte order. Pointers into a copy of the text (*keep, to free). Returns
 * how many (fewer when the sentences have fewer such words). */
static int frequent_long_words(char *const *sentences, int n, int least, int k, const char **out, char **keep) {
    size_t total = 1;
    for (int i = 0; i < n; i++) total += strlen(sentences[i]) + 1;
    char *text = *keep = xmalloc(total), *p = text;
    for (int i = 0; i < n; i++) p += sprintf(p, "%s ", sentences[i]);
    WordCount *wc = xmalloc(total / 2 * sizeof(WordCount) + sizeof(WordCount));
    int nw = 0;
    for (char *w = strtok(text, " "); w; w = strtok(NULL, " ")) {
        int letters = 0, ok = 1;
        for (const unsigned char *q = (const unsigned char *)w; *q && ok;) {
            int l = (*q & 0xE0) == 0xC0 ? 2 : (*q & 0xF0) == 0xE0 ? 3 : (*q & 0xF8) == 0xF0 ? 4 : 1;
            ok = is_letter(q, l);
            letters++;
            for (int j = 0; j < l && *q; j++) q++;
        }
        if (ok && letters >= least) wc[nw++] = (WordCount){w, letters, 1};
    }
    /* count: sort by text, merge equal neighbours, then rank */
    qsort(wc, (size_t)nw, sizeof *wc, wc_text_cmp);
    int m = 0;
    for (int i = 0; i < nw; i++) {
        if (m > 0 && !strcmp(wc[m - 1].w, wc[i].w)) wc[m - 1].count++;
        else wc[m++] = wc[i];
    }
    qsort(wc, (size_t)m, sizeof *wc, wc_cmp);
    int got = m < k ? m : k;
    for (int i = 0; i < got; i++) out[i] = wc[i].w;
    free(wc);
    return got;
}

/* how a few words segment: the grammar's, chosen to show German
 * morphology; for a real corpus, its own dev set's most frequent long words */
static void show_segmentations(const Data *d) {
    printf("how words segment (</w> marks the end of a word):\n");
    if (d->generated) {
        static const char *const words[] = {"the", "großen", "Bäumen", "Mädchen", "gesehen", "children", "weil"};
        for (int i = 0; i < (int)(sizeof words / sizeof words[0]); i++)
            print_segmentation(&d->bpe, words[i], words[i]);
        return;
    }
    printf("(the dev set's 3 most frequent words of 7 or more letters, each language; \"new\": a\n"
           "word training never had, spelled from the subwords it did have)\n");
    Bpe de_words = {0};   /* the German training words (d->bpe holds the English ones) */
    bpe_set_words(&de_words, d->train.tgt, d->train.n);
    for (int side = 0; side < 2; side++) {
        const char *w[3];
        char *keep, unk[8], label[160];
        int n = frequent_long_words(side ? d->dev.tgt : d->dev.src, d->dev.n, 7, 3, w, &keep);
        for (int i = 0; i < n; i++) {
            int is_new = bpe_unknown_word(side ? &de_words : &d->bpe, w[i], unk, sizeof unk);
            snprintf(label, sizeof label, "%s%s", w[i], is_new ? " (new)" : "");
            print_segmentation(&d->bpe, label, w[i]);
        }
        if (!n) printf("  (no %s dev word of 7 or more letters)\n", side ? "German" : "English");
        free(keep);
    }
    bpe_free(&de_words);
}

static long count_unk(const Encoded *e) {
    long n = 0;
    for (int i = 0; i < e->n; i++) {
        for (int j = 0; j < e->slen[i] - 1; j++) n += e->s[i][j] == BPE_UNK;
        for (int j = 0; j < e->tlen[i] - 1; j++) n += e->t[i][j] == BPE_UNK;
    }
    return n;
}

static void section_bpe(const Opts *o, Data *d) {
    char err[512];
    show_section("2. Byte-pair encoding, one vocabulary for both languages (Sec. 5.1)");
    if (bpe_learn(&d->bpe, d->train.src, d->train.n, d->train.tgt, d->train.n, o->vocab, err, sizeof err))
        cli_fail(PROG, "--vocab: %s", err);
    bpe_set_words(&d->bpe, d->train.src, d->train.n);
    /* saved with the vocabulary: --translate writes typed input the same way */
    d->bpe.tokenised = d->generated;
    printf("learned on the %d training pairs (both sides):\n%d symbols = 4 special + %d characters "
           "+ %d merges%s\n", d->train.n, d->bpe.vocab, d->bpe.n_chars, d->bpe.n_merges,
           d->bpe.vocab < o->vocab ? " (no pair occurs twice any more: stopped early)" : "");
    printf("first merges (most frequent pair first):");
    for (int i = 0; i < 8 && i < d->bpe.n_merges; i++) {
        const BpeSymbol *s = &d->bpe.sym[BPE_N_SPECIAL + d->bpe.n_chars + i];
        char l[64], r[64], sl[4 * 64], sr[4 * 64];   /* symbols of the corpus: printed escaped */
        bpe_symbol_str(&d->bpe, s->left, l, sizeof l);
        bpe_symbol_str(&d->bpe, s->right, r, sizeof r);
        printf("%s %s+%s", i % 4 == 0 ? "\n " : "", fio_escape(sl, sizeof sl, l, (size_t)-1),
               fio_escape(sr, sizeof sr, r, (size_t)-1));
    }
    printf("\n");
    show_segmentations(d);
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
    if (!d->generated)
        printf("characters training never saw (each one <unk>, bpe.h): dev %ld, test %ld\n", count_unk(&d->edev),
               count_unk(&d->etest));
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

/* ---- --dump-data: the run's data as plain text, for an independent model -------------------
 * (make bench-translate's PyTorch reference trains on exactly these ids
 * and batches). In DIR: vocab.tsv (id, symbol, 1 if it ends a word),
 * {train,dev,test}.ids (a pair a line: source ids, a tab, target ids; no
 * <s> or </s>), {dev,test}.{en,de} (the text), train_batches.txt (a batch a
 * line: the row numbers of train.ids, as section 3 cut them). */
static FILE *dump_open(const char *dir, const char *name) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) cli_fail(PROG, "--dump-data: cannot write %s", path);
    return f;
}

static void dump_close(FILE *f, const char *dir) {
    if (ferror(f) | fclose(f)) cli_fail(PROG, "--dump-data: could not write to %s (disk full?)", dir);
}

static void dump_data(const char *dir, const Data *d, const Batches *bs) {
    if (plot_mkdir(dir)) cli_fail(PROG, "--dump-data: cannot create %s", dir);
    FILE *f = dump_open(dir, "vocab.tsv");
    for (int i = 0; i < d->bpe.vocab; i++) fprintf(f, "%d\t%s\t%d\n", i, d->bpe.sym[i].text, d->bpe.sym[i].eow);
    dump_close(f, dir);
    const Encoded *e[3] = {&d->etrain, &d->edev, &d->etest};
    const Corpus *c[3] = {&d->train, &d->dev, &d->test};
    const char *name[3] = {"train", "dev", "test"};
    for (int k = 0; k < 3; k++) {
        char fn[64];
        snprintf(fn, sizeof fn, "%s.ids", name[k]);
        f = dump_open(dir, fn);
        for (int i = 0; i < e[k]->n; i++) {
            for (int j = 0; j < e[k]->slen[i] - 1; j++) fprintf(f, "%s%d", j ? " " : "", e[k]->s[i][j]);
            fputc('\t', f);
            for (int j = 0; j < e[k]->tlen[i] - 1; j++) fprintf(f, "%s%d", j ? " " : "", e[k]->t[i][j]);
            fputc('\n', f);
        }
        dump_close(f, dir);
        for (int side = 0; side < 2 && k > 0; side++) {
            snprintf(fn, sizeof fn, "%s.%s", name[k], side ? "de" : "en");
            f = dump_open(dir, fn);
            for (int i = 0; i < c[k]->n; i++) fprintf(f, "%s\n", side ? c[k]->tgt[i] : c[k]->src[i]);
            dump_close(f, dir);
        }
    }
    f = dump_open(dir, "train_batches.txt");
    for (int k = 0; k < bs->n; k++)
        for (int r = 0; r < bs->b[k].n; r++) fprintf(f, "%d%c", bs->b[k].idx[r], r + 1 < bs->b[k].n ? ' ' : '\n');
    dump_close(f, dir);
    printf("wrote the vocabulary, the encoded splits and the %d training batches to %s/\n", bs->n, dir);
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

/* Corpus BLEU-4 of hyp against ref, the text split by tok: BLEU_TOK_13A is
 * sacreBLEU's standard tokenizer (punctuation split off: the figure papers
 * quote since Post 2018); BLEU_TOK_NONE splits at spaces only, right for
 * text tokenised already (the generated corpus, " ." apart). */
static Bleu corpus_bleu(char **hyp, char *const *ref, int n, BleuTok tok) {
    BleuStats st;
    memset(&st, 0, sizeof st);
    for (int i = 0; i < n; i++) bleu_add_tok(&st, hyp[i] ? hyp[i] : "", ref[i], tok);
    return bleu_compute(&st);
}

/* ---- section 6's sentence ------------------------------------------------------------------
 * The generated corpus: "The man laughs , because the woman sees the big
 * dog ." built from the grammar, so the German verb of the clause is known
 * ("sieht", clause-final). Any other corpus: the first dev sentence of 6 to
 * 12 English words (none: the first dev sentence), its reference beside it.
 * build_model sizes the model's positional table to cover it. */
static void demo_sentence(const Data *d, char *en, size_t enlen, char *de, size_t delen) {
    if (d->generated) {
        Sentence s = {.adverb = -1, .conj = CONJ_BECAUSE};
        s.main = (Clause){.subj = {DET_THE, 1, -1, corpus_noun("man")}, .verb = corpus_verb("laugh")};
        s.sub = (Clause){.subj = {DET_THE, 1, -1, corpus_noun("woman")}, .verb = corpus_verb("see"),
                         .obj = {DET_THE, 1, corpus_adj("big"), corpus_noun("dog")}};
        char err[256];
        if (corpus_render(&s, en, enlen, de, delen, err, sizeof err)) cli_fail(PROG, "%s", err);
        return;
    }
    int pick = 0;
    for (int i = 0; i < d->dev.n; i++) {
        int words = 1;
        for (const char *p = d->dev.src[i]; *p; p++) words += *p == ' ';
        if (words >= 6 && words <= 12) {
            pick = i;
            break;
        }
    }
    snprintf(en, enlen, "%s", d->dev.src[pick]);
    snprintf(de, delen, "%s", d->dev.tgt[pick]);
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
    double rss_before;            /* bytes resident before the model was built */
    const Batches *train_b;       /* section 3's training batches (not owned) */
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

/* 1 if a and b are one vocabulary, symbol for symbol */
static int same_vocab(const Bpe *a, const Bpe *b) {
    int same = a->vocab == b->vocab && a->n_chars == b->n_chars;
    for (int i = 0; same && i < a->vocab; i++)
        same = !strcmp(a->sym[i].text, b->sym[i].text) && a->sym[i].eow == b->sym[i].eow;
    return same;
}

/* 0 if a and b are the same model architecture (every Config field but
 * dropout, which is this invocation's --dropout and changes no weight's
 * meaning); else 1, the first field that differs in why: "h 2, this run's 4" */
static int config_differs(const Config *a, const Config *b, char *why, size_t cap) {
    const char *name[] = {"N", "d_model", "d_ff", "h", "d_k", "d_v", "vocab", "max_len", "pre_ln", "pad_id",
                          "pos"};
    const int va[] = {a->N, a->d_model, a->d_ff, a->h, a->d_k, a->d_v, a->vocab, a->max_len, a->pre_ln, a->pad_id,
                      a->pos};
    const int vb[] = {b->N, b->d_model, b->d_ff, b->h, b->d_k, b->d_v, b->vocab, b->max_len, b->pre_ln, b->pad_id,
                      b->pos};
    for (int i = 0; i < (int)(sizeof va / sizeof va[0]); i++)
        if (va[i] != vb[i]) {
            snprintf(why, cap, "%s %d, this run's %d", name[i], va[i], vb[i]);
            return 1;
        }
    return 0;
}

/* Is `file`, a ckpt_STEP.ckpt found in --out when a run resumes, a save of
 * the run being resumed (r, after trainer_resume), fit to be averaged with
 * it? A folder may hold another run's files under the same names, and a
 * parameter count says little (h 2 and h 4 have the same). A checkpoint
 * holds no run id (checkpoint.h), so what identifies the run is what the
 * files do hold:
 *   - the model's config, field for field (config_differs);
 *   - its training state: the step its name says, and the state of the
 *     data RNG, which this chapter seeds from --seed and never draws from
 *     (batches come from batch_for_step), so it names the run's seed;
 *   - the vocabulary saved beside it (FILE.bpe, save_with_bpe), symbol for
 *     symbol this run's: the same corpus, split and --vocab.
 * Two runs equal in all of these differ at most in what only steers
 * training (--factor, --warmup, --dropout, --tokens): those are recorded
 * nowhere. Returns 1, or 0 with the reason in why. */
static int ckpt_of_this_run(const char *file, uint64_t step, const Run *r, const Bpe *bpe, char *why, size_t cap) {
    char err[512], bp[1100];
    Model t;
    TrainState ts = {0};   /* adam_m/v NULL: the step and RNGs only */
    int has = 0;
    if (model_load(&t, file, 1, 1, 1, &ts, &has, err, sizeof err)) {
        snprintf(why, cap, "%s", err);
        return 0;
    }
    char diff[96];
    int differs = config_differs(&t.cfg, &r->m.cfg, diff, sizeof diff);
    model_free(&t);
    if (differs) return snprintf(why, cap, "another model (%s)", diff), 0;
    if (!has) return snprintf(why, cap, "weights only, no training state"), 0;
    if (ts.step != step)
        return snprintf(why, cap, "it was saved at step %llu, not %llu", (unsigned long long)ts.step,
                        (unsigned long long)step), 0;
    if (ts.rng_state[0] != r->tr.data_rng.state) return snprintf(why, cap, "another run (another --seed)"), 0;
    Bpe saved;
    snprintf(bp, sizeof bp, "%s.bpe", file);
    if (bpe_load(&saved, bp, err, sizeof err)) return snprintf(why, cap, "%s", err), 0;
    int same = same_vocab(&saved, bpe);
    bpe_free(&saved);
    if (!same) return snprintf(why, cap, "its .bpe is another vocabulary (another corpus, --seed or --vocab)"), 0;
    return 1;
}

/* Bytes resident now (Linux's /proc/self/statm); the peak so far where
 * that cannot be read. */
static double rss_now(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    int ok = f && fscanf(f, "%ld %ld", &pages, &resident) == 2;
    if (f) fclose(f);
    if (ok) return (double)resident * sysconf(_SC_PAGE_SIZE);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss * 1024.0;
}

static void build_model(const Opts *o, const Data *d, const Batches *bs, Run *r) {
    char err[512], en[CORPUS_MAX_LINE + 1], de[CORPUS_MAX_LINE + 1];
    /* The positional table (max_len rows) covers every position the run
     * uses: teacher forcing (the longest target of train and dev, <s> y),
     * and decoding, which may write input + 50 tokens (Sec. 6.1) for the
     * longest source of any split or section 6's sentence, + 1 for the <s>
     * ahead of them (an output of full length fed back whole). */
    demo_sentence(d, en, sizeof en, de, sizeof de);
    int demo_Ts = bpe_encode(&d->bpe, en, NULL, 0) + 1;
    int longest_src = max2(max2(d->etrain.max_s, d->edev.max_s), max2(d->etest.max_s, demo_Ts));
    int max_len = max2(longest_src + OUT_OFFSET + 1, max2(d->etrain.max_t, d->edev.max_t));
    /* What runs through the model's activations: the training batches, the
     * dev batches (perplexity) and the test batches (their encoder, when
     * decoding): never an output of input + 50 tokens, which decoding does
     * in its own cache (decode.h). Each dimension's limit is the longest of
     * any of them; the trainer wants source room for its target + 1
     * (train.h: a copy-task shape, T source and T-1 target tokens). */
    int Tt = max2(bs->max_Tt, d->edev.max_t);
    int Ts = max2(max2(bs->max_Ts, d->edev.max_s), max2(d->etest.max_s, Tt + 1));
    /* dev and test batches: the training budget, no more rows than the model holds */
    if (batches_make(&r->dev_b, d->edev.slen, d->edev.tlen, d->edev.n, o->tokens, bs->max_B, 1, 1, err, sizeof err) ||
        batches_make(&r->test_b, d->etest.slen, d->etest.tlen, d->etest.n, o->tokens, bs->max_B, 1, 1, err,
                     sizeof err))
        cli_fail(PROG, "%s", err);
    TrainHyper hp = train_hyper_paper();
    hp.eps_ls = o->eps_ls;
    hp.warmup = o->warmup;
    hp.factor = o->factor;
    if (o->resume) {
        if (trainer_resume(&r->tr, &r->m, o->resume, &hp, bs->max_B, Ts, bs->max_B, err, sizeof err))
            cli_fail(PROG, "--resume: %s", err);
        if (r->m.cfg.max_len < max_len)   /* now, not after training */
            cli_fail(PROG, "--resume %s: its positional table has %d rows; this run needs %d (the longest\n"
                     "  source, %d tokens, + %d for decoding + 1): it was saved by an older build or for\n"
                     "  other data; train afresh", o->resume, r->m.cfg.max_len, max_len, longest_src, OUT_OFFSET);
        /* the vocabulary saved beside the checkpoint must be this run's, symbol for symbol */
        char bp[1100];
        Bpe saved;
        snprintf(bp, sizeof bp, "%s.bpe", o->resume);
        if (bpe_load(&saved, bp, err, sizeof err)) cli_fail(PROG, "--resume: %s", err);
        int same = same_vocab(&saved, &d->bpe) && r->m.cfg.vocab == saved.vocab;
        bpe_free(&saved);
        if (!same)
            cli_fail(PROG, "--resume %s: its vocabulary (%s) is not this run's: the corpus, --seed or --vocab "
                     "differ from the run that saved it", o->resume, bp);
        r->m.cfg.dropout = o->dropout;
        printf("resumed %s at step %llu\n", o->resume, (unsigned long long)r->tr.step);
        /* the checkpoints the earlier run left, for the average: the last
         * --average files of the save steps, those of this run only */
        char found[N_AVG_MAX][1024];
        int nf = 0, seen = 0;
        for (uint64_t s = o->ckpt_every > 0 ? r->tr.step / o->ckpt_every * o->ckpt_every : 0;
             o->ckpt_every > 0 && s > 0 && seen < o->n_avg; s -= (uint64_t)o->ckpt_every) {
            char why[700];
            snprintf(found[nf], sizeof found[nf], "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)s);
            if (access(found[nf], F_OK) != 0) continue;
            seen++;
            if (ckpt_of_this_run(found[nf], s, r, &d->bpe, why, sizeof why)) nf++;
            else printf("not averaged: %s is not a save of this run: %s\n", found[nf], why);
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
        /* But the memory goes by the largest BATCH, not by the limits: under
         * a token budget a batch is many short rows or a few long ones, and
         * the most rows of any times the longest of any (model_build's
         * per-dimension block) is a batch that never comes. The activation
         * block is the largest model_acts_floats of every batch that runs,
         * the trainer's loss gradient (rows x vocab) the largest B*Tt. */
        size_t acts = 0;
        int rows_cap = 1;
        const Batches *runs[3] = {bs, &r->dev_b, &r->test_b};
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < runs[j]->n; k++) {
                const Batch *b = &runs[j]->b[k];   /* test: only the encoder runs (then decode.h's cache) */
                size_t a = model_acts_floats(&c, b->n, b->Ts, j == 2 ? 1 : b->Tt);
                if (a > acts) acts = a;
                if (j == 0) rows_cap = max2(rows_cap, b->n * b->Tt);
            }
        if (model_build_cap(&r->m, &c, bs->max_B, Ts, Tt, acts, o->seed, err, sizeof err) ||
            trainer_init_cap(&r->tr, &r->m, &hp, bs->max_B, Tt + 1, rows_cap, o->seed ^ 0xDA7A5EEDull, err,
                             sizeof err))
            cli_fail(PROG, "%s", err);
    }
    const Config *c = &r->m.cfg;
    printf("model: N=%d d_model=%d d_ff=%d h=%d d_k=%d vocab=%d (shared: source, target, output; "
           "Sec. 3.4)\n       post-LN, P_drop %.2f, %zu parameters; max_len %d (the longest source, %d\n"
           "       tokens, + %d + 1 for decoding)\n", c->N, c->d_model, c->d_ff, c->h, c->d_k, c->vocab,
           (double)c->dropout, model_param_count(c), c->max_len, longest_src, OUT_OFFSET);
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
}

static void eval_during_training(const Opts *o, const Data *d, Run *r, double train_s);

static void section_train(const Opts *o, const Data *d, const Batches *bs, Run *r) {
    show_section("4. Training: Adam, warmup, label smoothing, dropout (Sec. 5.3, 5.4)");
    if (!d->generated)
        printf("a real corpus: N=%d d_model=%d d_ff=%d h=%d, P_drop %.2f, %d BPE symbols, %d tokens a batch,\n"
               "%d steps, warmup %d, factor %g (corpus_config in main.c says why; flags override)\n", o->layers,
               o->d_model, o->d_ff, o->heads, (double)o->dropout, o->vocab, o->tokens, o->steps, o->warmup,
               (double)o->factor);
    r->rss_before = rss_now();
    r->train_b = bs;
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
    /* Training time leaves out the evaluations in between (dev perplexity
     * below, --eval-every's translations): eval_s and eval_cpu are theirs. */
    double t0 = now_s(), c0 = cpu_s(), eval_s = 0, eval_cpu = 0;
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
        if (dist_rank() == 0) show_progress("step", (long)r->tr.step, o->steps);   /* stderr, only under --section N */
        if (o->ckpt_every > 0 && r->tr.step % (uint64_t)o->ckpt_every == 0 && i != todo - 1) {
            snprintf(path, sizeof path, "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)r->tr.step);
            save_with_bpe(r, d, path);
            remember_ckpt(r, path, o->n_avg);
        }
        if (dist_rank() == 0 && o->eval_every > 0 && (r->tr.step % (uint64_t)o->eval_every == 0 || i == todo - 1)) {
            double e0 = now_s(), ec = cpu_s();
            eval_during_training(o, d, r, e0 - t0 - eval_s);
            eval_s += now_s() - e0, eval_cpu += cpu_s() - ec;
        }
        if (dist_rank() == 0 && (i == 0 || (i + 1) % every == 0 || i == todo - 1)) {
            double e0 = now_s(), ec = cpu_s(), ppl = perplexity(&r->m, &d->edev, &r->dev_b);
            eval_s += now_s() - e0, eval_cpu += cpu_s() - ec;
            double el = now_s() - t0 - eval_s;
            double eta = el / (i + 1) * (todo - i - 1);
            printf("  step %5llu/%d  loss %.3f  dev ppl %6.3f  lr %.2e  %6.0f tok/s  %5.1fs  ETA %5.1fs\n",
                   (unsigned long long)r->tr.step, o->steps, st.loss, ppl, st.lr, r->tokens / (el > 0 ? el : 1),
                   el, eta);
            fflush(stdout);
        }
    }
    r->train_s = now_s() - t0 - eval_s;
    double train_cpu = cpu_s() - c0 - eval_cpu;
    snprintf(path, sizeof path, "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)r->tr.step);
    save_with_bpe(r, d, path);
    remember_ckpt(r, path, o->n_avg);
    snprintf(path, sizeof path, "%s/model.ckpt", o->out);
    save_with_bpe(r, d, path);
    printf("trained %d steps in %.1f s (%.0f target tokens/s), last loss %.9f\nsaved %s (+ .bpe)\n", todo,
           r->train_s, r->tokens / (r->train_s > 0 ? r->train_s : 1), st.loss, path);
    printf("training CPU time %.1f s (all threads; %.1f s of evaluation in between left out)\n", train_cpu, eval_s);
    free(src);
    free(tin);
    free(tout);
    free(perm);
}

/* ---- section 5: evaluation --------------------------------------------------------------- */

/* avg (n floats) = the element-wise mean of the weights in files[0..k),
 * each a model of config cfg (this run's saves: ckpt_of_this_run vetted
 * those an earlier run left). */
static void average_checkpoints(float *avg, size_t n, const Config *cfg, char (*files)[1024], int k) {
    char err[512] = "";
    memset(avg, 0, n * sizeof(float));
    for (int f = 0; f < k; f++) {
        Model t;
        if (model_load(&t, files[f], 1, 1, 1, NULL, NULL, err, sizeof err)) cli_fail(PROG, "%s", err);
        if (config_differs(&t.cfg, cfg, err, sizeof err) || t.params.n != n)
            cli_fail(PROG, "%s: a different model than the one trained (%s)", files[f], err);
        for (size_t i = 0; i < n; i++) avg[i] += t.params.mem[i];
        model_free(&t);
    }
    for (size_t i = 0; i < n; i++) avg[i] /= (float)k;
}

/* One row of the BLEU table: a checkpoint decoded one way. */
typedef struct {
    char name[48];
    Bleu bleu;          /* sacreBLEU 13a                                    */
    Bleu bleu_none;     /* tokenize='none' (the generated corpus only)      */
    double ppl, secs;
    int exact;
    char **hyp;   /* (test.n) owned strings */
} System;

/* Translates the test set with m: greedy, or the paper's beam search
 * (translate.h's translate_split: each sentence to its own length + 50,
 * KV-cached), and scores it. */
static void run_system(System *s, const char *name, Model *m, const Data *d, Run *r, int greedy, double ppl) {
    char err[512];
    DecodeOpts paper = decode_opts_paper(BPE_BOS, BPE_EOS);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->hyp = xcalloc((size_t)d->test.n, sizeof(char *));
    show_progress(NULL, 0, 0);   /* under --section 6: the stderr line's clock moves on */
    double t0 = now_s();
    if (translate_split(m, &d->bpe, &d->etest, &r->test_b, &paper, greedy, s->hyp, err, sizeof err))
        cli_fail(PROG, "%s: %s", greedy ? "greedy decoding" : "beam search", err);
    s->secs = now_s() - t0;
    s->bleu = corpus_bleu(s->hyp, d->test.tgt, d->test.n, BLEU_TOK_13A);
    s->bleu_none = corpus_bleu(s->hyp, d->test.tgt, d->test.n, BLEU_TOK_NONE);
    s->ppl = ppl;
    s->exact = 0;
    for (int i = 0; i < d->test.n; i++) s->exact += s->hyp[i] && !strcmp(s->hyp[i], d->test.tgt[i]);
}

/* hyp[0..n) to OUT/file, a line each; 0, or 1 after a warning */
static int write_hyps(const Opts *o, const char *file, char **hyp, int n) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", o->out, file);
    FILE *f = fopen(path, "w");
    if (f)
        for (int i = 0; i < n; i++) fprintf(f, "%s\n", hyp[i] ? hyp[i] : "");
    if (!f || (ferror(f) | fclose(f))) {
        fprintf(stderr, "%s: warning: could not write %s\n", PROG, path);
        return 1;
    }
    return 0;
}

/* --eval-every K: every K steps, dev perplexity and the greedy test BLEU
 * (13a), the hypotheses in OUT/test_greedy_stepNNNNNN.txt: a learning curve
 * in quality against training time, which make bench-translate reads. */
static void eval_during_training(const Opts *o, const Data *d, Run *r, double train_s) {
    System s;
    char file[64];
    double ppl = perplexity(&r->m, &d->edev, &r->dev_b);
    run_system(&s, "greedy", &r->m, d, r, 1, ppl);
    snprintf(file, sizeof file, "test_greedy_step%06llu.txt", (unsigned long long)r->tr.step);
    write_hyps(o, file, s.hyp, d->test.n);
    printf("  eval step %llu: train %.1f s, dev ppl %.3f, test BLEU (greedy, 13a) %.2f\n",
           (unsigned long long)r->tr.step, train_s, ppl, s.bleu.score);
    for (int i = 0; i < d->test.n; i++) free(s.hyp[i]);
    free(s.hyp);
}

/* ---- memory: what the run needs, against what it used -------------------------------------
 * Floats one training batch of B pairs of Ts source and Tt target tokens
 * needs: the model's activations as model.c lays them out (an encoder, a
 * decoder and a backward region: model_acts_floats) and the trainer's loss
 * gradient, per-position losses and targets (train.c). The logits dominate
 * at a large vocabulary: logits and log-probs of every target position, and
 * their gradient, B x Tt x V three times. */
static double activation_floats(const Config *c, int B, int Ts, int Tt) {
    return (double)model_acts_floats(c, B, Ts, Tt) + (double)B * Tt * (c->vocab + 2.0);
}

/* Floats of a decoder for B sentences x K beams, Ts source tokens and T
 * output positions, as decoder_new counts them: the encoder output and the
 * cross-attention K, V once per sentence, the self-attention K, V cache
 * (two copies, for reordering beams) and one step's activations per row,
 * where the logits are only rows x V. */
static double decoder_floats(const Config *c, double B, int K, int Ts, int T) {
    double R = B * K, D = c->d_model, N = c->N, H = c->h, hk = H * c->d_k, hv = H * c->d_v, F = c->d_ff, V = c->vocab;
    double wide = hk > hv ? hk : hv, keys = Ts > T ? Ts : T;
    return B * Ts * (D + N * (hk + hv) + wide) + 2.0 * N * R * T * (hk + hv) +
           R * (4 * D + 4 * wide + F + H * keys + 2 * V + N * H * Ts + 4.0 * T);
}

static void print_memory(const Run *r) {
    const Model *m = &r->m;
    const Config *c = &m->cfg;
    const Batches *t = &r->test_b;
    double MB = 1e6, P = 4.0 * model_param_count(c) * sizeof(float);
    /* as allocated: the activation block and the trainer's per-position
     * buffers (build_model sized both by the largest batch that runs; the
     * trainer is freed by now, its rows are the largest B*Tt of training),
     * and the model's host-side masks (max_B, T, T) x 4 bytes and last rows */
    int rows = 1;
    for (int k = 0; k < r->train_b->n; k++) rows = max2(rows, r->train_b->b[k].n * r->train_b->b[k].Tt);
    double T = m->max_Ts > m->max_Tt ? m->max_Ts : m->max_Tt;
    double A = ((double)m->acts_floats + (double)rows * (c->vocab + 2.0) + (double)m->max_B * c->vocab) *
               sizeof(float) + 4.0 * m->max_B * T * T;
    int beam_T = t->max_Ts + OUT_OFFSET < c->max_len ? t->max_Ts + OUT_OFFSET : c->max_len;
    double Dc = decoder_floats(c, t->max_B, 4, t->max_Ts, beam_T) * sizeof(float);
    double sum = r->rss_before + P + A + Dc;
    /* what one step needs: the largest single training batch */
    const Batch *big = &r->train_b->b[0];
    double most = 0;
    for (int k = 0; k < r->train_b->n; k++) {
        const Batch *b = &r->train_b->b[k];
        double a = activation_floats(c, b->n, b->Ts, b->Tt) * sizeof(float);
        if (a > most) most = a, big = b;
    }
    double need = r->rss_before + P + most + Dc;
    double per_dim = activation_floats(c, m->max_B, m->max_Ts, m->max_Tt) * sizeof(float);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak = ru.ru_maxrss * 1024.0;
    char line[640];
    snprintf(line, sizeof line, "weights + gradients + Adam's m and v %.1f, activations and loss gradient as "
             "allocated (the largest batch that runs) %.1f, beam search's decoder [%d sentences x 4 beams x %d "
             "positions] %.1f, resident before the model (program, data) %.1f: sum %.1f", P / MB, A / MB, t->max_B,
             beam_T, Dc / MB, r->rss_before / MB, sum / MB);
    print_wrapped("memory, MB: ", line);
    snprintf(line, sizeof line, "the largest training batch, [%d rows x %d / %d tokens], needs %.1f MB of "
             "activations and loss gradient; with the weights, gradients, Adam, the decoder and what was resident "
             "before: %.1f MB (sized per dimension instead, the most rows of any batch times the longest of any, "
             "[%d x %d / %d], the activations would take %.1f MB: %.1fx)", big->n, big->Ts, big->Tt, most / MB,
             need / MB, m->max_B, m->max_Ts, m->max_Tt, per_dim / MB, per_dim / most);
    print_wrapped("needed, MB: ", line);
    snprintf(line, sizeof line, "(getrusage ru_maxrss) %.1f MB, %.2fx what is needed: %s", peak / MB, peak / need,
             peak <= 2 * need ? "within 2x" : "MORE than 2x: something holds memory this count misses");
    print_wrapped("peak resident memory ", line);
}

static void section_evaluate(const Opts *o, const Data *d, Run *r) {
    show_section("5. Evaluation: greedy and beam BLEU, averaging, PPL (Sec. 6.1, Table 3)");
    double t0 = now_s();
    DecodeOpts paper = decode_opts_paper(BPE_BOS, BPE_EOS);   /* Sec. 6.1: beam 4, alpha 0.6, input + 50 */
    System sys[4];
    int ns = 0, n_avg = r->n_ckpt;
    double ppl_last = perplexity(&r->m, &d->edev, &r->dev_b);
    run_system(&sys[ns++], "last checkpoint, greedy", &r->m, d, r, 1, ppl_last);
    run_system(&sys[ns++], "last checkpoint, beam 4, alpha 0.6", &r->m, d, r, 0, ppl_last);
    if (n_avg >= 2) {
        /* The averaged weights go into the trained model for a while: its
         * activations serve them too (a second model would hold a second
         * set), and the trained weights come back afterwards. */
        size_t n = r->m.params.n;
        float *keep = xmalloc(n * sizeof(float));
        memcpy(keep, r->m.params.mem, n * sizeof(float));
        average_checkpoints(r->m.params.mem, n, &r->m.cfg, r->ckpt, n_avg);
        model_push(&r->m);
        char name[64], path[1100], err[512];
        double ppl_avg = perplexity(&r->m, &d->edev, &r->dev_b);
        snprintf(name, sizeof name, "average of last %d checkpoints, greedy", n_avg);
        run_system(&sys[ns++], name, &r->m, d, r, 1, ppl_avg);
        snprintf(name, sizeof name, "average of last %d, beam 4, alpha 0.6", n_avg);
        run_system(&sys[ns++], name, &r->m, d, r, 0, ppl_avg);
        snprintf(path, sizeof path, "%s/model_avg.ckpt", o->out);
        if (model_save(&r->m, path, NULL, err, sizeof err)) fprintf(stderr, "%s: %s\n", PROG, err);
        snprintf(path, sizeof path, "%s/model_avg.ckpt.bpe", o->out);   /* for --translate --model */
        if (bpe_save(&d->bpe, path, err, sizeof err)) fprintf(stderr, "%s: %s\n", PROG, err);
        memcpy(r->m.params.mem, keep, n * sizeof(float));
        model_push(&r->m);
        free(keep);
    }
    char sig[128];
    bleu_signature(sig, sizeof sig, BLEU_TOK_13A);
    printf("test set: %d sentences; BLEU as sacreBLEU %s computes it, its standard 13a tokenizer\n"
           "(signature %s)%s; a test checks\n"
           "bleu.c against sacrebleu to 0.01.\n"
           "decoding: chapter 09's decoder (common/model/decode.h, KV cache), each sentence to its own length\n"
           "+ %d tokens at most (Sec. 6.1); greedy, and beam %d with length penalty alpha %.1f, early stop\n",
           d->test.n, BLEU_SACREBLEU_VERSION, sig,
           d->generated ? ";\n'none': split at spaces only, as the generated text is tokenised already" : "",
           paper.offset, paper.beam, (double)paper.alpha);
    printf("  %-37s %6s%s %20s %8s %6s %7s\n", "system", "BLEU", d->generated ? "  none" : "", "1/2/3/4-gram prec.",
           "dev PPL", "exact", "decode");
    for (int i = 0; i < ns; i++) {
        const Bleu *b = &sys[i].bleu;
        char none[16] = "";
        if (d->generated) snprintf(none, sizeof none, " %6.2f", sys[i].bleu_none.score);
        printf("  %-37s %6.2f%s %5.1f/%4.1f/%4.1f/%4.1f %8.3f %6d %6.1fs\n", sys[i].name, b->score, none, b->prec[0],
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
    static const char *const files[4] = {"test_hyp.txt", "test_hyp_beam.txt", "test_hyp_avg.txt",
                                         "test_hyp_avg_beam.txt"};
    char line[1200], label[1100];
    size_t len = 0;
    for (int k = 0; k < ns; k++) {
        int bad = write_hyps(o, files[k], sys[k].hyp, d->test.n);
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s", k ? ", " : "", bad ? "(not written)" : files[k]);
    }
    printf("evaluation took %.1f s\n", now_s() - t0);
    snprintf(label, sizeof label, "test hypotheses in %s/: ", o->out);
    snprintf(line + len, sizeof line - len, " (the table's rows, in order)");
    print_wrapped(label, line);
    print_memory(r);
    for (int k = 0; k < ns; k++) {
        for (int i = 0; i < d->test.n; i++) free(sys[k].hyp[i]);
        free(sys[k].hyp);
    }
}

/* ---- section 6 and --translate: the alignment ------------------------------------------- */

/* Typed text in the generated corpus's form: a capital first letter, ","
 * and "." as tokens of their own, a final " .". out: 3 strlen(in) + 4 bytes. */
static void normalise(const char *in, char *out, size_t len) {
    size_t o = 0;
    for (const char *p = in; *p && o + 4 < len; p++) {
        if (*p == ',' || *p == '.') {
            out[o++] = ' ';
            out[o++] = *p;
            out[o++] = ' ';
        } else {
            out[o++] = *p == '\t' || *p == '\n' || *p == '\r' ? ' ' : *p;
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

/* Typed text as a real corpus has it (corpus_load_tsv's rule): tabs and
 * line ends are spaces, runs of spaces one, no space at either end. */
static void squeeze(const char *in, char *out) {
    char *w = out;
    int sp = 1;
    for (const char *p = in; *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            if (!sp) *w++ = ' ';
            sp = 1;
        } else *w++ = *p, sp = 0;
    }
    if (w > out && w[-1] == ' ') w--;
    *w = 0;
}

/* A copy of src's weights in a model with room for one sentence of Ts
 * source and Tt target tokens: the trained model's activations hold
 * training batches, not an output of input + 50 tokens fed back whole. */
static void model_for_one(Model *dst, const Model *src, int Ts, int Tt) {
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
        if (say) print_wrapped(label, line);
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
 * plotted as `name`; then tr (the generated sentence's words) traced
 * through the heads, or with tr NULL the alignment in words; heads = 1:
 * every encoder head to PNGs (and what each does, in words, with tr NULL). */
static void show_alignment(Model *m, const Bpe *bpe, const char *en, const Trace *tr, int heads, const char *out,
                           const char *name) {
    int ns = bpe_encode(bpe, en, NULL, 0), Ts = ns + 1;
    int *src = xmalloc(((size_t)Ts + 1) * sizeof(int)), *ys = xmalloc(((size_t)Ts + OUT_OFFSET + 2) * sizeof(int));
    bpe_encode(bpe, en, src, ns);
    src[ns] = BPE_EOS;
    int Tt = translate_one(m, src, Ts, ys);
    size_t dl = bpe_decode(bpe, ys + 1, Tt, NULL, 0) + 1;
    char *de = xmalloc(dl);
    bpe_decode(bpe, ys + 1, Tt, de, dl);
    print_wrapped("en: ", en);
    print_wrapped("de: ", de);
    if (!tr) print_ids(bpe, "output", ys + 1, Tt);   /* the model's own tokens, </s> last if it ended */
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

static void section_attention(const Opts *o, Run *r, const Data *d) {
    show_section(d->generated ? "6. What the heads learned: the verb moves to the end (Figures 3-5)"
                              : "6. What the heads learned: one dev sentence (Figures 3-5)");
    char en[CORPUS_MAX_LINE + 1], de[CORPUS_MAX_LINE + 1];
    demo_sentence(d, en, sizeof en, de, sizeof de);
    if (!d->generated) printf("the first dev sentence of 6 to 12 English words (none: the first dev sentence)\n");
    int seen = 0;
    for (int i = 0; i < d->train.n && !seen; i++) seen = !strcmp(d->train.src[i], en);
    printf("this sentence is %s the training set\n", seen ? "in" : "not in");
    print_wrapped("reference: ", de);
    int Ts = bpe_encode(&d->bpe, en, NULL, 0) + 1;
    if (Ts + OUT_OFFSET > r->m.cfg.max_len) {   /* build_model sized max_len for it: a resumed model's may not be */
        printf("(%d tokens: with %d more for the output it does not fit the model's max_len %d; skipped)\n", Ts,
               OUT_OFFSET, r->m.cfg.max_len);
        return;
    }
    Model one;
    model_for_one(&one, &r->m, Ts, Ts + OUT_OFFSET);
    const Trace tr = {"sees", "sieht", "woman", "Frau"};
    show_alignment(&one, &d->bpe, en, d->generated ? &tr : NULL, 1, o->out, "cross_attn");
    model_free(&one);
}

/* --translate: load the checkpoint and its vocabulary, translate one sentence. */
static int run_translate(const Opts *o) {
    char err[1400], path[1100], bp[1200], unk[256];
    snprintf(path, sizeof path, "%s", o->model ? o->model : "");
    if (!o->model) snprintf(path, sizeof path, "%s/model.ckpt", o->out);
    snprintf(bp, sizeof bp, "%s.bpe", path);
    /* Nothing but spaces is nothing to translate: refused before the
     * generated corpus's form would make it ".", and before any file */
    if (!o->translate[strspn(o->translate, " \t\n\r\v\f")]) {
        fprintf(stderr, "%s: error: --translate: the sentence is %s; give the English sentence to "
                "translate\n", PROG, o->translate[0] ? "blank (only spaces)" : "empty");
        return 2;
    }
    Bpe bpe;
    Model m, one;
    int rc = bpe_load(&bpe, bp, err, sizeof err);
    if (rc == 1)   /* missing: training writes it */
        fprintf(stderr, "%s: error: %s\n  (train first: build/11_translation --out %s)\n", PROG, err, o->out);
    else if (rc)   /* there but unusable: bpe_load's message says what to do */
        fprintf(stderr, "%s: error: %s\n", PROG, err);
    if (rc) return rc;
    /* written as the training text was (bpe.h's tokenised): the generated
     * corpus's form, or as typed, with spaces squeezed */
    char *text = xmalloc(3 * strlen(o->translate) + 8);
    if (bpe.tokenised) normalise(o->translate, text, 3 * strlen(o->translate) + 8);
    else squeeze(o->translate, text);
    if (model_load(&m, path, 1, 1, 1, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "%s: error: %s\n", PROG, err);
        free(text);
        bpe_free(&bpe);
        return 2;
    }
    /* The vocabulary must be the model's: its ids index the model's
     * embedding rows, so a .bpe of another run reads ids as the wrong
     * subwords. A checkpoint records no identity of its BPE (checkpoint.h:
     * the format has no field for one), only the vocabulary size in its
     * config; both files are written together (save_with_bpe), so a
     * mismatch means one of them was copied or replaced by hand. */
    if (m.cfg.vocab != bpe.vocab || m.cfg.pad_id != BPE_PAD) {
        if (m.cfg.vocab != bpe.vocab)
            fprintf(stderr, "%s: error: --translate: the vocabulary %s has %d symbols, but the model %s was "
                    "trained with %d: they come from different runs\n  (--translate reads MODEL.bpe: the "
                    "vocabulary saved with that model, or train again: build/11_translation --out DIR)\n", PROG,
                    bp, bpe.vocab, path, m.cfg.vocab);
        else
            fprintf(stderr, "%s: error: --translate: the model %s pads with id %d, not <pad> (%d): not a model "
                    "of this chapter\n", PROG, path, m.cfg.pad_id, BPE_PAD);
        model_free(&m);
        free(text);
        bpe_free(&bpe);
        return 2;
    }
    int max_len = m.cfg.max_len, Ts = bpe_encode(&bpe, text, NULL, 0) + 1;
    if (Ts + OUT_OFFSET > max_len) {
        fprintf(stderr, "%s: error: --translate: %d subword tokens; this model takes at most %d\n"
                "  (its positional table has max_len %d rows, and the output may be input + %d, Sec. 6.1)\n",
                PROG, Ts - 1, max_len - OUT_OFFSET - 1, max_len, OUT_OFFSET);
        model_free(&m);
        free(text);
        bpe_free(&bpe);
        return 2;
    }
    model_for_one(&one, &m, Ts, Ts + OUT_OFFSET);
    model_free(&m);
    show_section("Translate (beam search: beam 4, alpha 0.6; Sec. 6.1)");
    print_segmentation(&bpe, "source", text);
    /* nothing is refused: a new word is spelled from subwords, a new character is <unk> */
    /* the user's words and characters, printed escaped (an ESC typed in is \x1b) */
    char shown[4 * sizeof unk];
    if (bpe_unknown_word(&bpe, text, unk, sizeof unk))
        printf("a word training never had, e.g. \"%s\": spelled from the subwords it did have\n",
               fio_escape(shown, sizeof shown, unk, (size_t)-1));
    int n_unk = bpe_unknown_chars(&bpe, text, unk, sizeof unk);
    if (n_unk)
        printf("characters training never saw (%d, each one <unk>): %s\n", n_unk,
               fio_escape(shown, sizeof shown, unk, (size_t)-1));
    show_alignment(&one, &bpe, text, NULL, 0, o->out, "translate_attn");
    model_free(&one);
    free(text);
    bpe_free(&bpe);
    return 0;
}

int main(int argc, char **argv) {
    /* vocab .. dropout left 0 (steps, factor, dropout -1): the corpus's configuration (corpus_config) */
    Opts o = {.n_train = 10000, .n_dev = 0, .n_test = 500, .max_rows = 96, .ckpt_every = -1, .n_avg = 5,
              .threads = 1, .micro = 1, .steps = -1, .factor = -1, .eps_ls = 0.1f, .dropout = -1, .seed = 42,
              .out = "out/11_translation"};
    int quick = 0;
    if (cli_given(argc, argv, "--quick"))
        o.n_train = 300, o.n_dev = 10, o.n_test = 10, o.steps = 4, o.layers = 1, o.d_model = 16, o.heads = 2,
        o.d_ff = 32, o.vocab = 200, o.tokens = 300, o.ckpt_every = 2;
    CliOption opts[] = {
        {"--train-size", CLI_INT, &o.n_train, "generated training pairs", 1, 2000000},
        {"--dev-size", CLI_INT, &o.n_dev, "dev pairs (perplexity); default 300, or 500 with --corpus ding", 0, 100000},
        {"--test-size", CLI_INT, &o.n_test, "test pairs (BLEU)", 1, 100000},
        {"--corpus", CLI_STRING, &o.corpus, "a TSV file (source<TAB>target, UTF-8), or ding: the Ding dictionary", 0, 0},
        {"--ding-phrases", CLI_FLAG, &o.ding_phrases, "with --corpus ding: train on its word/phrase pairs too", 0, 0},
        {"--dev", CLI_STRING, &o.dev, "dev pairs from this TSV file instead of a split", 0, 0},
        {"--test", CLI_STRING, &o.test, "test pairs from this TSV file instead of a split", 0, 0},
        {"--vocab", CLI_INT, &o.vocab, "BPE vocabulary size, shared (paper: 37000); default 800 generated, 2000 a real corpus", 1, 1000000},
        {"--tokens", CLI_INT, &o.tokens, "token budget per batch and side (paper: 25000); default 1000 generated, 2000 real", 1, 10000000},
        {"--max-rows", CLI_INT, &o.max_rows, "at most this many sentence pairs per batch", 1, 100000},
        {"--layers", CLI_INT, &o.layers, "N (paper 6); default 2 generated, 3 real", 1, 64},
        {"--d-model", CLI_INT, &o.d_model, "d_model (paper 512); default 64 generated, 128 real", 2, 4096},
        {"--d-ff", CLI_INT, &o.d_ff, "d_ff (paper 2048); default 256 generated, 512 real", 1, 16384},
        {"--heads", CLI_INT, &o.heads, "h; must divide d_model (paper 8); default 4", 1, 256},
        {"--steps", CLI_INT, &o.steps, "train until this many steps in total; default 1500 generated, 5000 real", 0, 100000000},
        {"--warmup", CLI_INT, &o.warmup, "warmup_steps of Sec. 5.3 (paper 4000); default 200 generated, 800 real", 1, 100000000},
        {"--factor", CLI_FLOAT, &o.factor, "multiplies the Sec. 5.3 learning rate; default 0.6 generated, 1 real", 1e-6, 1e6},
        {"--label-smoothing", CLI_FLOAT, &o.eps_ls, "eps_ls (paper 0.1)", 0, 0.99},
        {"--dropout", CLI_FLOAT, &o.dropout, "P_drop (paper 0.1); default 0.1 generated, 0.3 real", 0, 0.95},
        {"--checkpoint-every", CLI_INT, &o.ckpt_every, "save every K steps (0: only at the end); default 50 generated, 250 real", 0, 100000000},
        {"--average", CLI_INT, &o.n_avg, "average the last this many checkpoints (paper 5)", 1, N_AVG_MAX},
        {"--resume", CLI_STRING, &o.resume, "continue the run saved in this checkpoint", 0, 0},
        {"--translate", CLI_STRING, &o.translate, "translate this English sentence with --model", 0, 0},
        {"--model", CLI_STRING, &o.model, "checkpoint for --translate (default OUT/model.ckpt)", 0, 0},
        {"--threads", CLI_INT, &o.threads, "OpenMP threads (1: steadiest on a shared machine)", 1, 256},
        {"--micro-batches", CLI_INT, &o.micro, "G slices per step, gradients added as a fixed tree: mpirun -np P (P dividing G) gives one process's bits (chapter 13)", 1, TRAIN_MAX_MICRO},
        {"--seed", CLI_U64, &o.seed, "seed for the corpus, weights, batches, dropout", 0, 0},
        {"--out", CLI_STRING, &o.out, "output folder", 0, 0},
        {"--eval-every", CLI_INT, &o.eval_every, "every K steps: dev PPL and greedy test BLEU, hypotheses saved (0: off)", 0, 100000000},
        {"--dump-data", CLI_STRING, &o.dump, "also write the encoded splits and batches to this folder (make bench-translate)", 0, 0},
        {"--quick", CLI_FLAG, &quick, "a short run: 300 pairs, 4 steps of a 1-layer d_model 16 model (make smoke)", 0, 0},
    };
    setvbuf(stdout, NULL, _IOLBF, 0);   /* errors (stderr) land after what was printed */
    dist_init(&argc, &argv, PROG);      /* one rank unless started by mpirun (chapter 13) */
    cli_parse(argc, argv, PROG, "English->German translation end to end (Sec. 5.1, 6.1, Table 2)", opts,
              CLI_COUNT(opts));
    show_lecture_sections(7);   /* its banners: "1." .. "7." */
    corpus_config(&o);
    if (o.d_model % o.heads) cli_fail(PROG, "--d-model (%d) must be divisible by --heads (%d)", o.d_model, o.heads);
    if (o.ding_phrases && !(o.corpus && !strcmp(o.corpus, "ding"))) cli_fail(PROG, "--ding-phrases needs --corpus ding");
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
    if (o.dump && dist_rank() == 0) dump_data(o.dump, &d, &bs);
    section_train(&o, &d, &bs, &r);
    dist_detach(&r.dt);
    trainer_free(&r.tr);                /* Adam's moments and the loss gradient: training is over */
    if (dist_rank() == 0) {             /* the others trained; evaluation is rank 0's */
        section_evaluate(&o, &d, &r);
        section_attention(&o, &r, &d);
        printf("\nwhole run: %.1f s\n", now_s() - t0);
    }
    model_free(&r.m);
    batches_free(&bs), batches_free(&r.dev_b), batches_free(&r.test_b);
    encoded_free(&d.etrain), encoded_free(&d.edev), encoded_free(&d.etest);
    corpus_free(&d.train), corpus_free(&d.dev), corpus_free(&d.test);
    bpe_free(&d.bpe);
    dist_finalize();
    return 0;
}

/* 12_variations - Table 3 ("Variations on the Transformer architecture",
 * Sec. 6.2) rerun in miniature on chapter 11's English-German task.
 *
 * One base model scaled to the task, then one model per row of Table 3,
 * each trained for the same number of steps on the same batches in the same
 * order (the paper: 100K steps each), then dev perplexity per subword and
 * dev BLEU (greedy decoding; the paper uses beam search), parameters, time:
 *   (A) heads h = 1, 4, 16 with d_k = d_v = d_model / h (constant compute)
 *   (B) d_k halved alone
 *   (C) N, d_model, d_ff each halved and doubled
 *   (D) P_drop 0 and 0.2, eps_ls 0 and 0.2
 *   (E) learned positional embeddings instead of the sinusoids (Sec. 3.5)
 * The base runs with several seeds (2; 3 with --all): a row "differs" from
 * base only when it lies outside their spread, a direction within twice it
 * is weak, a row whose dev PPL is over twice the base's has not converged
 * and is not counted, and a base with dev BLEU under 10 has not learned
 * enough for any comparison (verdict.h).
 *
 *   build/12_variations                    the default: the base (2 seeds) and 4 rows,
 *                                          6 models, 2-3 minutes (resumes a stopped run)
 *   build/12_variations --all              every row of Table 3, 3 base seeds (18 models)
 *   build/12_variations --rows A,E         some groups (base, A, B, C, D, E) or rows (h=1, N/2)
 *   build/12_variations --steps 100        a shorter budget (a new results file key)
 *   build/12_variations --corpus ding      real sentences: the Ding dictionary (apt-get
 *                                          install trans-de-en; common/text/corpus.h)
 *
 * Files in --out: results.tsv (one line per finished row, rewritten
 * atomically after each: Ctrl-C loses at most the row in progress), table.md,
 * variations.dat/.gp/.png (each row's PPL and BLEU minus the base's, beside
 * the paper's on the same axis, with the base seeds' band).
 *
 * A rewrite of results.tsv loses no line it read. Rows of other settings
 * (another --steps, --seed, ...) are kept as they were, however many. Two
 * results files pasted into one repeat keys: the first line of a key is
 * the result used, each later one is kept in the file, unused, and the run
 * says how many; so is a line whose key this program does not know. A
 * number no run writes (PPL -5, BLEU 1e9, params -1) stops the run (exit
 * 2) naming the line and the column, before it reaches the table; table.md
 * and variations.dat are replaced together or, on a full disk, neither.
 *
 * --rows and every row's configuration are checked before any row trains.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "fast/parallel.h"

#include "io/cli.h"
#include "core/fileio.h"
#include "model/model.h"
#include "io/show.h"
#include "io/plot.h"
#include "model/train.h"
#include "task/translate.h"

#include "verdict.h"

static const char *PROG = "12_variations";

/* ---- the rows of Table 3, ours beside the paper's ------------------------------
 * Ours are edits of the base made the way the paper makes them; each sits
 * beside the paper row whose change points the same way. The paper's
 * numbers: Table 3, newstest2013 (dev), PPL per wordpiece, BLEU, parameters
 * x 10^6 (0 where the paper's cell is empty). */
typedef enum { E_BASE, E_HEADS, E_DK_HALF, E_N, E_DMODEL, E_DFF, E_DROP, E_LS, E_POS } Edit;
typedef struct {
    const char *group, *label;  /* "A", "h=1"                                    */
    Edit edit;
    float arg;                  /* the new value; for N, d_model, d_ff a factor  */
    const char *paper;          /* the paper's row it is set beside              */
    double p_ppl, p_bleu;
    int p_params;
} Row;

static const Row ROWS[] = {
    {"base", "base", E_BASE, 0, "base", 4.92, 25.8, 65},
    {"A", "h=1", E_HEADS, 1, "h=1 d_k=512", 5.29, 24.9, 0},
    {"A", "h=4", E_HEADS, 4, "h=4 d_k=128", 5.00, 25.5, 0},
    {"A", "h=16", E_HEADS, 16, "h=16 d_k=32", 4.91, 25.8, 0},
    {"B", "d_k/2", E_DK_HALF, 0.5f, "d_k=32", 5.01, 25.4, 60},
    {"C", "N/2", E_N, 0.5f, "N=4", 5.19, 25.3, 50},
    {"C", "2N", E_N, 2, "N=8", 4.88, 25.5, 80},
    {"C", "d_model/2", E_DMODEL, 0.5f, "d_model=256", 5.75, 24.5, 28},
    {"C", "2d_model", E_DMODEL, 2, "d_model=1024", 4.66, 26.0, 168},
    {"C", "d_ff/2", E_DFF, 0.5f, "d_ff=1024", 5.12, 25.4, 53},
    {"C", "2d_ff", E_DFF, 2, "d_ff=4096", 4.75, 26.2, 90},
    {"D", "P_drop=0", E_DROP, 0.0f, "P_drop=0.0", 5.77, 24.6, 0},
    {"D", "P_drop=0.2", E_DROP, 0.2f, "P_drop=0.2", 4.95, 25.5, 0},
    {"D", "eps_ls=0", E_LS, 0.0f, "eps_ls=0.0", 4.67, 25.3, 0},
    {"D", "eps_ls=0.2", E_LS, 0.2f, "eps_ls=0.2", 5.47, 25.7, 0},
    {"E", "learned PE", E_POS, 1, "pos. embedding", 4.92, 25.7, 0},
};
#define N_ROWS ((int)(sizeof ROWS / sizeof ROWS[0]))
#define MAX_SEEDS 5
#define MAX_JOBS (N_ROWS + MAX_SEEDS)

/* The default run: the base with 2 seeds (a spread to judge by) and four
 * rows whose directions the recorded run shows far outside it at 600 steps,
 * two as the paper has them on both columns (h=1, N/2), label smoothing's
 * split (eps_ls=0: better PPL, worse BLEU, as Sec. 5.4 says) and one
 * against the paper (learned positions); 6 models, 2-3 minutes. --all:
 * every row, 3 base seeds (18 models, the recorded run). */
static const char DEFAULT_ROWS[] = "base,h=1,N/2,eps_ls=0,E";
static const char ALL_ROWS[] = "base,A,B,C,D,E";

typedef struct {
    int n_train, n_dev, vocab, tokens, max_rows, steps, warmup, seeds, threads, all;
    int layers, d_model, d_ff, heads;
    float factor, eps_ls, dropout;
    uint64_t seed;
    const char *rows, *out, *results;
    const char *corpus;   /* NULL: generated; "ding"; or a source<TAB>target file */
} Opts;

/* A finished row: what results.tsv holds. */
typedef struct {
    char key[32];         /* "base#1", "A:h=1"                               */
    long tokens;          /* target tokens trained on                        */
    size_t params;
    double ppl, bleu, train_s, eval_s;
} Result;

/* Lines of results.tsv kept as they were, in the order read; grows. */
typedef struct {
    char **line;          /* [n] each with its '\n'                           */
    int n, cap;
} Lines;

typedef struct {
    Result r[MAX_JOBS];   /* one per key: at most N_ROWS - 1 + MAX_SEEDS    */
    int n;
    char budget[256];     /* the settings a result is only valid for        */
    char path[1100];
    Lines other;          /* lines of other settings: written first          */
    Lines unused;         /* this budget's repeated or unknown keys: last    */
} Results;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Ctrl-C: the results file holds every finished row (each save is a
 * rename), so stopping is safe; say so and how to go on. */
static void on_sigint(int sig) {
    (void)sig;
    static const char msg[] = "\n12_variations: interrupted; finished rows are in results.tsv: "
                              "run the same command again to resume\n";
    ssize_t rc = write(2, msg, sizeof msg - 1);
    (void)rc;
    _exit(130);
}

/* ---- section 1: the task and the base -------------------------------------------- */
static Config base_config(const Opts *o, const TrTask *t) {
    Config c = config_base();
    c.N = o->layers, c.d_model = o->d_model, c.d_ff = o->d_ff, c.h = o->heads;
    c.d_k = c.d_v = o->d_model / o->heads;
    c.vocab = t->bpe.vocab, c.max_len = t->max_len, c.dropout = o->dropout, c.pad_id = BPE_PAD;
    return c;
}

/* The row's config and eps_ls; 0, or 2 with why the row cannot be built. */
static int row_config(const Opts *o, const TrTask *t, const Row *w, Config *c, float *eps, char *why, size_t n) {
    *c = base_config(o, t);
    *eps = o->eps_ls;
    int k = (int)w->arg;
    switch (w->edit) {
    case E_BASE: break;
    case E_HEADS:
        if (c->d_model % k) return snprintf(why, n, "d_model %d is not divisible by h=%d", c->d_model, k), 2;
        c->h = k, c->d_k = c->d_v = c->d_model / k;
        break;
    case E_DK_HALF: c->d_k = c->d_k / 2 > 0 ? c->d_k / 2 : 1; break;
    case E_N: c->N = (int)(c->N * w->arg + 0.5f) > 0 ? (int)(c->N * w->arg + 0.5f) : 1; break;
    case E_DMODEL:
        c->d_model = (int)(c->d_model * w->arg + 0.5f);
        if (c->d_model % c->h || c->d_model < c->h)
            return snprintf(why, n, "d_model %d is not divisible by h=%d", c->d_model, c->h), 2;
        c->d_k = c->d_v = c->d_model / c->h;
        break;
    case E_DFF: c->d_ff = (int)(c->d_ff * w->arg + 0.5f) > 0 ? (int)(c->d_ff * w->arg + 0.5f) : 1; break;
    case E_DROP: c->dropout = w->arg; break;
    case E_LS: *eps = w->arg; break;
    case E_POS: c->pos = POS_LEARNED; break;
    }
    return config_validate(c, why, n);
}

/* The task on a corpus read from a file, as chapter 11's --corpus: "ding"
 * is the Ding dictionary's example sentences with the split that needs no
 * seed; any other name is a source<TAB>target file split by --seed. Dev
 * takes --dev-size pairs and as many are held out as test (not used here),
 * the rest trains. Prints where the pairs came from; what: the same in brief. */
static void task_from_file(const Opts *o, TrTask *t, char *what, size_t n) {
    char err[512];
    Corpus all, train, dev, test;
    int ding = !strcmp(o->corpus, "ding");
    int rc = ding ? corpus_load_ding(&all, NULL, DING_PATH, err, sizeof err)
                  : corpus_load_tsv(&all, o->corpus, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: error: --corpus %s: %s\n", PROG, o->corpus, err);
        exit(rc);
    }
    rc = ding ? corpus_split_fixed(&all, &train, &dev, &test, o->n_dev, o->n_dev, err, sizeof err)
              : corpus_split(&all, &train, &dev, &test, o->n_dev, o->n_dev, o->seed, err, sizeof err);
    if (ding) {
        printf("read %d example sentence pairs from the Ding dictionary (%s, GPL-2+);\n"
               "dev and test are cut by a hash of the English: the same for every --seed\n", all.n, DING_PATH);
        snprintf(what, n, "Ding, fixed split");
    } else {
        printf("read %d pair%s from %s\n", all.n, all.n == 1 ? "" : "s", o->corpus);
        snprintf(what, n, "from a file, split by seed %llu", (unsigned long long)o->seed);
    }
    corpus_free(&all);
    if (rc) cli_fail(PROG, "--corpus %s: %s", o->corpus, err);
    rc = trtask_build_from(t, &train, &dev, o->vocab, o->tokens, o->max_rows, o->seed, err, sizeof err);
    corpus_free(&train), corpus_free(&dev), corpus_free(&test);
    if (rc) cli_fail(PROG, "%s", err);
}

static void section_task(const Opts *o, TrTask *t, Results *res) {
    char err[512], what[64];
    show_section("1. The task: chapter 11's English-German, one budget for all (Sec. 6.2)");
    if (o->corpus) {
        task_from_file(o, t, what, sizeof what);
    } else {
        if (trtask_build(t, o->n_train, o->n_dev, o->vocab, o->tokens, o->max_rows, o->seed, err, sizeof err))
            cli_fail(PROG, "%s", err);
        snprintf(what, sizeof what, "generated, seed %llu", (unsigned long long)o->seed);
    }
    Config c = base_config(o, t);
    if (o->d_model % o->heads) cli_fail(PROG, "--d-model %d is not divisible by --heads %d", o->d_model, o->heads);
    printf("corpus: %d training pairs, %d dev pairs (%s); BPE vocabulary %d\n", t->train.n, t->dev.n, what,
           t->bpe.vocab);
    printf("batches: %d of at most %d tokens a side (%d rows at most); largest src [batch=%d, seq=%d]\n",
           t->train_b.n, o->tokens, o->max_rows, t->train_b.max_B, t->train_b.max_Ts);
    printf("base (paper: N=6 d_model=512 d_ff=2048 h=8 d_k=d_v=64 P_drop=0.1 eps_ls=0.1, 100K steps):\n"
           "  N=%d d_model=%d d_ff=%d h=%d d_k=d_v=%d P_drop=%.2f eps_ls=%.2f sinusoids, %zu parameters\n",
           c.N, c.d_model, c.d_ff, c.h, c.d_k, (double)c.dropout, (double)o->eps_ls, model_param_count(&c));
    long per_epoch = t->train_b.real / 2;
    printf("budget, every row: %d steps (warmup %d, factor %g) = %.1f epochs, about %ld target tokens\n",
           o->steps, o->warmup, (double)o->factor, (double)o->steps / t->train_b.n,
           (long)((double)per_epoch * o->steps / t->train_b.n));
    snprintf(res->budget, sizeof res->budget, "steps=%d,warmup=%d,factor=%g,tokens=%d,rows=%d,train=%d,dev=%d,"
             "vocab=%d,N=%d,d=%d,ff=%d,h=%d,drop=%g,ls=%g,seed=%llu", o->steps, o->warmup, (double)o->factor,
             o->tokens, o->max_rows, o->n_train, o->n_dev, o->vocab, o->layers, o->d_model, o->d_ff, o->heads,
             (double)o->dropout, (double)o->eps_ls, (unsigned long long)o->seed);
    /* a row trained on another corpus is another result; the generated
     * corpus keeps the key it always had, so earlier results still count */
    if (o->corpus) {
        size_t l = strlen(res->budget), room = sizeof res->budget - l;
        if (strpbrk(o->corpus, "\t\n\r") || snprintf(res->budget + l, room, ",corpus=%s", o->corpus) >= (int)room)
            cli_fail(PROG, "--corpus %s: a path this long (or with a tab or newline) cannot key results.tsv; "
                     "use a shorter path", o->corpus);
    }
}

/* ---- results.tsv: read what earlier runs finished, rewrite after each row ---- */
#define TSV_HEAD "key\ttokens\tparams\tdev_ppl\tdev_bleu\ttrain_s\teval_s\tbudget\n"

static void lines_add(Lines *l, const char *line) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        char **p = realloc(l->line, (size_t)l->cap * sizeof *p);
        if (!p) cli_fail(PROG, "out of memory");
        l->line = p;
    }
    if (!(l->line[l->n++] = strdup(line))) cli_fail(PROG, "out of memory");
}

static void lines_free(Lines *l) {
    for (int i = 0; i < l->n; i++) free(l->line[i]);
    free(l->line);
    *l = (Lines){0};
}

static const Result *results_find(const Results *res, const char *key);

/* Is key one a job of this program can have: base#1..base#MAX_SEEDS or a
 * row's "group:label"? */
static int key_known(const char *key) {
    char k[32];
    for (int s = 0; s < MAX_SEEDS; s++) {
        snprintf(k, sizeof k, "base#%d", s + 1);
        if (!strcmp(key, k)) return 1;
    }
    for (int i = 0; i < N_ROWS; i++) {
        snprintf(k, sizeof k, "%s:%s", ROWS[i].group, ROWS[i].label);
        if (ROWS[i].edit != E_BASE && !strcmp(key, k)) return 1;
    }
    return 0;
}

/* What a number of results.tsv can be: the range of every value this
 * program writes there. A number outside it (PPL -5 or 1e308, BLEU 1e9,
 * a token count past a long) was not written by a run: the line was
 * edited or pasted from elsewhere, and it must not reach the table (two
 * PPLs of 1e308 make the base's mean infinite and every direction NaN). */
#define PPL_MAX 1e9       /* uniform guessing over --vocab's largest 2^20 symbols is
                           * PPL 1e6; a row 1000 times worse has diverged (train_row
                           * refuses it too, so no run writes one)                   */
#define SECONDS_MAX 1e9   /* 31 years of training or evaluation                      */
#define LINE_MAX_BYTES 4096   /* a key, six numbers and a budget of < 256 bytes   */

/* s, the whole of it, as a whole number in [lo, hi]; 0 when it is one.
 * No sign for an unsigned field, no spaces, nothing after the digits. */
static int parse_count(const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *v) {
    if (!(*s >= '0' && *s <= '9')) return 1;   /* strtoull would take "-1" as 2^64 - 1 */
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return *end || errno || *v < lo || *v > hi;
}

/* s, the whole of it, as a finite number in [lo, hi]; 0 when it is one. */
static int parse_real(const char *s, double lo, double hi, double *v) {
    if (!*s || *s == ' ' || *s == '\t') return 1;
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return *end || !isfinite(*v) || !(*v >= lo && *v <= hi);
}

/* One line of results.tsv (its '\n' removed; split in place at its tabs)
 * into r and *budget (the rest of the line after the seventh tab). 0, or 1
 * with why in why: the fields are not there, or the first number out of
 * its range, named by its column ("dev_ppl '-5' is not ..."). */
static int parse_result(char *line, Result *r, const char **budget, char *why, size_t n) {
    char *f[8], esc[64];
    int k = 0;
    f[k++] = line;
    for (char *p = line; k < 8 && (p = strchr(p, '\t')); *p++ = '\0') f[k++] = p + 1;
    if (k < 8 || !*f[0] || strlen(f[0]) >= sizeof r->key || !*f[7])
        return snprintf(why, n, "not the 8 tab-separated fields the first line names; delete the "
                        "file to start over"), 1;
    snprintf(r->key, sizeof r->key, "%s", f[0]);
    *budget = f[7];
    static const char *const name[7] = {"key", "tokens", "params", "dev_ppl", "dev_bleu", "train_s", "eval_s"};
    unsigned long long tokens, params;
    char range[80];
    int bad = 0;   /* the column of the first number out of its range */
    if (parse_count(f[1], 0, LONG_MAX, &tokens))
        bad = 1, snprintf(range, sizeof range, "a count of target tokens from 0 to %ld", LONG_MAX);
    else if (parse_count(f[2], 1, SIZE_MAX, &params))
        bad = 2, snprintf(range, sizeof range, "a count of parameters from 1 to %zu", (size_t)SIZE_MAX);
    else if (parse_real(f[3], 1, PPL_MAX, &r->ppl))
        bad = 3, snprintf(range, sizeof range, "a perplexity from 1 to %g", PPL_MAX);
    else if (parse_real(f[4], 0, 100, &r->bleu))
        bad = 4, snprintf(range, sizeof range, "a BLEU score from 0 to 100");
    else if (parse_real(f[5], 0, SECONDS_MAX, &r->train_s)) bad = 5;
    else if (parse_real(f[6], 0, SECONDS_MAX, &r->eval_s)) bad = 6;
    if (bad >= 5) snprintf(range, sizeof range, "a time from 0 to %g seconds", SECONDS_MAX);
    if (bad)
        return snprintf(why, n, "%s '%s' is not %s; correct or delete that line", name[bad],
                        fio_escape(esc, sizeof esc, f[bad], (size_t)-1), range), 1;
    r->tokens = (long)tokens, r->params = (size_t)params;
    return 0;
}

/* Reads every line of res->path (none there: nothing to read): this
 * budget's rows into res->r, the rest kept as they were in res->other and
 * res->unused. A line that is not one this program writes stops the run
 * (exit 2), naming the file, the line and the field. */
static void results_load(Results *res) {
    long long size;
    char err[512], why[256], path[1200];
    if (access(res->path, F_OK) != 0) return;
    fio_escape(path, sizeof path, res->path, (size_t)-1);
    FILE *f = fio_open_read(res->path, &size, err, sizeof err);
    if (!f) cli_fail(PROG, "%s", err);
    int other = 0, lineno = 0, repeated = 0, unknown = 0;
    char *line = NULL, keep[LINE_MAX_BYTES + 2], work[LINE_MAX_BYTES + 2];
    size_t cap = 0;
    for (ssize_t len; (len = getline(&line, &cap, f)) > 0;) {
        if (lineno++ == 0) {
            if (strcmp(line, TSV_HEAD)) cli_fail(PROG, "%s is not a results file of this program", path);
            continue;
        }
        if (strlen(line) != (size_t)len || len > LINE_MAX_BYTES)
            cli_fail(PROG, "%s line %d is damaged: %s; delete the file to start over", path, lineno,
                     len > LINE_MAX_BYTES ? "too long for a line of results" : "it holds a NUL byte");
        /* the line as kept, with its '\n': a last line edited by hand may
         * have lost it, and the rewrite would glue the next line onto it */
        snprintf(keep, sizeof keep, "%s%s", line, line[len - 1] == '\n' ? "" : "\n");
        Result r = {0};
        const char *budget;
        memcpy(work, keep, strlen(keep) + 1);
        work[strcspn(work, "\n")] = '\0';
        if (parse_result(work, &r, &budget, why, sizeof why))
            cli_fail(PROG, "%s line %d is damaged: %s", path, lineno, why);
        if (strcmp(budget, res->budget)) {   /* other settings: not this run's row */
            lines_add(&res->other, keep);
            other++;
            continue;
        }
        /* r holds each known key once, so it never fills (MAX_JOBS has room) */
        int known = key_known(r.key), again = known && results_find(res, r.key);
        if (!known || again) {
            lines_add(&res->unused, keep);
            unknown += !known, repeated += again;
            continue;
        }
        if (res->n >= MAX_JOBS) cli_fail(PROG, "%s: more distinct rows than %d", path, MAX_JOBS);
        res->r[res->n++] = r;
    }
    int failed = ferror(f);
    fclose(f);
    free(line);
    if (failed) fio_fail(PROG, "reading %s failed", path);
    printf("results: %s holds %d finished row%s of this budget", path, res->n, res->n == 1 ? "" : "s");
    printf(other ? ";\n  %d of other settings (kept in the file, not used)\n" : "\n", other);
    if (repeated)
        printf("  %d repeat%s the key of an earlier line: the first is used, the repeats kept in the file\n", repeated,
               repeated == 1 ? "s" : "");
    if (unknown)
        printf("  %d ha%s a key this program does not know (kept in the file, not used)\n", unknown,
               unknown == 1 ? "s" : "ve");
}

static void results_save(const Results *res) {
    FioWriter w;
    char err[512];
    if (fio_create(&w, res->path, err, sizeof err)) cli_fail(PROG, "%s", err);
    fputs(TSV_HEAD, w.f);
    for (int i = 0; i < res->other.n; i++) fputs(res->other.line[i], w.f);
    for (int i = 0; i < res->n; i++) {
        const Result *r = &res->r[i];
        fprintf(w.f, "%s\t%ld\t%zu\t%.4f\t%.2f\t%.1f\t%.1f\t%s\n", r->key, r->tokens, r->params, r->ppl, r->bleu,
                r->train_s, r->eval_s, res->budget);
    }
    /* after the rows used: read again, the used line of a key comes first */
    for (int i = 0; i < res->unused.n; i++) fputs(res->unused.line[i], w.f);
    if (fio_commit(&w, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        exit(1);
    }
}

static const Result *results_find(const Results *res, const char *key) {
    for (int i = 0; i < res->n; i++)
        if (!strcmp(res->r[i].key, key)) return &res->r[i];
    return NULL;
}

/* ---- section 2: one model per row ---------------------------------------------------- */
typedef struct {
    const Row *row;
    int seed_i;           /* base: 0..seeds-1; rows: 0                         */
    char key[32];
} Job;

/* Does the name p (len bytes, not 0-terminated) spell word, in any case? */
static int name_is(const char *p, size_t len, const char *word) {
    return len == strlen(word) && !strncasecmp(p, word, len);
}

/* The jobs of --rows, in Table 3's order, into jobs (room for MAX_JOBS);
 * returns how many. Each comma-separated name is a group (base, A..E: all
 * its rows), a row's name (h=1, N/2, eps_ls=0) or its key (A:h=1), in any
 * case. A name that is none of these, or an empty one ("," "", "A,,B",
 * "A,"), is a flag error: exit 2 before anything runs. */
static int jobs_for(const Opts *o, Job *jobs) {
    int want[N_ROWS] = {0}, n = 0;
    char esc[256], key[32];
    for (const char *p = o->rows;; p++) {   /* each name up to the next ',' */
        size_t len = strcspn(p, ",");
        if (!len)
            cli_fail(PROG, "--rows '%s': a group name is empty (two commas in a row, or one at an end); use "
                     "base, A, B, C, D, E, one comma between two (e.g. --rows A,E)",
                     fio_escape(esc, sizeof esc, o->rows, (size_t)-1));
        int found = 0;
        for (int i = 0; i < N_ROWS; i++) {
            snprintf(key, sizeof key, "%s:%s", ROWS[i].group, ROWS[i].label);
            if (name_is(p, len, ROWS[i].group) || name_is(p, len, ROWS[i].label) || name_is(p, len, key))
                want[i] = 1, found = 1;
        }
        if (!found)
            cli_fail(PROG, "--rows: '%s' is not a group or a row; use base, A, B, C, D, E or a row's name "
                     "(h=1, d_k/2, N/2, 2d_model, eps_ls=0, ...; e.g. --rows A,E)", fio_escape(esc, sizeof esc, p, len));
        if (!p[len]) break;
        p += len;
    }
    for (int i = 0; i < N_ROWS; i++) {
        if (!want[i]) continue;
        for (int s = 0; s < (ROWS[i].edit == E_BASE ? o->seeds : 1); s++, n++) {
            jobs[n] = (Job){&ROWS[i], s, ""};
            if (ROWS[i].edit == E_BASE) snprintf(jobs[n].key, sizeof jobs[n].key, "base#%d", s + 1);
            else snprintf(jobs[n].key, sizeof jobs[n].key, "%s:%s", ROWS[i].group, ROWS[i].label);
        }
    }
    return n;
}

/* Every job's configuration, before any trains: a row that cannot be
 * built (--d-model 8 leaves h=16 no d_k) stops the run here, not after
 * the rows before it spent their time. */
static void jobs_check(const Opts *o, const TrTask *t, const Job *jobs, int n) {
    char err[512];
    Config c;
    float eps;
    for (int k = 0; k < n; k++)
        if (row_config(o, t, jobs[k].row, &c, &eps, err, sizeof err))
            cli_fail(PROG, "row %s: %s; no row was trained (leave group %s out of --rows, or change the "
                     "base's sizes)", jobs[k].key, err, jobs[k].row->group);
}

/* mean_s: the mean time of the rows trained so far in this run (0: none
 * yet, then this row's own projection stands for each of the rest) */
static Result train_row(const Opts *o, TrTask *t, const Job *j, int k, int n, int rest_rows, double mean_s) {
    char err[512];
    Config c;
    float eps;
    if (row_config(o, t, j->row, &c, &eps, err, sizeof err)) cli_fail(PROG, "row %s: %s", j->key, err);
    uint64_t seed = o->seed + 1000u * (uint64_t)j->seed_i;
    Model m;
    Trainer tr;
    TrainHyper hp = train_hyper_paper();
    hp.eps_ls = eps, hp.warmup = o->warmup, hp.factor = o->factor;
    if (model_build(&m, &c, t->train_b.max_B > t->dev_b.max_B ? t->train_b.max_B : t->dev_b.max_B, t->max_len,
                    t->max_len - 1, seed, err, sizeof err) ||
        trainer_init(&tr, &m, &hp, m.max_B, t->max_len, seed ^ 0xDA7A5EEDull, err, sizeof err))
        cli_fail(PROG, "row %s: %s", j->key, err);
    Result r = {.params = model_param_count(&c)};
    snprintf(r.key, sizeof r.key, "%s", j->key);
    printf("[%2d/%d] %-14s N=%d d_model=%d d_ff=%d h=%d d_k=%d d_v=%d P_drop=%.1f eps_ls=%.1f %s\n", k + 1, n,
           j->key, c.N, c.d_model, c.d_ff, c.h, c.d_k, c.d_v, (double)c.dropout, (double)eps,
           c.pos == POS_LEARNED ? "learned" : "sinusoid");
    /* under the settings, one line while it trains: the loss after each
     * quarter of the steps as it comes, then dev PPL / BLEU, the time and
     * the rest's estimate. Two lines a row, so the 18 rows of the defaults
     * fit a 45-row screen (the parameter counts are in section 3's table) */
    printf("        loss");
    fflush(stdout);
    double t0 = now_s(), rest = 0;
    StepStats st = {0};
    int chunk = (o->steps + 3) / 4;   /* at most 4 loss figures per row */
    for (int s = chunk; tr.step < (uint64_t)o->steps; s += chunk) {
        uint64_t to = s < o->steps ? (uint64_t)s : (uint64_t)o->steps;
        TrainStatus ts = trtask_train(&tr, t, to, o->seed, &r.tokens, &st);
        if (ts != TRAIN_OK)
            cli_fail(PROG, "row %s stopped at step %llu: %s; try a smaller --factor", j->key,
                     (unsigned long long)tr.step, train_status_str(ts));
        double el = now_s() - t0;
        rest = rest_rows * (mean_s > 0 ? mean_s : el / tr.step * o->steps);
        printf(" %.3f", st.loss);
        fflush(stdout);
    }
    r.train_s = now_s() - t0;
    double t1 = now_s();
    Bleu b;
    r.ppl = trtask_perplexity(&m, t);
    if (!(r.ppl <= PPL_MAX))   /* results.tsv holds no PPL past PPL_MAX (a NaN fails too) */
        cli_fail(PROG, "row %s: dev perplexity %g (over %g): the model diverged; try a smaller --factor", j->key,
                 r.ppl, PPL_MAX);
    if (trtask_bleu_greedy(&m, t, &b)) cli_fail(PROG, "out of memory decoding the dev set");
    r.bleu = b.score;
    r.eval_s = now_s() - t1;
    printf(" | dev PPL %.3f BLEU %.2f (greedy) | %.0f+%.0f s", r.ppl, r.bleu, r.train_s, r.eval_s);
    printf(rest_rows > 0 ? ", rest ~%.0f s\n" : "\n", rest);
    trainer_free(&tr);
    model_free(&m);
    return r;
}

static void section_rows(const Opts *o, TrTask *t, Results *res, const Job *jobs, int n) {
    show_section("2. One model per row of Table 3, one after another");
    int done = 0, todo = 0;
    for (int k = 0; k < n; k++) todo += !results_find(res, jobs[k].key);
    printf("%d model%s for --rows %s: %d finished earlier, %d to train\n", n, n == 1 ? "" : "s", o->rows,
           n - todo, todo);
    if (o->rows == DEFAULT_ROWS)
        printf("(the default: 4 rows of Table 3 and the base; --all trains every row, 3 base seeds)\n");
    double spent = 0;
    for (int k = 0; k < n; k++) {
        const Result *r = results_find(res, jobs[k].key);
        if (r) {
            printf("[%2d/%d] %-14s done earlier: dev PPL %.3f, BLEU %.2f (kept, not retrained)\n", k + 1, n,
                   jobs[k].key, r->ppl, r->bleu);
            continue;
        }
        /* ETA of the rows after this one: the mean of the rows trained so
         * far in this run (rows differ in cost: 2d_model is the slowest) */
        Result nr = train_row(o, t, &jobs[k], k, n, todo - done - 1, done ? spent / done : 0);
        spent += nr.train_s + nr.eval_s;
        done++;
        if (res->n >= MAX_JOBS) cli_fail(PROG, "row %s: no room for its result (%d rows)", jobs[k].key, MAX_JOBS);
        res->r[res->n++] = nr;
        results_save(res);
    }
}

/* ---- section 3: the table ---------------------------------------------------------------- */
static void write_or_die(FioWriter *w) {
    char err[512];
    if (fio_commit(w, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        exit(1);
    }
}

/* table.md and variations.dat are one table in two forms: both are
 * written or neither. Both temporaries are flushed and synced first (a
 * full disk shows here, while neither file is replaced); on a failure
 * both temporaries go, the files of the run before stay, and the run
 * exits 1. Only then are they renamed, one after the other. */
static void write_both_or_die(FioWriter *a, FioWriter *b) {
    FioWriter *w[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        errno = 0;
        int failed = fflush(w[i]->f) != 0 || ferror(w[i]->f), e = errno;
        if (!failed && fsync(fileno(w[i]->f)) != 0 && errno != EINVAL && errno != EROFS) failed = 1, e = errno;
        if (!failed) continue;
        char pa[600], pb[600];
        fio_escape(pa, sizeof pa, a->path, (size_t)-1), fio_escape(pb, sizeof pb, b->path, (size_t)-1);
        fprintf(stderr, "%s: writing '%s' failed: %s; '%s' and '%s' were left as they were\n", PROG,
                i ? pb : pa, strerror(e ? e : EIO), pa, pb);
        fio_abort(a), fio_abort(b);
        exit(1);
    }
    char err[512];
    if (fio_commit(a, err, sizeof err)) fio_abort(b);
    else if (!fio_commit(b, err, sizeof err)) return;
    fprintf(stderr, "%s: %s\n", PROG, err);
    exit(1);
}

/* variations.gp: each row's difference from its base, ours beside the
 * paper's on ONE axis per column (PPL, BLEU), so a step of 0.1 is as long
 * for both; a bar per row, nothing joins rows (they are categories, not a
 * series). Behind ours: the base seeds' band (a row inside it is "=") and
 * twice the band (a direction there is weak); the base seeds' own
 * differences from their mean are the dots on the base row. Reads
 * variations.dat: block 0 one line per row, block 1 one per base seed. */
static void write_plot(const Opts *o, const VBase *b, int n_rows, int short_run) {
    char path[1100], err[512], what[160];
    FioWriter w;
    snprintf(path, sizeof path, "%s/variations.gp", o->out);
    if (fio_create(&w, path, err, sizeof err)) cli_fail(PROG, "%s", err);
    FILE *f = w.f;
    if (short_run)
        snprintf(what, sizeof what, "too short to compare: the base's dev BLEU %.2f is under %g", b->bleu,
                 V_SHORT_BLEU);
    else if (b->n < 2)
        snprintf(what, sizeof what, "one base seed: no spread to judge by, every direction is weak");
    else
        snprintf(what, sizeof what, "dark band: the %d base seeds' spread (a row inside it is the same as base), "
                 "light band: twice it (weak)", b->n);
    int height = 190 + 34 * n_rows;
    fprintf(f, "# variations.gp - written by 12_variations: each row minus its base, ours beside the paper's\n"
               "set terminal pngcairo size 1400,%d noenhanced font 'Sans,11'\nset output 'variations.png'\n"
               "set multiplot layout 1,2 title \"Table 3 in miniature: each row minus its base, ours beside the "
               "paper's, on one scale\\nblue: ours, %d steps, one seed a row (grey: not converged); orange: the "
               "paper's, 100K steps; dots: our base seeds\\n%s\" font 'Sans,12'\n",
               height < 440 ? 440 : height, o->steps, what);
    /* rows top to bottom; the legend is the title's second line */
    fprintf(f, "set yrange [%d.5:-0.5]\nset ytics scale 0\nset grid xtics lc rgb '#bbbbbb'\n"
               "set yzeroaxis lt -1 lw 1.5\nset style fill solid 0.9 noborder\nunset key\n"
               "set offsets graph 0.14, graph 0.14, 0, 0\nset lmargin 14\nset tmargin 3\n", n_rows - 1);
    static const char *const col[2][4] = {
        /* title, x label, ours' column, the paper's column */
        {"dev PPL, row - base (lower is better)", "ours per subword, the paper per wordpiece", "6", "8"},
        {"dev BLEU, row - base (higher is better)", "ours greedy, the paper beam search", "7", "9"}};
    for (int c = 0; c < 2; c++) {
        double band = c ? b->band_bleu : b->band_ppl;
        const char *fmt = c ? "%+.2f" : "%+.3f", *ou = col[c][2], *pa = col[c][3];
        fprintf(f, "unset object\n");
        if (b->n > 1)
            fprintf(f, "set object 1 rect from -%.4f, graph 0 to %.4f, graph 1 fc rgb '#ececec' fs solid "
                       "noborder behind\nset object 2 rect from -%.4f, graph 0 to %.4f, graph 1 fc rgb '#c8c8c8' "
                       "fs solid noborder behind\n", V_WEAK_X * band, V_WEAK_X * band, band, band);
        fprintf(f, "set title '%s'\nset xlabel '%s'\n", col[c][0], col[c][1]);
        /* a bar from 0 to the difference: centre d/2, half-width |d|/2; ours
         * above the row's line, the paper's below; rows that had not
         * converged in grey; each bar's value at its end */
        fprintf(f, "plot 'variations.dat' index 0 using ($%s/2):($0-0.19):(abs($%s)/2):(0.17):($10 > 0 ? 0x1f77b4 : "
                   "0xaaaaaa):ytic(1) with boxxyerror lc rgb variable, \\\n"
                   "     '' index 0 using ($%s/2):($0+0.19):(abs($%s)/2):(0.17) with boxxyerror lc rgb '#ff7f0e', "
                   "\\\n", ou, ou, pa, pa);
        for (int k = 0; k < 2; k++) {   /* value labels, ours then the paper's (none on the base row) */
            const char *v = k ? pa : ou, *dy = k ? "+0.19" : "-0.19";
            fprintf(f, "     '' index 0 using ($0 > 0 && $%s >= 0 ? $%s : 1/0):($0%s):(sprintf('%s', $%s)) with "
                       "labels left offset 0.4,0 font 'Sans,9' notitle, \\\n"
                       "     '' index 0 using ($0 > 0 && $%s < 0 ? $%s : 1/0):($0%s):(sprintf('%s', $%s)) with "
                       "labels right offset -0.4,0 font 'Sans,9' notitle, \\\n", v, v, dy, fmt, v, v, v, dy, fmt, v);
        }
        fprintf(f, "     '' index 1 using %d:(0) with points pt 7 ps 0.8 lc rgb 'black'\n",
                c ? 3 : 2);
    }
    fprintf(f, "unset multiplot\n");
    write_or_die(&w);
    if (plot_render(o->out, "variations")) printf("  [plot] %s/variations.png (+ .dat, .gp)\n", o->out);
}

/* "- -? yes": the paper's direction, ours ('?' when weak), whether they
 * agree; "slow" for a row not converged (shown, not counted) */
static void dir_cell(char *s, size_t n, VDir v, int converged) {
    snprintf(s, n, "%c %c%c %s", v_dir_char(v.paper), v_dir_char(v.ours), v.weak ? '?' : ' ',
             !converged ? "slow" : v.agree ? "yes" : "no");
}

/* Is key one of this run's jobs? */
static int job_of(const Job *jobs, int n, const char *key) {
    for (int k = 0; k < n; k++)
        if (!strcmp(jobs[k].key, key)) return 1;
    return 0;
}

/* The table of this run's rows (--rows, --seeds): rows of other runs kept
 * in the same results file are not in it. */
static void section_table(const Opts *o, const Results *res, const Job *jobs, int n_jobs) {
    show_section("3. Ours beside the paper's Table 3");
    double sp[MAX_SEEDS], sb[MAX_SEEDS];
    int nb = 0;
    for (int s = 0; s < MAX_SEEDS; s++) {
        char key[32];
        snprintf(key, sizeof key, "base#%d", s + 1);
        const Result *r = job_of(jobs, n_jobs, key) ? results_find(res, key) : NULL;
        if (r) sp[nb] = r->ppl, sb[nb] = r->bleu, nb++;
    }
    if (!nb) {
        printf("no base row finished with this budget yet: run --rows base for the comparison\n");
        return;
    }
    VBase b;
    vbase_init(&b, sp, sb, nb);
    int short_run = vbase_too_short(&b);
    printf("base, %d seed%s: dev PPL %.3f (range %.3f..%.3f), dev BLEU %.2f (range %.2f..%.2f)\n", nb,
           nb == 1 ? "" : "s", b.ppl, b.lo_ppl, b.hi_ppl, b.bleu, b.lo_bleu, b.hi_bleu);
    if (short_run)
        printf("too short to compare with the paper: the base's dev BLEU %.2f is under %g, so it has not\n"
               "learned the task yet, and rows would differ in how fast they start, not where they end;\n"
               "train longer (more --steps) for a table worth comparing\n", b.bleu, V_SHORT_BLEU);
    else
        printf("direction against base: + better, - worse, = same; paper: = within PPL +-%.3f, BLEU +-%.2f\n",
               V_PAPER_SAME_PPL, V_PAPER_SAME_BLEU);
    if (!short_run && nb > 1)
        printf("ours: = within the farthest base seed's distance from the mean (PPL +-%.3f, BLEU +-%.2f),\n"
               "? = weak, within twice that (each row has one seed)\n", b.band_ppl, b.band_bleu);
    else if (!short_run)
        printf("ours: one base seed, so no spread to judge by: every difference is a direction, a weak one (?)\n");
    char path[1100], dat[1100], err[512];
    FioWriter w, dw;
    snprintf(path, sizeof path, "%s/table.md", o->out);
    snprintf(dat, sizeof dat, "%s/variations.dat", o->out);
    if (fio_create(&w, path, err, sizeof err)) cli_fail(PROG, "%s", err);
    if (fio_create(&dw, dat, err, sizeof err)) fio_abort(&w), cli_fail(PROG, "%s", err);
    fprintf(w.f, "| row | PPL | BLEU | params | time | paper row | PPL | BLEU | params (M) | PPL dir. paper / ours "
                 "| BLEU dir. paper / ours |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    fprintf(dw.f, "# row ours_ppl ours_bleu paper_ppl paper_bleu, then each minus its base: ours_dppl ours_dbleu "
                  "paper_dppl paper_dbleu, converged (1: dev PPL at most %g x the base's)\n", V_CONVERGED_X);
    printf("  %-12s %7s %6s %7s %5s | %-14s %4s %4s %3s%s\n", "ours", "PPL", "BLEU", "params", "time", "paper",
           "PPL", "BLEU", "M", short_run ? "" : " | PPL p/o   BLEU p/o");
    VTally tally = {0};
    char far[512] = "";
    size_t far_line = 0;   /* where far's current output line starts */
    int n_plotted = 0;
    for (int i = 0; i < N_ROWS; i++) {
        const Row *rw = &ROWS[i];
        int base = rw->edit == E_BASE, conv = 1;
        char key[32], pm[16] = "-", lab[40], dp[16] = "", db[16] = "";
        if (base) snprintf(key, sizeof key, "base#1");
        else snprintf(key, sizeof key, "%s:%s", rw->group, rw->label);
        const Result *r = job_of(jobs, n_jobs, key) ? results_find(res, key) : NULL;
        if (!r) continue;
        double ppl = base ? b.ppl : r->ppl, bleu = base ? b.bleu : r->bleu;
        if (rw->p_params) snprintf(pm, sizeof pm, "%d", rw->p_params);
        snprintf(lab, sizeof lab, "%s%s%s", base ? "" : rw->group, base ? "" : " ", rw->label);
        if (!base) {
            VDir vp = v_judge(ppl - b.ppl, b.band_ppl, nb, rw->p_ppl - ROWS[0].p_ppl, V_PAPER_SAME_PPL, 1);
            VDir vb = v_judge(bleu - b.bleu, b.band_bleu, nb, rw->p_bleu - ROWS[0].p_bleu, V_PAPER_SAME_BLEU, 0);
            conv = v_converged(ppl, &b);
            vtally_add(&tally, conv, vp, vb);
            if (!conv) {   /* a row this far off is named below */
                size_t l = strlen(far);
                int wrap = l - far_line + strlen(lab) > 90;   /* keep lines under 100 columns */
                snprintf(far + l, sizeof far - l, "%s%s%s", tally.rows - tally.converged > 1 ? "," : "",
                         wrap ? "\n  " : tally.rows - tally.converged > 1 ? " " : "", lab);
                if (wrap) far_line = l + 2;
            }
            dir_cell(dp, sizeof dp, vp, conv), dir_cell(db, sizeof db, vb, conv);
        }
        printf("  %-12s %7.3f %6.2f %7zu %4.0fs | %-14s %4.2f %4.1f %3s", lab, ppl, bleu, r->params,
               r->train_s + r->eval_s, rw->paper, rw->p_ppl, rw->p_bleu, pm);
        if (!short_run) printf(base ? " |" : " | %-9s %s", dp, db);
        printf("\n");
        fprintf(w.f, "| %s | %.3f | %.2f | %zu | %.0f s | %s | %.2f | %.1f | %s | %s | %s |\n", lab, ppl, bleu,
                r->params, r->train_s + r->eval_s, rw->paper, rw->p_ppl, rw->p_bleu, pm,
                short_run ? "too short" : dp, short_run ? "too short" : db);
        fprintf(dw.f, "\"%s\" %.4f %.2f %.2f %.1f %.4f %.2f %.3f %.2f %d\n", lab, ppl, bleu, rw->p_ppl, rw->p_bleu,
                ppl - b.ppl, bleu - b.bleu, rw->p_ppl - ROWS[0].p_ppl, rw->p_bleu - ROWS[0].p_bleu, conv);
        n_plotted++;
    }
    fprintf(dw.f, "\n\n# the base seeds, each minus the base mean: dppl dbleu\n");
    for (int s = 0; s < nb; s++) fprintf(dw.f, "\"seed %d\" %.4f %.2f\n", s + 1, sp[s] - b.ppl, sb[s] - b.bleu);
    write_both_or_die(&w, &dw);
    printf("(base: mean of %d seed%s%s)\n", nb, nb == 1 ? "" : "s",
           short_run ? "" : "; p/o = the paper's direction, ours, and whether they agree");
    if (!short_run) {
        int left = tally.rows - tally.converged;
        printf("converged: %d of %d row%s (dev PPL at most twice the base's %.3f)%s\n", tally.converged, tally.rows,
               tally.rows == 1 ? "" : "s", b.ppl, left ? "; left out of the count:" : "");
        if (left) printf("  %s (still learning at this budget: see their loss lines in section 2)\n", far);
        printf("the paper's direction holds in %d of %d converged rows for PPL, %d of %d for BLEU;\n",
               tally.hold_ppl, tally.converged, tally.hold_bleu, tally.converged);
        if (nb > 1)
            printf("of these, %d (PPL) and %d (BLEU) differ from base by more than twice the seeds' spread%s\n",
                   tally.clear_ppl, tally.clear_bleu, tally.clear_ppl + tally.clear_bleu < tally.hold_ppl +
                   tally.hold_bleu ? ";\nthe others are weak (?) or the same as the base (=)" : "");
        else
            printf("with one base seed no difference is strong: there is no spread to measure it against\n"
                   "(--seeds 2 or more)\n");
    }
    printf("table: %s\n", path);
    write_plot(o, &b, n_plotted, short_run);
}

/* Was flag given on the command line ("--seeds 4" or "--seeds=4")? */
static int flag_given(int argc, char **argv, const char *flag) {
    size_t n = strlen(flag);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], flag, n) && (argv[i][n] == '\0' || argv[i][n] == '=')) return 1;
    return 0;
}

int main(int argc, char **argv) {
    Opts o = {.n_train = 6000, .n_dev = 300, .vocab = 800, .tokens = 1000, .max_rows = 96, .steps = 600,
              .warmup = 200, .seeds = 2, .threads = 1, .layers = 2, .d_model = 64, .d_ff = 256, .heads = 8,
              .factor = 0.6f, .eps_ls = 0.1f, .dropout = 0.1f, .seed = 42, .rows = DEFAULT_ROWS,
              .out = "out/12_variations"};
    int quick = 0;
    if (cli_given(argc, argv, "--quick"))
        o.rows = "base,E", o.seeds = 1, o.n_train = 300, o.n_dev = 10, o.steps = 4, o.layers = 1, o.d_model = 16,
        o.heads = 2, o.d_ff = 32, o.vocab = 200, o.tokens = 300;
    CliOption opts[] = {
        {"--rows", CLI_STRING, &o.rows, "groups (base,A..E) or rows (h=1, N/2, ...)", 0, 0},
        {"--all", CLI_FLAG, &o.all, "every row of Table 3, 3 base seeds unless --seeds (18 models)", 0, 0},
        {"--steps", CLI_INT, &o.steps, "training steps, every row (paper: 100000)", 1, 10000000},
        {"--seeds", CLI_INT, &o.seeds, "seeds of the base row (its spread)", 1, MAX_SEEDS},
        {"--train-size", CLI_INT, &o.n_train, "generated training pairs", 10, 1000000},
        {"--dev-size", CLI_INT, &o.n_dev, "dev pairs (PPL and BLEU)", 1, 100000},
        {"--corpus", CLI_STRING, &o.corpus, "ding (Ding dictionary, trans-de-en) or a source<TAB>target file",
         0, 0},
        {"--vocab", CLI_INT, &o.vocab, "BPE symbols (shared vocabulary)", 8, 1 << 20},
        {"--tokens", CLI_INT, &o.tokens, "tokens a side per batch (paper: 25000)", 1, 1 << 24},
        {"--layers", CLI_INT, &o.layers, "base N", 1, MODEL_MAX_N},
        {"--d-model", CLI_INT, &o.d_model, "base d_model", 2, MODEL_MAX_WIDTH},
        {"--d-ff", CLI_INT, &o.d_ff, "base d_ff", 2, MODEL_MAX_WIDTH},
        {"--heads", CLI_INT, &o.heads, "base h (d_k = d_v = d_model / h)", 1, MODEL_MAX_HEADS},
        {"--warmup", CLI_INT, &o.warmup, "warmup steps (Sec. 5.3)", 1, 10000000},
        {"--factor", CLI_FLOAT, &o.factor, "multiplies the Sec. 5.3 learning rate", 1e-6, 100},
        {"--threads", CLI_INT, &o.threads, "OpenMP threads (1: see chapter 11's set_threads)", 1, 256},
        {"--seed", CLI_U64, &o.seed, "corpus, batch order and first base seed", 0, 0},
        {"--out", CLI_STRING, &o.out, "output folder (results.tsv, table.md, plot)", 0, 0},
        {"--results", CLI_STRING, &o.results, "results file (default: OUT/results.tsv)", 0, 0},
        {"--quick", CLI_FLAG, &quick, "a short run: rows base,E, 1 seed, 4 steps of a 1-layer d_model 16 model", 0, 0},
    };
    cli_parse(argc, argv, PROG, "Table 3's variations in miniature on chapter 11's translation task", opts,
              CLI_COUNT(opts));
    show_lecture_sections(3);   /* its banners: "1." .. "3." */
    if (o.all) {
        if (o.rows != DEFAULT_ROWS) cli_fail(PROG, "--all runs every row; give --all or --rows, not both");
        o.rows = ALL_ROWS;
        if (!flag_given(argc, argv, "--seeds")) o.seeds = 3;
    }
    Job jobs[MAX_JOBS];
    int n_jobs = jobs_for(&o, jobs);   /* a bad --rows stops the run before it starts */
#ifdef _OPENMP
    parallel_set_threads(o.threads);
#endif
    if (plot_mkdir(o.out)) return 1;
    signal(SIGINT, on_sigint);
    TrTask t;
    Results res = {.n = 0};
    if (o.results) snprintf(res.path, sizeof res.path, "%s", o.results);
    else snprintf(res.path, sizeof res.path, "%s/results.tsv", o.out);
    section_task(&o, &t, &res);
    jobs_check(&o, &t, jobs, n_jobs);
    results_load(&res);
    section_rows(&o, &t, &res, jobs, n_jobs);
    section_table(&o, &res, jobs, n_jobs);
    trtask_free(&t);
    lines_free(&res.other);
    lines_free(&res.unused);
    return 0;
}

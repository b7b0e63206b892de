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
 *
 * The chapter's files: variations.h says which file holds which section.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "fast/parallel.h"
#include "io/cli.h"
#include "io/plot.h"
#include "io/show.h"
#include "model/model.h"
#include "model/train.h"
#include "task/translate.h"
#include "variations.h"

/* The default run: the base with 2 seeds (a spread to judge by) and four
 * rows whose directions the recorded run shows far outside it at 600 steps,
 * two as the paper has them on both columns (h=1, N/2), label smoothing's
 * split (eps_ls=0: better PPL, worse BLEU, as Sec. 5.4 says) and one
 * against the paper (learned positions); 6 models, 2-3 minutes. --all:
 * every row, 3 base seeds (18 models, the recorded run). */
static const char DEFAULT_ROWS[] = "base,h=1,N/2,eps_ls=0,E";
static const char ALL_ROWS[] = "base,A,B,C,D,E";

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

/* ---- section 2: one model per row ---------------------------------------------------- */
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
            snprintf(key, sizeof key, "%s:%s", VAR_ROWS[i].group, VAR_ROWS[i].label);
            if (name_is(p, len, VAR_ROWS[i].group) || name_is(p, len, VAR_ROWS[i].label) || name_is(p, len, key))
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
        for (int s = 0; s < (VAR_ROWS[i].edit == E_BASE ? o->seeds : 1); s++, n++) {
            jobs[n] = (Job){&VAR_ROWS[i], s, ""};
            if (VAR_ROWS[i].edit == E_BASE) snprintf(jobs[n].key, sizeof jobs[n].key, "base#%d", s + 1);
            else snprintf(jobs[n].key, sizeof jobs[n].key, "%s:%s", VAR_ROWS[i].group, VAR_ROWS[i].label);
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
    double t0 = clock_wall_s(), rest = 0;
    StepStats st = {0};
    int chunk = (o->steps + 3) / 4;   /* at most 4 loss figures per row */
    for (int s = chunk; tr.step < (uint64_t)o->steps; s += chunk) {
        uint64_t to = s < o->steps ? (uint64_t)s : (uint64_t)o->steps;
        TrainStatus ts = trtask_train(&tr, t, to, o->seed, &r.tokens, &st, NULL, NULL);
        if (ts != TRAIN_OK)
            cli_fail(PROG, "row %s stopped at step %llu: %s; try a smaller --factor", j->key,
                     (unsigned long long)tr.step, train_status_str(ts));
        double el = clock_wall_s() - t0;
        rest = rest_rows * (mean_s > 0 ? mean_s : el / tr.step * o->steps);
        printf(" %.3f", st.loss);
        fflush(stdout);
    }
    r.train_s = clock_wall_s() - t0;
    double t1 = clock_wall_s();
    Bleu b;
    r.ppl = trtask_perplexity(&m, t);
    if (!(r.ppl <= PPL_MAX))   /* results.tsv holds no PPL past PPL_MAX (a NaN fails too) */
        cli_fail(PROG, "row %s: dev perplexity %g (over %g): the model diverged; try a smaller --factor", j->key,
                 r.ppl, PPL_MAX);
    if (trtask_bleu_greedy(&m, t, &b)) cli_fail(PROG, "out of memory decoding the dev set");
    r.bleu = b.score;
    r.eval_s = clock_wall_s() - t1;
    printf(" | dev PPL %.3f BLEU %.2f (greedy) | %.0f+%.0f s", r.ppl, r.bleu, r.train_s, r.eval_s);
    printf(rest_rows > 0 ? ", rest ~%.0f s\n" : "\n", rest);
    trainer_free(&tr);
    model_free(&m);
    return r;
}

static void section_rows(const Opts *o, TrTask *t, Results *res, const Job *jobs, int n) {
    show_section("2. One model per row of Table 3, one after another");
    int done = 0, todo = 0;
    for (int k = 0; k < n; k++) todo += !var_results_find(res, jobs[k].key);
    printf("%d model%s for --rows %s: %d finished earlier, %d to train\n", n, n == 1 ? "" : "s", o->rows,
           n - todo, todo);
    if (o->rows == DEFAULT_ROWS)
        printf("(the default: 4 rows of Table 3 and the base; --all trains every row, 3 base seeds)\n");
    double spent = 0;
    for (int k = 0; k < n; k++) {
        const Result *r = var_results_find(res, jobs[k].key);
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
        var_results_save(res);
    }
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
        {"--threads", CLI_INT, &o.threads, "threads of the pool (1: steadiest on a shared machine)", 1, 256},
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
    parallel_set_threads(o.threads);   /* the pool's POSIX threads, with or without OpenMP */
    if (plot_mkdir(o.out)) return 1;
    signal(SIGINT, on_sigint);
    TrTask t;
    Results res = {.n = 0};
    if (o.results) snprintf(res.path, sizeof res.path, "%s", o.results);
    else snprintf(res.path, sizeof res.path, "%s/results.tsv", o.out);
    section_task(&o, &t, &res);
    jobs_check(&o, &t, jobs, n_jobs);
    var_results_load(&res);
    section_rows(&o, &t, &res, jobs, n_jobs);
    var_section_table(&o, &res, jobs, n_jobs);
    trtask_free(&t);
    var_lines_free(&res.other);
    var_lines_free(&res.unused);
    return 0;
}

/* variations.h - what chapter 12's files share: the rows of Table 3, the
 * run's settings, its jobs and the results file.
 *
 *   main.c      the table of contents; sections 1-2 (the task, one model a row)
 *   results.c   results.tsv: what earlier runs finished, rewritten after each row
 *   table.c     the rows of Table 3 (ours beside the paper's) and section 3:
 *               the table, table.md, variations.dat/.gp/.png
 *   verdict.c   the rules that call a row's direction (verdict.h)
 *
 * Functions and tables shared between the files carry var_ / VAR_ (the
 * test runner links every chapter's files together). */
#ifndef VARIATIONS_H
#define VARIATIONS_H

#include <stddef.h>
#include <stdint.h>

#define PROG "12_variations"

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

#define N_ROWS 16
extern const Row VAR_ROWS[N_ROWS];
#define MAX_SEEDS 5
#define MAX_JOBS (N_ROWS + MAX_SEEDS)

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

/* One model to train: a row, or one seed of the base. */
typedef struct {
    const Row *row;
    int seed_i;           /* base: 0..seeds-1; rows: 0                         */
    char key[32];
} Job;

/* results.c */
/* Reads every line of res->path (none there: nothing to read): this
 * budget's rows into res->r, the rest kept as they were in res->other and
 * res->unused. A line that is not one this program writes stops the run
 * (exit 2), naming the file, the line and the field. */
void var_results_load(Results *res);
/* Rewrites res->path atomically: other settings' lines, this budget's rows, the unused lines. */
void var_results_save(const Results *res);
const Result *var_results_find(const Results *res, const char *key);   /* NULL: not finished */
void var_lines_free(Lines *l);
/* The largest dev perplexity results.tsv holds: uniform guessing over
 * --vocab's largest 2^20 symbols is PPL 1e6; a row 1000 times worse has
 * diverged (train_row refuses it too, so no run writes one). */
#define PPL_MAX 1e9

/* table.c: section 3, the table of this run's rows (--rows, --seeds) */
void var_section_table(const Opts *o, const Results *res, const Job *jobs, int n_jobs);

#endif

/* results.c - chapter 12's results.tsv: read what earlier runs finished,
 * rewrite after each row (variations.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "io/cli.h"
#include "variations.h"

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

void var_lines_free(Lines *l) {
    for (int i = 0; i < l->n; i++) free(l->line[i]);
    free(l->line);
    *l = (Lines){0};
}

/* Is key one a job of this program can have: base#1..base#MAX_SEEDS or a
 * row's "group:label"? */
static int key_known(const char *key) {
    char k[32];
    for (int s = 0; s < MAX_SEEDS; s++) {
        snprintf(k, sizeof k, "base#%d", s + 1);
        if (!strcmp(key, k)) return 1;
    }
    for (int i = 0; i < N_ROWS; i++) {
        snprintf(k, sizeof k, "%s:%s", VAR_ROWS[i].group, VAR_ROWS[i].label);
        if (VAR_ROWS[i].edit != E_BASE && !strcmp(key, k)) return 1;
    }
    return 0;
}

/* What a number of results.tsv can be: the range of every value this
 * program writes there. A number outside it (PPL -5 or 1e308, BLEU 1e9,
 * a token count past a long) was not written by a run: the line was
 * edited or pasted from elsewhere, and it must not reach the table (two
 * PPLs of 1e308 make the base's mean infinite and every direction NaN). */
/* PPL_MAX: variations.h */
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
void var_results_load(Results *res) {
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
        int known = key_known(r.key), again = known && var_results_find(res, r.key);
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

void var_results_save(const Results *res) {
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

const Result *var_results_find(const Results *res, const char *key) {
    for (int i = 0; i < res->n; i++)
        if (!strcmp(res->r[i].key, key)) return &res->r[i];
    return NULL;
}


/* check_docs.c - what the READMEs quote from the programs' output is what
 * the programs print, and every chapter's output fits a 100 x 45 terminal
 * (no line wider than 100 columns, no numbered section taller than 45 rows).
 *
 * A README marks a quote with an HTML comment (invisible on GitHub) naming
 * the command, followed by a fenced block:
 *
 *     <!-- output: 08_training --steps 300 -->
 *     ```text
 *     src ids [batch=128, seq=10]
 *     ...
 *     exact match 997 / 1000
 *     ```
 *
 * Every line of the block must appear, whole, inside one line of the
 * program's output (runs of spaces count as one; a line "..." stands for
 * lines left out). The programs run from the repository root, colour off,
 * at most once per command line: their output is kept in
 * $BUILD_DIR/docs_cache/ until the binary is rebuilt.
 *
 * Runs the binaries in $BUILD_DIR (set by `make test`); a missing one fails;
 * DOCS_SKIP lists chapters not to run, each a counted skip (see skipped()).
 * When a quote is stale the test says which README, which line and which
 * command: rerun the command and update the README.
 *
 * Kernels. The AVX-512 and the AVX2 kernels (common/fast/gemm.c, attention.c,
 * simd.h) sum in different orders, so a few figures differ in their last
 * bits, and after training a few more. A block that holds such figures
 * names the kernels it quotes, and is compared only on a build with them:
 *
 *     <!-- output avx512: 08_training -->      (the default build on an AVX-512 CPU)
 *     <!-- output avx2: 08_training -->        (on a CPU with AVX2 and FMA only)
 *
 * Unmarked blocks are compared on both. A build with neither (PORTABLE=1,
 * valgrind's) or with OpenBLAS's gemm rounds differently again: it
 * compares no quote: a counted skip.
 *
 * Figures in prose. A number that README prose or a `make demo` recap
 * (tools/demo_recaps.txt) states about a run is tied to the line of output
 * it comes from by an entry in FIGURES below: the words around it in the
 * file, the command, and the words around it in the output, each figure
 * written {}. The check finds both, takes the figures out of each and
 * compares them in order: the prose may round (48% for a printed 48.3%),
 * nothing else. A changed figure in the prose, a run that prints another
 * one, or prose or output reworded so that an entry no longer finds its
 * words: each fails the check and names the entry. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"

#define MAX_COLS 100   /* widest line any chapter may print at its defaults */

/* ---- running a chapter, once ------------------------------------------------ */

/* DOCS_SKIP="08_training ...": chapters not run here, each time a counted
 * skip. `make SANITIZE=1 test` sets it for the chapters that train, which
 * take minutes under ASan; their output does not depend on the sanitizers,
 * and the plain `make test` checks it. */
static int skipped(const char *prog) {
    const char *list = getenv("DOCS_SKIP");
    size_t n = strlen(prog);
    for (const char *p = list ? strstr(list, prog) : NULL; p; p = strstr(p + 1, prog))
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ')) {
            test_skip("check_docs", "%s not run (DOCS_SKIP)", prog);
            return 1;
        }
    return 0;
}

static double mtime_of(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
}

/* The stdout of "$BUILD_DIR/prog args --no-color" (malloc'd), from the
 * cache when it is newer than the binary; *rc gets the exit status. A
 * missing binary fails the test. */
static char *chapter_output(const char *prog, const char *args, int *rc) {
    const char *build = build_dir();
    char bin[1024], cache[2048], key[256];
    chapter_binary(bin, sizeof bin, "check_docs", prog);
    /* the cache file is named for the command line, characters other than
     * [A-Za-z0-9._-] as '_' plus a checksum so two lines never collide */
    unsigned long h = 5381;
    size_t k = 0;
    for (const char *p = prog; *p && k < 120; p++) key[k++] = *p;
    key[k++] = '_';
    for (const char *p = args; *p; p++) {
        h = h * 33 + (unsigned char)*p;
        if (k < 160) {
            int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                     *p == '.' || *p == '-';
            key[k++] = ok ? *p : '_';
        }
    }
    key[k] = '\0';
    snprintf(cache, sizeof cache, "%s/docs_cache", build);
    mkdir(cache, 0777);
    snprintf(cache, sizeof cache, "%s/docs_cache/%s_%08lx.txt", build, key, h & 0xffffffffUL);
    char rcpath[2100];
    snprintf(rcpath, sizeof rcpath, "%s.rc", cache);
    if (mtime_of(cache) >= mtime_of(bin) && mtime_of(rcpath) >= mtime_of(bin)) {
        char *rcs = read_file(rcpath, NULL);
        *rc = rcs ? atoi(rcs) : -1;
        free(rcs);
        return read_file(cache, NULL);
    }
    /* It runs in a scratch folder of its own, $BUILD_DIR/docs_run/KEY, so
     * what it writes to out/ (the default --out) lands there and not in the
     * user's out/; a link named chapters/ there keeps relative inputs such as
     * chapters/12_variations/recorded.tsv where the command line says. */
    char here[1024], run[2300];
    ck_assert_ptr_nonnull(getcwd(here, sizeof here));
    snprintf(run, sizeof run, "%s/docs_run/%s_%08lx", build, key, h & 0xffffffffUL);
    ck_assert_int_eq(sh("/bin/rm -rf '%s' && mkdir -p '%s' && ln -s '%s/chapters' '%s/chapters'", run, run, here,
                        run), 0);
    char abin[3200], acache[3200];   /* as seen from the scratch folder */
    snprintf(abin, sizeof abin, "%s%s%s", bin[0] == '/' ? "" : here, bin[0] == '/' ? "" : "/", bin);
    snprintf(acache, sizeof acache, "%s%s%s", cache[0] == '/' ? "" : here, cache[0] == '/' ? "" : "/", cache);
    *rc = sh("cd '%s' && NO_COLOR=1 '%s' %s --no-color </dev/null >'%s' 2>/dev/null", run, abin, args, acache);
    FILE *f = fopen(rcpath, "w");
    if (f) { fprintf(f, "%d\n", *rc); fclose(f); }
    return read_file(cache, NULL);
}

/* The chapters the docs check runs write their plots and data to out/ (the
 * default --out); before they ran in a scratch folder, `make test` replaced
 * the user's out/ with the READMEs' runs (issue 34, item 9). Runs chapter 01
 * afresh: its files appear in the scratch folder, none in ./out. */
START_TEST(test_runs_leave_out_alone) {
    const char *build = build_dir();
    char dir[256], ref[300];
    fresh_dir(dir, sizeof dir, "check_docs");
    snprintf(ref, sizeof ref, "%s/before", dir);
    write_text(ref, "");
    sleep(1);   /* mtimes: whole seconds on some file systems */
    ck_assert_int_eq(sh("/bin/rm -f '%s'/docs_cache/01_dot_product_*", build), 0);
    int rc = -1;
    char *out = chapter_output("01_dot_product", "", &rc);
    ck_assert_msg(out && rc == 0, "01_dot_product: exit %d", rc);
    free(out);
    ck_assert_msg(sh("test -n \"$(find '%s'/docs_run/01_dot_product_* -newer '%s' -type f -path '*/out/*')\"", build,
                     ref) == 0, "01_dot_product wrote nothing under %s/docs_run", build);
    ck_assert_msg(sh("test -z \"$(find out -newer '%s' -type f 2>/dev/null)\"", ref) == 0,
                  "the docs check wrote into ./out: it must leave the user's out/ alone");
    remove_dir(dir);
}
END_TEST

/* ---- matching quoted lines ----------------------------------------------------- */

/* s with leading/trailing blanks dropped and inner runs of blanks as one
 * space, into out (cap bytes). */
static void squeeze(char *out, size_t cap, const char *s, size_t len) {
    size_t o = 0;
    int space = 0;
    for (size_t i = 0; i < len && o + 2 < cap; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\r') { space = o > 0; continue; }
        if (space) out[o++] = ' ';
        space = 0;
        out[o++] = c;
    }
    out[o] = '\0';
}

/* Does the (squeezed) quote appear inside one line of output? */
static int output_has_line(const char *output, const char *quote) {
    static char line[8192];
    for (const char *p = output; *p;) {
        size_t len = strcspn(p, "\n");
        squeeze(line, sizeof line, p, len);
        if (strstr(line, quote)) return 1;
        p += len;
        if (*p) p++;
    }
    return 0;
}

/* The kernels of this build, as blocks name them (see the top), or NULL:
 * neither (no quote is compared). */
#if defined(USE_OPENBLAS)
#define DOCS_KERNELS ((const char *)NULL)
#elif defined(__AVX512F__)
#define DOCS_KERNELS "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#define DOCS_KERNELS "avx2"
#else
#define DOCS_KERNELS ((const char *)NULL)
#endif

/* Checks every marked block of one README that quotes this build's kernels
 * (DOCS_KERNELS) or any (unmarked); prints each stale line to report. Returns the number
 * of problems (stale lines, missing programs, failed runs, unclosed blocks,
 * unknown kernels); *blocks counts the blocks checked, *other those left
 * out, marked for other kernels. */
static int check_readme(const char *path, int *blocks, int *other, FILE *report) {
    const char *kernels = DOCS_KERNELS;
    char *doc = read_file(path, NULL);
    if (!doc) return 0;
    int bad = 0, lineno = 0;
    char cmdline[1024] = "", q[8192], mark[32] = "";
    const char *marker = "<!-- output";
    char *output = NULL;
    int in_block = 0, want_block = 0, rc = 0, marker_line = 0;
    for (char *p = doc; *p;) {
        size_t len = strcspn(p, "\n");
        lineno++;
        squeeze(q, sizeof q, p, len);
        size_t ml = strlen(marker), kl = strcspn(q + ml, ":");
        if (!in_block && !strncmp(q, marker, ml) && q[ml + kl] == ':' && (kl == 0 || q[ml] == ' ')) {
            /* "<!-- output: prog args -->" or "<!-- output KERNELS: prog args -->" */
            snprintf(mark, sizeof mark, "%.*s", kl ? (int)kl - 1 : 0, q + ml + 1);
            if (*mark && strcmp(mark, "avx512") && strcmp(mark, "avx2")) {
                fprintf(report, "%s:%d: unknown kernels '%s' (avx512 or avx2)\n", path, lineno, mark);
                bad++;
            }
            char *args = q + ml + kl + 1, *end = strstr(args, "-->");
            if (end) *end = '\0';
            squeeze(cmdline, sizeof cmdline, args, strlen(args));
            want_block = 1;
            marker_line = lineno;
        } else if (want_block && !strncmp(q, "```", 3)) {
            want_block = 0;
            in_block = 1;
            char prog[256];
            size_t pl = strcspn(cmdline, " ");
            snprintf(prog, sizeof prog, "%.*s", (int)pl, cmdline);
            free(output);
            output = NULL;
            rc = -1;   /* lines of this block are not checked, unless it runs */
            if (*mark && (!kernels || strcmp(mark, kernels))) {
                (*other)++;   /* another build's figures */
            } else if ((*blocks)++, skipped(prog)) {
                fprintf(report, "%s:%d: '%s' skipped (DOCS_SKIP)\n", path, marker_line, cmdline);
            } else if ((output = chapter_output(prog, cmdline + pl, &rc)), rc != 0) {
                fprintf(report, "%s:%d: '%s' exited with status %d\n", path, marker_line, cmdline, rc);
                bad++;
            }
        } else if (in_block && !strncmp(q, "```", 3)) {
            in_block = 0;
        } else if (in_block && output && rc == 0 && *q && strcmp(q, "...")) {
            if (!output_has_line(output, q)) {
                fprintf(report, "%s:%d: stale quote: '%s' does not appear in the output of '%s'\n",
                        path, lineno, q, cmdline);
                bad++;
            }
        } else if (want_block && *q) {
            fprintf(report, "%s:%d: an output marker must be followed by a fenced block\n", path, marker_line);
            want_block = 0;
            bad++;
        }
        p += len;
        if (*p) p++;
    }
    if (in_block || want_block) {
        fprintf(report, "%s:%d: output block not closed\n", path, marker_line);
        bad++;
    }
    free(output);
    free(doc);
    return bad;
}


/* ---- figures in prose, tied to the run that prints them ------------------------ */

/* One figure (or several) that prose states about a run. In both texts runs
 * of blanks and line breaks count as one space (prose and output wrap where
 * they like); {} stands for a number (-12, 0.94, 5.59e-02), " ... " for
 * words left out. The prose's figures are compared with the output's in
 * order: equal, or the output's rounded to the digits the prose gives. In
 * the output, {N} pairs a figure with the prose's Nth (where a table puts
 * columns in another order, or one prose figure stands for two printed
 * ones: "2.00 for recurrent and for convolution") and {_} is a number left
 * uncompared. An entry
 * with no {} checks that the run still prints the words a claim rests on. */
typedef struct {
    const char *file;     /* README.md, chapters/NN_name/README.md or tools/demo_recaps.txt */
    const char *prose;    /* the file's words, as written there, {} for each figure */
    const char *kernels;  /* NULL: any build; "avx512" or "avx2": a figure that depends on the kernels */
    const char *run;      /* the command, as an output marker names it: "11_translation", "06_masking --lengths 8" */
    const char *output;   /* the words of the output that print the same figures, {} for each */
} Figure;

/* The entries live in tests/docs_figures.h, one file per README in order.
 * To add one: copy the words from the file, put {} where each figure is;
 * copy the output line (from $BUILD_DIR/docs_cache/, or a run), the same.
 * Keep enough words around a figure to say what it is. */
static const Figure FIGURES[] = {
#include "docs_figures.h"
};

enum { FIG_MAX = 16, FIG_LEN = 40 };
typedef struct {
    int n, seq;                 /* figures found; {} seen so far */
    char v[FIG_MAX][FIG_LEN];   /* each figure as written */
    int slot[FIG_MAX];          /* the prose figure it goes with (0-based), -1 for {_} */
} Figs;

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')

/* length of the number at s ([-]digits[.digits][e[-]digits]), 0 if none */
static size_t number_len(const char *s) {
    size_t i = (*s == '-' && IS_DIGIT(s[1])) ? 1 : 0, d = 0;
    while (IS_DIGIT(s[i])) i++, d++;
    if (!d) return 0;
    if (s[i] == '.' && IS_DIGIT(s[i + 1])) {
        i++;
        while (IS_DIGIT(s[i])) i++;
    }
    if (s[i] == 'e' && (IS_DIGIT(s[i + 1]) || ((s[i + 1] == '-' || s[i + 1] == '+') && IS_DIGIT(s[i + 2])))) {
        i += 2;
        while (IS_DIGIT(s[i])) i++;
    }
    return i;
}

/* the place of a number's last digit: 0.01 for "0.94", 1 for "48", 1e-4 for "5.59e-02" */
static double last_place(const char *num) {
    const char *dot = strchr(num, '.'), *e = strchr(num, 'e');
    int decimals = dot ? (int)((e ? (size_t)(e - dot) : strlen(dot)) - 1) : 0;
    return pow(10.0, (e ? atoi(e + 1) : 0) - decimals);
}

/* Does pattern p match text s from its start? Figures go to f. */
static int fig_match_here(const char *p, const char *s, Figs *f) {
    while (*p) {
        size_t close = p[0] == '{' ? strspn(p + 1, "0123456789_") + 1 : 0;
        if (close && p[close] == '}') {   /* {}, {N} or {_} */
            size_t n = number_len(s);
            if (!n || f->n >= FIG_MAX) return 0;
            f->slot[f->n] = close == 1 ? f->seq++ : p[1] == '_' ? -1 : atoi(p + 1) - 1;
            snprintf(f->v[f->n++], FIG_LEN, "%.*s", (int)n, s);
            p += close + 1, s += n;
        } else if (!strncmp(p, "...", 3)) {
            int keep = f->n, keep_seq = f->seq;
            for (const char *t = s;; t++) {
                f->n = keep, f->seq = keep_seq;
                if (fig_match_here(p + 3, t, f)) return 1;
                if (!*t) return 0;
            }
        } else if (*p++ != *s++) {
            return 0;
        }
    }
    return 1;
}

/* The first place the pattern matches in text, its figures in f; 0 if none. */
static int fig_find(const char *pattern, const char *text, Figs *f) {
    char pat[2048];
    squeeze(pat, sizeof pat, pattern, strlen(pattern));
    for (const char *s = text; *s; s++) {
        f->n = f->seq = 0;
        if (fig_match_here(pat, s, f)) return 1;
    }
    return 0;
}

/* A whole text with every run of blanks and line breaks as one space (malloc'd). */
static char *squeeze_all(const char *text) {
    size_t n = strlen(text);
    char *s = malloc(n + 2);
    ck_assert_ptr_nonnull(s);
    size_t o = 0;
    int space = 0;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') { space = o > 0; continue; }
        if (space) s[o++] = ' ';
        space = 0;
        s[o++] = c;
    }
    s[o] = '\0';
    return s;
}

/* Is the prose's figure the output's, or the output's rounded to the
 * prose's digits? ("48" for "48.3", "1.8" for "1.79", "0.286" for
 * "2.86e-01"; not "0.95" for "0.94", nor "0.940" for "0.94") */
static int fig_agrees(const char *prose, const char *out) {
    if (!strcmp(prose, out)) return 1;
    double p = last_place(prose);
    if (p < last_place(out) * (1 - 1e-9)) return 0;   /* more digits than the run gives */
    return fabs(atof(out) - atof(prose)) <= 0.5 * p * (1 + 1e-9);
}

/* Checks one entry; prints what is wrong to report. Returns 0 when the
 * prose agrees with the run, 1 when not, -1 when it was not compared
 * (skipped chapter, other kernels). */
static int check_figure(const Figure *e, FILE *report) {
    const char *kernels = DOCS_KERNELS;
    if (e->kernels && (!kernels || strcmp(e->kernels, kernels))) return -1;
    char prog[256];
    size_t pl = strcspn(e->run, " ");
    snprintf(prog, sizeof prog, "%.*s", (int)pl, e->run);
    if (skipped(prog)) return -1;
    char *doc = read_file(e->file, NULL);
    if (!doc) {
        fprintf(report, "%s: cannot read it (an entry of FIGURES in tests/check_docs.c names it)\n", e->file);
        return 1;
    }
    char *prose_text = squeeze_all(doc);
    free(doc);
    Figs fp = {0}, fo = {0};
    int bad = 0;
    if (!fig_find(e->prose, prose_text, &fp)) {
        fprintf(report, "%s: the words '%s' are not there: the prose changed; update its entry in "
                        "tests/docs_figures.h (or drop it with the figure)\n", e->file, e->prose);
        bad = 1;
    }
    int rc = -1;
    char *out = bad ? NULL : chapter_output(prog, e->run + pl, &rc);
    char *out_text = out ? squeeze_all(out) : NULL;
    if (bad) {
        /* said above */
    } else if (rc != 0) {
        fprintf(report, "%s: '%s' exited with status %d\n", e->file, e->run, rc);
        bad = 1;
    } else if (!fig_find(e->output, out_text, &fo)) {
        fprintf(report, "%s: '%s' no longer prints '%s', which the prose '%s' rests on\n", e->file, e->run,
                e->output, e->prose);
        bad = 1;
    } else {
        int used[FIG_MAX] = {0};   /* how many output figures go with each prose figure: one or more */
        for (int i = 0; i < fo.n; i++) {
            int k = fo.slot[i];
            if (k < 0) continue;
            ck_assert_msg(k < fp.n, "%s: the entry for '%s' pairs output figure %d with prose figure %d of %d",
                          e->file, e->prose, i + 1, k + 1, fp.n);
            used[k]++;
            if (!fig_agrees(fp.v[k], fo.v[i])) {
                fprintf(report, "%s: says %s in '%s', where '%s' prints %s ('%s')\n", e->file, fp.v[k], e->prose,
                        e->run, fo.v[i], e->output);
                bad = 1;
            }
        }
        for (int k = 0; k < fp.n; k++)
            ck_assert_msg(used[k] >= 1, "%s: the entry for '%s': prose figure %d goes with no output figure",
                          e->file, e->prose, k + 1);
    }
    free(out_text);
    free(out);
    free(prose_text);
    return bad;
}

/* The matcher and the comparison can fail: rounding is allowed, another
 * figure or a figure more precise than the output is not; " ... " skips
 * words; a figure in the prose against text that has none does not match. */
START_TEST(test_figure_matching) {
    struct {
        const char *pattern, *text;
        int found, n;
        const char *first;
    } m[] = {
        {"padding from {}% to {}%", "cuts the padding from 48.3% to 3.1%: an epoch", 1, 2, "48.3"},
        {"layer {} head {} puts {} of", "decoder layer 2 head 4 puts 0.94 of its", 1, 3, "2"},
        {"head {} ... mean over all 8 heads {}", "head 4 puts 0.94 (x); mean over all 8 heads 0.42", 1, 2, "4"},
        {"weight {}.", "weight 0.59. Next", 1, 1, "0.59"},
        {"at n = {}", "at every n measured", 0, 0, ""},
        {"diff {}", "diff -3.5 there", 1, 1, "-3.5"},
        {"|J| {} ->", "|J| 2.86e-01 -> 5.59e-02", 1, 1, "2.86e-01"},
        {"ratio {}x", "ratio 3x", 1, 1, "3"},
        {"greedy {2} {_} {1}", "greedy 98.76 98.76 480", 1, 3, "98.76"},
    };
    for (int k = 0; k < (int)(sizeof m / sizeof m[0]); k++) {
        Figs f = {0};
        int found = fig_find(m[k].pattern, m[k].text, &f);
        ck_assert_msg(found == m[k].found && (!found || (f.n == m[k].n && !strcmp(f.v[0], m[k].first))),
                      "'%s' in '%s': found %d, %d figures, first '%s'", m[k].pattern, m[k].text, found, f.n,
                      f.n ? f.v[0] : "");
    }
    struct {
        const char *prose, *out;
        int ok;
    } a[] = {{"0.94", "0.94", 1}, {"0.95", "0.94", 0}, {"48", "48.3", 1}, {"49", "48.3", 0}, {"1.8", "1.79", 1},
             {"1.7", "1.79", 0}, {"0.940", "0.94", 0}, {"2", "1.98", 1}, {"4", "3", 0}, {"3", "3", 1},
             {"0.286", "2.86e-01", 1}, {"0.0559", "5.59e-02", 1}, {"0.29", "2.86e-01", 1}, {"0.2860", "2.86e-01", 0}};
    for (int k = 0; k < (int)(sizeof a / sizeof a[0]); k++)
        ck_assert_msg(fig_agrees(a[k].prose, a[k].out) == a[k].ok, "prose %s, output %s: want %s", a[k].prose,
                      a[k].out, a[k].ok ? "agree" : "differ");
}
END_TEST

/* The whole check can fail: a file stating 01_dot_product's "[1, 2] . [3, 4]
 * = 11" as 11 passes, as 12 fails, and words the file lacks fail. */
START_TEST(test_figure_catches_a_changed_figure) {
    char path[] = "/tmp/check_docs_fig_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    struct {
        const char *text, *prose;
        int want;
    } c[] = {
        {"The dot product of [1, 2] and\n[3, 4] is 11 here.", "[3, 4] is {} here", 0},
        {"The dot product of [1, 2] and\n[3, 4] is 12 here.", "[3, 4] is {} here", 1},
        {"Nothing to see.", "[3, 4] is {} here", 1},
    };
    for (int k = 0; k < (int)(sizeof c / sizeof c[0]); k++) {
        write_text(path, c[k].text);
        Figure e = {path, c[k].prose, NULL, "01_dot_product", "= 3 + 8 = {}"};
        FILE *quiet = fopen("/dev/null", "w");
        int bad = check_figure(&e, quiet);
        fclose(quiet);
        ck_assert_msg(bad == c[k].want || (bad == -1 && !DOCS_KERNELS), "'%s': %d, want %d", c[k].text, bad,
                      c[k].want);
    }
    unlink(path);
}
END_TEST

/* Every entry of FIGURES: README prose and the demo's recaps agree with the runs. */
START_TEST(test_prose_figures) {
    if (!DOCS_KERNELS) {
        test_skip("check_docs", "neither of the READMEs' kernels in this build: figures in prose not compared");
        return;
    }
    int bad = 0, checked = 0, left = 0;
    for (size_t i = 0; i < sizeof FIGURES / sizeof FIGURES[0]; i++) {
        int r = check_figure(&FIGURES[i], stderr);
        if (r < 0) left++;
        else checked++, bad += r;
    }
    fprintf(stderr, "check_docs: %d figures in prose compared with their runs, %d left out (other kernels, "
                    "DOCS_SKIP)\n", checked, left);
    ck_assert_msg(bad == 0, "%d figure(s) in README prose or recaps disagree with the run (listed above)", bad);
}
END_TEST

/* Sentences the chapters printed that were not true (issue 35): the CPU
 * compared with itself ("cpu vs CPU: max |diff| = 0"), a rate from a time
 * printed as 0.0 ms, "reading notes" the student does not have, and a
 * reason for -inf masking the paper does not give. */
START_TEST(test_no_canned_claims) {
    struct {
        const char *prog, *never;
    } c[] = {{"05_positional_encoding", "cpu vs CPU"}, {"07_transformer", "cpu vs CPU"},
             {"07_transformer", " 0 ms wall"}, {"07_transformer", " 0.0 ms wall"}, {"07_transformer", " 0.00 ms wall"},
             {"02_softmax", "reading notes"}, {"06_masking", "why the paper uses it"}};
    for (int k = 0; k < (int)(sizeof c / sizeof c[0]); k++) {
        if (skipped(c[k].prog)) continue;
        int rc = -1;
        char *out = chapter_output(c[k].prog, "", &rc);
        ck_assert_msg(rc == 0, "%s: exit %d", c[k].prog, rc);
        ck_assert_msg(!strstr(out, c[k].never), "%s prints '%s'", c[k].prog, c[k].never);
        free(out);
    }
}
END_TEST

/* The check itself can fail: a README quoting a line 01_dot_product does
 * not print (one figure changed) is caught, the true line passes; a block
 * marked with this build's kernels is compared, one marked with the other
 * kernels is not, and an unknown mark is a problem. */
START_TEST(test_checker_catches_a_changed_figure) {
    char path[] = "/tmp/check_docs_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    const char *mine = DOCS_KERNELS ? DOCS_KERNELS : "avx512";
    const char *theirs = strcmp(mine, "avx512") ? "avx512" : "avx2";
    struct {
        const char *mark, *line;   /* [1, 2] . [3, 4] = 11 */
        int bad, blocks, other;
    } c[] = {
        {"", "= 11", 0, 1, 0},
        {"", "= 12", 1, 1, 0},
        {mine, "= 12", DOCS_KERNELS != NULL, DOCS_KERNELS != NULL, DOCS_KERNELS == NULL},
        {theirs, "= 12", 0, 0, 1},
        {"sse2", "= 11", 1, 0, 1},
    };
    for (int k = 0; k < (int)(sizeof c / sizeof c[0]); k++) {
        FILE *f = fopen(path, "w");
        fprintf(f, "# test\n<!-- output%s%s: 01_dot_product -->\n```text\n%s\n...\n```\n", *c[k].mark ? " " : "",
                c[k].mark, c[k].line);
        fclose(f);
        int blocks = 0, other = 0;
        FILE *quiet = fopen("/dev/null", "w");
        int bad = check_readme(path, &blocks, &other, quiet);
        fclose(quiet);
        ck_assert_msg(bad == c[k].bad && blocks == c[k].blocks && other == c[k].other,
                      "mark '%s', quote '%s': %d problems, %d blocks compared, %d left out; want %d, %d, %d",
                      c[k].mark, c[k].line, bad, blocks, other, c[k].bad, c[k].blocks, c[k].other);
    }
    unlink(path);
}
END_TEST

/* README.md and every chapters/NN_name/README.md. */
START_TEST(test_readme_quotes) {
    if (!DOCS_KERNELS) {
        /* PORTABLE=1 and valgrind's build (plain C), or OpenBLAS's gemm
         * (BLAS=openblas): neither kernels the READMEs quote */
        test_skip("check_docs", "this build has neither this project's AVX-512 nor its AVX2 kernels, so its "
                  "figures differ in the last bits from the READMEs' runs: quotes not compared (widths and "
                  "heights are)");
        return;
    }
    int bad = 0, blocks = 0, other = 0, files = 0;
    bad += check_readme("README.md", &blocks, &other, stderr);
    DIR *d = opendir("chapters");
    ck_assert_msg(d != NULL, "run from the repository root (no chapters/ here)");
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        char path[600];
        snprintf(path, sizeof path, "chapters/%s/README.md", de->d_name);
        int before = blocks;
        bad += check_readme(path, &blocks, &other, stderr);
        files += blocks > before;
    }
    closedir(d);
    fprintf(stderr, "check_docs: %d quoted blocks compared in %d chapter READMEs (+ README.md), this build's "
                    "kernels %s; %d blocks quote the other kernels' run\n", blocks, files, DOCS_KERNELS, other);
    ck_assert_msg(bad == 0, "%d stale quote(s) in the READMEs (listed above)", bad);
    ck_assert_msg(blocks > 0, "no quoted output found: the READMEs lost their markers");
}
END_TEST

/* The arguments of a chapter's run at its defaults, for the width and
 * height checks: none, except for 12_variations, whose defaults train 6
 * models (2-3 minutes). It runs at its defaults with the results file of a
 * recorded run (chapters/12_variations/recorded.tsv, which holds every row
 * of `--all` too): every row is found finished, nothing trains, and it
 * prints its three sections as a rerun of the defaults does. The lines a row prints while it trains are
 * counted in tests/check_variations.c. */
static const char *defaults_args(const char *prog) {
    return strcmp(prog, "12_variations") ? "" : "--results chapters/12_variations/recorded.tsv";
}

/* Every chapter at its defaults: no line wider than 100 columns. */
START_TEST(test_chapter_widths) {
    DIR *d = opendir("chapters");
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int bad = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        if (skipped(de->d_name)) continue;
        int rc = 0;
        char *out = chapter_output(de->d_name, defaults_args(de->d_name), &rc);
        ck_assert_msg(rc == 0, "%s at its defaults: exit status %d", de->d_name, rc);
        int lineno = 0;
        for (const char *p = out; *p;) {
            size_t len = strcspn(p, "\n");
            lineno++;
            int w = text_cols(p, len, 1);   /* as a terminal shows it: 貓 two columns */
            if (w > MAX_COLS) {
                fprintf(stderr, "%s: output line %d is %d columns: %.*s\n", de->d_name, lineno, w, (int)len, p);
                bad++;
            }
            p += len;
            if (*p) p++;
        }
        free(out);
    }
    closedir(d);
    ck_assert_msg(bad == 0, "%d output line(s) wider than %d columns (listed above)", bad, MAX_COLS);
}
END_TEST

/* ---- every section fits a 100 x 45 terminal ------------------------------------ */

#define MAX_ROWS 45   /* rows of the terminal a lecture (--pause) is given in */

/* In lecture mode the screen holds one section at a time: from the blank
 * line show_section prints before its banner to the last line before the
 * next one, plus the "-- Enter: section N --" prompt. Section 1 also holds
 * whatever the program printed before its first banner. Writes the rows of
 * each numbered section into rows[number] (sections 1..max_n); returns the
 * number of the tallest section, 0 when there is none. */
static int section_rows(const char *out, int *rows, int max_n) {
    int cur = 1, screen = 0, tallest = 0;   /* screen: rows on screen since the last pause */
    for (int i = 0; i <= max_n; i++) rows[i] = 0;
    for (const char *p = out; *p;) {
        size_t len = strcspn(p, "\n");
        int n = 0, part = 0;
        if (!strncmp(p, "== ", 3)) {          /* "== 4. ..." or a part of it, "== 4b. ..." */
            const char *q = p + 3;
            while (*q >= '0' && *q <= '9') n = n * 10 + (*q++ - '0');
            if (*q >= 'a' && *q <= 'z') q++, part = 1;
            if (*q != '.') n = 0;
        }
        if (n > 0 && n <= max_n) {
            if (screen > 0) screen--;         /* the blank line above a banner is the banner's screen */
            if (n != cur || part) {           /* a new screen (the text before section 1 shares its) */
                if (screen > rows[cur]) rows[cur] = screen;
                screen = 0;
            }
            cur = n;
            screen += 2;                      /* that blank line, and the prompt under the section */
        }
        screen++;
        p += len;
        if (*p) p++;
    }
    if (screen > rows[cur]) rows[cur] = screen;
    for (int i = 1; i <= max_n; i++)
        if (rows[i] > MAX_ROWS && (!tallest || rows[i] > rows[tallest])) tallest = i;
    return tallest;
}

/* The counter can fail: a section of 44 printed lines (45 rows with the
 * prompt) fits, one more line does not. */
START_TEST(test_section_counter) {
    for (int extra = 0; extra < 2; extra++) {
        size_t cap = 4096, o = 0;
        char *s = malloc(cap);
        o += (size_t)snprintf(s + o, cap - o, "intro\n\n== 1. One ==\nx\n\n== 2. Two ==\n");
        for (int i = 0; i < 42 + extra; i++) o += (size_t)snprintf(s + o, cap - o, "line %d\n", i);
        o += (size_t)snprintf(s + o, cap - o, "\n== 3. Three ==\nend\n");
        int rows[8];
        int tallest = section_rows(s, rows, 7);
        ck_assert_int_eq(rows[1], 5);   /* intro, blank, banner, x, prompt */
        ck_assert_int_eq(rows[2], 45 + extra);
        ck_assert_int_eq(rows[3], 4);
        ck_assert_int_eq(tallest, extra ? 2 : 0);
        free(s);
    }
    /* a part of a section ("== 2b.") is a screen of its own: 2 is the taller of its two */
    {
        char s[512];
        snprintf(s, sizeof s, "== 1. One ==\nx\n\n== 2. Two ==\na\nb\nc\n\n== 2b. Two, part b ==\nd\n");
        int rows[4];
        section_rows(s, rows, 3);
        ck_assert_int_eq(rows[2], 6);   /* blank, banner, a, b, c, prompt; 2b: blank, banner, d, prompt = 4 */
    }
}
END_TEST

/* Every chapter at its defaults: every numbered section fits 45 rows (the
 * output comes from the same cache as the width and README checks). */
START_TEST(test_chapter_section_heights) {
    DIR *d = opendir("chapters");
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int bad = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || skipped(de->d_name)) continue;
        int rc = 0;
        char *out = chapter_output(de->d_name, defaults_args(de->d_name), &rc);
        enum { MAXN = 64 };
        int rows[MAXN + 1];
        section_rows(out, rows, MAXN);
        for (int n = 1; n <= MAXN; n++) {
            if (rows[n] <= MAX_ROWS) continue;
            fprintf(stderr, "%s: section %d is %d rows, more than a %d-row terminal\n", de->d_name, n, rows[n],
                    MAX_ROWS);
            bad++;
        }
        free(out);
    }
    closedir(d);
    ck_assert_msg(bad == 0, "%d section(s) taller than %d rows (listed above)", bad, MAX_ROWS);
}
END_TEST

Suite *docs_suite(void) {
    Suite *s = suite_create("docs");
    TCase *tc = suite_case(s, "Programs", test_runs_leave_out_alone, test_checker_catches_a_changed_figure, test_readme_quotes,
                           test_figure_matching, test_figure_catches_a_changed_figure, test_prose_figures,
                           test_no_canned_claims,
                           test_chapter_widths, test_section_counter, test_chapter_section_heights);
    tcase_set_timeout(tc, 900);
    return s;
}

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
 * Runs the binaries in $BUILD_DIR (set by `make test`); skipped without it;
 * DOCS_SKIP lists chapters not to run (see skipped()).
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
 * compares no quote, and says so. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"

#define MAX_COLS 100   /* widest line any chapter may print at its defaults */

/* ---- running a chapter, once ------------------------------------------------ */

/* DOCS_SKIP="08_training ...": chapters not run here. `make SANITIZE=1 test`
 * sets it for 08_training, which takes minutes under ASan; the output does
 * not depend on the sanitizers, and the plain `make test` checks it. */
static int skipped(const char *prog) {
    const char *list = getenv("DOCS_SKIP");
    size_t n = strlen(prog);
    for (const char *p = list ? strstr(list, prog) : NULL; p; p = strstr(p + 1, prog))
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ')) return 1;
    return 0;
}

static double mtime_of(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
}

static int have_build(void) { return build_dir("check_docs", "docs and width checks") != NULL; }

/* The stdout of "$BUILD_DIR/prog args --no-color" (malloc'd), from the
 * cache when it is newer than the binary. NULL when the binary is missing;
 * *rc gets the exit status. */
static char *chapter_output(const char *prog, const char *args, int *rc) {
    const char *build = getenv("BUILD_DIR");
    char bin[1024], cache[2048], key[256];
    snprintf(bin, sizeof bin, "%s/%s", build, prog);
    if (access(bin, X_OK) != 0) return NULL;
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
    if (!have_build()) return;
    const char *build = getenv("BUILD_DIR");
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
            } else if (!(output = chapter_output(prog, cmdline + pl, &rc))) {
                fprintf(report, "%s:%d: no binary for '%s' in $BUILD_DIR\n", path, marker_line, prog);
                bad++;
            } else if (rc != 0) {
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


/* The check itself can fail: a README quoting a line 01_dot_product does
 * not print (one figure changed) is caught, the true line passes; a block
 * marked with this build's kernels is compared, one marked with the other
 * kernels is not, and an unknown mark is a problem. */
START_TEST(test_checker_catches_a_changed_figure) {
    if (!have_build()) return;
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
    if (!have_build()) return;
    if (!DOCS_KERNELS) {
        /* PORTABLE=1 and valgrind's build (plain C), or OpenBLAS's gemm
         * (BLAS=openblas): neither kernels the READMEs quote */
        fprintf(stderr, "check_docs: this build has neither this project's AVX-512 nor its AVX2 kernels, so its "
                        "figures differ in the last bits from the READMEs' runs: quotes not compared (widths and "
                        "heights are)\n");
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
 * height checks: none, except for 12_variations, whose defaults train 18
 * models (minutes). It runs at its defaults with the results file of a
 * recorded run of them (chapters/12_variations/recorded.tsv): every row is
 * found finished, nothing trains, and it prints its three sections as a
 * rerun of the defaults does. The lines a row prints while it trains are
 * counted in tests/check_variations.c. */
static const char *defaults_args(const char *prog) {
    return strcmp(prog, "12_variations") ? "" : "--results chapters/12_variations/recorded.tsv";
}

/* Every chapter at its defaults: no line wider than 100 columns. */
START_TEST(test_chapter_widths) {
    if (!have_build()) return;
    DIR *d = opendir("chapters");
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int checked = 0, bad = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        if (skipped(de->d_name)) {
            fprintf(stderr, "check_docs: %s skipped (DOCS_SKIP)\n", de->d_name);
            continue;
        }
        int rc = 0;
        char *out = chapter_output(de->d_name, defaults_args(de->d_name), &rc);
        if (!out) continue;
        checked++;
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
    if (checked == 0) fprintf(stderr, "check_docs: no chapter binaries, width check skipped\n");
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
    if (!have_build()) return;
    DIR *d = opendir("chapters");
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int bad = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || skipped(de->d_name)) continue;
        int rc = 0;
        char *out = chapter_output(de->d_name, defaults_args(de->d_name), &rc);
        if (!out) continue;
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
                           test_chapter_widths, test_section_counter, test_chapter_section_heights);
    tcase_set_timeout(tc, 900);
    return s;
}

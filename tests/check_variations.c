/* check_variations.c - chapter 12 (Table 3's variations) on a tiny budget:
 * a run stopped with Ctrl-C after its first row, run again, keeps that row
 * as it was (not retrained) and trains only the rest; --rows picks groups;
 * bad --rows and a damaged results file exit 2 with a message; every
 * output line fits 100 columns, and the rows --all trains would fit
 * a 45-row screen; the README's recorded tables are what the
 * program prints from chapters/12_variations/recorded.tsv; a results file
 * with more rows than the program has keys (repeats, unknown keys, other
 * settings) loses none of them.
 * "Hostile" (issue 34): numbers out of range in results.tsv, a last line
 * without its newline, empty --rows names, a row that cannot be built
 * (found before any row trains), a full disk while the table is written.
 * "Verdicts" (issue 35): only converged rows are counted, a one-seed
 * difference within twice the base seeds' spread is weak, one base seed
 * makes nothing strong, a base that learned nothing is too short to
 * compare, and the plot draws differences on one scale, on results made by
 * hand (nothing trains); --rows takes row names, --all every row.
 *
 * Runs $BUILD_DIR/12_variations (set by `make test`); fails without it.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "12_variations/verdict.h"

static char dir[64], bin[512], tsv[160];
static char *out;   /* the last run's output (run() frees the one before) */

#define TINY "--train-size 300 --dev-size 20 --steps 6 --layers 2 --d-model 16 --heads 2 --d-ff 32 " \
             "--vocab 200 --tokens 300 --seeds 2"
/* results.tsv's first line, and TINY's budget in it (its seed, 42, after) */
#define TSV_HEAD_LINE "key\ttokens\tparams\tdev_ppl\tdev_bleu\ttrain_s\teval_s\tbudget\n"
#define TINY_BUDGET "steps=6,warmup=200,factor=0.6,tokens=300,rows=96,train=300,dev=20,vocab=200,N=2,d=16," \
                    "ff=32,h=2,drop=0.1,ls=0.1,seed="

static int setup_dir(void) {
    if (!chapter_binary(bin, sizeof bin, "check_variations", "12_variations")) return 0;
    fresh_dir(dir, sizeof dir, "check_variations");
    snprintf(tsv, sizeof tsv, "%s/results.tsv", dir);
    return 1;
}

static void cleanup_dir(void) { remove_dir(dir); }

/* Runs the chapter with args, stdout+stderr into out; returns the exit status. */
static int run(const char *args) {
    free(out);
    return sh_captured(&out, NULL, "%s --no-color --out %s %s", bin, dir, args);
}

/* data lines of results.tsv (the header not counted); first gets line 1 */
static int tsv_rows(char *first, size_t cap) {
    FILE *f = fopen(tsv, "r");
    if (!f) return 0;
    char line[1024];
    int n = -1;
    while (fgets(line, sizeof line, f)) {
        if (n == 0 && first) snprintf(first, cap, "%s", line);
        n++;
    }
    fclose(f);
    return n < 0 ? 0 : n;
}

/* Section 2 of a run with --all trains 18 models, too slow for a test
 * (check_docs.c checks the defaults on recorded results, where every row
 * is kept and prints one line). Here the lines of the rows this run trained
 * are counted: --all's 18 must fit a 45-row screen with the blank line and
 * banner above, the "N models" line and the prompt under it. */
static void assert_trained_rows_fit(int kept, int trained) {
    const char *a = strstr(out, "\n== 2. "), *b = a ? strstr(a, "\n== 3. ") : NULL;
    ck_assert_msg(a && b, "no sections 2 and 3 in:\n%.2000s", out);
    int lines = 0;   /* the banner, the "N models" line, the rows */
    for (const char *p = a + 1; p < b; p++) lines += *p == '\n';
    int per_row = (lines - 2 - kept) / trained;
    ck_assert_msg(lines == 2 + kept + per_row * trained, "section 2: %d lines for %d kept and %d trained rows",
                  lines, kept, trained);
    ck_assert_msg(4 + 18 * per_row <= 45, "a trained row prints %d lines: --all's 18 make section 2 %d rows",
                  per_row, 4 + 18 * per_row);
}

/* Interrupt after the first finished row (SIGINT, as Ctrl-C), run again:
 * the finished rows are kept byte for byte (their timings too: not
 * retrained), only the rest is trained, and the table comes out. */
START_TEST(test_interrupt_and_resume) {
    if (!setup_dir()) return;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(99);
        execl(bin, bin, "--no-color", "--out", dir, "--rows", "base,A", "--train-size", "300", "--dev-size", "20",
              "--steps", "6", "--layers", "2", "--d-model", "16", "--heads", "2", "--d-ff", "32", "--vocab", "200",
              "--tokens", "300", "--seeds", "2", (char *)NULL);
        _exit(98);
    }
    int rows = 0, st;
    for (int i = 0; i < 6000 && rows < 1; i++) {   /* up to 60 s */
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        rows = tsv_rows(NULL, 0);
        if (waitpid(pid, &st, WNOHANG) == pid) ck_abort_msg("the run ended before it was interrupted");
    }
    ck_assert_int_ge(rows, 1);
    kill(pid, SIGINT);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "interrupted run: status %d", st);
    char first[1024] = "", again[1024] = "";
    int kept = tsv_rows(first, sizeof first);
    ck_assert_msg(kept >= 1 && kept < 5, "%d rows finished before the interrupt (of 5)", kept);
    ck_assert_ptr_nonnull(strstr(first, "base#1\t"));

    ck_assert_int_eq(run("--rows base,A " TINY), 0);   /* same settings */
    char want[64];
    snprintf(want, sizeof want, "%-14s done earlier", "base#1");
    ck_assert_msg(strstr(out, want) != NULL, "first row not kept:\n%.2000s", out);
    snprintf(want, sizeof want, "%d finished earlier, %d to train", kept, 5 - kept);
    ck_assert_msg(strstr(out, want) != NULL, "expected '%s' in:\n%.2000s", want, out);
    ck_assert_int_eq(tsv_rows(again, sizeof again), 5);
    ck_assert_str_eq(again, first);   /* the very line: timings and all */
    ck_assert_ptr_nonnull(strstr(out, "3. Ours beside the paper's Table 3"));
    ck_assert_ptr_nonnull(strstr(out, "A h=16"));
    assert_lines_fit(out, 100, dir);
    assert_trained_rows_fit(kept, 5 - kept);

    /* a third run trains nothing */
    ck_assert_int_eq(run("--rows base,A " TINY), 0);
    ck_assert_ptr_nonnull(strstr(out, "5 finished earlier, 0 to train"));
    cleanup_dir();
}
END_TEST

/* --rows E alone: one model, learned positional embeddings, and a table
 * that says there is no base to compare with. Other settings (--steps 4)
 * are another experiment: the earlier row is kept in the file, not used. */
START_TEST(test_rows_subset_and_settings) {
    if (!setup_dir()) return;
    ck_assert_int_eq(run("--rows E " TINY), 0);
    ck_assert_ptr_nonnull(strstr(out, "1 model for --rows E"));
    ck_assert_ptr_nonnull(strstr(out, "learned"));
    ck_assert_ptr_nonnull(strstr(out, "no base row finished"));
    ck_assert_int_eq(run("--rows E " TINY " --steps 4"), 0);
    ck_assert_ptr_nonnull(strstr(out, "1 of other settings (kept in the file, not used)"));
    ck_assert_ptr_nonnull(strstr(out, "0 finished earlier, 1 to train"));
    ck_assert_int_eq(tsv_rows(NULL, 0), 2);
    /* 6 steps teach the base nothing: the table says it is too short to
     * compare (test_too_short_to_compare; one seed: test_one_seed_nothing_strong) */
    ck_assert_int_eq(run("--rows base,E " TINY " --seeds 1"), 0);
    ck_assert_ptr_nonnull(strstr(out, "too short to compare with the paper"));
    ck_assert_ptr_nonnull(strstr(out, "E learned PE"));
    assert_lines_fit(out, 100, dir);
    cleanup_dir();
}
END_TEST

START_TEST(test_bad_input) {
    if (!setup_dir()) return;
    ck_assert_int_eq(run("--rows A,F " TINY), 2);
    ck_assert_ptr_nonnull(strstr(out, "'F' is not a group"));
    ck_assert_int_eq(run(TINY " --heads 3"), 2);   /* 16 is not divisible by 3 */
    ck_assert_ptr_nonnull(strstr(out, "not divisible"));
    write_text(tsv, TSV_HEAD_LINE "base#1\tgarbage\n");
    ck_assert_int_eq(run("--rows E " TINY), 2);
    ck_assert_ptr_nonnull(strstr(out, "line 2 is damaged"));
    write_text(tsv, "something else\n");
    ck_assert_int_eq(run("--rows E " TINY), 2);
    ck_assert_ptr_nonnull(strstr(out, "not a results file"));
    cleanup_dir();
}
END_TEST

/* Lines of want that are not lines of have; 0: every line is there. */
static int lines_missing(const char *want, const char *have) {
    char *text = strdup(want);
    ck_assert_ptr_nonnull(text);
    int missing = 0;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        char want[1100];
        snprintf(want, sizeof want, "\n%s\n", l);
        missing += !strstr(have, want) && strncmp(have, want + 1, strlen(want + 1));
    }
    free(text);
    return missing;
}

/* A results file can hold more lines than the program has rows: two files
 * pasted into one repeat keys, a line can carry a key this program does
 * not know, and any number can be of other settings. The run must read it
 * without writing past its array (the old code crashed with SIGSEGV once a
 * budget had 21 lines, leaving its temporary behind) and the rewrite after
 * the row it trains keeps every line it read (the old one kept 64 of other
 * settings). The first line of a repeated key is the one used. */
START_TEST(test_results_file_overfull) {
    if (!setup_dir()) return;
    const char *tiny = TINY_BUDGET;
    size_t cap = 200 * 256, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    len += snprintf(text + len, cap - len, TSV_HEAD_LINE);
    for (int i = 0; i < 70; i++)   /* other settings: another --seed each */
        len += snprintf(text + len, cap - len, "base#1\t100\t200\t%d.5000\t1.00\t1.0\t1.0\t%s%d\n", i + 1, tiny,
                        1000 + i);
    for (int i = 0; i < 21; i++)   /* this budget: base#1 21 times, the first is used */
        len += snprintf(text + len, cap - len, "base#1\t100\t200\t3.%04d\t1.00\t1.0\t1.0\t%s42\n", i + 1, tiny);
    len += snprintf(text + len, cap - len, "Z:zzz\t100\t200\t3.0000\t1.00\t1.0\t1.0\t%s42\n", tiny);
    ck_assert_uint_lt(len, cap);
    write_text(tsv, text);

    ck_assert_int_eq(run("--rows base " TINY), 0);   /* trains base#2, then rewrites the file */
    ck_assert_msg(strstr(out, "1 finished earlier, 1 to train") && strstr(out, "dev PPL 3.000, BLEU 1.00 (kept"),
                  "not the first base#1:\n%.3000s", out);
    ck_assert_ptr_nonnull(strstr(out, "70 of other settings (kept in the file, not used)"));
    ck_assert_ptr_nonnull(strstr(out, "20 repeat the key of an earlier line: the first is used"));
    ck_assert_ptr_nonnull(strstr(out, "1 has a key this program does not know"));
    assert_lines_fit(out, 100, dir);
    ck_assert_int_eq(tsv_rows(NULL, 0), 70 + 21 + 1 + 1);
    char *after = read_file_or_fail(tsv, NULL);
    ck_assert_int_eq(lines_missing(after, text), 1);   /* base#2's line is the one added */
    int lost = lines_missing(text, after);
    ck_assert_msg(lost == 0, "%d lines of the results file lost in the rewrite:\n%s", lost, after);
    ck_assert_int_eq(sh("ls -A '%s' | grep -q '^\\.results'", dir), 1);   /* no temporary left */
    free(after);

    /* every row (--all) on the recorded results pasted twice: nothing
     * trains, the repeats are named, the file stays as it was */
    char *rec = read_file_or_fail("chapters/12_variations/recorded.tsv", NULL);
    size_t rl = strlen(rec);
    const char *body = strchr(rec, '\n') + 1;
    free(text);
    text = malloc(2 * rl + 1);
    ck_assert_ptr_nonnull(text);
    snprintf(text, 2 * rl + 1, "%s%s", rec, body);
    write_text(tsv, text);
    char args[256];
    snprintf(args, sizeof args, "--all --results %s", tsv);
    ck_assert_int_eq(run(args), 0);
    ck_assert_msg(strstr(out, "18 finished earlier, 0 to train") && strstr(out, "18 repeat the key"),
                  "recorded results pasted twice:\n%.3000s", out);
    after = read_file_or_fail(tsv, NULL);
    ck_assert_str_eq(after, text);
    ck_assert_int_eq(sh("ls -A '%s' | grep -q '^\\.results'", dir), 1);
    free(after);
    free(rec);
    free(text);
    cleanup_dir();
}
END_TEST

/* The README's recorded tables are what the program prints from the
 * recorded results file: each block after <!-- recorded-table: ARGS --> is
 * made of lines of `12_variations ARGS --results recorded.tsv` (the
 * default's 6 rows, --all's 18, the 1500-step rows). Printing them trains
 * nothing and leaves the file as it was. */
START_TEST(test_recorded_table_matches_readme) {
    if (!setup_dir()) return;
    const char *rec = "chapters/12_variations/recorded.tsv";
    char *before = read_file(rec, NULL), *readme = read_file("chapters/12_variations/README.md", NULL);
    ck_assert_msg(before && readme, "run from the repository root: %s or the README missing", rec);
    int blocks = 0;
    for (const char *m = strstr(readme, "<!-- recorded-table:"); m; m = strstr(m + 1, "<!-- recorded-table:")) {
        const char *a = m + strlen("<!-- recorded-table:"), *e = strstr(a, "-->");
        ck_assert_ptr_nonnull(e);
        char args[512];
        snprintf(args, sizeof args, "--results %s %.*s", rec, (int)(e - a), a);
        ck_assert_int_eq(run(args), 0);
        ck_assert_msg(strstr(out, " 0 to train") != NULL, "'%s': the recorded file lacks rows:\n%.2000s", args, out);
        const char *p = strstr(e, "```text\n");
        ck_assert_ptr_nonnull(p);
        p += 8;
        int lines = 0;
        while (strncmp(p, "```", 3)) {
            size_t len = strcspn(p, "\n");
            char line[512];
            snprintf(line, sizeof line, "%.*s", (int)len, p);
            ck_assert_msg(strstr(out, line) != NULL, "README line not in the output of '%s': '%s'", args, line);
            lines++;
            p += len + 1;
        }
        ck_assert_int_ge(lines, 8);
        blocks++;
    }
    ck_assert_int_eq(blocks, 3);   /* the default, --all, and 1500 steps */
    char *after = read_file_or_fail(rec, NULL);
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
    free(readme);
    cleanup_dir();
}
END_TEST

/* ---- issue 34: hostile results files, flags and a full disk ---------------------------- */

#define GOOD_BASE "base#1\t100\t200\t3.0000\t1.00\t1.0\t1.0\t" TINY_BUDGET "42\n"

/* Issue 34, item 4: a number in results.tsv that no run of this program can
 * have written (PPL -5 or 1e308, BLEU 1e9, a token count past a long,
 * params -1) is a damaged line: exit 2 naming the file, the line and the
 * field, before anything reaches table.md (the old code checked only that
 * PPL and BLEU were finite and printed the rest into the table). Lines of
 * other settings are held to the same ranges. A good file still loads. */
START_TEST(test_results_values_checked) {
    if (!setup_dir()) return;
    static const struct {
        const char *field, *line;
    } bad[] = {
        {"dev_ppl", "A:h=1\t100\t200\t-5\t1.00\t1.0\t1.0\t"},
        {"dev_ppl", "A:h=1\t100\t200\t1e308\t1.00\t1.0\t1.0\t"},
        {"dev_ppl", "A:h=1\t100\t200\t0.5\t1.00\t1.0\t1.0\t"},
        {"dev_ppl", "A:h=1\t100\t200\tnan\t1.00\t1.0\t1.0\t"},
        {"dev_bleu", "A:h=1\t100\t200\t3.0\t1e9\t1.0\t1.0\t"},
        {"dev_bleu", "A:h=1\t100\t200\t3.0\t-0.5\t1.0\t1.0\t"},
        {"tokens", "A:h=1\t99999999999999999999999\t200\t3.0\t1.00\t1.0\t1.0\t"},
        {"tokens", "A:h=1\t-3\t200\t3.0\t1.00\t1.0\t1.0\t"},
        {"params", "A:h=1\t100\t-1\t3.0\t1.00\t1.0\t1.0\t"},
        {"params", "A:h=1\t100\t0\t3.0\t1.00\t1.0\t1.0\t"},
        {"params", "A:h=1\t100\t99999999999999999999999\t3.0\t1.00\t1.0\t1.0\t"},
        {"train_s", "A:h=1\t100\t200\t3.0\t1.00\t-1\t1.0\t"},
        {"eval_s", "A:h=1\t100\t200\t3.0\t1.00\t1.0\t1e300\t"},
    };
    char text[1024], table[160];
    snprintf(table, sizeof table, "%s/table.md", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int other = 0; other < 2; other++) {   /* this run's settings, then another --seed's */
            snprintf(text, sizeof text, "%s" GOOD_BASE "%s" TINY_BUDGET "%s\n", TSV_HEAD_LINE, bad[i].line,
                     other ? "7" : "42");
            write_text(tsv, text);
            int rc = run("--rows base " TINY " --seeds 1");
            ck_assert_msg(rc == 2, "'%s' (%s settings): exit %d, want 2:\n%.3000s", bad[i].line,
                          other ? "other" : "this run's", rc, out);
            char want[256];
            snprintf(want, sizeof want, "%s line 3 is damaged: %s '", tsv, bad[i].field);
            ck_assert_msg(strstr(out, want) != NULL, "expected '%s' in:\n%.3000s", want, out);
            ck_assert_msg(access(table, F_OK) != 0, "'%s': table.md written", bad[i].line);
        }
    /* the same file with a good line 3 loads, and the row is in the table */
    snprintf(text, sizeof text, "%s" GOOD_BASE "A:h=1\t100\t200\t3.5\t1.00\t1.0\t1.0\t" TINY_BUDGET "42\n",
             TSV_HEAD_LINE);
    write_text(tsv, text);
    ck_assert_int_eq(run("--rows base,h=1 " TINY " --seeds 1"), 0);
    char *md = read_file_or_fail(table, NULL);
    ck_assert_msg(strstr(md, "| A h=1 | 3.500 |") != NULL, "table.md:\n%s", md);
    free(md);
    cleanup_dir();
}
END_TEST

/* A results file whose last line has no newline (edited by hand) keeps
 * that line whole when a row is added: the old rewrite glued the new row
 * onto its end, one line of two. */
START_TEST(test_results_last_line_unterminated) {
    if (!setup_dir()) return;
    const char *text = TSV_HEAD_LINE "base#1\t100\t200\t3.0000\t1.00\t1.0\t1.0\t" TINY_BUDGET "7";
    write_text(tsv, text);
    ck_assert_int_eq(run("--rows base " TINY " --seeds 1"), 0);   /* trains base#1 of seed 42, rewrites */
    ck_assert_int_eq(tsv_rows(NULL, 0), 2);
    char *after = read_file_or_fail(tsv, NULL), with_nl[512];
    snprintf(with_nl, sizeof with_nl, "%s\n", text);
    ck_assert_msg(!strncmp(after, with_nl, strlen(with_nl)), "the line of seed 7 changed:\n%s", after);
    free(after);
    /* and read again, both lines load */
    ck_assert_int_eq(run("--rows base " TINY " --seeds 1"), 0);
    ck_assert_ptr_nonnull(strstr(out, "1 of other settings"));
    ck_assert_ptr_nonnull(strstr(out, "1 finished earlier, 0 to train"));
    cleanup_dir();
}
END_TEST

/* Issue 34, item 4: --rows with an empty name in it (",", "A,,B", "A,")
 * is a flag error, exit 2, before anything runs: the old parser skipped
 * empty names, so `--rows ,` ran 0 models and exited 0 ("" is refused by
 * the flag parser: "--rows needs a value"). */
START_TEST(test_rows_empty) {
    if (!setup_dir()) return;
    const char *lists[] = {"','", "''", "A,,B", "A,", ",E"};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "--rows %s " TINY, lists[i]);
        int rc = run(args);
        ck_assert_msg(rc == 2, "--rows %s: exit %d, want 2:\n%.2000s", lists[i], rc, out);
        ck_assert_msg(strstr(out, "--rows") && (strstr(out, "is empty") || strstr(out, "needs a value")),
                      "--rows %s:\n%.2000s", lists[i], out);
        ck_assert_msg(!strstr(out, "== 1."), "--rows %s: the run started:\n%.2000s", lists[i], out);
    }
    ck_assert_int_eq(access(tsv, F_OK), -1);
    cleanup_dir();
}
END_TEST

/* Issue 34, item 4: every selected row's configuration is checked before
 * any row trains. With --d-model 8, A's h=16 has no d_k: the old run
 * trained base (and wrote it to results.tsv) before it reached A and
 * exited 2; now it exits 2 at once, naming the row, with nothing trained. */
START_TEST(test_rows_checked_before_training) {
    if (!setup_dir()) return;
    ck_assert_int_eq(run("--rows base,A " TINY " --d-model 8"), 2);
    ck_assert_msg(strstr(out, "row A:h=16") && strstr(out, "not divisible"), "%.3000s", out);
    ck_assert_msg(!strstr(out, "base#1 "), "a row trained before the check:\n%.3000s", out);
    ck_assert_msg(access(tsv, F_OK) != 0, "results.tsv written: a row trained before the check");
    cleanup_dir();
}
END_TEST

/* The child of test_full_disk: a disk that holds 100 bytes a file, then
 * the command (stdout is /dev/null, which has no size) */
static void exec_on_full_disk(void *cmd) {
    limit_file_size(100);
    execl("/bin/sh", "sh", "-c", (const char *)cmd, (char *)NULL);
    _exit(127);
}

/* Issue 34, item 3(c): the disk fills while table.md and variations.dat
 * are written. The run exits 1 saying which file failed; neither
 * temporary is left in --out (the old code exited at table.md's failure
 * and left `.variations.dat.XXXXXX` behind) and the files of the run
 * before are as they were: table and plot data are written together or
 * not at all. */
START_TEST(test_full_disk) {
    if (!setup_dir()) return;
    const char *names[] = {"table.md", "variations.dat", "variations.gp", "results.tsv"};
    write_text(tsv, TSV_HEAD_LINE GOOD_BASE);
    ck_assert_int_eq(run("--rows base " TINY " --seeds 1"), 0);   /* nothing trains: the table from the file */
    char *before[4], path[160];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        before[i] = read_file_or_fail(path, NULL);
    }
    ck_assert_ptr_nonnull(strstr(before[0], "| 3.000 |"));
    /* another PPL in the file: a table that differs from the saved one */
    write_text(tsv, TSV_HEAD_LINE "base#1\t100\t200\t4.0000\t1.00\t1.0\t1.0\t" TINY_BUDGET "42\n");
    free(before[3]);
    before[3] = read_file_or_fail(tsv, NULL);
    char cmd[1024], *err = NULL;
    snprintf(cmd, sizeof cmd, "%s --no-color --out %s --rows base " TINY " --seeds 1", bin, dir);
    int rc = run_captured(NULL, &err, exec_on_full_disk, cmd);
    ck_assert_msg(rc == 1, "full disk: exit %d, want 1; stderr:\n%s", rc, err);
    ck_assert_msg(strstr(err, "table.md") && strstr(err, "failed"), "stderr:\n%s", err);
    ck_assert_msg(sh("ls -A '%s' | grep '^\\.'", dir) == 1, "temporaries left in --out (listed above)");
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *now = read_file_or_fail(path, NULL);
        ck_assert_msg(!strcmp(now, before[i]), "%s changed on a full disk:\n%s", names[i], now);
        free(now), free(before[i]);
    }
    free(err);
    cleanup_dir();
}
END_TEST

/* ---- issue 35: verdicts as strong as their evidence ------------------------------------ */

/* results.tsv of TINY's budget (seed 42) holding n rows, each key, dev PPL,
 * dev BLEU: a run of the same settings finds them finished and trains
 * nothing, so the table is judged on numbers made by hand. */
static void write_results(const char *const *key, const double *ppl, const double *bleu, int n) {
    char text[4096];
    size_t len = snprintf(text, sizeof text, TSV_HEAD_LINE);
    for (int i = 0; i < n; i++)
        len += snprintf(text + len, sizeof text - len, "%s\t100\t200\t%.4f\t%.2f\t1.0\t1.0\t" TINY_BUDGET "42\n",
                        key[i], ppl[i], bleu[i]);
    ck_assert_uint_lt(len, sizeof text);
    write_text(tsv, text);
}

/* The line of the output that starts with "  " + label (a row of the table). */
static const char *table_row(const char *label) {
    char want[64];
    snprintf(want, sizeof want, "\n  %-12s ", label);
    const char *p = strstr(out, want);
    ck_assert_msg(p != NULL, "no row '%s' in:\n%.3000s", label, out);
    return p + 1;
}

/* Does the table row of label hold text (on its own line)? */
static int row_has(const char *label, const char *text) {
    const char *p = table_row(label), *e = strchr(p, '\n');
    const char *q = strstr(p, text);
    return q && (!e || q < e);
}

static const char *const KEYS_A[] = {"base#1", "base#2", "A:h=1", "A:h=4", "A:h=16"};

/* Only converged rows count (issue 35, item 3): a row whose dev PPL is over
 * twice the base's is still learning, its direction says how fast it
 * starts. Here h=4 (PPL 9.0, worse, as the paper) and h=16 (7.0) are over
 * 2 x 3.05: the old count took them in ("2 of 3 rows for PPL"); now 1 of 1
 * converged row, and the two left out are named with why; their rows show
 * their directions, marked "slow" instead of a verdict. */
START_TEST(test_counts_converged_rows_only) {
    if (!setup_dir()) return;
    const double ppl[] = {3.00, 3.10, 3.50, 9.00, 7.00}, bleu[] = {50, 52, 40, 20, 60};
    write_results(KEYS_A, ppl, bleu, 5);
    ck_assert_int_eq(run("--rows base,A " TINY), 0);
    ck_assert_msg(strstr(out, "5 finished earlier, 0 to train"), "something trained:\n%.3000s", out);
    ck_assert_msg(strstr(out, "the paper's direction holds in 1 of 1 converged rows for PPL, 1 of 1 for BLEU"),
                  "the count is not of converged rows only:\n%.4000s", out);
    ck_assert_msg(strstr(out, "converged: 1 of 3 rows (dev PPL at most twice the base's 3.050); left out of the "
                              "count:\n  A h=4, A h=16 (still learning"),
                  "the rows left out are not named:\n%.4000s", out);
    ck_assert(row_has("A h=4", "- -  slow") && row_has("A h=16", "= -  slow"));   /* shown, not counted */
    assert_lines_fit(out, 100, dir);
    cleanup_dir();
}
END_TEST

/* A one-seed difference within twice the base seeds' spread is weak, not
 * one of "the clearest agreements" (issue 35, item 3). Base 3.00 / 3.10
 * (band 0.05) and BLEU 50 / 52 (band 1): h=1 at +0.09 PPL and -1.5 BLEU is
 * weak on both; h=4 at +0.25 and -6 is clear; h=16 is the base's "=". The
 * same results give the same bytes twice. */
START_TEST(test_weak_direction) {
    if (!setup_dir()) return;
    const double ppl[] = {3.00, 3.10, 3.14, 3.30, 3.05}, bleu[] = {50, 52, 49.5, 45, 51};
    write_results(KEYS_A, ppl, bleu, 5);
    ck_assert_int_eq(run("--rows base,A " TINY), 0);
    ck_assert_msg(row_has("A h=1", "- -? yes  - -? yes"), "h=1 not weak:\n%.4000s", out);
    ck_assert_msg(row_has("A h=4", "- -  yes  - -  yes"), "h=4 not clear:\n%.4000s", out);
    ck_assert_msg(row_has("A h=16", "= =  yes  = =  yes"), "h=16 not same:\n%.4000s", out);
    ck_assert_msg(strstr(out, "the paper's direction holds in 3 of 3 converged rows for PPL, 3 of 3 for BLEU"),
                  "%.4000s", out);
    ck_assert_msg(strstr(out, "of these, 1 (PPL) and 1 (BLEU) differ from base by more than twice"), "%.4000s", out);
    ck_assert_msg(strstr(out, "converged: 3 of 3 rows (dev PPL at most twice the base's 3.050)\n"), "%.4000s", out);
    assert_lines_fit(out, 100, dir);
    char *first = strdup(out);
    ck_assert_int_eq(run("--rows base,A " TINY), 0);
    ck_assert_str_eq(out, first);
    free(first);
    cleanup_dir();
}
END_TEST

/* One base seed measures no spread: say so, and call no difference strong
 * (the old run said "every difference counts"). */
START_TEST(test_one_seed_nothing_strong) {
    if (!setup_dir()) return;
    const char *const keys[] = {"base#1", "A:h=1", "A:h=4", "A:h=16"};
    const double ppl[] = {3.00, 3.50, 3.01, 3.00}, bleu[] = {50, 40, 50.5, 50};
    write_results(keys, ppl, bleu, 4);
    ck_assert_int_eq(run("--rows base,A " TINY " --seeds 1"), 0);
    ck_assert_msg(!strstr(out, "every difference counts"), "%.4000s", out);
    ck_assert_msg(strstr(out, "one base seed, so no spread to judge by"), "%.4000s", out);
    ck_assert_msg(row_has("A h=1", "- -? yes  - -? yes"), "h=1 called strong on one seed:\n%.4000s", out);
    ck_assert_msg(row_has("A h=16", "= =  yes"), "%.4000s", out);
    ck_assert_msg(strstr(out, "with one base seed no difference is strong"), "%.4000s", out);
    assert_lines_fit(out, 100, dir);
    cleanup_dir();
}
END_TEST

/* A base that has not learned the task (a 60-step run like make run's:
 * BLEU 0.16, PPL 134) is too short to compare: no directions, no count, a message
 * saying why (the old run printed "holds here in 0 of 1 rows"). */
START_TEST(test_too_short_to_compare) {
    if (!setup_dir()) return;
    const double ppl[] = {180, 175, 190, 200, 185}, bleu[] = {0.13, 0.21, 0.05, 0.10, 0.30};
    write_results(KEYS_A, ppl, bleu, 5);
    ck_assert_int_eq(run("--rows base,A " TINY), 0);
    ck_assert_msg(strstr(out, "too short to compare with the paper: the base's dev BLEU 0.17 is under 10"),
                  "%.4000s", out);
    ck_assert_msg(!strstr(out, "direction holds") && !strstr(out, "converged:"), "a verdict on a run too short:\n%.4000s",
                  out);
    ck_assert_msg(!row_has("A h=1", "yes") && !row_has("A h=1", "no"), "%.4000s", out);
    assert_lines_fit(out, 100, dir);
    cleanup_dir();
}
END_TEST

/* variations.png shows each row's difference from the base beside the
 * paper's, on one scale: no line joins the rows (they are categories) and
 * no second axis scales the paper apart (issue 35, item 3); the data holds
 * the differences and the base's band. */
START_TEST(test_plot_differences_one_scale) {
    if (!setup_dir()) return;
    const double ppl[] = {3.00, 3.10, 3.50, 3.30, 3.05}, bleu[] = {50, 52, 40, 45, 51};
    write_results(KEYS_A, ppl, bleu, 5);
    ck_assert_int_eq(run("--rows base,A " TINY), 0);
    char path[200];
    snprintf(path, sizeof path, "%s/variations.gp", dir);
    char *gp = read_file_or_fail(path, NULL);
    ck_assert_msg(!strstr(gp, "lines") && !strstr(gp, "y2") && !strstr(gp, "x2"), "variations.gp:\n%s", gp);
    ck_assert_msg(strstr(gp, "boxxyerror") && strstr(gp, "paper") && strstr(gp, "rect from -0.0500"),
                  "variations.gp:\n%s", gp);
    free(gp);
    snprintf(path, sizeof path, "%s/variations.dat", dir);
    char *dat = read_file_or_fail(path, NULL);
    /* h=1: PPL 3.50 - 3.05, BLEU 40 - 51; the paper's 5.29 - 4.92, 24.9 - 25.8 */
    ck_assert_msg(strstr(dat, "\"A h=1\" 3.5000 40.00 5.29 24.9 0.4500 -11.00 0.370 -0.90"), "variations.dat:\n%s",
                  dat);
    free(dat);
    cleanup_dir();
}
END_TEST

/* --rows takes a row's name as well as a group (the default is a few rows
 * of several groups); --all is every row with 3 base seeds and refuses a
 * --rows beside it. */
START_TEST(test_rows_by_name_and_all) {
    if (!setup_dir()) return;
    const double ppl[] = {3.00, 3.10, 3.50, 3.30, 3.05}, bleu[] = {50, 52, 40, 45, 51};
    write_results(KEYS_A, ppl, bleu, 5);
    ck_assert_int_eq(run("--rows base,h=1 " TINY), 0);
    ck_assert_msg(strstr(out, "3 models for --rows base,h=1: 3 finished earlier, 0 to train"), "%.3000s", out);
    ck_assert_int_eq(run("--rows base,A:h=16 " TINY), 0);
    ck_assert_msg(strstr(out, "3 models for --rows base,A:h=16: 3 finished earlier"), "%.3000s", out);
    ck_assert_int_eq(run("--all --rows A " TINY), 2);
    ck_assert_msg(strstr(out, "--all") && strstr(out, "--rows"), "%.3000s", out);
    ck_assert_int_eq(run("--rows h=3 " TINY), 2);
    ck_assert_msg(strstr(out, "'h=3' is not a group or a row"), "%.3000s", out);
    cleanup_dir();
}
END_TEST

/* ---- verdict.c on its own: the rules with the recorded run's numbers --------------------- */

/* The recorded base's 3 seeds (recorded.tsv): the band is the farthest
 * seed from the mean, PPL 1.1852 - 1.17093 and BLEU 89.7267 - 88.76. */
START_TEST(test_verdict_band) {
    const double ppl[] = {1.1852, 1.1603, 1.1673}, bleu[] = {88.76, 90.08, 90.34};
    VBase b;
    vbase_init(&b, ppl, bleu, 3);
    ck_assert_double_eq_tol(b.ppl, 1.170933, 1e-6);
    ck_assert_double_eq_tol(b.band_ppl, 0.014267, 1e-6);
    ck_assert_double_eq_tol(b.band_bleu, 0.966667, 1e-6);
    ck_assert_double_eq_tol(b.lo_bleu, 88.76, 1e-12);
    ck_assert_double_eq_tol(b.hi_bleu, 90.34, 1e-12);
    vbase_init(&b, ppl, bleu, 1);   /* one seed: no band */
    ck_assert(b.band_ppl == 0 && b.band_bleu == 0 && b.ppl == 1.1852);
}
END_TEST

/* Doubled d_model in the recorded run: PPL 1.1234 is 3.3 bands below the
 * base (clear), BLEU 91.43 is 1.76 bands above it (weak: the README used
 * to call it one of "the clearest agreements"). With one base seed the
 * same differences are weak on both. */
START_TEST(test_verdict_weak) {
    VDir p = v_judge(1.1234 - 1.170933, 0.014267, 3, 4.66 - 4.92, V_PAPER_SAME_PPL, 1);
    VDir q = v_judge(91.43 - 89.726667, 0.966667, 3, 26.0 - 25.8, V_PAPER_SAME_BLEU, 0);
    ck_assert(p.paper == 1 && p.ours == 1 && !p.weak && p.agree);
    ck_assert(q.paper == 1 && q.ours == 1 && q.weak && q.agree);
    p = v_judge(1.1234 - 1.1852, 0, 1, 4.66 - 4.92, V_PAPER_SAME_PPL, 1);
    ck_assert(p.ours == 1 && p.weak);
    /* inside the band: the same, and "same" is no direction, weak or not */
    q = v_judge(0.5, 0.966667, 3, 0.0, V_PAPER_SAME_BLEU, 0);
    ck_assert(q.ours == 0 && !q.weak && q.agree);
    /* the paper's own band: h=16's 4.91 against 4.92 is the same */
    ck_assert_int_eq(v_direction(4.91 - 4.92, V_PAPER_SAME_PPL, 1), 0);
    ck_assert_int_eq(v_direction(5.29 - 4.92, V_PAPER_SAME_PPL, 1), -1);
}
END_TEST

/* Converged: dev PPL at most twice the base's; too short: base BLEU under
 * 10 (60 steps: 0.16; the default's 600: 89.42); a row not
 * converged is shown but not counted. */
START_TEST(test_verdict_converged_and_short) {
    const double ppl[] = {3.0, 3.0}, bleu[] = {10.0, 10.0}, low[] = {9.99, 9.99};
    VBase b;
    vbase_init(&b, ppl, bleu, 2);
    ck_assert(v_converged(6.0, &b) && !v_converged(6.01, &b));
    ck_assert(!vbase_too_short(&b));
    vbase_init(&b, ppl, low, 2);
    ck_assert(vbase_too_short(&b));
    VTally t = {0};
    VDir yes = {.paper = -1, .ours = -1, .agree = 1}, weak = {.paper = 1, .ours = 1, .weak = 1, .agree = 1};
    vtally_add(&t, 1, yes, weak);
    vtally_add(&t, 0, yes, yes);   /* not converged: not counted */
    ck_assert(t.rows == 2 && t.converged == 1 && t.hold_ppl == 1 && t.hold_bleu == 1);
    ck_assert(t.clear_ppl == 1 && t.clear_bleu == 0);
}
END_TEST

Suite *variations_suite(void) {
    Suite *s = suite_create("variations");
    TCase *tc = suite_case(s, "Chapter12", test_interrupt_and_resume, test_rows_subset_and_settings,
                           test_bad_input, test_recorded_table_matches_readme, test_results_file_overfull);
    tcase_set_timeout(tc, 120);
    tc = suite_case(s, "Hostile", test_results_values_checked, test_results_last_line_unterminated, test_rows_empty,
                    test_rows_checked_before_training, test_full_disk);
    tcase_set_timeout(tc, 120);
    suite_case(s, "VerdictRules", test_verdict_band, test_verdict_weak, test_verdict_converged_and_short);
    tc = suite_case(s, "Verdicts", test_counts_converged_rows_only, test_weak_direction, test_one_seed_nothing_strong,
                    test_too_short_to_compare, test_plot_differences_one_scale, test_rows_by_name_and_all);
    tcase_set_timeout(tc, 120);
    return s;
}

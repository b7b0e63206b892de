/* check_variations.c - chapter 12 (Table 3's variations) on a tiny budget:
 * a run stopped with Ctrl-C after its first row, run again, keeps that row
 * as it was (not retrained) and trains only the rest; --rows picks groups;
 * bad --rows and a damaged results file exit 2 with a message; every
 * output line fits 100 columns, and the rows the defaults train would fit
 * a 45-row screen; the README's recorded table is what the
 * program prints from chapters/12_variations/recorded.tsv; a results file
 * with more rows than the program has keys (repeats, unknown keys, other
 * settings) loses none of them.
 * "Hostile" (issue 34): numbers out of range in results.tsv, a last line
 * without its newline, empty --rows names, a row that cannot be built
 * (found before any row trains), a full disk while the table is written.
 *
 * Runs $BUILD_DIR/12_variations (set by `make test`); skipped without it.
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

/* Section 2 of a run at the defaults trains 18 models, too slow for a test
 * (check_docs.c checks the defaults on recorded results, where every row
 * is kept and prints one line). Here the lines of the rows this run trained
 * are counted: the defaults' 18 must fit a 45-row screen with the blank
 * line and banner above, the "N models" line and the prompt under it. */
static void assert_trained_rows_fit(int kept, int trained) {
    const char *a = strstr(out, "\n== 2. "), *b = a ? strstr(a, "\n== 3. ") : NULL;
    ck_assert_msg(a && b, "no sections 2 and 3 in:\n%.2000s", out);
    int lines = 0;   /* the banner, the "N models" line, the rows */
    for (const char *p = a + 1; p < b; p++) lines += *p == '\n';
    int per_row = (lines - 2 - kept) / trained;
    ck_assert_msg(lines == 2 + kept + per_row * trained, "section 2: %d lines for %d kept and %d trained rows",
                  lines, kept, trained);
    ck_assert_msg(4 + 18 * per_row <= 45, "a trained row prints %d lines: the defaults' 18 make section 2 %d rows",
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
    /* one base seed: the table says there is no spread to judge by */
    ck_assert_int_eq(run("--rows base,E " TINY " --seeds 1"), 0);
    ck_assert_ptr_nonnull(strstr(out, "one base seed: no range"));
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

    /* at the defaults on the recorded results pasted twice: nothing trains,
     * the repeats are named, the file stays as it was */
    char *rec = read_file_or_fail("chapters/12_variations/recorded.tsv", NULL);
    size_t rl = strlen(rec);
    const char *body = strchr(rec, '\n') + 1;
    free(text);
    text = malloc(2 * rl + 1);
    ck_assert_ptr_nonnull(text);
    snprintf(text, 2 * rl + 1, "%s%s", rec, body);
    write_text(tsv, text);
    char args[256];
    snprintf(args, sizeof args, "--results %s", tsv);
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
 * made of lines of `12_variations ARGS --results recorded.tsv`. Printing
 * them trains nothing and leaves the file as it was. */
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
    ck_assert_int_eq(blocks, 2);
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
    ck_assert_int_eq(run("--rows base " TINY " --seeds 1"), 0);
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

Suite *variations_suite(void) {
    Suite *s = suite_create("variations");
    TCase *tc = suite_case(s, "Chapter12", test_interrupt_and_resume, test_rows_subset_and_settings,
                           test_bad_input, test_recorded_table_matches_readme, test_results_file_overfull);
    tcase_set_timeout(tc, 120);
    tc = suite_case(s, "Hostile", test_results_values_checked, test_results_last_line_unterminated, test_rows_empty,
                    test_rows_checked_before_training, test_full_disk);
    tcase_set_timeout(tc, 120);
    return s;
}

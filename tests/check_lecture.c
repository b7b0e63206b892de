/* check_lecture.c - lecture mode (--pause, --section N; show.h) on a real
 * chapter: --pause with stdin from a pipe runs straight through and prints
 * exactly what a plain run prints; --section N prints section N and nothing
 * else; a section the program lacks is an error, found before any work;
 * while the sections before N compute, a progress line on stderr (and
 * nothing more on stdout); every chapter declares as many sections as its
 * banners number.
 *
 * Runs $BUILD_DIR/03_attention and 08_training (set by `make test`), and
 * every chapter for the --section range; a missing one fails. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/show.h"
#include "testutil.h"

/* Runs "$BUILD_DIR/03_attention ARGS" through sh with the given stdin
 * (a shell redirection or pipe prefix), stdout into out and stderr into err
 * (malloc'd, the caller frees). Returns the exit status. */
static int run03(const char *stdin_from, const char *args, char **out, char **err) {
    char bin[512];
    chapter_binary(bin, sizeof bin, "check_lecture", "03_attention");
    /* its plots go into the build folder, never the user's out/ */
    return sh_captured(out, err, "%s %s --no-color --out %s/check_lecture_out %s", stdin_from, bin, build_dir(),
                       args);
}

START_TEST(test_pause_from_pipe) {
    char *plain, *plain_err, *paused, *paused_err;
    ck_assert_int_eq(run03("", "", &plain, &plain_err), 0);
    /* a pipe that gives Enter presses, one that gives nothing */
    const char *feeds[] = {"printf '\\n\\n\\n\\n\\n\\n' |", "true |", "</dev/null"};
    for (int k = 0; k < 3; k++) {
        int rc = run03(feeds[k], "--pause", &paused, &paused_err);
        ck_assert_msg(rc == 0, "--pause with stdin '%s': exit status %d, stderr: %s", feeds[k], rc, paused_err);
        ck_assert_msg(!strcmp(plain, paused), "--pause with stdin '%s' changed the output", feeds[k]);
        ck_assert_msg(strstr(paused_err, "Enter") == NULL, "prompted with stdin '%s': %s", feeds[k], paused_err);
        free(paused);
        free(paused_err);
    }
    free(plain);
    free(plain_err);
}
END_TEST

START_TEST(test_section_only) {
    char *all, *all_err, *s, *e;
    ck_assert_int_eq(run03("", "", &all, &all_err), 0);
    ck_assert_int_eq(run03("", "--section 4", &s, &e), 0);
    ck_assert_msg(strstr(s, "== 4. ") != NULL, "section 4's banner missing:\n%s", s);
    ck_assert_msg(strstr(s, "== 3. ") == NULL && strstr(s, "== 5. ") == NULL, "other sections shown:\n%s", s);
    /* what it prints is section 4 of the full run, unchanged */
    const char *a = strstr(all, "\n== 4. "), *b = strstr(all, "\n== 5. ");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_msg(strlen(s) == (size_t)(b - a) && !strncmp(s, a, (size_t)(b - a)),
                  "--section 4 differs from section 4 of the full run:\n%s", s);
    free(s);
    free(e);
    ck_assert_int_eq(run03("", "--section=1", &s, &e), 0);
    ck_assert_msg(strstr(s, "== 1. ") && !strstr(s, "== 2. "), "--section=1:\n%s", s);
    free(s);
    free(e);
    /* a section the program lacks, or no number: status 2 and a reason */
    ck_assert_int_eq(run03("", "--section 42", &s, &e), 2);
    ck_assert_msg(strstr(e, "--section 42") && strstr(e, "1..6"), "message: %s", e);
    free(s);
    free(e);
    ck_assert_int_eq(run03("", "--section x", &s, &e), 2);
    ck_assert_msg(strstr(e, "--section"), "message: %s", e);
    free(s);
    free(e);
    free(all);
    free(all_err);
}
END_TEST

/* Issue 34 item 7: `08 --section 12` trained for 54 s before it said "has
 * sections 1..9". A section the program lacks is refused when the flags are
 * parsed (show_lecture_sections): status 2 and the same message, once, and
 * no work done - the --out folder, where 08 writes its data, plots and
 * checkpoint, is never made. Every chapter that declares its sections is
 * run (12 is left out until it declares its own). */
START_TEST(test_section_out_of_range_at_once) {
    static const struct { const char *prog; int n; } progs[] = {
        {"08_training", 10}, {"01_dot_product", 3}, {"02_softmax", 4}, {"03_attention", 6},
        {"04_multihead", 3}, {"05_positional_encoding", 5}, {"06_masking", 5}, {"07_transformer", 8},
        {"09_decoding", 7}, {"10_why_self_attention", 9}, {"11_translation", 7}, {"12_variations", 3},
        {"13_data_parallel", 6},
    };
    char dir[256], out[512];
    fresh_dir(dir, sizeof dir, "check_lecture");
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char bin[1024], *o, *e, want[128];
        chapter_binary(bin, sizeof bin, "check_lecture", progs[i].prog);
        snprintf(out, sizeof out, "%s/%s", dir, progs[i].prog);
        int rc = sh_captured(&o, &e, "%s --section 99 --no-color --out %s", bin, out);
        ck_assert_msg(rc == 2, "%s --section 99: exit %d, want 2; stderr: %s", progs[i].prog, rc, e);
        snprintf(want, sizeof want, "%s: error: --section 99: this program has sections 1..%d\n",
                 progs[i].prog, progs[i].n);
        ck_assert_msg(!strcmp(e, want), "%s --section 99: stderr is not just\n  %s  but:\n%s", progs[i].prog,
                      want, e);
        ck_assert_msg(*o == '\0', "%s --section 99 printed:\n%s", progs[i].prog, o);
        ck_assert_msg(access(out, F_OK) != 0, "%s --section 99 did the work first: it made %s", progs[i].prog,
                      out);
        free(o);
        free(e);
    }
    remove_dir(dir);
}
END_TEST

/* Issue 35 item 5: `08_training --section 8` was a blank screen for 16-20 s
 * while sections 1-7 trained with their output hidden. Now a line on stderr
 * says what it waits for (show_progress): without a terminal, one plain line
 * at each quarter of the training loop. stdout is exactly section 8 of the
 * plain run; a plain run, and a --section whose own section trains (6),
 * print nothing on stderr. On a terminal (script(1) gives one) the line is
 * redrawn in place with \r, never a newline. A short run of 08: 40 steps. */
START_TEST(test_section_progress) {
    char bin[1024], dir[256];
    if (!chapter_binary(bin, sizeof bin, "check_lecture", "08_training")) return;
    fresh_dir(dir, sizeof dir, "check_lecture");
    const char *args = "--steps 40 --batch 16 --eval 10 --examples 1 --no-color";
    char *all, *all_err, *s, *e;
    ck_assert_int_eq(sh_captured(&all, &all_err, "%s %s --out %s/o", bin, args, dir), 0);
    ck_assert_msg(*all_err == '\0', "a plain run wrote on stderr:\n%s", all_err);
    ck_assert_int_eq(sh_captured(&s, &e, "%s %s --section 8 --out %s/o", bin, args, dir), 0);
    const char *a = strstr(all, "\n== 8. "), *b = strstr(all, "\n== 9. ");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_msg(strlen(s) == (size_t)(b - a) && !strncmp(s, a, (size_t)(b - a)),
                  "--section 8 differs from section 8 of the full run:\n%s", s);
    static const char *want =
        "08_training: computing sections 1-7 before section 8... section 6, step 10/40\n"
        "08_training: computing sections 1-7 before section 8... section 6, step 20/40\n"
        "08_training: computing sections 1-7 before section 8... section 6, step 30/40\n"
        "08_training: computing sections 1-7 before section 8... section 6, step 40/40\n";
    ck_assert_msg(!strcmp(e, want), "--section 8, stderr not a pipe: want\n%sgot\n%s", want, e);
    free(s), free(e);
    /* section 6 is the training itself: its own progress lines are on stdout */
    ck_assert_int_eq(sh_captured(&s, &e, "%s %s --section 6 --out %s/o", bin, args, dir), 0);
    ck_assert_msg(*e == '\0', "--section 6 wrote on stderr:\n%s", e);
    ck_assert_msg(strstr(s, "step    40/40"), "--section 6 lacks its training lines:\n%s", s);
    free(s), free(e);
    /* stderr on a terminal: script(1) (util-linux) runs the program on a pty */
    if (sh("command -v script >/dev/null 2>&1") == 0) {
        int rc = sh_captured(&s, NULL, "script -qec '%s %s --section 8 --out %s/o 2>&1 >/dev/null' /dev/null", bin,
                             args, dir);
        ck_assert_int_eq(rc, 0);
        ck_assert_msg(strstr(s, "\r08_training: computing sections 1-7 before section 8... section 6, step 40/40"),
                      "no progress line on the terminal:\n%s", s);
        ck_assert_msg(strchr(s, '\n') == NULL, "plain lines on a terminal:\n%s", s);
        /* wiped before section 8 printed: the last thing written is "\r" after spaces */
        size_t n = strlen(s);
        ck_assert_msg(n >= 2 && s[n - 1] == '\r' && s[n - 2] == ' ', "progress line left on the terminal");
        free(s);
    } else {
        test_skip("check_lecture", "the terminal case of --section progress: no script(1)");
    }
    free(all), free(all_err);
    remove_dir(dir);
}
END_TEST

/* Every program declares its sections (show_lecture_sections(N)) so that a
 * --section it lacks is refused at once; N must be its last banner's number,
 * or --section N is refused although the section is there (chapter 11
 * declared 5 and printed "6. What the heads learned": `--section 6` said
 * "this program has sections 1..5"). Read from the sources: the highest
 * "N. " title inside a show_section(...) call of each chapters/NN_name/main.c. */
START_TEST(test_declared_sections_match_banners) {
    DIR *dir = opendir("chapters");
    ck_assert_msg(dir != NULL, "no chapters/ folder here: run the tests from the project root");
    struct dirent *de;
    int checked = 0;
    while ((de = readdir(dir))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        char path[512];
        snprintf(path, sizeof path, "chapters/%s/main.c", de->d_name);
        char *src = read_file(path, NULL);
        if (!src) continue;
        int most = 0, declared = -1;
        for (const char *p = strstr(src, "show_section("); p; p = strstr(p + 1, "show_section(")) {
            const char *end = strchr(p, ';');
            for (const char *q = strchr(p, '"'); q && end && q < end; q = strchr(q + 1, '"')) {
                int n = 0, k = 1;
                while (q[k] >= '0' && q[k] <= '9') n = n * 10 + (q[k++] - '0');
                if (k > 1 && q[k] >= 'a' && q[k] <= 'z') k++;
                if (k > 1 && q[k] == '.' && q[k + 1] == ' ' && n > most) most = n;
                q = strchr(q + 1, '"');      /* the literal's closing quote */
                if (!q) break;
            }
        }
        const char *d = strstr(src, "show_lecture_sections(");
        if (d) declared = atoi(d + strlen("show_lecture_sections("));
        ck_assert_msg(most == 0 || declared == most, "%s: show_lecture_sections(%d), but its last banner is "
                      "section %d", path, declared, most);
        checked += most > 0;
        free(src);
    }
    closedir(dir);
    ck_assert_int_ge(checked, 10);
}
END_TEST

/* Every chapter's --help lists the lecture-mode flags (cli.c adds them). */
START_TEST(test_every_help_lists_them) {
    static const char *const progs[] = {"01_dot_product", "02_softmax", "03_attention", "04_multihead",
                                        "05_positional_encoding", "06_masking", "07_transformer",
                                        "08_training"};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char bin[1024], *buf;
        chapter_binary(bin, sizeof bin, "check_lecture", progs[i]);
        ck_assert_int_eq(sh_captured(&buf, NULL, "%s --help", bin), 0);
        ck_assert_msg(strstr(buf, "--pause") && strstr(buf, "--section N") && strstr(buf, "--minmax"),
                      "%s --help lacks the lecture-mode flags:\n%s", progs[i], buf);
        /* integer ranges print as integers: no "1e+07" */
        ck_assert_msg(!strstr(buf, "e+0"), "%s --help prints a range as a float:\n%s", progs[i], buf);
        free(buf);
    }
}
END_TEST

Suite *lecture_suite(void) {
    Suite *s = suite_create("lecture");
    TCase *tc = suite_case(s, "Programs", test_pause_from_pipe, test_section_only,
                           test_section_out_of_range_at_once, test_section_progress,
                           test_declared_sections_match_banners, test_every_help_lists_them);
    tcase_set_timeout(tc, 120);
    return s;
}

/* check_show.c - terminal output (show.h) fits 80 columns and carries no
 * escape codes when colour is off; plot files have the right contents. */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "core/fileio.h"
#include "io/show.h"
#include "io/plot.h"
#include "testutil.h"

/* ---- terminal output -------------------------------------------------------- */

/* Heatmap shapes to try (_i indexes): small with numbers, wide, tall, both. */
static const int HEAT[][2] = {{1, 1}, {5, 5}, {8, 8}, {3, 9}, {12, 30}, {60, 10}, {100, 200}};

START_TEST(test_heatmap_plain_fits) {
    int rows = HEAT[_i][0], cols = HEAT[_i][1];
    float *x = malloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++) x[i] = sinf(0.37f * i) * 3.0f;
    x[0] = -INFINITY;   /* a masked score */
    /* labels of every awkward kind: long, empty, UTF-8, a newline */
    const char *pool[] = {"the", "transformerization", "", "\xe7\x8c\xab", "new\nline", "a b", "x"};
    const char **labels = malloc(sizeof(char *) * (rows > cols ? rows : cols));
    for (int i = 0; i < (rows > cols ? rows : cols); i++) labels[i] = pool[i % 7];
    show_set_color(0);
    capture_begin();
    show_heatmap("a title", x, rows, cols, labels, labels);
    show_heatmap(NULL, x, rows, cols, NULL, NULL);
    char *s = capture_end();
    ck_assert_msg(strchr(s, 0x1b) == NULL, "ESC byte in colour-off output");
    int w = widest_line(s);
    ck_assert_msg(w <= 80, "%dx%d heatmap: a line is %d columns wide:\n%s", rows, cols, w, s);
    ck_assert_msg(strstr(s, "a title") && strstr(s, "scale"), "title or legend missing:\n%s", s);
    /* control characters in labels are shown as '?', never printed raw */
    ck_assert_msg(strstr(s, "new\nline") == NULL, "raw newline from a label");
    if (rows >= 5) ck_assert_msg(strstr(s, "new?line") != NULL, "label 'new\\nline' not shown as new?line:\n%s", s);
    /* a row label cut to fit is marked, so it cannot read as another token */
    if (rows >= 2) ck_assert_msg(strstr(s, "transform~") != NULL, "cut label not marked '~':\n%s", s);
    if (cols > 20) ck_assert_msg(strstr(s, "more columns") != NULL, "no '... N more columns':\n%s", s);
    if (rows > 40) ck_assert_msg(strstr(s, "more rows") != NULL, "no '... N more rows':\n%s", s);
    /* small maps print their numbers so a reader can check them by hand */
    if (cols <= 8 && rows > 1) ck_assert_msg(strstr(s, "-inf") != NULL, "small map lacks numbers:\n%s", s);
    free(s);
    free(labels);
    free(x);
}
END_TEST

START_TEST(test_heatmap_values_and_colour) {
    const float w[6] = {0.09003057f, 0.24472847f, 0.66524096f, 1.0f, 0.0f, 0.0f};
    const char *keys[3] = {"the", "cat", "sat"}, *qs[2] = {"q1", "q2"};
    show_set_color(0);
    capture_begin();
    show_heatmap("weights", w, 2, 3, qs, keys);
    char *s = capture_end();
    ck_assert_msg(strstr(s, "0.090") && strstr(s, "0.245") && strstr(s, "0.665"), "values missing:\n%s", s);
    ck_assert_msg(strstr(s, "the") && strstr(s, "cat") && strstr(s, "q2"), "labels missing:\n%s", s);
    ck_assert_msg(strstr(s, "@") != NULL, "largest value should get the darkest shade '@':\n%s", s);
    free(s);

    show_set_color(1);
    ck_assert_int_eq(show_color(), 1);
    capture_begin();
    show_heatmap("weights", w, 2, 3, qs, keys);
    float big[20 * 50];
    for (int i = 0; i < 1000; i++) big[i] = (float)i;
    show_heatmap("big", big, 20, 50, NULL, NULL);
    s = capture_end();
    show_set_color(0);
    ck_assert_msg(strchr(s, 0x1b) != NULL, "colour on but no escape codes");
    ck_assert_int_le(widest_line(s), 80);
    free(s);
}
END_TEST

/* The n-th line of s (0-based) copied into buf; returns buf, or NULL. */
static char *nth_line(const char *s, int n, char *buf, size_t cap) {
    for (int i = 0; i < n && s; i++) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s || !*s) return NULL;
    size_t len = strcspn(s, "\n");
    if (len >= cap) len = cap - 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

/* Column headers are read back the way a person reads them: the words of
 * the header line. Each must be a whole label, in order - or, when the map
 * uses a key, a letter the key line maps to the whole label. */
static void assert_headers(const char *s, const char *const *labels, int cols) {
    char head[512], word[64];
    ck_assert_ptr_nonnull(nth_line(s, 1, head, sizeof head));   /* line 0: title */
    int keyed = strstr(s, " key:") != NULL, j = 0;
    for (const char *p = head; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        size_t len = strcspn(p, " ");
        snprintf(word, sizeof word, "%.*s", (int)len, p);
        p += len;
        ck_assert_msg(j < cols, "more header cells than columns:\n%s", s);
        if (keyed) {
            char want[160];
            snprintf(want, sizeof want, " %s=%s", word, labels[j]);
            ck_assert_msg(strlen(word) == 1 && strstr(s, want),
                          "header cell '%s' of column %d (%s) is not in the key:\n%s", word, j, labels[j], s);
        } else {
            ck_assert_msg(!strcmp(word, labels[j]), "header cell %d reads '%s', the column is '%s':\n%s",
                          j, word, labels[j], s);
        }
        j++;
    }
    ck_assert_msg(j > 0, "no header cells:\n%s", s);
}

/* Tokens 1..12 (ids that are numbers, the case that misled: token 10's
 * header used to show "1", which reads as token 1), word tokens w1..w12
 * ("w10" used to print as "w1"), a small map with numbers, and a map too
 * wide for its labels (keyed). */
START_TEST(test_heatmap_column_labels) {
    char names[40][16];
    const char *num[40], *w[40];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "%d", i + 1);
        num[i] = names[i];
    }
    static char wn[40][16];
    for (int i = 0; i < 40; i++) {
        snprintf(wn[i], sizeof wn[i], "w%d", i + 1);
        w[i] = wn[i];
    }
    const char *const *sets[] = {num, w, num, w, w};
    const int shapes[][2] = {{12, 12}, {10, 12}, {4, 8}, {10, 30}, {3, 6}};
    float x[40 * 40];
    for (int i = 0; i < 40 * 40; i++) x[i] = (float)(i % 7) / 7.0f;
    show_set_color(0);
    for (int k = 0; k < 5; k++) {
        int rows = shapes[k][0], cols = shapes[k][1];
        capture_begin();
        show_heatmap("map", x, rows, cols, sets[k], sets[k]);
        char *s = capture_end();
        assert_headers(s, sets[k], cols < 25 ? cols : 25);
        ck_assert_int_le(widest_line(s), 80);
        free(s);
    }
}
END_TEST

/* An all-zero map (the weights of a sequence with no real token) draws
 * blank and says it is empty; a fully masked score map says so too. */
START_TEST(test_heatmap_empty) {
    float z[10 * 10] = {0}, m[4 * 4];
    for (int i = 0; i < 16; i++) m[i] = -INFINITY;
    show_set_color(0);
    capture_begin();
    show_heatmap("zeros", z, 10, 10, NULL, NULL);
    char *s = capture_end();
    ck_assert_msg(strstr(s, "empty: all 100 entries are exactly 0"), "all-zero map not called empty:\n%s", s);
    char line[256];
    for (int i = 2; i < 12; i++) {  /* the grid rows: label, then nothing but blanks */
        ck_assert_ptr_nonnull(nth_line(s, i, line, sizeof line));
        ck_assert_msg(strspn(line + 2, " ") == strlen(line + 2), "zero cells drawn with a shade: '%s'\n%s", line, s);
    }
    ck_assert_msg(strstr(s, "fixed 0") != NULL, "all-zero map not on the fixed 0..1 scale:\n%s", s);
    free(s);
    capture_begin();
    show_heatmap("masked", m, 4, 4, NULL, NULL);
    s = capture_end();
    ck_assert_msg(strstr(s, "empty: all 16 entries are -inf"), "fully masked map not called empty:\n%s", s);
    free(s);
}
END_TEST

/* An untrained map is close to uniform: 12 keys at 0.0475..0.2363. On the
 * fixed 0..1 scale it is faint everywhere (no shade above '-') and never
 * blank; only --minmax stretches it to full contrast, and says so. */
START_TEST(test_heatmap_near_uniform) {
    float u[12 * 12];
    for (int i = 0; i < 144; i++) u[i] = 0.048f + (0.2363f - 0.048f) * (float)((i * 5) % 12) / 11.0f;
    show_set_color(0);
    capture_begin();
    show_heatmap("untrained", u, 12, 12, NULL, NULL);
    char *s = capture_end();
    ck_assert_msg(strstr(s, "scale: fixed 0") && strstr(s, "this map 0.048..0.236"), "legend:\n%s", s);
    char line[256];
    for (int i = 2; i < 14; i++) {
        ck_assert_ptr_nonnull(nth_line(s, i, line, sizeof line));
        ck_assert_msg(strpbrk(line + 3, "=+*#%@") == NULL, "near-uniform map drawn with strong shades: '%s'\n%s", line, s);
        ck_assert_msg(strstr(line + 3, "    ") == NULL, "a non-zero weight drawn blank: '%s'\n%s", line, s);
    }
    free(s);
    show_set_scale(SHOW_SCALE_MINMAX);
    capture_begin();
    show_heatmap("untrained", u, 12, 12, NULL, NULL);
    s = capture_end();
    show_set_scale(SHOW_SCALE_AUTO);
    ck_assert_msg(strstr(s, "min-max 0.048") && strstr(s, "@"), "--minmax map:\n%s", s);
    free(s);
}
END_TEST

START_TEST(test_shape_matrix_vector) {
    show_set_color(0);
    Tensor *q = tensor_new("Q", "batch seq d_k", 2, 5, 8);
    float x[3 * 40];
    for (int i = 0; i < 120; i++) x[i] = (float)i * 1.5f - 60.0f;
    const float v[2] = {1, 2};
    const float tiny[3] = {0.99954f, 3.35e-4f, NAN};
    capture_begin();
    show_shape(q, "note");
    show_shape(q, NULL);
    show_vector("v", v, 2);
    show_vector("tiny", tiny, 3);
    show_vector("long", x, 120);
    show_matrix("M", x, 3, 40, NULL, NULL);
    show_section("A section");
    char *s = capture_end();
    ck_assert_msg(strstr(s, "  Q [batch=2, seq=5, d_k=8]  note\n  Q [batch=2, seq=5, d_k=8]\n") == s,
                  "show_shape output:\n%s", s);
    ck_assert_msg(strstr(s, "v = [1.000, 2.000]\n") != NULL, "show_vector output:\n%s", s);
    /* 3.35e-4 must not print as a misleading 0.000 */
    ck_assert_msg(strstr(s, "tiny = [1.000, 3.350e-04, nan]\n") != NULL,
                  "small values:\n%s", s);
    ck_assert_msg(strstr(s, "more]") && strstr(s, "more\n"), "long vector/matrix not summarised:\n%s", s);
    ck_assert_msg(strstr(s, "== A section ==") != NULL, "banner:\n%s", s);
    ck_assert_int_le(widest_line(s), 80);
    ck_assert_msg(strchr(s, 0x1b) == NULL, "ESC byte with colour off");
    free(s);
    tensor_free(q);
}
END_TEST

/* ---- plot files --------------------------------------------------------------- */

static int have_gnuplot(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

/* The file dir/name as a string (malloc'd, the caller frees); NULL when the
 * plot did not write it. */
static char *plot_file(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return read_file(p, NULL);
}

START_TEST(test_plot_heatmap_files) {
    char root[64];
    fresh_dir(root, sizeof root, "check_show_plot");
    char dir[256];
    snprintf(dir, sizeof dir, "%s/a/b", root);           /* mkdir -p */
    const float x[6] = {1, 2, 3, 4, -INFINITY, 6.5f};
    const char *rows[2] = {"the", "big dog"}, *cols[3] = {"o'n", "say \"hi\"", "x_1"};
    capture_begin();
    plot_heatmap(dir, "hm", "it's a \"title\"", x, 2, 3, rows, cols, "key", "query");
    char *said = capture_end();
    char *dat = plot_file(dir, "hm.dat"), *gp = plot_file(dir, "hm.gp");
    ck_assert_msg(dat && gp, "hm.dat / hm.gp not written in %s", dir);
    /* the data: labels in the header, one line per row, -inf as NaN */
    ck_assert_msg(strstr(dat, "\"big dog\"") && strstr(dat, "\"o'n\""), "labels missing:\n%s", dat);
    ck_assert_msg(strstr(dat, "\n 1 2 3\n 4 NaN 6.5\n") != NULL, "matrix rows wrong:\n%s", dat);
    /* the script: self-contained, relative paths, quotes escaped for gnuplot */
    ck_assert_msg(strstr(gp, "set output 'hm.png'") && strstr(gp, "plot 'hm.dat' matrix"), "script:\n%s", gp);
    ck_assert_msg(strstr(gp, "'o''n' 0") && strstr(gp, "'big dog' 1") && strstr(gp, "'it''s a \"title\"'"),
                  "labels not quoted safely:\n%s", gp);
    ck_assert_msg(strstr(gp, dir) == NULL, "script names the absolute folder; must be relative");
    ck_assert_msg(strstr(said, "hm") != NULL, "no line saying what was written");
    char p[512];
    snprintf(p, sizeof p, "%s/hm.png", dir);
    if (have_gnuplot()) {
        struct stat st;
        ck_assert_msg(stat(p, &st) == 0 && st.st_size > 0, "gnuplot present but no PNG at %s", p);
    }
    remove_dir(root);
    free(said); free(dat); free(gp);
}
END_TEST

START_TEST(test_plot_lines_files) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_show_plot");
    const float x[4] = {1, 2, 4, 8}, a[4] = {1, 2, 4, 8}, b[4] = {1, 1, 1, NAN};
    const float *series[2] = {a, b};
    const char *names[2] = {"Var(q.k)", "d_k's 'scaled'"};
    capture_begin();
    plot_lines(dir, "var", "variance", "d_k", "variance", x, 4, series, names, 2, 1, 1);
    char *said = capture_end();
    char *dat = plot_file(dir, "var.dat"), *gp = plot_file(dir, "var.gp");
    ck_assert_msg(dat && gp, "var.dat / var.gp not written");
    ck_assert_msg(strstr(dat, "# d_k | Var(q.k) | d_k's 'scaled'\n") != NULL, "header:\n%s", dat);
    ck_assert_msg(strstr(dat, "\n 1 1 1\n 2 2 1\n 4 4 1\n 8 8 NaN\n") != NULL, "columns:\n%s", dat);
    ck_assert_msg(strstr(gp, "set logscale x") && strstr(gp, "set logscale y"), "log axes missing:\n%s", gp);
    ck_assert_msg(strstr(gp, "'var.dat' using 1:2") && strstr(gp, "'' using 1:3"), "series:\n%s", gp);
    ck_assert_msg(strstr(gp, "title 'd_k''s ''scaled'''") != NULL, "series name not quoted:\n%s", gp);
    remove_dir(dir);
    free(said); free(dat); free(gp);

    /* a folder that cannot be made: a plain message, -1, no crash */
    fflush(stderr);
    int saved_err = dup(STDERR_FILENO);
    FILE *null = fopen("/dev/null", "w");
    dup2(fileno(null), STDERR_FILENO);
    capture_begin();
    int rc = plot_mkdir("/proc/no/such/place");
    char *s = capture_end();
    fflush(stderr);
    dup2(saved_err, STDERR_FILENO);
    close(saved_err);
    fclose(null);
    ck_assert_int_eq(rc, -1);
    free(s);
}
END_TEST

/* Weights get the fixed colour range 0..1, anything else its own range;
 * the heads grid has one panel per head from one data file. */
START_TEST(test_plot_scales_and_heads_grid) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_show_plot");
    const float w[2 * 2 * 3] = {0.2f, 0.3f, 0.5f, 1, 0, 0, 0.1f, 0.1f, 0.8f, 0, 1, 0};
    const float s[2 * 3] = {-2, 0.5f, 3, 1, 1, 1};
    const char *cols[3] = {"w10", "w11", "w12"};
    capture_begin();
    plot_heatmap(dir, "weights", "w", w, 2, 3, NULL, cols, "key", "query");
    plot_heatmap(dir, "scores", "s", s, 2, 3, NULL, cols, "key", "query");
    plot_heads_grid(dir, "heads_layer1", "all heads", w, 2, 2, 3, NULL, cols, "key", "query");
    char *said = capture_end();
    char *gw = plot_file(dir, "weights.gp"), *gs = plot_file(dir, "scores.gp");
    char *gh = plot_file(dir, "heads_layer1.gp"), *dh = plot_file(dir, "heads_layer1.dat");
    ck_assert_msg(gw && gs && gh && dh, "scripts not written");
    ck_assert_msg(strstr(gw, "set cbrange [0:1]") && strstr(gw, "fixed scale"), "weights not on 0..1:\n%s", gw);
    ck_assert_msg(!strstr(gs, "set cbrange [0:1]") && strstr(gs, "min..max"), "scores forced to 0..1:\n%s", gs);
    /* whole labels, never cut: 'w10' stays 'w10' */
    ck_assert_msg(strstr(gw, "'w10' 0") && strstr(gw, "'w12' 2"), "tic labels:\n%s", gw);
    ck_assert_msg(strstr(gh, "set multiplot layout 1,2") && strstr(gh, "index 0") && strstr(gh, "index 1") &&
                  strstr(gh, "head 2 of 2") && strstr(gh, "set cbrange [0:1]"), "heads grid:\n%s", gh);
    ck_assert_msg(strstr(dh, "head 2 of 2") && strstr(dh, "\n\n\n# ") , "data blocks:\n%s", dh);
    if (have_gnuplot()) {
        struct stat st;
        char p[512];
        snprintf(p, sizeof p, "%s/heads_layer1.png", dir);
        ck_assert_msg(stat(p, &st) == 0 && st.st_size > 0, "gnuplot present but no heads_layer1.png");
    }
    remove_dir(dir);
    free(said); free(gw); free(gs); free(gh); free(dh);
}
END_TEST

/* Without gnuplot on PATH: data and script still written, one hint line
 * (once per process), and plot_render says no PNG. Needs its own process
 * because the gnuplot lookup is cached, so it is a counted skip under CK_FORK=no. */
START_TEST(test_plot_without_gnuplot) {
    const char *fork_env = getenv("CK_FORK");
    if (fork_env && !strcmp(fork_env, "no")) {
        test_skip("show", "plots without gnuplot, under CK_FORK=no (the gnuplot lookup is cached)");
        return;
    }
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_show_plot");
    setenv("PATH", "/nonexistent", 1);
    const float x[4] = {1, 2, 3, 4};
    capture_begin();
    plot_heatmap(dir, "a", "a", x, 2, 2, NULL, NULL, "", "");
    plot_heatmap(dir, "b", "b", x, 2, 2, NULL, NULL, "", "");
    int r = plot_render(dir, "a");
    char *s = capture_end();
    ck_assert_int_eq(r, 0);
    char *first = strstr(s, "gnuplot not found");
    ck_assert_msg(first != NULL, "no install hint:\n%s", s);
    ck_assert_msg(strstr(first + 1, "gnuplot not found") == NULL, "hint printed more than once:\n%s", s);
    ck_assert_msg(strstr(s, "gnuplot-nox") != NULL, "hint lacks the package name");
    char p[512];
    snprintf(p, sizeof p, "%s/b.gp", dir);
    ck_assert_msg(access(p, R_OK) == 0, "script not written without gnuplot");
    remove_dir(dir);
    free(s);
}
END_TEST

/* Labels are printed through text_fit: C0 controls, DEL and the C1
 * controls (U+009B is CSI, 0xC2 0x9B in UTF-8) all become '?'. */
START_TEST(test_labels_cannot_escape) {
    const float x[4] = {0.1f, 0.9f, 0.5f, 0.5f};
    const char *rows[2] = {"\x1b[2J", "\xc2\x9b" "31m"}, *cols[2] = {"ok", "\x7f\x9b"};
    show_set_color(0);
    capture_begin();
    show_heatmap("t", x, 2, 2, rows, cols);
    show_matrix("t", x, 2, 2, rows, cols);
    char *said = capture_end();
    for (const unsigned char *p = (const unsigned char *)said; *p; p++) {
        ck_assert_msg(*p >= 0x20 || *p == '\n', "control byte 0x%02x printed", *p);
        ck_assert_msg(!(p[0] == 0xC2 && p[1] >= 0x80 && p[1] < 0xA0), "C1 control printed");
        ck_assert_msg(*p != 0x7f && *p != 0x9b, "DEL or a raw CSI byte printed");
    }
    free(said);
}
END_TEST

/* A full disk (RLIMIT_FSIZE, with SIGXFSZ ignored, in a child): the plot
 * files that do not fit are refused and counted, the earlier ones are left
 * exactly as they were, and no temporary stays behind. */
START_TEST(test_plot_full_disk) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_show_full");
    float x[400];
    for (int i = 0; i < 400; i++) x[i] = 0.001f * i;
    capture_begin();
    ck_assert_int_eq(plot_heatmap(dir, "big", "before", x, 20, 20, NULL, NULL, "", ""), 0);
    char *s0 = capture_end();
    free(s0);
    char p[512];
    snprintf(p, sizeof p, "%s/big.dat", dir);
    char *before = read_file(p, NULL);
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1), dup2(devnull, 2);
        limit_file_size(512);
        free(before);   /* the child's own copy: valgrind counts a leak at its exit too */
        for (int i = 0; i < 400; i++) x[i] = -x[i];   /* different numbers: longer lines */
        int rc = plot_heatmap(dir, "big", "after", x, 20, 20, NULL, NULL, "", "");
        _exit(rc != -1 ? 2 : fio_failures() < 1 ? 3 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "plot on a full disk: child exit %d (2: the plot "
                  "was not refused, 3: not counted)", WEXITSTATUS(st));
    char *after = read_file(p, NULL);
    ck_assert_msg(before && after && !strcmp(before, after), "the earlier big.dat was changed");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c '^\\.' >/dev/null", dir);
    ck_assert_msg(system(cmd) != 0, "a temporary was left in %s", dir);
    remove_dir(dir);
    free(before), free(after);
}
END_TEST

Suite *show_suite(void) {
    Suite *s = suite_create("show");
    suite_case(s, "Core", test_heatmap_values_and_colour, test_shape_matrix_vector,
               test_heatmap_column_labels, test_heatmap_empty, test_heatmap_near_uniform);
    TCase *limits = tcase_create("Limits");
    tcase_add_loop_test(limits, test_heatmap_plain_fits, 0, (int)(sizeof HEAT / sizeof HEAT[0]));
    suite_add_tcase(s, limits);
    TCase *plots = suite_case(s, "Plots", test_plot_heatmap_files, test_plot_lines_files,
                              test_plot_scales_and_heads_grid, test_plot_without_gnuplot,
                              test_labels_cannot_escape, test_plot_full_disk);
    tcase_set_timeout(plots, 30);
    return s;
}

/* check_lineview.c - attention drawn as lines (common/io/lineview.h, the
 * paper's Figures 3-5).
 *
 *   Rules     on hand-made weights whose answers are known: the word that
 *             looks farthest (Figure 3), the pair of heads with the sharpest
 *             far links (Figure 4), the sharp pair that differ most
 *             (Figure 5); one head a layer; one head in all
 *   Drawing   every line of the page's SVG and of the PNGs' data has the
 *             opacity of the weight it came from (to 1e-3); the page embeds
 *             every weight; it loads nothing from outside, even when a token
 *             spells a link; BPE's "</w>" is off the labels
 *   Programs  chapter 08's short run writes the three PNGs, their scripts
 *             and the page, the same bytes twice
 *   Browser   a real headless chromium (tools/browser_check.sh) runs the
 *             page's script for two URL hashes: the lines it drew are the
 *             chosen head's, with the weights' opacities; a counted skip
 *             without chromium (a failure under CI=true)
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "io/lineview.h"
#include "testutil.h"

/* ---- weights ------------------------------------------------------------- */

/* w[((l * h + k) * T + i) * T + j] */
static float *W_at(float *w, int h, int T, int l, int k, int i, int j) {
    return &w[(((size_t)l * h + k) * T + i) * T + j];
}

/* The hand-made set: N = 2, h = 3, T = 6, position 0 is <s>. Every row
 * is one-hot or two-hot, so each measure can be worked out by hand:
 *   layer 1: head 1 itself; head 2 itself 0.7 + next 0.3; head 3 the token before
 *   layer 2: heads 1 and 2 put 0.9 and 0.8 on a far word f(i) (the rest on
 *            i itself), head 3 itself; f = 1->4, 2->5, 3->1, 4->1, 5->1      */
static const char *const KNOWN_TOKENS[6] = {"<s>", "a", "b", "c", "d", "e"};
static float *known_weights(void) {
    enum { N = 2, H = 3, T = 6 };
    float *w = calloc((size_t)N * H * T * T, sizeof(float));
    static const int far[T] = {0, 4, 5, 1, 1, 1};
    for (int i = 0; i < T; i++) {
        *W_at(w, H, T, 0, 0, i, i) = 1;
        if (i + 1 < T && i > 0) *W_at(w, H, T, 0, 1, i, i) = 0.7f, *W_at(w, H, T, 0, 1, i, i + 1) = 0.3f;
        else *W_at(w, H, T, 0, 1, i, i) = 1;
        *W_at(w, H, T, 0, 2, i, i > 0 ? i - 1 : 0) = 1;
        for (int k = 0; k < 2; k++) {
            float a = k == 0 ? 0.9f : 0.8f;
            if (i == 0) *W_at(w, H, T, 1, k, i, i) = 1;
            else *W_at(w, H, T, 1, k, i, far[i]) = a, *W_at(w, H, T, 1, k, i, i) = 1 - a;
        }
        *W_at(w, H, T, 1, 2, i, i) = 1;
    }
    return w;
}

START_TEST(test_rules_known) {
    float *w = known_weights();
    LineSet s = {2, 3, 6, w, KNOWN_TOKENS};
    unsigned char words[6];
    lineview_words(&s, words);
    ck_assert_int_eq(words[0], 0);
    for (int i = 1; i < 6; i++) ck_assert_int_eq(words[i], 1);
    /* query 5 of layer 2 (0-based 1, 5): heads 0.9 and 0.8 at distance 4, head 3 at 0:
     * (3.6 + 3.2 + 0) / 3 = 2.2667; uniform: (4+3+2+1+0)/6 = 1.6667 */
    ck_assert_double_eq_tol(lineview_distance(&s, words, 1, 5), 6.8 / 3, 1e-6);
    ck_assert_double_eq_tol(lineview_uniform_distance(&s, words, 5), 10.0 / 6, 1e-9);
    ck_assert_double_eq_tol(lineview_far_focus(&s, words, 1, 0), 0.9, 1e-6);
    ck_assert_double_eq_tol(lineview_far_focus(&s, words, 0, 1), 0, 1e-9);   /* next token: adjacent */
    ck_assert_double_eq_tol(lineview_sharpness(&s, words, 0, 1), (4 * 0.7 + 1) / 5, 1e-6);
    ck_assert_double_eq_tol(lineview_row_diff(&s, words, 0, 0, 0, 2), 1, 1e-6);      /* itself vs before */
    ck_assert_double_eq_tol(lineview_row_diff(&s, words, 0, 0, 0, 1), 1.2 / 5, 1e-6);

    LineChoice c;
    lineview_choose(&s, &c);
    /* Figure 3: layer 2, query 5: 2.2667 - 1.6667 = 0.6 beats queries 2 and 4 (0.533) */
    ck_assert_int_eq(c.l3, 1);
    ck_assert_int_eq(c.q3, 5);
    ck_assert_double_eq_tol(c.dist3, 6.8 / 3, 1e-6);
    ck_assert_double_eq_tol(c.excess3, 6.8 / 3 - 10.0 / 6, 1e-6);
    /* Figure 4: layer 2, heads 1 and 2 (far focus 0.9 + 0.8; nothing else is far) */
    ck_assert_int_eq(c.l4[0], 1);
    ck_assert_int_eq(c.l4[1], 1);
    ck_assert_int_eq(c.k4[0], 0);
    ck_assert_int_eq(c.k4[1], 1);
    ck_assert_double_eq_tol(c.far4[0], 0.9, 1e-6);
    ck_assert_double_eq_tol(c.far4[1], 0.8, 1e-6);
    /* Figure 5: layer 1, heads 1 and 3: disjoint rows (1.0), both sharp (1.0);
     * the next best is layer 2's heads 1 and 3, 0.9 x 0.9 = 0.81 */
    ck_assert_int_eq(c.l5[0], 0);
    ck_assert_int_eq(c.l5[1], 0);
    ck_assert_int_eq(c.k5[0], 0);
    ck_assert_int_eq(c.k5[1], 2);
    ck_assert_double_eq_tol(c.tv5, 1, 1e-6);
    ck_assert_double_eq_tol(c.score5, 1, 1e-6);
    free(w);
}
END_TEST

/* One head a layer: the pairs come from two layers; one head in all: shown twice. */
START_TEST(test_rules_one_head) {
    enum { N = 3, T = 5 };
    float *w = calloc((size_t)N * T * T, sizeof(float));
    for (int i = 0; i < T; i++) {
        *W_at(w, 1, T, 0, 0, i, i) = 1;                 /* itself */
        *W_at(w, 1, T, 1, 0, i, (i + 3) % T) = 1;       /* far: 3 or 2 away */
        *W_at(w, 1, T, 2, 0, i, (i + 2) % T) = 0.6f;    /* half as far, less sure */
        *W_at(w, 1, T, 2, 0, i, i) += 0.4f;
    }
    LineSet s = {N, 1, T, w, NULL};
    LineChoice c;
    lineview_choose(&s, &c);
    ck_assert_int_eq(c.k4[0], 0);
    ck_assert_int_eq(c.k4[1], 0);
    ck_assert_int_eq(c.l4[0], 1);
    ck_assert_int_eq(c.l4[1], 2);   /* the two far ones */
    ck_assert_int_eq(c.l5[0], 0);
    ck_assert_int_eq(c.l5[1], 1);   /* sure and disjoint */
    ck_assert_int_ne(c.l3, 0);
    s.N = 1;
    lineview_choose(&s, &c);
    ck_assert_int_eq(c.l4[0], 0);
    ck_assert_int_eq(c.l4[1], 0);
    ck_assert_int_eq(c.l5[0], 0);
    ck_assert_int_eq(c.l5[1], 0);
    free(w);
}
END_TEST

/* ---- pages and data files ---------------------------------------------------------- */

/* A softmax tensor of every layer and head (N, h, T, T) from rng seed 7:
 * weights of every size, none equal. Tokens: BPE pieces and words that
 * spell links, quotes and markup. */
enum { RN = 2, RH_ = 3, RT = 7 };
static const char *const RAND_TOKENS[RT] = {"<s>", "wom", "an</w>", "http://x.org/a.js</w>", "a'b</w>",
                                           "<b>&amp;=\"</w>", "</s>"};
static float *random_weights(void) {
    Rng r;
    rng_seed(&r, 7);
    float *w = randn(&r, (size_t)RN * RH_ * RT * RT, 2.0f);
    for (int row = 0; row < RN * RH_ * RT; row++) {
        float *x = w + (size_t)row * RT, mx = x[0], sum = 0;
        for (int j = 1; j < RT; j++) mx = fmaxf(mx, x[j]);
        for (int j = 0; j < RT; j++) sum += x[j] = expf(x[j] - mx);
        for (int j = 0; j < RT; j++) x[j] /= sum;
    }
    return w;
}

/* Writes the random set's page and PNG data into dir; the summary printed
 * comes back (malloc'd). */
static char *write_random(const char *dir, const float *w) {
    LineSet s = {RN, RH_, RT, w, RAND_TOKENS};
    LineChoice c;
    lineview_choose(&s, &c);
    capture_begin();
    int rc = lineview_write(dir, &s, &c, "check_lineview");
    char *said = capture_end();
    ck_assert_int_eq(rc, 0);
    return said;
}

/* The value of attribute name in the element starting at el (up to its
 * '>'), as a number; NAN when absent. */
static double attr(const char *el, const char *name) {
    char key[64];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *end = strchr(el, '>'), *p = strstr(el, key);
    if (!p || (end && p > end)) return NAN;
    return atof(p + strlen(key));
}

/* Checks every <line> of text[0..len) against the tensor w (N, h, T, T):
 * its stroke-opacity equals w at its data-layer, data-head, data-q, data-k
 * (counted from 1) to 1e-3. Returns how many lines, and counts those whose
 * (layer, head, query) differ from the wanted ones (0: any). */
static int check_lines(const char *text, size_t len, const float *w, int h, int T, int layer, int head, int query,
                       int *off_view) {
    int n = 0;
    *off_view = 0;
    for (const char *p = text; (p = strstr(p, "<line ")) && p < text + len; p++) {
        int l = (int)attr(p, "data-layer"), k = (int)attr(p, "data-head"), i = (int)attr(p, "data-q"),
            j = (int)attr(p, "data-k");
        double op = attr(p, "stroke-opacity");
        ck_assert_msg(l >= 1 && k >= 1 && k <= h && i >= 1 && i <= T && j >= 1 && j <= T && isfinite(op),
                      "a line without its origin: %.120s", p);
        float want = w[(((size_t)(l - 1) * h + k - 1) * T + i - 1) * T + j - 1];
        ck_assert_msg(fabs(op - want) <= 1e-3, "layer %d head %d, %d -> %d: opacity %g, weight %g", l, k, i, j, op,
                      (double)want);
        *off_view += (layer && l != layer) || (head && k != head) || (query && i != query);
        n++;
    }
    return n;
}

/* The part of page from "<svg id=\"ID\"" to its "</svg>" (len into *len). */
static const char *svg_part(const char *page, const char *id, size_t *len) {
    char key[64];
    snprintf(key, sizeof key, "<svg id=\"%s\"", id);
    const char *a = strstr(page, key);
    ck_assert_msg(a != NULL, "no %s in the page", key);
    const char *b = strstr(a, "</svg>");
    ck_assert_ptr_nonnull(b);
    *len = (size_t)(b - a);
    return a;
}

START_TEST(test_page_opacity_is_weight) {
    char dir[256], path[512];
    fresh_dir(dir, sizeof dir, "check_lineview");
    float *w = random_weights();
    free(write_random(dir, w));
    LineSet s = {RN, RH_, RT, w, RAND_TOKENS};
    LineChoice c;
    lineview_choose(&s, &c);
    snprintf(path, sizeof path, "%s/attention_lines.html", dir);
    char *page = read_file_or_fail(path, NULL);
    size_t n;
    int off;
    /* Figure 3: every head's lines from the chosen query of the chosen layer */
    const char *f3 = svg_part(page, "fig3", &n);
    ck_assert_int_eq(check_lines(f3, n, w, RH_, RT, c.l3 + 1, 0, c.q3 + 1, &off), RH_ * RT);
    ck_assert_int_eq(off, 0);
    /* Figures 4 and 5: each head's full attention, T x T lines a panel */
    const char *f4 = svg_part(page, "fig4", &n);
    ck_assert_int_eq(check_lines(f4, n, w, RH_, RT, 0, 0, 0, &off), 2 * RT * RT);
    const char *f5 = svg_part(page, "fig5", &n);
    ck_assert_int_eq(check_lines(f5, n, w, RH_, RT, 0, 0, 0, &off), 2 * RT * RT);
    /* the embedded weights: all N h T T of them, 4 decimals */
    const char *p = strstr(page, "w: [");
    ck_assert_ptr_nonnull(p);
    p += 4;
    size_t count = 0, total = (size_t)RN * RH_ * RT * RT;
    while (*p && *p != ']') {
        char *e;
        double v = strtod(p, &e);
        ck_assert_msg(e != p, "not a number in w: %.20s", p);
        ck_assert_msg(count < total, "more than %zu weights embedded", total);
        ck_assert_msg(fabs(v - w[count]) <= 5.001e-5, "w[%zu] = %g embedded as %g", count, (double)w[count], v);
        count++;
        p = e + strspn(e, ",\n ");
    }
    ck_assert_uint_eq(count, total);
    free(page);
    free(w);
    remove_dir(dir);
}
END_TEST

/* The PNGs' data: one row a line, weight column and alpha byte from w. */
START_TEST(test_png_data_alpha_is_weight) {
    char dir[256], path[512], line[512];
    fresh_dir(dir, sizeof dir, "check_lineview");
    float *w = random_weights();
    free(write_random(dir, w));
    static const int want_lines[3] = {RH_ * RT, 2 * RT * RT, 2 * RT * RT};
    for (int fig = 3; fig <= 5; fig++) {
        snprintf(path, sizeof path, "%s/lines_fig%d.dat", dir, fig);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "no %s", path);
        int rows = 0;
        while (fgets(line, sizeof line, f)) {
            if (line[0] == '#') continue;
            double x, y, dx, dy, argb, wt;
            int l, k, i, j;
            ck_assert_int_eq(sscanf(line, "%lf %lf %lf %lf %lf %lf %d %d %d %d", &x, &y, &dx, &dy, &argb, &wt, &l, &k,
                                    &i, &j), 10);
            float want = w[(((size_t)(l - 1) * RH_ + k - 1) * RT + i - 1) * RT + j - 1];
            double alpha = floor(argb / 16777216.0);   /* 0xAA of 0xAARRGGBB: gnuplot's transparency */
            ck_assert_msg(fabs(wt - want) <= 1e-3, "fig %d: weight %g, tensor %g", fig, wt, (double)want);
            ck_assert_msg(fabs((1 - alpha / 255) - want) <= 0.5 / 255 + 1e-3, "fig %d: alpha %g for weight %g", fig,
                          alpha, (double)want);
            rows++;
        }
        fclose(f);
        ck_assert_int_eq(rows, want_lines[fig - 3]);
    }
    free(w);
    remove_dir(dir);
}
END_TEST

/* haystack contains needle, ASCII letters in any case */
static const char *find_nocase(const char *haystack, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = haystack; *p; p++)
        if (!strncasecmp(p, needle, n)) return p;
    return NULL;
}

/* Nothing in the page may load or link anything: no scheme, no "//", no
 * src= / href= / url( / @import, no element that fetches. */
static void assert_self_contained(const char *page, const char *path) {
    static const char *const banned[] = {"http:", "https:", "//", "src=", "href=", "url(", "@import", "<link",
                                         "<iframe", "<img", "<object", "<embed", "fetch(", "xmlhttprequest",
                                         "import(", "<base", "ftp:", "data:"};
    for (size_t b = 0; b < sizeof banned / sizeof *banned; b++) {
        const char *hit = find_nocase(page, banned[b]);
        ck_assert_msg(!hit, "%s: '%s' at ...%.60s...", path, banned[b], hit ? (hit > page + 20 ? hit - 20 : page) : "");
    }
    const char *sc = strstr(page, "<script");
    ck_assert_msg(sc && !strncmp(sc, "<script>", 8), "%s: the one script must be inline, <script>", path);
    ck_assert_msg(!strstr(sc + 1, "<script"), "%s: more than one script", path);
}

START_TEST(test_page_self_contained) {
    char dir[256], path[512];
    fresh_dir(dir, sizeof dir, "check_lineview");
    float *w = random_weights();
    char *said = write_random(dir, w);
    snprintf(path, sizeof path, "%s/attention_lines.html", dir);
    char *page = read_file_or_fail(path, NULL);
    assert_self_contained(page, path);
    /* the token that spells a link is on the page, as character references */
    ck_assert_ptr_nonnull(strstr(page, "http&#58;&#47;&#47;x.org&#47;a.js"));
    /* BPE: "wom" continues ("wom·"), "an</w>" ends a word ("an"); no "</w>" anywhere */
    ck_assert_ptr_nonnull(strstr(page, ">wom\xc2\xb7<"));
    ck_assert_ptr_nonnull(strstr(page, ">an<"));
    ck_assert_ptr_null(strstr(page, "&#47;w&gt;"));
    ck_assert_ptr_null(strstr(said, "</w>"));
    for (int fig = 3; fig <= 5; fig++) {
        snprintf(path, sizeof path, "%s/lines_fig%d.gp", dir, fig);
        char *gp = read_file_or_fail(path, NULL);
        ck_assert_msg(!strstr(gp, "</w>"), "%s keeps </w>", path);
        ck_assert_ptr_nonnull(strstr(gp, "'wom\xc2\xb7'"));
        ck_assert_ptr_nonnull(strstr(gp, "'a''b'"));   /* a quote inside a gnuplot string: doubled */
        free(gp);
    }
    /* the summary names the paper's figures and what chose them */
    ck_assert_ptr_nonnull(strstr(said, "Figure 3, one word, every head: layer"));
    ck_assert_ptr_nonnull(strstr(said, "Figure 4, two heads apart: layer"));
    ck_assert_ptr_nonnull(strstr(said, "Figure 5, two heads side by side: layer"));
    ck_assert_ptr_nonnull(strstr(said, " -> "));
    free(said);
    free(page);
    free(w);
    remove_dir(dir);
}
END_TEST

/* ---- chapter 08 ------------------------------------------------------------------- */

/* The page's own static lines against the weights it embeds. */
static void assert_page_consistent(const char *page) {
    int N = 0, h = 0, T = 0;
    const char *d = strstr(page, "var D = {");
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(sscanf(d, "var D = {N: %d, h: %d, T: %d", &N, &h, &T), 3);
    size_t total = (size_t)N * h * T * T, count = 0;
    float *w = malloc(total * sizeof(float));
    const char *p = strstr(d, "w: [") + 4;
    while (*p && *p != ']' && count < total) {
        char *e;
        w[count++] = (float)strtod(p, &e);
        p = e + strspn(e, ",\n ");
    }
    ck_assert_uint_eq(count, total);
    int off;
    ck_assert_int_gt(check_lines(page, (size_t)(d - page), w, h, T, 0, 0, 0, &off), 0);
    free(w);
}

START_TEST(test_chapter08_writes_views) {
    char bin[512], dir[256], path[700];
    if (!chapter_binary(bin, sizeof bin, "lineview", "08_training")) return;
    fresh_dir(dir, sizeof dir, "check_lineview");
    char *pages[2] = {NULL, NULL};
    for (int run = 0; run < 2; run++) {   /* twice: the same seed gives the same bytes */
        char *out = NULL;
        int rc = sh_captured(&out, NULL, "%s --steps 5 --batch 16 --eval 10 --examples 1 --no-color --out %s/run%d",
                             bin, dir, run);
        ck_assert_msg(rc == 0, "08_training exited %d:\n%s", rc, out);
        ck_assert_msg(strstr(out, "Attention as lines (the paper's Figures 3-5)"), "no line-view summary:\n%s", out);
        ck_assert_ptr_nonnull(strstr(out, "Figure 3, one word, every head: layer"));
        free(out);
        snprintf(path, sizeof path, "%s/run%d/attention_lines.html", dir, run);
        pages[run] = read_file_or_fail(path, NULL);
        for (int fig = 3; fig <= 5; fig++) {
            static const char *const ext[3] = {"gp", "dat", "png"};
            for (int e = 0; e < 3; e++) {
                if (e == 2 && sh("command -v gnuplot >/dev/null 2>&1") != 0) continue;   /* no gnuplot: no PNG */
                snprintf(path, sizeof path, "%s/run%d/lines_fig%d.%s", dir, run, fig, ext[e]);
                ck_assert_msg(access(path, R_OK) == 0, "no %s", path);
            }
        }
    }
    assert_self_contained(pages[0], "08_training's attention_lines.html");
    assert_page_consistent(pages[0]);
    ck_assert_msg(!strcmp(pages[0], pages[1]), "two runs with the same seed wrote different pages");
    free(pages[0]), free(pages[1]);
    remove_dir(dir);
}
END_TEST

/* ---- a real browser ----------------------------------------------------------------- */

START_TEST(test_browser_draws_the_chosen_head) {
    char dir[256], path[700];
    ck_assert_msg(access("tools/browser_check.sh", X_OK) == 0,
                  "no tools/browser_check.sh here: run the tests from the project root");
    fresh_dir(dir, sizeof dir, "check_lineview");
    float *w = random_weights();
    free(write_random(dir, w));
    char *said = NULL;
    int rc = sh_captured(&said, NULL, "tools/browser_check.sh %s/attention_lines.html %s/browser "
                         "'layer=2&head=3&query=all' 'layer=1&head=all&query=4'", dir, dir);
    if (rc == 77) {   /* "browser_check: no chromium found (...); browser checks skipped" */
        said[strcspn(said, "\n")] = '\0';
        test_skip_missing("lineview", "chromium", "the browser check: %s", said);
        free(said), free(w);
        remove_dir(dir);
        return;
    }
    ck_assert_msg(rc == 0, "browser_check.sh exited %d:\n%s", rc, said);
    static const struct { int layer, head, query, lines; } view[2] = {{2, 3, 0, RT * RT}, {1, 0, 4, RH_ * RT}};
    for (int v = 0; v < 2; v++) {
        snprintf(path, sizeof path, "%s/browser/dom_%d.html", dir, v + 1);
        char *dom = read_file_or_fail(path, NULL);
        size_t n;
        int off;
        const char *view_svg = svg_part(dom, "view", &n);
        ck_assert_int_eq(check_lines(view_svg, n, w, RH_, RT, view[v].layer, view[v].head, view[v].query, &off),
                         view[v].lines);
        ck_assert_int_eq(off, 0);
        free(dom);
        snprintf(path, sizeof path, "%s/browser/shot_%d.png", dir, v + 1);
        size_t len;
        unsigned char *png = read_file_or_fail(path, &len);
        ck_assert_msg(len > 1000 && !memcmp(png, "\x89PNG", 4), "%s is not a screenshot", path);
        free(png);
    }
    free(said), free(w);
    remove_dir(dir);
}
END_TEST

Suite *lineview_suite(void) {
    Suite *s = suite_create("lineview");
    suite_case(s, "Rules", test_rules_known, test_rules_one_head);
    suite_case(s, "Drawing", test_page_opacity_is_weight, test_png_data_alpha_is_weight, test_page_self_contained);
    tcase_set_timeout(suite_case(s, "Programs", test_chapter08_writes_views), 120);
    tcase_set_timeout(suite_case(s, "Browser", test_browser_draws_the_chosen_head), 240);
    return s;
}

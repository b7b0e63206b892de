/* show.c - output that teaches: banners, shapes, matrices, terminal
 * heatmaps, and lecture mode (--pause, --section N).
 *
 * Two audiences read this output: a person at a terminal (colour heatmaps)
 * and a person reading a log or a pipe (plain ASCII, no escape codes). The
 * switch between them is show_color(). Everything printed here fits in 80
 * columns so that it survives a projector, an email and a narrow terminal.
 * The same maps as PNGs: plot.c.
 */
#include "io/show.h"
#include "core/clock.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCREEN_W 80          /* every line printed here fits in this      */
#define LABEL_W_MAX 10       /* row labels longer than this are cut        */
#define HEAT_MAX_ROWS 40     /* heatmap rows beyond this are summarised    */
#define MATRIX_MAX_ROWS 20   /* show_matrix rows beyond this are summarised */
#define NUM_MAX_COLS 8       /* heatmaps this narrow print their numbers   */
#define NUM_MAX_ROWS 16      /* ... and this short                         */
#define KEY_LABEL_W 16       /* labels in a heatmap key: at most this wide  */
#define NLEVELS 10           /* shades in the ramp                         */

/* ---- colour on/off -------------------------------------------------------- */

static int g_color = -1; /* -1: not decided yet */

void show_set_color(int on) { g_color = on ? 1 : 0; }

/* Colour only when a person is looking at a terminal that did not ask for
 * plain text (https://no-color.org: any non-empty NO_COLOR turns it off). */
int show_color(void) {
    if (g_color < 0) {
        const char *nc = getenv("NO_COLOR");
        const char *term = getenv("TERM");
        g_color = isatty(STDOUT_FILENO) && !(nc && *nc) && !(term && !strcmp(term, "dumb"));
    }
    return g_color;
}

/* ---- small text helpers --------------------------------------------------- */

/* Display width of a UTF-8 string: one column per code point (continuation
 * bytes 10xxxxxx take none). Good enough for token labels. */
int show_text_width(const char *s) {
    int w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80) w++;
    return w;
}

/* Copies at most maxw columns of src into dst (size cap), never splitting a
 * UTF-8 sequence and replacing control characters (a newline in a token
 * would break the grid) with '?'. Returns the width written. */
static int text_fit(char *dst, size_t cap, const char *src, int maxw) {
    size_t o = 0;
    int w = 0;
    const unsigned char *p = (const unsigned char *)src;
    while (*p) {
        size_t len = 1;
        if (*p >= 0xC0) {
            while ((p[len] & 0xC0) == 0x80 && len < 4) len++;
        } else if ((*p & 0xC0) == 0x80) { /* stray continuation byte */
            p++;
            continue;
        }
        if (w + 1 > maxw || o + len + 1 > cap) break;
        /* C0 controls, DEL, and the C1 controls U+0080..U+009F (0xC2 0x80..0x9F
         * in UTF-8; U+009B is CSI, which starts a terminal escape sequence) */
        if ((len == 1 && (*p < 0x20 || *p == 0x7F)) || (len == 2 && p[0] == 0xC2 && p[1] < 0xA0) ||
            (len == 1 && *p >= 0x80)) {
            dst[o++] = '?';
        } else {
            memcpy(dst + o, p, len);
            o += len;
        }
        w++;
        p += len;
    }
    dst[o] = '\0';
    return w;
}

/* Prints s cut to width w, then pads with spaces to exactly w columns;
 * right != 0 right-aligns. A label that had to be cut ends in '~', so that
 * what is left ("transfor~") cannot be read as a whole, different token. */
static void put_fit(const char *s, int w, int right) {
    char buf[128];
    int got = text_fit(buf, sizeof buf, s, w);
    if (got < show_text_width(s) && w >= 2) {
        got = text_fit(buf, sizeof buf - 1, s, w - 1);
        strcat(buf, "~");
        got++;
    }
    if (right) printf("%*s%s", w - got, "", buf);
    else printf("%s%*s", buf, w - got, "");
}

/* The label of row/column i: the caller's, or the index. */
const char *show_label(const char *const *labels, int i, char *buf, size_t cap) {
    if (labels && labels[i]) return labels[i];
    snprintf(buf, cap, "%d", i);
    return buf;
}

/* How many decimals fit a number as large as maxabs into width columns
 * (one for the sign, one for the point). -1: it does not fit, use %e. */
static int decimals_for(double maxabs, int width, int most) {
    int int_digits = maxabs < 1 ? 1 : (int)floor(log10(maxabs * 1.0005)) + 1;
    int d = width - 1 - int_digits - 1;
    if (d > most) d = most;
    if (d < 0) return int_digits + 1 <= width ? 0 : -1;
    return d;
}

/* Writes v into buf right-aligned in width columns with the given decimals
 * (-1: exponent form). Non-finite values print as nan, inf, -inf. */
static void fmt_num(char *buf, size_t cap, float v, int width, int decimals) {
    if (isnan(v)) snprintf(buf, cap, "%*s", width, "nan");
    else if (isinf(v)) snprintf(buf, cap, "%*s", width, v > 0 ? "inf" : "-inf");
    else if (decimals < 0) snprintf(buf, cap, "%*.*e", width, width >= 9 ? 2 : 0, (double)v);
    else snprintf(buf, cap, "%*.*f", width, decimals, (double)v);
}

/* Largest |x| over the finite entries of a rows x cols matrix. */
static double max_abs_finite(const float *x, int rows, int cols) {
    double m = 0;
    for (long i = 0; i < (long)rows * cols; i++)
        if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

/* ---- lecture mode: --pause and --section N ---------------------------------- */

/* A program's sections are its "N. title" banners; "Nb. title" is a part of
 * section N (its own screen, the same number). --pause waits for Enter
 * before each one after the first, so that an instructor can talk over
 * what is on the screen; it does nothing when stdin is not a terminal (a
 * pipe, /dev/null, CI), so the same command runs straight through there.
 * --section N still runs everything (section N may need what came before)
 * but sends stdout to /dev/null outside section N. */
static int g_pause = 0;        /* --pause                                     */
static int g_only = 0;         /* --section N; 0: every section               */
static int g_cur = 0;          /* number of the section being printed         */
static int g_most = 0;         /* highest section number seen                 */
static int g_saved_out = -1;   /* the real stdout while it is hidden          */
static const char *g_prog = "";

void show_set_pause(int on) { g_pause = on; }
void show_set_only_section(int n) { g_only = n > 0 ? n : 0; }

/* ---- progress while --section N hides the work ------------------------------ */

/* `08_training --section 8` trains for 20 s before section 8 has anything
 * to print; with stdout hidden that was a blank screen. While the work of
 * the hidden sections runs, one line on stderr says what it is waiting for:
 *
 *   08_training: computing sections 1-7 before section 8... section 6, step 120/600
 *
 * On a terminal it is one line redrawn in place (\r), with the seconds
 * spent when they fit in 79 columns: at most every 0.1 s once the hidden
 * work has taken 0.25 s (so a fast chapter shows next to nothing), always
 * at the end of a loop, and wiped before section N prints. When stderr is
 * not a terminal (a log, a test) it writes plain lines, only for the loops
 * that report progress, at each quarter of the loop: a few lines, the same
 * ones every run (no clock in them). stdout is untouched: what --section N
 * prints is byte for byte section N of a plain run. */
static int g_err_tty = -1;          /* stderr is a terminal (-1: not asked yet) */
static int g_line_len = 0;          /* columns of the line on the terminal now   */
static double g_hide_t0 = -1;       /* when the hidden work began                */
static double g_drawn = 0;          /* when the line was last drawn              */
static long g_span_total = -1;      /* the loop being reported, and the last     */
static long g_span_quarter = 0;     /* quarter of it written as a plain line     */

/* Wipes the progress line off the terminal (spaces over it, cursor back). */
static void progress_clear(void) {
    if (g_line_len > 0) {
        fprintf(stderr, "\r%*s\r", g_line_len, "");
        fflush(stderr);
    }
    g_line_len = 0;
}

void show_progress_clear(void) { progress_clear(); }

/* "08_training: computing sections 1-7 before section 8" into buf */
static void progress_what(char *buf, size_t cap) {
    if (g_cur > g_only)
        snprintf(buf, cap, "%s: section %d done; finishing section %d, output hidden", g_prog, g_only, g_cur);
    else if (g_only == 1)
        snprintf(buf, cap, "%s: setting up before section 1", g_prog);
    else if (g_only == 2)
        snprintf(buf, cap, "%s: computing section 1 before section 2", g_prog);
    else
        snprintf(buf, cap, "%s: computing sections 1-%d before section %d", g_prog, g_only - 1, g_only);
}

void show_progress(const char *unit, long done, long total) {
    if (!g_only || g_saved_out < 0) return;          /* nothing is hidden: the program speaks */
    if (g_err_tty < 0) g_err_tty = isatty(STDERR_FILENO);
    double now = clock_wall_s();
    if (g_hide_t0 < 0) g_hide_t0 = now;
    int loop = unit && total > 0, last = loop && done >= total;
    if (!g_err_tty) {                                /* plain lines at each quarter of a loop */
        if (!loop) return;
        if (total != g_span_total || done * 4 / total < g_span_quarter) g_span_total = total, g_span_quarter = 0;
        if (done * 4 / total <= g_span_quarter) return;
        g_span_quarter = done * 4 / total;
    } else if (!last && (now - g_hide_t0 < 0.25 || (loop && now - g_drawn < 0.1))) {
        return;                                      /* the end of a loop is always drawn */
    }
    char what[160], where[32] = "", step[64] = "", clock[32] = "", full[320], line[SCREEN_W * 4 + 1];
    progress_what(what, sizeof what);
    if (g_cur > 0 && g_cur < g_only) snprintf(where, sizeof where, "... section %d", g_cur);
    if (loop) snprintf(step, sizeof step, "%s %s %ld/%ld", *where ? "," : "...", unit, done, total);
    if (g_err_tty) snprintf(clock, sizeof clock, " (%.0f s)", now - g_hide_t0);
    /* within 79 columns: the clock goes first, then which section it is in */
    snprintf(full, sizeof full, "%s%s%s%s", what, where, step, clock);
    if (show_text_width(full) > SCREEN_W - 1) snprintf(full, sizeof full, "%s%s%s", what, where, step);
    if (show_text_width(full) > SCREEN_W - 1) snprintf(full, sizeof full, "%s%s%s", what, *where ? "..." : "",
                                                       step + (*where && loop ? 2 : 0));
    int w = text_fit(line, sizeof line, full, SCREEN_W - 1);
    if (!g_err_tty) {
        fprintf(stderr, "%s\n", line);
    } else {
        /* the new text over the old, spaces over what is left of it, cursor after the text */
        fprintf(stderr, "\r%s", line);
        if (g_line_len > w) fprintf(stderr, "%*s\r%s", g_line_len - w, "", line);
        g_line_len = w;
        g_drawn = now;
    }
    fflush(stderr);
}

static void hide_stdout(int hide) {
    if (hide == (g_saved_out >= 0)) return;
    fflush(stdout);
    if (hide) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0) return;
        g_saved_out = dup(STDOUT_FILENO);
        if (g_saved_out >= 0) dup2(null, STDOUT_FILENO);
        close(null);
    } else {
        dup2(g_saved_out, STDOUT_FILENO);
        close(g_saved_out);
        g_saved_out = -1;
    }
}

/* --section names a section this program does not have (its sections are
 * 1..most): stdout back, say so, exit 2 (_exit: lecture_end may be the
 * caller, already inside exit). */
static void no_such_section(int most) {
    progress_clear();
    hide_stdout(0);
    fflush(stdout);
    fprintf(stderr, "%s: error: --section %d: this program has sections 1..%d\n", g_prog, g_only, most);
    fflush(stderr);
    _exit(2);
}

/* At exit: stdout back, and a --section that named no section is an error
 * (status 2), not an empty success. The safety net behind
 * show_lecture_sections, which refuses it before the run. */
static void lecture_end(void) {
    progress_clear();
    hide_stdout(0);
    fflush(stdout);
    if (g_only && g_most < g_only) no_such_section(g_most);
}

void show_lecture_sections(int n) {
    if (g_only > n) no_such_section(n);
}

void show_lecture_begin(const char *prog) {
    static int registered = 0;
    g_prog = prog ? prog : "";
    if (!g_only && !g_pause) return;
    if (!registered && atexit(lecture_end) == 0) registered = 1;
    (void)show_color();         /* decided on the real stdout, before any hiding */
    if (g_only) g_hide_t0 = clock_wall_s();   /* the hidden work's clock (show_progress) */
    if (g_only) hide_stdout(1); /* the header before section 1 belongs to no section */
}

/* Waits for Enter (on stdin, prompt on stderr). End of input ends pausing.
 * label: the next banner's number, "4" or "4b". */
static void lecture_pause(const char *label) {
    fflush(stdout);
    fprintf(stderr, "-- Enter: section %s --", label);
    fflush(stderr);
    int c;
    while ((c = getchar()) != '\n' && c != EOF) {}
    if (c == EOF) g_pause = 0;
}

/* "3. Masked attention" -> 3, and "4b. A part of 4" -> 4 with *len 2 (the
 * label's length); no leading number -> 0. */
static int section_number(const char *title, int *len) {
    int n = 0, k = 0;
    while (title[k] >= '0' && title[k] <= '9' && k < 4) n = n * 10 + (title[k++] - '0');
    if (k > 0 && title[k] >= 'a' && title[k] <= 'z') k++;
    *len = k;
    return k > 0 && title[k] == '.' ? n : 0;
}

/* ---- banners, shapes, matrices, vectors ----------------------------------- */

void show_section(const char *title) {
    char buf[SCREEN_W * 4 + 1];
    int len = 0, num = section_number(title ? title : "", &len);
    if (num > 0) {
        if (g_pause && !g_only && g_cur > 0 && isatty(STDIN_FILENO)) {
            char label[8];
            snprintf(label, sizeof label, "%.*s", len, title);
            lecture_pause(label);
        }
        g_cur = num;
        if (num > g_most) g_most = num;
        if (g_only && num == g_only) progress_clear();   /* the section's own lines start clean */
        if (g_only) hide_stdout(num != g_only);
        if (g_only && num != g_only) show_progress(NULL, 0, 0);
    }
    text_fit(buf, sizeof buf, title ? title : "", SCREEN_W - 6);
    if (show_color()) printf("\n\033[1m== %s ==\033[0m\n", buf);
    else printf("\n== %s ==\n", buf);
}

void show_shape(const Tensor *t, const char *note) {
    char b[256];
    tensor_shape_str(t, b, sizeof b);
    if (note && *note) printf("  %s  %s\n", b, note);
    else printf("  %s\n", b);
}

void show_matrix(const char *title, const float *x, int rows, int cols,
                 const char *const *row_labels, const char *const *col_labels) {
    char lb[32], num[64];
    if (title && *title) printf("%s\n", title);
    if (rows <= 0 || cols <= 0) {
        printf("  (empty %d x %d)\n", rows, cols);
        return;
    }
    /* column width 9 = a space + 8 characters of number, four decimals
     * where they fit: enough to check a small example by hand */
    const int cw = 9;
    int dec = decimals_for(max_abs_finite(x, rows, cols), cw - 1, 4);
    int lw = 0;
    for (int i = 0; i < rows && i < MATRIX_MAX_ROWS; i++) {
        int w = show_text_width(show_label(row_labels, i, lb, sizeof lb));
        if (w > lw) lw = w;
    }
    if (lw > LABEL_W_MAX) lw = LABEL_W_MAX;
    int fit = (SCREEN_W - 2 - lw) / cw;
    int shown = cols < fit ? cols : fit;
    if (shown < cols) shown = (SCREEN_W - 2 - lw - 14) / cw; /* room for "  ... N more" */
    if (shown < 1) shown = 1;

    printf("  %*s", lw, "");
    for (int j = 0; j < shown; j++) {
        printf(" ");
        put_fit(show_label(col_labels, j, lb, sizeof lb), cw - 1, 1);
    }
    if (shown < cols) printf("  ... %d more", cols - shown);
    printf("\n");
    int rshown = rows <= MATRIX_MAX_ROWS ? rows : MATRIX_MAX_ROWS;
    for (int i = 0; i < rshown; i++) {
        printf("  ");
        put_fit(show_label(row_labels, i, lb, sizeof lb), lw, 0);
        for (int j = 0; j < shown; j++) {
            fmt_num(num, sizeof num, x[(long)i * cols + j], cw - 1, dec);
            printf(" %s", num);
        }
        printf("\n");
    }
    if (rshown < rows) printf("  ... %d more rows\n", rows - rshown);
}

void show_vector(const char *name, const float *x, int n) {
    char item[48];
    char nm[SCREEN_W];
    text_fit(nm, sizeof nm, name ? name : "", 30);
    int col = printf("%s = [", nm);
    for (int i = 0; i < n; i++) {
        float v = x[i];
        /* three decimals reads best; tiny or huge values switch to %e so
         * that 3.4e-04 does not print as a misleading 0.000 */
        if (isnan(v)) snprintf(item, sizeof item, "nan");
        else if (isinf(v)) snprintf(item, sizeof item, "%s", v > 0 ? "inf" : "-inf");
        else if (v == 0 || (fabsf(v) >= 1e-3f && fabsf(v) < 1e5f)) snprintf(item, sizeof item, "%.3f", (double)v);
        else snprintf(item, sizeof item, "%.3e", (double)v);
        int sep = i ? 2 : 0;
        int tail = i + 1 < n ? 16 : 1; /* room for ", ... N more]" or "]" */
        if (col + sep + (int)strlen(item) + tail > SCREEN_W && i + 1 < n) {
            printf("%s... %d more]\n", i ? ", " : "", n - i);
            return;
        }
        col += printf("%s%s", i ? ", " : "", item);
    }
    printf("]\n");
}

/* ---- terminal heatmap ----------------------------------------------------- */

/* The ramp, darkest/lowest first. Plain: ASCII density. Colour: xterm
 * 256-colour approximations of viridis (the same palette as the PNGs),
 * which stays readable for colour-blind readers and in grey scale. */
static const char SHADES[NLEVELS + 1] = " .:-=+*#%@";
static const int PALETTE256[NLEVELS] = {53, 54, 60, 24, 30, 36, 35, 77, 148, 220};

static ShowScale g_scale = SHOW_SCALE_AUTO;

void show_set_scale(ShowScale s) { g_scale = s; }

/* Which scale a map is drawn on: --minmax wins; AUTO picks the fixed 0..1
 * scale when every finite entry is a probability (a weight, a 0/1 mask). */
ShowScale show_scale_of(ShowScale asked, const float *x, long n) {
    if (g_scale == SHOW_SCALE_MINMAX) return SHOW_SCALE_MINMAX;
    if (asked != SHOW_SCALE_AUTO) return asked;
    for (long i = 0; i < n; i++)
        if (isfinite(x[i]) && (x[i] < 0 || x[i] > 1)) return SHOW_SCALE_MINMAX;
    return SHOW_SCALE_PROB;
}

/* Shade level 0..NLEVELS-1 of v.
 * PROB: fixed 0..1. Level 0 (blank) means exactly 0; any weight above 0
 * gets 1..NLEVELS-1, so a faint weight never looks like a blocked one and
 * a near-uniform row of 12 (0.083 each) is a row of the faintest shade.
 * MINMAX: lo..hi stretched over every level. */
static int level_of(float v, ShowScale sc, double lo, double hi) {
    if (sc == SHOW_SCALE_PROB) {
        if (!(v > 0)) return 0;
        int l = 1 + (int)(v * (NLEVELS - 1));
        return l >= NLEVELS ? NLEVELS - 1 : l;
    }
    if (!(hi > lo)) return NLEVELS / 2;
    int l = (int)((v - lo) / (hi - lo) * NLEVELS);
    return l < 0 ? 0 : l >= NLEVELS ? NLEVELS - 1 : l;
}

/* The header name of column j in key mode: a..z then A..Z. */
static char key_letter(int j) { return (char)(j < 26 ? 'a' + j : 'A' + (j - 26)); }

/* Prints "key: a=the b=cat ..." wrapped to SCREEN_W, indented by ind. A
 * label longer than KEY_LABEL_W is cut and marked '~' so that what is left
 * cannot be read as a whole token. */
static void print_key(const char *const *labels, int shown, int ind) {
    char lb[32], cut[KEY_LABEL_W * 4 + 1], item[KEY_LABEL_W * 4 + 8];
    int col = printf("%*s key:", ind, "");
    for (int j = 0; j < shown; j++) {
        const char *s = show_label(labels, j, lb, sizeof lb);
        int w = text_fit(cut, sizeof cut, s, KEY_LABEL_W);
        int was_cut = w < show_text_width(s);
        snprintf(item, sizeof item, " %c=%s%s", key_letter(j), cut, was_cut ? "~" : "");
        int iw = 3 + w + was_cut;
        if (col + iw > SCREEN_W) col = printf("\n%*s     ", ind, "") - 1;
        printf("%s", item);
        col += iw;
    }
    printf("\n");
}

void show_heatmap(const char *title, const float *x, int rows, int cols,
                  const char *const *row_labels, const char *const *col_labels) {
    show_heatmap_scaled(title, x, rows, cols, row_labels, col_labels, SHOW_SCALE_AUTO);
}

void show_heatmap_scaled(const char *title, const float *x, int rows, int cols,
                         const char *const *row_labels, const char *const *col_labels,
                         ShowScale scale) {
    char lb[32], num[64], buf[256];
    int color = show_color();
    if (title && *title) {
        text_fit(buf, sizeof buf, title, SCREEN_W);
        printf("%s\n", buf);
    }
    if (rows <= 0 || cols <= 0) {
        printf("  (empty %d x %d)\n", rows, cols);
        return;
    }

    /* value range over finite entries (-inf marks masked scores, drawn apart) */
    long n = (long)rows * cols, nfinite = 0, nzero = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (long i = 0; i < n; i++) {
        if (!isfinite(x[i])) continue;
        nfinite++;
        nzero += x[i] == 0;
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (lo > hi) lo = hi = 0;
    ShowScale sc = show_scale_of(scale, x, n);

    int rshown = rows <= HEAT_MAX_ROWS ? rows : HEAT_MAX_ROWS;
    int lw = 1;
    for (int i = 0; i < rshown; i++) {
        int w = show_text_width(show_label(row_labels, i, lb, sizeof lb));
        if (w > lw) lw = w;
    }
    if (lw > LABEL_W_MAX) lw = LABEL_W_MAX;

    /* Small matrices carry their numbers so a reader can check them by
     * hand (cells of 8: a 6-wide number); larger ones are pure shade. */
    int numbers = cols <= NUM_MAX_COLS && rows <= NUM_MAX_ROWS;
    int dec = numbers ? decimals_for(max_abs_finite(x, rows, cols), 6, 3) : 0;
    int avail = SCREEN_W - lw - 1;
    int longest = 1;
    for (int j = 0; j < cols; j++) {
        int w = show_text_width(show_label(col_labels, j, lb, sizeof lb));
        if (w > longest) longest = w;
    }
    /* Column labels are written whole, across: the cell widens to the
     * longest label when the map still fits. Otherwise the columns are
     * lettered a, b, ... with a key below - never a label cut into a
     * shorter one, which could read as another token ("w10" -> "w1"). */
    int cw = numbers ? 8 : 3, field = numbers ? 6 : 2, key = 0;
    if (longest > field) {
        int wide = numbers ? longest + 2 : longest + 1;
        if (wide * cols <= avail) cw = wide, field = longest;
        else key = 1;
    }
    int shown = avail / cw < cols ? avail / cw : cols;
    if (shown > 52) shown = 52; /* letters a..z, A..Z */
    if (shown < 1) shown = 1;

    printf("%*s ", lw, "");
    for (int j = 0; j < shown; j++) {
        char letter[2] = {key_letter(j), '\0'};
        const char *s = key ? letter : show_label(col_labels, j, lb, sizeof lb);
        if (numbers) printf(" ");
        put_fit(s, field, 1);
        printf("%*s", cw - field - numbers, "");
    }
    printf("\n");

    for (int i = 0; i < rshown; i++) {
        put_fit(show_label(row_labels, i, lb, sizeof lb), lw, 0);
        printf(" ");
        for (int j = 0; j < shown; j++) {
            float v = x[(long)i * cols + j];
            int fin = isfinite(v);
            int l = fin ? level_of(v, sc, lo, hi) : 0;
            int blank = sc == SHOW_SCALE_PROB && fin && l == 0; /* exactly 0: no shade */
            if (numbers) fmt_num(num, sizeof num, v, 6, dec);
            if (color) {
                int bg = fin ? PALETTE256[l] : 240;
                int fg = (!fin || l >= NLEVELS / 2) ? 16 : 231; /* dark text on light cells */
                if (blank && numbers) printf("%*s%s ", cw - 7, "", num);
                else if (blank) printf("%*s", cw, "");
                else if (numbers) printf("\033[48;5;%d;38;5;%dm%*s%s \033[0m", bg, fg, cw - 7, "", num);
                else printf("\033[48;5;%dm %-*s\033[0m", bg, cw - 1, fin ? "" : "x");
            } else {
                char s = fin ? SHADES[l] : 'x';
                if (numbers) printf("%*s%s%c", cw - 7, "", num, s);
                else { for (int k = 0; k < cw - 1; k++) putchar(s); putchar(' '); }
            }
        }
        printf("\n");
    }
    if (rshown < rows || shown < cols) {
        printf("%*s ", lw, "");
        if (rshown < rows) printf("... %d more rows%s", rows - rshown, shown < cols ? ", " : "");
        if (shown < cols) printf("... %d more columns", cols - shown);
        printf("\n");
    }
    if (key) print_key(col_labels, shown, lw);

    /* legend: which scale, which shade is which value, and the map's range */
    double m = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
    char slo[32], shi[32];
    fmt_num(slo, sizeof slo, (float)lo, 1, decimals_for(m, 9, 3));
    fmt_num(shi, sizeof shi, (float)hi, 1, decimals_for(m, 9, 3));
    if (sc == SHOW_SCALE_PROB) printf("%*s scale: fixed 0 ", lw, "");
    else printf("%*s scale: min-max %s ", lw, "", slo);
    if (color) {
        if (sc == SHOW_SCALE_PROB) printf("  ");
        for (int l = sc == SHOW_SCALE_PROB; l < NLEVELS; l++) printf("\033[48;5;%dm  ", PALETTE256[l]);
        printf("\033[0m");
    } else {
        printf("[%s]", SHADES);
    }
    if (nfinite == 0) printf(" %s; this map has no finite entry\n", sc == SHOW_SCALE_PROB ? "1, blank = 0" : shi);
    else if (sc == SHOW_SCALE_PROB) printf(" 1, blank = 0; this map %s..%s\n", slo, shi);
    else printf(" %s (stretched to this map)\n", shi);

    /* say what an empty map is, rather than let a reader guess */
    if (nfinite == 0)
        printf("%*s empty: all %ld entries are -inf/nan (x), nothing to attend to\n", lw, "", n);
    else if (nzero == n)
        printf("%*s empty: all %ld entries are exactly 0\n", lw, "", n);
    else if (nfinite < n)
        printf("%*s x: -inf/nan\n", lw, "");
    if (nfinite > 0 && nzero < n) {
        int col = 0, nz = 0;
        for (int i = 0; i < rows; i++) {
            int all0 = 1;
            for (int j = 0; j < cols && all0; j++) all0 = x[(long)i * cols + j] == 0;
            if (!all0) continue;
            if (nz++ == 0) col = printf("%*s rows entirely 0:", lw, "");
            if (col + 12 > SCREEN_W) { printf(" ..."); break; }
            col += printf(" ");
            char cut[64];
            col += text_fit(cut, sizeof cut, show_label(row_labels, i, lb, sizeof lb), LABEL_W_MAX);
            printf("%s", cut);
        }
        if (nz) printf("\n");
    }
}

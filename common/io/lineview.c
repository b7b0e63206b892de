/* lineview.c - attention as lines (the paper's Figures 3-5): the rules that
 * pick the views, one drawing routine for two targets (SVG for the page,
 * gnuplot data + script for the PNGs), the page's explorer script, and the
 * terminal summary. lineview.h says what is drawn and why.
 *
 * Geometry, in pixels, shared by the SVG, the gnuplot canvas (one data unit
 * = one pixel) and the page's script: a panel is
 *     PAD | query labels (lw) | gap of lines | key labels (lw) | PAD
 * (gap: at least GAP, wider when the colour key of many heads needs it)
 * with token i on row y = TOP + HR + RH (i + 1/2), both columns.
 */
#include "io/lineview.h"
#include "io/plot.h"
#include "io/show.h"
#include "core/fail.h"
#include "core/fileio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RH = 22, GAP = 170, PAD = 14, TOP = 68, HR = 22, BOTTOM = 34, LABEL_BYTES = 40 };

/* One colour per head (Tableau 10); head k takes COLOURS[k % 10]. */
static const unsigned COLOURS[10] = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd,
                                     0x8c564b, 0xe377c2, 0x17becf, 0xbcbd22, 0x7f7f7f};

static float weight(const LineSet *s, int l, int k, int i, int j) {
    return s->w[(((size_t)l * s->h + k) * s->T + i) * s->T + j];
}

/* ---- the rules ---------------------------------------------------------------- */

static int special(const char *t) {
    size_t n = t ? strlen(t) : 0;
    return n >= 3 && t[0] == '<' && t[n - 1] == '>' && !strstr(t, "</w>");
}

void lineview_words(const LineSet *s, unsigned char *words) {
    int any = 0;
    for (int i = 0; i < s->T; i++) any |= words[i] = !(s->tokens && special(s->tokens[i]));
    if (!any) memset(words, 1, (size_t)s->T);
}

static int n_words(const LineSet *s, const unsigned char *words) {
    int n = 0;
    for (int i = 0; i < s->T; i++) n += words[i];
    return n;
}

double lineview_distance(const LineSet *s, const unsigned char *words, int l, int i) {
    double d = 0;
    for (int k = 0; k < s->h; k++)
        for (int j = 0; j < s->T; j++)
            if (words[j]) d += weight(s, l, k, i, j) * abs(i - j);
    return d / s->h;
}

double lineview_uniform_distance(const LineSet *s, const unsigned char *words, int i) {
    double d = 0;
    for (int j = 0; j < s->T; j++) d += words[j] ? abs(i - j) : 0;
    return d / s->T;
}

double lineview_far_focus(const LineSet *s, const unsigned char *words, int l, int k) {
    double sum = 0;
    for (int i = 0; i < s->T; i++) {
        if (!words[i]) continue;
        float best = 0;
        for (int j = 0; j < s->T; j++)
            if (words[j] && abs(i - j) >= 2 && weight(s, l, k, i, j) > best) best = weight(s, l, k, i, j);
        sum += best;
    }
    return sum / n_words(s, words);
}

double lineview_sharpness(const LineSet *s, const unsigned char *words, int l, int k) {
    double sum = 0;
    for (int i = 0; i < s->T; i++) {
        if (!words[i]) continue;
        float best = 0;
        for (int j = 0; j < s->T; j++) best = fmaxf(best, weight(s, l, k, i, j));
        sum += best;
    }
    return sum / n_words(s, words);
}

double lineview_row_diff(const LineSet *s, const unsigned char *words, int la, int ka, int lb, int kb) {
    double sum = 0;
    for (int i = 0; i < s->T; i++) {
        if (!words[i]) continue;
        for (int j = 0; j < s->T; j++) sum += 0.5 * fabs(weight(s, la, ka, i, j) - weight(s, lb, kb, i, j));
    }
    return sum / n_words(s, words);
}

/* The heads are units u = l*h + k. Two units may pair when they share a
 * layer (the paper's pairs are two heads of one layer); with one head a
 * layer, any two layers' heads. */
static int may_pair(const LineSet *s, int u, int v) {
    return u < v && (s->h == 1 || u / s->h == v / s->h);
}

void lineview_choose(const LineSet *s, LineChoice *c) {
    unsigned char *words = xmalloc((size_t)s->T);
    lineview_words(s, words);
    int U = s->N * s->h;
    double *far = xmalloc((size_t)U * sizeof(double)), *sharp = xmalloc((size_t)U * sizeof(double));
    memset(c, 0, sizeof *c);
    c->excess3 = -INFINITY;
    for (int l = 0; l < s->N; l++)     /* Figure 3: the word that looks farthest beyond uniform */
        for (int i = 0; i < s->T; i++) {
            if (!words[i]) continue;
            double d = lineview_distance(s, words, l, i), e = d - lineview_uniform_distance(s, words, i);
            if (e > c->excess3) c->excess3 = e, c->dist3 = d, c->l3 = l, c->q3 = i;
        }
    for (int u = 0; u < U; u++) {
        far[u] = lineview_far_focus(s, words, u / s->h, u % s->h);
        sharp[u] = lineview_sharpness(s, words, u / s->h, u % s->h);
    }
    int a4 = 0, b4 = 0, a5 = 0, b5 = 0;   /* one head in all: shown twice */
    double best4 = -1, best5 = -1;
    for (int u = 0; u < U; u++)
        for (int v = 0; v < U; v++) {
            if (!may_pair(s, u, v)) continue;
            if (far[u] + far[v] > best4) best4 = far[u] + far[v], a4 = u, b4 = v;
            double tv = lineview_row_diff(s, words, u / s->h, u % s->h, v / s->h, v % s->h);
            double score = tv * fmin(sharp[u], sharp[v]);
            if (score > best5) best5 = score, a5 = u, b5 = v, c->tv5 = tv;
        }
    int p4[2] = {a4, b4}, p5[2] = {a5, b5};
    for (int t = 0; t < 2; t++) {
        c->l4[t] = p4[t] / s->h, c->k4[t] = p4[t] % s->h, c->far4[t] = far[p4[t]];
        c->l5[t] = p5[t] / s->h, c->k5[t] = p5[t] % s->h, c->sharp5[t] = sharp[p5[t]];
    }
    c->score5 = c->tv5 * fmin(c->sharp5[0], c->sharp5[1]);
    free(far), free(sharp), free(words);
}

/* ---- labels and numbers ---------------------------------------------------------- */

/* The display labels, as every picture draws them (plot.h: "</w>"
 * dropped, '·' on a continuing piece; numbered from 1 without tokens),
 * escaped with fio_escape and cut at LABEL_BYTES: T strings of LABEL_BYTES
 * in one block. */
static char *display_labels(const LineSet *s) {
    char *out = xcalloc((size_t)s->T, LABEL_BYTES), raw[LABEL_BYTES];
    int bpe = plot_bpe_labels(s->tokens, s->T);
    for (int i = 0; i < s->T; i++) {
        if (s->tokens && s->tokens[i]) plot_label(s->tokens, i, bpe, raw, sizeof raw);
        else snprintf(raw, sizeof raw, "%d", i + 1);
        fio_escape(out + (size_t)i * LABEL_BYTES, LABEL_BYTES, raw, (size_t)-1);
    }
    return out;
}

/* w rounded to 4 decimals, as the page embeds it and the SVG draws it:
 * "0.8312", "0.05", "1", "0". NaN and values outside [0, 1] are clamped. */
static const char *fmt_w(char buf[16], float w) {
    double v = isfinite(w) ? fmin(1, fmax(0, w)) : 0;
    snprintf(buf, 16, "%.4f", round(v * 1e4) / 1e4);
    char *e = buf + strlen(buf) - 1;
    while (*e == '0') *e-- = '\0';
    if (*e == '.') *e = '\0';
    return buf;
}

/* Text for HTML/SVG and for JavaScript strings. Besides what the syntax
 * needs, '/', ':' and '=' are written as character references, so no
 * token can spell a link ("//", "http:", "src=") into the page. */
static void xml_text(FILE *f, const char *t) {
    for (; *t; t++) {
        if (strchr("&<>\"'/:=", *t)) fprintf(f, "&#%d;", *t);
        else fputc(*t, f);
    }
}
static void js_string(FILE *f, const char *t) {
    fputc('"', f);
    for (; *t; t++) {
        if (strchr("&<>\"'/:=\\", *t) || (unsigned char)*t < 0x20) fprintf(f, "\\u%04x", (unsigned char)*t);
        else fputc(*t, f);
    }
    fputc('"', f);
}
/* A gnuplot single-quoted string: only ' itself is special (doubled). */
static void gp_string(FILE *f, const char *t) {
    fputc('\'', f);
    for (; *t; t++) {
        if (*t == '\'') fputc('\'', f);
        fputc(*t, f);
    }
    fputc('\'', f);
}

/* ---- one drawing, two targets ------------------------------------------------------ */

typedef struct {
    FILE *svg;        /* SVG elements go here, or                    */
    FILE *gp, *dat;   /* gnuplot labels into the script, lines as data */
} Canvas;

enum { LEFT = -1, CENTRE = 0, RIGHT = 1 };

static void cv_text(Canvas *cv, double x, double y, int anchor, int bold, unsigned colour, const char *text) {
    if (cv->svg) {
        fprintf(cv->svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" dominant-baseline=\"central\" "
                "fill=\"#%06x\"%s>", x, y, anchor == LEFT ? "start" : anchor == RIGHT ? "end" : "middle", colour,
                bold ? " font-weight=\"bold\"" : "");
        xml_text(cv->svg, text);
        fprintf(cv->svg, "</text>\n");
    } else {
        fprintf(cv->gp, "set label ");
        gp_string(cv->gp, text);
        fprintf(cv->gp, " at %.1f,%.1f %s front textcolor rgb '#%06x' font '%s'\n", x, y,
                anchor == LEFT ? "left" : anchor == RIGHT ? "right" : "center", colour,
                bold ? "Sans:Bold,10" : "Sans,10");
    }
}

/* The line of weight w from query i to key j of head k in layer l: SVG
 * stroke-opacity = w; gnuplot colour 0xAARRGGBB with AA = 255 (1 - w), its
 * transparency. The data attributes / columns say where it came from
 * (counted from 1). */
static void cv_line(Canvas *cv, double x1, double y1, double x2, double y2, int l, int k, int i, int j, float w) {
    char b[16];
    fmt_w(b, w);
    if (cv->svg) {
        fprintf(cv->svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#%06x\" stroke-opacity=\"%s\" "
                "data-layer=\"%d\" data-head=\"%d\" data-q=\"%d\" data-k=\"%d\"/>\n", x1, y1, x2, y2,
                COLOURS[k % 10], b, l + 1, k + 1, i + 1, j + 1);
    } else {
        unsigned long alpha = (unsigned long)lround(255 * (1 - atof(b)));
        fprintf(cv->dat, "%.1f %.1f %.1f %.1f %lu %s %d %d %d %d\n", x1, y1, x2 - x1, y2 - y1,
                alpha << 24 | COLOURS[k % 10], b, l + 1, k + 1, i + 1, j + 1);
    }
}

typedef struct {
    const LineSet *s;
    const char *lab;   /* display_labels */
    int lw, gap;       /* widths of a label column and of the lines */
} Geo;

static double row_y(int i) { return TOP + HR + RH * (i + 0.5); }
static int panel_width(const Geo *g) { return 2 * PAD + 2 * g->lw + g->gap; }
static int canvas_height(const LineSet *s) { return TOP + HR + RH * s->T + BOTTOM; }

/* Key-side offset of head k's line when every head is drawn, so that the
 * heads' lines to one key lie side by side instead of on top of each other. */
static double head_offset(int k, int h) { return (k - (h - 1) / 2.0) * fmin(2.5, (RH - 6.0) / h); }

/* One panel at x0: head k of layer l (k = -1: every head), the lines from
 * query q (q = -1: from every query) to every key; the chosen query's
 * label in bold, the others grey. */
static void panel(Canvas *cv, const Geo *g, double x0, int l, int k, int q) {
    const LineSet *s = g->s;
    char cap[160];
    double xa = x0 + PAD + g->lw, xb = xa + g->gap;
    if (k >= 0) snprintf(cap, sizeof cap, "layer %d, head %d", l + 1, k + 1);
    else if (q >= 0) snprintf(cap, sizeof cap, "layer %d, all %d heads, from \"%s\"", l + 1, s->h, g->lab + (size_t)q * LABEL_BYTES);
    else snprintf(cap, sizeof cap, "layer %d, all %d heads", l + 1, s->h);
    cv_text(cv, x0 + panel_width(g) / 2.0, TOP - 6, CENTRE, 1, k >= 0 ? COLOURS[k % 10] : 0x222222, cap);
    cv_text(cv, xa - 4, TOP + HR / 2.0, RIGHT, 0, 0x666666, "query");
    cv_text(cv, xb + 4, TOP + HR / 2.0, LEFT, 0, 0x666666, "key");
    for (int kk = k < 0 ? 0 : k; kk < (k < 0 ? s->h : k + 1); kk++)
        for (int i = q < 0 ? 0 : q; i < (q < 0 ? s->T : q + 1); i++)
            for (int j = 0; j < s->T; j++)
                cv_line(cv, xa + 2, row_y(i), xb - 2, row_y(j) + (k < 0 ? head_offset(kk, s->h) : 0), l, kk, i, j,
                        weight(s, l, kk, i, j));
    for (int i = 0; i < s->T; i++) {
        const char *t = g->lab + (size_t)i * LABEL_BYTES;
        cv_text(cv, xa - 4, row_y(i), RIGHT, i == q, q < 0 || i == q ? 0x111111 : 0x999999, t);
        cv_text(cv, xb + 4, row_y(i), LEFT, 0, 0x111111, t);
    }
    if (k < 0)   /* the colour key */
        for (int kk = 0; kk < s->h; kk++) {
            char hb[32];
            snprintf(hb, sizeof hb, "head %d", kk + 1);
            cv_text(cv, x0 + panel_width(g) / 2.0 + (kk - (s->h - 1) / 2.0) * 62, canvas_height(s) - 22, CENTRE,
                    1, COLOURS[kk % 10], hb);
        }
}

/* A figure: one or two panels side by side, two lines of title above. */
typedef struct {
    const char *name;        /* "lines_fig3" */
    char t1[300], t2[300];   /* title: what it is; the rule and its number */
    int n, l[2], k[2], q;    /* panels: (layer, head), query (-1: all) */
} Figure;

static int figure_width(const Geo *g, const Figure *f) {
    /* about 8 pixels a character of the bold first line, 7 of the second */
    int w = f->n * panel_width(g), tw = (int)fmax(8 * show_text_width(f->t1), 7 * show_text_width(f->t2)) + 40;
    return w > tw ? w : tw;
}

/* Draws f on a canvas W pixels wide (the page's SVG: the panels' width). */
static void figure_draw(Canvas *cv, const Geo *g, const Figure *f, int W) {
    if (!cv->svg) {   /* the page has them as a heading and a paragraph */
        cv_text(cv, W / 2.0, 16, CENTRE, 1, 0x111111, f->t1);
        cv_text(cv, W / 2.0, 36, CENTRE, 0, 0x444444, f->t2);
    }
    double x0 = (W - f->n * panel_width(g)) / 2.0;
    for (int p = 0; p < f->n; p++) panel(cv, g, x0 + p * panel_width(g), f->l[p], f->k[p], f->q);
    cv_text(cv, W - 8, canvas_height(g->s) - 8, RIGHT, 0, 0x666666, "line opacity = attention weight");
}

/* ---- files ------------------------------------------------------------------------ */

/* DIR/NAME.dat (one line a row: x y dx dy argb weight layer head query key)
 * and DIR/NAME.gp, then the PNG through plot_render. 1 rendered, 0 not, -1
 * a file could not be written. */
static int figure_png(const char *dir, const Geo *g, const Figure *f) {
    FioWriter wd, wg;
    FILE *dat = plot_open(&wd, dir, f->name, "dat");
    if (!dat) return -1;
    FILE *gp = plot_open(&wg, dir, f->name, "gp");
    if (!gp) {
        fio_abort(&wd);
        return -1;
    }
    int W = figure_width(g, f), H = canvas_height(g->s);
    fprintf(dat, "# %s: one attention line a row, in pixels (y down)\n"
                 "# x y dx dy argb(alpha = 255*(1 - weight)) weight layer head query key\n", f->name);
    fprintf(gp, "# %s.gp - written by attention-in-c; render with: gnuplot %s.gp\n"
                "# one data unit = one pixel, y down; labels below, lines from %s.dat\n", f->name, f->name, f->name);
    fprintf(gp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                "    set terminal pngcairo size %d,%d noenhanced font 'Sans,10' background '#ffffff'\n"
                "} else {\n"
                "    set terminal png truecolor size %d,%d noenhanced\n"
                "}\n", W, H, W, H);
    fprintf(gp, "set output '%s.png'\n", f->name);
    fprintf(gp, "set lmargin at screen 0\nset rmargin at screen 1\nset tmargin at screen 1\nset bmargin at screen 0\n"
                "unset border\nunset tics\nunset key\nset xrange [0:%d]\nset yrange [%d:0]\n", W, H);
    Canvas cv = {NULL, gp, dat};
    figure_draw(&cv, g, f, W);
    fprintf(gp, "plot '%s.dat' using 1:2:3:4:5 with vectors nohead lw 1.5 lc rgb variable notitle\n", f->name);
    int bad = plot_close(&wd);
    bad |= plot_close(&wg);
    return bad ? -1 : plot_render(dir, f->name);
}

/* The page's explorer: reads D (written before it), fills the three
 * selects, draws the chosen view into <svg id="view"> with the panel
 * geometry above (shown 1.4 times larger than the figures: it is the one
 * a reader studies) and keeps the URL hash and the selects in step. */
static const char *const EXPLORER_JS =
    "var svg = document.getElementById('view'), NS = svg.namespaceURI;\n"
    "var sel = {layer: document.getElementById('layer'), head: document.getElementById('head'),\n"
    "           query: document.getElementById('query')};\n"
    "function opt(s, v, t) { var o = document.createElement('option'); o.value = v; o.textContent = t; s.appendChild(o); }\n"
    "for (var l = 1; l <= D.N; l++) opt(sel.layer, l, 'layer ' + l);\n"
    "opt(sel.head, 'all', 'all heads');\n"
    "for (var k = 1; k <= D.h; k++) opt(sel.head, k, 'head ' + k);\n"
    "opt(sel.query, 'all', 'every word');\n"
    "for (var i = 1; i <= D.T; i++) opt(sel.query, i, i + ': ' + D.tokens[i - 1]);\n"
    "function el(name, attrs, text) {\n"
    "  var e = document.createElementNS(NS, name);\n"
    "  for (var a in attrs) e.setAttribute(a, attrs[a]);\n"
    "  if (text !== undefined) e.textContent = text;\n"
    "  svg.appendChild(e);\n"
    "}\n"
    "function rowY(i) { return D.top + D.hr + D.rh * (i + 0.5); }\n"
    "function hex(k) { return D.colours[k % D.colours.length]; }\n"
    "function txt(x, y, anchor, bold, fill, t) {\n"
    "  var a = {x: x, y: y, 'text-anchor': anchor, 'dominant-baseline': 'central', fill: fill};\n"
    "  if (bold) a['font-weight'] = 'bold';\n"
    "  el('text', a, t);\n"
    "}\n"
    "function view() {\n"
    "  var v = {layer: String(D.fig3[0] + 1), head: 'all', query: String(D.fig3[1] + 1)};\n"
    "  location.hash.replace(/^#/, '').split('&').forEach(function (p) {\n"
    "    var kv = p.split('=');\n"
    "    if (kv.length == 2 && v.hasOwnProperty(kv[0])) v[kv[0]] = kv[1];\n"
    "  });\n"
    "  var l = parseInt(v.layer, 10), h = v.head == 'all' ? 0 : parseInt(v.head, 10);\n"
    "  var q = v.query == 'all' ? 0 : parseInt(v.query, 10);\n"
    "  if (!(l >= 1 && l <= D.N)) l = D.fig3[0] + 1;\n"
    "  if (!(h >= 0 && h <= D.h)) h = 0;\n"
    "  if (!(q >= 0 && q <= D.T)) q = 0;\n"
    "  return {l: l - 1, k: h - 1, q: q - 1};\n"
    "}\n"
    "function draw() {\n"
    "  var v = view(), W = 2 * D.pad + 2 * D.lw + D.gap, H = D.top + D.hr + D.rh * D.T + D.bottom;\n"
    "  sel.layer.value = String(v.l + 1);\n"
    "  sel.head.value = v.k < 0 ? 'all' : String(v.k + 1);\n"
    "  sel.query.value = v.q < 0 ? 'all' : String(v.q + 1);\n"
    "  while (svg.firstChild) svg.removeChild(svg.firstChild);\n"
    "  svg.setAttribute('width', 1.4 * W);\n"
    "  svg.setAttribute('height', 1.4 * (H - D.top + 20));\n"
    "  svg.setAttribute('viewBox', '0 ' + (D.top - 20) + ' ' + W + ' ' + (H - D.top + 20));\n"
    "  var xa = D.pad + D.lw, xb = xa + D.gap, cap = 'layer ' + (v.l + 1);\n"
    "  cap += v.k < 0 ? ', all ' + D.h + ' heads' : ', head ' + (v.k + 1);\n"
    "  if (v.q >= 0) cap += ', from \"' + D.tokens[v.q] + '\"';\n"
    "  txt(W / 2, D.top - 6, 'middle', 1, v.k < 0 ? '#222222' : hex(v.k), cap);\n"
    "  txt(xa - 4, D.top + D.hr / 2, 'end', 0, '#666666', 'query');\n"
    "  txt(xb + 4, D.top + D.hr / 2, 'start', 0, '#666666', 'key');\n"
    "  for (var k = 0; k < D.h; k++) {\n"
    "    if (v.k >= 0 && k != v.k) continue;\n"
    "    var dy = v.k < 0 ? (k - (D.h - 1) / 2) * Math.min(2.5, (D.rh - 6) / D.h) : 0;\n"
    "    for (var i = 0; i < D.T; i++) {\n"
    "      if (v.q >= 0 && i != v.q) continue;\n"
    "      for (var j = 0; j < D.T; j++) {\n"
    "        var w = D.w[((v.l * D.h + k) * D.T + i) * D.T + j];\n"
    "        el('line', {x1: xa + 2, y1: rowY(i), x2: xb - 2, y2: rowY(j) + dy, stroke: hex(k),\n"
    "                    'stroke-opacity': String(w), 'data-layer': v.l + 1, 'data-head': k + 1,\n"
    "                    'data-q': i + 1, 'data-k': j + 1});\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  for (var i = 0; i < D.T; i++) {\n"
    "    txt(xa - 4, rowY(i), 'end', i == v.q, v.q < 0 || i == v.q ? '#111111' : '#999999', D.tokens[i]);\n"
    "    txt(xb + 4, rowY(i), 'start', 0, '#111111', D.tokens[i]);\n"
    "  }\n"
    "  if (v.k < 0) {\n"
    "    for (var k = 0; k < D.h; k++) txt(W / 2 + (k - (D.h - 1) / 2) * 62, H - 22, 'middle', 1, hex(k), 'head ' + (k + 1));\n"
    "  }\n"
    "}\n"
    "function go() {\n"
    "  location.hash = 'layer=' + sel.layer.value + '&head=' + sel.head.value + '&query=' + sel.query.value;\n"
    "}\n"
    "sel.layer.onchange = sel.head.onchange = sel.query.onchange = go;\n"
    "window.addEventListener('hashchange', draw);\n"
    "draw();\n";

/* DIR/attention_lines.html: the three figures as inline SVG (drawn here,
 * the same panels as the PNGs), then the explorer, its data and script. */
static int write_page(const char *dir, const Geo *g, const Figure *fig, const char *what) {
    FioWriter w;
    FILE *f = plot_open(&w, dir, "attention_lines", "html");
    if (!f) return -1;
    const LineSet *s = g->s;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    xml_text(f, what);
    fprintf(f, ": attention as lines</title>\n<style>\n"
               "body { font-family: sans-serif; margin: 16px; color: #222; }\n"
               "svg { display: block; margin: 4px 0 20px 0; background: #ffffff; }\n"
               "svg text { font-family: sans-serif; font-size: 12px; }\n"
               "svg line { stroke-width: 1.5; }\n"
               "p { max-width: 60em; }\n</style>\n</head>\n<body>\n"
               "<h1>Encoder self-attention as lines (the paper's Figures 3-5)</h1>\n<p>");
    xml_text(f, what);
    fprintf(f, ". %d layers, %d heads. The sentence, %d tokens:", s->N, s->h, s->T);
    for (int i = 0; i < s->T; i++) fputc(' ', f), xml_text(f, g->lab + (size_t)i * LABEL_BYTES);
    fprintf(f, "</p>\n<p>A line joins a query token (left) to a key token (right). Its opacity is the attention "
               "weight a<sub>ij</sub> exactly (no gamma; 4 decimals), its colour names the head.</p>\n"
               "<h2>Choose a view</h2>\n<form>layer <select id=\"layer\"></select> head <select id=\"head\">"
               "</select> query <select id=\"query\"></select></form>\n"
               "<p>The address remembers the view: #layer=2&amp;head=3&amp;query=5, or head=all, query=all "
               "(counted from 1).</p>\n<noscript><p>(The view needs JavaScript; the three figures below "
               "do not.)</p></noscript>\n<svg id=\"view\" width=\"10\" height=\"10\"></svg>\n");
    for (int n = 0; n < 3; n++) {
        int W = fig[n].n * panel_width(g), H = canvas_height(s);
        fprintf(f, "<h2>");
        xml_text(f, fig[n].t1);
        fprintf(f, "</h2>\n<p>");
        xml_text(f, fig[n].t2);
        fprintf(f, "</p>\n<svg id=\"fig%d\" width=\"%d\" height=\"%d\" viewBox=\"0 %d %d %d\">\n", n + 3, W,
                H - TOP + 20, TOP - 20, W, H - TOP + 20);
        Canvas cv = {f, NULL, NULL};
        figure_draw(&cv, g, &fig[n], W);
        fprintf(f, "</svg>\n");
    }
    fprintf(f, "<script>\nvar D = {N: %d, h: %d, T: %d, lw: %d, rh: %d, gap: %d, pad: %d, top: %d, hr: %d, "
               "bottom: %d, fig3: [%d, %d],\n  colours: [", s->N, s->h, s->T, g->lw, RH, g->gap, PAD, TOP, HR, BOTTOM,
            fig[0].l[0], fig[0].q);
    for (int c = 0; c < 10; c++) fprintf(f, "%s'#%06x'", c ? ", " : "", COLOURS[c]);
    fprintf(f, "],\n  tokens: [");
    for (int i = 0; i < s->T; i++) {
        if (i) fputs(", ", f);
        js_string(f, g->lab + (size_t)i * LABEL_BYTES);
    }
    fprintf(f, "],\n  /* w[((layer * h + head) * T + query) * T + key], layers and heads from 0 */\n  w: [");
    char b[16];
    size_t n = (size_t)s->N * s->h * s->T * s->T;
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%s%s", i ? "," : "", i % 20 == 0 ? "\n" : "", fmt_w(b, s->w[i]));
    fprintf(f, "]};\n%s</script>\n</body>\n</html>\n", EXPLORER_JS);
    return plot_close(&w);
}

/* ---- the terminal summary ----------------------------------------------------------- */

/* Token i's label, with its position ("9[7]") when the label occurs more
 * than once in the sentence (the copy task's digits). */
static const char *word_at(char *buf, const LineSet *s, const char *lab, int i) {
    const char *t = lab + (size_t)i * LABEL_BYTES;
    int twice = 0;
    for (int j = 0; j < s->T; j++) twice |= j != i && !strcmp(t, lab + (size_t)j * LABEL_BYTES);
    if (twice) snprintf(buf, LABEL_BYTES + 16, "%s[%d]", t, i + 1);
    else snprintf(buf, LABEL_BYTES + 16, "%s", t);
    return buf;
}

/* "    head 3 (layer 2): its -> Law 0.92, sees -> woman 0.81" - the
 * strongest lines of one head, from query q only (q >= 0) and to
 * non-adjacent word keys only (far), as many as fit in 80 columns. */
static void strongest(const LineSet *s, const unsigned char *words, const char *lab, int l, int k, int q, int far) {
    char head[64];
    int col = snprintf(head, sizeof head, "    head %d (layer %d):", k + 1, l + 1), shown = 0;
    printf("%s", head);
    unsigned char *used = xcalloc((size_t)s->T * s->T, 1);
    for (int n = 0; n < 3; n++) {
        int bi = -1, bj = -1;
        for (int i = q < 0 ? 0 : q; i < (q < 0 ? s->T : q + 1); i++)
            for (int j = 0; j < s->T; j++) {
                if (used[i * s->T + j] || !words[i] || (far && (!words[j] || abs(i - j) < 2))) continue;
                if (bi < 0 || weight(s, l, k, i, j) > weight(s, l, k, bi, bj)) bi = i, bj = j;
            }
        if (bi < 0) break;
        used[bi * s->T + bj] = 1;
        char item[3 * LABEL_BYTES + 32], a[LABEL_BYTES + 16], z[LABEL_BYTES + 16];
        snprintf(item, sizeof item, "%s %s -> %s %.2f", shown ? "," : "", word_at(a, s, lab, bi), word_at(z, s, lab, bj),
                 (double)weight(s, l, k, bi, bj));
        int wd = show_text_width(item);
        if (shown && col + wd > 80) break;
        printf("%s", item), col += wd, shown++;
    }
    printf("%s\n", shown ? "" : " (no line)");
    free(used);
}

int lineview_write(const char *dir, const LineSet *s, const LineChoice *c, const char *what) {
    if (plot_mkdir(dir) != 0) {
        fio_note_failure();
        return -1;
    }
    Geo g = {s, display_labels(s), 36, GAP};
    for (int i = 0; i < s->T; i++) {
        int cw = 7 * show_text_width(g.lab + (size_t)i * LABEL_BYTES) + 10;
        if (cw > g.lw) g.lw = cw;
    }
    if (g.gap < 62 * s->h - 2 * g.lw) g.gap = 62 * s->h - 2 * g.lw;   /* "head k" every 62 px */
    unsigned char *words = xmalloc((size_t)s->T);
    lineview_words(s, words);
    const char *q3 = g.lab + (size_t)c->q3 * LABEL_BYTES;
    Figure fig[3] = {{"lines_fig3", "", "", 1, {c->l3, 0}, {-1, 0}, c->q3},
                     {"lines_fig4", "", "", 2, {c->l4[0], c->l4[1]}, {c->k4[0], c->k4[1]}, -1},
                     {"lines_fig5", "", "", 2, {c->l5[0], c->l5[1]}, {c->k5[0], c->k5[1]}, -1}};
    snprintf(fig[0].t1, sizeof fig[0].t1, "Figure 3 (as in the paper): %s, layer %d of %d, all %d heads from \"%s\"",
             what, c->l3 + 1, s->N, s->h, q3);
    snprintf(fig[0].t2, sizeof fig[0].t2, "chosen: the word that looks farthest beyond uniform attention: "
             "sum_j a_ij |i-j| = %.2f tokens (mean of the heads), %+.2f on uniform's", c->dist3, c->excess3);
    snprintf(fig[1].t1, sizeof fig[1].t1, "Figure 4 (as in the paper): %s, two heads apart, layer %d head %d and "
             "layer %d head %d", what, c->l4[0] + 1, c->k4[0] + 1, c->l4[1] + 1, c->k4[1] + 1);
    snprintf(fig[1].t2, sizeof fig[1].t2, "chosen: a word's strongest link to a non-adjacent word takes %.2f and "
             "%.2f on average, the largest pair of one layer", c->far4[0], c->far4[1]);
    snprintf(fig[2].t1, sizeof fig[2].t1, "Figure 5 (as in the paper): %s, two heads side by side, layer %d head %d "
             "and layer %d head %d", what, c->l5[0] + 1, c->k5[0] + 1, c->l5[1] + 1, c->k5[1] + 1);
    snprintf(fig[2].t2, sizeof fig[2].t2, "chosen: rows differ by %.2f (half the L1 distance) x sharpness "
             "min(%.2f, %.2f) = %.2f, the largest pair of one layer", c->tv5, c->sharp5[0], c->sharp5[1], c->score5);

    printf("Attention as lines (the paper's Figures 3-5): encoder self-attention, %d layer%s x %d head%s\n"
           "(%s); line opacity = weight, 1/%d = %.2f a line for uniform attention\n",
           s->N, s->N > 1 ? "s" : "", s->h, s->h > 1 ? "s" : "", what, s->T, 1.0 / s->T);
    printf("  Figure 3, one word, every head: layer %d, \"%s\" (position %d) looks farthest beyond\n"
           "    uniform: sum_j a_ij |i-j| over word keys, mean of the heads = %.2f tokens (%+.2f)\n", c->l3 + 1,
           q3, c->q3 + 1, c->dist3, c->excess3);
    for (int k = 0; k < s->h; k++) strongest(s, words, g.lab, c->l3, k, c->q3, 0);
    printf("  Figure 4, two heads apart: layer %d head %d and layer %d head %d: a word's strongest\n"
           "    link to a non-adjacent word takes %.2f and %.2f on average (the largest pair)\n",
           c->l4[0] + 1, c->k4[0] + 1, c->l4[1] + 1, c->k4[1] + 1, c->far4[0], c->far4[1]);
    for (int t = 0; t < 2; t++) strongest(s, words, g.lab, c->l4[t], c->k4[t], -1, 1);
    printf("  Figure 5, two heads side by side: layer %d head %d and layer %d head %d: rows differ\n"
           "    by %.2f (half the L1 distance) x sharpness min(%.2f, %.2f) = %.2f (the largest pair)\n",
           c->l5[0] + 1, c->k5[0] + 1, c->l5[1] + 1, c->k5[1] + 1, c->tv5, c->sharp5[0], c->sharp5[1], c->score5);
    for (int t = 0; t < 2; t++) strongest(s, words, g.lab, c->l5[t], c->k5[t], -1, 0);
    int sl = 0, sk = 0;   /* how sharp the sharpest head is, against uniform's 1/T */
    for (int l = 0; l < s->N; l++)
        for (int k = 0; k < s->h; k++)
            if (lineview_sharpness(s, words, l, k) > lineview_sharpness(s, words, sl, sk)) sl = l, sk = k;
    double top = lineview_sharpness(s, words, sl, sk);
    printf("  sharpest head: layer %d head %d, a word's strongest key %.2f on average (%.1fx uniform)\n", sl + 1,
           sk + 1, top, top * s->T);
    if (top * s->T < 2) printf("    under twice uniform: the encoder's heads barely choose\n");

    int bad = 0, drawn = 0;
    for (int n = 0; n < 3; n++) {
        int r = figure_png(dir, &g, &fig[n]);
        bad |= r < 0, drawn += r > 0;
    }
    bad |= write_page(dir, &g, fig, what) != 0;
    printf("  [plot] %s/lines_fig3.png, lines_fig4.png, lines_fig5.png%s\n"
           "  [page] %s/attention_lines.html (a browser; #layer=1&head=2&query=3 picks a view)\n",
           dir, drawn == 3 ? " (+ .dat, .gp)" : ": .dat + .gp", dir);
    free(words);
    free((void *)g.lab);
    return bad ? -1 : 0;
}

int lineview_encoder(const char *dir, const Model *m, int Ts, const char *const *tokens, const char *what) {
    size_t per = (size_t)m->cfg.h * Ts * Ts;
    float *w = xmalloc((size_t)m->cfg.N * per * sizeof(float));
    for (int l = 0; l < m->cfg.N; l++) model_read(m, w + l * per, model_attention(m, ATTN_ENC_SELF, l), per * sizeof(float));
    LineSet s = {m->cfg.N, m->cfg.h, Ts, w, tokens};
    LineChoice c;
    lineview_choose(&s, &c);
    int rc = lineview_write(dir, &s, &c, what);
    free(w);
    return rc;
}

/* attention_view.c - chapter 08's attention heatmaps (attention_view.h). */
#include "attention_view.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/tensor.h"
#include "io/cli.h"
#include "io/plot.h"
#include "io/show.h"
#include "task/copy_task.h"

void attn_token_label(char *buf, size_t len, int id) {
    if (id == COPY_PAD) snprintf(buf, len, "<pad>");
    else if (id == COPY_START) snprintf(buf, len, "<s>");
    else snprintf(buf, len, "%d", id);
}

void attn_view_check(const char *prog, AttnView *v, Model *m, Trainer *tr) {
    int N = m->cfg.N, h = m->cfg.h, L = v->layer, H = v->head;
    if (L > N || H > h) {
        trainer_free(tr), model_free(m);
        if (L > N) cli_fail(prog, "--attn-layer %d: this model has %d layer%s (1..%d)", L, N, N > 1 ? "s" : "", N);
        cli_fail(prog, "--attn-head %d: this model has %d head%s (1..%d; 0: their mean)", H, h, h > 1 ? "s" : "", h);
    }
    if (L == 0) v->layer = N;
}

/* map (Tq,Tk) = head `head` (1-based) of w (h,Tq,Tk), or the mean of all h */
static void head_or_mean(float *map, const float *w, int head, int h, int n) {
    for (int i = 0; i < n; i++) {
        float s = 0;
        for (int k = 0; k < h; k++) s += w[(size_t)k * n + i];
        map[i] = head ? w[(size_t)(head - 1) * n + i] : s / h;
    }
}

/* Rows of map (Tq,Tk) whose largest weight is on key position i + shift. */
static int rows_on_diagonal(const float *map, int Tq, int Tk, int shift) {
    int on = 0;
    for (int i = 0; i < Tq; i++) {
        int best = 0;
        for (int j = 1; j < Tk; j++) best = map[i * Tk + j] > map[i * Tk + best] ? j : best;
        on += best == i + shift;
    }
    return on;
}

/* What each cross-attention head of one layer does, counted on w (h,Tq,Tk):
 * rows whose largest weight is on source position i+1 (the token to copy),
 * per head, and the heads that do it for every row, named. */
static void cross_heads_line(const float *w, int h, int Tq, int Tk, int layer, int N) {
    int all[256], n_all = 0;
    printf("  layer %d of %d, per head:", layer, N);
    for (int k = 0; k < h; k++) {
        int on = rows_on_diagonal(w + (size_t)k * Tq * Tk, Tq, Tk, 1);
        printf(" %d", on);
        if (on == Tq && n_all < 256) all[n_all++] = k + 1;
    }
    printf(" of %d; ", Tq);
    if (n_all == 0) printf("no head does it for every row\n");
    else if (n_all == h && h > 1) printf("all %d heads do it for every row\n", h);
    else {
        printf("%s", n_all > 1 ? "heads" : "head");
        for (int k = 0; k < n_all; k++)
            printf("%s %d", k == 0 ? "" : k + 1 == n_all ? " and" : ",", all[k]);
        printf(" alone do%s it for every row\n", n_all > 1 ? "" : "es");
    }
}

void attn_view_show(const char *prog, Model *m, const AttnView *v, const int *src, const int *ys, int T,
                    const char *when, const char *out) {
    int Tt = T - 1;
    model_forward(m, src, ys, 1, T, Tt, 0);
    char srcl[COPY_LEN * 2][8], tgtl[COPY_LEN * 2][8];
    const char *sl[COPY_LEN * 2], *tl[COPY_LEN * 2];
    for (int i = 0; i < T; i++) {
        attn_token_label(srcl[i], sizeof srcl[i], src[i]);
        sl[i] = srcl[i];
    }
    for (int i = 0; i < Tt; i++) {
        attn_token_label(tgtl[i], sizeof tgtl[i], ys[i]);
        tl[i] = tgtl[i];
    }
    static const struct { AttnKind kind; const char *name, *what, *xlabel, *ylabel; } kinds[] = {
        {ATTN_ENC_SELF, "enc_self", "encoder self-attention", "source key", "source query"},
        {ATTN_DEC_SELF, "dec_self", "decoder masked self-attention", "decoder key", "decoder query (input token)"},
        {ATTN_DEC_CROSS, "cross", "decoder cross-attention", "source key", "decoder query (input token)"},
    };
    const int h = m->cfg.h, N = m->cfg.N;
    float map[COPY_LEN * COPY_LEN];
    float *w = malloc((size_t)h * T * T * sizeof(float));   /* one layer's weights (1,h,Tq,Tk), on the host */
    if (!w) cli_fail(prog, "out of memory");
    char which[32], title[160], name[64];
    if (v->head) snprintf(which, sizeof which, "head %d of %d", v->head, h);
    else snprintf(which, sizeof which, "mean of %d heads", h);

    /* the terminal: layer v->layer, head v->head (or the mean) */
    for (int k = 0; k < 3; k++) {
        int Tq = kinds[k].kind == ATTN_ENC_SELF ? T : Tt;
        int Tk = kinds[k].kind == ATTN_DEC_SELF ? Tt : T;
        model_read(m, w, model_attention(m, kinds[k].kind, v->layer - 1), (size_t)h * Tq * Tk * sizeof(float));
        head_or_mean(map, w, v->head, h, Tq * Tk);
        snprintf(title, sizeof title, "%s training: %s, layer %d of %d, %s", when, kinds[k].what, v->layer, N, which);
        if (kinds[k].kind == ATTN_ENC_SELF && !v->enc) {   /* one line; --attn-enc draws it */
            float lo = map[0], hi = map[0];
            for (int i = 1; i < Tq * Tk; i++) lo = map[i] < lo ? map[i] : lo, hi = map[i] > hi ? map[i] : hi;
            printf("%s:\n  weights %.3f..%.3f, the largest %.1fx uniform (1/%d = %.3f); --attn-enc draws it\n",
                   title, lo, hi, hi * Tk, Tk, 1.0 / Tk);
            continue;
        }
        Tensor wt = tensor_wrap(w, "weights", "batch heads query key", 1, h, Tq, Tk);
        show_shape(&wt, kinds[k].kind == ATTN_DEC_CROSS ? "(queries: decoder, keys: encoder output)"
                                                        : "(Eq. 1: one softmax row per query)");
        show_heatmap(title, map, Tq, Tk, kinds[k].kind == ATTN_ENC_SELF ? sl : tl,
                     kinds[k].kind == ATTN_DEC_SELF ? tl : sl);
        if (kinds[k].kind != ATTN_ENC_SELF) {   /* the (shifted) diagonal, counted */
            int shift = kinds[k].kind == ATTN_DEC_CROSS;
            printf("rows whose largest weight is on %s: %d of %d\n",
                   shift ? "source position i+1" : "their own position i", rows_on_diagonal(map, Tq, Tk, shift), Tq);
        }
    }

    /* per head: which cross-attention heads point at the token to copy */
    printf("cross-attention rows whose largest weight is on source position i+1, each head alone:\n");
    for (int layer = 1; layer <= N; layer++) {
        model_read(m, w, model_attention(m, ATTN_DEC_CROSS, layer - 1), (size_t)h * Tt * T * sizeof(float));
        cross_heads_line(w, h, Tt, T, layer, N);
    }

    /* the PNGs: every head of every layer, one grid per layer */
    for (int k = 0; k < 3; k++) {
        int Tq = kinds[k].kind == ATTN_ENC_SELF ? T : Tt;
        int Tk = kinds[k].kind == ATTN_DEC_SELF ? Tt : T;
        for (int layer = 1; layer <= N; layer++) {
            model_read(m, w, model_attention(m, kinds[k].kind, layer - 1), (size_t)h * Tq * Tk * sizeof(float));
            snprintf(title, sizeof title, "%s training: %s, layer %d of %d", when, kinds[k].what, layer, N);
            snprintf(name, sizeof name, "attn_%s_%s_heads_layer%d", when, kinds[k].name, layer);
            plot_heads_grid(out, name, title, w, h, Tq, Tk, kinds[k].kind == ATTN_ENC_SELF ? sl : tl,
                            kinds[k].kind == ATTN_DEC_SELF ? tl : sl, kinds[k].xlabel, kinds[k].ylabel);
        }
    }
    free(w);
}

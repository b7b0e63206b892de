/* attention_view.h - chapter 08's attention heatmaps: which map the
 * terminal draws (--attn-layer, --attn-head, --attn-enc), what each
 * cross-attention head learned, and every head of every layer as PNGs.
 * prog names the program in a failure's message (cli_fail). */
#ifndef CH08_ATTENTION_VIEW_H
#define CH08_ATTENTION_VIEW_H

#include <stddef.h>
#include "model/model.h"
#include "model/train.h"

/* Which map the terminal draws: one layer, one head or the mean of the
 * heads (--attn-layer, --attn-head, --attn-enc). The PNGs get every head
 * of every layer, whatever these say. Layers and heads count from 1. */
typedef struct {
    int layer;   /* 1..N; 0 until attn_view_check: the last layer            */
    int head;    /* 1..h; 0: the mean of the h heads                         */
    int enc;     /* also draw the encoder self-attention (default: one line) */
} AttnView;

/* "<pad>", "<s>", or the number: labels for heatmap rows and columns */
void attn_token_label(char *buf, size_t len, int id);

/* --attn-layer and --attn-head against this model (a --resume file decides
 * N and h): exit 2 naming the flag and the valid range (m and tr freed). */
void attn_view_check(const char *prog, AttnView *v, Model *m, Trainer *tr);

/* Runs the model on one (source, decoded output) pair with teacher forcing
 * and shows encoder self-attention, decoder masked self-attention and the
 * decoder's cross-attention over the source (Sec. 3.2.3): in the terminal
 * the layer and head of v, per head what the cross-attention learned, and
 * every head of every layer as PNGs (attn_WHEN_KIND_heads_layerL.png in out). */
void attn_view_show(const char *prog, Model *m, const AttnView *v, const int *src, const int *ys, int T,
                    const char *when, const char *out);

#endif

/* sample.h - the next token from one row of logits, as people generate
 * text with language models: greedy, temperature, top-k and top-p
 * (nucleus) sampling.
 *
 * Given logits z [V] (the model's scores for the next token):
 *   greedy       argmax_i z_i (ties: the lower id). temperature 0 and
 *                top_k 1 are greedy too. Draws nothing from the Rng.
 *   temperature  p_i = exp((z_i - max z) / temperature) / sum: the softmax
 *                of Eq. (1)'s row with the scores divided by tau. Below 1
 *                it sharpens the distribution towards greedy, above 1 it
 *                flattens it towards uniform. Subtracting max z changes
 *                nothing in p and keeps exp from overflowing.
 *   top-k        only the k most probable tokens stay (ties at the cut:
 *                the lower ids), renormalised (Fan et al. 2018).
 *   top-p        of those, only the smallest set of the most probable
 *                whose probabilities add up to at least top_p stays,
 *                renormalised (Holtzman et al. 2020, "nucleus sampling").
 *                Tokens are taken most probable first, equal ones lower id
 *                first, so at equal probabilities the cut is exact: four
 *                tokens of 1/4 with top_p 0.5 keep ids 0 and 1.
 * top-k is applied before top-p (as Hugging Face's generate does). Then
 * one number u = rng_uniform(r) picks a token from what stays: the first
 * (in that order) whose cumulative probability exceeds u times the kept
 * mass. The same logits, settings and Rng state give the same token on
 * every machine.
 *
 * No allocation: the caller gives scratch of V floats and V ints.
 * Logits may be -inf (a token that must not be chosen), not +inf or NaN,
 * and at least one must be finite (assertions: programming errors).
 */
#ifndef SAMPLE_H
#define SAMPLE_H

#include <stddef.h>

#include "core/rng.h"

typedef struct {
    float temperature;   /* 0: greedy; otherwise > 0 (1: the model's own p)  */
    int top_k;           /* 0: no cut; 1: greedy; k: the k most probable     */
    float top_p;         /* (0, 1]; 1: no cut                                */
} SampleConfig;

/* temperature 1, no cut: sampling from the model's own distribution */
SampleConfig sample_config_default(void);

/* 0 when cfg is valid; 2 with a message naming the setting otherwise
 * (temperature negative or not finite, top_k negative, top_p outside
 * (0, 1]): for the chapter's flags. */
int sample_config_check(SampleConfig cfg, char *err, size_t errlen);

/* The id of the next token for logits [V] (V >= 1). prob [V] and order
 * [V] are scratch (their contents on return: order[0..kept) the kept ids,
 * most probable first, prob[i] the unnormalised weight of id i). r may be
 * NULL for greedy settings only. */
int sample_next(const float *logits, int V, SampleConfig cfg, Rng *r, float *prob, int *order);

/* The greedy choice alone: argmax, ties to the lower id. */
int sample_argmax(const float *logits, int V);

#endif

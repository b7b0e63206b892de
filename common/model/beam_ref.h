/* beam_ref.h - beam search for one sentence, written plainly: the reference
 * decode_beam (decode.h: many sentences at once, KV cache) is tested against.
 *
 * Sec. 6.1: "beam search with a beam size of 4 and length penalty alpha =
 * 0.6". The rules are decode.h's, both of them (o->rule; BEAM_RULE_T2T,
 * the paper's code's, is decode_opts_paper's): which candidates finish, the
 * finished set, when to stop, which hypothesis is the answer. Here nothing
 * is batched or cached: a hypothesis is a list of tokens, and each step
 * runs the decoder over every live hypothesis's whole prefix (model_decode
 * after one model_encode of the source) and sorts all its candidates.
 * tests/check_decode.c checks that decode_beam gives the same answers.
 */
#ifndef BEAM_REF_H
#define BEAM_REF_H

#include <stddef.h>
#include "model/decode.h"
#include "model/model.h"

typedef struct {
    int len;          /* generated tokens written to out (end symbol included, if any) */
    float sum, score; /* sum of log-probs; sum / lp(len) (decode.h)                     */
    int steps;        /* decoder steps taken                                            */
    double margin;    /* the smallest gap between two numbers whose order decided
                         something (two candidates next to each other in a ranking,
                         a score and the best so far or the stopping bound): where it
                         is within float rounding, another correct search that sums
                         in another order may rightly decide the other way          */
} BeamRefResult;

/* Beam search over o->beam hypotheses (o->cached is ignored: there is no
 * cache here) for the source src (Ts validated ids). out gets the answer's
 * tokens: room for out_cap, at least decode_max_len's L. The model must
 * hold one sequence of (Ts, L) tokens. Returns 0, or 2 with a message (bad
 * options, sizes, out of memory). */
int beam_ref(Model *m, const DecodeOpts *o, const int *src, int Ts, int *out, int out_cap,
             BeamRefResult *res, char *err, size_t errlen);

#endif

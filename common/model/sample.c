/* sample.c - greedy, temperature, top-k and top-p sampling of the next
 * token (the rules are in sample.h). */
#include "model/sample.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>

#include "core/fail.h"

SampleConfig sample_config_default(void) {
    return (SampleConfig){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f};
}

int sample_config_check(SampleConfig cfg, char *err, size_t errlen) {
    if (!isfinite(cfg.temperature) || cfg.temperature < 0)
        return fail(err, errlen, "temperature %g: give 0 (greedy) or a positive number, e.g. 0.8", cfg.temperature);
    if (cfg.top_k < 0) return fail(err, errlen, "top-k %d: give 0 (no cut), 1 (greedy) or more", cfg.top_k);
    if (!(cfg.top_p > 0 && cfg.top_p <= 1))
        return fail(err, errlen, "top-p %g: give a number in (0, 1], e.g. 0.9 (1: no cut)", cfg.top_p);
    return 0;
}

int sample_argmax(const float *logits, int V) {
    assert(V >= 1);
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;   /* '>': a tie keeps the lower id */
    return best;
}

/* ---- most probable first: a heap over ids ------------------------------------------
 * Tokens are taken in the order "higher logit first, equal logits lower id
 * first" (a strict order: no two ids tie). The heap holds ids with the
 * first in that order on top, so taking the k best costs V + k log V, and
 * a peaked distribution (the usual case) is sampled after a few pops. */

static int before(const float *z, int a, int b) {
    return z[a] > z[b] || (z[a] == z[b] && a < b);
}

static void sift_down(const float *z, int *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && before(z, h[l], h[top])) top = l;
        if (r < n && before(z, h[r], h[top])) top = r;
        if (top == i) return;
        int t = h[i];
        h[i] = h[top], h[top] = t;
        i = top;
    }
}

/* Takes the next id off the heap h[0..*n): it moves to h[*n - 1], so the
 * ids taken so far sit at the end of the array, the first taken last. */
static int pop(const float *z, int *h, int *n) {
    int id = h[0];
    h[0] = h[--*n];
    h[*n] = id;
    sift_down(z, h, *n, 0);
    return id;
}

int sample_next(const float *logits, int V, SampleConfig cfg, Rng *r, float *prob, int *order) {
    assert(V >= 1 && cfg.temperature >= 0 && cfg.top_k >= 0 && cfg.top_p > 0 && cfg.top_p <= 1);
    int best = sample_argmax(logits, V);
    float zmax = logits[best];
    assert(isfinite(zmax) && "sample_next: every logit is -inf, or one is +inf or NaN");
    if (cfg.temperature == 0 || cfg.top_k == 1 || V == 1) return best;
    assert(r && "sample_next: sampling needs an Rng");

    /* p_i proportional to exp((z_i - max z) / temperature): each weight in
     * (0, 1], the largest exactly 1, -inf -> 0 */
    double total = 0;
    for (int i = 0; i < V; i++) {
        assert(!isnan(logits[i]) && "sample_next: a NaN logit");
        prob[i] = (float)exp(((double)logits[i] - zmax) / cfg.temperature);
        total += prob[i];
        order[i] = i;
    }
    int n = V;   /* ids still on the heap: order[0..n); taken: order[n..V) */
    for (int i = V / 2 - 1; i >= 0; i--) sift_down(logits, order, n, i);
#define TAKEN(j) order[V - 1 - (j)]   /* the j-th id taken, most probable first */

    /* top-k: the K best, and their mass */
    int K = cfg.top_k > 0 && cfg.top_k < V ? cfg.top_k : V;
    double mass = total;
    if (K < V) {
        mass = 0;
        for (int j = 0; j < K; j++) mass += prob[pop(logits, order, &n)];
    }
    /* top-p: the fewest of those, most probable first, whose mass reaches
     * top_p of theirs (kept: the first `kept` taken) */
    int kept = K;
    if (cfg.top_p < 1) {
        double need = cfg.top_p * mass, cum = 0;
        kept = 0;
        while (kept < K && cum < need) {
            if (V - n <= kept) pop(logits, order, &n);
            cum += prob[TAKEN(kept)];
            kept++;
        }
        mass = cum;
    }
    /* one uniform number picks among the kept, in the same order */
    double target = rng_uniform(r) * mass, cum = 0;
    int last = best;   /* the first taken: weight 1 */
    for (int j = 0; j < kept; j++) {
        if (V - n <= j) pop(logits, order, &n);
        int id = TAKEN(j);
        if (prob[id] > 0) last = id;
        cum += prob[id];
        if (cum > target) return id;
    }
#undef TAKEN
    return last;   /* rounding left target at the very top: the last kept with weight */
}

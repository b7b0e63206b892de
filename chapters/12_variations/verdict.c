/* verdict.c - chapter 12's verdicts, as strong as their evidence (verdict.h). */
#include "verdict.h"

#include <math.h>

void vbase_init(VBase *b, const double *ppl, const double *bleu, int n) {
    *b = (VBase){.n = n, .lo_ppl = ppl[0], .hi_ppl = ppl[0], .lo_bleu = bleu[0], .hi_bleu = bleu[0]};
    double sp = 0, sb = 0;
    for (int i = 0; i < n; i++) {
        sp += ppl[i], sb += bleu[i];
        b->lo_ppl = fmin(b->lo_ppl, ppl[i]), b->hi_ppl = fmax(b->hi_ppl, ppl[i]);
        b->lo_bleu = fmin(b->lo_bleu, bleu[i]), b->hi_bleu = fmax(b->hi_bleu, bleu[i]);
    }
    b->ppl = sp / n, b->bleu = sb / n;
    /* the noise floor: how far the seeds alone moved the base from its mean */
    if (n > 1) {
        b->band_ppl = fmax(b->ppl - b->lo_ppl, b->hi_ppl - b->ppl);
        b->band_bleu = fmax(b->bleu - b->lo_bleu, b->hi_bleu - b->bleu);
    }
}

int vbase_too_short(const VBase *b) { return b->bleu < V_SHORT_BLEU; }

int v_converged(double row_ppl, const VBase *b) { return row_ppl <= V_CONVERGED_X * b->ppl; }

int v_direction(double d, double band, int lower_better) {
    if (fabs(d) <= band) return 0;
    return (d < 0) == lower_better ? 1 : -1;
}

VDir v_judge(double d_ours, double band, int n_seeds, double d_paper, double paper_band, int lower_better) {
    VDir v = {.paper = v_direction(d_paper, paper_band, lower_better), .ours = v_direction(d_ours, band, lower_better)};
    /* one seed of a row just outside the base's spread could fall inside it
     * (or beyond it on the other side) with another seed: weak; one base
     * seed measures no spread at all, so nothing is strong */
    v.weak = v.ours != 0 && (n_seeds < 2 || fabs(d_ours) <= V_WEAK_X * band);
    v.agree = v.paper == v.ours;
    return v;
}

void vtally_add(VTally *t, int converged, VDir ppl, VDir bleu) {
    t->rows++;
    if (!converged) return;   /* still learning: shown, not counted */
    t->converged++;
    t->hold_ppl += ppl.agree, t->hold_bleu += bleu.agree;
    t->clear_ppl += ppl.agree && ppl.ours != 0 && !ppl.weak;
    t->clear_bleu += bleu.agree && bleu.ours != 0 && !bleu.weak;
}

char v_dir_char(int d) { return d > 0 ? '+' : d < 0 ? '-' : '='; }

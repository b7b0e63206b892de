/* verdict.h - how chapter 12 judges a row of Table 3 against its base, and
 * how strongly.
 *
 * The paper reports one number per row and no spread; we train the base
 * with a few seeds (--seeds) and every other row with one. So a row's
 * difference from the base is read against the base seeds' spread, and a
 * verdict is only as strong as that evidence:
 *
 *   too short   the base's mean dev BLEU is under V_SHORT_BLEU (10): it has
 *               not learned the task yet (60 steps give 0.16, the
 *               default's 600 give 89.42), so rows would differ in how
 *               fast they start, not where they end: no comparison at all.
 *   band        the farthest a base seed lies from the base mean (PPL and
 *               BLEU apart); within it a row is "=" (same as base).
 *   weak        a direction within V_WEAK_X (2) bands: one seed of the row
 *               could land on the other side of the base; with one base
 *               seed there is no band, and every direction is weak.
 *   converged   the row's dev PPL is at most V_CONVERGED_X (2) times the
 *               base's: a row above it is still learning at this budget
 *               (its loss lines in section 2 say so), and its direction is
 *               shown but not counted.
 *
 * PPL and BLEU are judged apart (label smoothing moves them opposite ways,
 * Sec. 5.4). The paper gives no spread: its own direction uses a small
 * fixed band (PPL +-0.025, BLEU +-0.15: h=16's 4.91 against 4.92 is the
 * same model quality).
 * Plain functions of numbers: no I/O, nothing allocated.
 */
#ifndef VERDICT_H
#define VERDICT_H

#define V_SHORT_BLEU 10.0     /* base dev BLEU under this: too short to compare   */
#define V_WEAK_X 2.0          /* a direction within this many bands is weak         */
#define V_CONVERGED_X 2.0     /* dev PPL over this times the base's: not converged  */
#define V_PAPER_SAME_PPL 0.025
#define V_PAPER_SAME_BLEU 0.15

/* The base row over its seeds. */
typedef struct {
    int n;                          /* seeds                                     */
    double ppl, bleu;               /* means                                     */
    double lo_ppl, hi_ppl, lo_bleu, hi_bleu;
    double band_ppl, band_bleu;     /* farthest seed from the mean; 0 for one    */
} VBase;

/* One column (PPL or BLEU) of one row against the base. Directions: +1
 * better, -1 worse, 0 same. */
typedef struct {
    int paper, ours;
    int weak;        /* ours is a direction (not 0) within V_WEAK_X bands, or there is no band */
    int agree;       /* paper == ours                                                           */
} VDir;

/* What the rows add up to: only converged rows count. */
typedef struct {
    int rows, converged;       /* rows judged; of them converged         */
    int hold_ppl, hold_bleu;   /* converged rows where the paper's direction holds */
    int clear_ppl, clear_bleu; /* of those, ours a direction and not weak          */
} VTally;

/* The base from its n >= 1 seeds' dev PPL and BLEU. */
void vbase_init(VBase *b, const double *ppl, const double *bleu, int n);

/* 1 when the base has not learned enough to compare rows (dev BLEU under V_SHORT_BLEU). */
int vbase_too_short(const VBase *b);

/* 1 when a row's dev PPL is at most V_CONVERGED_X times the base's. */
int v_converged(double row_ppl, const VBase *b);

/* +1 better, -1 worse, 0 same: d is (row - base), lower is better when
 * lower_better; |d| <= band is the same. */
int v_direction(double d, double band, int lower_better);

/* One column judged: d_ours = row - base mean, band the base's band for the
 * column (0: one seed), d_paper = paper row - paper base. */
VDir v_judge(double d_ours, double band, int n_seeds, double d_paper, double paper_band, int lower_better);

/* Adds one row's PPL and BLEU verdicts to t. */
void vtally_add(VTally *t, int converged, VDir ppl, VDir bleu);

/* '+', '-', '=' */
char v_dir_char(int d);

#endif

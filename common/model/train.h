/* train.h - training the Transformer (Section 5), one batch at a time.
 *
 * A step takes a batch of token ids - src (B,Ts), tgt_in (B,Tt) = the target
 * shifted right, tgt_out (B,Tt) = what each position predicts - from
 * whoever has data: the copy task (text/copy_data.h, task/copy_task.h:
 * chapters 08, 09, 13) or a corpus (task/translate.h: chapters 11, 12).
 * A decoder-only model (Config.arch ARCH_DECODER) takes src NULL and Ts 0:
 * tgt_in (B,Tt) is a stretch of text, tgt_out the same shifted one left,
 * and eps_ls 0 makes the loss plain next-token cross-entropy.
 *
 * One training step (Sections 5.3 and 5.4):
 *   zero grads -> forward with dropout -> label-smoothed cross-entropy over
 *   non-padding targets -> backward -> loss and gradients finite? ->
 *   Adam with the warmup/decay learning rate, over the one flat parameter
 *   array (Params.mem / grads.mem, so one call updates every tensor).
 *
 * Everything random is seeded: the data RNG lives in the Trainer (the
 * caller draws its batches from it), the dropout RNG in the Model, and both
 * go into a checkpoint's TrainState (trainer_save, io/checkpoint.h), so a
 * resumed run lands on the same weights, bit for bit, as one that never
 * stopped.
 */
#ifndef TRAIN_H
#define TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include "model/model.h"
#include "core/rng.h"

/* ---- the loss floor -------------------------------------------------------- */

/* The lowest loss label smoothing allows: the entropy of the smoothed
 * target distribution, -(1-eps) log(1-eps) - eps log(eps/(V-2)) with a pad
 * class (V-1 without one). A model that predicts the smoothed
 * distribution exactly sits on this floor; it cannot go below. */
double smoothed_loss_floor(int V, float eps_ls, int pad_id);

/* ---- the trainer ---------------------------------------------------------- */
typedef struct {
    float eps_ls;     /* label smoothing epsilon (Sec. 5.4; paper 0.1)       */
    int warmup;       /* warmup_steps (Sec. 5.3; paper 4000)                  */
    float factor;     /* multiplies the Sec. 5.3 rate (paper: 1)              */
    float beta1, beta2, adam_eps;  /* Sec. 5.3: 0.9, 0.98, 1e-9              */
} TrainHyper;

/* The paper's values: eps_ls 0.1, warmup 4000, factor 1, Adam (0.9, 0.98, 1e-9). */
TrainHyper train_hyper_paper(void);

/* Data parallelism (common/dist/dist.h, chapter 13). A Trainer with dp == NULL
 * is one process. With dp set (dist_attach), every rank holds the same
 * weights and the same GLOBAL batch, and train_step_global trains this rank
 * on its part of it. Function pointers, so that train.c needs no MPI: only
 * the programs that call dist_attach link it.
 *
 * The same bits on 1, 2 or 4 ranks. A step's gradient is the sum of its
 * micro-batches' gradients (trainer_set_micro: G leaves, each a token-
 * balanced slice of the batch, each gradient scaled by its share n_l/N of
 * the tokens), added up as a fixed binary tree: ((g0+g1)+(g2+g3)) for G=4.
 * One process computes the leaves one after another; P ranks (P a power of
 * two dividing G) take G/P neighbouring leaves each, add their subtree, and
 * dist.c's reduce completes the tree pairwise, lower rank's subtree first.
 * Every float addition is then the same whatever P is, so the weights are
 * the same bits. (Summed in another order, one process's and P ranks'
 * gradients differ by float rounding, ~1e-7 relative; a ReLU input that
 * lies within that of zero then switches a unit on in one run and off in
 * the other, and the runs part: chapter 13's README.) */
typedef struct TrainDP TrainDP;
struct TrainDP {
    int rank, size;
    /* After this rank's leaves: grad (n floats, in be's memory) holds its
     * subtree's sum; mine[0..k) this rank's k values, (loss_l, n_l) for
     * each of its leaves. Leaves in grad the whole tree's sum (the step's
     * gradient) and in all[0..k*size) every rank's values in rank order,
     * on every rank. */
    void (*reduce)(TrainDP *dp, const Backend *be, float *grad, size_t n, const double *mine, int k,
                   double *all);
    /* After a step that updated the weights: the identical-weights check. */
    void (*after_step)(TrainDP *dp, Model *m, uint64_t step);
};

#define TRAIN_MAX_MICRO 64     /* micro-batches per step, a power of two   */
#define TRAIN_TREE_LEVELS 7    /* log2(TRAIN_MAX_MICRO) + 1                */

typedef struct {
    TrainDP *dp;           /* NULL: one process (see above); not owned        */
    Model *model;          /* trained in place, not owned                     */
    TrainHyper hp;
    size_t n;              /* parameters == model->params.n                   */
    float *adam_m, *adam_v;/* (n) Adam's first and second moments, owned      */
    uint64_t step;         /* optimizer steps taken so far                    */
    Rng data_rng;          /* the run's data stream: the caller draws its     */
                           /* batches from it (copy_train_step); the trainer  */
                           /* only seeds it and checkpoints keep it           */
    int B, T;              /* batch limits: B rows, T-1 target tokens (a copy */
                           /* batch's B sequences of T tokens)                */
    /* in the backend's memory (be, the model's): */
    const Backend *be;
    float *be_m, *be_v;      /* adam_m, adam_v as be sees them (CPU: the same)  */
    int max_rows;          /* target positions (B*Tt) of the largest batch:   */
                           /* B*(T-1), or trainer_init_cap's                   */
    int *be_tgt_out;      /* (max_rows) targets of the step                  */
    float *row_loss;       /* (max_rows) per-position losses (scratch)        */
    float *dlogits;        /* (max_rows, vocab) gradient of the loss          */
    /* micro-batches (trainer_set_micro), in be's memory too: */
    int micro;             /* G: leaves of the step's gradient tree (1: none) */
    float *tree[TRAIN_TREE_LEVELS]; /* (n) pending subtree sums, level b holds 2^b leaves */
    float *leaf;           /* (n) a scaled leaf gradient on its way in        */
} Trainer;

typedef struct {
    float loss;            /* mean label-smoothed cross-entropy per token     */
    float lr;              /* the rate this step used                         */
    float grad_norm;       /* L2 norm of all gradients (before the update)    */
    int n_tokens;          /* non-padding target tokens in the batch          */
} StepStats;

typedef enum {
    TRAIN_OK = 0,
    TRAIN_NONFINITE_LOSS = 1,   /* the loss was NaN or inf: nothing updated  */
    TRAIN_NONFINITE_GRAD = 2,   /* a gradient was NaN or inf: nothing updated */
    TRAIN_SMALL_BATCH = 3,      /* fewer rows than ranks: nothing updated     */
} TrainStatus;
const char *train_status_str(TrainStatus s);

/* Sets up training of m on batches of up to B sequences of T source and T-1
 * target tokens (a copy batch's shape), with Adam moments zeroed, step 0 and
 * the data RNG seeded from data_seed. m must have room for (B, T, T-1).
 * Returns 0, or 2 with a message in err (batch too big for the model, out
 * of memory); t is then safe to trainer_free. */
int trainer_init(Trainer *t, Model *m, const TrainHyper *hp, int B, int T,
                 uint64_t data_seed, char *err, size_t errlen);
/* trainer_init with the per-position buffers (the loss gradient dlogits
 * (max_rows, vocab), the losses, the targets) sized for max_rows target
 * positions: the largest B*Tt of the batches it will train on, for batches
 * cut under a token budget far less than B*(T-1) (the most rows of any
 * batch times the longest). B and T stay the limits of any one dimension
 * (a copy batch needs max_rows >= B*(T-1); more than that is cut to it).
 * A batch of more than max_rows positions stops at an assertion with its
 * shape printed. trainer_init is max_rows = B*(T-1). */
int trainer_init_cap(Trainer *t, Model *m, const TrainHyper *hp, int B, int T, int max_rows,
                     uint64_t data_seed, char *err, size_t errlen);
/* trainer_init_cap with Adam's moments adam_m, adam_v (m->params.n floats
 * each, from malloc, as the checkpoint loader hands them back) adopted
 * instead of new zeros: the trainer owns them from here on, on failure too
 * (so a resumed run never holds two copies of them). data_rng is seeded
 * with 0; trainer_resume (io/checkpoint.h) then sets it, the step and the
 * dropout stream from the file. */
int trainer_init_adopt(Trainer *t, Model *m, const TrainHyper *hp, int B, int T, int max_rows,
                       float *adam_m, float *adam_v, char *err, size_t errlen);
void trainer_free(Trainer *t);   /* no-op on a zeroed or freed Trainer */
/* Moves the trainer and its model to backend be (model_to, and Adam's
 * moments and the step's buffers with them). Returns 0, or 2 with a message
 * (out of device memory: everything is then back on the CPU). */
int trainer_to(Trainer *t, const Backend *be, char *err, size_t errlen);
/* be -> host: the model's params and grads and Adam's adam_m, adam_v get
 * the backend's latest values (nothing moves on the CPU) */
void trainer_pull(Trainer *t);

/* G micro-batches per step (a power of two, 1..TRAIN_MAX_MICRO; 1, the
 * default, is the whole batch in one pass): the step's gradient is the
 * fixed tree of G leaves above, the same bits on every number of ranks
 * that is a power of two dividing G. Costs G smaller passes instead of one
 * and log2(G)+2 gradient-sized buffers. Returns 0, or 2 with a message. */
int trainer_set_micro(Trainer *t, int G, char *err, size_t errlen);
/* The leaves a batch of B rows is cut into on P ranks: the largest power of
 * two <= min(G, B) when P (a power of two) divides it - then the same as
 * on one rank -, else P (one slice per rank, sums equal to rounding). */
int train_leaves(int G, int B, int P);

/* The gradient half of a step, what every step below runs (and tools/parity's
 * dumps, with training = 0): zero the gradients -> forward, with dropout
 * (Sec. 5.4) when training, none when 0 -> label-smoothed cross-entropy
 * (hp.eps_ls) over the non-padding targets -> backward. Sizes as for
 * train_step_batch. m->be_dw then holds d loss / d w of this batch; returns the
 * loss, the mean over *n_tokens tokens. When skip_bad and the loss is not
 * finite, backward is skipped (a step stops there, and nothing changes). */
float train_grad(Trainer *t, const int *src, const int *tgt_in, const int *tgt_out, int B, int Ts, int Tt,
                 int training, int skip_bad, int *n_tokens);

/* The optimizer half, after train_grad: one Adam pass over the flat
 * parameter array (Sec. 5.3: hp.beta1, hp.beta2, hp.adam_eps, the rate
 * lr_schedule(step + 1, d_model, hp.warmup, hp.factor)). A NaN or inf
 * gradient: TRAIN_NONFINITE_GRAD and nothing changed. Else t->step + 1, and
 * st (may be NULL) gets the rate and the gradients' L2 norm. */
TrainStatus train_adam(Trainer *t, StepStats *st);

/* One step on a given batch: src (B,Ts), tgt_in (B,Tt), tgt_out (B,Tt),
 * B <= t->B, Tt <= t->T - 1, B*Tt <= t->max_rows, and the batch within the
 * model's activations (model_check_sizes). On anything but TRAIN_OK the weights, Adam
 * state and step are exactly as before the call. st may be NULL. One
 * process, one pass: t->dp and the micro-batches play no part. */
TrainStatus train_step_batch(Trainer *t, const int *src, const int *tgt_in, const int *tgt_out,
                             int B, int Ts, int Tt, StepStats *st);

/* One step on a GLOBAL batch, the same on every rank. One process and one
 * micro-batch: the whole batch (train_step_batch). Otherwise the leaves of
 * train_leaves, each a slice (train_slice) with the dropout bits of the
 * same rows in one pass (Model.drop_row0): this rank's leaves, the tree
 * completed by t->dp->reduce, the loss sum_l n_l loss_l / N in leaf order,
 * then t->dp->after_step. What chapter 08 (through copy_train_step,
 * task/copy_task.h) and a translation trainer call instead of
 * train_step_batch. A batch with fewer rows than ranks: TRAIN_SMALL_BATCH
 * on every rank. */
TrainStatus train_step_global(Trainer *t, const int *src, const int *tgt_in, const int *tgt_out,
                              int B, int Ts, int Tt, StepStats *st);

/* The token-balanced split of a batch of B rows over P ranks: rank r gets
 * the contiguous rows [*row0, *row0 + *rows). With N non-padding targets in
 * tgt_out (B,Tt) (pad_id -1: none), rank k starts at the first row boundary
 * with at least k*N/P tokens before it (so a rank is off N/P by less than
 * one row's tokens), and every rank has at least one row (B >= P).
 * The same on every rank: each computes every rank's slice. */
void train_slice(const int *tgt_out, int B, int Tt, int pad_id, int P, int r, int *row0, int *rows);

/* 1 if every one of n floats is finite, else 0. */
int all_finite(const float *x, size_t n);

#endif

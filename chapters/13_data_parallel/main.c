/* 13_data_parallel - the paper's 8 GPUs: synchronous data parallelism over MPI (Sec. 5.2).
 *
 * "We trained our models on one machine with 8 NVIDIA P100 GPUs" (Sec. 5.2),
 * each step on a batch of ~25,000 target tokens (Sec. 5.1): each GPU took a
 * slice of the batch, and the gradients were summed before every step. Here
 * the ranks are processes started by mpirun, the sum goes over MPI as one
 * fixed binary tree over the batch's micro-batches (so 1, 2 and 4 ranks add
 * the same numbers in the same order: the same bits), and the library does
 * it for any trainer (common/dist/dist.h, train.h's TrainDP):
 *
 *   mpirun -np 2 build/13_data_parallel              two ranks
 *   mpirun -np 4 --oversubscribe build/13_data_parallel   four, on 2 cores
 *   build/13_data_parallel                           one rank (no mpirun)
 *
 * It shows each rank's slice of the global batch and its shapes, one step's
 * sum in detail, the loss curve next to one process training on the same
 * global batches (computed on rank 0, in-process: max |diff| per step), why
 * the order of the sum matters (section 4b: the first ReLU whose input
 * changes sign), that the weights stay identical on every rank, the time per step
 * split into compute and communication, and the arithmetic of the paper's
 * setup. --fail-at and --desync-at break a run on purpose.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "io/cli.h"
#include "dist/dist.h"
#include "core/fail.h"
#include "core/fileio.h"
#include "model/model.h"
#include "ref/optim.h"
#include "io/show.h"
#include "io/plot.h"
#include "model/train.h"
#include "io/checkpoint.h"
#include "task/copy_task.h"

static const char *PROG = "13_data_parallel";

typedef struct {
    int layers, d_model, d_ff, heads, batch, steps, time_steps, warmup, check_every, ckpt_every, micro;
    int fail_at, desync_at, ragged, quick;
    float dropout;
    uint64_t seed;
    const char *out;
    char ckpt[1024];
} Run;

/* everything rank 0 needs to compare against one process */
typedef struct {
    Model m;
    Trainer tr;
    int on;               /* rank 0 only                              */
    float grad_norm1;     /* |grad| of its first step                 */
    float *loss_dp, *loss_ref;   /* (steps) the curves              */
} Ref;

static void parse_flags(Run *r, int argc, char **argv) {
    *r = (Run){.layers = 2, .d_model = 32, .d_ff = 64, .heads = 4, .batch = 32, .steps = 50,
               .time_steps = 20, .warmup = 50, .check_every = 10, .micro = 4, .dropout = 0.1f, .seed = 42,
               .out = "out/13_data_parallel"};
    if (cli_given(argc, argv, "--quick")) r->steps = 6, r->time_steps = 4, r->batch = 8;
    CliOption opts[] = {
        {"--layers", CLI_INT, &r->layers, "N: layers in the encoder and in the decoder", 1, 16},
        {"--d-model", CLI_INT, &r->d_model, "d_model (paper 512)", 2, 1024},
        {"--d-ff", CLI_INT, &r->d_ff, "d_ff (paper 2048)", 1, 4096},
        {"--heads", CLI_INT, &r->heads, "h; must divide d_model", 1, 64},
        {"--batch", CLI_INT, &r->batch, "sequences in the GLOBAL batch, split over the ranks", 1, 4096},
        {"--micro-batches", CLI_INT, &r->micro, "G: slices whose gradients add up as a fixed tree (a power of two; 1, 2 or 4 ranks then give the same bits)", 1, TRAIN_MAX_MICRO},
        {"--steps", CLI_INT, &r->steps, "steps compared with one process", 1, 100000},
        {"--time-steps", CLI_INT, &r->time_steps, "further steps timed (compute vs communication)", 0, 100000},
        {"--warmup", CLI_INT, &r->warmup, "warmup_steps of Sec. 5.3", 1, 1000000},
        {"--dropout", CLI_FLOAT, &r->dropout, "P_drop (Sec. 5.4)", 0, 0.95},
        {"--seed", CLI_U64, &r->seed, "seed for weights, data and dropout", 0, 0},
        {"--check-every", CLI_INT, &r->check_every, "compare the weights' hash across ranks every K steps (0: never)", 0, 1000000},
        {"--checkpoint-every", CLI_INT, &r->ckpt_every, "rank 0 saves OUT/dp.ckpt every K steps (0: never)", 0, 1000000},
        {"--ragged", CLI_FLAG, &r->ragged, "targets of random lengths (padding after), as sentences are: slices of unequal rows", 0, 0},
        {"--fail-at", CLI_INT, &r->fail_at, "the last rank kills itself (SIGKILL) before this step, as a dead GPU would (0: never)", 0, 1000000},
        {"--desync-at", CLI_INT, &r->desync_at, "the last rank nudges one weight after this step, to watch the check stop the run (0: never)", 0, 1000000},
        {"--out", CLI_STRING, &r->out, "output folder (rank 0 writes it)", 0, 0},
        {"--quick", CLI_FLAG, &r->quick, "a short run: --steps 6 --time-steps 4 --batch 8 (make smoke)", 0, 0},
    };
    cli_parse(argc, argv, PROG, "synchronous data parallelism over MPI (Sec. 5.2: 8 GPUs, one batch)", opts, CLI_COUNT(opts));
    show_lecture_sections(6);   /* its banners: "1." .. "6." */
    if (r->d_model % r->heads) cli_fail(PROG, "--d-model (%d) must be divisible by --heads (%d)", r->d_model, r->heads);
    snprintf(r->ckpt, sizeof r->ckpt, "%s/dp.ckpt", r->out);
}

/* the same model and data stream on every rank (and in rank 0's reference) */
static int build(const Run *r, Model *m, Trainer *tr, char *err, size_t errlen) {
    Config c = config_base();
    c.N = r->layers, c.d_model = r->d_model, c.d_ff = r->d_ff, c.h = r->heads;
    c.d_k = c.d_v = r->d_model / r->heads;
    c.vocab = COPY_VOCAB, c.max_len = COPY_LEN, c.dropout = r->dropout, c.pad_id = COPY_PAD;
    memset(m, 0, sizeof *m);
    if (model_build(m, &c, r->batch, COPY_LEN, COPY_LEN - 1, r->seed, err, errlen)) return 2;
    TrainHyper hp = train_hyper_paper();
    hp.warmup = r->warmup;
    if (trainer_init(tr, m, &hp, r->batch, COPY_LEN, r->seed ^ 0xDA7A5EEDull, err, errlen) ||
        trainer_set_micro(tr, r->micro, err, errlen)) {
        trainer_free(tr);
        model_free(m);
        return 2;
    }
    return 0;
}

/* --ragged: row b keeps its first L_b targets, the rest become padding;
 * L_b in 1..Tt comes from the row's own tokens, so every rank and the
 * reference cut the same global batch the same way */
static void make_ragged(int *tgt_out, const int *src, int B, int T) {
    for (int b = 0; b < B; b++) {
        int L = 1 + (src[(size_t)b * T + 1] * 7 + src[(size_t)b * T + 2] * 3) % (T - 1);
        for (int j = L; j < T - 1; j++) tgt_out[(size_t)b * (T - 1) + j] = COPY_PAD;
    }
}

/* one step on the next global batch from the trainer's data stream
 * (copy_train_step, or its ragged variant: what a translation trainer does
 * with train_step_global) */
static TrainStatus next_step(Trainer *t, int ragged, StepStats *st) {
    CopyBatch cb;
    if (copy_batch_alloc(&cb, t->B, t->T)) dist_abort(1, "out of memory");
    TrainStatus s;
    if (!ragged) s = copy_train_step(t, &cb, st);
    else {
        copy_batch_draw(&cb, COPY_VOCAB, &t->data_rng);
        make_ragged(cb.tgt_out, cb.src, t->B, t->T);
        s = train_step_global(t, cb.src, cb.tgt_in, cb.tgt_out, t->B, t->T, t->T - 1, st);
    }
    copy_batch_free(&cb);
    return s;
}

static void shape(char *buf, size_t len, int rows, int seq) { snprintf(buf, len, "[batch=%d, seq=%d]", rows, seq); }

/* ---- 1. who is here ------------------------------------------------------------ */
static void section_ranks(const Run *r) {
    show_section("1. The ranks (Sec. 5.2: one machine, 8 GPUs)");
    int P = dist_size();
    const char *mpirun = dist_mpirun();   /* with --allow-run-as-root for root */
    if (!dist_built_with_mpi())
        printf("built without MPI: one rank. To run data parallel, install Open MPI and rebuild:\n"
               "    apt-get install -y openmpi-bin libopenmpi-dev && make\n"
               "    %s -np 2 build/%s\n", mpirun, PROG);
    else if (P == 1)
        printf("one rank (no mpirun). Try: %s -np 2 build/%s\n  (-np 4 on fewer cores: add --oversubscribe)\n",
               mpirun, PROG);
    else printf("%d ranks (%s), each a process with its own copy of the model\n", P, dist_library());
    printf("every rank builds the same model from --seed %llu and draws the same GLOBAL batch of %d sequences\n"
           "from the one data stream; each trains on its slice, and the gradients are summed before every step\n",
           (unsigned long long)r->seed, r->batch);
}

/* ---- 2. the slices: every rank reports the one it holds -------------------------- */
static void section_slices(const Trainer *tr, int ragged) {
    show_section("2. The global batch and each rank's slice (token-balanced)");
    int B = tr->B, T = tr->T, Tt = T - 1, P = dist_size();
    Rng peek = tr->data_rng;   /* a copy: looking does not change the run */
    int *src = malloc(sizeof(int) * B * T), *tin = malloc(sizeof(int) * B * Tt), *tout = malloc(sizeof(int) * B * Tt);
    uint64_t mine[3], *all = malloc(sizeof(uint64_t) * 3 * P);
    if (!src || !tin || !tout || !all) dist_abort(1, "out of memory");
    copy_batch(src, tin, tout, B, T, COPY_VOCAB, &peek);
    if (ragged) make_ragged(tout, src, B, T);
    long N = 0;
    for (int i = 0; i < B * Tt; i++) N += tout[i] != COPY_PAD;
    /* this rank's micro-batches (leaves) k*r .. k*r+k-1: neighbouring rows */
    int L = train_leaves(tr->micro, B, P), k = L / P, row0, rows, last0, lastn;
    train_slice(tout, B, Tt, COPY_PAD, L, dist_rank() * k, &row0, &rows);
    train_slice(tout, B, Tt, COPY_PAD, L, dist_rank() * k + k - 1, &last0, &lastn);
    rows = last0 + lastn - row0;
    long tok = 0;
    for (int i = row0 * Tt; i < (row0 + rows) * Tt; i++) tok += tout[i] != COPY_PAD;
    mine[0] = row0, mine[1] = rows, mine[2] = tok;
    dist_gather_u64(mine, 3, all);
    char s1[48], s2[48];
    shape(s1, sizeof s1, B, T), shape(s2, sizeof s2, B, Tt);
    printf("global batch: src %s, tgt_in and tgt_out %s,\n  %ld target tokens (not padding)\n", s1, s2, N);
    for (int k = 0; k < P; k++) {
        int r0 = (int)all[3 * k], n = (int)all[3 * k + 1];
        shape(s1, sizeof s1, n, T), shape(s2, sizeof s2, n, Tt);
        printf("  rank %d: rows %3d..%3d src %s tgt_out %s %4d tokens (<s>", k, r0, r0 + n - 1, s1, s2,
               (int)all[3 * k + 2]);
        for (int j = 1; j < 4; j++) printf(" %d", src[(size_t)r0 * T + j]);
        printf(" ...)\n");
    }
    printf("the batch is cut into %d micro-batches (--micro-batches %d), each rank takes %d neighbouring one%s;\n"
           "each one's gradient is computed alone and the %d add up as one fixed binary tree (section 3)\n", L,
           tr->micro, k, k > 1 ? "s" : "", L);
    if (L != tr->micro)
        printf("(%d, not %d: %s)\n", L, tr->micro, L == train_leaves(tr->micro, B, 1) ? "a batch has fewer rows than micro-batches"
                                                 : "one slice per rank: the ranks are not a power of two dividing them");
    if (ragged) printf("--ragged: rows hold 1..%d targets, so the boundaries move until each slice has ~N/%d = %.1f tokens\n", Tt, L, (double)N / L);
    else printf("the copy task's rows all hold %d tokens, so token-balanced is rows-balanced here (--ragged: rows of\n"
                "different lengths, as sentences are; then the boundaries move until each rank has ~N/P tokens)\n", Tt);
    free(src), free(tin), free(tout), free(all);
}

/* one step of the data-parallel run and of rank 0's reference */
static TrainStatus step_both(Trainer *tr, Ref *ref, int ragged, int i, StepStats *st) {
    TrainStatus s = next_step(tr, ragged, st);
    if (ref->on) {
        StepStats rs;
        if (next_step(&ref->tr, ragged, &rs) != TRAIN_OK) rs.loss = NAN;
        ref->loss_dp[i] = st->loss, ref->loss_ref[i] = rs.loss;
        if (i == 0) ref->grad_norm1 = rs.grad_norm;
    }
    return s;
}

/* max |a - b| over n floats */
static double max_diff(const float *a, const float *b, size_t n, double *max_b) {
    double d = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (x > d || isnan(x)) d = x;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    if (max_b) *max_b = mb;
    return d;
}

/* ---- 3. step 1 in detail: what each rank computed, and the tree sum ------------- */
static void section_allreduce(const Run *r, Trainer *tr, DistTrainer *dt, Ref *ref) {
    show_section("3. One step: each rank's gradient, then their sum (a fixed tree over MPI)");
    StepStats st;
    if (step_both(tr, ref, r->ragged, 0, &st) != TRAIN_OK) dist_exit(1, "step 1: the loss or a gradient is not finite");
    int P = dist_size();
    /* what this rank had before the sum (one rank: the whole batch) */
    double mine_d[3] = {tr->dp ? dt->n_local : st.n_tokens, tr->dp ? dt->loss_local : st.loss,
                        tr->dp ? sqrt(dt->local_sq) : st.grad_norm};
    uint64_t mine[3], *all = malloc(sizeof(uint64_t) * 3 * P);
    if (!all) dist_abort(1, "out of memory");
    memcpy(mine, mine_d, sizeof mine);
    dist_gather_u64(mine, 3, all);
    printf("rank r: its tokens n_r, loss_r = mean over them, grad_r = d loss_r / d w (%zu floats)\n", tr->n);
    double check = 0;
    for (int k = 0; k < P; k++) {
        double v[3];
        memcpy(v, all + 3 * k, sizeof v);
        printf("  rank %d: n_r %4.0f  share n_r/N %.4f  loss_r %.6f  |grad_r| %.5f\n", k, v[0], v[0] / st.n_tokens, v[1], v[2]);
        check += v[0] / st.n_tokens * v[1];
    }
    free(all);
    printf("sum: every rank gets sum_r (n_r/N) grad_r = (1/N) sum over all N = %d tokens: the mean\n"
           "gradient of the whole batch, %zu floats = %.1f KiB;\nloss = sum_r (n_r/N) loss_r = %.6f\n",
           st.n_tokens, tr->n, tr->n * 4.0 / 1024, check);
    int L = train_leaves(tr->micro, tr->B, P), rounds = 0;
    while (1 << rounds < P) rounds++;
    printf("the order of that sum: each micro-batch's (n_l/N) grad_l added as one binary tree over the %d of them\n"
           "(((g0+g1)+(g2+g3)) for 4); each rank adds its own subtree, then\n", L);
    if (P == 1) printf("  there is nothing to send (one rank adds the whole tree)\n");
    else if (P & (P - 1)) printf("  MPI_Allreduce (%d is not a power of two: MPI's order, equal to rounding only)\n", P);
    else
        printf("  %d round%s of MPI_Sendrecv: rank r swaps its sum with rank r XOR 2^j and adds lower rank's +\n"
               "  higher's: the tree's pairing, so the same additions in the same order as one process\n"
               "  (dist_sum_tree_f32; %.1f KiB each way per round)\n", rounds, rounds > 1 ? "s" : "", tr->n * 4.0 / 1024);
    if (ref->on) {
        double mb, d = max_diff(tr->model->be_dw.mem, ref->m.be_dw.mem, tr->n, &mb);
        printf("one process on the same %d sequences (rank 0, in-process): loss %.6f, |grad| %.5f\n",
               tr->B, ref->loss_ref[0], ref->grad_norm1);
        int same = memcmp(tr->model->be_dw.mem, ref->m.be_dw.mem, tr->n * sizeof(float)) == 0;
        printf("summed gradient vs one process's: max |diff| %.3g (largest %.3g: %s)\n", d, mb,
               same ? "the same bits" : d <= 1e-5 * mb ? "equal to rounding only" : "NOT equal");
    }
}

/* the three weight tensors furthest from one process's, by max |diff| */
static void worst_tensors(const Model *a, const Model *b) {
    int best[3] = {-1, -1, -1};
    double bd[3] = {-1, -1, -1};
    for (int k = 0; k < a->params.n_tensors; k++) {
        const NamedTensor *t = &a->params.tensors[k];
        size_t n = named_tensor_numel(t), off = (size_t)(t->data - a->params.mem);
        double d = max_diff(t->data, b->params.mem + off, n, NULL);
        for (int j = 0; j < 3; j++)
            if (d > bd[j]) {
                for (int q = 2; q > j; q--) bd[q] = bd[q - 1], best[q] = best[q - 1];
                bd[j] = d, best[j] = k;
                break;
            }
    }
    printf("furthest apart:");
    for (int j = 0; j < 3 && best[j] >= 0; j++) printf("  %s %.2g", a->params.tensors[best[j]].name, bd[j]);
    printf("\n");
}

/* Rank 0: the cross-attention (last layer, mean of the heads, Sec. 3.2.3) of
 * the data-parallel model and of one process's, on one held-out sequence:
 * the same weights must attend the same way. */
static void show_cross_attention(Model *dp, Model *one, uint64_t step, const char *out) {
    enum { T = COPY_LEN, Tt = COPY_LEN - 1 };
    int src[T], tin[Tt], tout[Tt];
    Rng rng;
    rng_seed(&rng, 2017);
    copy_batch(src, tin, tout, 1, T, COPY_VOCAB, &rng);
    int h = dp->cfg.h, L = dp->cfg.N - 1;
    float *w = malloc(sizeof(float) * 2 * h * Tt * T), avg[2][Tt * T];
    if (!w) dist_abort(1, "out of memory");
    Model *ms[2] = {dp, one};
    for (int k = 0; k < 2; k++) {
        model_forward(ms[k], src, tin, 1, T, Tt, 0);
        model_read(ms[k], w + (size_t)k * h * Tt * T, model_attention(ms[k], ATTN_DEC_CROSS, L), sizeof(float) * h * Tt * T);
        for (int i = 0; i < Tt * T; i++) {
            float s = 0;
            for (int q = 0; q < h; q++) s += w[(size_t)k * h * Tt * T + (size_t)q * Tt * T + i];
            avg[k][i] = s / h;
        }
    }
    Tensor wt = tensor_wrap(w, "cross_weights", "batch heads query key", 1, h, Tt, T);
    show_shape(&wt, "(last decoder layer; decoder x encoder)");
    char title[128];
    snprintf(title, sizeof title, "cross-attention after step %llu, %d rank%s (mean of %d heads)", (unsigned long long)step,
             dist_size(), dist_size() > 1 ? "s" : "", h);
    show_heatmap(title, avg[0], Tt, T, NULL, NULL);
    plot_heatmap(out, "cross_attention", title, avg[0], Tt, T, NULL, NULL, "source position", "decoder position");
    printf("the same map from one process's model: max |diff| %.3g\n", max_diff(avg[0], avg[1], Tt * T, NULL));
    free(w);
}

/* ---- 4. the loss curve vs one process; weights identical; checkpoints, faults ---- */
static int section_curve(const Run *r, Trainer *tr, DistTrainer *dt, Ref *ref) {
    show_section("4. The loss curve: P ranks vs one process on the same global batches");
    int P = dist_size(), last = P - 1, rc = 0, every = r->steps / 10 > 1 ? r->steps / 10 : 1;
    double worst = 0;
    char err[512];
    if (ref->on) printf("  step   loss (%d rank%s)   loss (1 process)   |diff|     relative\n", P, P > 1 ? "s" : "");
    for (int i = 1; i <= r->steps && !rc; i++) {
        StepStats st;
        if (i > 1) {
            if (r->fail_at == i && dist_rank() == last && P > 1) {
                fprintf(stderr, "%s: rank %d: --fail-at %d: killing myself (SIGKILL) before step %d\n", PROG, last, i, i);
                raise(SIGKILL);
            }
            if (step_both(tr, ref, r->ragged, i - 1, &st) != TRAIN_OK) dist_exit(1, "step %d: the loss or a gradient is not finite", i);
        }
        if (ref->on) {
            double d = fabs((double)ref->loss_dp[i - 1] - ref->loss_ref[i - 1]);
            if (d > worst || isnan(d)) worst = d;
            if (i == 1 || i % every == 0 || i == r->steps)
                printf("  %4d   %.9f      %.9f        %.2e   %.2e\n", i, ref->loss_dp[i - 1], ref->loss_ref[i - 1], d,
                       d / fabs(ref->loss_ref[i - 1]));
        }
        if (r->desync_at == i && dist_rank() == last && P > 1) {
            fprintf(stderr, "%s: rank %d: --desync-at %d: adding 1e-3 to one weight\n", PROG, last, i);
            model_pull(tr->model), tr->model->params.mem[0] += 1e-3f, model_push(tr->model);
        }
        if (r->ckpt_every > 0 && i % r->ckpt_every == 0) {
            int save = dist_rank() == 0 ? trainer_save(tr, r->ckpt, err, sizeof err) : 0;
            if (save) fprintf(stderr, "%s: %s\n", PROG, err);
            else if (dist_rank() == 0) printf("  checkpoint: %s (step %d, rank 0 alone writes it)\n", r->ckpt, i);
            rc = dist_max_int(save);   /* all ranks stop together, or none */
        }
    }
    if (rc) return rc;
    uint64_t h = dist_check_weights(tr->model, tr->step), *all = malloc(sizeof(uint64_t) * P);
    if (!all) dist_abort(1, "out of memory");
    dist_gather_u64(&h, 1, all);
    printf("weights after step %llu (FNV-1a of every float, gathered; checked every %d steps in the run):\n",
           (unsigned long long)tr->step, r->check_every);
    for (int k = 0; k < P; k++) printf("  rank %d: %016llx%s\n", k, (unsigned long long)all[k], all[k] == all[0] ? "  same" : "  DIFFERENT");
    free(all);
    if (ref->on) {
        double mb, dw = max_diff(tr->model->params.mem, ref->m.params.mem, tr->n, &mb);
        printf("max |diff| over the %d steps' losses: %.3g (relative %.3g);\nweights vs one process: max |diff| %.3g\n",
               r->steps, worst, worst / fabs(ref->loss_ref[r->steps - 1]), dw);
        worst_tensors(tr->model, &ref->m);
        show_cross_attention(tr->model, &ref->m, tr->step, r->out);
        double rel = worst / fabs(ref->loss_ref[r->steps - 1]);
        int k = 0;   /* the last step up to which every step agreed to 1e-6 relative */
        while (k < r->steps && fabs((double)ref->loss_dp[k] - ref->loss_ref[k]) <= 1e-6 * fabs(ref->loss_ref[k])) k++;
        if (dw == 0 && memcmp(tr->model->params.mem, ref->m.params.mem, tr->n * sizeof(float)) == 0)
            printf("the same bits at every step: every float addition the same, in the same order (section 3's tree)\n");
        else if (k == r->steps)
            printf("every step agrees to 1e-6 relative (worst %.1e; float32's eps is 6e-8), but not to the bit: the sums\n"
                   "were added in another order (section 3)\n", rel);
        else
            printf("the losses agree to 1e-6 relative up to step %d, then drift apart (worst %.1e relative): the sums\n"
                   "were added in another order (section 3); section 4b shows how that grows\n", k, rel);
    }
    return 0;
}

/* ---- 4b. why the order of the sum matters: the tree vs one pass ------------------ */

/* The first FFN unit (Eq. 2: max(0, x W1 + b1)) whose input has another
 * sign in model a than in model b on this batch, dropout bits alike; 0 if
 * none. Inputs: the LayerNorm'd sub-layer output before each FFN (post-LN). */
typedef struct { int found, decoder, layer, unit, row; double in_a, in_b; } Flip;
static Flip first_relu_flip(Model *a, Model *b, const int *src, const int *tin, int B) {
    enum { T = COPY_LEN, Tt = COPY_LEN - 1 };
    Flip f = {0};
    Model *ms[2] = {a, b};
    int D = a->cfg.d_model, F = a->cfg.d_ff;
    float *x[2][2][16] = {{{0}}};   /* [model][decoder][layer] FFN inputs, (B*T, D) */
    int N = a->cfg.N < 16 ? a->cfg.N : 16;
    for (int k = 0; k < 2; k++) {
        Rng keep = ms[k]->dropout_rng;
        model_forward(ms[k], src, tin, B, T, Tt, 1);
        model_set_dropout(ms[k], keep, 0);   /* looking does not move the stream */
        for (int dec = 0; dec < 2; dec++)
            for (int l = 0; l < N; l++) {
                size_t n = (size_t)B * (dec ? Tt : T) * D;
                if (!(x[k][dec][l] = malloc(n * sizeof(float)))) dist_abort(1, "out of memory");
                model_read(ms[k], x[k][dec][l], model_sublayer(ms[k], dec, l, dec ? SUB_CROSS_ATTN : SUB_SELF_ATTN, SUB_Y),
                           n * sizeof(float));
            }
    }
    for (int dec = 0; dec < 2 && !f.found; dec++)
        for (int l = 0; l < N && !f.found; l++) {
            const float *W[2], *bias[2];
            for (int k = 0; k < 2; k++) {
                W[k] = dec ? ms[k]->params.dec[l].ffn_w1 : ms[k]->params.enc[l].ffn_w1;
                bias[k] = dec ? ms[k]->params.dec[l].ffn_b1 : ms[k]->params.enc[l].ffn_b1;
            }
            for (int row = 0; row < B * (dec ? Tt : T) && !f.found; row++)
                for (int j = 0; j < F && !f.found; j++) {
                    double in[2];
                    for (int k = 0; k < 2; k++) {
                        in[k] = bias[k][j];
                        for (int i = 0; i < D; i++) in[k] += (double)x[k][dec][l][(size_t)row * D + i] * W[k][(size_t)i * F + j];
                    }
                    if ((in[0] > 0) != (in[1] > 0)) f = (Flip){1, dec, l, j, row, in[0], in[1]};
                }
        }
    for (int k = 0; k < 2; k++)
        for (int dec = 0; dec < 2; dec++)
            for (int l = 0; l < N; l++) free(x[k][dec][l]);
    return f;
}

/* max |a - b| / max |b| over the weights */
static double weights_rel(const Model *a, const Model *b) {
    double mb, d = max_diff(a->params.mem, b->params.mem, a->params.n, &mb);
    return mb > 0 ? d / mb : d;
}

/* Rank 0: the micro-batch tree (what every P ranks compute) against one
 * process adding the whole batch in one pass (--micro-batches 1): the same
 * sums in another order. Where do they part, and why? */
static void section_order(const Run *r) {
    show_section("4b. Why the order of the sum matters: the tree vs one pass");
    if (r->micro == 1) { printf("skipped (--micro-batches 1: the run above is the one pass)\n"); return; }
    Run one = *r;
    one.micro = 1;
    Model a, b;
    Trainer ta, tb;
    char err[512];
    if (build(r, &a, &ta, err, sizeof err) || build(&one, &b, &tb, err, sizeof err)) dist_abort(1, "%s", err);
    CopyBatch cb;
    if (copy_batch_alloc(&cb, ta.B, ta.T)) dist_abort(1, "out of memory");
    int part = 0, flips = 0;
    double last_rel = 0;
    double rel1 = 0, before = 0, after = 0, grad_at = 0;
    Flip f = {0};
    for (int i = 1; i <= r->steps; i++) {
        if (!f.found) {   /* this step's batch, peeked, through both models */
            Rng peek = ta.data_rng;
            copy_batch_draw(&cb, COPY_VOCAB, &peek);
            f = first_relu_flip(&a, &b, cb.src, cb.tgt_in, cb.B);
            if (f.found) flips = i, before = weights_rel(&a, &b);
        }
        StepStats sa, sb;
        if (next_step(&ta, r->ragged, &sa) != TRAIN_OK || next_step(&tb, r->ragged, &sb) != TRAIN_OK)
            dist_abort(1, "section 4b: a step was not finite");
        if (i == 1) {
            double mb, d = max_diff(a.be_dw.mem, b.be_dw.mem, ta.n, &mb);
            rel1 = mb > 0 ? d / mb : d;
        }
        if (i == flips) {
            double mb, d = max_diff(a.be_dw.mem, b.be_dw.mem, ta.n, &mb);
            grad_at = mb > 0 ? d / mb : d;
            after = weights_rel(&a, &b);
        }
        if (!part && fabs((double)sa.loss - sb.loss) > 1e-6 * fabs(sb.loss)) part = i;
        last_rel = fabs((double)sa.loss - sb.loss) / fabs(sb.loss);
    }
    printf("step 1's gradients, tree vs one pass: max |diff| / max |grad| = %.2g (float rounding: the same\n"
           "additions in another order)\n", rel1);
    if (part) printf("the losses part by more than 1e-6 relative at step %d; after step %d they are %.2g apart\n", part,
                     r->steps, last_rel);
    else printf("the losses stay within 1e-6 relative for all %d steps\n", r->steps);
    if (f.found) {
        /* one figure or name per line where it can be long: at most 100 columns for any values */
        printf("first ReLU that is on in one model and off in the other (Eq. 2's max(0, x W1 + b1)):\n"
               "  before step %d, %s layer %d FFN unit %d, position %d of the batch:\n"
               "  input %+.3g (tree) vs %+.3g (one pass)\n", flips,
               f.decoder ? "decoder" : "encoder", f.layer, f.unit, f.row, f.in_a, f.in_b);
        printf("  that step's gradients differ by %.2g relative (step 1: %.2g): a unit that fires\n"
               "  for a token in one run and not in the other changes the gradient by that token's share,\n"
               "  not by rounding. The weights were %.2g apart (relative) before that step, %.2g after it\n",
               grad_at, rel1, before, after);
    } else
        printf("no ReLU input changed sign in %d steps\n", r->steps);
    if (part && f.found && flips <= part)
        printf("so P ranks stay equal to one process only if they add in the same order: hence the tree\n");
    copy_batch_free(&cb), trainer_free(&ta), trainer_free(&tb), model_free(&a), model_free(&b);
}

/* ---- 5. time per step: compute vs communication ---------------------------------- */
static void section_timing(const Run *r, Trainer *tr, DistTrainer *dt) {
    show_section("5. Time per step: compute vs communication (each rank)");
    if (r->time_steps == 0) { printf("skipped (--time-steps 0)\n"); return; }
    int P = dist_size();
    dist_barrier();
    double c0 = dt->comm_s, t0 = clock_wall_s();
    StepStats st;
    for (int i = 0; i < r->time_steps; i++)
        if (next_step(tr, r->ragged, &st) != TRAIN_OK) dist_exit(1, "a timed step: the loss or a gradient is not finite");
    double wall = clock_wall_s() - t0, comm = dt->comm_s - c0;
    double mine_d[2] = {wall, comm};
    uint64_t mine[2], *all = malloc(sizeof(uint64_t) * 2 * P);
    if (!all) dist_abort(1, "out of memory");
    memcpy(mine, mine_d, sizeof mine);
    dist_gather_u64(mine, 2, all);
    int n = r->time_steps;
    for (int k = 0; k < P; k++) {
        double v[2];
        memcpy(v, all + 2 * k, sizeof v);
        printf("  rank %d: %7.2f ms/step = compute %7.2f + communication %6.2f (%4.1f%%)\n", k, 1e3 * v[0] / n,
               1e3 * (v[0] - v[1]) / n, 1e3 * v[1] / n, 100 * v[1] / v[0]);
    }
    free(all);
    int rounds = 0;
    while (1 << rounds < P) rounds++;
    printf("%d steps: %.0f target tokens/s over all ranks;\ncommunication = the gather of each slice's (loss, tokens) and "
           "%d exchange%s of %.1f KiB each step%s\n", n, (double)tr->B * (tr->T - 1) * n / wall, rounds,
           rounds == 1 ? "" : "s", tr->n * 4.0 / 1024,
           P > 1 ? ",\nincluding each rank's wait there for the slowest one" : "");
}

/* ---- 6. the paper's setup ----------------------------------------------------------- */
static void section_paper(const Trainer *tr) {
    show_section("6. The paper's setup, in numbers (Sec. 5.1, 5.2; Table 3)");
    Config c = config_base();
    size_t n = model_param_count(&c);
    double step_s = 12.0 * 3600 / 100000, bytes = 4.0 * n, ring = 2.0 * 7 / 8 * bytes;
    printf("batch ~25,000 target tokens over 8 GPUs = ~%.0f tokens per GPU per step\n", 25000 / 8.0);
    printf("base: 100,000 steps in 12 hours = %.3f s per step, %.0f target tokens/s for the machine\n", step_s, 25000 / step_s);
    printf("base model (N=6, d_model 512, vocab %d): %zu parameters = %.0f MB of gradients a step;\n"
           "a ring allreduce sends 2 (P-1)/P of it from each GPU: %.0f MB per step, %.2f GB/s per GPU to keep up\n",
           c.vocab, n, bytes / 1e6, ring / 1e6, ring / step_s / 1e9);
    int P = dist_size();
    printf("this run: %d rank%s x %d tokens = %d tokens per step, %zu parameters = %.1f KiB of gradients\n", P,
           P > 1 ? "s" : "", tr->B * (tr->T - 1) / P, tr->B * (tr->T - 1), tr->n, tr->n * 4.0 / 1024);
}

/* rank 0: the two curves, 9 digits, for the tests and the plot */
static int write_curves(const Run *r, const Ref *ref) {
    FioWriter w;
    char path[1100], err[512];
    snprintf(path, sizeof path, "%s/loss.csv", r->out);
    if (fio_create(&w, path, err, sizeof err)) return fprintf(stderr, "%s: %s\n", PROG, err), 1;
    fprintf(w.f, "step,loss_ranks_%d,loss_one_process\n", dist_size());
    for (int i = 0; i < r->steps; i++) fprintf(w.f, "%d,%.9g,%.9g\n", i + 1, ref->loss_dp[i], ref->loss_ref[i]);
    if (fio_commit(&w, err, sizeof err)) return fprintf(stderr, "%s: %s\n", PROG, err), 1;
    float *x = malloc(sizeof(float) * r->steps);
    if (!x) return 1;
    for (int i = 0; i < r->steps; i++) x[i] = i + 1;
    const float *ser[2] = {ref->loss_dp, ref->loss_ref};
    char name[32];
    snprintf(name, sizeof name, "%d rank%s", dist_size(), dist_size() > 1 ? "s" : "");
    const char *names[2] = {name, "one process, same global batch"};
    plot_lines(r->out, "loss", "data parallel vs one process (Sec. 5.2)", "step", "loss", x, r->steps, ser, names, 2, 0, 0);
    free(x);
    printf("wrote %s (and loss.png)\n", path);
    return 0;
}

int main(int argc, char **argv) {
    dist_init(&argc, &argv, PROG);
    Run r;
    parse_flags(&r, argc, argv);
    dist_quiet_others();   /* rank 0 alone prints and writes */
    char err[512];
    Model m;
    Trainer tr;
    DistTrainer dt;
    Ref ref = {.on = dist_rank() == 0};
    if (build(&r, &m, &tr, err, sizeof err)) dist_exit(2, "%s", err);
    if (dist_attach(&dt, &tr, r.check_every, err, sizeof err)) dist_exit(2, "%s", err);
    if (ref.on && (build(&r, &ref.m, &ref.tr, err, sizeof err) || !(ref.loss_dp = calloc(r.steps, sizeof(float))) ||
                   !(ref.loss_ref = calloc(r.steps, sizeof(float)))))
        dist_abort(1, "the one-process reference: %s", err);
    if (dist_max_int(ref.on && plot_mkdir(r.out))) dist_exit(1, "cannot create --out %s", r.out);

    section_ranks(&r);
    section_slices(&tr, r.ragged);
    section_allreduce(&r, &tr, &dt, &ref);
    int rc = section_curve(&r, &tr, &dt, &ref);
    if (!rc) {
        if (ref.on) section_order(&r);
        section_timing(&r, &tr, &dt);
        section_paper(&tr);
        if (ref.on) rc = write_curves(&r, &ref);
    }
    rc = dist_max_int(rc);
    dist_detach(&dt);
    if (ref.on) trainer_free(&ref.tr), model_free(&ref.m), free(ref.loss_dp), free(ref.loss_ref);
    trainer_free(&tr);
    model_free(&m);
    dist_finalize();
    return rc;
}

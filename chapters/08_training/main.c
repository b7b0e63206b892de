/* 08_training - teach the Transformer to copy: Section 5 of the paper.
 *
 * The paper trains on WMT translation for 12 hours on 8 GPUs. The copy task
 * of The Annotated Transformer keeps every ingredient of Section 5 and runs
 * in under a minute on a laptop: given [<s>, x1..x9] with x in 2..10, output the
 * same sequence. Everything the paper uses is here:
 *
 *   Sec. 5.3  Adam (beta1 0.9, beta2 0.98, eps 1e-9) with
 *             lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
 *   Sec. 5.4  dropout P_drop on every sub-layer output and on the embedding
 *             sums, label smoothing eps_ls = 0.1
 *   Sec. 6.1  decoding (greedy here: beam size 1)
 *
 * It prints the data and its shapes, the smoothed targets, the schedule,
 * attention before training, a progress line while training, then decoded
 * examples, exact-match accuracy on 1000 held-out sequences and attention
 * after training: in the terminal one layer and one head (or their mean),
 * chosen by --attn-layer / --attn-head, with a per-head count of the
 * cross-attention heads that learned to point at the token to copy; every
 * head of every layer as PNGs in --out; then the encoder's attention as the
 * paper draws its Figures 3-5, lines whose opacity is the weight
 * (lines_fig{3,4,5}.png, attention_lines.html). Checkpoints (with optimizer
 * state) can be resumed and land on the same weights, bit for bit.
 *
 * --device cuda picks the CUDA backend once (trainer_to: the model, Adam's
 * m, v and the step's buffers move to the GPU); every call after that is
 * the same as on the CPU: copy_train_step, copy_greedy (decode.h's
 * decode_greedy), copy_exact_match run common/model/ with the GPU's kernels
 * behind the backend table. The dropout masks come from the same counter-based hash
 * on both devices (common/core/dropout_mask.h), so a GPU run follows the CPU's
 * loss curve to float rounding, dropout on. trainer_save brings the
 * weights and Adam's moments back to the host for the checkpoint.
 *
 *   build/08_training                       small model, solves the task in ~20-25 s
 *   build/08_training --layers 2 --d-model 512 --d-ff 2048 --heads 8 \
 *                     --batch 80 --warmup 400     The Annotated Transformer's setup
 *   build/08_training --steps 300 --checkpoint-every 100
 *   build/08_training --resume out/08_training/copy.ckpt --steps 1200
 *   build/08_training --attn-layer 1 --attn-head 2    the terminal draws layer 1, head 2
 *   build/08_training --device cuda          the same on the GPU
 *   mpirun -np 2 build/08_training --micro-batches 2   data parallel (chapter
 *                     13): with the same --micro-batches, the same bits as one
 *                     process (without it 2 ranks sum 2 slices a step where one
 *                     process sums 1, and the run says so); rank 0 prints and saves
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/clock.h"
#include "io/cli.h"
#include "core/fileio.h"
#include "model/device.h"
#include "dist/dist.h"
#include "model/backend.h"
#include "io/checkpoint.h"
#include "parity/grad_dump.h"
#include "io/lineview.h"
#include "model/model.h"
#include "ref/nn.h"
#include "ref/optim.h"
#include "io/show.h"
#include "io/plot.h"
#include "core/tensor.h"
#include "model/train.h"
#include "task/copy_task.h"
#include "attention_view.h"

static const char *PROG = "08_training";

static void print_ids(const char *name, const int *ids, int n) {
    printf("%-8s", name);
    for (int i = 0; i < n; i++) {
        char b[8];
        attn_token_label(b, sizeof b, ids[i]);
        printf(" %3s", b);
    }
}

/* Parses --decode "3 5 7 ..." into T-1 ids after the start symbol.
 * Every problem with it is the user's to fix: exit 2 naming the flag. */
static void parse_decode(int *src, const char *s, int T, const Config *c) {
    int n = 0;
    const char *p = s;
    src[n++] = COPY_START;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) cli_fail(PROG, "--decode: '%s' is not a list of token ids (e.g. --decode \"3 5 7 2 9 4 10 6 8\")", s);
        if (n >= T) cli_fail(PROG, "--decode: give exactly %d token ids (the sequence after <s>), got more", T - 1);
        src[n++] = v < -1000000 ? -1000000 : v > 1000000 ? 1000000 : (int)v;
        p = end;
    }
    if (n != T) cli_fail(PROG, "--decode: give exactly %d token ids (the sequence after <s>), got %d", T - 1, n - 1);
    char err[256];
    /* the ids as the user typed them (after the <s> we added), so that
     * "token 3" in a message is the third id on the command line */
    if (model_check_tokens(c, src + 1, T - 1, "--decode", err, sizeof err)) cli_fail(PROG, "%s", err);
    for (int i = 1; i < T; i++)
        if (src[i] == COPY_PAD || src[i] == COPY_START)
            cli_fail(PROG, "--decode: token %d is %d, but 0 is padding and 1 the start symbol; the copy task's words are 2..%d",
                     i, src[i], c->vocab - 1);
}

/* ---- section 1: the data ---------------------------------------------------------- */
static void section_data(const Trainer *tr) {
    const int T = tr->T, Tt = tr->T - 1, V = tr->model->cfg.vocab;
    show_section("1. The copy task (stand-in for WMT, Sec. 5.1)");
    printf("vocabulary %d: 0 = <pad>, 1 = <s> (start), words 2..%d; every sequence is <s> plus %d words\n",
           V, V - 1, T - 1);
    Rng peek = tr->data_rng;   /* a copy: looking must not change the run */
    enum { SHOWN = 2 };
    int src[SHOWN * COPY_LEN], tin[SHOWN * COPY_LEN], tout[SHOWN * COPY_LEN];
    copy_batch(src, tin, tout, SHOWN, T, V, &peek);
    printf("  src ids [batch=%d, seq=%d]   tgt_in ids [batch=%d, seq=%d]   tgt_out ids [batch=%d, seq=%d]\n",
           tr->B, T, tr->B, Tt, tr->B, Tt);
    for (int b = 0; b < SHOWN; b++) {
        print_ids("src", src + b * T, T);
        printf("\n");
        print_ids("tgt_in", tin + b * Tt, Tt);
        printf("      (the target shifted right: starts with <s>)\n");
        print_ids("tgt_out", tout + b * Tt, Tt);
        printf("      (what each decoder position must predict)\n");
    }
}

/* ---- section 2: label smoothing (Sec. 5.4) -------------------------------------- */
static void section_label_smoothing(const char *out, float eps_ls) {
    const int V = COPY_VOCAB;
    show_section("2. Label smoothing (Sec. 5.4)");
    {
        enum { R = COPY_VOCAB - 2 };
        float dist[R * COPY_VOCAB];
        char rl_s[R][16], cl_s[COPY_VOCAB][8];
        const char *rl[R], *cl[COPY_VOCAB];
        for (int v = 0; v < V; v++) {
            attn_token_label(cl_s[v], sizeof cl_s[v], v);
            cl[v] = cl_s[v];
        }
        for (int r = 0; r < R; r++) {
            smoothed_targets(dist + r * V, r + 2, V, eps_ls, COPY_PAD);
            snprintf(rl_s[r], sizeof rl_s[r], "y=%d", r + 2);
            rl[r] = rl_s[r];
        }
        printf("eps_ls = %.2f: the right word gets 1 - eps = %.3f, the other %d words eps/%d = %.4f each, <pad> 0\n",
               eps_ls, 1 - eps_ls, V - 2, V - 2, eps_ls / (V - 2));
        char title[128];
        snprintf(title, sizeof title, "smoothed target distribution, eps_ls = %.2f (rows: true word)", eps_ls);
        show_heatmap(title, dist, R, V, rl, cl);
        plot_heatmap(out, "label_smoothing", title, dist, R, V, rl, cl, "vocabulary", "true next word");
        double fl = smoothed_loss_floor(V, eps_ls, COPY_PAD);
        printf("lowest possible loss with this smoothing (entropy of one row): %.4f nats per token\n", fl);

        /* One row as a line, for eps 0, this run's and 0.3: the small
         * plateau eps/(V-2) is invisible in the heatmap's colour scale. */
        float vx[COPY_VOCAB], rows[3][COPY_VOCAB];
        const float eps3[3] = {0.0f, eps_ls, 0.3f};
        for (int v = 0; v < V; v++) vx[v] = (float)v;
        for (int k = 0; k < 3; k++) smoothed_targets(rows[k], 5, V, eps3[k], COPY_PAD);
        char n0[32], n1[32], n2[32];
        snprintf(n0, sizeof n0, "eps_ls = %.2f (one-hot)", eps3[0]);
        snprintf(n1, sizeof n1, "eps_ls = %.2f (this run)", eps3[1]);
        snprintf(n2, sizeof n2, "eps_ls = %.2f", eps3[2]);
        const float *rser[3] = {rows[0], rows[1], rows[2]};
        const char *rnames[3] = {n0, n1, n2};
        plot_lines(out, "label_smoothing_row", "target distribution for the true word 5 (Sec. 5.4); id 0 = <pad> gets 0",
                   "token id", "target probability", vx, V, rser, rnames, 3, 0, 0);

        /* Loss of a prediction that puts probability x on the right word and
         * spreads 1-x evenly over the other words. Without smoothing the
         * loss falls all the way as x -> 1; with it, the loss is lowest at
         * x = 1 - eps and rises again: over-confidence is penalised. */
        enum { X = 200 };
        float px[X], lz[X], ls[X];
        float q0[COPY_VOCAB], qs[COPY_VOCAB];
        smoothed_targets(q0, 5, V, 0.0f, COPY_PAD);
        smoothed_targets(qs, 5, V, eps_ls > 0 ? eps_ls : 0.1f, COPY_PAD);
        for (int i = 0; i < X; i++) {
            double x = 0.05 + (0.9999 - 0.05) * i / (X - 1), l0 = 0, l1 = 0;
            px[i] = (float)x;
            for (int v = 0; v < V; v++) {
                if (v == COPY_PAD) continue;
                double p = v == 5 ? x : (1 - x) / (V - 2);
                l0 -= q0[v] * log(p);
                l1 -= qs[v] * log(p);
            }
            lz[i] = (float)l0;
            ls[i] = (float)l1;
        }
        char nls[48];
        snprintf(nls, sizeof nls, "eps_ls = %.2f: lowest at x = %.2f", eps_ls > 0 ? eps_ls : 0.1f,
                 1 - (eps_ls > 0 ? eps_ls : 0.1f));
        const float *cser[2] = {lz, ls};
        const char *cnames[2] = {"eps_ls = 0: keeps falling", nls};
        plot_lines(out, "label_smoothing_confidence", "loss vs confidence in the right word (Sec. 5.4)",
                   "probability given to the right word", "loss (nats)", px, X, cser, cnames, 2, 0, 0);
        if (eps_ls > 0)
            printf("with smoothing the loss is lowest when the model gives the right word %.2f, not 1:\n"
                   "it is paid to stay a little unsure (perplexity suffers, accuracy and BLEU do not - Sec. 5.4)\n",
                   1 - eps_ls);
        else
            printf("no smoothing: the loss only reaches 0 when the model is certain (one-hot targets)\n");
    }
}

/* ---- section 3: the learning-rate schedule (Sec. 5.3) ----------------------------- */
static void section_schedule(const char *out, int d_model, int warmup, float factor) {
    show_section("3. Learning rate (Sec. 5.3)");
    printf("lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)\n");
    printf("this run: d_model %d, warmup %d, factor %g -> peak %.3e at step %d\n",
           d_model, warmup, factor, lr_schedule(warmup, d_model, warmup, factor), warmup);
    printf("paper (base): d_model 512, warmup 4000 -> peak %.3e at step 4000\n", lr_schedule(4000, 512, 4000, 1));
    {
        enum { P = 400 };
        static const int pairs[3][2] = {{512, 4000}, {512, 8000}, {256, 4000}};
        float xs[P], ys[4][P];
        for (int i = 0; i < P; i++) {
            int s = 1 + i * 50;
            xs[i] = s;
            for (int k = 0; k < 3; k++) ys[k][i] = lr_schedule(s, pairs[k][0], pairs[k][1], 1);
            ys[3][i] = lr_schedule(s, d_model, warmup, factor);
        }
        const float *ser[4] = {ys[0], ys[1], ys[2], ys[3]};
        char run_name[64];
        snprintf(run_name, sizeof run_name, "this run: %d:%d x%g", d_model, warmup, factor);
        const char *names[4] = {"512:4000", "512:8000", "256:4000", run_name};
        plot_lines(out, "lr_schedules", "Sec. 5.3 schedule for (d_model:warmup) pairs, factor 1",
                   "step", "learning rate", xs, P, ser, names, 3, 0, 0);
        /* Log-log: warmup is a line of slope +1, the decay one of slope -1/2 */
        float lx[P], ly[4][P];
        int np = 0;
        for (int i = 0; i < P; i++) {
            int st = (int)lround(pow(10.0, 5.0 * i / (P - 1)));   /* 1 .. 100000, evenly on a log axis */
            if (np > 0 && st <= (int)lx[np - 1]) continue;
            lx[np] = (float)st;
            for (int k = 0; k < 3; k++) ly[k][np] = lr_schedule(st, pairs[k][0], pairs[k][1], 1);
            ly[3][np] = lr_schedule(st, d_model, warmup, factor);
            np++;
        }
        const float *lser[4] = {ly[0], ly[1], ly[2], ly[3]};
        plot_lines(out, "lr_schedules_loglog", "Sec. 5.3 schedule, log-log: slope +1 (warmup), -1/2 (decay)",
                   "step", "learning rate", lx, np, lser, names, 4, 1, 1);
    }
}

/* --nan-at: one weight set to NaN wherever the model runs */
static void poison(Trainer *t) {
    trainer_pull(t);
    t->model->params.mem[0] = NAN;
    model_push(t->model);
}

/* ---- section 6: the training loop ---------------------------------------------------- */
typedef struct {
    int steps;              /* train until this many steps in total            */
    int ckpt_every;         /* save every K steps (0: never inside the loop)   */
    int nan_at;             /* poison a weight before this step (0: never)     */
    const char *ckpt_path;  /* where checkpoints go                            */
    const char *good_path;  /* the last good checkpoint on disk, or NULL       */
    const char *out;        /* plot folder                                     */
} LoopOpts;

typedef struct {
    int tty;              /* \r updates between the kept lines            */
    double t0, last_draw; /* seconds                                     */
    long tokens;          /* target tokens trained on in this process     */
} Progress;

static void progress_line(Progress *p, uint64_t step, int steps, uint64_t first, const StepStats *st, int keep) {
    double el = clock_wall_s() - p->t0;
    double done = (double)(step - first), left = (double)steps - (double)step;
    double eta = done > 0 ? el / done * left : 0;
    if (p->tty) printf("\r");
    printf("  step %5llu/%d  loss %.4f  lr %.2e  |grad| %7.3f  %6.0f tok/s  %6.1fs  ETA %5.1fs%s",
           (unsigned long long)step, steps, st->loss, st->lr, st->grad_norm,
           el > 0 ? p->tokens / el : 0.0, el, eta, keep || !p->tty ? "\n" : "");
    fflush(stdout);
    p->last_draw = clock_wall_s();
}

/* Trains from tr->step up to o->steps on the trainer's backend, printing ~12
 * progress lines, saving every o->ckpt_every steps, then plots the loss and
 * learning-rate curves.
 * Returns 0; 1 when a step met a NaN/inf (nothing updated, the last
 * checkpoint on disk untouched); when a checkpoint could not be written, 1
 * (I/O) or 2 (the state held NaN/inf, so it was not saved). */
static int train_loop(Trainer *tr, const LoopOpts *o, float eps_ls) {
    char err[512];
    const char *good = o->good_path;
    uint64_t first = tr->step, good_step = tr->step;
    int todo = (uint64_t)o->steps > first ? o->steps - (int)first : 0;
    int every = todo / 12 > 1 ? todo / 12 : 1;
    float *loss_hist = calloc(todo ? todo : 1, sizeof(float));
    float *lr_hist = calloc(todo ? todo : 1, sizeof(float));
    float *step_x = calloc(todo ? todo : 1, sizeof(float));
    float *floor_line = calloc(todo ? todo : 1, sizeof(float));
    CopyBatch cb = {0};   /* each step's batch, drawn from the trainer's data stream */
    if (!loss_hist || !lr_hist || !step_x || !floor_line || copy_batch_alloc(&cb, tr->B, tr->T)) {
        fprintf(stderr, "%s: out of memory for %d steps of history\n", PROG, todo);
        free(loss_hist), free(lr_hist), free(step_x), free(floor_line);
        return 1;
    }
    printf("%d steps (from %llu to %d), %d target tokens each; a line every %d steps\n",
           todo, (unsigned long long)first, o->steps, tr->B * (tr->T - 1), every);
    Progress pg = {.tty = isatty(1), .t0 = clock_wall_s()};
    StepStats st = {0};
    int rc = 0, done = 0;
    for (int i = 0; i < todo; i++) {
        if (o->nan_at > 0 && tr->step + 1 == (uint64_t)o->nan_at) {
            if (pg.tty) printf("\n");
            printf("  --nan-at %d: setting %s[0] to NaN before this step\n", o->nan_at,
                   tr->model->params.tensors[0].name);
            poison(tr);
        }
        TrainStatus ts = copy_train_step(tr, &cb, &st);
        if (ts != TRAIN_OK) {   /* (data parallel: the same status on every rank; rank 0 says it) */
            if (pg.tty) printf("\n");
            fflush(stdout);
            if (dist_rank() == 0) fprintf(stderr, "%s: training stopped at step %llu: %s (loss %g).\n  Nothing was updated at this step. %s\n",
                    PROG, (unsigned long long)tr->step + 1, train_status_str(ts), st.loss,
                    o->nan_at > 0 && tr->step + 1 == (uint64_t)o->nan_at
                        ? "The NaN was put there by --nan-at."
                        : "Usual cause: a learning rate too high for this model\n"
                          "  (try a smaller --factor or a longer --warmup).");
            if (dist_rank() > 0) {
            } else if (good) fprintf(stderr, "  The last good checkpoint, %s (step %llu), is intact; --resume it to go on.\n",
                                     good, (unsigned long long)good_step);
            else fprintf(stderr, "  No checkpoint was written in this run (use --checkpoint-every K).\n");
            rc = 1;
            break;
        }
        pg.tokens += st.n_tokens;
        loss_hist[i] = st.loss;
        lr_hist[i] = st.lr;
        step_x[i] = (float)tr->step;
        done = i + 1;
        int keep = i == 0 || (i + 1) % every == 0 || i == todo - 1;
        if (keep || (pg.tty && clock_wall_s() - pg.last_draw > 0.2)) progress_line(&pg, tr->step, o->steps, first, &st, keep);
        if (dist_rank() == 0) show_progress("step", (long)tr->step, o->steps);   /* stderr, only under --section N */
        if (o->ckpt_every > 0 && tr->step % o->ckpt_every == 0 && i != todo - 1) {
            /* rank 0 alone writes; every rank learns how it went and all stop together */
            int save_rc = dist_rank() == 0 ? trainer_save(tr, o->ckpt_path, err, sizeof err) : 0;   /* 1: I/O, 2: not finite */
            if (dist_max_int(save_rc) && !save_rc) snprintf(err, sizeof err, "rank 0 could not save %s", o->ckpt_path);
            if ((save_rc = dist_max_int(save_rc))) {
                fprintf(stderr, "%s: %s\n", PROG, err);
                if (good) fprintf(stderr, "  The last good checkpoint, %s (step %llu), is intact.\n", good,
                                  (unsigned long long)good_step);
                rc = save_rc;
                break;
            }
            good = o->ckpt_path;
            good_step = tr->step;
            if (pg.tty) printf("\n");
            printf("  checkpoint: %s (step %llu)\n", o->ckpt_path, (unsigned long long)tr->step);
        }
    }
    double train_s = clock_wall_s() - pg.t0;
    double fl = smoothed_loss_floor(tr->model->cfg.vocab, eps_ls, tr->model->cfg.pad_id);
    if (rc == 0 && done > 0 && dist_rank() == 0) {
        printf("trained %d steps in %.1f s: %.1f ms/step, %.0f target tokens/s; final loss %.4f (floor %.4f)\n",
               done, train_s, 1e3 * train_s / done, pg.tokens / train_s, st.loss, fl);
        for (int i = 0; i < done; i++) floor_line[i] = (float)fl;
        const float *ser[2] = {loss_hist, floor_line};
        const char *names[2] = {"training loss (label-smoothed cross-entropy)", "floor: entropy of smoothed targets"};
        plot_lines(o->out, "loss", "training loss per step (Sec. 5.4 label smoothing sets the floor)",
                   "step", "loss (nats per token)", step_x, done, ser, names, 2, 0, 0);
        const float *lser[1] = {lr_hist};
        const char *lnames[1] = {"learning rate (Sec. 5.3)"};
        plot_lines(o->out, "lr", "learning rate used at each step (Sec. 5.3)", "step", "learning rate",
                   step_x, done, lser, lnames, 1, 0, 0);
    }
    free(loss_hist);
    free(lr_hist);
    free(step_x);
    free(floor_line);
    copy_batch_free(&cb);
    return rc;
}

/* ---- section 7: decoding and accuracy ------------------------------------------------- */
/* y (T) = the start symbol and the greedy decode of the T-1 tokens after it
 * (copy_greedy: decode.h's decoder, Sec. 6.1 with beam size 1) */
static void greedy(Model *m, int *y, const int *src, int T) {
    char err[256];
    if (copy_greedy(m, y, src, 1, T, err, sizeof err)) cli_fail(PROG, "decoding: %s", err);
}

static void decode_and_print(Model *m, const int *src, int T) {
    int y[COPY_LEN];
    greedy(m, y, src, T);
    print_ids("input", src, T);
    printf("\n");
    print_ids("output", y, T);
    printf("   %s\n", memcmp(src, y, (size_t)T * sizeof(int)) ? "WRONG" : "ok");
}

/* ---- the run: flags, then one function per section ---------------------------------- */
typedef struct {
    int layers, d_model, d_ff, heads, batch, steps, warmup;
    float factor, eps_ls, dropout;
    int no_reg, ckpt_every, n_eval, n_examples, nan_at, micro, quick;
    uint64_t seed, eval_seed;
    const char *out, *ckpt_path, *resume, *device, *decode, *st_path;
    char ckpt_buf[1024];
    TrainHyper hp;
    const Backend *be;      /* where every step, decode and evaluation runs */
    AttnView attn;          /* which attention the terminal draws            */
} Run;

/* defaults small enough to train in seconds on 2 cores; then the flags */
static void parse_flags(Run *r, int argc, char **argv) {
    *r = (Run){.layers = 2, .d_model = 64, .d_ff = 128, .heads = 4, .batch = 128, .steps = 600,
               .warmup = 200, .factor = 1.0f, .eps_ls = 0.1f, .dropout = 0.1f, .n_eval = 1000,
               .n_examples = 5, .seed = 42, .eval_seed = 2017, .out = "out/08_training", .device = "cpu", .micro = 1};
    if (cli_given(argc, argv, "--quick")) r->steps = 5, r->batch = 16, r->n_eval = 10, r->n_examples = 1;
    CliOption opts[] = {
        {"--layers", CLI_INT, &r->layers, "N: layers in the encoder and in the decoder", 1, 64},
        {"--d-model", CLI_INT, &r->d_model, "d_model (paper 512)", 2, 4096},
        {"--d-ff", CLI_INT, &r->d_ff, "d_ff, FFN inner width (paper 2048)", 1, 16384},
        {"--heads", CLI_INT, &r->heads, "h, attention heads; must divide d_model (paper 8)", 1, 256},
        {"--batch", CLI_INT, &r->batch, "sequences per step", 1, 4096},
        {"--micro-batches", CLI_INT, &r->micro, "G slices per step, gradients added as a fixed tree: mpirun -np P (P dividing G) gives one process's bits (chapter 13)", 1, TRAIN_MAX_MICRO},
        {"--steps", CLI_INT, &r->steps, "train until this many optimizer steps in total", 0, 10000000},
        {"--warmup", CLI_INT, &r->warmup, "warmup_steps of Sec. 5.3 (paper 4000)", 1, 10000000},
        {"--factor", CLI_FLOAT, &r->factor, "multiplies the Sec. 5.3 learning rate (paper 1)", 1e-6, 1e12},
        {"--label-smoothing", CLI_FLOAT, &r->eps_ls, "eps_ls of Sec. 5.4 (paper 0.1)", 0, 0.99},
        {"--dropout", CLI_FLOAT, &r->dropout, "P_drop of Sec. 5.4 (paper 0.1)", 0, 0.95},
        {"--no-regularization", CLI_FLAG, &r->no_reg, "no dropout and no label smoothing", 0, 0},
        {"--seed", CLI_U64, &r->seed, "seed for weights, training data and dropout", 0, 0},
        {"--eval", CLI_INT, &r->n_eval, "held-out sequences for exact-match accuracy (0: skip)", 0, 1000000},
        {"--eval-seed", CLI_U64, &r->eval_seed, "seed of the held-out sequences", 0, 0},
        {"--examples", CLI_INT, &r->n_examples, "fresh sequences decoded and printed at the end", 0, 100},
        {"--decode", CLI_STRING, &r->decode, "also decode these 9 ids (2..10), e.g. \"3 5 7 2 9 4 10 6 8\"", 0, 0},
        {"--checkpoint-every", CLI_INT, &r->ckpt_every, "save a checkpoint every K steps (0: only at the end)", 0, 10000000},
        {"--checkpoint", CLI_STRING, &r->ckpt_path, "checkpoint file (default: OUT/copy.ckpt)", 0, 0},
        {"--resume", CLI_STRING, &r->resume, "continue the run saved in this checkpoint", 0, 0},
        {"--nan-at", CLI_INT, &r->nan_at, "poison one weight with NaN before this step, to watch the guard (0: never)", 0, 10000000},
        {"--export-safetensors", CLI_STRING, &r->st_path, "also write the trained weights in the safetensors format", 0, 0},
        {"--attn-layer", CLI_INT, &r->attn.layer, "layer whose attention the terminal draws, 1..N (0: the last)", 0, 64},
        {"--attn-head", CLI_INT, &r->attn.head, "head the terminal draws, 1..h (0: the mean of the heads)", 0, 256},
        {"--attn-enc", CLI_FLAG, &r->attn.enc, "also draw the encoder self-attention (default: one line)", 0, 0},
        {"--device", CLI_STRING, &r->device, "cpu or cuda (cuda: train, decode and evaluate on the GPU)", 0, 0},
        {"--out", CLI_STRING, &r->out, "output folder for plots and the checkpoint", 0, 0},
        {"--quick", CLI_FLAG, &r->quick, "a short run: --steps 5 --batch 16 --eval 10 --examples 1 (make smoke)", 0, 0},
    };
    cli_parse(argc, argv, PROG, "train the Transformer on the copy task (Section 5: Adam, warmup, dropout, label smoothing)",
              opts, CLI_COUNT(opts));
    show_lecture_sections(10);   /* its banners: "1." .. "10." */
    if (r->no_reg) r->dropout = 0, r->eps_ls = 0;
    if (!(r->be = backend_select(r->device))) cli_fail(PROG, "--device must be cpu or cuda, got '%s'", r->device);
    if (!r->resume && r->d_model % r->heads)
        cli_fail(PROG, "--d-model (%d) must be divisible by --heads (%d): d_k = d_model / h (Sec. 3.2.2)",
                 r->d_model, r->heads);
    if (!r->ckpt_path) {
        snprintf(r->ckpt_buf, sizeof r->ckpt_buf, "%s/copy.ckpt", r->out);
        r->ckpt_path = r->ckpt_buf;
    }
    /* the export must not land on the checkpoint (written or resumed): it
     * would replace it. The checkpoint itself may be the --resume file:
     * that is how a run continues in place. Checked before anything is written. */
    const FioArg files[] = {
        {"--resume", r->resume, FIO_READS},
        {r->ckpt_path == r->ckpt_buf ? "the checkpoint (--out)" : "--checkpoint", r->ckpt_path, FIO_REPLACES},
        {"--export-safetensors", r->st_path, FIO_WRITES},
    };
    char err[1400];
    if (fio_check_outputs(files, 3, err, sizeof err)) cli_fail(PROG, "%s", err);
    r->hp = train_hyper_paper();   /* Adam's betas and eps as in Sec. 5.3 */
    r->hp.eps_ls = r->eps_ls, r->hp.warmup = r->warmup, r->hp.factor = r->factor;
}

/* the model and trainer, fresh or from a checkpoint, on the chosen backend */
static void build(Run *r, Model *m, Trainer *tr) {
    char err[512];
    memset(m, 0, sizeof *m);
    if (r->resume) {
        if (trainer_resume(tr, m, r->resume, &r->hp, r->batch, COPY_LEN, r->batch, err, sizeof err))
            cli_fail(PROG, "%s", err);
        if (m->cfg.vocab != COPY_VOCAB) {
            int v = m->cfg.vocab;
            trainer_free(tr), model_free(m);
            cli_fail(PROG, "%s: vocabulary %d, but the copy task has %d tokens", r->resume, v, COPY_VOCAB);
        }
        m->cfg.dropout = r->dropout;   /* the file decides the architecture; the flags the training regime */
    } else {
        Config c = config_base();
        c.N = r->layers, c.d_model = r->d_model, c.d_ff = r->d_ff, c.h = r->heads;
        c.d_k = c.d_v = r->d_model / r->heads;
        c.vocab = COPY_VOCAB, c.max_len = COPY_LEN, c.dropout = r->dropout, c.pad_id = COPY_PAD;
        if (model_build(m, &c, r->batch, COPY_LEN, COPY_LEN - 1, r->seed, err, sizeof err)) cli_fail(PROG, "%s", err);
        /* the data stream gets a seed of its own, so it is not the weights' stream */
        if (trainer_init(tr, m, &r->hp, r->batch, COPY_LEN, r->seed ^ 0xDA7A5EEDull, err, sizeof err)) {
            model_free(m);
            cli_fail(PROG, "%s", err);
        }
    }
    if (trainer_to(tr, r->be, err, sizeof err)) {
        trainer_free(tr), model_free(m);
        cli_fail(PROG, "--device %s: %s", r->device, err);
    }
    if (trainer_set_micro(tr, r->micro, err, sizeof err)) {
        trainer_free(tr), model_free(m);
        cli_fail(PROG, "--micro-batches: %s", err);
    }
}

static void section_model(const Run *r, const Model *m, const Trainer *tr) {
    const Config *c = &m->cfg;
    show_section("4. The model (Figure 1)");
    printf("N=%d, d_model=%d, d_ff=%d, h=%d, d_k=d_v=%d, vocab %d, P_drop %.2f, %s; %zu params\n",
           c->N, c->d_model, c->d_ff, c->h, c->d_k, c->vocab, c->dropout,
           c->pre_ln ? "pre-LN" : "post-LN (paper)", m->params.n);
    printf("Adam (beta1 %.2f, beta2 %.2f, eps %.0e), batch %d, label smoothing %.2f\n",
           r->hp.beta1, r->hp.beta2, r->hp.adam_eps, r->batch, r->eps_ls);
    if (r->resume)
        printf("resumed from %s at step %llu (architecture from the file)\n", r->resume, (unsigned long long)tr->step);
    printf("device: %s (every op of common/model/model.c and train.c runs through this backend's table)\n", m->be->name);
}

/* Everything a step touches (weights, gradients, Adam's m and v,
 * activations) was allocated before step 1, so the peak stays put however
 * many steps run. ru_maxrss is in KiB on Linux. */
static void print_memory(const Model *m) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("memory: peak resident %.1f MiB; weights + gradients + Adam m, v = 4 x %zu floats = %.1f MiB,\n"
           "        all allocated before step 1 (nothing is allocated inside a step)\n",
           ru.ru_maxrss / 1024.0, m->params.n, 4.0 * m->params.n * sizeof(float) / (1 << 20));
}

/* sections 7, 8 and 9: decoded examples, accuracy, attention after training
 * (as heatmaps, then as the paper's line views: common/io/lineview.h) */
static void section_after(const Run *r, Model *m, const int *ex_src, Rng *ex_rng) {
    const int T = COPY_LEN;
    int tmp_in[COPY_LEN], tmp_out[COPY_LEN], ex_ys[COPY_LEN];
    show_section("7. After training: greedy decoding (Sec. 6.1 with beam size 1)");
    for (int e = 0; e < r->n_examples; e++) {
        int s[COPY_LEN];
        copy_batch(s, tmp_in, tmp_out, 1, T, COPY_VOCAB, ex_rng);
        decode_and_print(m, s, T);
    }
    printf("the example from section 5%s:\n", r->decode ? " (your --decode)" : "");
    decode_and_print(m, ex_src, T);
    if (r->n_eval > 0) {
        double t0 = clock_wall_s(), tok;
        double acc = copy_exact_match(m, r->n_eval, T, r->eval_seed, &tok);
        if (acc < 0) cli_fail(PROG, "out of memory for the evaluation");
        printf("exact match on %d held-out sequences (seed %llu): %.1f%%  (tokens right: %.2f%%; %.1f s)\n",
               r->n_eval, (unsigned long long)r->eval_seed, 100 * acc, 100 * tok, clock_wall_s() - t0);
    }
    show_section("8. After training: attention");
    greedy(m, ex_ys, ex_src, T);
    attn_view_show(PROG, m, &r->attn, ex_src, ex_ys, T, "after", r->out);
    printf("To copy, decoder position i (fed token i) must output source token i+1, so a head that has\n"
           "learned the task looks at source position i+1. Compare section 5; other views: --attn-head H.\n");
    show_section("9. After training: attention as lines (Figures 3-5)");
    char lab[COPY_LEN][8];   /* section 8's encoder attention, drawn as the paper draws it */
    const char *lp[COPY_LEN];
    for (int i = 0; i < T; i++) attn_token_label(lab[i], sizeof lab[i], ex_src[i]), lp[i] = lab[i];
    lineview_encoder(r->out, m, T, lp, "copy task, after training");
}

/* section 10: the checkpoint (brought to the host by trainer_save), and the
 * safetensors export if asked. 0, or 1 (I/O) / 2 (a state that is not finite). */
static int section_checkpoint(const Run *r, Trainer *tr) {
    char err[512];
    show_section("10. Checkpoint");
    int rc = trainer_save(tr, r->ckpt_path, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return rc;
    }
    printf("saved %s at step %llu\n  (weights + Adam m, v + both RNG states; written to a temporary, then renamed)\n",
           r->ckpt_path, (unsigned long long)tr->step);
    printf("continue with: build/%s --resume %s --steps %d%s\n", PROG, r->ckpt_path, r->steps * 2,
           tr->be == backend_cpu() ? "" : " --device cuda");
    if (r->st_path) {   /* the same weights, for PyTorch / JAX (safetensors; names as in the checkpoint) */
        rc = model_export_safetensors(tr->model, r->st_path, err, sizeof err);
        if (rc) fprintf(stderr, "%s: error: %s\n", PROG, err);
        else printf("wrote the weights to %s (safetensors)\n", r->st_path);
    }
    return rc;
}

/* Under mpirun, rank 0 says how the step is shared. P ranks need at least
 * P slices (micro-batches) a step, so with fewer --micro-batches than ranks
 * the run sums more slices than the same command on one process does: the
 * additions come in another order and the two runs drift apart by float
 * rounding. That is said, with the flag that makes them equal. */
static void print_data_parallel(const Run *r, const DistTrainer *dt) {
    int P = dist_size(), L = train_leaves(r->micro, r->batch, P), L1 = train_leaves(r->micro, r->batch, 1);
    printf("data parallel: %d ranks, each on %d of the %d sequences of every step (chapter 13)\n"
           "  gradients summed over %s\n", P, r->batch / P, r->batch, dt->path);
    if (L == L1) {
        printf("  %d slice%s a step, added as one process adds them: the same bits as one process\n", L, L > 1 ? "s" : "");
        return;
    }
    printf("  %d slices a step, where the same command on one process sums %d: not the same run\n"
           "  (the losses differ by float rounding, more as the steps go on).\n", L, L1);
    if ((P & (P - 1)) == 0)
        printf("  %s --micro-batches %d: then one process and %d ranks give the same bits.\n",
               r->micro == 1 ? "Add" : "Use", L, P);
    else
        printf("  With %d ranks (not a power of two) MPI_Allreduce adds in its own order: no --micro-batches\n"
               "  gives one process's bits; 2 or 4 ranks with --micro-batches 4 do.\n", P);
}

int main(int argc, char **argv) {
    Run r;
    Model m;
    Trainer tr;
    DistTrainer dt;
    char err[512];
    dist_init(&argc, &argv, PROG);   /* one rank unless started by mpirun (chapter 13) */
    parse_flags(&r, argc, argv);
    build(&r, &m, &tr);
    attn_view_check(PROG, &r.attn, &m, &tr);
    if (dist_attach(&dt, &tr, 50, err, sizeof err)) dist_exit(2, "%s", err);
    dist_quiet_others();             /* rank 0 alone prints and writes */
    int user_src[COPY_LEN];
    if (r.decode) parse_decode(user_src, r.decode, COPY_LEN, &m.cfg);
    if (dist_max_int(dist_rank() == 0 && plot_mkdir(r.out))) {
        trainer_free(&tr), model_free(&m);
        dist_exit(2, "cannot create the output folder --out %s", r.out);
    }
    if (dist_rank() > 0) {           /* the other ranks: the same steps, nothing else */
        LoopOpts lo = {.steps = r.steps, .ckpt_every = r.ckpt_every, .nan_at = r.nan_at, .ckpt_path = r.ckpt_path};
        int rc = dist_max_int(train_loop(&tr, &lo, r.eps_ls));   /* rank 0's answer at its end */
        dist_detach(&dt), trainer_free(&tr), model_free(&m), dist_finalize();
        return rc;
    }
    if (dist_size() > 1) print_data_parallel(&r, &dt);

    section_data(&tr);
    section_label_smoothing(r.out, r.eps_ls);
    section_schedule(r.out, m.cfg.d_model, r.warmup, r.factor);
    section_model(&r, &m, &tr);

    /* one example to watch before and after: the user's, or a fresh one */
    Rng ex_rng;
    rng_seed(&ex_rng, r.eval_seed ^ 0xE8A3D1Eull);
    int ex_src[COPY_LEN], ex_ys[COPY_LEN], tmp_in[COPY_LEN], tmp_out[COPY_LEN];
    if (r.decode) memcpy(ex_src, user_src, sizeof ex_src);
    else copy_batch(ex_src, tmp_in, tmp_out, 1, COPY_LEN, COPY_VOCAB, &ex_rng);

    show_section("5. Before training: greedy decoding and attention");
    decode_and_print(&m, ex_src, COPY_LEN);
    greedy(&m, ex_ys, ex_src, COPY_LEN);
    attn_view_show(PROG, &m, &r.attn, ex_src, ex_ys, COPY_LEN, "before", r.out);

    show_section("6. Training (Sec. 5.3 optimizer, Sec. 5.4 regularization)");
    LoopOpts lo = {.steps = r.steps, .ckpt_every = r.ckpt_every, .nan_at = r.nan_at,
                   .ckpt_path = r.ckpt_path, .good_path = r.resume, .out = r.out};
    int rc = train_loop(&tr, &lo, r.eps_ls);
    if (!rc) {
        print_memory(&m);
        section_after(&r, &m, ex_src, &ex_rng);
        rc = section_checkpoint(&r, &tr);
    }
    dist_detach(&dt);
    trainer_free(&tr);
    model_free(&m);
    rc = dist_max_int(rc);
    dist_finalize();
    return rc;
}

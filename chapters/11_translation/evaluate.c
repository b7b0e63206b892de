/* evaluate.c - chapter 11's section 5: the test set translated by the last
 * checkpoint and by the average of the last 5 (Sec. 6.1), greedy and with
 * the paper's beam search, scored with corpus BLEU (sacreBLEU's 13a),
 * beside dev perplexity per subword (Table 3); what the run's memory went
 * to; and --eval-every's learning curve during training. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fail.h"
#include "core/clock.h"
#include "core/fileio.h"
#include "core/rss.h"
#include "io/checkpoint.h"
#include "io/cli.h"
#include "io/show.h"
#include "model/decode.h"
#include "text/bleu.h"
#include "translation.h"

static int max2(int a, int b) { return a > b ? a : b; }

/* Corpus BLEU-4 of hyp against ref, the text split by tok: BLEU_TOK_13A is
 * sacreBLEU's standard tokenizer (punctuation split off: the figure papers
 * quote since Post 2018); BLEU_TOK_NONE splits at spaces only, right for
 * text tokenised already (the generated corpus, " ." apart). */
static Bleu corpus_bleu(char **hyp, char *const *ref, int n, BleuTok tok) {
    BleuStats st;
    memset(&st, 0, sizeof st);
    for (int i = 0; i < n; i++) bleu_add_tok(&st, hyp[i] ? hyp[i] : "", ref[i], tok);
    return bleu_compute(&st);
}

/* avg (n floats) = the element-wise mean of the weights in files[0..k),
 * each a model of config cfg (this run's saves: checkpoint_of_run vetted
 * those an earlier run left). */
static void average_checkpoints(float *avg, size_t n, const Config *cfg, char (*files)[1024], int k) {
    char why[512] = "";
    CkptRun run = {.cfg = cfg};   /* the architecture only: every file is one of this run's */
    memset(avg, 0, n * sizeof(float));
    for (int f = 0; f < k; f++) {
        Model t;
        int rc = checkpoint_of_run(files[f], &run, &t, why, sizeof why);
        if (rc == 1) cli_fail(PROG, "%s", why);
        if (rc || t.params.n != n) cli_fail(PROG, "%s: a different model than the one trained (%s)", files[f], why);
        for (size_t i = 0; i < n; i++) avg[i] += t.params.mem[i];
        model_free(&t);
    }
    for (size_t i = 0; i < n; i++) avg[i] /= (float)k;
}

/* One row of the BLEU table: a checkpoint decoded one way. */
typedef struct {
    char name[48];
    Bleu bleu;          /* sacreBLEU 13a                                    */
    Bleu bleu_none;     /* tokenize='none' (the generated corpus only)      */
    double ppl, secs;
    int exact;
    char **hyp;   /* (test.n) owned strings */
} System;

/* Translates the test set with m: greedy, or the paper's beam search
 * (translate.h's translate_split: each sentence to its own length + 50,
 * KV-cached), and scores it. */
static void run_system(System *s, const char *name, Model *m, const TrTask *task, int greedy, double ppl) {
    char err[512];
    DecodeOpts paper = decode_opts_paper(BPE_BOS, BPE_EOS);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->hyp = xcalloc((size_t)task->test.n, sizeof(char *));
    show_progress(NULL, 0, 0);   /* under --section 6: the stderr line's clock moves on */
    double t0 = clock_wall_s();
    if (translate_split(m, &task->bpe, &task->etest, &task->test_b, &paper, greedy, s->hyp, err, sizeof err))
        cli_fail(PROG, "%s: %s", greedy ? "greedy decoding" : "beam search", err);
    s->secs = clock_wall_s() - t0;
    s->bleu = corpus_bleu(s->hyp, task->test.tgt, task->test.n, BLEU_TOK_13A);
    s->bleu_none = corpus_bleu(s->hyp, task->test.tgt, task->test.n, BLEU_TOK_NONE);
    s->ppl = ppl;
    s->exact = 0;
    for (int i = 0; i < task->test.n; i++) s->exact += s->hyp[i] && !strcmp(s->hyp[i], task->test.tgt[i]);
}

/* hyp[0..n) to OUT/file, a line each; 0, or 1 after a warning */
static int write_hyps(const Opts *o, const char *file, char **hyp, int n) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", o->out, file);
    FILE *f = fopen(path, "w");
    if (f)
        for (int i = 0; i < n; i++) fprintf(f, "%s\n", hyp[i] ? hyp[i] : "");
    if (!f || (ferror(f) | fclose(f))) {
        fprintf(stderr, "%s: warning: could not write %s\n", PROG, path);
        return 1;
    }
    return 0;
}

/* --eval-every K: every K steps, dev perplexity and the greedy test BLEU
 * (13a), the hypotheses in OUT/test_greedy_stepNNNNNN.txt: a learning curve
 * in quality against training time, which make bench-translate reads. */
void tr_eval_during_training(const Opts *o, TrTask *task, Run *r, double train_s) {
    System s;
    char file[64];
    double ppl = trtask_perplexity(&r->m, task);
    run_system(&s, "greedy", &r->m, task, 1, ppl);
    snprintf(file, sizeof file, "test_greedy_step%06llu.txt", (unsigned long long)r->tr.step);
    write_hyps(o, file, s.hyp, task->test.n);
    printf("  eval step %llu: train %.1f s, dev ppl %.3f, test BLEU (greedy, 13a) %.2f\n",
           (unsigned long long)r->tr.step, train_s, ppl, s.bleu.score);
    for (int i = 0; i < task->test.n; i++) free(s.hyp[i]);
    free(s.hyp);
}

/* ---- memory: what the run needs, against what it used -------------------------------------
 * Floats one training batch of B pairs of Ts source and Tt target tokens
 * needs: the model's activations as model.c lays them out (an encoder, a
 * decoder and a backward region: model_acts_floats) and the trainer's loss
 * gradient, per-position losses and targets (train.c). The logits dominate
 * at a large vocabulary: logits and log-probs of every target position, and
 * their gradient, B x Tt x V three times. */
static double activation_floats(const Config *c, int B, int Ts, int Tt) {
    return (double)model_acts_floats(c, B, Ts, Tt) + (double)B * Tt * (c->vocab + 2.0);
}

static void print_memory(const TrTask *task, const Run *r) {
    const Model *m = &r->m;
    const Config *c = &m->cfg;
    const Batches *t = &task->test_b, *train_b = &task->train_b;
    double MB = 1e6, P = 4.0 * model_param_count(c) * sizeof(float);
    /* as allocated: the activation block and the trainer's per-position
     * buffers (build_model sized both by the largest batch that runs; the
     * trainer is freed by now, its rows are the largest B*Tt of training),
     * and the model's host-side masks (max_B, T, T) x 4 bytes and last rows */
    int rows = 1;
    for (int k = 0; k < train_b->n; k++) rows = max2(rows, train_b->b[k].n * train_b->b[k].Tt);
    double T = m->max_Ts > m->max_Tt ? m->max_Ts : m->max_Tt;
    double A = ((double)m->acts_floats + (double)rows * (c->vocab + 2.0) + (double)m->max_B * c->vocab) *
               sizeof(float) + 4.0 * m->max_B * T * T;
    int beam_T = t->max_Ts + OUT_OFFSET < c->max_len ? t->max_Ts + OUT_OFFSET : c->max_len;
    double Dc = decoder_floats(c, t->max_B, 4, t->max_Ts, beam_T) * sizeof(float);
    double sum = r->rss_before + P + A + Dc;
    /* what one step needs: the largest single training batch */
    const Batch *big = &train_b->b[0];
    double most = 0;
    for (int k = 0; k < train_b->n; k++) {
        const Batch *b = &train_b->b[k];
        double a = activation_floats(c, b->n, b->Ts, b->Tt) * sizeof(float);
        if (a > most) most = a, big = b;
    }
    double need = r->rss_before + P + most + Dc;
    double per_dim = activation_floats(c, m->max_B, m->max_Ts, m->max_Tt) * sizeof(float);
    double peak = rss_peak();
    char line[640];
    snprintf(line, sizeof line, "weights + gradients + Adam's m and v %.1f, activations and loss gradient as "
             "allocated (the largest batch that runs) %.1f, beam search's decoder [%d sentences x 4 beams x %d "
             "positions] %.1f, resident before the model (program, data) %.1f: sum %.1f", P / MB, A / MB, t->max_B,
             beam_T, Dc / MB, r->rss_before / MB, sum / MB);
    tr_print_wrapped("memory, MB: ", line);
    snprintf(line, sizeof line, "the largest training batch, [%d rows x %d / %d tokens], needs %.1f MB of "
             "activations and loss gradient; with the weights, gradients, Adam, the decoder and what was resident "
             "before: %.1f MB (sized per dimension instead, the most rows of any batch times the longest of any, "
             "[%d x %d / %d], the activations would take %.1f MB: %.1fx)", big->n, big->Ts, big->Tt, most / MB,
             need / MB, m->max_B, m->max_Ts, m->max_Tt, per_dim / MB, per_dim / most);
    tr_print_wrapped("needed, MB: ", line);
    snprintf(line, sizeof line, "(getrusage ru_maxrss) %.1f MB, %.2fx what is needed: %s", peak / MB, peak / need,
             peak <= 2 * need ? "within 2x" : "MORE than 2x: something holds memory this count misses");
    tr_print_wrapped("peak resident memory ", line);
}

void tr_section_evaluate(const Opts *o, TrTask *task, Run *r) {
    show_section("5. Evaluation: greedy and beam BLEU, averaging, PPL (Sec. 6.1, Table 3)");
    double t0 = clock_wall_s();
    DecodeOpts paper = decode_opts_paper(BPE_BOS, BPE_EOS);   /* Sec. 6.1: beam 4, alpha 0.6, input + 50 */
    System sys[4];
    int ns = 0, n_avg = r->n_ckpt;
    double ppl_last = trtask_perplexity(&r->m, task);
    run_system(&sys[ns++], "last checkpoint, greedy", &r->m, task, 1, ppl_last);
    run_system(&sys[ns++], "last checkpoint, beam 4, alpha 0.6", &r->m, task, 0, ppl_last);
    if (n_avg >= 2) {
        /* The averaged weights go into the trained model for a while: its
         * activations serve them too (a second model would hold a second
         * set), and the trained weights come back afterwards. */
        size_t n = r->m.params.n;
        float *keep = xmalloc(n * sizeof(float));
        memcpy(keep, r->m.params.mem, n * sizeof(float));
        average_checkpoints(r->m.params.mem, n, &r->m.cfg, r->ckpt, n_avg);
        model_push(&r->m);
        char name[64], path[1100], err[512];
        double ppl_avg = trtask_perplexity(&r->m, task);
        snprintf(name, sizeof name, "average of last %d checkpoints, greedy", n_avg);
        run_system(&sys[ns++], name, &r->m, task, 1, ppl_avg);
        snprintf(name, sizeof name, "average of last %d, beam 4, alpha 0.6", n_avg);
        run_system(&sys[ns++], name, &r->m, task, 0, ppl_avg);
        snprintf(path, sizeof path, "%s/model_avg.ckpt", o->out);
        if (model_save(&r->m, path, NULL, err, sizeof err)) fprintf(stderr, "%s: %s\n", PROG, err);
        snprintf(path, sizeof path, "%s/model_avg.ckpt.bpe", o->out);   /* for --translate --model */
        if (bpe_save(&task->bpe, path, err, sizeof err)) fprintf(stderr, "%s: %s\n", PROG, err);
        memcpy(r->m.params.mem, keep, n * sizeof(float));
        model_push(&r->m);
        free(keep);
    }
    char sig[128];
    bleu_signature(sig, sizeof sig, BLEU_TOK_13A);
    printf("test set: %d sentences; BLEU as sacreBLEU %s computes it, its standard 13a tokenizer\n"
           "(signature %s)%s; a test checks\n"
           "bleu.c against sacrebleu to 0.01.\n"
           "decoding: chapter 09's decoder (common/model/decode.h, KV cache), each sentence to its own length\n"
           "+ %d tokens at most (Sec. 6.1); greedy, and beam %d with length penalty alpha %.1f, early stop\n",
           task->test.n, BLEU_SACREBLEU_VERSION, sig,
           o->generated ? ";\n'none': split at spaces only, as the generated text is tokenised already" : "",
           paper.offset, paper.beam, (double)paper.alpha);
    printf("  %-37s %6s%s %20s %8s %6s %7s\n", "system", "BLEU", o->generated ? "  none" : "", "1/2/3/4-gram prec.",
           "dev PPL", "exact", "decode");
    for (int i = 0; i < ns; i++) {
        const Bleu *b = &sys[i].bleu;
        char none[16] = "";
        if (o->generated) snprintf(none, sizeof none, " %6.2f", sys[i].bleu_none.score);
        printf("  %-37s %6.2f%s %5.1f/%4.1f/%4.1f/%4.1f %8.3f %6d %6.1fs\n", sys[i].name, b->score, none, b->prec[0],
               b->prec[1], b->prec[2], b->prec[3], sys[i].ppl, sys[i].exact, sys[i].secs);
    }
    if (n_avg < 2) printf("  average: only %d checkpoint saved (use --checkpoint-every K)\n", n_avg);
    printf("exact: sentences identical to the reference, of %d\n", task->test.n);
    for (int i = 1; i < ns; i += 2) {
        double gain = sys[i].bleu.score - sys[i - 1].bleu.score;
        int differ = 0;
        for (int j = 0; j < task->test.n; j++) differ += strcmp(sys[i].hyp[j], sys[i - 1].hyp[j]) != 0;
        printf("%s: beam %s BLEU by %.2f (%d of %d outputs differ from greedy's), %.1fx its time\n",
               i == 1 ? "last" : "averaged", gain >= 0 ? "raised" : "lowered", fabs(gain), differ, task->test.n,
               sys[i].secs / (sys[i - 1].secs > 1e-9 ? sys[i - 1].secs : 1e-9));
    }
    if (n_avg >= 2)
        printf("averaging the last %d checkpoints %s greedy BLEU by %.2f\n", n_avg,
               sys[2].bleu.score >= sys[0].bleu.score ? "raised" : "lowered",
               fabs(sys[2].bleu.score - sys[0].bleu.score));
    for (int i = 0, shown = 0; i < task->test.n && shown < 3; i++) {
        if (!strcmp(sys[1].hyp[i], task->test.tgt[i])) continue;
        tr_print_wrapped("  a miss (last, beam):  en  ", task->test.src[i]);
        tr_print_wrapped("                        ref ", task->test.tgt[i]);
        tr_print_wrapped("                        hyp ", sys[1].hyp[i]);
        shown++;
    }
    static const char *const files[4] = {"test_hyp.txt", "test_hyp_beam.txt", "test_hyp_avg.txt",
                                         "test_hyp_avg_beam.txt"};
    char line[1200], label[1100];
    size_t len = 0;
    for (int k = 0; k < ns; k++) {
        int bad = write_hyps(o, files[k], sys[k].hyp, task->test.n);
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s", k ? ", " : "", bad ? "(not written)" : files[k]);
    }
    printf("evaluation took %.1f s\n", clock_wall_s() - t0);
    snprintf(label, sizeof label, "test hypotheses in %s/: ", o->out);
    snprintf(line + len, sizeof line - len, " (the table's rows, in order)");
    tr_print_wrapped(label, line);
    print_memory(task, r);
    for (int k = 0; k < ns; k++) {
        for (int i = 0; i < task->test.n; i++) free(sys[k].hyp[i]);
        free(sys[k].hyp);
    }
}

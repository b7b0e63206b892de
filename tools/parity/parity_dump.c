/* parity_dump - chapter 07's model, checked against other implementations.
 *
 * Chapter 07 teaches one forward pass; this tool writes the numbers another
 * implementation needs to check it, from a checkpoint the chapter saved
 * (`build/07_transformer --save m.ckpt`, its size flags as you like):
 *
 *   --src "3 4 5" --tgt "1 8" --dump F [--dump-attn]
 *                         the forward pass (inference) on these token ids:
 *                         logits, log-probabilities (and every attention
 *                         weight) in a text file, for
 *                         chapters/07_transformer/reference.py
 *   --batch-file B --grad-dump G [--adam-dump A]
 *                         the training step's gradient pass with dropout off
 *                         on a batch of padded sequences: loss, logits and
 *                         every gradient (and one Adam step) in safetensors
 *                         files, for tools/parity/parity.py (`make parity`)
 *   --export-safetensors F  the weights in the safetensors format (after the
 *                         Adam step when given with --adam-dump)
 *   --export-torch F      the weights in torch.nn.Transformer's own layout
 *                         (load_state_dict(strict=True) takes them:
 *                         common/io/torch_export.h, tools/parity/torch_layout.py)
 *
 * The file layouts are in chapters/07_transformer/README.md. Everything runs
 * on the CPU, the reference. Exit status: 2 for bad input, 1 when a file
 * cannot be written.
 *
 * Run:  make build/parity_dump && ./build/parity_dump --load m.ckpt --export-torch m.torch.st
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "io/cli.h"
#include "io/torch_export.h"
#include "model/model.h"
#include "parity/grad_dump.h"

#define PROG "parity_dump"

/* Exit status as everywhere: 2 for bad input, 1 when a file cannot be written. */
static void fail_rc(int rc, const char *err) {
    fprintf(stderr, PROG ": error: %s\n", err);
    exit(rc == 1 ? 1 : 2);
}

/* ---- --dump: numbers for comparing with another implementation ---------- */

static void write_matrix(FILE *f, const float *x, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) fprintf(f, "%.9g%c", x[(size_t)r * cols + j], j + 1 < cols ? ' ' : '\n');
}

/* After model_forward on src (Ts), tgt (Tt), batch 1: the config, the ids,
 * logits and logp (Tt, vocab) and, with_attn, every attention weight. */
static void dump(const Model *m, const float *logp, const int *src, const int *tgt, int Ts, int Tt,
                 int with_attn, const char *path) {
    const Config *c = &m->cfg;
    /* written to a temporary and renamed when complete: a full disk leaves
     * no partial dump (and an earlier one intact) */
    FioWriter w;
    char err[9000];
    if (fio_create(&w, path, err, sizeof err)) fio_fail(PROG, "--dump: %s", err);
    FILE *f = w.f;
    fprintf(f, "# 07_transformer forward pass (inference, batch 1). Floats printed with 9\n"
               "# significant digits (enough to give back the exact float32).\n");
    fprintf(f, "config N %d d_model %d d_ff %d h %d d_k %d d_v %d vocab %d max_len %d pre_ln %d pad_id %d\n",
            c->N, c->d_model, c->d_ff, c->h, c->d_k, c->d_v, c->vocab, c->max_len, c->pre_ln, c->pad_id);
    fprintf(f, "src %d:", Ts);
    for (int i = 0; i < Ts; i++) fprintf(f, " %d", src[i]);
    fprintf(f, "\ntgt %d:", Tt);
    for (int i = 0; i < Tt; i++) fprintf(f, " %d", tgt[i]);
    fprintf(f, "\nlogits %d %d   # rows: target positions, columns: vocabulary ids\n", Tt, c->vocab);
    write_matrix(f, model_logits(m), Tt, c->vocab);
    fprintf(f, "logp %d %d   # log-softmax of the logits\n", Tt, c->vocab);
    write_matrix(f, logp, Tt, c->vocab);
    if (with_attn) {
        const char *names[3] = {"encoder.%d.self_attn", "decoder.%d.self_attn", "decoder.%d.cross_attn"};
        AttnKind kinds[3] = {ATTN_ENC_SELF, ATTN_DEC_SELF, ATTN_DEC_CROSS};
        int tq[3] = {Ts, Tt, Tt}, tk[3] = {Ts, Tt, Ts};
        for (int l = 0; l < c->N; l++)
            for (int i = 0; i < 3; i++) {
                fprintf(f, "attention ");
                fprintf(f, names[i], l);
                fprintf(f, " %d %d %d   # heads, queries, keys; head after head\n", c->h, tq[i], tk[i]);
                write_matrix(f, model_attention(m, kinds[i], l), c->h * tq[i], tk[i]);
            }
    }
    if (fio_commit(&w, err, sizeof err)) fio_fail(PROG, "--dump: %s", err);
    printf("  wrote %s (logits%s)\n", path, with_attn ? " and attention weights" : "");
}

/* ---- the run -------------------------------------------------------------- */

typedef struct {
    const char *load, *src_s, *tgt_s, *dump_path;
    int dump_attn;
    const char *batch_path, *grad_path, *adam_path, *st_path, *torch_path;
    float eps_ls;
    int warmup;
} Opts;

static void parse_flags(Opts *o, int argc, char **argv) {
    *o = (Opts){.eps_ls = 0.1f, .warmup = 4000};
    CliOption opts[] = {
        {"--load",      CLI_STRING, &o->load,      "the checkpoint to check (07_transformer --save writes one)", 0, 0},
        {"--src",       CLI_STRING, &o->src_s,     "with --dump: source token ids, e.g. \"3 4 5 6 3 7 2\"", 0, 0},
        {"--tgt",       CLI_STRING, &o->tgt_s,     "with --dump: target token ids, e.g. \"1 8 9\"", 0, 0},
        {"--dump",      CLI_STRING, &o->dump_path, "write logits of the forward pass to this text file", 0, 0},
        {"--dump-attn", CLI_FLAG,   &o->dump_attn, "with --dump: also every attention weight", 0, 0},
        {"--batch-file", CLI_STRING, &o->batch_path, "forward+backward on this batch (format: README.md), dropout off", 0, 0},
        {"--grad-dump", CLI_STRING, &o->grad_path, "with --batch-file: loss, logits and every gradient (safetensors)", 0, 0},
        {"--adam-dump", CLI_STRING, &o->adam_path, "with --batch-file: one Adam step, new weights and moments (safetensors)", 0, 0},
        {"--label-smoothing", CLI_FLOAT, &o->eps_ls, "eps_ls of the --batch-file loss (Sec. 5.4)", 0, 0.99},
        {"--warmup",    CLI_INT,    &o->warmup,    "warmup_steps of the --adam-dump learning rate (Sec. 5.3)", 1, 10000000},
        {"--export-safetensors", CLI_STRING, &o->st_path, "write the weights in the safetensors format", 0, 0},
        {"--export-torch", CLI_STRING, &o->torch_path, "write the weights for torch.nn.Transformer (safetensors)", 0, 0},
    };
    cli_parse(argc, argv, PROG, "chapter 07's model checked against other implementations: dumps and exports",
              opts, CLI_COUNT(opts));
    if (!o->load) cli_fail(PROG, "--load CHECKPOINT is required (build/07_transformer --save writes one)");
    if (!o->dump_path && !o->batch_path && !o->st_path && !o->torch_path)
        cli_fail(PROG, "nothing to do: give --dump, --batch-file, --export-safetensors or --export-torch");
    if ((o->grad_path || o->adam_path) && !o->batch_path) cli_fail(PROG, "--grad-dump and --adam-dump need --batch-file");
    if (o->batch_path && (o->dump_path || o->torch_path))
        cli_fail(PROG, "--batch-file does not combine with --dump or --export-torch; run them one at a time");
    if (o->dump_path && (!o->src_s || !o->tgt_s)) cli_fail(PROG, "--dump needs --src and --tgt");
    if (!o->dump_path && (o->src_s || o->tgt_s || o->dump_attn)) cli_fail(PROG, "--src, --tgt and --dump-attn go with --dump");
    /* every file this run writes must be a file of its own: `--load m.ckpt
     * --export-safetensors m.ckpt` would replace the checkpoint it read */
    const FioArg files[] = {
        {"--load", o->load, FIO_READS},           {"--batch-file", o->batch_path, FIO_READS},
        {"--dump", o->dump_path, FIO_WRITES},     {"--grad-dump", o->grad_path, FIO_WRITES},
        {"--adam-dump", o->adam_path, FIO_WRITES}, {"--export-safetensors", o->st_path, FIO_WRITES},
        {"--export-torch", o->torch_path, FIO_WRITES},
    };
    char err[1400];
    if (fio_check_outputs(files, (int)(sizeof files / sizeof files[0]), err, sizeof err)) cli_fail(PROG, "%s", err);
}

/* --dump and the exports: the checkpoint with room for the given ids */
static void forward_and_export(const Opts *o) {
    char err[512];
    int *src = malloc(MODEL_MAX_LEN * sizeof(int)), *tgt = malloc(MODEL_MAX_LEN * sizeof(int));
    if (!src || !tgt) cli_fail(PROG, "out of memory");
    int Ts = o->src_s ? cli_parse_ids(PROG, "--src", o->src_s, src, MODEL_MAX_LEN) : 1;
    int Tt = o->tgt_s ? cli_parse_ids(PROG, "--tgt", o->tgt_s, tgt, MODEL_MAX_LEN) : 1;
    Model m;
    if (model_load(&m, o->load, 1, Ts, Tt, NULL, NULL, err, sizeof err)) cli_fail(PROG, "--load: %s", err);
    if (o->torch_path && torch_export_check(&m.cfg, err, sizeof err)) cli_fail(PROG, "--export-torch: %s", err);
    printf("loaded %s: %zu parameters\n", o->load, m.params.n);
    if (o->dump_path) {
        if (model_check_tokens(&m.cfg, src, Ts, "--src", err, sizeof err)) cli_fail(PROG, "%s", err);
        if (model_check_tokens(&m.cfg, tgt, Tt, "--tgt", err, sizeof err)) cli_fail(PROG, "%s", err);
        if (model_check_sizes(&m, 1, Ts, Tt, err, sizeof err)) cli_fail(PROG, "%s", err);
        const float *logp = model_forward(&m, src, tgt, 1, Ts, Tt, 0);   /* inference: no dropout */
        dump(&m, logp, src, tgt, Ts, Tt, o->dump_attn, o->dump_path);
    }
    if (o->st_path) {
        int rc = model_export_safetensors(&m, o->st_path, err, sizeof err);
        if (rc) fail_rc(rc, err);
        printf("  wrote the weights to %s (safetensors)\n", o->st_path);
    }
    if (o->torch_path) {   /* PyTorch's own layout: common/io/torch_export.h */
        int rc = model_export_torch(&m, o->torch_path, err, sizeof err);
        if (rc) fail_rc(rc, err);
        printf("  wrote the weights to %s (torch.nn.Transformer's layout, safetensors)\n", o->torch_path);
    }
    model_free(&m);
    free(src), free(tgt);
}

int main(int argc, char **argv) {
    Opts o;
    parse_flags(&o, argc, argv);
    if (o.batch_path) {   /* gradients on demand (tools/parity/grad_dump.c) */
        char err[1024];
        GradJob job = {o.batch_path, o.load, o.grad_path, o.adam_path, o.st_path, o.eps_ls, o.warmup};
        int rc = grad_job_run(&job, err, sizeof err);
        if (rc) fail_rc(rc, err);
    } else {
        forward_and_export(&o);
    }
    return 0;
}

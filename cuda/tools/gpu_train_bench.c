/* gpu_train_bench.c - one training step of the Transformer, CPU vs GPU.
 *
 * The configuration of The Annotated Transformer's copy task (its
 * make_model(V, V, N=2) with the paper's d_model 512, d_ff 2048, h 8, and
 * batches of 80 sequences of 10 tokens, vocabulary 11; P_drop 0.1): two
 * copies of the same Model and Trainer, one on the CPU backend and one
 * moved to the CUDA backend (trainer_to), trained with the same call,
 * copy_train_step (common/task/copy_task.c), on the same copy batches. Prints the
 * milliseconds per step on each, the speed-up and the losses (with the
 * shared dropout masks the first steps agree to float rounding), and
 * says whether the target (GPU step >= 20x faster) is met.
 *
 * Not part of libaiyn.a (it has a main): make links it with
 * build/libaiyn_cuda.so in a CUDA build; cuda/cuda_check.sh runs it.
 *
 *   build/gpu_train_bench [--cpu-steps N] [--gpu-steps N] [--target X]
 *
 * Exit status: 0 target met (or no GPU: nothing to do), 1 below the
 * target or a step failed, 2 for a bad flag.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "model/backend.h"
#include "io/cli.h"
#include "kernels.h"
#include "model/model.h"
#include "ref/optim.h"
#include "model/train.h"
#include "task/copy_task.h"

#define PROG "gpu_train_bench"

int main(int argc, char **argv) {
    int cpu_steps = 3, gpu_steps = 50, B = 80;
    float target = 20.0f;
    uint64_t seed = 1;
    CliOption opts[] = {
        {"--cpu-steps", CLI_INT,   &cpu_steps, "timed CPU steps (after one warm-up step)", 1, 1000},
        {"--gpu-steps", CLI_INT,   &gpu_steps, "timed GPU steps (after one warm-up step)", 1, 100000},
        {"--batch",     CLI_INT,   &B,         "sequences per batch", 1, 4096},
        {"--target",    CLI_FLOAT, &target,    "speed-up the GPU step must reach", 0, 1e6},
        {"--seed",      CLI_U64,   &seed,      "weights, dropout and data seed", 0, 0},
    };
    cli_parse(argc, argv, PROG, "one training step of the copy-task Transformer, CPU vs GPU", opts,
              CLI_COUNT(opts));
    char err[512];
    const Backend *gpu = backend_cuda(err, sizeof err);
    if (!gpu) {
        printf("%s: %s: nothing to compare.\n", PROG, err);
        return 0;
    }
    Config c = config_base();
    c.N = 2, c.vocab = COPY_VOCAB, c.max_len = 64, c.pad_id = COPY_PAD;   /* d_model 512, d_ff 2048, h 8 */
    int T = COPY_LEN;
    TrainHyper hp = train_hyper_paper();
    hp.warmup = 400;   /* the Annotated Transformer's copy task */
    Model m[2];        /* 0 on the CPU, 1 on the GPU: the same weights, batches and masks */
    Trainer t[2];
    for (int d = 0; d < 2; d++) {
        if (model_build(&m[d], &c, B, T, T - 1, seed, err, sizeof err)) cli_fail(PROG, "%s", err);
        if (trainer_init(&t[d], &m[d], &hp, B, T, seed + 1, err, sizeof err)) cli_fail(PROG, "%s", err);
    }
    if (trainer_to(&t[1], gpu, err, sizeof err)) cli_fail(PROG, "%s", err);
    char dev[128];
    printf("%s: N=%d, d_model=%d, d_ff=%d, h=%d, vocab=%d, batch %d x %d tokens, %zu parameters\n"
           "GPU: %s\n", PROG, c.N, c.d_model, c.d_ff, c.h, c.vocab, B, T, m[0].params.n, cuda_describe(dev, sizeof dev));

    /* the same call on both: step 1 warms up (the GPU's loads cuBLAS), then timed steps */
    int steps[2] = {cpu_steps, gpu_steps}, fails = 0;
    float first[2], last[2];
    double ms[2];
    CopyBatch cb;
    if (copy_batch_alloc(&cb, B, T)) cli_fail(PROG, "out of memory");
    for (int d = 0; d < 2; d++) {
        StepStats st;
        fails += copy_train_step(&t[d], &cb, &st) != TRAIN_OK;
        first[d] = st.loss;
        double t0 = clock_wall_s();
        for (int i = 0; i < steps[d]; i++) fails += copy_train_step(&t[d], &cb, &st) != TRAIN_OK;
        ms[d] = 1e3 * (clock_wall_s() - t0) / steps[d];   /* the loss read back waited for the GPU */
        last[d] = st.loss;
    }
    double cpu_ms = ms[0], gpu_ms = ms[1];
    float cpu_first = first[0], cpu_last = last[0], gpu_first = first[1], gpu_last = last[1];

    double speedup = cpu_ms / gpu_ms;
    int met = speedup >= target && !fails;
    printf("CPU step: %9.2f ms   (mean of %d; loss %.3f at step 1 -> %.3f at step %d)\n", cpu_ms, cpu_steps,
           cpu_first, cpu_last, cpu_steps + 1);
    printf("GPU step: %9.3f ms   (mean of %d; loss %.3f at step 1 -> %.3f at step %d)\n", gpu_ms, gpu_steps,
           gpu_first, gpu_last, gpu_steps + 1);
    printf("speed-up: %.1fx (target >= %.0fx): %s%s\n", speedup, target, met ? "MET" : "NOT MET",
           fails ? "; a step reported NaN/inf" : "");
    printf("step 1 loss, GPU vs CPU (same weights, batch and dropout masks): %.7g vs %.7g\n", gpu_first, cpu_first);
    copy_batch_free(&cb);
    for (int d = 0; d < 2; d++) trainer_free(&t[d]), model_free(&m[d]);
    return met ? 0 : 1;
}

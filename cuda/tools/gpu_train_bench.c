/* gpu_train_bench.c - one training step of the Transformer, CPU vs GPU.
 *
 * The configuration of The Annotated Transformer's copy task (its
 * make_model(V, V, N=2) with the paper's d_model 512, d_ff 2048, h 8, and
 * batches of 80 sequences of 10 tokens, vocabulary 11; P_drop 0.1): the
 * same Model trained with train_step (common/train.c) and with
 * gpu_train_step (cuda/model_gpu.c) on the same copy batches. Prints the
 * milliseconds per step on each, the speed-up and the losses (both must
 * fall; they are not equal, the dropout masks differ), and says whether
 * the target (GPU step >= 20x faster) is met.
 *
 * Not part of libaiyn.a (it has a main): cuda/cuda_check.sh builds it.
 *
 *   build/gpu_train_bench [--cpu-steps N] [--gpu-steps N] [--target X]
 *
 * Exit status: 0 target met (or no GPU: nothing to do), 1 below the
 * target or a step failed, 2 for a bad flag.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"
#include "device.h"
#include "kernels.h"
#include "model.h"
#include "model_gpu.h"
#include "optim.h"
#include "train.h"

#define PROG "gpu_train_bench"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

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
    if (!device_cuda_available()) {
        printf("%s: no CUDA GPU (or no CUDA in this build): nothing to compare.\n", PROG);
        return 0;
    }
    Config c = config_base();
    c.N = 2, c.vocab = COPY_VOCAB, c.max_len = 64, c.pad_id = COPY_PAD;   /* d_model 512, d_ff 2048, h 8 */
    int T = COPY_LEN;
    char err[512];
    Model m;
    if (model_build(&m, &c, B, T, T - 1, seed, err, sizeof err)) cli_fail(PROG, "%s", err);
    TrainHyper hp = train_hyper_paper();
    hp.warmup = 400;   /* the Annotated Transformer's copy task */
    Trainer t;
    if (trainer_init(&t, &m, &hp, B, T, seed + 1, err, sizeof err)) cli_fail(PROG, "%s", err);
    GpuModel *g;   /* built before the CPU trains: both start from the same weights */
    if (gpu_model_build(&g, &m, err, sizeof err)) cli_fail(PROG, "%s", err);
    char dev[128];
    printf("%s: N=%d, d_model=%d, d_ff=%d, h=%d, vocab=%d, batch %d x %d tokens, %zu parameters\n"
           "GPU: %s\n", PROG, c.N, c.d_model, c.d_ff, c.h, c.vocab, B, T, m.params.n, cuda_describe(dev, sizeof dev));

    /* CPU: train_step draws its own copy batches from the trainer's RNG */
    StepStats st;
    int fails = 0;
    float cpu_first = 0, cpu_last = 0;
    fails += train_step(&t, &st) != TRAIN_OK;   /* warm-up */
    cpu_first = st.loss;
    double t0 = now_s();
    for (int i = 0; i < cpu_steps; i++) fails += train_step(&t, &st) != TRAIN_OK;
    double cpu_ms = 1e3 * (now_s() - t0) / cpu_steps;
    cpu_last = st.loss;

    /* GPU: the same kind of batches from a fresh stream with the same seed */
    Rng data;
    rng_seed(&data, seed + 1);
    int *src = malloc((size_t)B * T * sizeof(int)), *tin = malloc((size_t)B * (T - 1) * sizeof(int));
    int *tout = malloc((size_t)B * (T - 1) * sizeof(int));
    if (!src || !tin || !tout) cli_fail(PROG, "out of memory");
    float gpu_first = 0, gpu_last = 0;
    double gpu_ms = 0;
    for (int step = 1; step <= gpu_steps + 1; step++) {
        if (step == 2) t0 = now_s();   /* step 1 is the warm-up (cuBLAS loads) */
        copy_batch(src, tin, tout, B, T, c.vocab, &data);
        float lr = lr_schedule(step, c.d_model, hp.warmup, hp.factor);
        fails += gpu_train_step(g, src, tin, tout, B, T, T - 1, &hp, lr, step, &st) != TRAIN_OK;
        if (step == 1) gpu_first = st.loss;
    }
    cuda_sync();
    gpu_ms = 1e3 * (now_s() - t0) / gpu_steps;
    gpu_last = st.loss;

    double speedup = cpu_ms / gpu_ms;
    int met = speedup >= target && !fails;
    printf("CPU step: %9.2f ms   (mean of %d; loss %.3f at step 1 -> %.3f at step %d)\n", cpu_ms, cpu_steps,
           cpu_first, cpu_last, cpu_steps + 1);
    printf("GPU step: %9.3f ms   (mean of %d; loss %.3f at step 1 -> %.3f at step %d)\n", gpu_ms, gpu_steps,
           gpu_first, gpu_last, gpu_steps + 1);
    printf("speed-up: %.1fx (target >= %.0fx): %s%s\n", speedup, target, met ? "MET" : "NOT MET",
           fails ? "; a step reported NaN/inf" : "");
    gpu_model_free(g);
    trainer_free(&t);
    model_free(&m);
    free(src), free(tin), free(tout);
    cuda_release();
    return met ? 0 : 1;
}

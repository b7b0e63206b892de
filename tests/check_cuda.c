/* check_cuda.c - the CUDA kernels against the CPU functions they mirror.
 *
 * Each loop iteration runs one check of cuda/selftest.c at its small size:
 * random inputs from a fixed seed, the CPU function, every GPU version of
 * the op, and an assertion that the largest difference is within float32
 * tolerance (the message names the op, the sizes and the difference).
 *
 * "Model" checks the whole GpuModel (cuda/model_gpu.h) against the CPU
 * Model on a tiny config, post-LN and pre-LN, with padding in the batch:
 * logp and attention weights of a forward pass, every gradient of a
 * backward pass, and loss, gradient norm, parameters and Adam moments after
 * three training steps (P_drop = 0, so both sides compute the same thing);
 * then dropout, a NaN weight, and the one-op helpers the chapters use.
 *
 * Without a CUDA build or without a GPU there is nothing to run: the tests
 * say "skipped" once and pass, so the suite is the same on every machine.
 * No CUDA call is made while the suite is built: Check forks a process per
 * test, and a CUDA context does not survive a fork.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "kernels.h"
#include "model_gpu.h"
#include "optim.h"
#include "testutil.h"

/* device_select resolves "cuda" to what can run, on any build and machine */
START_TEST(test_device_select) {
    Device d = DEVICE_CUDA;
    ck_assert_int_eq(device_select("cpu", &d), 0);
    ck_assert_int_eq(d, DEVICE_CPU);
    ck_assert_int_eq(device_select("gpu", &d), -1);
    ck_assert_int_eq(device_select("cuda", &d), 0);
    ck_assert_int_eq(d, device_cuda_available() ? DEVICE_CUDA : DEVICE_CPU);
    ck_assert_str_eq(device_name(DEVICE_CUDA), "cuda");
    ck_assert_int_eq(device_cuda_built(),
#ifdef USE_CUDA
                     1
#else
                     0
#endif
    );
}
END_TEST

#ifdef USE_CUDA

START_TEST(test_kernel_matches_cpu) {
    if (!device_cuda_available()) {
        if (_i == 0) printf("cuda: skipped: built with CUDA, but no CUDA GPU found\n");
        return;
    }
    CudaCheck res[16];
    int n = cuda_selftest_run(_i, 0, res, 16);
    ck_assert_int_gt(n, 0);
    for (int k = 0; k < n; k++) {
        ck_assert_msg(res[k].pass, "%s: max |gpu - cpu| = %.3g > tolerance %.3g at %s",
                      res[k].name, res[k].max_diff, res[k].tol, res[k].detail);
    }
    cuda_release();
}
END_TEST

/* ---- the whole model: GpuModel vs Model ----------------------------------------- */

/* N=2, d_model 16, d_ff 24, h 2, d_k 8, d_v 4 (d_v != d_k catches a mixed-up
 * shape), vocab 13, padding id 0. */
static Config tiny_config(int pre_ln, float dropout) {
    Config c = {.N = 2, .d_model = 16, .d_ff = 24, .h = 2, .d_k = 8, .d_v = 4, .vocab = 13,
                .max_len = 12, .dropout = dropout, .pre_ln = pre_ln, .pad_id = 0};
    return c;
}

/* 1 if there is a GPU; otherwise 0, saying so if say (once per suite) */
static int gpu_or_skip(int say) {
    if (device_cuda_available()) return 1;
    if (say) printf("cuda: model: skipped: built with CUDA, but no CUDA GPU found\n");
    return 0;
}

/* per named tensor: max |got - want| <= tol * max(1, max |want|); names the tensor */
static void assert_params_close(const Params *got, const Params *want, double tol, const char *what) {
    for (int i = 0; i < want->n_tensors; i++) {
        const NamedTensor *t = &want->tensors[i];
        size_t n = named_tensor_numel(t);
        double scale = 1.0;
        for (size_t j = 0; j < n; j++) scale = fmax(scale, fabs(t->data[j]));
        Diff d = diff_arrays(got->tensors[i].data, t->data, n);
        ck_assert_msg(d.max_abs <= tol * scale, "%s %s: max |gpu - cpu| = %.3g at %zu (tolerance %.3g)",
                      what, t->name, d.max_abs, d.where, tol * scale);
    }
}

/* src (3,6) and tgt (3,5), padding (id 0) at the ends of rows 1 and 2 */
static const int SRC[3 * 6] = {1, 5, 6, 7, 8, 9, 1, 4, 4, 2, 0, 0, 1, 12, 3, 0, 0, 0};
static const int TGT[3 * 5] = {1, 5, 6, 7, 8, 1, 4, 4, 0, 0, 1, 12, 3, 11, 0};

/* _i = 0 post-LN (the paper), 1 pre-LN */
START_TEST(test_model_forward_backward) {
    if (!gpu_or_skip(_i == 0)) return;
    char err[256];
    Config c = tiny_config(_i, 0.1f);
    Model m, back;   /* back: receives the GPU's gradients (same layout) */
    ck_assert_msg(model_build(&m, &c, 3, 6, 5, 7, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_build(&back, &c, 1, 1, 1, 7, err, sizeof err) == 0, "%s", err);
    GpuModel *g;
    ck_assert_msg(gpu_model_build(&g, &m, err, sizeof err) == 0, "%s", err);
    int B = 3, Ts = 6, Tt = 5, V = c.vocab;
    size_t nl = (size_t)B * Tt * V;
    float *logp = malloc(nl * sizeof(float)), *dlogits = malloc(nl * sizeof(float));
    float *w = malloc((size_t)B * c.h * Ts * Ts * sizeof(float));

    /* forward (inference): logp and every layer's attention weights */
    const float *cpu = model_forward(&m, SRC, TGT, B, Ts, Tt, 0);
    gpu_model_forward(g, SRC, TGT, B, Ts, Tt, 0);
    gpu_model_logp(g, logp);
    ck_assert_close_arrays(logp, cpu, nl, 1e-4);
    AttnKind kinds[3] = {ATTN_ENC_SELF, ATTN_DEC_SELF, ATTN_DEC_CROSS};
    size_t nw[3] = {(size_t)B * c.h * Ts * Ts, (size_t)B * c.h * Tt * Tt, (size_t)B * c.h * Tt * Ts};
    for (int l = 0; l < c.N; l++)
        for (int k = 0; k < 3; k++) {
            gpu_model_attention(g, kinds[k], l, w);
            ck_assert_close_arrays(w, model_attention(&m, kinds[k], l), nw[k], 1e-5);
        }

    /* backward from the same dlogits: every gradient, tensor by tensor */
    Rng rng;
    rng_seed(&rng, 11);
    rng_fill_uniform(&rng, dlogits, nl, -1.0f, 1.0f);
    model_zero_grad(&m);
    model_backward(&m, dlogits);
    float *d_dlogits = cuda_alloc(nl * sizeof(float));
    cuda_upload(d_dlogits, dlogits, nl * sizeof(float));
    gpu_model_zero_grad(g);
    gpu_model_backward(g, d_dlogits);
    gpu_model_download_grads(g, &back);
    assert_params_close(&back.grads, &m.grads, 1e-4, "gradient of");

    /* a smaller batch uses the front of the same buffers */
    cpu = model_forward(&m, SRC, TGT, 2, 4, 3, 0);
    gpu_model_forward(g, SRC, TGT, 2, 4, 3, 0);
    gpu_model_logp(g, logp);
    ck_assert_close_arrays(logp, cpu, (size_t)2 * 3 * V, 1e-4);

    cuda_free(d_dlogits);
    free(logp), free(dlogits), free(w);
    gpu_model_free(g);
    model_free(&m);
    model_free(&back);
    cuda_release();
}
END_TEST

/* Three Adam steps on copy batches with P_drop = 0: loss and gradient norm
 * each step, then parameters and Adam moments. The rate is small (factor
 * 0.1, warmup 10): float32 noise in a gradient near 0 cannot move a weight
 * far. _i = 0 post-LN, 1 pre-LN. */
START_TEST(test_model_train_steps) {
    if (!gpu_or_skip(0)) return;
    char err[256];
    Config c = tiny_config(_i, 0.0f);
    Model m, back;
    ck_assert_msg(model_build(&m, &c, 3, 6, 5, 5, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_build(&back, &c, 1, 1, 1, 5, err, sizeof err) == 0, "%s", err);
    GpuModel *g;
    ck_assert_msg(gpu_model_build(&g, &m, err, sizeof err) == 0, "%s", err);
    TrainHyper hp = train_hyper_paper();
    hp.warmup = 10, hp.factor = 0.1f;
    Trainer t;
    ck_assert_msg(trainer_init(&t, &m, &hp, 3, 6, 1, err, sizeof err) == 0, "%s", err);
    int src[18], tin[15], tout[15];
    Rng data;
    rng_seed(&data, 3);
    for (int step = 1; step <= 3; step++) {
        copy_batch(src, tin, tout, 3, 6, c.vocab, &data);
        StepStats sc, sg;
        ck_assert_int_eq(train_step_batch(&t, src, tin, tout, 3, 6, 5, &sc), TRAIN_OK);
        float lr = lr_schedule(step, c.d_model, hp.warmup, hp.factor);
        ck_assert_int_eq(gpu_train_step(g, src, tin, tout, 3, 6, 5, &hp, lr, step, &sg), TRAIN_OK);
        ck_assert_msg(fabsf(sg.loss - sc.loss) <= 1e-5f * sc.loss, "step %d: loss gpu %.7g, cpu %.7g",
                      step, sg.loss, sc.loss);
        ck_assert_msg(fabsf(sg.grad_norm - sc.grad_norm) <= 1e-4f * sc.grad_norm,
                      "step %d: grad norm gpu %.7g, cpu %.7g", step, sg.grad_norm, sc.grad_norm);
        ck_assert_int_eq(sg.n_tokens, sc.n_tokens);
        ck_assert(sg.lr == lr);
    }
    gpu_model_download_params(g, &back);
    assert_params_close(&back.params, &m.params, 1e-4, "after 3 steps, parameter");
    float *am = malloc(t.n * sizeof(float)), *av = malloc(t.n * sizeof(float));
    gpu_model_download_adam(g, am, av);
    ck_assert_close_arrays(am, t.adam_m, t.n, 1e-5);
    ck_assert_close_arrays(av, t.adam_v, t.n, 1e-7);
    free(am), free(av);
    trainer_free(&t);
    gpu_model_free(g);
    model_free(&m);
    model_free(&back);
    cuda_release();
}
END_TEST

/* A NaN weight: the step says so and changes nothing, as on the CPU. */
START_TEST(test_model_train_nan) {
    if (!gpu_or_skip(0)) return;
    char err[256];
    Config c = tiny_config(0, 0.1f);
    Model m, back;
    ck_assert_msg(model_build(&m, &c, 3, 6, 5, 5, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_build(&back, &c, 1, 1, 1, 5, err, sizeof err) == 0, "%s", err);
    m.params.enc[0].ffn_b2[0] = NAN;
    GpuModel *g;
    ck_assert_msg(gpu_model_build(&g, &m, err, sizeof err) == 0, "%s", err);
    TrainHyper hp = train_hyper_paper();
    StepStats st;
    ck_assert_int_eq(gpu_train_step(g, SRC, TGT, TGT, 3, 6, 5, &hp, 1e-3f, 1, &st), TRAIN_NONFINITE_LOSS);
    gpu_model_download_params(g, &back);
    ck_assert(isnan(back.params.enc[0].ffn_b2[0]));
    back.params.enc[0].ffn_b2[0] = m.params.enc[0].ffn_b2[0] = 0.0f;
    ck_assert_close_arrays(back.params.mem, m.params.mem, m.params.n, 0.0);
    gpu_model_free(g);
    model_free(&m);
    model_free(&back);
    cuda_release();
}
END_TEST

/* Dropout on the GPU (its own random stream): inference passes agree,
 * training passes differ from them and from each other, and a training
 * step with P_drop = 0.1 stays finite. */
START_TEST(test_model_dropout) {
    if (!gpu_or_skip(0)) return;
    char err[256];
    Config c = tiny_config(0, 0.1f);
    Model m;
    ck_assert_msg(model_build(&m, &c, 3, 6, 5, 5, err, sizeof err) == 0, "%s", err);
    GpuModel *g;
    ck_assert_msg(gpu_model_build(&g, &m, err, sizeof err) == 0, "%s", err);
    size_t nl = (size_t)3 * 5 * c.vocab;
    float *a = malloc(nl * sizeof(float)), *b = malloc(nl * sizeof(float));
    gpu_model_forward(g, SRC, TGT, 3, 6, 5, 0), gpu_model_logp(g, a);
    gpu_model_forward(g, SRC, TGT, 3, 6, 5, 0), gpu_model_logp(g, b);
    ck_assert_close_arrays(a, b, nl, 0.0);
    gpu_model_forward(g, SRC, TGT, 3, 6, 5, 1), gpu_model_logp(g, b);
    ck_assert_msg(diff_arrays(a, b, nl).max_abs > 1e-3, "dropout changed nothing");
    gpu_model_forward(g, SRC, TGT, 3, 6, 5, 1), gpu_model_logp(g, a);
    ck_assert_msg(diff_arrays(a, b, nl).max_abs > 1e-3, "two training passes drew the same masks");
    TrainHyper hp = train_hyper_paper();
    StepStats st;
    ck_assert_int_eq(gpu_train_step(g, SRC, TGT, TGT, 3, 6, 5, &hp, 1e-3f, 1, &st), TRAIN_OK);
    ck_assert(isfinite(st.loss) && st.loss > 0 && isfinite(st.grad_norm) && st.grad_norm > 0);
    free(a), free(b);
    gpu_model_free(g);
    model_free(&m);
    cuda_release();
}
END_TEST

/* The one-op helpers the chapters call, with causal + padding masks and a
 * sequence whose every key is blocked (zero rows, no NaN). */
START_TEST(test_host_helpers) {
    if (!gpu_or_skip(0)) return;
    enum { B = 2, H = 2, T = 5, DK = 4, DM = 8 };
    Rng rng;
    rng_seed(&rng, 9);
    float Q[B * H * T * DK], K[B * H * T * DK], V[B * H * T * DK];
    rng_fill_normal(&rng, Q, B * H * T * DK, 0, 1), rng_fill_normal(&rng, K, B * H * T * DK, 0, 1);
    rng_fill_normal(&rng, V, B * H * T * DK, 0, 1);
    uint8_t mask[B * T * T], pad[B * T * T];
    int len[B] = {5, 0};
    mask_causal(mask, B, T, T), mask_padding(pad, len, B, T, T), mask_and(mask, pad, B * T * T);
    float out[B * H * T * DK], w[B * H * T * T], out_g[B * H * T * DK], w_g[B * H * T * T];
    char err[128];
    sdpa_forward(out, w, Q, K, V, mask, B, H, T, T, DK, DK);
    ck_assert_int_eq(gpu_sdpa_forward_host(out_g, w_g, Q, K, V, mask, B, H, T, T, DK, DK, err, sizeof err), 0);
    ck_assert_close_arrays(out_g, out, (size_t)B * H * T * DK, 1e-5);
    ck_assert_close_arrays(w_g, w, (size_t)B * H * T * T, 1e-6);

    float x[B * T * DM], wbuf[4 * DM * DM], o[B * T * DM], o_g[B * T * DM];
    float *acts = malloc(mha_acts_size(B, T, T, H, DK, DK) * sizeof(float));
    rng_fill_normal(&rng, x, B * T * DM, 0, 1), rng_fill_normal(&rng, wbuf, 4 * DM * DM, 0, 0.3f);
    MhaParams p = {wbuf, wbuf + DM * DM, wbuf + 2 * DM * DM, wbuf + 3 * DM * DM};
    MhaActs a;
    mha_acts_layout(&a, acts, B, T, T, H, DK, DK);
    mha_forward(o, &a, &p, x, x, mask, B, T, T, DM, H, DK, DK);
    ck_assert_int_eq(gpu_mha_forward_host(o_g, w_g, &p, x, x, mask, B, T, T, DM, H, DK, DK, err, sizeof err), 0);
    ck_assert_close_arrays(o_g, o, (size_t)B * T * DM, 1e-5);
    ck_assert_close_arrays(w_g, a.weights, (size_t)B * H * T * T, 1e-6);
    free(acts);
    cuda_release();
}
END_TEST

Suite *cuda_suite(void) {
    Suite *s = suite_create("cuda");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);   /* the first CUDA call in a process can take seconds */
    tcase_add_test(core, test_device_select);
    tcase_add_loop_test(core, test_kernel_matches_cpu, 0, cuda_selftest_count());
    suite_add_tcase(s, core);
    TCase *model = tcase_create("Model");
    tcase_set_timeout(model, 60);
    tcase_add_loop_test(model, test_model_forward_backward, 0, 2);   /* post-LN, pre-LN */
    tcase_add_loop_test(model, test_model_train_steps, 0, 2);
    tcase_add_test(model, test_model_train_nan);
    tcase_add_test(model, test_model_dropout);
    tcase_add_test(model, test_host_helpers);
    suite_add_tcase(s, model);
    return s;
}

#else

START_TEST(test_skipped_without_cuda) {
    ck_assert_int_eq(device_cuda_available(), 0);
    /* the GPU model's functions link and say why they cannot run */
    char err[128] = "";
    GpuModel *g = (GpuModel *)err;
    Model m;
    memset(&m, 0, sizeof m);
    ck_assert_int_eq(gpu_model_build(&g, &m, err, sizeof err), 2);
    ck_assert_ptr_null(g);
    ck_assert_ptr_nonnull(strstr(err, "no CUDA"));
    gpu_model_free(NULL);
    float x = 0;
    ck_assert_int_eq(gpu_sdpa_forward_host(&x, &x, &x, &x, &x, NULL, 1, 1, 1, 1, 1, 1, err, sizeof err), 2);
    printf("cuda: skipped: this build has no CUDA (nvcc not found, or CUDA=0)\n");
}
END_TEST

Suite *cuda_suite(void) {
    Suite *s = suite_create("cuda");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_device_select);
    tcase_add_test(core, test_skipped_without_cuda);
    suite_add_tcase(s, core);
    return s;
}

#endif

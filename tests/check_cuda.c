/* check_cuda.c - the CUDA backend against the CPU backend.
 *
 * One model (common/model/model.c), two backend tables (common/model/backend.h). Each
 * "Model" test builds the same model twice, moves one copy to the other
 * backend with model_to / trainer_to, makes the same calls on both, and
 * compares what comes back:
 *   _i bit 0: 0 post-LN (the paper), 1 pre-LN
 *   _i bit 1: 0 the host shim (build/libaiyn_cuda_shim.so: the CUDA
 *             backend's own code, backend_cuda.c, with every kernel done by
 *             its CPU function; runs on every machine), 1 the real GPU
 *             (build/libaiyn_cuda.so; a counted skip without one).
 * The shim checks the host side of the GPU path (the table, the workspace,
 * attention and the FFN composed from kernels, the buffers the counting
 * pass sizes, uploads and downloads, dlopen); the GPU run adds the kernels.
 * Dropout is ON (P_drop = 0.1) in the training test: both backends draw
 * dropout_mask.h's masks, so they must agree.
 *
 * "Core": device selection on any build; both tables complete, with this
 * build's ABI; the ops that stand for the model's former gemm calls against
 * plain loops, shim and CPU bit for bit; and on a GPU every kernel of
 * cuda/selftest.c against its CPU function.
 *
 * Check forks a process per test, and a CUDA context does not survive a
 * fork: nothing here touches CUDA while the suite is being built.
 */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/backend.h"
#include "ref/attention.h"
#include "fast/attention_fast.h"
#include "model/decode.h"
#include "model/device.h"
#include "kernels.h"
#include "model/model.h"
#include "ref/optim.h"
#include "testutil.h"
#include "model/train.h"
#include "task/copy_task.h"

/* device_select resolves "cuda" to what can run, on any build and machine */
START_TEST(test_device_select) {
    Device d = DEVICE_CUDA;
    ck_assert_int_eq(device_select("cpu", &d), 0);
    ck_assert_int_eq(d, DEVICE_CPU);
    ck_assert_int_eq(device_select("gpu", &d), -1);
    ck_assert_int_eq(device_select("cuda", &d), 0);
    ck_assert_int_eq(d, device_cuda_available() ? DEVICE_CUDA : DEVICE_CPU);
    ck_assert_str_eq(device_name(DEVICE_CUDA), "cuda");
    ck_assert_ptr_eq(backend_select("cpu"), backend_cpu());
    ck_assert_ptr_null(backend_select("tpu"));
    ck_assert_ptr_nonnull(backend_select("cuda"));   /* the GPU, or the CPU after one note */
}
END_TEST

/* The CPU path does not pay for CUDA: a model built and run on the CPU
 * backend maps no CUDA library (the programs do not link cudart or cuBLAS;
 * only --device cuda opens libaiyn_cuda.so). Checked in this test's own
 * process, which Check forks before anything opens the backend; with
 * CK_FORK=no earlier tests may have opened it, so then it is a counted skip. */
START_TEST(test_cpu_maps_no_cuda) {
    const char *fork_env = getenv("CK_FORK");
    if (fork_env && !strcmp(fork_env, "no")) {
        test_skip("cuda", "the maps check under CK_FORK=no (earlier tests may have opened the backend)");
        return;
    }
    char err[256];
    Config c = test_config(1, 8, 8, 2, 4, 4, 13, 8, 0.1f);
    Model m;
    ck_assert_msg(model_build(&m, &c, 1, 4, 3, 1, err, sizeof err) == 0, "%s", err);
    int src[4] = {1, 5, 6, 7}, tgt[3] = {1, 5, 6};
    model_forward(&m, src, tgt, 1, 4, 3, 1);
    ck_assert_ptr_eq(m.be, backend_cpu());
    model_free(&m);
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;   /* not Linux: nothing to read */
    char line[1024];
    while (fgets(line, sizeof line, f))
        ck_assert_msg(!strstr(line, "libcudart") && !strstr(line, "libcublas"),
                      "a CPU run mapped a CUDA library: %s", line);
    fclose(f);
}
END_TEST

/* A missing .so is a plain error naming the file, not a crash. */
START_TEST(test_missing_library) {
    char err[512] = "";
    ck_assert_ptr_null(backend_open("/nonexistent/libaiyn_cuda.so", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/libaiyn_cuda.so"));
}
END_TEST

/* "cpu" gets the CPU; "cuda" on a machine without a GPU says so once. */

typedef int (*SelftestCount)(void);
typedef int (*SelftestRun)(int, int, CudaCheck *, int);

START_TEST(test_kernel_matches_cpu) {
    char err[512];
    if (!backend_cuda(err, sizeof err)) {
        test_skip("cuda", "a GPU kernel check: %s", err);
        return;
    }
    SelftestCount count = (SelftestCount)backend_cuda_symbol("cuda_selftest_count");
    SelftestRun run = (SelftestRun)backend_cuda_symbol("cuda_selftest_run");
    ck_assert(count && run);
    ck_assert_msg(count() <= 16, "selftest.c has %d checks; raise the loop bound in cuda_suite", count());
    if (_i >= count()) return;
    CudaCheck res[16];
    int n = run(_i, 0, res, 16);
    ck_assert_int_gt(n, 0);
    for (int k = 0; k < n; k++)
        ck_assert_msg(res[k].pass, "%s: max |gpu - cpu| = %.3g > tolerance %.3g at %s",
                      res[k].name, res[k].max_diff, res[k].tol, res[k].detail);
}
END_TEST

/* ---- the model on two backends ------------------------------------------------- */

/* The backend _i asks for, or NULL (a counted skip, saying why) when
 * there is none; the host shim is always there. */
static const Backend *other_backend(int i) {
    char err[512], path[1024];
    const Backend *be;
    if (i & 2) {
        be = backend_cuda(err, sizeof err);
    } else {
        snprintf(path, sizeof path, "%s/libaiyn_cuda_shim.so", build_dir());
        be = backend_open(path, err, sizeof err);
    }
    if (!be && (i & 2)) test_skip("cuda", "the model on the GPU: %s", err);
    /* the shim must always be there: make test builds it */
    if (!(i & 2)) ck_assert_msg(be != NULL, "the host shim did not load: %s", err);
    return be;
}

/* N=2, d_model 16, d_ff 24, h 2, d_k 8, d_v 4 (d_v != d_k catches a mixed-up
 * shape), vocab 13, padding id 0. */
static Config tiny_config(int pre_ln, float dropout) {
    Config c = test_config(2, 16, 24, 2, 8, 4, 13, 12, dropout);
    c.pre_ln = pre_ln;
    return c;
}

/* per named tensor: max |got - want| <= tol * max(1, max |want|); names the tensor */
static void assert_params_close(const Params *got, const Params *want, double tol, const char *what) {
    for (int i = 0; i < want->n_tensors; i++) {
        const NamedTensor *t = &want->tensors[i];
        size_t n = named_tensor_numel(t);
        double scale = 1.0;
        for (size_t j = 0; j < n; j++) scale = fmax(scale, fabs(t->data[j]));
        Diff d = diff_arrays(got->tensors[i].data, t->data, n);
        ck_assert_msg(d.max_abs <= tol * scale, "%s %s: max |other - cpu| = %.3g at %zu (tolerance %.3g)",
                      what, t->name, d.max_abs, d.where, tol * scale);
    }
}

/* src (3,6) and tgt (3,5), padding (id 0) at the ends of rows 1 and 2 */
static const int SRC[3 * 6] = {1, 5, 6, 7, 8, 9, 1, 4, 4, 2, 0, 0, 1, 12, 3, 0, 0, 0};
static const int TGT[3 * 5] = {1, 5, 6, 7, 8, 1, 4, 4, 0, 0, 1, 12, 3, 11, 0};

/* forward (inference and training) and backward: logp, attention weights,
 * every gradient; then a smaller batch in the same buffers */
START_TEST(test_model_forward_backward) {
    const Backend *be = other_backend(_i);
    if (!be) return;
    char err[512];
    Config c = tiny_config(_i & 1, 0.1f);
    c.pos = (_i & 1) ? POS_LEARNED : POS_SINUSOID;   /* pre-LN runs with Table 3 (E)'s learned PE */
    Model m, g;   /* g: the same model on the other backend */
    ck_assert_msg(model_build(&m, &c, 3, 6, 5, 7, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_build(&g, &c, 3, 6, 5, 7, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_to(&g, be, err, sizeof err) == 0, "%s", err);
    int B = 3, Ts = 6, Tt = 5, V = c.vocab;
    size_t nl = (size_t)B * Tt * V;
    float *logp = malloc(nl * sizeof(float)), *dlogits = malloc(nl * sizeof(float));
    float *w = malloc((size_t)B * c.h * Ts * Ts * sizeof(float));

    for (int training = 0; training <= 1; training++) {
        const float *cpu = model_forward(&m, SRC, TGT, B, Ts, Tt, training);
        model_read(&g, logp, model_forward(&g, SRC, TGT, B, Ts, Tt, training), nl * sizeof(float));
        ck_assert_close_arrays(logp, cpu, nl, 1e-4);
    }
    AttnKind kinds[3] = {ATTN_ENC_SELF, ATTN_DEC_SELF, ATTN_DEC_CROSS};
    size_t nw[3] = {(size_t)B * c.h * Ts * Ts, (size_t)B * c.h * Tt * Tt, (size_t)B * c.h * Tt * Ts};
    for (int l = 0; l < c.N; l++)
        for (int k = 0; k < 3; k++) {
            model_read(&g, w, model_attention(&g, kinds[k], l), nw[k] * sizeof(float));
            ck_assert_close_arrays(w, model_attention(&m, kinds[k], l), nw[k], 1e-5);
        }

    /* backward of the training pass from the same dlogits: every gradient */
    Rng rng;
    rng_seed(&rng, 11);
    rng_fill_uniform(&rng, dlogits, nl, -1.0f, 1.0f);
    model_zero_grad(&m);
    model_backward(&m, dlogits);
    float *d_dlogits = be->alloc(nl * sizeof(float));
    be->upload(d_dlogits, dlogits, nl * sizeof(float));
    model_zero_grad(&g);
    model_backward(&g, d_dlogits);
    model_pull(&g);
    assert_params_close(&g.grads, &m.grads, 1e-4, "gradient of");

    /* a smaller batch uses the front of the same buffers */
    const float *cpu = model_forward(&m, SRC, TGT, 2, 4, 3, 0);
    model_read(&g, logp, model_forward(&g, SRC, TGT, 2, 4, 3, 0), (size_t)2 * 3 * V * sizeof(float));
    ck_assert_close_arrays(logp, cpu, (size_t)2 * 3 * V, 1e-4);

    be->free(d_dlogits);
    free(logp), free(dlogits), free(w);
    model_free(&m);
    model_free(&g);
}
END_TEST

/* Decoding (common/model/decode.h) on the other backend: greedy and beam search,
 * cached (the step's ops through be: the row products, the cached
 * attention, the cache's append and reorder as gather_rows) and uncached
 * (model_decode on be, read back with model_read). The same tokens, the
 * same beam tree, log-probabilities within 1e-5 of the CPU backend's. */
START_TEST(test_model_decode) {
    const Backend *be = other_backend(_i);
    if (!be) return;
    char err[512];
    Config c = tiny_config(_i & 1, 0.1f);
    enum { B = 3, Ts = 6, K = 3, OFF = 3 };
    Model m, g;
    /* uncached decoding runs every beam as its own sequence: B*K rows */
    ck_assert_msg(model_build(&m, &c, B * K, Ts, Ts + OFF, 9, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_build(&g, &c, B * K, Ts, Ts + OFF, 9, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_to(&g, be, err, sizeof err) == 0, "%s", err);
    Decoder dm, dg;
    ck_assert_msg(decoder_new(&dm, &m, B, K, Ts, Ts + OFF, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(decoder_new(&dg, &g, B, K, Ts, Ts + OFF, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_eq(dg.be, be);
    int T = dm.max_T;
    for (int beam = 0; beam <= 1; beam++)
        for (int cached = 1; cached >= 0; cached--) {
            DecodeOpts o = decode_opts_paper(1, 2);   /* start 1, end 2 */
            o.beam = beam ? K : 1, o.offset = OFF, o.cached = cached;
            int (*search)(Decoder *, const DecodeOpts *, const int *, int, int, char *, size_t) =
                beam ? decode_beam : decode_greedy;
            ck_assert_msg(search(&dm, &o, SRC, B, Ts, err, sizeof err) == 0, "%s", err);
            ck_assert_msg(search(&dg, &o, SRC, B, Ts, err, sizeof err) == 0, "%s", err);
            ck_assert_int_eq(dg.steps, dm.steps);
            for (int b = 0; b < B; b++) {
                ck_assert_int_eq(dg.out_len[b], dm.out_len[b]);
                for (int j = 0; j < T; j++)
                    ck_assert_msg(dg.out[b * T + j] == dm.out[b * T + j], "%s %s sentence %d token %d: %d, cpu %d",
                                  beam ? "beam" : "greedy", cached ? "cached" : "uncached", b, j,
                                  dg.out[b * T + j], dm.out[b * T + j]);
                ck_assert_float_eq_tol(dg.out_sum[b], dm.out_sum[b], 1e-5);
                ck_assert_float_eq_tol(dg.out_score[b], dm.out_score[b], 1e-5);
            }
            ck_assert_close_arrays(dg.out_lp, dm.out_lp, (size_t)B * T, 1e-5);
            /* the last step's next-token log-probs and cross-attention, as the host reads them */
            ck_assert_close_arrays(dg.logp, dm.logp, (size_t)dm.R * c.vocab, 1e-5);
            ck_assert_close_arrays(dg.cross_w, dm.cross_w, (size_t)c.N * dm.R * c.h * Ts, 1e-5);
            if (beam)
                for (int t = 0; t < dm.steps; t++)
                    for (int r = 0; r < dm.R; r++) {
                        ck_assert_int_eq(dg.trace[t * dm.R + r].parent, dm.trace[t * dm.R + r].parent);
                        ck_assert_int_eq(dg.trace[t * dm.R + r].token, dm.trace[t * dm.R + r].token);
                    }
        }
    /* a decoder refuses a model that moved after it was built */
    ck_assert_msg(model_to(&g, backend_cpu(), err, sizeof err) == 0, "%s", err);
    DecodeOpts o = decode_opts_paper(1, 2);
    ck_assert_int_eq(decode_greedy(&dg, &o, SRC, B, Ts, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "after decoder_new"));
    decoder_free(&dg);
    decoder_free(&dm);
    model_free(&m);
    model_free(&g);
}
END_TEST

/* Three Adam steps on copy batches WITH DROPOUT (P_drop = 0.1): loss and
 * gradient norm each step, then parameters and Adam moments. The rate is
 * small (factor 0.1, warmup 10): float32 noise in a gradient near 0 cannot
 * move a weight far. */
START_TEST(test_model_train_steps) {
    const Backend *be = other_backend(_i);
    if (!be) return;
    char err[512];
    Config c = tiny_config(_i & 1, 0.1f);
    Model m, g;
    ck_assert_msg(model_build(&m, &c, 3, 6, 5, 5, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_build(&g, &c, 3, 6, 5, 5, err, sizeof err) == 0, "%s", err);
    TrainHyper hp = train_hyper_paper();
    hp.warmup = 10, hp.factor = 0.1f;
    Trainer tc, tg;
    ck_assert_msg(trainer_init(&tc, &m, &hp, 3, 6, 1, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(trainer_init(&tg, &g, &hp, 3, 6, 1, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(trainer_to(&tg, be, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_eq(g.be, be);
    CopyBatch cb;
    ck_assert(copy_batch_alloc(&cb, 3, 6) == 0);
    for (int step = 1; step <= 3; step++) {
        StepStats sc, sg;
        ck_assert_int_eq(copy_train_step(&tc, &cb, &sc), TRAIN_OK);
        ck_assert_int_eq(copy_train_step(&tg, &cb, &sg), TRAIN_OK);
        ck_assert_msg(fabsf(sg.loss - sc.loss) <= 1e-5f * sc.loss, "step %d: loss %s %.7g, cpu %.7g",
                      step, be->name, sg.loss, sc.loss);
        ck_assert_msg(fabsf(sg.grad_norm - sc.grad_norm) <= 1e-4f * sc.grad_norm,
                      "step %d: grad norm %s %.7g, cpu %.7g", step, be->name, sg.grad_norm, sc.grad_norm);
        ck_assert_int_eq(sg.n_tokens, sc.n_tokens);
        ck_assert(sg.lr == sc.lr);
    }
    /* both drew the same dropout keys from the same stream */
    ck_assert_uint_eq(g.dropout_rng.state, m.dropout_rng.state);
    trainer_pull(&tg);
    assert_params_close(&g.params, &m.params, 1e-4, "after 3 steps, parameter");
    ck_assert_close_arrays(tg.adam_m, tc.adam_m, tc.n, 1e-5);
    ck_assert_close_arrays(tg.adam_v, tc.adam_v, tc.n, 1e-7);
    /* and back: the model returns to the CPU with the trained weights */
    float first = g.params.mem[0];
    ck_assert_msg(trainer_to(&tg, backend_cpu(), err, sizeof err) == 0, "%s", err);
    ck_assert(g.params.mem[0] == first && g.be == backend_cpu());
    copy_batch_free(&cb);
    trainer_free(&tc), trainer_free(&tg);
    model_free(&m), model_free(&g);
}
END_TEST

/* A NaN weight: the step says so, with the CPU's status, and changes nothing. */
START_TEST(test_model_train_nan) {
    const Backend *be = other_backend(_i);
    if (!be) return;
    char err[512];
    Config c = tiny_config(_i & 1, 0.1f);
    Model g, m;
    ck_assert_msg(model_build(&g, &c, 3, 6, 5, 5, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_build(&m, &c, 3, 6, 5, 5, err, sizeof err) == 0, "%s", err);
    g.params.enc[0].ffn_b2[0] = m.params.enc[0].ffn_b2[0] = NAN;
    float *before = malloc(g.params.n * sizeof(float));
    memcpy(before, g.params.mem, g.params.n * sizeof(float));
    TrainHyper hp = train_hyper_paper();
    Trainer t, tc;
    ck_assert_msg(trainer_init(&t, &g, &hp, 3, 6, 1, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(trainer_init(&tc, &m, &hp, 3, 6, 1, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(trainer_to(&t, be, err, sizeof err) == 0, "%s", err);
    StepStats st;
    TrainStatus want = train_step_batch(&tc, SRC, TGT, TGT, 3, 6, 5, &st);
    ck_assert_int_ne(want, TRAIN_OK);
    ck_assert_int_eq(train_step_batch(&t, SRC, TGT, TGT, 3, 6, 5, &st), want);
    ck_assert_uint_eq(t.step, 0);
    trainer_pull(&t);
    ck_assert(isnan(g.params.enc[0].ffn_b2[0]));
    size_t at = (size_t)(g.params.enc[0].ffn_b2 - g.params.mem);
    g.params.mem[at] = before[at] = 0.0f;
    ck_assert_close_arrays(g.params.mem, before, g.params.n, 0.0);
    free(before);
    trainer_free(&t), trainer_free(&tc);
    model_free(&g), model_free(&m);
}
END_TEST

/* The one-op helpers the chapters call, with causal + padding masks and a
 * sequence whose every key is blocked (zero rows, no NaN). GPU only: they
 * ask for the real CUDA backend. */
START_TEST(test_host_helpers) {
    if (!other_backend(2)) return;
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
    char err[512];
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
}
END_TEST

/* Without the real GPU the one-op helpers return 2 and say why. */
START_TEST(test_host_helpers_without_gpu) {
    char err[512];
    if (backend_cuda(err, sizeof err)) return;
    float x = 0;
    char msg[512] = "";
    ck_assert_int_eq(gpu_sdpa_forward_host(&x, &x, &x, &x, &x, NULL, 1, 1, 1, 1, 1, 1, msg, sizeof msg), 2);
    ck_assert_str_eq(msg, err);
}
END_TEST

/* ---- the tables ------------------------------------------------------------------ */

/* Every entry from alloc on is a function pointer, and a hole would crash
 * the first program that calls it: the struct walked as an array of them
 * (which is what it is on every ABI this project builds for). */
static void assert_table_complete(const Backend *be) {
    typedef void (*AnyFn)(void);
    size_t n = (sizeof(Backend) - offsetof(Backend, alloc)) / sizeof(AnyFn);
    const char *first = (const char *)be + offsetof(Backend, alloc);
    for (size_t i = 0; i < n; i++) {
        AnyFn f;
        memcpy(&f, first + i * sizeof f, sizeof f);
        ck_assert_msg(f != NULL, "%s backend: entry %zu of the %zu from alloc on is missing", be->name, i, n);
    }
}

/* The CPU's table and the host shim's (the CUDA backend's own table,
 * backend_cuda.c): this build's ABI, every entry filled, and host_memory,
 * the fact shared code reads instead of asking which backend it holds. */
START_TEST(test_tables) {
    const Backend *cpu = backend_cpu(), *shim = other_backend(0);
    ck_assert_int_eq(cpu->abi, BACKEND_ABI);
    ck_assert_int_eq(shim->abi, BACKEND_ABI);
    ck_assert_str_eq(cpu->name, "cpu");
    ck_assert_str_eq(shim->name, "cuda");
    ck_assert_int_eq(cpu->host_memory, 1);
    ck_assert_int_eq(shim->host_memory, 0);   /* malloc'ed, but it keeps the GPU's contract */
    assert_table_complete(cpu);
    assert_table_complete(shim);
}
END_TEST

/* The ops that stand for what the model and the trainer once wrote as gemm
 * calls of their own: the tied output projection forward and backward, the
 * learned PE's gradient, a scaled copy. On the CPU against plain loops in
 * double; the shim (the CUDA table's code with cuda_gemm = gemm) must give
 * the CPU's very bits, as the same calls do. */
enum { GN = 5, GD = 6, GV = 7, GB = 3, GT = 4 };
#define GEMM_OPS_OUT (GN * GV + GN * GD + GV * GD + GT * GD + GN * GD)

/* n floats of be's memory holding host */
static float *put(const Backend *be, const float *host, size_t n) {
    float *p = be->alloc(n * sizeof(float));
    ck_assert_ptr_nonnull(p);
    be->upload(p, host, n * sizeof(float));
    return p;
}

/* out: logits (GN,GV) | dx (GN,GD) | dE (GV,GD) | dpos (GT,GD) | 0.375 x (GN,GD) */
static void run_gemm_ops(const Backend *be, float *out, const float *x, const float *E, const float *dl,
                         const float *dE0, const float *demb, const float *dpos0) {
    const float ones[GB] = {1.0f, 1.0f, 1.0f};
    float *bx = put(be, x, GN * GD), *bE = put(be, E, GV * GD), *bdl = put(be, dl, GN * GV);
    float *bdE = put(be, dE0, GV * GD), *bdemb = put(be, demb, GB * GT * GD), *bdpos = put(be, dpos0, GT * GD);
    float *bones = put(be, ones, GB), *blog = put(be, out, GN * GV), *bdx = put(be, out, GN * GD);
    float *bsc = put(be, out, GN * GD);
    be->logits_forward(blog, bx, bE, GN, GD, GV);
    be->logits_backward(bdx, bdE, bdl, bx, bE, GN, GD, GV);
    be->pos_embed_backward(bdpos, bdemb, bones, GB, GT, GD);
    be->scale_forward(bsc, bx, 0.375f, GN * GD);
    float *o = out;
    be->download(o, blog, GN * GV * sizeof(float)), o += GN * GV;
    be->download(o, bdx, GN * GD * sizeof(float)), o += GN * GD;
    be->download(o, bdE, GV * GD * sizeof(float)), o += GV * GD;
    be->download(o, bdpos, GT * GD * sizeof(float)), o += GT * GD;
    be->download(o, bsc, GN * GD * sizeof(float));
    float *all[] = {bx, bE, bdl, bdE, bdemb, bdpos, bones, blog, bdx, bsc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->free(all[i]);
}

START_TEST(test_gemm_ops) {
    Rng rng;
    rng_seed(&rng, 21);
    float *x = randn(&rng, GN * GD, 1), *E = randn(&rng, GV * GD, 1), *dl = randn(&rng, GN * GV, 1);
    float *dE0 = randn(&rng, GV * GD, 1), *demb = randn(&rng, GB * GT * GD, 1), *dpos0 = randn(&rng, GT * GD, 1);
    /* what the ops must give: logits = x E^T, dx = dl E, dE = dE0 + dl^T x,
     * dpos = dpos0 + sum over b of demb[b], scaled = 0.375 x */
    float want[GEMM_OPS_OUT], got[GEMM_OPS_OUT], shim_got[GEMM_OPS_OUT];
    float *w = want;
    for (int i = 0; i < GN; i++)
        for (int v = 0; v < GV; v++) {
            double s = 0;
            for (int d = 0; d < GD; d++) s += (double)x[i * GD + d] * E[v * GD + d];
            *w++ = (float)s;
        }
    for (int i = 0; i < GN; i++)
        for (int d = 0; d < GD; d++) {
            double s = 0;
            for (int v = 0; v < GV; v++) s += (double)dl[i * GV + v] * E[v * GD + d];
            *w++ = (float)s;
        }
    for (int v = 0; v < GV; v++)
        for (int d = 0; d < GD; d++) {
            double s = dE0[v * GD + d];
            for (int i = 0; i < GN; i++) s += (double)dl[i * GV + v] * x[i * GD + d];
            *w++ = (float)s;
        }
    for (int j = 0; j < GT * GD; j++) {
        double s = dpos0[j];
        for (int b = 0; b < GB; b++) s += demb[b * GT * GD + j];
        *w++ = (float)s;
    }
    for (int j = 0; j < GN * GD; j++) *w++ = 0.375f * x[j];

    memset(got, 0xff, sizeof got);   /* NaN: a value the op never wrote shows */
    run_gemm_ops(backend_cpu(), got, x, E, dl, dE0, demb, dpos0);
    ck_assert_close_arrays(got, want, (size_t)GEMM_OPS_OUT, 1e-5);
    memset(shim_got, 0xff, sizeof shim_got);
    run_gemm_ops(other_backend(0), shim_got, x, E, dl, dE0, demb, dpos0);
    ck_assert_msg(!memcmp(shim_got, got, sizeof got), "the shim's bits differ from the CPU's");
    free(x), free(E), free(dl), free(dE0), free(demb), free(dpos0);
}
END_TEST

Suite *cuda_suite(void) {
    Suite *s = suite_create("cuda");
    TCase *core = suite_case(s, "Core", test_cpu_maps_no_cuda, test_device_select,
                             test_missing_library, test_tables, test_gemm_ops);
    tcase_set_timeout(core, 60);   /* the first CUDA call in a process can take seconds */
    /* selftest checks: the count is known only once the .so is open, which
     * must not happen before the fork; 16 covers its 8 (the extra _i return) */
    tcase_add_loop_test(core, test_kernel_matches_cpu, 0, 16);
    TCase *model = suite_case(s, "Model", test_host_helpers, test_host_helpers_without_gpu);
    tcase_set_timeout(model, 60);
    tcase_add_loop_test(model, test_model_forward_backward, 0, 4);   /* {post-LN, pre-LN + learned PE} x {shim,GPU} */
    tcase_add_loop_test(model, test_model_train_steps, 0, 4);
    tcase_add_loop_test(model, test_model_decode, 0, 4);   /* {post,pre}-LN x {shim,GPU} */
    tcase_add_loop_test(model, test_model_train_nan, 0, 4);
    return s;
}

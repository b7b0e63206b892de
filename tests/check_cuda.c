/* check_cuda.c - the CUDA kernels against the CPU functions they mirror.
 *
 * Each loop iteration runs one check of cuda/selftest.c at its small size:
 * random inputs from a fixed seed, the CPU function, every GPU version of
 * the op, and an assertion that the largest difference is within float32
 * tolerance (the message names the op, the sizes and the difference).
 *
 * Without a CUDA build or without a GPU there is nothing to run: the tests
 * say "skipped" once and pass, so the suite is the same on every machine.
 * No CUDA call is made while the suite is built: Check forks a process per
 * test, and a CUDA context does not survive a fork.
 */
#include <check.h>
#include <stdio.h>

#include "device.h"
#include "kernels.h"

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

Suite *cuda_suite(void) {
    Suite *s = suite_create("cuda");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);   /* the first CUDA call in a process can take seconds */
    tcase_add_test(core, test_device_select);
    tcase_add_loop_test(core, test_kernel_matches_cpu, 0, cuda_selftest_count());
    suite_add_tcase(s, core);
    return s;
}

#else

START_TEST(test_skipped_without_cuda) {
    ck_assert_int_eq(device_cuda_available(), 0);
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

/* check_main.c - one runner for every suite.
 *
 * Each tests/check_<module>.c defines `Suite *<module>_suite(void)`; the
 * Makefile lists them in build/suites.h, so adding a file adds a suite.
 *
 *   make test                          everything
 *   CK_RUN_SUITE=softmax make test     one suite
 *   CK_RUN_CASE=Limits make test       one test case
 *   CK_FORK=no gdb build/check_all     debug in one process
 */
#include <check.h>
#include <stdlib.h>

#define SUITE(name) Suite *name##_suite(void);
#include "suites.h"
#undef SUITE

int main(void) {
    SRunner *sr = srunner_create(NULL);
#define SUITE(name) srunner_add_suite(sr, name##_suite());
#include "suites.h"
#undef SUITE
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

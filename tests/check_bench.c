/* check_bench.c - the bench's printed figures (bench/figures.c): every ratio
 * it prints equals the figures printed beside it, and a figure above the
 * FMA peak measured beside it is an error. No timing: the tables are fed
 * made-up figures (the ones of issue 35's run, where ours was 231.9 in one
 * process and ~430 in another, and the ratio beside 231.9 and 394.7 read
 * 1.09x).
 *
 * bench/figures.c (the one file of bench/ without timing or a main) is
 * linked into the test runner beside the library (Makefile).
 *
 * Test cases:
 *   Shown   figures as printed, ratios of printed figures
 *   Ratios  each row of the gemm table read back: every "r.rrx" is the
 *           two figures before it divided, every "(p%)" its figure over
 *           its block's peak; with and without OpenBLAS, a failed child
 *   Peak    a figure above its block's peak is reported (ERROR line,
 *           counted), one equal to it as printed is not */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/figures.h"

static const char *const names[] = {"FFN  x W1    800x512 . 512x2048", "attn QK^T 640 x (10x64 . 64x10)",
                                    "logits x E^T 720x512 . (11x512)^T"};
enum { NS = 3 };

/* issue 35's run: [A] in the bench's process, [C] in a child */
static void runs_issue35(BlasRun *r) {
    memset(r, 0, sizeof(BlasRun) * GEMM_SETTINGS);
    r[0] = (BlasRun){.label = "[A] env as set", .core = "Cooperlake", .ok = 1,
                     .ours = {231.94, 3.04, 22.05}, .blas = {252.06, 25.94, 10.46},
                     .peak_before = 249.2, .peak_after = 481.33};
    r[1] = (BlasRun){.label = "[B] CORETYPE/L2_SIZE unset", .not_run = "[B] = [A]: not set"};
    r[2] = (BlasRun){.label = "[C] CORETYPE=SkylakeX", .core = "SkylakeX", .ok = 1,
                     .ours = {430.28, 5.35, 14.66}, .blas = {394.66, 39.51, 11.14},
                     .peak_before = 491.04, .peak_after = 488.9};
}

/* the table as text (caller frees); *bad: what gemm_table_write returned */
static char *table_text(const BlasRun *runs, int have_blas, int *bad) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    *bad = gemm_table_write(f, 2, names, NS, runs, have_blas);
    fclose(f);
    return buf;
}

/* the row of shape i (its line, NUL-terminated, into row) */
static void table_row(const char *text, int i, char *row, size_t cap) {
    const char *p = text;
    for (; (p = strstr(p, names[i])); p++)
        if (p > text && p[-1] == ' ' && p[-2] == ' ' && (p - 2 == text || p[-3] == '\n')) break;
    ck_assert_msg(p != NULL, "no row for '%s' in:\n%s", names[i], text);
    size_t n = strcspn(p, "\n");
    ck_assert_uint_lt(n, cap);
    memcpy(row, p, n);
    row[n] = '\0';
}

/* Reads a row back: after the shape's name, figures ("231.9"), shares of
 * the peak ("( 93%)") and ratios ("0.92x"). Checks every ratio against the
 * two figures printed before it, and every share against the figure before
 * it and peaks[block] (block k = figures 2k, 2k+1; have_blas 0: one figure
 * a block). Returns how many ratios it checked. */
static int check_row(const char *row, const char *name, const double *peaks, int have_blas) {
    char tok[64], want[64];
    const char *p = row + strlen(name);
    double fig[16];
    int nfig = 0, nratio = 0;
    while (*p) {
        if (isspace((unsigned char)*p) || *p == '|') {
            p++;
            continue;
        }
        if (*p == '-') {   /* a failed child's block */
            p++;
            continue;
        }
        if (*p == '(') {   /* ( 93%) */
            int pct;
            ck_assert_msg(sscanf(p, "( %d%%)", &pct) == 1, "unreadable share in: %s", row);
            ck_assert_msg(nfig > 0, "a share before any figure in: %s", row);
            double peak = peaks[have_blas ? (nfig - 1) / 2 : nfig - 1];
            snprintf(want, sizeof want, "%.0f", 100 * fig[nfig - 1] / peak);
            snprintf(tok, sizeof tok, "%d", pct);
            ck_assert_msg(!strcmp(tok, want), "share %s%% beside %.1f, peak %.1f: %s%% expected, in: %s", tok,
                          fig[nfig - 1], peak, want, row);
            p = strchr(p, ')') + 1;
            continue;
        }
        int used = 0;
        ck_assert_msg(sscanf(p, "%63[0-9.x]%n", tok, &used) == 1 && used > 0, "unreadable token at '%s'", p);
        p += used;
        if (tok[strlen(tok) - 1] == 'x') {
            ck_assert_msg(nfig >= 2, "a ratio without two figures before it: %s", row);
            tok[strlen(tok) - 1] = '\0';
            snprintf(want, sizeof want, "%.2f", fig[nfig - 2] / fig[nfig - 1]);
            ck_assert_msg(!strcmp(tok, want), "ratio %sx beside %.1f and %.1f (%sx) in: %s", tok, fig[nfig - 2],
                          fig[nfig - 1], want, row);
            nratio++;
        } else {
            ck_assert_int_lt(nfig, 16);
            fig[nfig++] = strtod(tok, NULL);
        }
    }
    return nratio;
}

START_TEST(test_shown) {
    ck_assert(fig_shown(231.94, 1) == 231.9);
    ck_assert(fig_shown(394.66, 1) == 394.7);
    ck_assert(fig_shown(-0.04, 1) == 0);
    /* 231.94 / 394.66 = 0.5877 unrounded; 231.9 / 394.7 = 0.5875 as printed */
    char s[16];
    snprintf(s, sizeof s, "%.2f", fig_ratio(231.94, 394.66, 1));
    ck_assert_str_eq(s, "0.59");
    ck_assert(fig_ratio(1.0, 0.04, 1) == 0);      /* a divisor shown as 0.0 */
    ck_assert(fig_ratio(753.944, 2.384, 2) == 753.94 / 2.38);
}
END_TEST

START_TEST(test_ratios_match_printed_figures) {
    BlasRun r[GEMM_SETTINGS];
    runs_issue35(r);
    int bad;
    char *text = table_text(r, 1, &bad), row[512];
    double peaks[2] = {fig_shown(blas_run_peak(&r[0]), 1), fig_shown(blas_run_peak(&r[2]), 1)};
    for (int i = 0; i < NS; i++) {
        table_row(text, i, row, sizeof row);
        ck_assert_msg(check_row(row, names[i], peaks, 1) == 2, "row without its 2 ratios: %s", row);
    }
    /* issue 35's row: ours 231.9 and OpenBLAS 252.1 in [A], 430.3 and 394.7 in [C] */
    table_row(text, 0, row, sizeof row);
    ck_assert_msg(strstr(row, "231.9") && strstr(row, "430.3") && strstr(row, "1.09x") && strstr(row, "0.92x"),
                  "%s", row);
    ck_assert_int_eq(bad, 0);
    free(text);
}
END_TEST

START_TEST(test_ratios_failed_child_and_no_blas) {
    BlasRun r[GEMM_SETTINGS];
    runs_issue35(r);
    r[2].ok = 0;   /* [C]'s child failed: its block is dashes, [A]'s still checks */
    int bad;
    char *text = table_text(r, 1, &bad), row[512];
    double peaks[2] = {fig_shown(blas_run_peak(&r[0]), 1), 0};
    table_row(text, 0, row, sizeof row);
    ck_assert_int_eq(check_row(row, names[0], peaks, 1), 1);
    ck_assert_ptr_nonnull(strstr(text, "child failed"));
    free(text);
    text = table_text(r, 0, &bad);   /* built without OpenBLAS: ours only */
    for (int i = 0; i < NS; i++) {
        table_row(text, i, row, sizeof row);
        ck_assert_int_eq(check_row(row, names[i], peaks, 0), 0);
    }
    ck_assert_ptr_null(strstr(text, "OpenBLAS chose"));
    ck_assert_ptr_nonnull(strstr(text, "left out"));
    free(text);
}
END_TEST

START_TEST(test_peak_below_a_figure_is_an_error) {
    BlasRun r[GEMM_SETTINGS];
    runs_issue35(r);
    int bad;
    char *text = table_text(r, 1, &bad);
    ck_assert_ptr_null(strstr(text, "ERROR"));
    free(text);
    /* the issue's run: a peak of 249.2 in the process whose OpenBLAS gave 252.1 */
    r[0].peak_after = 0;
    text = table_text(r, 1, &bad);
    ck_assert_int_eq(bad, 1);
    ck_assert_msg(strstr(text, "ERROR: [A] env as set, FFN  x W1    800x512 . 512x2048: OpenBLAS 252.1") != NULL,
                  "%s", text);
    free(text);
    /* equal as printed is not above: 249.2 against a peak of 249.24 */
    r[0].blas[0] = 249.16;
    r[0].peak_before = 249.24;
    text = table_text(r, 1, &bad);
    ck_assert_int_eq(bad, 0);
    free(text);
    /* ours above [C]'s peak: counted too */
    r[2].ours[1] = 600;
    text = table_text(r, 1, &bad);
    ck_assert_int_eq(bad, 1);
    ck_assert_ptr_nonnull(strstr(text, "[C] CORETYPE=SkylakeX, attn QK^T 640 x (10x64 . 64x10): ours 600.0"));
    free(text);
}
END_TEST

Suite *bench_suite(void) {
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("Shown");
    tcase_add_test(tc, test_shown);
    suite_add_tcase(s, tc);
    tc = tcase_create("Ratios");
    tcase_add_test(tc, test_ratios_match_printed_figures);
    tcase_add_test(tc, test_ratios_failed_child_and_no_blas);
    suite_add_tcase(s, tc);
    tc = tcase_create("Peak");
    tcase_add_test(tc, test_peak_below_a_figure_is_an_error);
    suite_add_tcase(s, tc);
    return s;
}

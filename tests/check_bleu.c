/* check_bleu.c - corpus BLEU-4: hand-computed values, then the same
 * hypotheses scored by sacrebleu (tests/bleu_ref.py) must agree to 0.01.
 * Without sacrebleu that part says so and is skipped: `make sacrebleu`
 * installs it in build/venv. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bleu.h"
#include "corpus.h"
#include "rng.h"

START_TEST(test_hand_values) {
    BleuStats s = {0};
    bleu_add(&s, "Der Mann sieht den Hund .", "Der Mann sieht den Hund .");
    Bleu b = bleu_compute(&s);
    ck_assert_double_eq_tol(b.score, 100.0, 1e-9);
    /* one wrong word of 6: 1-grams 5/6, 2-grams 3/5, 3-grams 1/4, 4-grams 0/3
     * -> exp smoothing: p4 = 1/(2*3). BP = 1 (same length).
     * BLEU = 100 * (5/6 * 3/5 * 1/4 * 1/6)^(1/4) */
    memset(&s, 0, sizeof s);
    bleu_add(&s, "Der Mann sieht die Hund .", "Der Mann sieht den Hund .");
    b = bleu_compute(&s);
    ck_assert_int_eq(s.correct[0], 5);
    ck_assert_int_eq(s.correct[1], 3);
    ck_assert_int_eq(s.correct[2], 1);
    ck_assert_int_eq(s.correct[3], 0);
    ck_assert_double_eq_tol(b.score, 100 * pow(5.0 / 6 * 3.0 / 5 * 1.0 / 4 * 1.0 / 6, 0.25), 1e-9);
    /* clipping: "der der der" against "der Hund": 1-gram matches clip to 1 */
    memset(&s, 0, sizeof s);
    bleu_add(&s, "der der der", "der Hund");
    ck_assert_int_eq(s.correct[0], 1);
    ck_assert_int_eq(s.total[0], 3);
    /* brevity: a 3-token hypothesis for a 6-token reference, all matching */
    memset(&s, 0, sizeof s);
    bleu_add(&s, "a b c d", "a b c d e f g h");
    b = bleu_compute(&s);
    ck_assert_double_eq_tol(b.bp, exp(1.0 - 8.0 / 4.0), 1e-12);
    ck_assert_double_eq_tol(b.score, 100 * exp(1.0 - 2.0), 1e-9);
    /* nothing right at all: 0 */
    memset(&s, 0, sizeof s);
    bleu_add(&s, "x y", "a b");
    ck_assert_double_eq(bleu_compute(&s).score, 0.0);
    /* an empty hypothesis: BP 0 */
    memset(&s, 0, sizeof s);
    bleu_add(&s, "", "a b");
    bleu_add(&s, "a b c d", "a b c d");
    b = bleu_compute(&s);
    ck_assert(b.bp < 1.0 && b.score > 0 && b.score < 100);
}
END_TEST

/* Damages sentence s (deterministically by r): drops, swaps or replaces a word. */
static void damage(char *out, size_t len, const char *s, Rng *r) {
    char w[64][64];
    int n = 0;
    const char *p = s;
    while (*p && n < 64) {
        while (*p == ' ') p++;
        int k = 0;
        while (*p && *p != ' ' && k < 63) w[n][k++] = *p++;
        w[n][k] = 0;
        if (k) n++;
    }
    int kind = rng_int(r, 5);
    if (kind == 1 && n > 1) {          /* drop a word */
        int i = rng_int(r, n);
        memmove(w[i], w[i + 1], sizeof w[0] * (size_t)(n - i - 1));
        n--;
    } else if (kind == 2 && n > 1) {   /* swap two neighbours */
        int i = rng_int(r, n - 1);
        char t[64];
        memcpy(t, w[i], sizeof t);
        memcpy(w[i], w[i + 1], sizeof t);
        memcpy(w[i + 1], t, sizeof t);
    } else if (kind == 3) {            /* a wrong word */
        strcpy(w[rng_int(r, n)], "dem");
    } else if (kind == 4 && n > 3) {   /* a short hypothesis */
        n = n / 2;
    }
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strncat(out, " ", len - strlen(out) - 1);
        strncat(out, w[i], len - strlen(out) - 1);
    }
}

/* Runs tests/bleu_ref.py on the two files; returns 1 and the score, 0 when
 * sacrebleu is not there (the script exits 3, or no python3), -1 when the
 * script failed otherwise (that is a test failure, not a skip). */
static int sacrebleu_score(const char *hyp, const char *ref, double *score) {
    const char *py = NULL;
    if (access("build/venv/bin/python3", X_OK) == 0) py = "build/venv/bin/python3";
    else py = "python3";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s tests/bleu_ref.py %s %s 2>/dev/null", py, hyp, ref);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int ok = fscanf(p, "%lf", score) == 1;
    int st = pclose(p);
    if (ok && st == 0) return 1;
    if (WIFEXITED(st) && (WEXITSTATUS(st) == 3 || WEXITSTATUS(st) == 127)) return 0;
    return -1;
}

START_TEST(test_against_sacrebleu) {
    Corpus tr, dv, te;
    char err[256], dir[] = "/tmp/check_bleu_XXXXXX", hp[128], rp[128], cmd[160];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 10, 10, 300, 11, err, sizeof err), 0);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(hp, sizeof hp, "%s/hyp.txt", dir);
    snprintf(rp, sizeof rp, "%s/ref.txt", dir);
    /* three systems: mostly right, half-damaged, and all short */
    for (int sys = 0; sys < 3; sys++) {
        FILE *fh = fopen(hp, "w"), *fr = fopen(rp, "w");
        ck_assert(fh && fr);
        BleuStats s = {0};
        Rng r;
        rng_seed(&r, 100 + sys);
        for (int i = 0; i < te.n; i++) {
            char h[1024];
            if (sys == 0 && i % 4) strcpy(h, te.tgt[i]);
            else if (sys == 2) {
                damage(h, sizeof h, te.tgt[i], &r);
                char *cut = strchr(h, ' ');
                if (cut && (cut = strchr(cut + 1, ' '))) *cut = 0;   /* two words */
            } else damage(h, sizeof h, te.tgt[i], &r);
            fprintf(fh, "%s\n", h);
            fprintf(fr, "%s\n", te.tgt[i]);
            bleu_add(&s, h, te.tgt[i]);
        }
        fclose(fh);
        fclose(fr);
        double ours = bleu_compute(&s).score, ref;
        int got = sacrebleu_score(hp, rp, &ref);
        ck_assert_msg(got >= 0, "tests/bleu_ref.py failed on %s %s", hp, rp);
        if (!got) {
            printf("check_bleu: SKIP the comparison with sacrebleu: not installed (run `make sacrebleu`); "
                   "C score of system %d was %.4f\n", sys, ours);
            break;
        }
        ck_assert_msg(fabs(ours - ref) < 0.01, "system %d: bleu.c %.6f, sacrebleu %.6f", sys, ours, ref);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
}
END_TEST

Suite *bleu_suite(void) {
    Suite *s = suite_create("bleu");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_hand_values);
    suite_add_tcase(s, core);
    TCase *ref = tcase_create("Reference");
    tcase_add_test(ref, test_against_sacrebleu);
    tcase_set_timeout(ref, 60);
    suite_add_tcase(s, ref);
    return s;
}

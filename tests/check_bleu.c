/* check_bleu.c - corpus BLEU-4: hand-computed values and hand-checked 13a
 * tokenisations ("Core", "Limits"), then sacrebleu itself
 * (tests/bleu_ref.py, "Reference"): the same hypotheses must score the same
 * to 0.01 with tokenize='none' and '13a', bleu_tokenize_13a must give
 * exactly the string sacrebleu's Tokenizer13a gives, and the signatures
 * must match. Without sacrebleu that part is a counted skip (a failure under
 * CI=true):
 * `make sacrebleu` installs it in build/venv. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/bleu.h"
#include "text/corpus.h"
#include "core/rng.h"
#include "testutil.h"

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
    /* brevity: a 4-token hypothesis for an 8-token reference, all matching */
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

/* 13a by hand: each pair worked out from the rules in bleu.c (rule 1 lone
 * punctuation, rule 2 '.'/',' after a non-digit, rule 3 before a
 * non-digit, rule 4 '-' after a digit). */
static const struct {
    const char *in, *out;
} TOK13A_HAND[] = {
    {"Lass dich nicht entmutigen!", "Lass dich nicht entmutigen !"},   /* rule 1 */
    {"(Hallo)", "( Hallo )"},
    {"3.5 m, 1,000-2,000.", "3.5 m , 1,000 - 2,000 ."},   /* numbers keep '.' ',', rule 4 */
    {"e-mail", "e-mail"},                                   /* '-' after a letter stays */
    {"don't", "don't"},                                     /* so does the apostrophe */
    {"U.S.A.", "U . S . A ."},                              /* rule 2, three times */
    {"Bäume.", "Bäume ."},                                  /* 'ä' is a non-digit */
    {"„Geld“.", "„Geld“ ."},                                /* German quotes are not ASCII: kept */
    {"Er sagte: „Das kostet 3,50 €.“", "Er sagte : „Das kostet 3,50 € . “"},
    {".5", ". 5"},                                          /* the padding space before '.' */
    {"5.", "5 ."},                                          /* and after it */
    {"1.a", "1 . a"},                                       /* rule 3 */
    {"1--2", "1 - -2"},                                     /* rule 4 takes only the first '-' */
    {"3-Zimmer-Wohnung", "3 - Zimmer-Wohnung"},
    {"a&amp;b", "a & b"},                                   /* XML escapes undone, then rule 1 */
    {"&amp;lt;", "<"},                                      /* &amp; first, then &lt; */
    {"x<skipped>y", "xy"},
    {"Wort-\ntrennung", "Worttrennung"},                    /* "-\n" joins */
    {"zwei\nZeilen", "zwei Zeilen"},
    {"x\ty\xc2\xa0z", "x y z"},                             /* tab and no-break space split */
    {"", ""},
    {" \t ", ""},
};

START_TEST(test_tokenize_13a_hand) {
    char out[256];
    for (size_t i = 0; i < sizeof TOK13A_HAND / sizeof TOK13A_HAND[0]; i++) {
        size_t n = bleu_tokenize_13a(TOK13A_HAND[i].in, out, sizeof out);
        ck_assert_msg(!strcmp(out, TOK13A_HAND[i].out), "13a of \"%s\": got \"%s\", want \"%s\"",
                      TOK13A_HAND[i].in, out, TOK13A_HAND[i].out);
        ck_assert_uint_eq(n, strlen(TOK13A_HAND[i].out));
    }
}
END_TEST

START_TEST(test_13a_hand_values) {
    /* the chapter's case: punctuation attached. 'none' sees 4 tokens and
     * "entmutigen!" never matches "entmutigen."; 13a sees 5 and only "!"
     * against "." is wrong: 1-grams 4/5, 2-grams 3/4, 3-grams 2/3, 4-grams 1/2 */
    BleuStats s = {0};
    bleu_add_tok(&s, "Lass dich nicht entmutigen!", "Lass dich nicht entmutigen.", BLEU_TOK_NONE);
    ck_assert_int_eq(s.sys_len, 4);
    ck_assert_int_eq(s.correct[0], 3);
    ck_assert_int_eq(s.correct[3], 0);
    memset(&s, 0, sizeof s);
    bleu_add_tok(&s, "Lass dich nicht entmutigen!", "Lass dich nicht entmutigen.", BLEU_TOK_13A);
    ck_assert_int_eq(s.sys_len, 5);
    ck_assert_int_eq(s.ref_len, 5);
    ck_assert_int_eq(s.correct[0], 4);
    ck_assert_int_eq(s.correct[3], 1);
    ck_assert_double_eq_tol(bleu_compute(&s).score, 100 * pow(4.0 / 5 * 3.0 / 4 * 2.0 / 3 * 1.0 / 2, 0.25), 1e-9);
    /* pre-tokenised text against raw text: 13a makes them the same */
    memset(&s, 0, sizeof s);
    bleu_add_tok(&s, "Lass dich nicht entmutigen !", "Lass dich nicht entmutigen!", BLEU_TOK_13A);
    ck_assert_double_eq_tol(bleu_compute(&s).score, 100.0, 1e-9);
    /* bleu_add is the 'none' path, now split on any whitespace */
    BleuStats t = {0};
    memset(&s, 0, sizeof s);
    bleu_add(&s, "a\tb\xc2\xa0" "c ", "a b c");
    bleu_add_tok(&t, "a b c", "a b c", BLEU_TOK_NONE);
    ck_assert_int_eq(s.sys_len, 3);
    ck_assert_mem_eq(&s, &t, sizeof s);
}
END_TEST

START_TEST(test_signature_hand) {
    char sig[128];
    int n = bleu_signature(sig, sizeof sig, BLEU_TOK_13A);
    ck_assert_str_eq(sig, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" BLEU_SACREBLEU_VERSION);
    ck_assert_int_eq(n, (int)strlen(sig));
    bleu_signature(sig, sizeof sig, BLEU_TOK_NONE);
    ck_assert_str_eq(sig, "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:" BLEU_SACREBLEU_VERSION);
    /* too small a buffer: cut, NUL-terminated, the full length returned */
    char small[8];
    ck_assert_int_eq(bleu_signature(small, sizeof small, BLEU_TOK_13A), n);
    ck_assert_str_eq(small, "nrefs:1");
}
END_TEST

START_TEST(test_tokenize_13a_limits) {
    /* the length without a buffer, then a buffer too small: cut and ended */
    const char *in = "Lass dich nicht entmutigen!";
    size_t need = bleu_tokenize_13a(in, NULL, 0);
    ck_assert_uint_eq(need, strlen("Lass dich nicht entmutigen !"));
    char small[10];
    ck_assert_uint_eq(bleu_tokenize_13a(in, small, sizeof small), need);
    ck_assert_str_eq(small, "Lass dich");
    /* the worst growth the buffer in bleu.c is sized for: every '.' split
     * off by rule 2 and again by rule 3, every byte punctuation; under
     * SANITIZE=1 an overrun would stop here */
    size_t n = 30000;
    char *big = malloc(n + 1), *out = malloc(5 * n + 16);
    ck_assert(big && out);
    const char *kinds[] = {"a.", "..", "!!", "1-", ".,"};
    for (int k = 0; k < 5; k++) {
        for (size_t i = 0; i < n; i++) big[i] = kinds[k][i % 2];
        big[n] = 0;
        size_t got = bleu_tokenize_13a(big, out, 5 * n + 16);
        ck_assert_uint_eq(got, strlen(out));
        ck_assert_uint_le(got, 2 * n);   /* n tokens at most, one space each */
    }
    for (size_t i = 0; i < n; i++) big[i] = '!';
    ck_assert_uint_eq(bleu_tokenize_13a(big, out, 5 * n + 16), 2 * n - 1);   /* "! ! ... !" */
    free(big);
    free(out);
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

/* Runs `python3 tests/bleu_ref.py ARGS` (build/venv's python3 when there
 * is one) and keeps its output in out (len bytes). Returns 1 when it ran,
 * 0 when sacrebleu is not there (the script exits 3, or no python3), -1
 * when the script failed otherwise (that is a test failure, not a skip). */
static int bleu_ref(const char *args, char *out, size_t len) {
    const char *py = access("build/venv/bin/python3", X_OK) == 0 ? "build/venv/bin/python3" : "python3";
    char *said;
    int st = sh_captured(&said, NULL, "%s tests/bleu_ref.py %s 2>/dev/null", py, args);
    snprintf(out, len, "%s", said);
    free(said);
    if (st == 0) return 1;
    if (st == 3 || st == 127) return 0;
    return -1;
}

static const char *TOK_NAME[] = {"none", "13a"};

/* sacrebleu's corpus BLEU of the two files with tokenizer tok: 1 and the
 * score, 0 without sacrebleu, -1 on failure (as bleu_ref) */
static int sacrebleu_score(const char *hyp, const char *ref, BleuTok tok, double *score) {
    char args[400], out[64];
    snprintf(args, sizeof args, "--tokenize %s %s %s", TOK_NAME[tok], hyp, ref);
    int got = bleu_ref(args, out, sizeof out);
    if (got == 1 && sscanf(out, "%lf", score) != 1) return -1;
    return got;
}

static void skip_sacrebleu(const char *what) {
    test_skip_missing("check_bleu", "sacrebleu", "%s: sacrebleu is not installed (run `make sacrebleu`)", what);
}

START_TEST(test_against_sacrebleu) {
    Corpus tr, dv, te;
    char err[256], dir[64], hp[128], rp[128];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 10, 10, 300, 11, err, sizeof err), 0);
    fresh_dir(dir, sizeof dir, "check_bleu");
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
        int got = sacrebleu_score(hp, rp, BLEU_TOK_NONE, &ref);
        ck_assert_msg(got >= 0, "tests/bleu_ref.py failed on %s %s", hp, rp);
        if (!got) {
            printf("check_bleu: C score of system %d was %.4f\n", sys, ours);
            skip_sacrebleu("the comparison with sacrebleu (tokenize='none')");
            break;
        }
        ck_assert_msg(fabs(ours - ref) < 0.01, "system %d: bleu.c %.6f, sacrebleu %.6f", sys, ours, ref);
    }
    remove_dir(dir);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
}
END_TEST

/* ---- 13a against sacrebleu ----------------------------------------- */

#define NSENT 12

/* references the way a real corpus holds them: punctuation attached */
static const char *const REF13A[NSENT] = {
    "Lass dich nicht entmutigen!",
    "„Das Geld ist weg“, sagte er.",
    "Der Preis beträgt 3,50 € pro Stück.",
    "Um 9.30 Uhr fährt der Zug (ICE 1-2) ab.",
    "Ist das dein Hund?",
    "Wir sehen uns am 1. Mai!",
    "Er wohnt in einer 3-Zimmer-Wohnung.",
    "Schreib mir eine E-Mail: info@example.de",
    "Das ist z.B. möglich; aber nicht immer.",
    "Sie kam, sah und siegte.",
    "„Warum?“, fragte sie.",
    "Tom & Jerry sind 1.000.000 Mal gelaufen...",
};

/* four systems' hypotheses for REF13A */
static const char *const HYP13A[4][NSENT] = {
    {   /* the words right, the punctuation not always */
        "Lass dich nicht entmutigen.",
        "„Das Geld ist weg“ sagte er.",
        "Der Preis beträgt 3,50 € pro Stück!",
        "Um 9.30 Uhr fährt der Zug ICE 1-2 ab.",
        "Ist das dein Hund ?",
        "Wir sehen uns am 1. Mai.",
        "Er wohnt in einer 3-Zimmer-Wohnung!",
        "Schreib mir eine E-Mail - info@example.de",
        "Das ist z. B. möglich, aber nicht immer.",
        "Sie kam, sah, und siegte.",
        "\"Warum?\", fragte sie.",
        "Tom &amp; Jerry sind 1.000.000 Mal gelaufen…",
    },
    {   /* wrong words, punctuation attached */
        "Lass dich bloß nicht entmutigen!",
        "„Das Geld ist fort“, sagte er.",
        "Der Preis ist 3,50 € je Stück.",
        "Um 9.30 Uhr fährt der Zug ab.",
        "Ist das ihr Hund?",
        "Wir sehen uns im Mai!",
        "Er lebt in einer 3-Zimmer-Wohnung.",
        "Schreib mir eine Mail: info@example.de",
        "Das ist etwa möglich; aber nicht immer.",
        "Er kam, sah und siegte.",
        "„Wieso?“, fragte sie.",
        "Tom und Jerry sind oft gelaufen.",
    },
    {   /* REF13A tokenised by hand with the 13a rules: 13a scores it 100 */
        "Lass dich nicht entmutigen !",
        "„Das Geld ist weg“ , sagte er .",
        "Der Preis beträgt 3,50 € pro Stück .",
        "Um 9.30 Uhr fährt der Zug ( ICE 1 - 2 ) ab .",
        "Ist das dein Hund ?",
        "Wir sehen uns am 1 . Mai !",
        "Er wohnt in einer 3 - Zimmer-Wohnung .",
        "Schreib mir eine E-Mail : info @ example . de",
        "Das ist z . B . möglich ; aber nicht immer .",
        "Sie kam , sah und siegte .",
        "„Warum ? “ , fragte sie .",
        "Tom & Jerry sind 1.000.000 Mal gelaufen . . .",
    },
    {   /* short, with odd whitespace: tab, no-break and narrow no-break
         * space, carriage return, ideographic space, trailing space */
        "Lass  dich\tnicht entmutigen! ",
        "„Das Geld ist weg“,\xc2\xa0sagte er.",
        "Der Preis beträgt 3,50\xe2\x80\xaf€.",
        "Um 9.30 Uhr\r fährt der Zug ab.",
        "Ist das dein Hund?\xe3\x80\x80",
        "Wir sehen uns!",
        "Er wohnt.",
        "Schreib mir!",
        "",
        "Sie kam.",
        "Warum?",
        "Tom & Jerry.",
    },
};

/* "Der Hund ." -> "Der Hund.": the synthetic corpus as a raw corpus would
 * hold it */
static void detokenize(char *s) {
    char *w = s;
    for (char *r = s; *r; r++)
        if (!(r[0] == ' ' && (r[1] == '.' || r[1] == ',') && (r[2] == ' ' || r[2] == 0))) *w++ = *r;
    *w = 0;
}

/* Scores hyp against ref (n sentences) with bleu.c and with sacrebleu, for
 * both tokenizers, asserts each pair agrees to 0.01 and raises maxdiff[tok].
 * Returns 0 when sacrebleu is not installed. */
static int agree_with_sacrebleu(const char *dir, const char *name, const char *const *hyp,
                                const char *const *ref, int n, double maxdiff[2]) {
    char hp[128], rp[128];
    snprintf(hp, sizeof hp, "%s/hyp.txt", dir);
    snprintf(rp, sizeof rp, "%s/ref.txt", dir);
    FILE *fh = fopen(hp, "w"), *fr = fopen(rp, "w");
    ck_assert(fh && fr);
    for (int i = 0; i < n; i++) {
        fprintf(fh, "%s\n", hyp[i]);
        fprintf(fr, "%s\n", ref[i]);
    }
    fclose(fh);
    fclose(fr);
    for (int tok = BLEU_TOK_NONE; tok <= BLEU_TOK_13A; tok++) {
        BleuStats s = {0};
        for (int i = 0; i < n; i++) bleu_add_tok(&s, hyp[i], ref[i], (BleuTok)tok);
        double ours = bleu_compute(&s).score, theirs;
        int got = sacrebleu_score(hp, rp, (BleuTok)tok, &theirs);
        ck_assert_msg(got >= 0, "tests/bleu_ref.py failed on %s %s", hp, rp);
        if (!got) return 0;
        double d = fabs(ours - theirs);
        ck_assert_msg(d < 0.01, "%s, tokenize='%s': bleu.c %.6f, sacrebleu %.6f", name, TOK_NAME[tok], ours, theirs);
        if (d > maxdiff[tok]) maxdiff[tok] = d;
    }
    return 1;
}

START_TEST(test_13a_against_sacrebleu) {
    char dir[64], err[256];
    fresh_dir(dir, sizeof dir, "check_bleu");
    /* hand check first, sacrebleu or not: 13a scores the tokenised system
     * 100 against the raw references, 'none' far below */
    BleuStats s13 = {0}, sno = {0};
    for (int i = 0; i < NSENT; i++) {
        bleu_add_tok(&s13, HYP13A[2][i], REF13A[i], BLEU_TOK_13A);
        bleu_add_tok(&sno, HYP13A[2][i], REF13A[i], BLEU_TOK_NONE);
    }
    ck_assert_double_eq_tol(bleu_compute(&s13).score, 100.0, 1e-9);
    ck_assert(bleu_compute(&sno).score < 80.0);

    double maxdiff[2] = {0, 0};
    int systems = 0, have = 1;
    static const char *names[4] = {"punctuation", "words", "tokenised", "short+whitespace"};
    for (int sys = 0; sys < 4 && have; sys++, systems += have)
        have = agree_with_sacrebleu(dir, names[sys], HYP13A[sys], REF13A, NSENT, maxdiff);

    /* the synthetic test set detokenised ("Die Hunde sehen ein Buch."),
     * three systems damaged as in test_against_sacrebleu */
    Corpus tr, dv, te;
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 10, 10, 300, 11, err, sizeof err), 0);
    char (*hb)[1024] = malloc(sizeof *hb * (size_t)te.n), (*rb)[1024] = malloc(sizeof *rb * (size_t)te.n);
    const char **hyp = malloc(sizeof *hyp * (size_t)te.n), **ref = malloc(sizeof *ref * (size_t)te.n);
    ck_assert(hb && rb && hyp && ref);
    for (int sys = 0; sys < 3 && have; sys++, systems += have) {
        Rng r;
        rng_seed(&r, 200 + sys);
        for (int i = 0; i < te.n; i++) {
            if (sys == 0 && i % 4) snprintf(hb[i], sizeof hb[i], "%s", te.tgt[i]);
            else damage(hb[i], sizeof hb[i], te.tgt[i], &r);
            snprintf(rb[i], sizeof rb[i], "%s", te.tgt[i]);
            if (sys < 2) detokenize(hb[i]);   /* system 2: tokenised output, raw references */
            detokenize(rb[i]);
            hyp[i] = hb[i];
            ref[i] = rb[i];
        }
        have = agree_with_sacrebleu(dir, "synthetic", hyp, ref, te.n, maxdiff);
    }
    if (have)
        printf("check_bleu: %d systems, max |bleu.c - sacrebleu|: tokenize='none' %.2g, '13a' %.2g\n",
               systems, maxdiff[BLEU_TOK_NONE], maxdiff[BLEU_TOK_13A]);
    else
        skip_sacrebleu("the 13a corpus comparison");
    free(hb), free(rb), free(hyp), free(ref);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
    remove_dir(dir);
}
END_TEST

/* strings that probe every rule and its edges, many not ASCII */
static const char *const TOK13A_TRICKY[] = {
    "Tel.: 030/123-45", "«Oui», dit-il.", "‚Hallo‘, sagte er.", "»Ja.«", "...?!", "z.B.",
    "www.example.com", "user@example.com", "C++", "#1!", "'quoted'", "\"quoted\"",
    "Dr. Müller's 2.Version", "Zahl 1.000.000,50€.", "$5.00", "50%.", "10,5%", "e.g.,",
    "über.“", "\xc2\xa0.5", "a\xe3\x80\x80.b", "x\x1cy", "x\ry", "tab\tend\t",
    "\xe2\x80\x89Thin\xe2\x80\x89space", "-\n", "\n", "Ende-", "-5", "1-2", "a-1", "Straße-3",
    "&quot;Zitat&quot;", "&amp;quot;", "&amp;amp;", "&amp;amp;lt;", "&lt;b&gt;fett&lt;/b&gt;", "<skip<skipped>ped>",
    "ä.ö,ü", "a..b", "Emoji 😀!", "日本語、テスト。", "Привет, мир!", "¿Qué?", "l'homme",
    "Preis:5€", "\\back\\slash_", "{x|y}~", "ein,zwei", "1,a", "a,1", "Ω.", ".Ω", "1.€",
};

START_TEST(test_tokenize_13a_against_sacrebleu) {
    char path[] = "/tmp/check_bleu_tok_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    size_t nh = sizeof TOK13A_HAND / sizeof TOK13A_HAND[0], nt = sizeof TOK13A_TRICKY / sizeof TOK13A_TRICKY[0];
    /* each string ended by a NUL, so "-\n" can be one of them */
    for (size_t i = 0; i < nh + nt; i++) {
        const char *in = i < nh ? TOK13A_HAND[i].in : TOK13A_TRICKY[i - nh];
        fwrite(in, 1, strlen(in) + 1, f);
    }
    fclose(f);
    size_t cap = 1 << 16;
    char *out = malloc(cap), args[128];
    ck_assert_ptr_nonnull(out);
    snprintf(args, sizeof args, "--tok13a %s", path);
    int got = bleu_ref(args, out, cap);
    unlink(path);
    ck_assert_msg(got >= 0, "tests/bleu_ref.py %s failed", args);
    if (!got) {
        skip_sacrebleu("the 13a tokenizer comparison");
        free(out);
        return;
    }
    char *line = out, mine[512];
    for (size_t i = 0; i < nh + nt; i++) {
        const char *in = i < nh ? TOK13A_HAND[i].in : TOK13A_TRICKY[i - nh];
        char *nl = strchr(line, '\n');
        ck_assert_msg(nl != NULL, "sacrebleu gave %zu lines for %zu strings", i, nh + nt);
        *nl = 0;
        bleu_tokenize_13a(in, mine, sizeof mine);
        ck_assert_msg(!strcmp(mine, line), "13a of \"%s\": bleu.c \"%s\", sacrebleu \"%s\"", in, mine, line);
        line = nl + 1;
    }
    ck_assert_msg(*line == 0, "sacrebleu gave more lines than strings");
    printf("check_bleu: 13a tokenizer equals sacrebleu's on %zu strings\n", nh + nt);
    free(out);
}
END_TEST

START_TEST(test_signature_against_sacrebleu) {
    for (int tok = BLEU_TOK_NONE; tok <= BLEU_TOK_13A; tok++) {
        char theirs[256], ours[256], args[64];
        snprintf(args, sizeof args, "--signature %s", TOK_NAME[tok]);
        int got = bleu_ref(args, theirs, sizeof theirs);
        ck_assert_msg(got >= 0, "tests/bleu_ref.py %s failed", args);
        if (!got) {
            skip_sacrebleu("the signature comparison");
            return;
        }
        theirs[strcspn(theirs, "\n")] = 0;
        bleu_signature(ours, sizeof ours, (BleuTok)tok);
        /* a newer sacrebleu than the one bleu.c mirrors changes only the
         * version field; the tokenizer comparison says whether 13a moved */
        const char *vo = strstr(ours, "|version:"), *vt = strstr(theirs, "|version:");
        ck_assert_msg(vo && vt && vo - ours == vt - theirs && !strncmp(ours, theirs, (size_t)(vo - ours)),
                      "signature: bleu.c \"%s\", sacrebleu \"%s\"", ours, theirs);
        if (strcmp(vo, vt))
            printf("check_bleu: NOTE bleu.c mirrors sacrebleu %s, %s is installed: compare the 13a rules "
                   "and update BLEU_SACREBLEU_VERSION\n", BLEU_SACREBLEU_VERSION, vt + strlen("|version:"));
        else
            ck_assert_str_eq(ours, theirs);
    }
}
END_TEST

Suite *bleu_suite(void) {
    Suite *s = suite_create("bleu");
    suite_case(s, "Core", test_hand_values, test_tokenize_13a_hand, test_13a_hand_values,
               test_signature_hand);
    suite_case(s, "Limits", test_tokenize_13a_limits);
    TCase *ref = suite_case(s, "Reference", test_against_sacrebleu, test_13a_against_sacrebleu,
                            test_tokenize_13a_against_sacrebleu, test_signature_against_sacrebleu);
    tcase_set_timeout(ref, 120);
    return s;
}

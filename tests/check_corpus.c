/* check_corpus.c - the generated German is correct, the splits are
 * disjoint, bad TSV files get a message naming the line, and the Ding
 * dictionary gives exactly the sentence pairs its rule says.
 *
 * "Core": hand-checked English/German pairs, each built as a structured
 * Sentence and rendered; every one probes a rule of German grammar (named
 * in the comment beside it).
 * "Ding": tests/data/ding_sample.txt, a file written by hand in the Ding
 * format (the dictionary's own lines are GPL-2+ and stay out of this
 * repository), then the installed dictionary itself when trans-de-en is
 * there. Run from the repository root, as `make test` does.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text/corpus.h"
#include "text/grammar.h"
#include "core/hash.h"
#include "testutil.h"

/* NounPhrase from words: det "the" / "a" / "my" / "2".."12"; count 1 or 2
 * for the/my (2 = plural); adjective or NULL. */
static NounPhrase np(const char *det, int plural, const char *adj, const char *noun) {
    NounPhrase p = {DET_THE, plural ? 2 : 1, -1, corpus_noun(noun)};
    ck_assert_msg(p.noun >= 0, "unknown noun %s", noun);
    if (!strcmp(det, "a")) p.det = DET_A;
    else if (!strcmp(det, "my")) p.det = DET_MY;
    else if (strcmp(det, "the")) p.det = DET_NUM, p.count = atoi(det);
    if (adj) {
        p.adj = corpus_adj(adj);
        ck_assert_msg(p.adj >= 0, "unknown adjective %s", adj);
    }
    return p;
}

static Clause clause(NounPhrase subj, const char *verb, int perfect) {
    Clause c = {0};
    c.subj = subj;
    c.verb = corpus_verb(verb);
    ck_assert_msg(c.verb >= 0, "unknown verb %s", verb);
    c.perfect = perfect;
    c.prep = PREP_NONE;
    return c;
}

static Clause with_obj(Clause c, NounPhrase obj) {
    c.obj = obj;
    return c;
}

static Clause with_pp(Clause c, int prep, NounPhrase p) {
    c.prep = prep;
    c.pobj = p;
    return c;
}

static Sentence simple(Clause c) {
    Sentence s = {.adverb = -1, .main = c, .conj = CONJ_NONE};
    return s;
}

static void expect(const Sentence *s, const char *en, const char *de) {
    char e[512], d[512], err[256];
    int rc = corpus_render(s, e, sizeof e, d, sizeof d, err, sizeof err);
    ck_assert_msg(rc == 0, "render failed: %s (expected %s)", err, de);
    ck_assert_str_eq(e, en);
    ck_assert_str_eq(d, de);
}

START_TEST(test_hand_checked_pairs) {
    Sentence s;
    /* nominative der, accusative den + weak -en */
    s = simple(with_obj(clause(np("the", 0, NULL, "man"), "see", 0), np("the", 0, "big", "dog")));
    expect(&s, "The man sees the big dog .", "Der Mann sieht den großen Hund .");
    /* feminine and neuter: accusative = nominative; weak -e */
    s = simple(with_obj(clause(np("the", 0, "old", "woman"), "love", 0), np("the", 0, "small", "horse")));
    expect(&s, "The old woman loves the small horse .", "Die alte Frau liebt das kleine Pferd .");
    /* ein + mixed endings: -er (masc. nom.), -es (neut. acc.), "an" before a vowel */
    s = simple(with_obj(clause(np("a", 0, "tired", "dog"), "eat", 0), np("a", 0, NULL, "egg")));
    expect(&s, "A tired dog eats an egg .", "Ein müder Hund isst ein Ei .");
    s = simple(with_obj(clause(np("a", 0, NULL, "girl"), "find", 0), np("a", 0, "old", "book")));
    expect(&s, "A girl finds an old book .", "Ein Mädchen findet ein altes Buch .");
    /* einen + -en (masc. acc.) */
    s = simple(with_obj(clause(np("my", 0, NULL, "sister"), "buy", 0), np("a", 0, "red", "ball")));
    expect(&s, "My sister buys a red ball .", "Meine Schwester kauft einen roten Ball .");
    /* dative verb: helfen + dative plural -n, plural agreement */
    s = simple(with_obj(clause(np("a", 0, NULL, "woman"), "help", 0), np("the", 1, NULL, "child")));
    expect(&s, "A woman helps the children .", "Eine Frau hilft den Kindern .");
    s = simple(with_obj(clause(np("the", 1, NULL, "child"), "thank", 0), np("the", 0, "young", "teacher")));
    expect(&s, "The children thank the young teacher .", "Die Kinder danken dem jungen Lehrer .");
    /* mit + dative: feminine der, number + strong -en + dative plural */
    s = simple(with_pp(clause(np("the", 0, NULL, "dog"), "play", 0), PREP_WITH, np("the", 0, NULL, "cat")));
    expect(&s, "The dog plays with the cat .", "Der Hund spielt mit der Katze .");
    s = simple(with_pp(clause(np("the", 0, NULL, "cook"), "laugh", 0), PREP_WITH, np("3", 0, "big", "dog")));
    expect(&s, "The cook laughs with three big dogs .", "Der Koch lacht mit drei großen Hunden .");
    /* number + strong -e in the nominative/accusative plural */
    s = simple(with_obj(clause(np("12", 0, "white", "bird"), "see", 0), np("my", 0, NULL, "house")));
    expect(&s, "Twelve white birds see my house .", "Zwölf weiße Vögel sehen mein Haus .");
    /* in + dem -> im; in + der; mein + -em */
    s = simple(with_pp(clause(np("the", 0, NULL, "child"), "sleep", 0), PREP_IN, np("the", 0, "big", "garden")));
    expect(&s, "The child sleeps in the big garden .", "Das Kind schläft im großen Garten .");
    s = simple(with_pp(clause(np("the", 1, NULL, "man"), "work", 0), PREP_IN, np("the", 0, NULL, "city")));
    expect(&s, "The men work in the city .", "Die Männer arbeiten in der Stadt .");
    s = simple(with_pp(with_obj(clause(np("the", 0, NULL, "king"), "read", 0), np("a", 0, NULL, "letter")),
                       PREP_IN, np("my", 0, NULL, "kitchen")));
    expect(&s, "The king reads a letter in my kitchen .", "Der König liest einen Brief in meiner Küche .");
    /* ein in the dative: einem + -en (masc.), einer + -en (fem.); eine + -e (fem. acc.) */
    s = simple(with_pp(with_obj(clause(np("the", 0, NULL, "child"), "find", 0), np("a", 0, "beautiful", "flower")),
                       PREP_WITH, np("a", 0, "red", "ball")));
    expect(&s, "The child finds a beautiful flower with a red ball .",
           "Das Kind findet eine schöne Blume mit einem roten Ball .");
    s = simple(with_pp(clause(np("the", 0, NULL, "mother"), "wait", 0), PREP_IN, np("a", 0, "small", "city")));
    expect(&s, "The mother waits in a small city .", "Die Mutter wartet in einer kleinen Stadt .");
    /* im + weak -en for a neuter place; a number and a dative plural object */
    s = simple(with_pp(with_obj(clause(np("the", 0, NULL, "doctor"), "help", 0), np("2", 0, NULL, "child")),
                       PREP_IN, np("the", 0, "old", "house")));
    expect(&s, "The doctor helps two children in the old house .",
           "Der Arzt hilft zwei Kindern im alten Haus .");
    /* perfect with haben: participle at the end */
    s = simple(with_obj(clause(np("the", 0, NULL, "man"), "see", 1), np("the", 0, NULL, "dog")));
    expect(&s, "The man has seen the dog .", "Der Mann hat den Hund gesehen .");
    /* perfect with sein, plural: sind ... gelaufen */
    s = simple(clause(np("the", 1, NULL, "dog"), "run", 1));
    s.adverb = corpus_adverb("today");
    expect(&s, "Today the dogs have run .", "Heute sind die Hunde gelaufen .");
    /* folgen: dative and sein */
    s = simple(with_obj(clause(np("the", 0, NULL, "dog"), "follow", 1), np("the", 0, NULL, "woman")));
    expect(&s, "The dog has followed the woman .", "Der Hund ist der Frau gefolgt .");
    /* perfect + PP: the participle after the PP */
    s = simple(with_pp(clause(np("the", 0, NULL, "girl"), "play", 1), PREP_WITH, np("my", 1, NULL, "friend")));
    expect(&s, "The girl has played with my friends .", "Das Mädchen hat mit meinen Freunden gespielt .");
    /* verb second after a fronted adverb */
    s = simple(with_obj(clause(np("the", 0, NULL, "man"), "see", 0), np("the", 0, NULL, "dog")));
    s.adverb = corpus_adverb("sometimes");
    expect(&s, "Sometimes the man sees the dog .", "Manchmal sieht der Mann den Hund .");
    /* subordinate clause: verb at the end */
    s = simple(clause(np("the", 0, NULL, "man"), "laugh", 0));
    s.conj = CONJ_BECAUSE;
    s.sub = with_obj(clause(np("the", 0, NULL, "woman"), "see", 0), np("the", 0, NULL, "dog"));
    expect(&s, "The man laughs , because the woman sees the dog .",
           "Der Mann lacht , weil die Frau den Hund sieht .");
    /* subordinate perfect: participle, then the auxiliary */
    s.sub.perfect = 1;
    expect(&s, "The man laughs , because the woman has seen the dog .",
           "Der Mann lacht , weil die Frau den Hund gesehen hat .");
    /* a fronted clause takes the first position: verb, then subject */
    s.sub_first = 1;
    s.conj = CONJ_ALTHOUGH;
    s.main.perfect = 1;
    expect(&s, "Although the woman has seen the dog , the man has laughed .",
           "Obwohl die Frau den Hund gesehen hat , hat der Mann gelacht .");
    /* während + sein in the subordinate clause */
    s = simple(clause(np("the", 0, NULL, "cat"), "sleep", 0));
    s.conj = CONJ_WHILE;
    s.sub = clause(np("2", 0, NULL, "mouse"), "come", 1);
    expect(&s, "The cat sleeps , while two mice have come .", "Die Katze schläft , während zwei Mäuse gekommen sind .");
    /* know + object = kennen; know that = wissen, "dass" with a comma in German only */
    s = simple(with_obj(clause(np("the", 0, NULL, "woman"), "know", 0), np("the", 0, NULL, "doctor")));
    expect(&s, "The woman knows the doctor .", "Die Frau kennt den Arzt .");
    s = simple(clause(np("the", 0, NULL, "woman"), "know_that", 0));
    s.conj = CONJ_THAT;
    s.sub = clause(np("the", 0, NULL, "man"), "sleep", 0);
    expect(&s, "The woman knows that the man sleeps .", "Die Frau weiß , dass der Mann schläft .");
    s.main.perfect = 1;
    s.sub = with_pp(clause(np("my", 1, "happy", "brother"), "dance", 1), PREP_IN, np("a", 0, NULL, "village"));
    expect(&s, "The woman has known that my happy brothers have danced in a village .",
           "Die Frau hat gewusst , dass meine frohen Brüder in einem Dorf getanzt haben .");
}
END_TEST

START_TEST(test_render_rejects_bad_structures) {
    char e[512], d[512], err[256];
    Sentence s = simple(clause(np("the", 0, NULL, "man"), "see", 0));
    s.main.obj = np("the", 0, NULL, "soup");
    s.main.verb = corpus_verb("hear");   /* hear takes people and animals */
    ck_assert_int_eq(corpus_render(&s, e, sizeof e, d, sizeof d, err, sizeof err), 2);
    s = simple(clause(np("the", 0, NULL, "man"), "say", 0));   /* say without that */
    ck_assert_int_eq(corpus_render(&s, e, sizeof e, d, sizeof d, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "that"));
    s = simple(clause(np("the", 0, NULL, "dog"), "run", 0));   /* "run in" needs the accusative */
    s.main = with_pp(s.main, PREP_IN, np("the", 0, NULL, "park"));
    ck_assert_int_eq(corpus_render(&s, e, sizeof e, d, sizeof d, err, sizeof err), 2);
    s = simple(clause(np("the", 0, NULL, "dog"), "run", 0));
    ck_assert_int_eq(corpus_render(&s, e, 8, d, sizeof d, err, sizeof err), 2);   /* buffer too small */
}
END_TEST

START_TEST(test_generate_deterministic_and_disjoint) {
    Corpus a1, b1, c1, a2, b2, c2;
    char err[256];
    ck_assert_int_eq(corpus_generate(&a1, &b1, &c1, 2000, 200, 200, 7, err, sizeof err), 0);
    ck_assert_int_eq(corpus_generate(&a2, &b2, &c2, 2000, 200, 200, 7, err, sizeof err), 0);
    ck_assert_int_eq(a1.n, 2000);
    for (int i = 0; i < a1.n; i++) ck_assert_str_eq(a1.tgt[i], a2.tgt[i]);
    /* no sentence in two splits */
    for (int i = 0; i < c1.n; i++) {
        for (int j = 0; j < a1.n; j++) ck_assert_str_ne(c1.src[i], a1.src[j]);
        for (int j = 0; j < b1.n; j++) ck_assert_str_ne(c1.src[i], b1.src[j]);
    }
    /* another seed, other sentences */
    Corpus a3, b3, c3;
    ck_assert_int_eq(corpus_generate(&a3, &b3, &c3, 10, 1, 1, 8, err, sizeof err), 0);
    ck_assert_str_ne(a3.src[0], a1.src[0]);
    corpus_free(&a1), corpus_free(&b1), corpus_free(&c1);
    corpus_free(&a2), corpus_free(&b2), corpus_free(&c2);
    corpus_free(&a3), corpus_free(&b3), corpus_free(&c3);
    ck_assert_int_eq(corpus_generate(&a1, &b1, &c1, 10, 0, 1, 7, err, sizeof err), 2);
    /* splitting a user's corpus: dev and test take at most a tenth each */
    ck_assert_int_eq(corpus_generate(&a1, &b1, &c1, 100, 1, 1, 7, err, sizeof err), 0);
    ck_assert_int_eq(corpus_split(&a1, &a2, &b2, &c2, 300, 500, 1, err, sizeof err), 0);
    ck_assert_int_eq(b2.n, 10);
    ck_assert_int_eq(c2.n, 10);
    ck_assert_int_eq(a2.n, 80);
    corpus_free(&a1), corpus_free(&b1), corpus_free(&c1);
    corpus_free(&a2), corpus_free(&b2), corpus_free(&c2);
}
END_TEST

START_TEST(test_utf8) {
    ck_assert_int_eq(utf8_invalid_at("große Bäume", strlen("große Bäume")), -1);
    ck_assert_int_eq(utf8_invalid_at("a\xC3", 2), 1);            /* truncated sequence */
    ck_assert_int_eq(utf8_invalid_at("ab\xC0\xAF", 4), 2);       /* overlong '/' */
    ck_assert_int_eq(utf8_invalid_at("\xED\xA0\x80", 3), 0);     /* a surrogate */
    ck_assert_int_eq(utf8_invalid_at("\xF4\x90\x80\x80", 4), 0); /* above U+10FFFF */
    ck_assert_int_eq(utf8_invalid_at("x\xFF", 2), 1);
}
END_TEST

static char tmpdir[64];

/* n bytes of content written to tmpdir/name; returns that path (a static
 * buffer: the next call overwrites it) */
static const char *tmp_file(const char *name, const char *content, size_t n) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    write_file(path, content, n);
    return path;
}

/* loading content must fail with status rc and a message containing want */
static void expect_tsv_error(const char *content, size_t n, int rc, const char *want) {
    Corpus c;
    char err[512];
    const char *p = tmp_file("bad.tsv", content, n);
    ck_assert_int_eq(corpus_load_tsv(&c, p, err, sizeof err), rc);
    ck_assert_msg(strstr(err, want) != NULL, "message \"%s\" does not say \"%s\"", err, want);
    ck_assert_int_eq(c.n, 0);
}

START_TEST(test_tsv) {
    fresh_dir(tmpdir, sizeof tmpdir, "check_corpus");
    Corpus c;
    char err[512];
    const char good[] = "the  dog\tder Hund\r\nA  bird \t Ein Vogel\nthe cats\tdie Katzen";
    const char *p = tmp_file("good.tsv", good, sizeof good - 1);
    ck_assert_int_eq(corpus_load_tsv(&c, p, err, sizeof err), 0);
    ck_assert_int_eq(c.n, 3);
    ck_assert_str_eq(c.src[0], "the dog");      /* spaces squeezed, CR dropped */
    ck_assert_str_eq(c.tgt[0], "der Hund");
    ck_assert_str_eq(c.src[1], "A bird");
    ck_assert_str_eq(c.tgt[1], "Ein Vogel");
    ck_assert_str_eq(c.tgt[2], "die Katzen");   /* no final newline */
    Corpus tr, dv, te;
    ck_assert_int_eq(corpus_split(&c, &tr, &dv, &te, 5, 5, 1, err, sizeof err), 0);
    ck_assert_int_eq(tr.n + dv.n + te.n, 3);
    ck_assert_int_ge(tr.n, 1);
    ck_assert_int_ge(dv.n, 1);
    ck_assert_int_ge(te.n, 1);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
    /* save + load is the identity */
    char sp[128];
    snprintf(sp, sizeof sp, "%s/saved.tsv", tmpdir);
    ck_assert_int_eq(corpus_save_tsv(&c, sp, err, sizeof err), 0);
    Corpus c2;
    ck_assert_int_eq(corpus_load_tsv(&c2, sp, err, sizeof err), 0);
    ck_assert_int_eq(c2.n, 3);
    ck_assert_str_eq(c2.src[2], "the cats");
    corpus_free(&c2);
    corpus_free(&c);

    expect_tsv_error("a\tb\nno tab here\n", 16, 2, "line 2: no tab");
    expect_tsv_error("a\tb\tc\n", 6, 2, "line 1: more than one tab");
    expect_tsv_error("a\tb\n\tder Hund\n", 14, 2, "line 2: the source side is empty");
    expect_tsv_error("a\t   \n", 6, 2, "line 1: the target side is empty");
    expect_tsv_error("a\tb\n\nc\td\n", 9, 2, "line 2: empty");
    expect_tsv_error("a\tgro\xDF\n", 8, 2, "line 1: invalid UTF-8 at byte 6");
    expect_tsv_error("a\tb\x01\n", 5, 2, "line 1: control character 0x01");
    expect_tsv_error("a\tb\0c\n", 6, 2, "line 1: contains a NUL byte");
    expect_tsv_error("", 0, 2, "empty");
    char *big = malloc(CORPUS_MAX_LINE + 10);
    memset(big, 'x', CORPUS_MAX_LINE + 9);
    big[3] = '\t';
    expect_tsv_error(big, CORPUS_MAX_LINE + 9, 2, "line 1: longer than");
    free(big);
    /* a folder or a FIFO is not a file to read: bad input, 2, as a
     * checkpoint's loader says it (issue 34, item 6: it was 1); a missing
     * file is an I/O problem: 1 */
    ck_assert_int_eq(corpus_load_tsv(&c, tmpdir, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "is not a regular file (it is a folder); give a .tsv file"), "%s", err);
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/tsv_fifo", tmpdir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(corpus_load_tsv(&c, fifo, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "is not a regular file (it is a FIFO)"), "%s", err);
    ck_assert_int_eq(corpus_load_tsv(&c, "/nonexistent/x.tsv", err, sizeof err), 1);
    /* a file of one pair repeated is too small to split */
    p = tmp_file("dup.tsv", "a\tb\na\tb\n", 8);
    ck_assert_int_eq(corpus_load_tsv(&c, p, err, sizeof err), 0);
    ck_assert_int_eq(corpus_split(&c, &tr, &dv, &te, 1, 1, 1, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "1 distinct sentence pair"));
    corpus_free(&c);
    remove_dir(tmpdir);
}
END_TEST

/* corpus_split keeps each pair once, by both sides: an exact repeat goes,
 * the same English with another German stays (the Ding corpus has such
 * pairs). corpus_save_tsv leaves the file and nothing else. */
START_TEST(test_split_distinct_pairs) {
    fresh_dir(tmpdir, sizeof tmpdir, "check_corpus");
    char text[1024], err[512];
    size_t k = 0;
    for (int i = 0; i < 10; i++) k += (size_t)snprintf(text + k, sizeof text - k, "s%d\tz%d\n", i, i);
    k += (size_t)snprintf(text + k, sizeof text - k, "s3\tz3\ns3\tanders\n");   /* a repeat; a new German */
    Corpus c, tr, dv, te;
    ck_assert_int_eq(corpus_load_tsv(&c, tmp_file("dups.tsv", text, k), err, sizeof err), 0);
    ck_assert_int_eq(c.n, 12);
    ck_assert_int_eq(corpus_split(&c, &tr, &dv, &te, 5, 5, 3, err, sizeof err), 0);
    ck_assert_int_eq(tr.n + dv.n + te.n, 11);   /* 11 distinct pairs: dev and test 1 each (a tenth) */
    ck_assert_int_eq(dv.n, 1);
    ck_assert_int_eq(te.n, 1);
    int s3 = 0, anders = 0;
    const Corpus *parts[3] = {&tr, &dv, &te};
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < parts[p]->n; i++) {
            s3 += !strcmp(parts[p]->src[i], "s3");
            anders += !strcmp(parts[p]->tgt[i], "anders");
        }
    ck_assert_int_eq(s3, 2);       /* (s3, z3) once and (s3, anders) */
    ck_assert_int_eq(anders, 1);

    char path[128];
    snprintf(path, sizeof path, "%s/saved.tsv", tmpdir);
    ck_assert_int_eq(corpus_save_tsv(&tr, path, err, sizeof err), 0);
    Corpus back;
    ck_assert_int_eq(corpus_load_tsv(&back, path, err, sizeof err), 0);
    ck_assert_int_eq(back.n, tr.n);
    for (int i = 0; i < tr.n; i++) {
        ck_assert_str_eq(back.src[i], tr.src[i]);
        ck_assert_str_eq(back.tgt[i], tr.tgt[i]);
    }
    char bad[160];
    snprintf(bad, sizeof bad, "%s/no/such/folder/x.tsv", tmpdir);
    ck_assert_int_eq(corpus_save_tsv(&tr, bad, err, sizeof err), 1);
    ck_assert_int_ne(err[0], 0);
    /* the folder holds dups.tsv and saved.tsv: no temporary left behind */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 2", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    corpus_free(&back), corpus_free(&tr), corpus_free(&dv), corpus_free(&te), corpus_free(&c);
    remove_dir(tmpdir);
}
END_TEST

/* ---- the Ding dictionary ------------------------------------------------------ */
#define DING_SAMPLE "tests/data/ding_sample.txt"

/* c holds exactly the n pairs want[][0] (English) -> want[][1] (German), in order */
static void expect_pairs(const Corpus *c, const char *const want[][2], int n, const char *what) {
    for (int i = 0; i < c->n && i < n; i++) {
        ck_assert_msg(!strcmp(c->src[i], want[i][0]) && !strcmp(c->tgt[i], want[i][1]),
                      "%s %d: got \"%s\" -> \"%s\", want \"%s\" -> \"%s\"", what, i, c->src[i], c->tgt[i],
                      want[i][0], want[i][1]);
    }
    ck_assert_msg(c->n == n, "%s: %d pairs, want %d", what, c->n, n);
}

/* the index of pair (en, de) in c, or -1 */
static int find_pair(const Corpus *c, const char *en, const char *de) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->src[i], en) && !strcmp(c->tgt[i], de)) return i;
    return -1;
}

/* The sample's sentence pairs, in file order. Left out, each for its rule:
 * "Komm her!" (two words), "He reads a book (about dogs)." (markup),
 * "I have no time; I am busy." (';'), "He/She comes tomorrow." ('/'), the
 * bus entry (one German part too many: cannot be aligned), the second
 * "Wo ist der Bahnhof?" (a repeat), the line without "::". */
static const char *const SAMPLE_SENT[][2] = {
    {"The house is big.", "Das Haus ist groß."},            /* 2nd and 3rd '|' part of "Haus {n}" */
    {"The houses are old.", "Die Häuser sind alt."},
    {"The dog sleeps in the garden.", "Der Hund schläft im Garten."},
    {"We are going home today.", "Wir gehen heute nach Hause."},   /* the CRLF line */
    {"Where is the station?", "Wo ist der Bahnhof?"},
    {"The weather is nice.", "Das Wetter ist schön."},
    {"Where is the station?", "Wo befindet sich der Bahnhof?"},   /* same English, another German */
    {"The child laughs loudly.", "Das Kind lacht laut."},   /* spaces collapsed, end trimmed */
    {"They sing a song.", "Sie singen ein Lied."},
    {"I like drinking tea.", "Ich trinke gern Tee."},
};

/* Every other aligned part, as a phrase: the first synonym, markup off. */
static const char *const SAMPLE_PHRASES[][2] = {
    {"dog", "Hund"}, {"dogs", "Hunde"},       /* Hund {m} | Hunde {pl} :: dog | dogs */
    {"cat", "Katze"}, {"cats", "Katzen"},     /* "; Mieze {f} [ugs.]", "; pussycat [coll.]" dropped */
    {"garden", "Garten"},                     /* (hinter dem Haus), (behind the house) removed */
    {"house", "Haus"},
    {"Come here!", "Komm her!"},              /* too short for a sentence, kept as a phrase */
    {"He reads a book .", "Er liest ein Buch ."},   /* (...) removed, the space before '.' stays */
    {"I have no time", "Ich habe keine Zeit"},      /* the first synonym; "He/She" has a '/' */
};

START_TEST(test_ding_sample) {
    Corpus sent, phr, sent2;
    char err[512];
    int rc = corpus_load_ding(&sent, &phr, DING_SAMPLE, err, sizeof err);
    ck_assert_msg(rc == 0, "%s (run from the repository root)", err);
    expect_pairs(&sent, SAMPLE_SENT, (int)(sizeof SAMPLE_SENT / sizeof SAMPLE_SENT[0]), "sentence");
    expect_pairs(&phr, SAMPLE_PHRASES, (int)(sizeof SAMPLE_PHRASES / sizeof SAMPLE_PHRASES[0]), "phrase");
    /* without phrases: the same sentences */
    ck_assert_int_eq(corpus_load_ding(&sent2, NULL, DING_SAMPLE, err, sizeof err), 0);
    expect_pairs(&sent2, SAMPLE_SENT, sent.n, "sentence (phrases NULL)");
    corpus_free(&sent), corpus_free(&phr), corpus_free(&sent2);
    /* the CRLF line only tests something while the file keeps its CR */
    FILE *f = fopen(DING_SAMPLE, "rb");
    ck_assert_ptr_nonnull(f);
    int ch, cr = 0;
    while ((ch = fgetc(f)) != EOF) cr += ch == '\r';
    fclose(f);
    ck_assert_msg(cr == 1, DING_SAMPLE " should hold one CRLF line, holds %d CR: was it normalised?", cr);
}
END_TEST

/* no English sentence of a is in b (an assertion only on a failure: each
 * ck_assert costs a write, and the dictionary asks millions of these) */
static void expect_disjoint(const Corpus *a, const Corpus *b, const char *what) {
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++)
            if (!strcmp(a->src[i], b->src[j])) ck_assert_msg(0, "\"%s\" is in %s", a->src[i], what);
}

static void expect_same(const Corpus *a, const Corpus *b) {
    ck_assert_int_eq(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        ck_assert_str_eq(a->src[i], b->src[i]);
        ck_assert_str_eq(a->tgt[i], b->tgt[i]);
    }
}

/* The hash corpus_split_fixed ranks by (core/hash.h): values computed
 * outside this code, in Python with the library's start,
 *   h = 1469598103934665603; for c in s: h = ((h ^ c) * 1099511628211) % 2**64
 * and hashing in two pieces is hashing the whole. */
START_TEST(test_fnv1a) {
    static const struct { const char *s; uint64_t h; } cases[] = {
        {"", 0x14650fb0739d0383ull},
        {"a", 0x44bd8ad473cd9906ull},
        {"foobar", 0x88fad7c0a8ff07f2ull},
        {"Gr\xc3\xb6\xc3\x9f" "e", 0x442300c74ec94714ull},   /* "Größe" in UTF-8 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_msg(fnv1a_str(FNV1A_INIT, cases[i].s) == cases[i].h, "fnv1a \"%s\"", cases[i].s);
        ck_assert(fnv1a_update(FNV1A_INIT, cases[i].s, strlen(cases[i].s)) == cases[i].h);
    }
    const char *s = "der Hund\tthe dog";
    for (size_t cut = 0, n = strlen(s); cut <= n; cut++)
        ck_assert(fnv1a_update(fnv1a_update(FNV1A_INIT, s, cut), s + cut, n - cut) == fnv1a_str(FNV1A_INIT, s));
}
END_TEST

START_TEST(test_ding_split_fixed) {
    Corpus all, tr, dv, te, tr2, dv2, te2;
    char err[512];
    ck_assert_int_eq(corpus_load_ding(&all, NULL, DING_SAMPLE, err, sizeof err), 0);
    /* ranked by FNV-1a-64 of the English: "The dog sleeps ..." (0x058426e5c504d3d1),
     * "The house is big." (0x1239...), "We are going ..." (0x1a66...), then
     * both "Where is the station?" (0x2052...), then the rest. Dev takes 2;
     * test takes 2, and a third: the cut would fall between the two pairs of
     * "Where is the station?" and moves past them. Each keeps file order. */
    ck_assert_int_eq(corpus_split_fixed(&all, &tr, &dv, &te, 2, 2, err, sizeof err), 0);
    static const char *const dev_want[][2] = {{"The house is big.", "Das Haus ist groß."},
                                              {"The dog sleeps in the garden.", "Der Hund schläft im Garten."}};
    static const char *const test_want[][2] = {{"We are going home today.", "Wir gehen heute nach Hause."},
                                               {"Where is the station?", "Wo ist der Bahnhof?"},
                                               {"Where is the station?", "Wo befindet sich der Bahnhof?"}};
    static const char *const train_want[][2] = {{"The houses are old.", "Die Häuser sind alt."},
                                                {"The weather is nice.", "Das Wetter ist schön."},
                                                {"The child laughs loudly.", "Das Kind lacht laut."},
                                                {"They sing a song.", "Sie singen ein Lied."},
                                                {"I like drinking tea.", "Ich trinke gern Tee."}};
    expect_pairs(&dv, dev_want, 2, "dev");
    expect_pairs(&te, test_want, 3, "test");
    expect_pairs(&tr, train_want, 5, "train");
    /* fixed: another split in between, then the same call, the same result */
    ck_assert_int_eq(corpus_split_fixed(&all, &tr2, &dv2, &te2, 1, 1, err, sizeof err), 0);
    corpus_free(&tr2), corpus_free(&dv2), corpus_free(&te2);
    ck_assert_int_eq(corpus_split_fixed(&all, &tr2, &dv2, &te2, 2, 2, err, sizeof err), 0);
    expect_same(&tr, &tr2), expect_same(&dv, &dv2), expect_same(&te, &te2);
    corpus_free(&tr2), corpus_free(&dv2), corpus_free(&te2);
    /* the text decides, not its order: the corpus backwards, with a repeat
     * of its first pair, puts every pair on the same side */
    char *src[16], *tgt[16];
    int n = 0;
    for (int i = all.n - 1; i >= 0; i--) src[n] = all.src[i], tgt[n++] = all.tgt[i];
    src[n] = all.src[0], tgt[n++] = all.tgt[0];
    Corpus back = {src, tgt, n};
    ck_assert_int_eq(corpus_split_fixed(&back, &tr2, &dv2, &te2, 2, 2, err, sizeof err), 0);
    ck_assert_int_eq(tr2.n + dv2.n + te2.n, all.n);   /* the repeat kept once */
    for (int i = 0; i < all.n; i++) {
        const char *en = all.src[i], *de = all.tgt[i];
        ck_assert_int_eq(find_pair(&dv2, en, de) >= 0, find_pair(&dv, en, de) >= 0);
        ck_assert_int_eq(find_pair(&te2, en, de) >= 0, find_pair(&te, en, de) >= 0);
        ck_assert_int_eq(find_pair(&tr2, en, de) >= 0, find_pair(&tr, en, de) >= 0);
    }
    ck_assert_str_eq(dv2.src[0], "The dog sleeps in the garden.");   /* file order: this file's */
    corpus_free(&tr2), corpus_free(&dv2), corpus_free(&te2);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
    /* every size that leaves enough to train: disjoint by English, and the
     * two translations of "Where is the station?" always on one side */
    for (int nd = 1; nd <= 4; nd++)
        for (int nt = 1; nt <= 4; nt++) {
            int rc = corpus_split_fixed(&all, &tr, &dv, &te, nd, nt, err, sizeof err);
            if (rc) {
                ck_assert_int_eq(rc, 2);
                ck_assert_msg(strstr(err, "to train on") != NULL, "%s", err);
                continue;
            }
            ck_assert_int_eq(tr.n + dv.n + te.n, all.n);
            ck_assert_int_ge(dv.n, nd);
            ck_assert_int_ge(te.n, nt);
            ck_assert_int_ge(tr.n, dv.n + te.n);
            expect_disjoint(&dv, &tr, "dev and train"), expect_disjoint(&te, &tr, "test and train");
            expect_disjoint(&dv, &te, "dev and test");
            const Corpus *sides[3] = {&tr, &dv, &te};
            for (int k = 0; k < 3; k++)
                ck_assert_int_eq(find_pair(sides[k], "Where is the station?", "Wo ist der Bahnhof?") >= 0,
                                 find_pair(sides[k], "Where is the station?", "Wo befindet sich der Bahnhof?") >= 0);
            corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
        }
    /* errors: empty dev or test, too little left to train on */
    ck_assert_int_eq(corpus_split_fixed(&all, &tr, &dv, &te, 0, 1, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "at least one pair"));
    ck_assert_int_eq(corpus_split_fixed(&all, &tr, &dv, &te, 3, 3, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "dev 3 and test 3 would leave 4 to train on") != NULL, "%s", err);
    ck_assert_int_eq(tr.n + dv.n + te.n, 0);
    ck_assert_int_eq(corpus_split_fixed(&all, &tr, &dv, &te, 2000000000, 2000000000, err, sizeof err), 2);
    corpus_free(&all);
}
END_TEST

/* loading content as a Ding file must fail with rc and a message containing want */
static void expect_ding_error(const char *content, size_t n, int rc, const char *want) {
    Corpus c, p;
    char err[512];
    const char *path = tmp_file("bad.ding", content, n);
    ck_assert_int_eq(corpus_load_ding(&c, &p, path, err, sizeof err), rc);
    ck_assert_msg(strstr(err, want) != NULL, "message \"%s\" does not say \"%s\"", err, want);
    ck_assert_int_eq(c.n, 0);
    ck_assert_int_eq(p.n, 0);
}
#define DING_ERROR(text, rc, want) expect_ding_error(text, sizeof text - 1, rc, want)

START_TEST(test_ding_bad_files) {
    fresh_dir(tmpdir, sizeof tmpdir, "check_corpus");
    Corpus c, p;
    char err[512];
    /* missing: says how to install it; a directory and a FIFO: refused, not read */
    ck_assert_int_eq(corpus_load_ding(&c, &p, "/nonexistent/de-en", err, sizeof err), 1);
    ck_assert_msg(strstr(err, "install it: apt-get install trans-de-en") != NULL, "%s", err);
    ck_assert_int_eq(corpus_load_ding(&c, NULL, tmpdir, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "is not a regular file (it is a folder)"), "%s", err);
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(corpus_load_ding(&c, NULL, fifo, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "is not a regular file (it is a FIFO)"), "%s", err);
    /* bad content: the line is named */
    DING_ERROR("# ok\nDas ist gro\xDF. :: That is big.\n", 2, "line 2: invalid UTF-8 at byte 12");
    DING_ERROR("Er kommt\0 heute. :: He comes today.\n", 2, "line 1: contains a NUL byte");
    DING_ERROR("", 2, "no example sentence pair");
    DING_ERROR("# only a comment :: with colons\nHund {m} :: dog\n", 2, "no example sentence pair");
    /* no final newline, and a line over DING_MAX_LINE: skipped whole, the next one read */
    const char tail[] = "\nSie kommt heute. :: She comes today.";
    size_t big = DING_MAX_LINE + 100, n = big + sizeof tail - 1;
    char *text = malloc(n);
    memcpy(text, "Er kommt morgen. :: He comes tomorrow. | ", 41);
    memset(text + 41, 'x', big - 41);
    memcpy(text + big, tail, sizeof tail - 1);
    ck_assert_int_eq(corpus_load_ding(&c, &p, tmp_file("long.ding", text, n), err, sizeof err), 0);
    free(text);
    ck_assert_int_eq(c.n, 1);
    ck_assert_str_eq(c.src[0], "She comes today.");
    ck_assert_str_eq(c.tgt[0], "Sie kommt heute.");
    ck_assert_int_eq(p.n, 0);
    corpus_free(&c), corpus_free(&p);
    remove_dir(tmpdir);
}
END_TEST

/* The dictionary itself, when trans-de-en is installed. Its 2023-01-30
 * version has 14,672 example sentence pairs (an independent Python reading
 * of the same rule agrees); another version is checked for size only. */
START_TEST(test_ding_installed) {
    if (access(DING_PATH, R_OK) != 0) {
        test_skip_missing("check_corpus", "trans-de-en", "the Ding dictionary %s is not installed "
                          "(apt-get install trans-de-en)", DING_PATH);
        return;
    }
    char head[128] = "", err[512];
    FILE *f = fopen(DING_PATH, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(head, sizeof head, f));
    fclose(f);
    int known = strstr(head, "2023-01-30") != NULL;
    Corpus sent, phr, tr, dv, te;
    ck_assert_msg(corpus_load_ding(&sent, &phr, DING_PATH, err, sizeof err) == 0, "%s", err);
    if (known) ck_assert_int_eq(sent.n, 14672);
    else test_skip("check_corpus", "the Ding count: %s is another version (%.60s): %d sentence pairs, not compared "
                   "with 14672", DING_PATH, head, sent.n);
    ck_assert_int_gt(sent.n, 10000);
    ck_assert_int_gt(phr.n, 200000);
    ck_assert_int_eq(corpus_split_fixed(&sent, &tr, &dv, &te, 500, 500, err, sizeof err), 0);
    ck_assert_int_eq(tr.n + dv.n + te.n, sent.n);
    if (known) {
        ck_assert_int_eq(dv.n, 500);
        ck_assert_int_eq(te.n, 500);
    }
    expect_disjoint(&dv, &te, "dev and test");
    expect_disjoint(&dv, &tr, "dev and train");
    expect_disjoint(&te, &tr, "test and train");
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
    corpus_free(&sent), corpus_free(&phr);
}
END_TEST

Suite *corpus_suite(void) {
    Suite *s = suite_create("corpus");
    suite_case(s, "Core", test_hand_checked_pairs, test_render_rejects_bad_structures,
               test_generate_deterministic_and_disjoint);
    suite_case(s, "Files", test_utf8, test_tsv, test_split_distinct_pairs);
    TCase *ding = suite_case(s, "Ding", test_ding_sample, test_fnv1a, test_ding_split_fixed,
                             test_ding_bad_files, test_ding_installed);
    tcase_set_timeout(ding, 120);   /* the installed file is 25 MB: seconds under the sanitizers */
    return s;
}

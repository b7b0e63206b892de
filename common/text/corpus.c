/* corpus.c - the English->German grammar, the lexicon, TSV corpora, Ding.
 *
 * Read corpus.h first. This file has four parts:
 *   1. The lexicon: nouns with gender and plural forms, verbs with their
 *      case, auxiliary and participle, adjectives, numbers, adverbs.
 *   2. German morphology: article and adjective-ending tables.
 *   3. Rendering a structured Sentence in both languages, and drawing one.
 *   4. Corpora: generation with disjoint splits, TSV loading and saving.
 *   5. The Ding dictionary: its example sentences and phrase pairs, and the
 *      split that needs no seed.
 */
#include "text/corpus.h"
#include "core/fail.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ============================================================================
 * 1. The lexicon
 * ========================================================================== */

enum { MASC, FEM, NEUT, PLUR };                /* German gender, or plural   */
enum { ANIM = 1, THING = 2, FOOD = 4, TEXT = 8, PLACE = 16 };  /* noun classes */

typedef struct {
    const char *en, *en_pl;         /* man, men                               */
    const char *de, *de_pl, *de_dat_pl;  /* Mann, Männer, Männern (dative plural) */
    int gender;
    int cls;
} Noun;

static const Noun NOUNS[] = {
    {"man", "men", "Mann", "Männer", "Männern", MASC, ANIM},
    {"woman", "women", "Frau", "Frauen", "Frauen", FEM, ANIM},
    {"child", "children", "Kind", "Kinder", "Kindern", NEUT, ANIM},
    {"dog", "dogs", "Hund", "Hunde", "Hunden", MASC, ANIM},
    {"cat", "cats", "Katze", "Katzen", "Katzen", FEM, ANIM},
    {"horse", "horses", "Pferd", "Pferde", "Pferden", NEUT, ANIM},
    {"teacher", "teachers", "Lehrer", "Lehrer", "Lehrern", MASC, ANIM},
    {"girl", "girls", "Mädchen", "Mädchen", "Mädchen", NEUT, ANIM},
    {"bird", "birds", "Vogel", "Vögel", "Vögeln", MASC, ANIM},
    {"friend", "friends", "Freund", "Freunde", "Freunden", MASC, ANIM},
    {"doctor", "doctors", "Arzt", "Ärzte", "Ärzten", MASC, ANIM},
    {"cook", "cooks", "Koch", "Köche", "Köchen", MASC, ANIM},
    {"king", "kings", "König", "Könige", "Königen", MASC, ANIM},
    {"mouse", "mice", "Maus", "Mäuse", "Mäusen", FEM, ANIM},
    {"sister", "sisters", "Schwester", "Schwestern", "Schwestern", FEM, ANIM},
    {"brother", "brothers", "Bruder", "Brüder", "Brüdern", MASC, ANIM},
    {"mother", "mothers", "Mutter", "Mütter", "Müttern", FEM, ANIM},
    {"father", "fathers", "Vater", "Väter", "Vätern", MASC, ANIM},
    {"cow", "cows", "Kuh", "Kühe", "Kühen", FEM, ANIM},
    {"book", "books", "Buch", "Bücher", "Büchern", NEUT, THING | TEXT},
    {"letter", "letters", "Brief", "Briefe", "Briefen", MASC, THING | TEXT},
    {"newspaper", "newspapers", "Zeitung", "Zeitungen", "Zeitungen", FEM, THING | TEXT},
    {"ball", "balls", "Ball", "Bälle", "Bällen", MASC, THING},
    {"car", "cars", "Auto", "Autos", "Autos", NEUT, THING},
    {"tree", "trees", "Baum", "Bäume", "Bäumen", MASC, THING},
    {"flower", "flowers", "Blume", "Blumen", "Blumen", FEM, THING},
    {"picture", "pictures", "Bild", "Bilder", "Bildern", NEUT, THING},
    {"table", "tables", "Tisch", "Tische", "Tischen", MASC, THING},
    {"chair", "chairs", "Stuhl", "Stühle", "Stühlen", MASC, THING},
    {"key", "keys", "Schlüssel", "Schlüssel", "Schlüsseln", MASC, THING},
    {"bag", "bags", "Tasche", "Taschen", "Taschen", FEM, THING},
    {"bottle", "bottles", "Flasche", "Flaschen", "Flaschen", FEM, THING},
    {"apple", "apples", "Apfel", "Äpfel", "Äpfeln", MASC, THING | FOOD},
    {"cake", "cakes", "Kuchen", "Kuchen", "Kuchen", MASC, THING | FOOD},
    {"bread", "breads", "Brot", "Brote", "Broten", NEUT, THING | FOOD},
    {"egg", "eggs", "Ei", "Eier", "Eiern", NEUT, THING | FOOD},
    {"soup", "soups", "Suppe", "Suppen", "Suppen", FEM, THING | FOOD},
    {"garden", "gardens", "Garten", "Gärten", "Gärten", MASC, PLACE},
    {"house", "houses", "Haus", "Häuser", "Häusern", NEUT, PLACE},
    {"park", "parks", "Park", "Parks", "Parks", MASC, PLACE},
    {"city", "cities", "Stadt", "Städte", "Städten", FEM, PLACE},
    {"forest", "forests", "Wald", "Wälder", "Wäldern", MASC, PLACE},
    {"school", "schools", "Schule", "Schulen", "Schulen", FEM, PLACE},
    {"kitchen", "kitchens", "Küche", "Küchen", "Küchen", FEM, PLACE},
    {"village", "villages", "Dorf", "Dörfer", "Dörfern", NEUT, PLACE},
};
#define N_NOUNS ((int)(sizeof NOUNS / sizeof NOUNS[0]))

enum { V_ACC, V_DAT, V_INTR, V_SAY };           /* what follows the verb */
enum { HABEN, SEIN };

typedef struct {
    const char *id;                 /* lookup name: the English base form     */
    const char *en, *en_3sg, *en_pp;/* see, sees, seen                        */
    const char *de_3sg, *de_3pl, *de_pp;  /* sieht, sehen, gesehen            */
    int kind;                       /* V_ACC / V_DAT object, V_INTR, V_SAY    */
    int aux;                        /* HABEN or SEIN in the perfect           */
    int obj;                        /* noun classes allowed as object         */
    int motion;                     /* 1: no "in the garden" (that would need the accusative of direction) */
} Verb;

static const Verb VERBS[] = {
    {"see", "see", "sees", "seen", "sieht", "sehen", "gesehen", V_ACC, HABEN, ANIM | THING | PLACE, 0},
    {"find", "find", "finds", "found", "findet", "finden", "gefunden", V_ACC, HABEN, ANIM | THING, 0},
    {"hear", "hear", "hears", "heard", "hört", "hören", "gehört", V_ACC, HABEN, ANIM, 0},
    {"love", "love", "loves", "loved", "liebt", "lieben", "geliebt", V_ACC, HABEN, ANIM | THING | PLACE, 0},
    {"visit", "visit", "visits", "visited", "besucht", "besuchen", "besucht", V_ACC, HABEN, ANIM | PLACE, 0},
    {"draw", "draw", "draws", "drawn", "zeichnet", "zeichnen", "gezeichnet", V_ACC, HABEN, ANIM | THING | PLACE, 0},
    {"carry", "carry", "carries", "carried", "trägt", "tragen", "getragen", V_ACC, HABEN, ANIM | THING, 0},
    {"read", "read", "reads", "read", "liest", "lesen", "gelesen", V_ACC, HABEN, TEXT, 0},
    {"hold", "hold", "holds", "held", "hält", "halten", "gehalten", V_ACC, HABEN, ANIM | THING, 0},
    {"eat", "eat", "eats", "eaten", "isst", "essen", "gegessen", V_ACC, HABEN, FOOD, 0},
    {"wash", "wash", "washes", "washed", "wäscht", "waschen", "gewaschen", V_ACC, HABEN, ANIM | THING, 0},
    {"buy", "buy", "buys", "bought", "kauft", "kaufen", "gekauft", V_ACC, HABEN, THING, 0},
    {"catch", "catch", "catches", "caught", "fängt", "fangen", "gefangen", V_ACC, HABEN, ANIM | THING, 0},
    {"paint", "paint", "paints", "painted", "malt", "malen", "gemalt", V_ACC, HABEN, ANIM | THING | PLACE, 0},
    {"ask", "ask", "asks", "asked", "fragt", "fragen", "gefragt", V_ACC, HABEN, ANIM, 0},
    {"know", "know", "knows", "known", "kennt", "kennen", "gekannt", V_ACC, HABEN, ANIM | PLACE, 0},
    {"help", "help", "helps", "helped", "hilft", "helfen", "geholfen", V_DAT, HABEN, ANIM, 0},
    {"thank", "thank", "thanks", "thanked", "dankt", "danken", "gedankt", V_DAT, HABEN, ANIM, 0},
    {"answer", "answer", "answers", "answered", "antwortet", "antworten", "geantwortet", V_DAT, HABEN, ANIM, 0},
    {"follow", "follow", "follows", "followed", "folgt", "folgen", "gefolgt", V_DAT, SEIN, ANIM, 1},
    {"sleep", "sleep", "sleeps", "slept", "schläft", "schlafen", "geschlafen", V_INTR, HABEN, 0, 0},
    {"laugh", "laugh", "laughs", "laughed", "lacht", "lachen", "gelacht", V_INTR, HABEN, 0, 0},
    {"play", "play", "plays", "played", "spielt", "spielen", "gespielt", V_INTR, HABEN, 0, 0},
    {"wait", "wait", "waits", "waited", "wartet", "warten", "gewartet", V_INTR, HABEN, 0, 0},
    {"sing", "sing", "sings", "sung", "singt", "singen", "gesungen", V_INTR, HABEN, 0, 0},
    {"work", "work", "works", "worked", "arbeitet", "arbeiten", "gearbeitet", V_INTR, HABEN, 0, 0},
    {"dance", "dance", "dances", "danced", "tanzt", "tanzen", "getanzt", V_INTR, HABEN, 0, 0},
    {"come", "come", "comes", "come", "kommt", "kommen", "gekommen", V_INTR, SEIN, 0, 1},
    {"run", "run", "runs", "run", "läuft", "laufen", "gelaufen", V_INTR, SEIN, 0, 1},
    {"go", "go", "goes", "gone", "geht", "gehen", "gegangen", V_INTR, SEIN, 0, 1},
    {"fall", "fall", "falls", "fallen", "fällt", "fallen", "gefallen", V_INTR, SEIN, 0, 1},
    {"stay", "stay", "stays", "stayed", "bleibt", "bleiben", "geblieben", V_INTR, SEIN, 0, 0},
    {"say", "say", "says", "said", "sagt", "sagen", "gesagt", V_SAY, HABEN, 0, 0},
    {"know_that", "know", "knows", "known", "weiß", "wissen", "gewusst", V_SAY, HABEN, 0, 0},
    {"think", "think", "thinks", "thought", "denkt", "denken", "gedacht", V_SAY, HABEN, 0, 0},
    {"believe", "believe", "believes", "believed", "glaubt", "glauben", "geglaubt", V_SAY, HABEN, 0, 0},
};
#define N_VERBS ((int)(sizeof VERBS / sizeof VERBS[0]))

/* German adjectives by their stem: the ending is added to it (müd + e). */
static const struct { const char *en, *stem; } ADJS[] = {
    {"big", "groß"}, {"small", "klein"}, {"old", "alt"}, {"young", "jung"},
    {"red", "rot"}, {"black", "schwarz"}, {"white", "weiß"}, {"beautiful", "schön"},
    {"new", "neu"}, {"tired", "müd"}, {"good", "gut"}, {"fast", "schnell"},
    {"clever", "klug"}, {"brown", "braun"}, {"green", "grün"}, {"blue", "blau"},
    {"happy", "froh"}, {"sad", "traurig"}, {"hungry", "hungrig"}, {"lazy", "faul"},
};
#define N_ADJS ((int)(sizeof ADJS / sizeof ADJS[0]))

static const char *const NUM_EN[13] = {"", "one", "two", "three", "four", "five", "six",
                                       "seven", "eight", "nine", "ten", "eleven", "twelve"};
static const char *const NUM_DE[13] = {"", "eins", "zwei", "drei", "vier", "fünf", "sechs",
                                       "sieben", "acht", "neun", "zehn", "elf", "zwölf"};

static const struct { const char *en, *de; } ADVS[] = {
    {"today", "heute"}, {"now", "jetzt"}, {"sometimes", "manchmal"}, {"usually", "meistens"},
};
#define N_ADVS ((int)(sizeof ADVS / sizeof ADVS[0]))

static const char *const CONJ_EN[] = {"", "because", "while", "although", "that"};
static const char *const CONJ_DE[] = {"", "weil", "während", "obwohl", "dass"};

int corpus_noun(const char *en) {
    for (int i = 0; i < N_NOUNS; i++)
        if (!strcmp(NOUNS[i].en, en)) return i;
    return -1;
}
int corpus_verb(const char *en) {
    for (int i = 0; i < N_VERBS; i++)
        if (!strcmp(VERBS[i].id, en)) return i;
    return -1;
}
int corpus_adj(const char *en) {
    for (int i = 0; i < N_ADJS; i++)
        if (!strcmp(ADJS[i].en, en)) return i;
    return -1;
}
int corpus_adverb(const char *en) {
    for (int i = 0; i < N_ADVS; i++)
        if (!strcmp(ADVS[i].en, en)) return i;
    return -1;
}

/* ============================================================================
 * 2. German morphology
 *
 * Rows: nominative, accusative, dative. Columns: masculine, feminine,
 * neuter, plural.
 * ========================================================================== */

enum { NOM, ACC, DAT };

static const char *const ART_DEF[3][4] = {
    {"der", "die", "das", "die"},
    {"den", "die", "das", "die"},
    {"dem", "der", "dem", "den"},
};
/* ein and the possessive mein decline alike; ein has no plural */
static const char *const ART_EIN[3][4] = {
    {"ein", "eine", "ein", NULL},
    {"einen", "eine", "ein", NULL},
    {"einem", "einer", "einem", NULL},
};
static const char *const ART_MEIN[3][4] = {
    {"mein", "meine", "mein", "meine"},
    {"meinen", "meine", "mein", "meine"},
    {"meinem", "meiner", "meinem", "meinen"},
};
/* weak endings: after der/die/das (the article already shows the case) */
static const char *const ADJ_WEAK[3][4] = {
    {"e", "e", "e", "en"},
    {"en", "e", "e", "en"},
    {"en", "en", "en", "en"},
};
/* mixed endings: after ein/mein (where ein shows nothing, the adjective
 * does: ein großer Hund, ein großes Pferd) */
static const char *const ADJ_MIXED[3][4] = {
    {"er", "e", "es", "en"},
    {"en", "e", "es", "en"},
    {"en", "en", "en", "en"},
};
/* strong endings, plural only here: after a number, nothing else shows the case */
static const char *const ADJ_STRONG_PL[3] = {"e", "e", "en"};

/* ============================================================================
 * 3. Rendering
 * ========================================================================== */

typedef struct {
    char *buf;
    size_t len, cap;
    int overflow;
} Out;

static void put(Out *o, const char *w) {
    size_t n = strlen(w), need = n + (o->len ? 1 : 0);
    if (o->len + need + 1 > o->cap) {
        o->overflow = 1;
        return;
    }
    if (o->len) o->buf[o->len++] = ' ';
    memcpy(o->buf + o->len, w, n);
    o->len += n;
    o->buf[o->len] = 0;
}


static int check_np(const NounPhrase *np, const char *role, char *err, size_t errlen) {
    if (np->noun < 0 || np->noun >= N_NOUNS) return fail(err, errlen, "%s: noun id %d is not in the lexicon", role, np->noun);
    if (np->adj < -1 || np->adj >= N_ADJS) return fail(err, errlen, "%s: adjective id %d is not in the lexicon", role, np->adj);
    if (np->count < 1 || np->count > 12) return fail(err, errlen, "%s: count %d is not in 1..12", role, np->count);
    switch (np->det) {
    case DET_THE: case DET_MY: return 0;
    case DET_A:
        if (np->count != 1) return fail(err, errlen, "%s: \"a\" needs a singular noun", role);
        return 0;
    case DET_NUM:
        if (np->count < 2) return fail(err, errlen, "%s: a number needs a count of 2..12", role);
        return 0;
    }
    return fail(err, errlen, "%s: determiner %d is not one of the, a, my, a number", role, np->det);
}

static int is_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

static void english_np(Out *o, const NounPhrase *np) {
    const Noun *n = &NOUNS[np->noun];
    const char *next = np->adj >= 0 ? ADJS[np->adj].en : n->en;
    switch (np->det) {
    case DET_THE: put(o, "the"); break;
    case DET_A: put(o, is_vowel(next[0]) ? "an" : "a"); break;
    case DET_MY: put(o, "my"); break;
    case DET_NUM: put(o, NUM_EN[np->count]); break;
    }
    if (np->adj >= 0) put(o, ADJS[np->adj].en);
    put(o, np->count > 1 ? n->en_pl : n->en);
}

/* The German noun phrase in case c. contract_in: "in" before it becomes
 * "im" when the article is dem (in dem Garten -> im Garten). */
static void german_np(Out *o, const NounPhrase *np, int c, int prep_in) {
    const Noun *n = &NOUNS[np->noun];
    int g = np->count > 1 ? PLUR : n->gender;
    const char *ending = NULL;
    switch (np->det) {
    case DET_THE:
        if (prep_in) put(o, !strcmp(ART_DEF[c][g], "dem") ? "im" : "in");
        if (!(prep_in && !strcmp(ART_DEF[c][g], "dem"))) put(o, ART_DEF[c][g]);
        ending = ADJ_WEAK[c][g];
        break;
    case DET_A:
        if (prep_in) put(o, "in");
        put(o, ART_EIN[c][g]);
        ending = ADJ_MIXED[c][g];
        break;
    case DET_MY:
        if (prep_in) put(o, "in");
        put(o, ART_MEIN[c][g]);
        ending = ADJ_MIXED[c][g];
        break;
    case DET_NUM:
        if (prep_in) put(o, "in");
        put(o, NUM_DE[np->count]);
        ending = ADJ_STRONG_PL[c];
        break;
    }
    if (np->adj >= 0) {
        char w[64];
        snprintf(w, sizeof w, "%s%s", ADJS[np->adj].stem, ending);
        put(o, w);
    }
    put(o, g == PLUR ? (c == DAT ? n->de_dat_pl : n->de_pl) : n->de);
}

static int check_clause(const Clause *cl, int is_main, int conj, char *err, size_t errlen) {
    const char *role = is_main ? "main clause" : "subordinate clause";
    char r[64];
    if (cl->verb < 0 || cl->verb >= N_VERBS) return fail(err, errlen, "%s: verb id %d is not in the lexicon", role, cl->verb);
    const Verb *v = &VERBS[cl->verb];
    snprintf(r, sizeof r, "%s subject", role);
    int rc = check_np(&cl->subj, r, err, errlen);
    if (rc) return rc;
    if (!(NOUNS[cl->subj.noun].cls & ANIM))
        return fail(err, errlen, "%s: the subject \"%s\" cannot %s (subjects are people and animals)",
                   role, NOUNS[cl->subj.noun].en, v->en);
    if (v->kind == V_ACC || v->kind == V_DAT) {
        snprintf(r, sizeof r, "%s object", role);
        if ((rc = check_np(&cl->obj, r, err, errlen))) return rc;
        if (!(NOUNS[cl->obj.noun].cls & v->obj))
            return fail(err, errlen, "%s: \"%s\" does not take \"%s\" as its object", role, v->en,
                       NOUNS[cl->obj.noun].en);
    }
    if (v->kind == V_SAY) {
        if (!is_main) return fail(err, errlen, "subordinate clause: \"%s\" needs a clause of its own; "
                                 "clauses do not nest here", v->en);
        if (conj != CONJ_THAT) return fail(err, errlen, "main clause: \"%s\" must be followed by \"that\"", v->en);
        if (cl->prep != PREP_NONE) return fail(err, errlen, "main clause: \"%s\" takes no prepositional phrase", v->en);
    } else if (is_main && conj == CONJ_THAT) {
        return fail(err, errlen, "\"that\" follows verbs of saying and knowing only, not \"%s\"", v->en);
    }
    if (cl->prep < PREP_NONE || cl->prep > PREP_IN) return fail(err, errlen, "%s: preposition %d unknown", role, cl->prep);
    if (cl->prep != PREP_NONE) {
        snprintf(r, sizeof r, "%s prepositional object", role);
        if ((rc = check_np(&cl->pobj, r, err, errlen))) return rc;
        int place = NOUNS[cl->pobj.noun].cls & PLACE;
        if (cl->prep == PREP_IN && (!place || cl->pobj.count != 1 || cl->pobj.det == DET_NUM))
            return fail(err, errlen, "%s: \"in\" takes one place (garden, house, ...)", role);
        if (cl->prep == PREP_IN && v->motion)
            return fail(err, errlen, "%s: \"%s in\" would need the accusative of direction; not generated",
                       role, v->en);
        if (cl->prep == PREP_WITH && place) return fail(err, errlen, "%s: \"with\" takes a person or thing", role);
    }
    if (cl->perfect != 0 && cl->perfect != 1) return fail(err, errlen, "%s: perfect must be 0 or 1", role);
    return 0;
}

/* English clause: subject, verb (has/have + participle in the perfect),
 * object, prepositional phrase. */
static void english_clause(Out *o, const Clause *cl) {
    const Verb *v = &VERBS[cl->verb];
    int pl = cl->subj.count > 1;
    english_np(o, &cl->subj);
    if (cl->perfect) {
        put(o, pl ? "have" : "has");
        put(o, v->en_pp);
    } else {
        put(o, pl ? v->en : v->en_3sg);
    }
    if (v->kind == V_ACC || v->kind == V_DAT) english_np(o, &cl->obj);
    if (cl->prep != PREP_NONE) {
        put(o, cl->prep == PREP_WITH ? "with" : "in");
        english_np(o, &cl->pobj);
    }
}

/* The finite verb of a German clause: the auxiliary in the perfect. */
static const char *german_finite(const Clause *cl) {
    const Verb *v = &VERBS[cl->verb];
    int pl = cl->subj.count > 1;
    if (cl->perfect) return v->aux == SEIN ? (pl ? "sind" : "ist") : (pl ? "haben" : "hat");
    return pl ? v->de_3pl : v->de_3sg;
}

/* Everything after the subject and the finite verb of a main clause, or
 * between the subject and the verb cluster of a subordinate one: object,
 * prepositional phrase (the "middle field"). */
static void german_middle(Out *o, const Clause *cl) {
    const Verb *v = &VERBS[cl->verb];
    if (v->kind == V_ACC) german_np(o, &cl->obj, ACC, 0);
    if (v->kind == V_DAT) german_np(o, &cl->obj, DAT, 0);
    if (cl->prep == PREP_WITH) {
        put(o, "mit");
        german_np(o, &cl->pobj, DAT, 0);
    }
    if (cl->prep == PREP_IN) german_np(o, &cl->pobj, DAT, 1);
}

/* Main clause, verb second. inverted: something is already in first
 * position (an adverb, a subordinate clause), so the verb comes before the
 * subject: "Heute sieht der Mann den Hund". The participle closes the clause. */
static void german_main(Out *o, const Clause *cl, int inverted) {
    if (inverted) {
        put(o, german_finite(cl));
        german_np(o, &cl->subj, NOM, 0);
    } else {
        german_np(o, &cl->subj, NOM, 0);
        put(o, german_finite(cl));
    }
    german_middle(o, cl);
    if (cl->perfect) put(o, VERBS[cl->verb].de_pp);
}

/* Subordinate clause, verb last: "weil die Frau den Hund gesehen hat". */
static void german_sub(Out *o, int conj, const Clause *cl) {
    put(o, CONJ_DE[conj]);
    german_np(o, &cl->subj, NOM, 0);
    german_middle(o, cl);
    if (cl->perfect) put(o, VERBS[cl->verb].de_pp);
    put(o, german_finite(cl));
}

static void capitalise(char *s) {
    if (s[0] >= 'a' && s[0] <= 'z') s[0] = (char)(s[0] - 'a' + 'A');
}

int corpus_render(const Sentence *s, char *en, size_t enlen, char *de, size_t delen,
                  char *err, size_t errlen) {
    int rc;
    if (s->conj < CONJ_NONE || s->conj > CONJ_THAT) return fail(err, errlen, "conjunction %d unknown", s->conj);
    if (s->adverb < -1 || s->adverb >= N_ADVS) return fail(err, errlen, "adverb id %d unknown", s->adverb);
    if ((rc = check_clause(&s->main, 1, s->conj, err, errlen))) return rc;
    if (VERBS[s->main.verb].kind == V_SAY && s->conj != CONJ_THAT)
        return fail(err, errlen, "main clause: \"%s\" must be followed by \"that\"", VERBS[s->main.verb].en);
    if (s->conj != CONJ_NONE && (rc = check_clause(&s->sub, 0, s->conj, err, errlen))) return rc;
    if (s->sub_first && (s->conj == CONJ_NONE || s->conj == CONJ_THAT))
        return fail(err, errlen, "only a because/while/although clause can come first");
    if (s->sub_first && s->adverb >= 0) return fail(err, errlen, "a fronted clause and a fronted adverb do not go together");
    if (enlen < 1 || delen < 1) return fail(err, errlen, "no room for the sentence");

    Out e = {en, 0, enlen, 0}, d = {de, 0, delen, 0};
    en[0] = de[0] = 0;
    if (s->sub_first) {
        /* Because the woman sleeps , the man laughs .
         * Weil die Frau schläft , lacht der Mann .   (the clause fills the
         * first position, so the main verb comes right after the comma) */
        put(&e, CONJ_EN[s->conj]);
        english_clause(&e, &s->sub);
        put(&e, ",");
        english_clause(&e, &s->main);
        german_sub(&d, s->conj, &s->sub);
        put(&d, ",");
        german_main(&d, &s->main, 1);
    } else {
        if (s->adverb >= 0) {
            put(&e, ADVS[s->adverb].en);
            put(&d, ADVS[s->adverb].de);
        }
        english_clause(&e, &s->main);
        german_main(&d, &s->main, s->adverb >= 0);
        if (s->conj != CONJ_NONE) {
            /* English writes no comma before "that"; German always does */
            if (s->conj != CONJ_THAT) put(&e, ",");
            put(&e, CONJ_EN[s->conj]);
            english_clause(&e, &s->sub);
            put(&d, ",");
            german_sub(&d, s->conj, &s->sub);
        }
    }
    put(&e, ".");
    put(&d, ".");
    if (e.overflow || d.overflow) return fail(err, errlen, "the sentence does not fit the buffers (%zu, %zu bytes)", enlen, delen);
    capitalise(en);
    capitalise(de);
    return 0;
}

/* ---- drawing a random sentence ------------------------------------------ */

static int pick_noun(Rng *r, int cls) {
    for (;;) {
        int i = rng_int(r, N_NOUNS);
        if (NOUNS[i].cls & cls) return i;
    }
}

static void random_np(NounPhrase *np, Rng *r, int cls, int singular_only) {
    np->noun = pick_noun(r, cls);
    float u = rng_uniform(r);
    if (singular_only) np->det = u < 0.6f ? DET_THE : u < 0.85f ? DET_A : DET_MY;
    else np->det = u < 0.5f ? DET_THE : u < 0.7f ? DET_A : u < 0.82f ? DET_MY : DET_NUM;
    np->count = 1;
    if (np->det == DET_NUM) np->count = 2 + rng_int(r, 11);
    else if (np->det != DET_A && !singular_only && rng_uniform(r) < 0.3f) np->count = 2;
    np->adj = rng_uniform(r) < 0.3f ? rng_int(r, N_ADJS) : -1;
}

static void random_clause(Clause *cl, Rng *r, int is_main, int say) {
    memset(cl, 0, sizeof *cl);
    for (;;) {
        cl->verb = rng_int(r, N_VERBS);
        int k = VERBS[cl->verb].kind;
        if ((k == V_SAY) == (say != 0)) break;
    }
    const Verb *v = &VERBS[cl->verb];
    random_np(&cl->subj, r, ANIM, 0);
    if (v->kind == V_ACC || v->kind == V_DAT) random_np(&cl->obj, r, v->obj, 0);
    cl->prep = PREP_NONE;
    if (v->kind != V_SAY && rng_uniform(r) < (v->kind == V_INTR ? 0.5f : 0.2f)) {
        cl->prep = (v->motion || rng_uniform(r) < 0.5f) ? PREP_WITH : PREP_IN;
        if (cl->prep == PREP_WITH) random_np(&cl->pobj, r, ANIM | THING, 0);
        else random_np(&cl->pobj, r, PLACE, 1);
    }
    cl->perfect = rng_uniform(r) < 0.35f;
    (void)is_main;
}

void corpus_random_sentence(Sentence *s, Rng *r) {
    memset(s, 0, sizeof *s);
    s->adverb = -1;
    float u = rng_uniform(r);
    if (u < 0.08f) {                          /* The woman says that ...   */
        random_clause(&s->main, r, 1, 1);
        s->conj = CONJ_THAT;
        random_clause(&s->sub, r, 0, 0);
    } else {
        random_clause(&s->main, r, 1, 0);
        if (u < 0.30f) {                      /* ..., because ...          */
            s->conj = CONJ_BECAUSE + rng_int(r, 3);
            random_clause(&s->sub, r, 0, 0);
            s->sub_first = rng_uniform(r) < 0.35f;
        }
    }
    if (!s->sub_first && rng_uniform(r) < 0.15f) s->adverb = rng_int(r, N_ADVS);
}

/* ============================================================================
 * 4. Corpora
 * ========================================================================== */

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

void corpus_free(Corpus *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->src[i]);
        free(c->tgt[i]);
    }
    free(c->src);
    free(c->tgt);
    memset(c, 0, sizeof *c);
}

static void corpus_push(Corpus *c, int *cap, const char *src, const char *tgt) {
    if (c->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        c->src = xrealloc(c->src, (size_t)*cap * sizeof *c->src);
        c->tgt = xrealloc(c->tgt, (size_t)*cap * sizeof *c->tgt);
    }
    c->src[c->n] = xstrdup(src);
    c->tgt[c->n] = xstrdup(tgt);
    c->n++;
}

/* A set of strings by FNV-1a hash, open addressing: "seen this sentence?" */
typedef struct {
    const char **slot;
    size_t cap, n;
} StrSet;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Adds s (not copied: it must outlive the set). 1 if new, 0 if present. */
static int strset_add(StrSet *t, const char *s) {
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        StrSet u = {xcalloc(cap, sizeof(char *)), cap, 0};
        for (size_t i = 0; i < t->cap; i++)
            if (t->slot[i]) strset_add(&u, t->slot[i]);
        free(t->slot);
        *t = u;
    }
    size_t i = fnv1a(s) & (t->cap - 1);
    while (t->slot[i]) {
        if (!strcmp(t->slot[i], s)) return 0;
        i = (i + 1) & (t->cap - 1);
    }
    t->slot[i] = s;
    t->n++;
    return 1;
}

/* Fisher-Yates on the pair indices */
static void shuffle_ints(int *a, int n, Rng *r) {
    for (int i = n - 1; i > 0; i--) {
        int j = rng_int(r, i + 1), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Copies pairs idx[lo..hi) of all into out. */
static void take_range(Corpus *out, const Corpus *all, const int *idx, int lo, int hi) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    for (int i = lo; i < hi; i++) corpus_push(out, &cap, all->src[idx[i]], all->tgt[idx[i]]);
}

int corpus_generate(Corpus *train, Corpus *dev, Corpus *test, int n_train, int n_dev,
                    int n_test, uint64_t seed, char *err, size_t errlen) {
    memset(train, 0, sizeof *train);
    memset(dev, 0, sizeof *dev);
    memset(test, 0, sizeof *test);
    if (n_train < 1 || n_dev < 1 || n_test < 1)
        return fail(err, errlen, "every split needs at least one sentence (train %d, dev %d, test %d)",
                   n_train, n_dev, n_test);
    long total = (long)n_train + n_dev + n_test;
    if (total > 5000000) return fail(err, errlen, "%ld sentences is more than this generator makes (5000000)", total);
    Rng r;
    rng_seed(&r, seed);
    Corpus all = {0};
    int cap = 0;
    StrSet seen = {0};
    char en[512], de[512], e2[256];
    long draws = 0, limit = 20 * total + 1000;
    while (all.n < total) {
        if (++draws > limit) {
            free(seen.slot);
            corpus_free(&all);
            return fail(err, errlen, "after %ld draws only %d distinct sentences; ask for fewer", draws - 1, all.n);
        }
        Sentence s;
        corpus_random_sentence(&s, &r);
        int rc = corpus_render(&s, en, sizeof en, de, sizeof de, e2, sizeof e2);
        if (rc) {   /* the sampler only builds what the grammar allows */
            fprintf(stderr, "corpus: internal error: the sampler drew a bad sentence: %s\n", e2);
            abort();
        }
        int before = all.n;
        corpus_push(&all, &cap, en, de);
        if (!strset_add(&seen, all.src[before])) {
            free(all.src[before]);
            free(all.tgt[before]);
            all.n--;
        }
    }
    free(seen.slot);
    /* the sentences are drawn at random already; the cut is by position */
    int *idx = malloc((size_t)total * sizeof(int));
    if (!idx) {
        corpus_free(&all);
        return fail(err, errlen, "out of memory");
    }
    for (int i = 0; i < total; i++) idx[i] = i;
    take_range(train, &all, idx, 0, n_train);
    take_range(dev, &all, idx, n_train, n_train + n_dev);
    take_range(test, &all, idx, n_train + n_dev, (int)total);
    free(idx);
    corpus_free(&all);
    return 0;
}

int corpus_split(const Corpus *all, Corpus *train, Corpus *dev, Corpus *test, int n_dev,
                 int n_test, uint64_t seed, char *err, size_t errlen) {
    memset(train, 0, sizeof *train);
    memset(dev, 0, sizeof *dev);
    memset(test, 0, sizeof *test);
    /* keep each pair once, in file order */
    int *idx = malloc(((size_t)all->n + 1) * sizeof(int));
    char *key = NULL;
    char **keys = calloc((size_t)all->n + 1, sizeof(char *));
    if (!idx || !keys) {
        free(idx);
        free(keys);
        return fail(err, errlen, "out of memory");
    }
    StrSet seen = {0};
    int n = 0;
    for (int i = 0; i < all->n; i++) {
        size_t a = strlen(all->src[i]), b = strlen(all->tgt[i]);
        key = xrealloc(NULL, a + b + 2);
        memcpy(key, all->src[i], a);
        key[a] = '\t';
        memcpy(key + a + 1, all->tgt[i], b + 1);
        keys[i] = key;
        if (strset_add(&seen, key)) idx[n++] = i;
    }
    free(seen.slot);
    for (int i = 0; i < all->n; i++) free(keys[i]);
    free(keys);
    if (n < 3) {
        free(idx);
        return fail(err, errlen, "%d distinct sentence pair%s; training, dev and test need at least 3",
                   n, n == 1 ? "" : "s");
    }
    /* small corpora: dev and test take at most a tenth each, and at least 1 */
    if (n_dev > n / 10) n_dev = n / 10;
    if (n_test > n / 10) n_test = n / 10;
    if (n_dev < 1) n_dev = 1;
    if (n_test < 1) n_test = 1;
    Rng r;
    rng_seed(&r, seed);
    shuffle_ints(idx, n, &r);
    int n_train = n - n_dev - n_test;
    take_range(train, all, idx, 0, n_train);
    take_range(dev, all, idx, n_train, n_train + n_dev);
    take_range(test, all, idx, n_train + n_dev, n);
    free(idx);
    return 0;
}

long utf8_invalid_at(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned cp, min;
        if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
        else return (long)i;
        if (i + len > n) return (long)i;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return (long)i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long)i;
        i += len;
    }
    return -1;
}

/* Collapses runs of spaces to one and trims both ends, in place. */
static void squeeze_spaces(char *s) {
    char *w = s;
    int space = 1;   /* drops leading spaces */
    for (char *p = s; *p; p++) {
        if (*p == ' ') {
            if (!space) *w++ = ' ';
            space = 1;
        } else {
            *w++ = *p;
            space = 0;
        }
    }
    if (w > s && w[-1] == ' ') w--;
    *w = 0;
}

int corpus_load_tsv(Corpus *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    struct stat st;
    if (stat(path, &st) != 0) return fail(err, errlen, "%s: %s", path, strerror(errno)), 1;
    if (!S_ISREG(st.st_mode))
        return fail(err, errlen, "%s is not a regular file (a directory, FIFO or device); give a .tsv file", path), 1;
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, "%s: %s", path, strerror(errno)), 1;
    char *line = malloc(CORPUS_MAX_LINE + 2);
    if (!line) {
        fclose(f);
        return fail(err, errlen, "out of memory");
    }
    int cap = 0, lineno = 0, rc = 0;
    for (;;) {
        /* read one line by hand: fgets cannot tell a NUL byte from the end */
        size_t n = 0;
        int ch, too_long = 0, nul = 0;
        while ((ch = fgetc(f)) != EOF && ch != '\n') {
            if (ch == 0) nul = 1;
            if (n < CORPUS_MAX_LINE + 1) line[n++] = (char)ch;
            else too_long = 1;
        }
        if (ch == EOF && ferror(f)) {
            rc = fail(err, errlen, "%s: read error after line %d: %s", path, lineno, strerror(errno));
            rc = 1;
            break;
        }
        if (ch == EOF && n == 0) break;   /* end of file (after a final newline, or empty) */
        lineno++;
        if (n > 0 && line[n - 1] == '\r') n--;
        line[n] = 0;
        if (too_long || n > CORPUS_MAX_LINE) {
            rc = fail(err, errlen, "%s line %d: longer than %d bytes", path, lineno, CORPUS_MAX_LINE);
            break;
        }
        if (nul) {
            rc = fail(err, errlen, "%s line %d: contains a NUL byte (is this a text file?)", path, lineno);
            break;
        }
        long badb = utf8_invalid_at(line, n);
        if (badb >= 0) {
            rc = fail(err, errlen, "%s line %d: invalid UTF-8 at byte %ld (0x%02X); the file must be UTF-8",
                     path, lineno, badb + 1, (unsigned char)line[badb]);
            break;
        }
        char *tab = strchr(line, '\t');
        if (n == 0) {
            rc = fail(err, errlen, "%s line %d: empty; every line must be source<TAB>target", path, lineno);
            break;
        }
        if (!tab) {
            rc = fail(err, errlen, "%s line %d: no tab; every line must be source<TAB>target", path, lineno);
            break;
        }
        if (strchr(tab + 1, '\t')) {
            rc = fail(err, errlen, "%s line %d: more than one tab; every line must be source<TAB>target",
                     path, lineno);
            break;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char u = (unsigned char)line[i];
            if ((u < 0x20 && u != '\t') || u == 0x7F) {
                rc = fail(err, errlen, "%s line %d: control character 0x%02X at byte %zu", path, lineno, u, i + 1);
                break;
            }
        }
        if (rc) break;
        *tab = 0;
        char *src = line, *tgt = tab + 1;
        squeeze_spaces(src);
        squeeze_spaces(tgt);
        if (!*src || !*tgt) {
            rc = fail(err, errlen, "%s line %d: the %s side is empty", path, lineno, !*src ? "source" : "target");
            break;
        }
        corpus_push(c, &cap, src, tgt);
    }
    free(line);
    fclose(f);
    if (rc) {
        corpus_free(c);
        return rc;
    }
    if (c->n == 0) return fail(err, errlen, "%s: the corpus is empty (no source<TAB>target lines)", path);
    return 0;
}

int corpus_save_tsv(const Corpus *c, const char *path, char *err, size_t errlen) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return fail(err, errlen, "path too long"), 1;
    FILE *f = fopen(tmp, "wb");
    if (!f) return fail(err, errlen, "cannot write %s: %s", tmp, strerror(errno)), 1;
    int ok = 1;
    for (int i = 0; i < c->n && ok; i++) ok = fprintf(f, "%s\t%s\n", c->src[i], c->tgt[i]) > 0;
    if (fflush(f) != 0) ok = 0;
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return fail(err, errlen, "cannot write %s: %s", path, strerror(e)), 1;
    }
    return 0;
}

void corpus_copy(Corpus *dst, const Corpus *src) {
    memset(dst, 0, sizeof *dst);
    int cap = 0;
    for (int i = 0; i < src->n; i++) corpus_push(dst, &cap, src->src[i], src->tgt[i]);
}

/* ============================================================================
 * 5. The Ding dictionary, and a split without a seed
 * ========================================================================== */

/* FNV-1a over a, a tab, then b: a tab because ("ab", "c") is not ("a", "bc") */
static uint64_t fnv1a_pair(const char *a, const char *b) {
    uint64_t h = 1469598103934665603ull;
    for (; *a; a++) h = (h ^ (unsigned char)*a) * 1099511628211ull;
    h = (h ^ '\t') * 1099511628211ull;
    for (; *b; b++) h = (h ^ (unsigned char)*b) * 1099511628211ull;
    return h;
}

/* "Is pair i of c already in c?" by index, open addressing: no key string
 * per pair (the dictionary gives over 350,000 phrase pairs). */
typedef struct {
    int *slot;      /* [cap] an index into the corpus + 1; 0: empty          */
    size_t cap, n;
} PairSet;

static void pairset_put(int *slot, size_t cap, const Corpus *c, int i) {
    size_t p = fnv1a_pair(c->src[i], c->tgt[i]) & (cap - 1);
    while (slot[p]) p = (p + 1) & (cap - 1);
    slot[p] = i + 1;
}

/* Adds pair i of c. 1 if no earlier pair of c is the same, else 0. */
static int pairset_add(PairSet *t, const Corpus *c, int i) {
    if (2 * (t->n + 1) > t->cap) {   /* at most half full: probes stay short */
        size_t cap = t->cap ? 2 * t->cap : 1024;
        int *slot = xcalloc(cap, sizeof(int));
        for (size_t k = 0; k < t->cap; k++)
            if (t->slot[k]) pairset_put(slot, cap, c, t->slot[k] - 1);
        free(t->slot);
        t->slot = slot, t->cap = cap;
    }
    size_t p = fnv1a_pair(c->src[i], c->tgt[i]) & (t->cap - 1);
    for (; t->slot[p]; p = (p + 1) & (t->cap - 1)) {
        int j = t->slot[p] - 1;
        if (!strcmp(c->src[j], c->src[i]) && !strcmp(c->tgt[j], c->tgt[i])) return 0;
    }
    t->slot[p] = i + 1;
    t->n++;
    return 1;
}

/* Appends (src, tgt) to c unless c holds it already. */
static void push_distinct(Corpus *c, int *cap, PairSet *seen, const char *src, const char *tgt) {
    corpus_push(c, cap, src, tgt);
    if (!pairset_add(seen, c, c->n - 1)) {
        c->n--;
        free(c->src[c->n]);
        free(c->tgt[c->n]);
    }
}

/* Cuts spaces off both ends of s, in place; returns where s now starts. */
static char *trim_spaces(char *s) {
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == ' ') s[--n] = 0;
    return s;
}

/* 1 when one side's trimmed part reads as an example sentence: it ends in
 * '.', '!' or '?', has three words or more, and holds no markup ({m},
 * [ugs.], (...)), no '/' (alternatives: "he/she") and no ';' (synonyms),
 * no tab or control character: plain text a model can learn from. */
static int ding_sentence_like(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || (s[n - 1] != '.' && s[n - 1] != '!' && s[n - 1] != '?')) return 0;
    int words = 0, in_word = 0;
    for (const char *p = s; *p; p++) {
        unsigned char u = (unsigned char)*p;
        if (u < 0x20 || u == 0x7F || strchr("{}[]()/;", u)) return 0;
        if (u == ' ') in_word = 0;
        else if (!in_word) in_word = 1, words++;
    }
    return words >= 3;
}

/* The phrase in one side's part, into out (room for strlen(part) + 1): the
 * first synonym (up to a ';' outside brackets), without {...}, [...] and
 * (...) (nested ones too), spaces collapsed. 1 if something clean is left:
 * not empty, no '/', no stray bracket, no control character. */
static int ding_phrase(const char *part, char *out) {
    int depth = 0;
    char *w = out;
    for (const char *p = part; *p && !(*p == ';' && depth == 0); p++) {
        if (*p == '{' || *p == '[' || *p == '(') depth++;
        else if ((*p == '}' || *p == ']' || *p == ')') && depth > 0) depth--;
        else if (depth == 0) *w++ = *p;   /* a ')' with no '(' stays, and is refused below */
    }
    *w = 0;
    if (depth > 0) return 0;   /* an unclosed bracket: markup we cannot take off */
    squeeze_spaces(out);
    if (!*out) return 0;
    for (const char *p = out; *p; p++) {
        unsigned char u = (unsigned char)*p;
        if (u < 0x20 || u == 0x7F || strchr("/{}[]()", u)) return 0;
    }
    return 1;
}

typedef struct {
    Corpus *sent, *phrases;        /* phrases may be NULL                    */
    int cap_s, cap_p;
    PairSet seen_s, seen_p;
    char *en_buf, *de_buf;         /* [DING_MAX_LINE + 2] phrase scratch     */
} DingReader;

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

/* One entry "de :: en", both sides writable: the k-th '|' parts of the two
 * sides pair up; each pair is a sentence pair, a phrase pair, or nothing. */
static void ding_entry(DingReader *d, char *de, char *en) {
    if (count_char(de, '|') != count_char(en, '|')) return;   /* cannot be aligned */
    for (;;) {
        char *de_bar = strchr(de, '|'), *en_bar = strchr(en, '|');
        if (de_bar) *de_bar = 0;
        if (en_bar) *en_bar = 0;
        char *g = trim_spaces(de), *e = trim_spaces(en);
        if (ding_sentence_like(g) && ding_sentence_like(e)) {
            squeeze_spaces(g);
            squeeze_spaces(e);
            push_distinct(d->sent, &d->cap_s, &d->seen_s, e, g);
        } else if (d->phrases && ding_phrase(e, d->en_buf) && ding_phrase(g, d->de_buf)) {
            push_distinct(d->phrases, &d->cap_p, &d->seen_p, d->en_buf, d->de_buf);
        }
        if (!de_bar) break;   /* the counts agree: en_bar is NULL too */
        de = de_bar + 1, en = en_bar + 1;
    }
}

int corpus_load_ding(Corpus *sent, Corpus *phrases, const char *path, char *err, size_t errlen) {
    memset(sent, 0, sizeof *sent);
    if (phrases) memset(phrases, 0, sizeof *phrases);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return fail_rc(1, err, errlen, "%s not found: the Ding dictionary comes with Debian's package "
                           "trans-de-en; install it: apt-get install trans-de-en", path);
        return fail_rc(1, err, errlen, "%s: %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return fail_rc(1, err, errlen, "%s is not a regular file (a directory, FIFO or device); give the Ding "
                       "dictionary (%s, from trans-de-en)", path, DING_PATH);
    FILE *f = fopen(path, "rb");
    if (!f) return fail_rc(1, err, errlen, "%s: %s", path, strerror(errno));
    DingReader d = {.sent = sent, .phrases = phrases};
    char *line = xmalloc(DING_MAX_LINE + 2);
    d.en_buf = xmalloc(DING_MAX_LINE + 2);
    d.de_buf = xmalloc(DING_MAX_LINE + 2);
    int lineno = 0, rc = 0;
    for (;;) {
        /* one line by hand, as corpus_load_tsv: fgets cannot tell a NUL byte
         * from the end. getc_unlocked: one reader, and 25 MB go 5x faster */
        size_t n = 0;
        int ch, too_long = 0, nul = 0;
        while ((ch = getc_unlocked(f)) != EOF && ch != '\n') {
            if (ch == 0) nul = 1;
            if (n < DING_MAX_LINE + 1) line[n++] = (char)ch;
            else too_long = 1;
        }
        if (ch == EOF && ferror(f)) {
            rc = fail_rc(1, err, errlen, "%s: read error after line %d: %s", path, lineno, strerror(errno));
            break;
        }
        if (ch == EOF && n == 0) break;   /* end of file (after a final newline, or empty) */
        lineno++;
        if (n > 0 && line[n - 1] == '\r') n--;
        line[n] = 0;
        if (too_long || n > DING_MAX_LINE) continue;   /* skipped whole (corpus.h: DING_MAX_LINE) */
        if (nul) {
            rc = fail(err, errlen, "%s line %d: contains a NUL byte (is this the Ding dictionary?)", path, lineno);
            break;
        }
        long bad = utf8_invalid_at(line, n);
        if (bad >= 0) {
            rc = fail(err, errlen, "%s line %d: invalid UTF-8 at byte %ld (0x%02X); the Ding dictionary is UTF-8",
                      path, lineno, bad + 1, (unsigned char)line[bad]);
            break;
        }
        if (line[0] == '#') continue;   /* a comment */
        char *sep = strstr(line, "::");
        if (!sep) continue;             /* not an entry */
        *sep = 0;
        ding_entry(&d, line, sep + 2);
    }
    fclose(f);
    free(line);
    free(d.en_buf);
    free(d.de_buf);
    free(d.seen_s.slot);
    free(d.seen_p.slot);
    if (!rc && sent->n == 0)
        rc = fail(err, errlen, "%s: no example sentence pair found (is it the Ding dictionary? an entry with one "
                  "reads \"Er kommt heute. :: He comes today.\")", path);
    if (rc) {
        corpus_free(sent);
        if (phrases) corpus_free(phrases);
    }
    return rc;
}

/* A pair of the corpus, and where the fixed split ranks it. */
typedef struct {
    uint64_t h;            /* FNV-1a of the English side                     */
    const char *en, *de;
    int i;                 /* index in the corpus (file order)               */
} Ranked;

static int ranked_cmp(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    int c = strcmp(x->en, y->en);   /* the same hash, other English: rare, but ordered */
    if (!c) c = strcmp(x->de, y->de);
    if (!c) c = (x->i > y->i) - (x->i < y->i);   /* identical pairs: the first in the file first */
    return c;
}

/* The end of a cut that takes `want` pairs of r[0..n) from `from` on,
 * moved on past pairs with the same English as the last one taken (same
 * English, same hash: they sit side by side in r). */
static int fixed_cut(const Ranked *r, int n, int from, int want) {
    long end = (long)from + want;
    if (end >= n) return n;
    while (end < n && !strcmp(r[end].en, r[end - 1].en)) end++;
    return (int)end;
}

int corpus_split_fixed(const Corpus *all, Corpus *train, Corpus *dev, Corpus *test, int n_dev, int n_test,
                       char *err, size_t errlen) {
    memset(train, 0, sizeof *train);
    memset(dev, 0, sizeof *dev);
    memset(test, 0, sizeof *test);
    if (n_dev < 1 || n_test < 1)
        return fail(err, errlen, "dev and test need at least one pair each (asked: dev %d, test %d)", n_dev, n_test);
    Ranked *r = xmalloc(((size_t)all->n + 1) * sizeof *r);
    for (int i = 0; i < all->n; i++) r[i] = (Ranked){fnv1a(all->src[i]), all->src[i], all->tgt[i], i};
    qsort(r, (size_t)all->n, sizeof *r, ranked_cmp);
    int n = 0;   /* identical pairs are neighbours now: keep the first */
    for (int k = 0; k < all->n; k++)
        if (n == 0 || strcmp(r[k].en, r[n - 1].en) || strcmp(r[k].de, r[n - 1].de)) r[n++] = r[k];
    int dev_end = fixed_cut(r, n, 0, n_dev), test_end = fixed_cut(r, n, dev_end, n_test);
    if (n - test_end < test_end) {
        free(r);
        return fail(err, errlen, "%d distinct sentence pair%s: dev %d and test %d would leave %d to train on; "
                    "training needs at least as many as dev and test together (ask for fewer)",
                    n, n == 1 ? "" : "s", dev_end, test_end - dev_end, n - test_end);
    }
    /* each split keeps file order: mark every pair's split, then walk the corpus */
    unsigned char *split = xcalloc((size_t)all->n + 1, 1);   /* 0: a repeat, dropped */
    for (int k = 0; k < n; k++) split[r[k].i] = k < dev_end ? 2 : k < test_end ? 3 : 1;
    int cap[4] = {0};
    Corpus *out[4] = {NULL, train, dev, test};
    for (int i = 0; i < all->n; i++)
        if (split[i]) corpus_push(out[split[i]], &cap[split[i]], all->src[i], all->tgt[i]);
    free(split);
    free(r);
    return 0;
}

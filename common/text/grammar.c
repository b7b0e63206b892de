/* grammar.c - the English->German grammar: lexicon, morphology, rendering.
 *
 * Read grammar.h first. This file has three parts:
 *   1. The lexicon: nouns with gender and plural forms, verbs with their
 *      case, auxiliary and participle, adjectives, numbers, adverbs.
 *   2. German morphology: article and adjective-ending tables.
 *   3. Rendering a structured Sentence in both languages, and drawing one.
 * corpus.c turns the sentences it draws into a corpus (corpus_generate).
 */
#include "text/grammar.h"
#include "core/fail.h"

#include <stdio.h>
#include <string.h>

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

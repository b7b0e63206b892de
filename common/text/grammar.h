/* grammar.h - a small English->German grammar that writes sentence pairs.
 *
 * The generated corpus of chapter 11 (corpus_generate, corpus.h) is drawn
 * from this grammar and a lexicon of about 170 words, deterministic by seed:
 *
 *   The man sees the big dog .    ->  Der Mann sieht den großen Hund .
 *   A woman helps the children .  ->  Eine Frau hilft den Kindern .
 *   Today the dogs have run .     ->  Heute sind die Hunde gelaufen .
 *   The man laughs , because the woman sees the dog .
 *                                 ->  Der Mann lacht , weil die Frau den Hund sieht .
 *
 * What a model must learn from it:
 *   - gender and case: der/den/dem, die/der, das/dem; accusative objects,
 *     dative objects (helfen, danken, folgen, antworten) and "mit"/"in" +
 *     dative (in dem -> im);
 *   - adjective endings: weak after the definite article (der große Hund,
 *     den großen Hund), mixed after ein/mein (ein großer Hund, ein großes
 *     Pferd), strong after numbers (zwei große Hunde, mit zwei großen
 *     Hunden);
 *   - plurals and the dative plural -n (die Kinder, mit den Kindern);
 *   - subject-verb agreement (sieht / sehen, hat / haben, ist / sind);
 *   - numbers written as words (two..twelve -> zwei..zwölf);
 *   - verb second: a fronted adverb or subordinate clause puts the finite
 *     verb before the subject (Heute sieht der Mann ..., Weil ..., lacht der Mann);
 *   - verb-final subordinate clauses (..., weil die Frau den Hund sieht);
 *   - the perfect with the participle at the end and haben or sein
 *     (hat ... gesehen, ist ... gegangen; weil ... gesehen hat);
 *   - one English verb, two German ones: "knows the man" -> kennt den Mann,
 *     "knows that ..." -> weiß , dass ...
 *
 * The text is tokenised the way WMT systems see it after the Moses
 * tokenizer: words and punctuation separated by single spaces, a capital
 * letter at the start, " ." at the end. English determines German uniquely
 * (the grammar never gives one English sentence two translations), so a
 * perfect model scores BLEU 100.
 *
 * A sentence is a structure first (Sentence below: clauses, noun phrases,
 * word ids), then text: corpus_render writes both languages from it, and
 * corpus_random_sentence draws one the grammar allows.
 */
#ifndef GRAMMAR_H
#define GRAMMAR_H

#include <stddef.h>
#include "core/rng.h"

/* ---- the structured sentence the grammar generates ---------------------- */
typedef enum { DET_THE, DET_A, DET_MY, DET_NUM } Determiner;
typedef enum { PREP_NONE, PREP_WITH, PREP_IN } Preposition;
typedef enum { CONJ_NONE, CONJ_BECAUSE, CONJ_WHILE, CONJ_ALTHOUGH, CONJ_THAT } Conjunction;

typedef struct {
    int det;        /* Determiner                                          */
    int count;      /* 1: singular; 2..12: plural (DET_NUM: the number)    */
    int adj;        /* adjective id, or -1                                 */
    int noun;       /* noun id                                             */
} NounPhrase;

typedef struct {
    NounPhrase subj;
    int verb;       /* verb id                                             */
    NounPhrase obj; /* used when the verb takes an object                  */
    int prep;       /* Preposition                                         */
    NounPhrase pobj;/* used when prep != PREP_NONE                         */
    int perfect;    /* 0: present, 1: present perfect                      */
} Clause;

typedef struct {
    int adverb;     /* adverb id, or -1 (fronted: "Today ...")             */
    Clause main;
    int conj;       /* Conjunction; CONJ_THAT needs a verb of saying       */
    Clause sub;     /* used when conj != CONJ_NONE                         */
    int sub_first;  /* 1: "Because ..., ..." (not with CONJ_THAT)          */
} Sentence;

/* Lexicon lookups by English word (verbs: "know" takes an object and is
 * kennen, "know_that" takes a clause and is wissen). -1 if unknown. */
int corpus_noun(const char *en_singular);
int corpus_verb(const char *en_base);
int corpus_adj(const char *en);
int corpus_adverb(const char *en);

/* Renders s as an English and a German sentence. Returns 0, or 2 with a
 * message in err when s breaks the grammar (a verb without the object it
 * needs, "that" after a verb that is not one of saying, a singular count
 * with DET_NUM, ...) or a buffer is too small. */
int corpus_render(const Sentence *s, char *en, size_t enlen, char *de, size_t delen,
                  char *err, size_t errlen);

/* A random sentence the grammar allows, from rng. */
void corpus_random_sentence(Sentence *s, Rng *rng);

#endif

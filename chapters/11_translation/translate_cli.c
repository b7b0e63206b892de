/* translate_cli.c - chapter 11's --translate: a saved model and the
 * vocabulary saved beside it (MODEL.bpe) translate one typed sentence with
 * the paper's beam search, and show its alignment as section 6 does.
 *
 *   build/11_translation --translate "the man sees the big dog"
 *   build/11_translation --translate "..." --model out/11_translation/model_avg.ckpt
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fail.h"
#include "core/fileio.h"
#include "io/checkpoint.h"
#include "io/show.h"
#include "text/typed.h"
#include "translation.h"

/* Loads the checkpoint and its vocabulary, translates o->translate.
 * Returns the exit code: 0, 1 (no .bpe: train first) or 2 (bad input or files). */
int tr_run_translate(const Opts *o) {
    char err[1400], path[1100], bp[1200], unk[256];
    snprintf(path, sizeof path, "%s", o->model ? o->model : "");
    if (!o->model) snprintf(path, sizeof path, "%s/model.ckpt", o->out);
    snprintf(bp, sizeof bp, "%s.bpe", path);
    /* Nothing but spaces is nothing to translate: refused before the
     * generated corpus's form would make it ".", and before any file */
    if (!o->translate[strspn(o->translate, " \t\n\r\v\f")]) {
        fprintf(stderr, "%s: error: --translate: the sentence is %s; give the English sentence to "
                "translate\n", PROG, o->translate[0] ? "blank (only spaces)" : "empty");
        return 2;
    }
    Bpe bpe;
    Model m, one;
    int rc = bpe_load(&bpe, bp, err, sizeof err);
    if (rc == 1)   /* missing: training writes it */
        fprintf(stderr, "%s: error: %s\n  (train first: build/11_translation --out %s)\n", PROG, err, o->out);
    else if (rc)   /* there but unusable: bpe_load's message says what to do */
        fprintf(stderr, "%s: error: %s\n", PROG, err);
    if (rc) return rc;
    /* written as the training text was (bpe.h's tokenised): the generated
     * corpus's form, or as typed, with spaces squeezed */
    char *text = xmalloc(3 * strlen(o->translate) + 8);
    if (bpe.tokenised) typed_as_generated(o->translate, text, 3 * strlen(o->translate) + 8);
    else typed_squeeze(o->translate, text);
    if (model_load(&m, path, 1, 1, 1, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "%s: error: %s\n", PROG, err);
        free(text);
        bpe_free(&bpe);
        return 2;
    }
    /* The vocabulary must be the model's: its ids index the model's
     * embedding rows, so a .bpe of another run reads ids as the wrong
     * subwords. A checkpoint records no identity of its BPE (checkpoint.h:
     * the format has no field for one), only the vocabulary size in its
     * config; both files are written together (save_with_bpe), so a
     * mismatch means one of them was copied or replaced by hand. */
    if (m.cfg.vocab != bpe.vocab || m.cfg.pad_id != BPE_PAD) {
        if (m.cfg.vocab != bpe.vocab)
            fprintf(stderr, "%s: error: --translate: the vocabulary %s has %d symbols, but the model %s was "
                    "trained with %d: they come from different runs\n  (--translate reads MODEL.bpe: the "
                    "vocabulary saved with that model, or train again: build/11_translation --out DIR)\n", PROG,
                    bp, bpe.vocab, path, m.cfg.vocab);
        else
            fprintf(stderr, "%s: error: --translate: the model %s pads with id %d, not <pad> (%d): not a model "
                    "of this chapter\n", PROG, path, m.cfg.pad_id, BPE_PAD);
        model_free(&m);
        free(text);
        bpe_free(&bpe);
        return 2;
    }
    int max_len = m.cfg.max_len, Ts = bpe_encode(&bpe, text, NULL, 0) + 1;
    if (Ts + OUT_OFFSET > max_len) {
        fprintf(stderr, "%s: error: --translate: %d subword tokens; this model takes at most %d\n"
                "  (its positional table has max_len %d rows, and the output may be input + %d, Sec. 6.1)\n",
                PROG, Ts - 1, max_len - OUT_OFFSET - 1, max_len, OUT_OFFSET);
        model_free(&m);
        free(text);
        bpe_free(&bpe);
        return 2;
    }
    tr_model_for_one(&one, &m, Ts, Ts + OUT_OFFSET);
    model_free(&m);
    show_section("Translate (beam search: beam 4, alpha 0.6; Sec. 6.1)");
    tr_print_segmentation(&bpe, "source", text);
    /* nothing is refused: a new word is spelled from subwords, a new character is <unk> */
    /* the user's words and characters, printed escaped (an ESC typed in is \x1b) */
    char shown[4 * sizeof unk];
    if (bpe_unknown_word(&bpe, text, unk, sizeof unk))
        printf("a word training never had, e.g. \"%s\": spelled from the subwords it did have\n",
               fio_escape(shown, sizeof shown, unk, (size_t)-1));
    int n_unk = bpe_unknown_chars(&bpe, text, unk, sizeof unk);
    if (n_unk)
        printf("characters training never saw (%d, each one <unk>): %s\n", n_unk,
               fio_escape(shown, sizeof shown, unk, (size_t)-1));
    tr_show_alignment(&one, &bpe, text, 0, 0, o->out, "translate_attn");
    model_free(&one);
    free(text);
    bpe_free(&bpe);
    return 0;
}

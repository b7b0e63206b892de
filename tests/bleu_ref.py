#!/usr/bin/env python3
"""bleu_ref.py HYP REF - the reference BLEU for tests/check_bleu.c.

Prints sacrebleu's corpus BLEU of the hypothesis file against the reference
file (one sentence a line), with the settings bleu.c implements:
tokenize='none' (the text is already split on spaces), smooth 'exp',
no lowercasing. Exit status 3 when sacrebleu is not installed (the C test
then skips and says how to get it: `make sacrebleu`).
"""
import sys

try:
    import sacrebleu
except ImportError:
    sys.exit(3)

hyp = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
ref = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
bleu = sacrebleu.corpus_bleu(hyp, [ref], tokenize="none", smooth_method="exp")
print("%.6f" % bleu.score)

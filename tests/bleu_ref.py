#!/usr/bin/env python3
"""bleu_ref.py - sacrebleu's answers for tests/check_bleu.c.

  bleu_ref.py [--tokenize none|13a] HYP REF
      sacrebleu's corpus BLEU of the hypothesis file against the reference
      file (one sentence a line), with the settings bleu.c implements:
      the tokenizer given (default 'none': the text is split on whitespace
      only), smooth 'exp', no lowercasing, one reference.
  bleu_ref.py --tok13a FILE
      FILE holds strings, each ended by a NUL byte (so a string may hold a
      newline); prints sacrebleu's Tokenizer13a of each, one a line.
  bleu_ref.py --signature none|13a
      sacrebleu's signature of a corpus BLEU with those settings.

Files are read as UTF-8 with newline='' (Python's default would turn a
"\\r" into "\\n" before sacrebleu saw it). Exit status 3 when sacrebleu is
not installed (the C test then skips and says how to get it:
`make sacrebleu`), 2 on a usage error.
"""
import sys

try:
    import sacrebleu
    from sacrebleu.metrics import BLEU
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
except ImportError:
    sys.exit(3)


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def main(argv):
    if len(argv) == 2 and argv[0] == "--tok13a":
        tok = Tokenizer13a()
        for s in read(argv[1]).split("\0")[:-1]:
            print(tok(s))
        return 0
    if len(argv) == 2 and argv[0] == "--signature":
        bleu = BLEU(tokenize=argv[1], smooth_method="exp")
        bleu.corpus_score(["a"], [["a"]])   # nrefs is known only after a score
        print(bleu.get_signature())
        return 0
    tokenize = "none"
    if len(argv) == 4 and argv[0] == "--tokenize":
        tokenize, argv = argv[1], argv[2:]
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    hyp = read(argv[0]).split("\n")[:-1]
    ref = read(argv[1]).split("\n")[:-1]
    bleu = sacrebleu.corpus_bleu(hyp, [ref], tokenize=tokenize, smooth_method="exp")
    print("%.6f" % bleu.score)
    return 0


sys.exit(main(sys.argv[1:]))

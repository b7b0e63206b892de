#!/bin/sh
# translate.sh BUILD [flags] - what `make bench-translate` runs.
#   1. Debian's python3-torch and trans-de-en (the Ding dictionary), installed
#      when missing (as root, or with passwordless sudo; else the command to run)
#   2. a venv in BUILD/translate-venv that sees Debian's torch, plus sacrebleu
#      from PyPI (the scorer both systems are measured with)
#   3. bench/bench_translate.py: chapter 11 and the PyTorch reference, 3 seeds
#      each, one after the other (minutes: about 20 on 2 cores)
set -e
BUILD=${1:-build}
shift || true
PY=/usr/bin/python3
need=""
$PY -c 'import torch' 2>/dev/null || need="$need python3-torch"
$PY -c 'import ensurepip, venv' 2>/dev/null || need="$need python3-venv"
[ -r /usr/share/trans/de-en ] || need="$need trans-de-en"
sh tools/deps.sh install bench-translate $need
VENV=$BUILD/translate-venv
if ! "$VENV/bin/python" -c 'import sacrebleu, torch' 2>/dev/null; then
  echo "bench-translate: making $VENV (Debian's torch + sacrebleu from PyPI)"
  $PY -m venv --system-site-packages "$VENV"
  "$VENV/bin/pip" install -q sacrebleu==2.6.0
fi
exec "$VENV/bin/python" bench/bench_translate.py --chapter "$BUILD/11_translation" --out "$BUILD/bench-translate" "$@"

#!/bin/sh
# run.sh BUILD - what `make parity` runs (see tools/parity/parity.py).
#   1. Debian's python3-torch and python3-numpy for /usr/bin/python3, installed
#      when missing (as root, or with passwordless sudo; else the command to run)
#   2. a venv in BUILD/parity-venv that sees them, plus the `safetensors`
#      package from PyPI (skipped, with a message, when it cannot be installed)
#   3. the PyTorch comparison (parity.py), then safetensors exports from
#      chapters 07 and 08 loaded with the safetensors package, then the
#      export in PyTorch's own layout (parity_dump --export-torch) loaded into
#      torch.nn.Transformer with load_state_dict(strict=True) (torch_layout.py)
set -e
BUILD=${1:-build}
PY=/usr/bin/python3
OUT=$BUILD/parity
need=""
$PY -c 'import torch' 2>/dev/null || need="$need python3-torch"
$PY -c 'import numpy' 2>/dev/null || need="$need python3-numpy"
$PY -c 'import ensurepip, venv' 2>/dev/null || need="$need python3-venv"
sh tools/deps.sh install parity $need

VENV=$BUILD/parity-venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import safetensors' 2>/dev/null; then
  echo "parity: making $VENV (system packages + safetensors from PyPI)"
  { $PY -m venv --system-site-packages "$VENV" && timeout 300 "$VENV/bin/pip" install -q safetensors; } >/dev/null 2>&1 ||
    echo "parity: could not install safetensors into $VENV; its load test will be skipped"
fi
[ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torch' 2>/dev/null && PY=$VENV/bin/python

mkdir -p "$OUT"
$PY tools/parity/parity.py --build "$BUILD" --out "$OUT" $PARITY_FLAGS

echo
echo "== safetensors exports, loaded with the safetensors package"
"$BUILD/07_transformer" --no-color --out "$OUT/plots" --save "$OUT/07.ckpt" >/dev/null
"$BUILD/parity_dump" --load "$OUT/07.ckpt" --export-safetensors "$OUT/07.safetensors" >/dev/null
"$BUILD/08_training" --no-color --out "$OUT/08" --steps 5 --batch 16 --eval 0 --examples 0 \
  --checkpoint "$OUT/08.ckpt" --export-safetensors "$OUT/08.safetensors" >/dev/null
rc=0
$PY tools/parity/check_safetensors.py "$OUT/07.safetensors" "$OUT/07.ckpt" "$OUT/08.safetensors" "$OUT/08.ckpt" || rc=$?
[ "$rc" = 77 ] && rc=0

echo
echo "== PyTorch's own layout (parity_dump --export-torch), loaded into torch.nn.Transformer"
$PY tools/parity/torch_layout.py --build "$BUILD" --out "$OUT/torch" || rc=1
exit $rc

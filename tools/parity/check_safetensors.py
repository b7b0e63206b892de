#!/usr/bin/env python3
"""check_safetensors.py - load the C programs' safetensors exports with the
`safetensors` package (Hugging Face's own loader) and compare every tensor,
bit for bit, with the checkpoint the weights came from.

    check_safetensors.py FILE.safetensors CHECKPOINT [FILE CHECKPOINT ...]

Exit status 0 when every tensor matches, 1 otherwise; 77 (skipped) when the
package is not importable.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint as ck   # noqa: E402

try:
    import safetensors
    from safetensors import safe_open
    from safetensors.numpy import load_file
except ImportError:
    print("check_safetensors: the safetensors package is not importable; skipped "
          "(make parity installs it in build/parity-venv)")
    sys.exit(77)


def check(st_path, ckpt_path):
    cfg, P, _ = ck.read_checkpoint(ckpt_path)
    T = load_file(st_path)                       # the library's own parser and checks
    with safe_open(st_path, framework="numpy") as f:
        meta = f.metadata() or {}
    bad = 0
    if sorted(T) != sorted(P):
        print(f"  {st_path}: names differ from the checkpoint's: {sorted(set(T) ^ set(P))[:5]}")
        return 1
    for name in ck.tensor_names(cfg):
        a, b = T[name], P[name]
        same = a.dtype == np.float32 and a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))
        bad += not same
        if not same:
            print(f"  {name}: {a.dtype} {a.shape} vs checkpoint float32 {b.shape}: differs")
    for k in ("N", "d_model", "d_ff", "h", "d_k", "d_v", "vocab", "max_len", "pre_ln", "pad_id"):
        if meta.get(k) != str(cfg[k]):
            print(f"  metadata {k}: {meta.get(k)!r}, checkpoint {cfg[k]}")
            bad += 1
    n = sum(t.size for t in T.values())
    print(f"  {st_path}: safetensors {safetensors.__version__} loaded {len(T)} tensors, {n} floats; "
          f"{'all equal to' if not bad else str(bad) + ' differ from'} {ckpt_path} bit for bit")
    return 1 if bad else 0


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        sys.exit(__doc__)
    fails = sum(check(argv[i], argv[i + 1]) for i in range(0, len(argv), 2))
    print("check_safetensors: OK" if not fails else f"check_safetensors: FAILED ({fails} file(s))")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

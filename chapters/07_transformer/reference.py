#!/usr/bin/env python3
"""reference.py - a second, independent implementation of the forward pass.

Plain Python (standard library only, no numpy): reads a checkpoint written by
`07_transformer --save`, runs the same source/target ids through Figure 1
written out with lists and loops, and compares its logits (and, if present,
attention weights) with a `--dump` file that build/parity_dump writes from the
same checkpoint.

    build/07_transformer --save out/07_transformer/m.ckpt
    build/parity_dump --load out/07_transformer/m.ckpt --src "3 4 5 6 3 7 2" --tgt "1 8 9 10" \\
        --dump out/07_transformer/d.txt --dump-attn
    python3 chapters/07_transformer/reference.py out/07_transformer/m.ckpt out/07_transformer/d.txt

It is slow (pure Python) and meant for the small model. The checkpoint is
read by the project's one Python reader, tools/parity/checkpoint.py (the
format in code: parse_checkpoint).
"""
import math
import os
import sys
from struct import error as struct_error

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "parity"))
import checkpoint   # noqa: E402  (tools/parity/checkpoint.py)


def read_checkpoint(path):
    """Returns (config dict, {name: (shape, flat list of floats)})."""
    try:
        cfg, tensors, _ = checkpoint.parse_checkpoint(path)
    except (OSError, ValueError, struct_error) as e:
        sys.exit(str(e))
    return cfg, tensors


def matrix(t):
    """(rows, cols) flat list -> list of rows"""
    shape, flat = t
    return [flat[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]


def matmul(a, b):
    bt = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, col)) for col in bt] for row in a]


def layernorm(x, g, b, eps=1e-5):
    out = []
    for row in x:
        mean = sum(row) / len(row)
        var = sum((v - mean) ** 2 for v in row) / len(row)
        out.append([gj * (v - mean) / math.sqrt(var + eps) + bj for v, gj, bj in zip(row, g, b)])
    return out


def add(a, b):
    return [[x + y for x, y in zip(r, s)] for r, s in zip(a, b)]


def softmax_masked(scores, allowed):
    if not any(allowed):
        return [0.0] * len(scores)      # nothing to attend to: zeros, not NaN
    m = max(s for s, ok in zip(scores, allowed) if ok)
    e = [math.exp(s - m) if ok else 0.0 for s, ok in zip(scores, allowed)]
    z = sum(e)
    return [v / z for v in e]


def mha(xq, xkv, allowed, W, cfg):
    """MultiHead(xq, xkv, xkv); allowed(i, j) says if query i may see key j.
    Returns (out, weights[head][i][j])."""
    h, dk, dv = cfg["h"], cfg["d_k"], cfg["d_v"]
    q, k, v = matmul(xq, W["w_q"]), matmul(xkv, W["w_k"]), matmul(xkv, W["w_v"])
    concat = [[0.0] * (h * dv) for _ in xq]
    weights = []
    for hd in range(h):
        wh = []
        for i in range(len(xq)):
            qi = q[i][hd * dk:(hd + 1) * dk]
            sc = [sum(a * b for a, b in zip(qi, k[j][hd * dk:(hd + 1) * dk])) / math.sqrt(dk)
                  for j in range(len(xkv))]
            w = softmax_masked(sc, [allowed(i, j) for j in range(len(xkv))])
            wh.append(w)
            for c in range(dv):
                concat[i][hd * dv + c] = sum(w[j] * v[j][hd * dv + c] for j in range(len(xkv)))
        weights.append(wh)
    return matmul(concat, W["w_o"]), weights


def ffn(x, P, pre):
    hid = [[max(0.0, s + b) for s, b in zip(row, P[pre + "b1"][1])] for row in matmul(x, matrix(P[pre + "w1"]))]
    return [[s + b for s, b in zip(row, P[pre + "b2"][1])] for row in matmul(hid, matrix(P[pre + "w2"]))]


def embed(ids, cfg, E):
    D = cfg["d_model"]
    out = []
    for pos, t in enumerate(ids):
        pe = [math.sin(pos / 10000 ** ((j - j % 2) / D)) if j % 2 == 0 else
              math.cos(pos / 10000 ** ((j - j % 2) / D)) for j in range(D)]
        out.append([E[t][j] * math.sqrt(D) + pe[j] for j in range(D)])
    return out


def sublayer(x, f, g, b, pre_ln):
    """post-LN: LayerNorm(x + f(x)); pre-LN: x + f(LayerNorm(x))"""
    if pre_ln:
        return add(x, f(layernorm(x, g, b)))
    return layernorm(add(x, f(x)), g, b)


def forward(cfg, P, src, tgt):
    pad, pre = cfg["pad_id"], cfg["pre_ln"]
    E = matrix(P["embed"])
    attn = {}
    ok_src = lambda i, j: pad < 0 or src[j] != pad
    ok_dec = lambda i, j: j <= i and (pad < 0 or tgt[j] != pad)
    ok_cross = lambda i, j: pad < 0 or src[j] != pad
    W = lambda name: {k: matrix(P[f"{name}.{k}"]) for k in ("w_q", "w_k", "w_v", "w_o")}
    V = lambda name: P[name][1]

    x = embed(src, cfg, E)
    for l in range(cfg["N"]):
        p = f"encoder.{l}."
        def att(z, p=p, l=l):
            out, attn[f"encoder.{l}.self_attn"] = mha(z, z, ok_src, W(p + "self_attn"), cfg)
            return out
        x = sublayer(x, att, V(p + "ln1.gamma"), V(p + "ln1.beta"), pre)
        x = sublayer(x, lambda z, p=p: ffn(z, P, p + "ffn."), V(p + "ln2.gamma"), V(p + "ln2.beta"), pre)
    memory = layernorm(x, V("encoder.ln.gamma"), V("encoder.ln.beta")) if pre else x

    y = embed(tgt, cfg, E)
    for l in range(cfg["N"]):
        p = f"decoder.{l}."
        def self_att(z, p=p, l=l):
            out, attn[f"decoder.{l}.self_attn"] = mha(z, z, ok_dec, W(p + "self_attn"), cfg)
            return out
        def cross_att(z, p=p, l=l):
            out, attn[f"decoder.{l}.cross_attn"] = mha(z, memory, ok_cross, W(p + "cross_attn"), cfg)
            return out
        y = sublayer(y, self_att, V(p + "ln1.gamma"), V(p + "ln1.beta"), pre)
        y = sublayer(y, cross_att, V(p + "ln2.gamma"), V(p + "ln2.beta"), pre)
        y = sublayer(y, lambda z, p=p: ffn(z, P, p + "ffn."), V(p + "ln3.gamma"), V(p + "ln3.beta"), pre)
    if pre:
        y = layernorm(y, V("decoder.ln.gamma"), V("decoder.ln.beta"))
    logits = [[sum(a * b for a, b in zip(row, e)) for e in E] for row in y]   # x E^T (Sec. 3.4)
    return logits, attn


def read_dump(path):
    lines = [l.split("#")[0].split() for l in open(path)]
    lines = [l for l in lines if l]
    src = tgt = None
    logits, attn, i = None, {}, 0
    while i < len(lines):
        l = lines[i]
        if l[0] == "src":
            src = [int(v) for v in l[2:]]
        elif l[0] == "tgt":
            tgt = [int(v) for v in l[2:]]
        elif l[0] == "logits":
            rows = int(l[1])
            logits = [[float(v) for v in lines[i + 1 + r]] for r in range(rows)]
            i += rows
        elif l[0] == "logp":
            i += int(l[1])
        elif l[0] == "attention":
            h, tq = int(l[2]), int(l[3])
            flat = [[float(v) for v in lines[i + 1 + r]] for r in range(h * tq)]
            attn[l[1]] = [flat[hd * tq:(hd + 1) * tq] for hd in range(h)]
            i += h * tq
        i += 1
    return src, tgt, logits, attn


def max_diff(a, b):
    if isinstance(a, list):
        return max(max_diff(x, y) for x, y in zip(a, b))
    return abs(a - b)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: reference.py CHECKPOINT DUMP")
    cfg, P = read_checkpoint(sys.argv[1])
    src, tgt, logits_c, attn_c = read_dump(sys.argv[2])
    logits, attn = forward(cfg, P, src, tgt)
    d = max_diff(logits, logits_c)
    print(f"logits: max |C - Python| = {d:.3g} over {len(logits)} x {len(logits[0])}")
    worst = d
    for name, w in attn_c.items():
        dw = max_diff(attn[name], w)
        worst = max(worst, dw)
        print(f"{name}: max |C - Python| = {dw:.3g}")
    ok = worst < 1e-4
    print("agree (float32 vs double, tolerance 1e-4)" if ok else "DISAGREE")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

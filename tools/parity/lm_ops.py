#!/usr/bin/env python3
"""lm_ops.py - the 2026 operations of ref/lm_ops.h and layers/lm_ffn.h against
PyTorch (make parity-lm).

Reads what tools/parity/lm_ops_dump.c wrote (inputs, outputs and gradients of
each op on random data), computes each op again from the defining paper with
torch's basic operations only (matmul, softmax, sigmoid, topk: Debian's torch
1.13 has no nn.RMSNorm, no rotary embedding and no enable_gqa, and none is
needed), in float64, with autograd for the gradients, and prints one row per
tensor: the largest absolute difference and that difference relative to the
largest |value| of PyTorch's tensor.

  RMSNorm   y = x / sqrt(mean(x^2) + eps) * g          (Zhang & Sennrich 2019)
  RoPE      pairs (x_2i, x_2i+1) turned by pos * base^(-2i/d), the
            interleaved pairs of Su et al. (2021), as the C code has them
  SwiGLU    (silu(x W1) * (x W3)) W2                   (Shazeer 2020)
  GQA       query head i reads kv head i // (h / kv_heads), causal
  MoE       softmax router, top-k, gates renormalised over the k chosen (or
            the probabilities themselves, Switch-style), experts weighted by
            their gates, aux = E * sum_e f_e P_e with f_e the share of the N*k
            assignments and P_e the mean probability; loss = sum(y * dy) +
            d_aux * aux

The C side runs in float32, so the limit is relative: every tensor within
TOL_REL (5e-6) of its largest value; the mixture's chosen experts must be the
same. Any miss: exit status 1.

    python3 tools/parity/lm_ops.py FILE.safetensors
"""
import json
import struct
import sys

import numpy as np
import torch

TOL_REL = 5e-6
DTYPES = {"F32": np.float32, "I32": np.int32}


def read_safetensors(path):
    """{name: numpy array} and the metadata: the format's 8-byte length, the
    JSON header, then the tensors at their data_offsets."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + e], DTYPES[t["dtype"]]).reshape(t["shape"]).copy()
    return out, meta


def leaf(a):
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


# ---- the ops, from their papers -------------------------------------------------

def rmsnorm(x, g, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g


def rope(x, pos, base):
    """x (N, H, d), pos (N): pair i of every head turned by pos * base^(-2i/d)"""
    d = x.shape[-1]
    freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)          # (d/2)
    theta = pos.to(torch.float64)[:, None] * freq[None, :]                    # (N, d/2)
    c, s = torch.cos(theta)[:, None, :], torch.sin(theta)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


def silu(a):
    return a * torch.sigmoid(a)


def swiglu_ffn(x, W1, W3, W2):
    return (silu(x @ W1) * (x @ W3)) @ W2


def gqa(Q, K, V):
    """Q (B, h, T, d_k), K and V (B, kv, T, d): each kv head repeated for the
    h / kv query heads of its group; causal softmax(Q K^T / sqrt(d_k)) V"""
    h, kv, T = Q.shape[1], K.shape[1], Q.shape[2]
    K = K.repeat_interleave(h // kv, dim=1)
    V = V.repeat_interleave(h // kv, dim=1)
    scores = Q @ K.transpose(-1, -2) / Q.shape[-1] ** 0.5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    w = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
    return w @ V, w


def moe(x, w_r, w1, w3, w2, k, renorm):
    """Returns y, aux, the chosen experts (N, k)"""
    N, E = x.shape[0], w_r.shape[1]
    p = torch.softmax(x @ w_r, dim=-1)                                        # (N, E)
    top_p, top_i = torch.topk(p, k, dim=-1)                                   # largest first
    gate = top_p / top_p.sum(-1, keepdim=True) if renorm else top_p
    y = torch.zeros_like(x)
    for e in range(E):
        h = silu(x @ w1[e]) * (x @ w3[e]) if w3 is not None else torch.relu(x @ w1[e])
        ye = h @ w2[e]                                                        # every token, then weighted
        g = (gate * (top_i == e)).sum(-1, keepdim=True)                       # 0 where e was not chosen
        y = y + g * ye
    f = torch.zeros(E, dtype=torch.float64)
    for e in range(E):
        f[e] = (top_i == e).sum() / (N * k)
    aux = E * (f * p.mean(0)).sum()
    return y, aux, top_i


# ---- comparing -------------------------------------------------------------------

class Report:
    def __init__(self):
        self.bad = 0
        print(f"  {'tensor':<28} {'max |C - torch|':>16} {'relative':>10}   (limit {TOL_REL:g} relative)")

    def row(self, name, c, ref):
        ref = ref.detach().numpy() if torch.is_tensor(ref) else np.asarray(ref)
        c = np.asarray(c, dtype=np.float64)
        if c.shape != ref.shape:
            print(f"  {name:<28} shape {c.shape} vs torch {ref.shape}  FAIL")
            self.bad += 1
            return
        diff = float(np.max(np.abs(c - ref))) if c.size else 0.0
        scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-30)
        rel = diff / scale
        ok = rel <= TOL_REL and np.all(np.isfinite(c))
        self.bad += not ok
        print(f"  {name:<28} {diff:16.3e} {rel:10.2e}   {'ok' if ok else 'FAIL'}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: lm_ops.py FILE.safetensors (written by lm_ops_dump)")
    T, meta = read_safetensors(sys.argv[1])
    base, eps = float(meta["rope_base"]), float(meta["rmsnorm_eps"])
    r = Report()

    x, g = leaf(T["rmsnorm.x"]), leaf(T["rmsnorm.g"])
    y = rmsnorm(x, g, eps)
    (y * torch.tensor(T["rmsnorm.dy"], dtype=torch.float64)).sum().backward()
    r.row("rmsnorm.y", T["rmsnorm.y"], y)
    r.row("rmsnorm.dx", T["rmsnorm.dx"], x.grad)
    r.row("rmsnorm.dg", T["rmsnorm.dg"], g.grad)

    x = leaf(T["rope.x"])
    y = rope(x, torch.tensor(T["rope.pos"]), base)
    (y * torch.tensor(T["rope.dy"], dtype=torch.float64)).sum().backward()
    r.row("rope.y", T["rope.y"], y)
    r.row("rope.dx", T["rope.dx"], x.grad)

    P = {n: leaf(T["swiglu_ffn." + n]) for n in ("x", "W1", "W3", "W2")}
    y = swiglu_ffn(P["x"], P["W1"], P["W3"], P["W2"])
    (y * torch.tensor(T["swiglu_ffn.dy"], dtype=torch.float64)).sum().backward()
    r.row("swiglu_ffn.y", T["swiglu_ffn.y"], y)
    for n in ("x", "W1", "W3", "W2"):
        r.row("swiglu_ffn.d" + n, T["swiglu_ffn.d" + n], P[n].grad)

    for kv in (6, 3, 1):
        op = f"gqa_kv{kv}"
        Q, K, V = leaf(T[op + ".Q"]), leaf(T[op + ".K"]), leaf(T[op + ".V"])
        y, w = gqa(Q, K, V)
        (y * torch.tensor(T[op + ".dy"], dtype=torch.float64)).sum().backward()
        r.row(op + ".y", T[op + ".y"], y)
        r.row(op + ".weights", T[op + ".weights"], w)
        r.row(op + ".dQ", T[op + ".dQ"], Q.grad)
        r.row(op + ".dK", T[op + ".dK"], K.grad)
        r.row(op + ".dV", T[op + ".dV"], V.grad)

    for op in ("moe_relu_top2", "moe_swiglu_top2", "moe_relu_top1_switch"):
        D, F, E, k, swiglu, renorm = (int(v) for v in T[op + ".sizes"])
        names = ["x", "w_r", "w1", "w2"] + (["w3"] if swiglu else [])
        P = {n: leaf(T[f"{op}.{n}"]) for n in names}
        y, aux, top_i = moe(P["x"], P["w_r"], P["w1"], P.get("w3"), P["w2"], k, renorm)
        d_aux = float(T[op + ".d_aux"])
        ((y * torch.tensor(T[op + ".dy"], dtype=torch.float64)).sum() + d_aux * aux).backward()
        same = np.array_equal(top_i.numpy(), T[op + ".choice"])
        r.bad += not same
        print(f"  {op + '.choice':<28} {'the same experts' if same else 'different experts'}"
              f"{'':>10}   {'ok' if same else 'FAIL'}")
        r.row(op + ".y", T[op + ".y"], y)
        r.row(op + ".aux", T[op + ".aux"], aux)
        for n in names:
            r.row(f"{op}.d{n}", T[f"{op}.d{n}"], P[n].grad)

    if r.bad:
        print(f"lm_ops parity: {r.bad} tensor(s) differ from PyTorch beyond the limit")
        return 1
    print("lm_ops parity: every op's output and gradients agree with PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())

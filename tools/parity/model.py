"""model.py - the Transformer of "Attention Is All You Need", in PyTorch,
written from the paper (not torch.nn.Transformer, whose defaults differ:
it has attention biases, no embedding scaling, no tied output projection),
with this project's conventions spelled out where the paper leaves a choice:

  - weights come from a project checkpoint; matrices are (in, out): x @ W
  - embeddings are shared three ways (Sec. 3.4): source, target, and the
    output projection logits = x @ E^T; the embedding is scaled by sqrt(d_model)
  - sinusoidal positional encoding (Sec. 3.5), or a learned table (Table 3 (E))
  - multi-head attention without biases; d_k and d_v are free (h*d_k need
    not equal d_model, Table 3 row B)
  - post-LN (the paper): x = LN(x + Sublayer(x)); pre-LN: x = x + Sublayer(LN(x))
    with a final LN after each stack
  - LayerNorm eps = 1e-5, biased variance, inside the square root
  - masks: padding keys blocked everywhere, plus the causal mask in the
    decoder's self-attention; a query with every key blocked gets zero weights
  - loss: label-smoothed cross-entropy (Sec. 5.4) as common/ref/nn.c defines it:
    the target gets 1 - eps_ls, every class that is neither the target nor
    padding gets eps_ls / (V - 2) (V - 1 without a pad id), padding gets 0;
    positions whose target is the pad id count for nothing; mean over the
    counted positions
  - dropout is off (these are the numbers of a deterministic pass)
"""
import math

import torch

LN_EPS = 1e-5


def layer_norm(x, g, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)       # biased, as in Ba et al.
    return g * (x - mean) / torch.sqrt(var + LN_EPS) + b


def positional_encoding(T, d_model, dtype):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)"""
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    two_i = (torch.arange(d_model) // 2 * 2).to(torch.float64)[None, :]
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), two_i / d_model)
    pe = torch.where(torch.arange(d_model)[None, :] % 2 == 0, torch.sin(angle), torch.cos(angle))
    return pe.to(dtype)


def attention(q, k, v, allowed):
    """Eq. 1. q (B,h,Tq,dk), k (B,h,Tk,dk), v (B,h,Tk,dv), allowed (B,1,Tq,Tk) bool."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    any_key = allowed.any(-1, keepdim=True)
    # a row with nothing to attend to: zeros, not NaN
    w = torch.softmax(torch.where(any_key, scores, torch.zeros_like(scores)), -1) * any_key
    return w @ v, w


def multi_head(xq, xkv, allowed, P, prefix, cfg):
    """Sec. 3.2.2: Concat(head_1..head_h) W^O, head_i = Attention(xq W_i^Q, xkv W_i^K, xkv W_i^V)"""
    B, Tq, _ = xq.shape
    Tk = xkv.shape[1]
    h, dk, dv = cfg["h"], cfg["d_k"], cfg["d_v"]
    split = lambda x, T, d: x.view(B, T, h, d).transpose(1, 2)     # (B,h,T,d)
    q = split(xq @ P[prefix + ".w_q"], Tq, dk)
    k = split(xkv @ P[prefix + ".w_k"], Tk, dk)
    v = split(xkv @ P[prefix + ".w_v"], Tk, dv)
    o, w = attention(q, k, v, allowed)
    return o.transpose(1, 2).reshape(B, Tq, h * dv) @ P[prefix + ".w_o"]


def ffn(x, P, p):
    """Eq. 2: max(0, x W1 + b1) W2 + b2"""
    return torch.relu(x @ P[p + ".w1"] + P[p + ".b1"]) @ P[p + ".w2"] + P[p + ".b2"]


def sublayer(x, f, P, ln, pre_ln):
    g, b = P[ln + ".gamma"], P[ln + ".beta"]
    if pre_ln:
        return x + f(layer_norm(x, g, b))
    return layer_norm(x + f(x), g, b)


def embed(ids, P, d_model):
    """E[id] * sqrt(d_model) + the position table: the sinusoids of Sec. 3.5, or
    Table 3 (E)'s learned pos_embed rows 0..T-1 when the checkpoint has one."""
    E, T = P["embed"], ids.shape[1]
    pos = P["pos_embed"][:T] if "pos_embed" in P else positional_encoding(T, d_model, E.dtype)
    return E[ids] * math.sqrt(d_model) + pos[None]


def forward(cfg, P, src, tgt):
    """src (B,Ts), tgt (B,Tt) long tensors -> logits (B,Tt,vocab), before the softmax."""
    pad, pre, D = cfg["pad_id"], cfg["pre_ln"], cfg["d_model"]
    B, Ts = src.shape
    Tt = tgt.shape[1]
    src_ok = (src != pad) if pad >= 0 else torch.ones_like(src, dtype=torch.bool)
    tgt_ok = (tgt != pad) if pad >= 0 else torch.ones_like(tgt, dtype=torch.bool)
    enc_allowed = src_ok[:, None, None, :].expand(B, 1, Ts, Ts)
    causal = torch.tril(torch.ones(Tt, Tt, dtype=torch.bool))
    dec_allowed = causal[None, None] & tgt_ok[:, None, None, :]
    cross_allowed = src_ok[:, None, None, :].expand(B, 1, Tt, Ts)

    x = embed(src, P, D)
    for l in range(cfg["N"]):
        p = f"encoder.{l}"
        x = sublayer(x, lambda z: multi_head(z, z, enc_allowed, P, p + ".self_attn", cfg), P, p + ".ln1", pre)
        x = sublayer(x, lambda z: ffn(z, P, p + ".ffn"), P, p + ".ln2", pre)
    memory = layer_norm(x, P["encoder.ln.gamma"], P["encoder.ln.beta"]) if pre else x

    y = embed(tgt, P, D)
    for l in range(cfg["N"]):
        p = f"decoder.{l}"
        y = sublayer(y, lambda z: multi_head(z, z, dec_allowed, P, p + ".self_attn", cfg), P, p + ".ln1", pre)
        y = sublayer(y, lambda z: multi_head(z, memory, cross_allowed, P, p + ".cross_attn", cfg), P, p + ".ln2", pre)
        y = sublayer(y, lambda z: ffn(z, P, p + ".ffn"), P, p + ".ln3", pre)
    if pre:
        y = layer_norm(y, P["decoder.ln.gamma"], P["decoder.ln.beta"])
    return y @ P["embed"].T          # Sec. 3.4: the output projection is the embedding


def smoothed_loss(logits, targets, eps_ls, pad_id):
    """Label-smoothed cross-entropy, mean over non-padding targets (see the top)."""
    V = logits.shape[-1]
    logp = torch.log_softmax(logits.reshape(-1, V), -1)
    t = targets.reshape(-1)
    others = V - 1 - (1 if pad_id >= 0 else 0)
    share = eps_ls / others if others > 0 else 0.0
    on = 1.0 - eps_ls if others > 0 else 1.0
    dist = torch.full_like(logp, share)
    if pad_id >= 0:
        dist[:, pad_id] = 0.0
    dist.scatter_(1, t[:, None], on)
    counted = (t != pad_id) if pad_id >= 0 else torch.ones_like(t, dtype=torch.bool)
    per_row = -(dist * logp).sum(-1)
    return per_row[counted].sum() / counted.sum()

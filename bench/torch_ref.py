#!/usr/bin/env python3
"""torch_ref.py - the same Transformer and training step in PyTorch, timed.

The reference for `make bench`: the post-LN encoder-decoder of Figure 1 with
the settings of common/model/model.h, so that the C model and this one do the same
arithmetic:
  - embeddings shared three ways (source, target, output projection; Sec. 3.4),
    scaled by sqrt(d_model), plus the sinusoidal positional encoding (Sec. 3.5);
  - post-LN sub-layers: x = LayerNorm(x + Dropout(Sublayer(x))) (Sec. 3.1),
    LayerNorm eps 1e-5;
  - multi-head attention with bias-free W_Q, W_K, W_V, W_O (Sec. 3.2.2),
    padding mask on source keys, causal mask in the decoder (Sec. 3.2.3);
  - FFN max(0, x W1 + b1) W2 + b2 (Eq. 2);
  - label-smoothed cross-entropy, eps_ls 0.1, padding excluded (Sec. 5.4);
  - Adam beta = (0.9, 0.98), eps 1e-9, the warmup schedule (Sec. 5.3).
Data: the copy task of common/text/copy_data.h (vocab 11, pad 0, start 1).

The step also takes the global gradient norm and skips Adam unless it is
finite, as the C step (train_step_batch) does.

Prints two lines for the bench to parse:
  TORCH_CORE <the core OpenBLAS picked, from openblas_get_corename()>
  TORCH fwd_ms=<median inference forward> step_ms=<median training step> rss_kb=<peak RSS>
`--check` prints the torch version and exits 0 (the bench uses it to find an
interpreter that has torch). Without torch it says how to install it and
exits 3.
"""
import argparse
import math
import resource
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("TORCH_ERROR PyTorch is not installed: apt-get install -y python3-torch")
    sys.exit(3)


class MultiHead(nn.Module):
    def __init__(self, d_model, h):
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, xq, xkv, mask):
        B, Tq, _ = xq.shape
        Tk = xkv.shape[1]
        q = self.w_q(xq).view(B, Tq, self.h, self.d_k).transpose(1, 2)
        k = self.w_k(xkv).view(B, Tk, self.h, self.d_k).transpose(1, 2)
        v = self.w_v(xkv).view(B, Tk, self.h, self.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)          # Eq. (1)
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        w = torch.softmax(scores, dim=-1).nan_to_num(0.0)               # fully masked rows -> 0
        o = (w @ v).transpose(1, 2).reshape(B, Tq, self.h * self.d_k)
        return self.w_o(o)


class Sub(nn.Module):
    """x = LayerNorm(x + Dropout(sublayer(x)))  (post-LN, Sec. 3.1)"""

    def __init__(self, d_model, p):
        super().__init__()
        self.ln = nn.LayerNorm(d_model, eps=1e-5)
        self.drop = nn.Dropout(p)

    def forward(self, x, y):
        return self.ln(x + self.drop(y))


class FFN(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1, self.w2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w2(F.relu(self.w1(x)))                              # Eq. (2)


class EncoderLayer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.attn, self.ffn = MultiHead(a.d_model, a.h), FFN(a.d_model, a.d_ff)
        self.s1, self.s2 = Sub(a.d_model, a.dropout), Sub(a.d_model, a.dropout)

    def forward(self, x, mask):
        x = self.s1(x, self.attn(x, x, mask))
        return self.s2(x, self.ffn(x))


class DecoderLayer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.self_attn, self.cross = MultiHead(a.d_model, a.h), MultiHead(a.d_model, a.h)
        self.ffn = FFN(a.d_model, a.d_ff)
        self.s1, self.s2, self.s3 = (Sub(a.d_model, a.dropout) for _ in range(3))

    def forward(self, x, mem, src_mask, tgt_mask):
        x = self.s1(x, self.self_attn(x, x, tgt_mask))
        x = self.s2(x, self.cross(x, mem, src_mask))
        return self.s3(x, self.ffn(x))


class Transformer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.d_model, self.pad = a.d_model, 0
        self.embed = nn.Parameter(torch.empty(a.vocab, a.d_model))
        nn.init.xavier_uniform_(self.embed)
        pos = torch.arange(a.max_len, dtype=torch.float64).unsqueeze(1)
        div = torch.pow(10000.0, torch.arange(0, a.d_model, 2, dtype=torch.float64) / a.d_model)
        pe = torch.zeros(a.max_len, a.d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(pos / div)
        pe[:, 1::2] = torch.cos(pos / div)[:, : a.d_model // 2]
        self.register_buffer("pe", pe.float())
        self.drop = nn.Dropout(a.dropout)
        self.enc = nn.ModuleList(EncoderLayer(a) for _ in range(a.N))
        self.dec = nn.ModuleList(DecoderLayer(a) for _ in range(a.N))
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.xavier_uniform_(p)

    def emb(self, ids):
        T = ids.shape[1]
        return self.drop(F.embedding(ids, self.embed) * math.sqrt(self.d_model) + self.pe[:T])

    def forward(self, src, tgt):
        B, Ts = src.shape
        Tt = tgt.shape[1]
        src_keys = (src != self.pad).unsqueeze(1)                       # (B,1,Ts)
        x = self.emb(src)
        for layer in self.enc:
            x = layer(x, src_keys.expand(B, Ts, Ts))
        causal = torch.tril(torch.ones(Tt, Tt, dtype=torch.bool)).unsqueeze(0).expand(B, Tt, Tt)
        y = self.emb(tgt)
        for layer in self.dec:
            y = layer(y, x, src_keys.expand(B, Tt, Ts), causal)
        logits = y @ self.embed.t()                                     # shared weights, Sec. 3.4
        return torch.log_softmax(logits, dim=-1)


def smoothed_xent(logp, targets, V, eps, pad):
    """mean over non-pad positions of -sum_v dist_v logp_v (Sec. 5.4)"""
    dist = torch.full_like(logp, eps / (V - 2))
    dist.scatter_(1, targets.unsqueeze(1), 1.0 - eps)
    dist[:, pad] = 0.0
    keep = targets != pad
    return -(dist * logp).sum(dim=1)[keep].sum() / keep.sum().clamp(min=1)


def openblas_core():
    """The core type the OpenBLAS that torch loaded picked, asked of the
    library itself (openblas_get_corename), not guessed from the environment."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({l.split()[-1] for l in f if "openblas" in l.lower() and ".so" in l})
        for path in libs:
            lib = ctypes.CDLL(path)
            if hasattr(lib, "openblas_get_corename"):
                lib.openblas_get_corename.restype = ctypes.c_char_p
                return lib.openblas_get_corename().decode()
    except OSError:
        pass
    return "none-loaded"


def peak_rss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB on Linux


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="print the torch version and exit")
    for name, dflt in [("N", 2), ("d_model", 512), ("d_ff", 2048), ("h", 8), ("vocab", 11),
                       ("max_len", 64), ("B", 80), ("Ts", 10), ("Tt", 9), ("steps", 5), ("threads", 2)]:
        p.add_argument("--" + name, type=int, default=dflt)
    p.add_argument("--dropout", type=float, default=0.1)
    a = p.parse_args()
    if a.check:
        print("torch", torch.__version__)
        return 0
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    model = Transformer(a)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: a.d_model ** -0.5 * min((s + 1) ** -0.5, (s + 1) * 400 ** -1.5))
    g = torch.Generator().manual_seed(7)
    src = torch.randint(2, a.vocab, (a.B, a.Ts), generator=g)
    src[:, 0] = 1
    tgt_in, tgt_out = src[:, : a.Tt], src[:, 1 : a.Tt + 1].reshape(-1)

    fwd, step = [], []
    for r in range(-2, a.steps):          # 2 warm-up rounds
        model.eval()
        t0 = time.perf_counter()
        with torch.no_grad():
            model(src, tgt_in)
        t1 = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=False)
        logp = model(src, tgt_in).reshape(-1, a.vocab)
        loss = smoothed_xent(logp, tgt_out, a.vocab, 0.1, 0)
        loss.backward()
        # as the C step: the global gradient norm, and no update unless it is finite
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        if torch.isfinite(norm):
            opt.step()
        sched.step()
        t2 = time.perf_counter()
        if r >= 0:
            fwd.append(t1 - t0)
            step.append(t2 - t1)
    fwd.sort()
    step.sort()
    med = lambda x: x[len(x) // 2] if len(x) % 2 else 0.5 * (x[len(x) // 2 - 1] + x[len(x) // 2])
    print(f"TORCH_CORE {openblas_core()}")
    print(f"TORCH fwd_ms={1e3 * med(fwd):.4f} step_ms={1e3 * med(step):.4f} rss_kb={peak_rss_kb()} "
          f"loss={loss.item():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

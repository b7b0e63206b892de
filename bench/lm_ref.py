"""lm_ref.py - an independent PyTorch decoder-only language model for make bench-lm.

Chapter 14's model, data, batches and schedule, written here from the papers
and from nanoGPT's recipe, not from the C code, so that the C model can be
raced against it (issue 43, "Speed and quality"):

  text     the same characters as common/text/lmtext.c reads: "devil" is
           dict-devil's devil.dict.dz gunzipped, from the first paragraph
           that opens an entry ("ABASEMENT, n.  A decent ...") to the end,
           without dictd's final alphabet line (380,684 characters, 83
           distinct); "tang300" is fortunes-zh's poems with the ANSI colours
           stripped and a blank line for each "%" line but the last; any
           other name is a UTF-8 file read as it is. Tokens are code points
           sorted by value (id = rank); the last ceil(n/10) are validation.
           --print-stats prints the sizes and an FNV-1a hash of the ids (as
           little-endian int32, from core/hash.h's FNV1A_INIT), so a C test
           can check that both sides read the same tokens.
  model    the decoder of Figure 1 without cross-attention, from torch's
           basic ops (matmul, softmax, masked_fill; LayerNorm and RMSNorm
           written out): --norm layer|rms, --prenorm/--postnorm, --pos
           sinusoid|learned|rope (RoPE on interleaved pairs (2i, 2i+1), the
           angle pos * 10000^(-2i/d), as common/ref/lm_ops.h), --ffn
           relu|swiglu (SwiGLU at 2/3 of d_ff: 341 for 128 wide, the
           parameters of the ReLU FFN), --kv-heads (grouped-query
           attention: each K/V head serves heads/kv_heads query heads),
           --bias/--no-bias, --tied/--untied output, --preset 2017|2026.
  training nanoGPT's CPU recipe by default (4 layers, 4 heads, 128 wide,
           context 64, batch 12, 2000 steps, dropout 0): AdamW (beta 0.9,
           0.99, eps 1e-8, weight decay 0.1 on the matrices and the
           embeddings as nanoGPT does, never on biases and norm gains),
           gradient clipping at norm 1, the rate warmed up linearly to
           1e-3 over 100 steps then cosine-decayed to 1e-4 at the last step.
           Batches: B windows of T+1 train tokens, each start drawn from a
           numpy PCG64 generator seeded by --seed.
  eval     the validation split cut into windows of T+1 tokens overlapping by
           one (lmtext_eval_windows): every target counted once; the mean
           cross-entropy in nats and in bits per character.

Prints a line per evaluation (step, validation nats and bits, train tokens/s,
wall seconds), then one JSON line with the whole curve. Wall times include
the evaluations; tokens/s counts training steps only.

Test- and benchmark-only: the chapters never need Python. Debian's
python3-torch 1.13 has no nn.RMSNorm and no enable_gqa: both are written out.
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch

DEVIL_PATH = "/usr/share/dictd/devil.dict.dz"
TANG300_PATH = "/usr/share/games/fortunes/tang300"
FNV1A_INIT = 1469598103934665603   # core/hash.h: FNV's offset basis one digit short, as the library has it
FNV1A_PRIME = 1099511628211
MASK64 = (1 << 64) - 1

# ---- the text -----------------------------------------------------------------------

POS = ("n.", "n.pl.", "v.", "v.t.", "v.i.", "adj.", "adv.", "pro.", "pron.", "pp.", "p.p.", "x.",
       "prep.", "conj.", "interj.")


def entry_head(s, i):
    """True when s[i:] opens a dictionary entry: WORD[ WORD...], part-of-speech."""
    n = len(s)
    while True:
        if i >= n or not ("A" <= s[i] <= "Z"):
            return False
        while i < n and (("A" <= s[i] <= "Z") or s[i] in "-'"):
            i += 1
        if i >= n:
            return False
        if s[i] != " ":
            break
        i += 1
    if s[i:i + 2] != ", ":
        return False
    i += 2
    p = i
    while i < n and (("a" <= s[i] <= "z") or s[i] == "."):
        i += 1
    return i < n and s[i] in " \n" and s[p:i] in POS


def read_devil(path):
    with gzip.open(path, "rb") as f:
        text = f.read().decode("utf-8")
    start = None
    for i in range(len(text)):
        para = i == 0 or (i >= 2 and text[i - 1] == "\n" and text[i - 2] == "\n")
        if para and "A" <= text[i] <= "Z" and entry_head(text, i):
            start = i
            break
    if start is None:
        sys.exit(f"lm_ref.py: {path} holds no dictionary entry: is it The Devil's Dictionary?")
    alphabet = " abcdefghijklmnopqrstuvwxyz\n"
    end = len(text)
    if end - start > len(alphabet) and text.endswith(alphabet) and text[end - len(alphabet) - 1] == "\n":
        end -= len(alphabet)
    return text[start:end]


def read_tang300(path):
    import re
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    text = re.sub("\x1b\\[[0-9;]*[@-~]", "", text)
    lines = text.split("\n")
    # each "%" line between two poems becomes blank; the one after the last poem goes
    out = []
    for k, line in enumerate(lines):
        if line == "%":
            if any(l.strip() for l in lines[k + 1:]):
                out.append("")
            continue
        out.append(line)
    return "\n".join(out)


def load_text(name):
    if name == "devil":
        if not os.path.exists(DEVIL_PATH):
            sys.exit(f"lm_ref.py: {DEVIL_PATH} is missing: apt-get install dict-devil")
        return read_devil(DEVIL_PATH)
    if name == "tang300":
        if not os.path.exists(TANG300_PATH):
            sys.exit(f"lm_ref.py: {TANG300_PATH} is missing: apt-get install fortunes-zh")
        return read_tang300(TANG300_PATH)
    try:
        with open(name, "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        sys.exit(f"lm_ref.py: cannot read {name} as UTF-8 text: {e}")


def tokenize(text):
    vocab = sorted(set(text))
    if len(vocab) < 2:
        sys.exit("lm_ref.py: the text has fewer than two distinct characters: nothing to predict")
    rank = {c: i for i, c in enumerate(vocab)}
    ids = np.fromiter((rank[c] for c in text), dtype=np.int64, count=len(text))
    n_train = len(ids) - (len(ids) + 9) // 10
    return vocab, ids, n_train


def fnv1a_ids(ids):
    h = FNV1A_INIT
    for b in ids.astype("<i4").tobytes():
        h = ((h ^ b) * FNV1A_PRIME) & MASK64
    return h


# ---- the model, from basic ops ---------------------------------------------------------

class Norm(torch.nn.Module):
    """LayerNorm (Ba et al. 2016) or RMSNorm (Zhang & Sennrich 2019), eps 1e-5."""

    def __init__(self, C, kind, bias):
        super().__init__()
        self.kind = kind
        self.gain = torch.nn.Parameter(torch.ones(C))
        self.beta = torch.nn.Parameter(torch.zeros(C)) if kind == "layer" and bias else None

    def forward(self, x):
        if self.kind == "layer":
            mu = x.mean(-1, keepdim=True)
            var = ((x - mu) ** 2).mean(-1, keepdim=True)
            y = (x - mu) * torch.rsqrt(var + 1e-5) * self.gain
            return y + self.beta if self.beta is not None else y
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * self.gain


def sinusoids(T, C):
    """Sec. 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(...)."""
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    inv = 10000.0 ** (-torch.arange(0, C, 2, dtype=torch.float64) / C)
    pe = torch.zeros(T, C, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * inv)
    pe[:, 1::2] = torch.cos(pos * inv)
    return pe.float()


def rope_tables(T, d):
    """cos and sin of theta = pos * 10000^(-2i/d), (T, d/2)."""
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos * inv
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope(x, cos, sin):
    """x (B, H, T, d): each pair (x_2i, x_2i+1) rotated by theta(pos, i)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack((y0, y1), dim=-1).flatten(-2)


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        C, H, KV = a.d_model, a.heads, a.kv_heads
        self.H, self.KV, self.hs, self.a = H, KV, C // H, a
        L = lambda i, o: torch.nn.Linear(i, o, bias=a.bias)
        self.q, self.k, self.v, self.o = L(C, C), L(C, KV * self.hs), L(C, KV * self.hs), L(C, C)
        if a.ffn == "relu":
            self.w1, self.w2, self.w3 = L(C, a.d_ff), L(a.d_ff, C), None
        else:
            w = round(2 * a.d_ff / 3)           # layers/lm_ffn.h's swiglu_d_ff(d_ff, 1)
            self.w1, self.w3, self.w2 = L(C, w), L(C, w), L(w, C)
        self.n1, self.n2 = Norm(C, a.norm, a.bias), Norm(C, a.norm, a.bias)

    def attn(self, x, mask, rot):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.H, self.hs).transpose(1, 2)
        k = self.k(x).view(B, T, self.KV, self.hs).transpose(1, 2)
        v = self.v(x).view(B, T, self.KV, self.hs).transpose(1, 2)
        if rot is not None:
            q, k = rope(q, *rot), rope(k, *rot)
        if self.KV != self.H:                       # each K/V head serves H/KV query heads
            k = k.repeat_interleave(self.H // self.KV, dim=1)
            v = v.repeat_interleave(self.H // self.KV, dim=1)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(self.hs)          # Eq. (1)
        p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        return self.o((p @ v).transpose(1, 2).reshape(B, T, C))

    def ffn(self, x):
        if self.w3 is None:
            return self.w2(torch.relu(self.w1(x)))                    # Eq. (2)
        a = self.w1(x)
        return self.w2(a * torch.sigmoid(a) * self.w3(x))             # SwiGLU

    def forward(self, x, mask, rot):
        if self.a.prenorm:
            x = x + self.attn(self.n1(x), mask, rot)
            return x + self.ffn(self.n2(x))
        x = self.n1(x + self.attn(x, mask, rot))                      # Sec. 3.1: LayerNorm(x + Sublayer(x))
        return self.n2(x + self.ffn(x))


class LM(torch.nn.Module):
    def __init__(self, a, V):
        super().__init__()
        self.a = a
        self.wte = torch.nn.Parameter(torch.empty(V, a.d_model))
        self.wpe = torch.nn.Parameter(torch.empty(a.context, a.d_model)) if a.pos == "learned" else None
        self.register_buffer("pe", sinusoids(a.context, a.d_model) if a.pos == "sinusoid" else None)
        hs = a.d_model // a.heads
        cos, sin = rope_tables(a.context, hs)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.blocks = torch.nn.ModuleList(Block(a) for _ in range(a.layers))
        self.nf = Norm(a.d_model, a.norm, a.bias) if a.prenorm else None
        self.head = None if a.tied else torch.nn.Linear(a.d_model, V, bias=a.bias)
        mask = torch.triu(torch.ones(a.context, a.context, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask)
        # GPT-2's initialisation, as nanoGPT: N(0, 0.02), the projections that
        # end a residual branch N(0, 0.02 / sqrt(2 N)), biases 0
        for name, p in self.named_parameters():
            if name.endswith("gain"):
                continue
            if p.dim() == 1:
                torch.nn.init.zeros_(p)
            elif name.endswith(("o.weight", "w2.weight")):
                torch.nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * a.layers))
            else:
                torch.nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        B, T = idx.shape
        x = self.wte[idx]
        if self.pe is not None:
            x = x * math.sqrt(self.a.d_model) + self.pe[:T]    # Sec. 3.4: embeddings x sqrt(d_model)
        elif self.wpe is not None:
            x = x + self.wpe[:T]
        rot = (self.cos[:T], self.sin[:T]) if self.a.pos == "rope" else None
        mask = self.mask[:T, :T]
        for blk in self.blocks:
            x = blk(x, mask, rot)
        if self.nf is not None:
            x = self.nf(x)
        return x @ self.wte.t() if self.head is None else self.head(x)


def cross_entropy(logits, y):
    """mean over tokens of -log softmax(logits)[y], in float32"""
    lp = torch.log_softmax(logits.float(), dim=-1)
    return -lp.gather(-1, y.unsqueeze(-1)).mean()


def lr_at(step, a):
    """nanoGPT's schedule: linear warmup to lr over `warmup` steps, cosine to
    min_lr at `steps`, constant after. step counts from 1."""
    if step <= a.warmup:
        return a.lr * step / a.warmup
    if step >= a.steps:
        return a.min_lr
    r = (step - a.warmup) / (a.steps - a.warmup)
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (a.lr - a.min_lr)


@torch.no_grad()
def evaluate(model, ids, n_train, T, B, autocast):
    val = ids[n_train:]
    W = (len(val) - 1) // T
    total, count = 0.0, 0
    model.eval()
    for w0 in range(0, W, B):
        rows = range(w0, min(W, w0 + B))
        x = torch.stack([torch.from_numpy(val[k * T:k * T + T]) for k in rows])
        y = torch.stack([torch.from_numpy(val[k * T + 1:k * T + T + 1]) for k in rows])
        with autocast():
            logits = model(x)
        lp = torch.log_softmax(logits.float(), dim=-1)
        total += -lp.gather(-1, y.unsqueeze(-1)).double().sum().item()
        count += y.numel()
    model.train()
    return total / count


# ---- the command line -----------------------------------------------------------------

PRESETS = {
    "2017": dict(norm="layer", prenorm=False, pos="sinusoid", ffn="relu", kv_heads=0, bias=True, tied=True),
    "2026": dict(norm="rms", prenorm=True, pos="rope", ffn="swiglu", kv_heads=-2, bias=False, tied=True),
}


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--text", default="devil", help="devil, tang300 or a UTF-8 file")
    p.add_argument("--print-stats", action="store_true",
                   help="print characters, distinct, train/val sizes and the ids' FNV-1a hash, then exit")
    p.add_argument("--preset", choices=PRESETS, default=None,
                   help="2017: post-LayerNorm, sinusoids, ReLU, biases; 2026: pre-RMSNorm, RoPE, "
                        "SwiGLU, kv-heads = heads/2, no biases (both tied); flags given after it win")
    p.add_argument("--norm", choices=("layer", "rms"))
    g = p.add_mutually_exclusive_group()
    g.add_argument("--prenorm", dest="prenorm", action="store_true", default=None)
    g.add_argument("--postnorm", dest="prenorm", action="store_false")
    p.add_argument("--pos", choices=("sinusoid", "learned", "rope"))
    p.add_argument("--ffn", choices=("relu", "swiglu"))
    p.add_argument("--kv-heads", type=int, help="K/V heads (must divide --heads; default --heads)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--bias", dest="bias", action="store_true", default=None)
    g.add_argument("--no-bias", dest="bias", action="store_false")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tied", dest="tied", action="store_true", default=None)
    g.add_argument("--untied", dest="tied", action="store_false")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--d-ff", type=int, default=0, help="FFN width (0: 4 d_model)")
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0, help="0: no clipping")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=2, help="torch threads (0: as the environment leaves it)")
    p.add_argument("--autocast", choices=("off", "bf16"), default="off",
                   help='bf16: torch.autocast("cpu", dtype=torch.bfloat16) around the forward')
    a = p.parse_args()
    base = dict(norm="layer", prenorm=True, pos="learned", ffn="relu", kv_heads=0, bias=False, tied=True)
    if a.preset:
        base = PRESETS[a.preset]
    for k, v in base.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.kv_heads <= 0:
        a.kv_heads = a.heads if a.kv_heads == 0 else max(1, a.heads // -a.kv_heads)
    if a.d_ff <= 0:
        a.d_ff = 4 * a.d_model
    if a.d_model % a.heads or a.heads % a.kv_heads:
        p.error(f"--heads {a.heads} must divide --d-model {a.d_model}, and --kv-heads {a.kv_heads} --heads")
    if a.pos == "rope" and (a.d_model // a.heads) % 2:
        p.error("RoPE rotates pairs: the head width d_model/heads must be even")
    if min(a.steps, a.batch, a.context, a.layers, a.eval_every, a.warmup) < 1:
        p.error("--steps, --batch, --context, --layers, --eval-every and --warmup must be at least 1")
    return a


def main():
    a = parse()
    text = load_text(a.text)
    vocab, ids, n_train = tokenize(text)
    if a.print_stats:
        print(f"characters {len(ids)} distinct {len(vocab)} train {n_train} val {len(ids) - n_train} "
              f"fnv1a {fnv1a_ids(ids):016x}")
        return
    if n_train < a.context + 1 or len(ids) - n_train < a.context + 1:
        sys.exit(f"lm_ref.py: the train split ({n_train}) and the validation split ({len(ids) - n_train} "
                 f"characters) must each hold a window of context + 1 = {a.context + 1}: give a shorter "
                 f"--context or a longer text")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = LM(a, len(vocab))
    n_params = sum(p.numel() for p in model.parameters())
    # AdamW's decoupled decay on the matrices and embeddings; biases and norm gains exempt
    decay = [p for p in model.parameters() if p.dim() >= 2]
    keep = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": keep, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=1e-8)
    rng = np.random.Generator(np.random.PCG64(a.seed))
    if a.autocast == "bf16":
        autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    else:
        import contextlib
        autocast = contextlib.nullcontext
    T, B = a.context, a.batch
    cfg = {k: getattr(a, k) for k in ("text", "preset", "norm", "prenorm", "pos", "ffn", "heads", "kv_heads",
                                      "bias", "tied", "layers", "d_model", "d_ff", "context", "batch", "steps",
                                      "seed", "autocast")}
    cfg["threads"] = torch.get_num_threads()
    print(f"# lm_ref.py {json.dumps(cfg)}")
    print(f"# torch {torch.__version__}, {n_params} parameters, {len(ids)} characters, V {len(vocab)}, "
          f"train {n_train}, val {len(ids) - n_train}")
    print(f"{'step':>6} {'val_nats':>9} {'val_bits':>9} {'tok/s':>8} {'wall_s':>8}")
    curve = []
    t0 = time.perf_counter()
    train_s = 0.0
    for step in range(1, a.steps + 1):
        ts = time.perf_counter()
        starts = rng.integers(0, n_train - T, size=B)
        x = torch.from_numpy(np.stack([ids[s:s + T] for s in starts]))
        y = torch.from_numpy(np.stack([ids[s + 1:s + T + 1] for s in starts]))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        with autocast():
            logits = model(x)
        loss = cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        train_s += time.perf_counter() - ts
        if not math.isfinite(loss.item()):
            sys.exit(f"lm_ref.py: the training loss became {loss.item()} at step {step}")
        if step % a.eval_every == 0 or step == a.steps:
            v = evaluate(model, ids, n_train, T, B, autocast)
            wall = time.perf_counter() - t0
            tps = step * B * T / train_s
            curve.append({"step": step, "val_nats": round(v, 5), "val_bits": round(v / math.log(2), 5),
                          "train_loss": round(loss.item(), 5), "tok_s": round(tps), "wall_s": round(wall, 2)})
            print(f"{step:6d} {v:9.4f} {v / math.log(2):9.4f} {tps:8.0f} {wall:8.1f}", flush=True)
    wall = time.perf_counter() - t0
    print(json.dumps({"config": cfg, "params": n_params, "final_val_nats": curve[-1]["val_nats"],
                      "final_val_bits": curve[-1]["val_bits"], "wall_s": round(wall, 2),
                      "train_s": round(train_s, 2), "cpu_s": round(time.process_time(), 2),
                      "tok_s": round(a.steps * B * T / train_s), "curve": curve}))


if __name__ == "__main__":
    main()

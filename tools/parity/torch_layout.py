#!/usr/bin/env python3
"""torch_layout.py - the C model's weights in torch.nn.Transformer (make parity).

parity_dump --load CKPT --export-torch FILE writes the weights in PyTorch's own
layout (common/io/torch_export.h): Linear weights [out, in], W^Q, W^K, W^V
packed into in_proj_weight. This script is what a PyTorch user would write:
a small module around the stock torch.nn.Transformer that adds what the
paper has and nn.Transformer does not (the shared embedding times
sqrt(d_model), the positional encoding, the output projection tied to the
embedding), whose state_dict keys are exactly the export's. For each
configuration below it
  1. builds a model with the C program (07_transformer --save), gives
     every LayerNorm gain and bias and every FFN bias a random value (1 and
     0 at initialisation would hide a misplaced norm), and writes the
     checkpoint back,
  2. exports it with parity_dump --export-torch and loads the file with
     load_state_dict(strict=True): no key missing, none left over,
  3. writes a few batches with padding in the source and the target, runs
     each through the C model (parity_dump --batch-file --grad-dump: its
     logits; targets of at most max_len ids, what the training step reads) and
     through the module (padding masks on every attention's keys, the
     causal mask in the decoder), in float64 and in float32,
and prints the largest |difference| of the logits. Limit: 1e-5, as
parity.py's. For information it also prints what a post-LN loader that
skips the last_norm_eps line gets (the stack-final norms nn.Transformer
adds; common/io/torch_export.c says why), and how far nn.Transformer is
from the paper's stack written out by hand (model.py, both float64).

    python3 tools/parity/torch_layout.py [--build build] [--out build/parity/torch]
"""
import argparse
import math
import os
import sys
import warnings

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint as ck          # noqa: E402
import model                     # noqa: E402
from parity import perturb, run  # noqa: E402

# PyTorch 1.12+ announces its nested tensors (the inference fast path) once
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")

TOL_LOGITS = 1e-5
N_BATCHES = 3

# name, 07_transformer flags (pad id 0, the default). d_k = d_v = d_model / h:
# nn.MultiheadAttention has no other shape (the export refuses Table 3 row B's).
CONFIGS = [
    ("post-LN N=2 h=4", "--layers 2 --d-model 32 --d-ff 64 --heads 4 --vocab 12 --max-len 16"),
    ("post-LN N=1 h=1", "--layers 1 --d-model 16 --d-ff 24 --heads 1 --vocab 13 --max-len 16"),
    ("post-LN N=3 h=2 learned PE (E)", "--learned-pe --layers 3 --d-model 16 --d-ff 32 --heads 2 --vocab 10 --max-len 9"),
    ("pre-LN N=2 h=3", "--pre-ln --layers 2 --d-model 24 --d-ff 48 --heads 3 --vocab 14 --max-len 16"),
]


class PaperTransformer(nn.Module):
    """Figure 1 around the stock nn.Transformer; built from the export's metadata.

    embed        nn.Embedding(vocab, d_model): E, shared by source and target
    pos_embed    nn.Embedding(max_len, d_model), only with learned positions
                 (Table 3 (E)); else the sinusoids of Sec. 3.5 (not a weight)
    transformer  nn.Transformer(norm_first=False for the paper's post-LN)
    generator    nn.Linear(d_model, vocab, bias=False) whose weight IS E (Sec. 3.4)
    """

    def __init__(self, meta, set_eps=True):
        super().__init__()
        self.d_model, self.pad_id = int(meta["d_model"]), int(meta["pad_id"])
        V, L = int(meta["vocab"]), int(meta["max_len"])
        self.embed = nn.Embedding(V, self.d_model)
        if meta["positions"] == "learned":
            self.pos_embed = nn.Embedding(L, self.d_model)
        else:
            self.pos_embed = None
            self.register_buffer("pe", model.positional_encoding(L, self.d_model, torch.float32), persistent=False)
        self.transformer = nn.Transformer(
            d_model=self.d_model, nhead=int(meta["nhead"]),
            num_encoder_layers=int(meta["num_encoder_layers"]),
            num_decoder_layers=int(meta["num_decoder_layers"]),
            dim_feedforward=int(meta["dim_feedforward"]), dropout=float(meta["dropout"]),
            activation=meta["activation"], layer_norm_eps=float(meta["layer_norm_eps"]),
            batch_first=meta["batch_first"] == "True", norm_first=meta["norm_first"] == "True")
        self.generator = nn.Linear(self.d_model, V, bias=False)
        self.generator.weight = self.embed.weight        # tied: the same Parameter
        if set_eps and meta["norm_first"] == "False":
            # post-LN: the last layer's last norm only centres (a huge eps, a
            # weight of its square root) and the stack's final norm is the
            # paper's last LayerNorm (common/io/torch_export.c says why).
            t, eps = self.transformer, float(meta["last_norm_eps"])
            t.encoder.layers[-1].norm2.eps = t.decoder.layers[-1].norm3.eps = eps
            # PyTorch's inference fast path (eval, no_grad) packs padded rows
            # into a nested tensor when the FIRST layer qualifies; a layer whose
            # two norms differ in eps does not, and its plain path cannot take
            # a nested tensor: keep the padded ones
            t.encoder.enable_nested_tensor = False

    def embed_tokens(self, ids):
        """E[id] * sqrt(d_model) + the position table (Sec. 3.4, 3.5)"""
        T = ids.shape[1]
        pos = self.pos_embed.weight[:T] if self.pos_embed is not None else self.pe[:T]
        return self.embed(ids) * math.sqrt(self.d_model) + pos[None]

    def forward(self, src, tgt):
        """src (B,Ts), tgt (B,Tt) ids -> logits (B,Tt,vocab). PyTorch's masks say
        True where attention is NOT allowed: padding keys everywhere, and the
        future in the decoder's self-attention (Sec. 3.2.3)."""
        Tt = tgt.shape[1]
        causal = torch.triu(torch.ones(Tt, Tt, dtype=torch.bool), diagonal=1)
        src_pad = (src == self.pad_id) if self.pad_id >= 0 else None
        tgt_pad = (tgt == self.pad_id) if self.pad_id >= 0 else None
        y = self.transformer(self.embed_tokens(src), self.embed_tokens(tgt), tgt_mask=causal,
                             src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                             memory_key_padding_mask=src_pad)
        return self.generator(y)


def load_export(path):
    """({name: torch tensor}, metadata); through the safetensors package when
    it is there (make parity installs it), checked against checkpoint.py's
    own reader of the format."""
    T, meta = ck.read_safetensors(path)
    try:
        from safetensors.torch import load_file
        theirs = load_file(path)
        if sorted(theirs) != sorted(T) or any(not np.array_equal(theirs[k].numpy(), T[k]) for k in T):
            sys.exit(f"torch_layout: {path}: the safetensors package reads something else than read_safetensors")
        return theirs, meta
    except ImportError:
        return {k: torch.from_numpy(v) for k, v in T.items()}, meta


def write_batch(cfg, rng, path):
    """2..4 examples of random lengths, so most rows are padded: ids from 1
    (the start symbol) up, the pad id 0 only after a sequence ends."""
    V, L = cfg["vocab"], cfg["max_len"]
    lines = []
    for _ in range(int(rng.integers(2, 5))):
        ns, nt = int(rng.integers(1, L + 1)), int(rng.integers(2, L + 1))   # the training step reads <= L
        src = rng.integers(1, V, ns)
        tgt = np.concatenate([[1], rng.integers(2, V, nt - 1)])
        lines.append(" ".join(map(str, src)) + " | " + " ".join(map(str, tgt)))
    with open(path, "w") as f:
        f.write("# torch_layout batch: source ids | target ids\n" + "\n".join(lines) + "\n")


def check_config(title, flags, exe, tool, out, seed):
    rng = np.random.default_rng(seed)
    tag = title.replace(" ", "_").replace("=", "").replace("(", "").replace(")", "")
    base, ckpt, exp = f"{out}/{tag}.init.ckpt", f"{out}/{tag}.ckpt", f"{out}/{tag}.torch.safetensors"
    plots = ["--no-color", "--out", f"{out}/plots"]
    run([exe, "--seed", str(seed), "--save", base] + plots + flags.split())
    cfg, P, _ = ck.read_checkpoint(base)
    P, _ = perturb(cfg, P, rng)
    ck.write_checkpoint(ckpt, cfg, P)
    run([tool, "--load", ckpt, "--export-torch", exp])

    W, meta = load_export(exp)
    tied = torch.equal(W["embed.weight"], W["generator.weight"])
    nets = {"float64": PaperTransformer(meta).double(), "float32": PaperTransformer(meta)}
    post = meta["norm_first"] == "False"
    if post:   # what a loader that skips the eps line gets (information, not a limit)
        nets["float64, eps not set"] = PaperTransformer(meta, set_eps=False).double()
    for m in nets.values():
        m.load_state_dict(W, strict=True)     # raises on any missing or unexpected key
        m.eval()
    P64 = {k: torch.tensor(v, dtype=torch.float64) for k, v in P.items()}

    print(f"\n== {title}: {len(W)} tensors into nn.Transformer(norm_first={meta['norm_first']}) "
          f"+ embedding + generator, load_state_dict(strict=True): ok; generator.weight "
          f"{'==' if tied else '!='} embed.weight")
    worst = {k: 0.0 for k in list(nets) + ["paper"]}
    for i in range(N_BATCHES):
        batch, dump = f"{out}/{tag}.batch{i}", f"{out}/{tag}.grad{i}.safetensors"
        write_batch(cfg, rng, batch)
        run([tool, "--load", ckpt, "--batch-file", batch, "--grad-dump", dump])
        G, _ = ck.read_safetensors(dump)
        src, tgt = torch.tensor(G["src"], dtype=torch.long), torch.tensor(G["tgt_in"], dtype=torch.long)
        c_logits = G["logits"].astype(np.float64)
        row = []
        with torch.no_grad():
            for kind, m in nets.items():
                got = m(src, tgt).double().numpy()
                d = float(np.max(np.abs(got - c_logits)))
                worst[kind] = max(worst[kind], d)
                if kind in ("float64", "float32"):
                    row.append(f"{kind} {d:.2e}")
            ours = nets["float64"](src, tgt)
            paper = model.forward(cfg, P64, src, tgt)      # the paper's stack, by hand
            worst["paper"] = max(worst["paper"], float((ours - paper).abs().max()))
        pads = int((G["src"] == cfg["pad_id"]).sum() + (G["tgt_in"] == cfg["pad_id"]).sum())
        print(f"  batch {i + 1}: B={src.shape[0]}, Ts={src.shape[1]}, Tt={tgt.shape[1]}, {pads} pad tokens; "
              f"max |logits diff|, C vs nn.Transformer: {', '.join(row)}")
    fails = 0
    for kind in ("float64", "float32"):
        ok = worst[kind] <= TOL_LOGITS
        fails += not ok
        print(f"  logits, C vs nn.Transformer ({kind}): max |diff| {worst[kind]:.3e} over {N_BATCHES} batches  "
              f"{'ok' if ok else 'FAIL'} (abs <= {TOL_LOGITS:g})")
    if post:
        print(f"  (without the last_norm_eps line, weights alone: {worst['float64, eps not set']:.3e}; "
              f"torch_export.c says why)")
    note = "; the module's sinusoid table is float32, as the C program's" if meta["positions"] != "learned" else ""
    print(f"  nn.Transformer vs the paper's stack written by hand (model.py), both float64: "
          f"{worst['paper']:.3e}{note}")
    return fails + (not tied)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="where 07_transformer and parity_dump are")
    ap.add_argument("--out", default="build/parity/torch", help="folder for checkpoints, exports, batches")
    args = ap.parse_args()
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    exe, tool = os.path.join(args.build, "07_transformer"), os.path.join(args.build, "parity_dump")
    misses = [check_config(t, f, exe, tool, args.out, 200 + i) for i, (t, f) in enumerate(CONFIGS)]
    bad = sum(1 for n in misses if n)
    print(f"\ntorch_layout: {len(CONFIGS) - bad} of {len(CONFIGS)} configurations within limits "
          f"(PyTorch {torch.__version__})")
    print("torch_layout: OK" if not bad else f"torch_layout: FAILED ({sum(misses)} check(s) missed)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

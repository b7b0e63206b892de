#!/usr/bin/env python3
"""parity.py - check every number of the C model against PyTorch (make parity).

For each configuration below it
  1. builds a model with the C program (07_transformer --save),
  2. makes every weight non-trivial (LayerNorm gains and biases are 1 and 0
     at initialisation, which would hide mistakes) and adds an optimizer state
     (Adam moments, step), writing the checkpoint again from Python,
  3. writes a batch file with padding in the source and the target,
  4. runs parity_dump --load ... --batch-file ... --grad-dump ... --adam-dump ...
     (the training step's gradient pass with dropout off, and its Adam step),
  5. runs the same batch through tools/parity/model.py (PyTorch, float64),
     autograd for the gradients and torch.optim.Adam for the step,
and prints, like llm.c's test_gpt2, one row per tensor: the largest absolute
difference and that difference relative to the tensor's largest value.
Limits: logits 1e-5 absolute, loss 1e-6 relative, every gradient and the
Adam step 1e-4 relative to the tensor's max. Any miss: exit status 1.

    python3 tools/parity/parity.py [--build build] [--out build/parity] [--quiet]
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint as ck          # noqa: E402
import model                     # noqa: E402

# Sec. 5.3: Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9
BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9
EPS_LS = 0.1          # Sec. 5.4 label smoothing
WARMUP = 10           # a short warmup, so the step is large enough to measure
TOL_LOGITS, TOL_LOSS, TOL_REL = 1e-5, 1e-6, 1e-4

# name, 07_transformer flags. Each has a vocabulary, pad id 0 (the default)
CONFIGS = [
    ("post-LN N=1 h=1", "--layers 1 --d-model 16 --d-ff 24 --heads 1 --vocab 13 --max-len 16"),
    ("post-LN N=2 h=4", "--layers 2 --d-model 32 --d-ff 64 --heads 4 --vocab 12 --max-len 16"),
    ("post-LN N=2 h=3 d_k=5 d_v=7", "--layers 2 --d-model 20 --d-ff 40 --heads 3 --d-k 5 --d-v 7 --vocab 17 --max-len 12"),
    ("pre-LN N=1 h=2 d_k=12", "--pre-ln --layers 1 --d-model 16 --d-ff 32 --heads 2 --d-k 12 --d-v 4 --vocab 11 --max-len 16"),
    ("pre-LN N=3 h=4", "--pre-ln --layers 3 --d-model 24 --d-ff 48 --heads 4 --vocab 14 --max-len 16"),
    ("post-LN N=2 h=2 learned PE (E)", "--learned-pe --layers 2 --d-model 16 --d-ff 32 --heads 2 --vocab 10 --max-len 9"),
]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"parity: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def perturb(cfg, P, rng):
    """Non-trivial weights (gains near 1, biases near 0 but not 0) and an
    Adam state with non-zero moments at step 7, so the step tests beta1,
    beta2 and the bias corrections, not only sign(g)."""
    Q = {}
    for name, t in P.items():
        if name.endswith(".gamma"):
            Q[name] = (1 + 0.2 * rng.standard_normal(t.shape)).astype(np.float32)
        elif name.endswith((".beta", ".b1", ".b2")):
            Q[name] = (0.1 * rng.standard_normal(t.shape)).astype(np.float32)
        else:
            Q[name] = t
    n = sum(t.size for t in Q.values())
    ts = {"step": 7, "rng": (1, 2),
          "adam_m": (1e-3 * rng.standard_normal(n)).astype(np.float32),
          "adam_v": (1e-5 * (0.1 + rng.random(n))).astype(np.float32)}
    return Q, ts


def make_batch(cfg, rng, path):
    """3 examples of different lengths: padding in the source and the target;
    ids from 1 (the start symbol) up, never the pad id 0 inside a sequence."""
    V, L = cfg["vocab"], cfg["max_len"]
    lines = []
    for ns, nt in [(min(L, 7), min(L + 1, 6)), (3, 4), (5, 2)]:
        src = rng.integers(1, V, ns)
        tgt = np.concatenate([[1], rng.integers(2, V, nt - 1)])
        lines.append(" ".join(map(str, src)) + " | " + " ".join(map(str, tgt)))
    with open(path, "w") as f:
        f.write("# parity batch: source ids | target ids (start symbol first)\n" + "\n".join(lines) + "\n")


def paper_lr(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


class Table:
    def __init__(self, quiet):
        self.rows, self.fails, self.quiet = [], 0, quiet

    def add(self, name, got, want, kind):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if got.shape != want.shape:
            self.rows.append((name, float("inf"), float("inf"), "FAIL (shape)"))
            self.fails += 1
            return
        diff = float(np.max(np.abs(got - want))) if got.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        rel = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
        ok = {"abs": diff <= TOL_LOGITS, "loss": rel <= TOL_LOSS, "rel": rel <= TOL_REL}[kind]
        lim = {"abs": f"abs <= {TOL_LOGITS:g}", "loss": f"rel <= {TOL_LOSS:g}", "rel": f"rel <= {TOL_REL:g}"}[kind]
        self.rows.append((name, diff, rel, ("ok" if ok else "FAIL") + f" ({lim})"))
        self.fails += not ok

    def print(self, title):
        print(f"\n== {title}")
        print(f"{'tensor':44s} {'max abs diff':>13s} {'max rel diff':>13s}  verdict")
        for name, d, r, v in self.rows:
            if self.quiet and v.startswith("ok") and not name.startswith(("loss", "logits", "adam")):
                continue
            print(f"{name:44s} {d:13.3e} {r:13.3e}  {v}")


def check_config(title, flags, exe, tool, out, seed, quiet):
    rng = np.random.default_rng(seed)
    tag = title.replace(" ", "_").replace("=", "")
    base, ckpt = f"{out}/{tag}.init.ckpt", f"{out}/{tag}.ckpt"
    batch, gdump, adump = f"{out}/{tag}.batch", f"{out}/{tag}.grad.safetensors", f"{out}/{tag}.adam.safetensors"
    run([exe, "--seed", str(seed), "--out", f"{out}/plots", "--no-color", "--save", base] + flags.split())
    cfg, P, _ = ck.read_checkpoint(base)
    P, ts = perturb(cfg, P, rng)
    ck.write_checkpoint(ckpt, cfg, P, ts)
    make_batch(cfg, rng, batch)
    run([tool, "--load", ckpt, "--batch-file", batch, "--grad-dump", gdump, "--adam-dump", adump,
         "--warmup", str(WARMUP), "--label-smoothing", str(EPS_LS), "--no-color"])
    G, gmeta = ck.read_safetensors(gdump)
    A, ameta = ck.read_safetensors(adump)
    try:                          # the dumps load with Hugging Face's own loader too
        from safetensors.numpy import load_file
        for path, ours in ((gdump, G), (adump, A)):
            theirs = load_file(path)
            if sorted(theirs) != sorted(ours) or any(not np.array_equal(theirs[k], ours[k]) for k in ours):
                sys.exit(f"parity: {path}: the safetensors package reads something else than read_safetensors")
    except ImportError:
        pass

    # ---- PyTorch: forward, loss, backward in float64 ----
    W = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in P.items()}
    src = torch.tensor(G["src"], dtype=torch.long)
    tgt_in, tgt_out = torch.tensor(G["tgt_in"], dtype=torch.long), torch.tensor(G["tgt_out"], dtype=torch.long)
    logits = model.forward(cfg, W, src, tgt_in)
    loss = model.smoothed_loss(logits, tgt_out, EPS_LS, cfg["pad_id"])
    loss.backward()

    t = Table(quiet)
    t.add("loss", G["loss"], [loss.item()], "loss")
    t.add("logits", G["logits"], logits.detach().numpy(), "abs")
    for name in ck.tensor_names(cfg):
        t.add("grad " + name, G[name], W[name].grad.numpy(), "rel")

    # ---- one Adam step with torch.optim.Adam, from the same moments ----
    step = ts["step"] + 1
    lr = paper_lr(step, cfg["d_model"], WARMUP)
    t.add("adam lr (Sec. 5.3 schedule)", [float(ameta["lr"])], [lr], "rel")
    opt = torch.optim.Adam(list(W.values()), lr=lr, betas=BETAS, eps=ADAM_EPS)
    off = 0
    for name in ck.tensor_names(cfg):
        p, n = W[name], W[name].numel()
        opt.state[p] = {"step": torch.tensor(float(ts["step"])),
                        "exp_avg": torch.tensor(ts["adam_m"][off:off + n], dtype=torch.float64).view_as(p),
                        "exp_avg_sq": torch.tensor(ts["adam_v"][off:off + n], dtype=torch.float64).view_as(p)}
        off += n
    before = {k: v.detach().clone() for k, v in W.items()}
    opt.step()
    # worst tensor of each kind: the update (new - old weights), m, v
    for kind in ("update", "adam_m", "adam_v"):
        worst = None
        for name in ck.tensor_names(cfg):
            p = W[name]
            if kind == "update":
                got = A[name].astype(np.float64) - P[name].astype(np.float64)
                want = (p.detach() - before[name]).numpy()
            else:
                got = A[f"{kind}.{name}"]
                want = opt.state[p]["exp_avg" if kind == "adam_m" else "exp_avg_sq"].numpy()
            sub = Table(quiet)
            sub.add(name, got, want, "rel")
            if worst is None or sub.rows[0][2] > worst[2] or sub.fails:
                worst = (f"adam {kind}: worst {name}",) + sub.rows[0][1:]
                if sub.fails:
                    break
        t.rows.append(worst)
        t.fails += not worst[3].startswith("ok")
    t.print(f"{title}: B={G['src'].shape[0]}, Ts={G['src'].shape[1]}, Tt={G['tgt_in'].shape[1]}, "
            f"{gmeta['n_tokens']} target tokens, {len(ck.tensor_names(cfg))} tensors, Adam step {step}")
    return t.fails, len(t.rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="where 07_transformer and parity_dump are")
    ap.add_argument("--out", default="build/parity", help="folder for checkpoints, batches, dumps")
    ap.add_argument("--quiet", action="store_true", help="gradient rows only when they fail")
    ap.add_argument("--device", default="cpu", help="cpu only: parity_dump runs the C reference on the CPU")
    args = ap.parse_args()
    if args.device != "cpu":
        sys.exit("parity: --device: the gradient path (--batch-file) runs on the CPU only; "
                 "the CUDA backend has no backward dump to compare yet")
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    exe, tool = os.path.join(args.build, "07_transformer"), os.path.join(args.build, "parity_dump")
    total_fail = total = 0
    for i, (title, flags) in enumerate(CONFIGS):
        f, n = check_config(title, flags, exe, tool, args.out, 100 + i, args.quiet)
        total_fail += f
        total += n
    print(f"\nparity: {total - total_fail} of {total} comparisons within limits over {len(CONFIGS)} configurations"
          f" (PyTorch {torch.__version__}, float64 reference)")
    if total_fail:
        print(f"parity: FAILED: {total_fail} comparison(s) out of limits")
        return 1
    print("parity: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

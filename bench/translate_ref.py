"""translate_ref.py - an independent PyTorch Transformer for make bench-translate.

Trains on exactly the data chapter 11 trained on (its --dump-data folder:
the BPE ids of the train/dev/test split and the training batches as chapter
11 cut them), with the paper's recipe written here from the paper, not from
the C code:

  torch.nn.TransformerEncoderLayer / DecoderLayer, post-LN (norm_first=False,
  Sec. 3.1), ReLU, dropout P_drop on every sub-layer output and on the
  embeddings + positions (Sec. 5.4; PyTorch also drops attention weights and
  the FFN's hidden layer); one embedding matrix for the source, the target
  and the output projection, x sqrt(d_model) on the way in (Sec. 3.4),
  initialised N(0, d_model^-1/2) as the paper's code (tensor2tensor) does;
  every other matrix Xavier-uniform (PyTorch's nn.Transformer does that);
  sinusoidal positions (Sec. 3.5); Adam (0.9, 0.98, 1e-9) with the warmup
  schedule times --factor (Sec. 5.3); label smoothing eps over the V - 2
  non-target, non-padding classes (Sec. 5.4); greedy decoding up to
  input length + 50 tokens (Sec. 6.1's cap).

Prints one JSON line: dev perplexity per subword, test BLEU (sacrebleu if it
imports, with its signature), wall and CPU seconds, target tokens/s, and the
time at which each dev evaluation was taken (time to quality).

Test- and benchmark-only: the chapters never need Python.
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS = 0, 1, 2   # common/text/bpe.h


def read_ids(path):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            s, t = line.rstrip("\n").split("\t")
            pairs.append(([int(x) for x in s.split()], [int(x) for x in t.split()]))
    return pairs


def read_vocab(path):
    sym = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            i, text, eow = line.rstrip("\n").split("\t")
            sym[int(i)] = (text, eow == "1")
    return sym


def detok(ids, sym):
    out = []
    for i in ids:
        if i == EOS:
            break
        if i < 4:
            continue
        text, eow = sym[i]
        out.append(text + (" " if eow else ""))
    return "".join(out).strip()


class Model(nn.Module):
    def __init__(self, V, d, h, d_ff, N, p, qkv_each=False, max_len=1024):
        super().__init__()
        self.d = d
        self.embed = nn.Parameter(torch.empty(V, d))
        self.enc = nn.ModuleList(nn.TransformerEncoderLayer(d, h, d_ff, p, batch_first=True) for _ in range(N))
        self.dec = nn.ModuleList(nn.TransformerDecoderLayer(d, h, d_ff, p, batch_first=True) for _ in range(N))
        self.drop = nn.Dropout(p)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        for name, w in self.named_parameters():
            if w.dim() > 1 and name != "embed":
                nn.init.xavier_uniform_(w)
        nn.init.normal_(self.embed, 0.0, d ** -0.5)
        if qkv_each:   # W_Q, W_K, W_V each Xavier over (d, d): scores start with std 1, not 1/2
            for name, w in self.named_parameters():
                if name.endswith("in_proj_weight"):
                    for k in range(3):
                        nn.init.xavier_uniform_(w.data[k * d:(k + 1) * d])

    def emb(self, x):
        return self.drop(F.embedding(x, self.embed) * math.sqrt(self.d) + self.pe[: x.shape[1]])

    def encode(self, src):
        pad = src == PAD
        x = self.emb(src)
        for layer in self.enc:
            x = layer(x, src_key_padding_mask=pad)
        return x, pad

    def decode(self, mem, src_pad, tin):
        T = tin.shape[1]
        causal = torch.triu(torch.full((T, T), float("-inf")), 1)
        y = self.emb(tin)
        for layer in self.dec:
            y = layer(y, mem, tgt_mask=causal, tgt_key_padding_mask=tin == PAD, memory_key_padding_mask=src_pad)
        return F.log_softmax(y @ self.embed.t(), dim=-1)


def pad_rows(rows, extra_front=None, extra_back=None):
    rows = [([extra_front] if extra_front is not None else []) + r + ([extra_back] if extra_back is not None else [])
            for r in rows]
    T = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (T - len(r)) for r in rows], dtype=torch.long)


def make_batch(pairs, idx):
    src = pad_rows([pairs[i][0] for i in idx], None, EOS)
    tin = pad_rows([pairs[i][1] for i in idx], BOS, None)
    tout = pad_rows([pairs[i][1] for i in idx], None, EOS)
    return src, tin, tout


def smoothed_loss(logp, tout, eps, V):
    mask = tout != PAD
    nll = -logp.gather(-1, tout.unsqueeze(-1)).squeeze(-1)
    # eps spread over the V - 2 classes that are neither the target nor padding
    rest = -(logp.sum(-1) - logp[..., PAD]) - nll
    loss = (1 - eps) * nll + eps / (V - 2) * rest
    return (loss * mask).sum() / mask.sum(), int(mask.sum())


def eval_batches(pairs, budget, max_rows):
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][1]), len(pairs[i][0])))
    batches, cur, Ts, Tt = [], [], 0, 0
    for i in order:
        s, t = len(pairs[i][0]) + 1, len(pairs[i][1]) + 1
        nTs, nTt = max(Ts, s), max(Tt, t)
        if cur and ((len(cur) + 1) * max(nTs, nTt) > budget or len(cur) + 1 > max_rows):
            batches.append(cur)
            cur, nTs, nTt = [], s, t
        cur.append(i)
        Ts, Tt = nTs, nTt
    if cur:
        batches.append(cur)
    return batches


@torch.no_grad()
def perplexity(model, pairs, batches):
    model.eval()
    nll, n = 0.0, 0
    for idx in batches:
        src, tin, tout = make_batch(pairs, idx)
        mem, pad = model.encode(src)
        logp = model.decode(mem, pad, tin)
        mask = tout != PAD
        nll += float(-(logp.gather(-1, tout.unsqueeze(-1)).squeeze(-1) * mask).sum())
        n += int(mask.sum())
    model.train()
    return math.exp(nll / n)


@torch.no_grad()
def greedy(model, pairs, batches, offset=50):
    """Each sentence decoded up to its own input length + offset tokens,
    so its output does not depend on the batch it shares."""
    model.eval()
    out = [None] * len(pairs)
    for idx in batches:
        src = pad_rows([pairs[i][0] for i in idx], None, EOS)
        cap = [len(pairs[i][0]) + 1 + offset for i in idx]
        mem, pad = model.encode(src)
        ys = torch.full((len(idx), 1), BOS, dtype=torch.long)
        done = [False] * len(idx)
        for t in range(max(cap)):
            nxt = model.decode(mem, pad, ys)[:, -1].argmax(-1)
            for r in range(len(idx)):
                if done[r] or t >= cap[r]:
                    done[r] = True
                    nxt[r] = PAD
                elif int(nxt[r]) == EOS:
                    done[r] = True
            ys = torch.cat([ys, nxt.unsqueeze(1)], 1)
            if all(done):
                break
        for r, i in enumerate(idx):
            out[i] = [int(x) for x in ys[r, 1:] if int(x) != PAD]
    model.train()
    return out


def bleu(hyp, refs):
    """sacreBLEU's standard score (tokenize='13a'), or None without sacrebleu"""
    try:
        import sacrebleu
    except ImportError:
        return None
    return sacrebleu.metrics.BLEU().corpus_score(hyp, [refs]).score


def bleu_signature():
    try:
        import sacrebleu
    except ImportError:
        return None
    b = sacrebleu.metrics.BLEU()
    b.corpus_score(["a b c d"], [["a b c d"]])
    return str(b.get_signature())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="chapter 11's --dump-data folder")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--factor", type=float, default=0.6)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--tokens", type=int, default=1000, help="eval batches' token budget")
    ap.add_argument("--max-rows", type=int, default=96)
    ap.add_argument("--eval-every", type=int, default=0,
                    help="every K steps: dev perplexity and test BLEU (greedy), not counted as training time")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: as the environment leaves it)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hyp", help="write the test hypotheses here")
    ap.add_argument("--qkv-xavier-each", action="store_true",
                    help="W_Q, W_K, W_V each Xavier over (d, d), as chapter 11 had it (the gap of issue 32); "
                         "default: Xavier over the packed (3d, d) in_proj_weight, PyTorch's own")
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    random.seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    sym = read_vocab(os.path.join(a.data, "vocab.tsv"))
    V = len(sym)
    train = read_ids(os.path.join(a.data, "train.ids"))
    dev = read_ids(os.path.join(a.data, "dev.ids"))
    test = read_ids(os.path.join(a.data, "test.ids"))
    with open(os.path.join(a.data, "train_batches.txt")) as f:
        tb = [[int(x) for x in line.split()] for line in f if line.strip()]
    with open(os.path.join(a.data, "test.de"), encoding="utf-8") as f:
        refs = [line.rstrip("\n") for line in f]
    dev_b = eval_batches(dev, a.tokens, a.max_rows)
    test_b = eval_batches(test, a.tokens, a.max_rows)

    model = Model(V, a.d_model, a.heads, a.d_ff, a.layers, a.dropout, a.qkv_xavier_each)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    rate = lambda s: a.factor * a.d_model ** -0.5 * min(s ** -0.5, s * a.warmup ** -1.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: rate(i + 1))
    model.train()
    t0, c0 = time.perf_counter(), time.process_time()
    tokens, order, curve, eval_s, eval_cpu = 0, [], [], 0.0, 0.0
    for step in range(a.steps):
        if not order:
            order = list(range(len(tb)))
            random.shuffle(order)
        src, tin, tout = make_batch(train, tb[order.pop()])
        mem, pad = model.encode(src)
        loss, n = smoothed_loss(model.decode(mem, pad, tin), tout, a.label_smoothing, V)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        tokens += n
        if a.eval_every and (step + 1) % a.eval_every == 0 and step + 1 < a.steps:
            e0, ec = time.perf_counter(), time.process_time()
            hyp = [detok(h, sym) for h in greedy(model, test, test_b)]
            curve.append({"step": step + 1, "train_s": e0 - t0 - eval_s, "dev_ppl": perplexity(model, dev, dev_b),
                          "bleu_13a": bleu(hyp, refs)})
            eval_s += time.perf_counter() - e0
            eval_cpu += time.process_time() - ec
    train_wall = time.perf_counter() - t0 - eval_s
    train_cpu = time.process_time() - c0 - eval_cpu
    ppl = perplexity(model, dev, dev_b)
    d0 = time.perf_counter()
    hyp = [detok(h, sym) for h in greedy(model, test, test_b)]
    decode_s = time.perf_counter() - d0
    curve.append({"step": a.steps, "train_s": train_wall, "dev_ppl": ppl, "bleu_13a": bleu(hyp, refs)})
    if a.hyp:
        with open(a.hyp, "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hyp))
    res = {"system": "pytorch", "seed": a.seed, "threads": torch.get_num_threads(), "torch": torch.__version__,
           "steps": a.steps, "dev_ppl": ppl, "train_wall_s": train_wall, "train_cpu_s": train_cpu,
           "tok_per_s": tokens / train_wall, "decode_s": decode_s, "curve": curve,
           "bleu_13a": curve[-1]["bleu_13a"], "signature": bleu_signature()}
    print(json.dumps(res))


if __name__ == "__main__":
    main()

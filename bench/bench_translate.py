"""bench_translate.py - make bench-translate: chapter 11 beside a PyTorch model on real German.

For each seed: chapter 11 trains on the Ding dictionary's sentences
(--corpus ding, its fixed split) and writes the data it trained on
(--dump-data); then bench/translate_ref.py, an independent PyTorch model of
the same size, trains on the same ids and the same batches with the same
steps, schedule, dropout and label smoothing. Both are timed on the same
number of threads, one after the other (never side by side), and both are
scored by sacrebleu (13a) on their greedy test translations.

Prints a table of medians and ranges: dev perplexity per subword, test
BLEU, training wall and CPU time, target tokens/s, and the time each system
took to reach the reference's median final BLEU (from BLEU measured every
--eval-every steps, evaluation time not counted). Writes the raw results to
OUT/results.json.
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

import sacrebleu

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def score(hyp_path, ref_path):
    with open(hyp_path, encoding="utf-8") as f:
        hyp = [line.rstrip("\n") for line in f]
    with open(ref_path, encoding="utf-8") as f:
        ref = [line.rstrip("\n") for line in f]
    return sacrebleu.metrics.BLEU().corpus_score(hyp, [ref]).score


def run_c(a, seed, out, data):
    cmd = [a.chapter, "--corpus", "ding", "--seed", str(seed), "--threads", str(a.threads), "--out", out,
           "--dump-data", data, "--eval-every", str(a.eval_every), "--no-color"] + a.model_flags
    t0, c0 = time.perf_counter(), cpu_children()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall, cpu = time.perf_counter() - t0, cpu_children() - c0
    with open(os.path.join(out, "log.txt"), "w") as f:
        f.write(p.stdout)
    if p.returncode:
        sys.exit("bench-translate: %s failed (exit %d); its output is in %s/log.txt" % (cmd[0], p.returncode, out))
    log = p.stdout
    m = re.search(r"trained (\d+) steps in ([\d.]+) s \(([\d.]+) target tokens/s\)", log)
    train_s, tok_s = float(m.group(2)), float(m.group(3))
    cpu_m = re.search(r"training CPU time ([\d.]+) s", log)
    curve = []
    for m in re.finditer(r"^  eval step (\d+): train ([\d.]+) s, dev ppl ([\d.]+), test BLEU \(greedy, 13a\) "
                         r"([\d.]+)", log, re.M):
        curve.append({"step": int(m.group(1)), "train_s": float(m.group(2)), "dev_ppl": float(m.group(3)),
                      "bleu_c": float(m.group(4)),
                      "bleu_13a": score(os.path.join(out, "test_greedy_step%06d.txt" % int(m.group(1))),
                                        os.path.join(data, "test.de"))})
    last = curve[-1]
    return {"system": "c", "seed": seed, "dev_ppl": last["dev_ppl"], "bleu_13a": last["bleu_13a"],
            "bleu_c": last["bleu_c"], "train_wall_s": train_s,
            "train_cpu_s": float(cpu_m.group(1)) if cpu_m else None, "tok_per_s": tok_s, "run_wall_s": wall,
            "run_cpu_s": cpu, "curve": curve}


def run_ref(a, seed, data):
    cmd = [sys.executable, os.path.join(HERE, "translate_ref.py"), "--data", data, "--seed", str(seed),
           "--eval-every", str(a.eval_every)] + a.ref_flags
    if a.threads_ref:
        cmd += ["--threads", str(a.threads_ref)]
    t0, c0 = time.perf_counter(), cpu_children()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    wall, cpu = time.perf_counter() - t0, cpu_children() - c0
    if p.returncode:
        sys.exit("bench-translate: the PyTorch reference failed (exit %d)" % p.returncode)
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["run_wall_s"], r["run_cpu_s"] = wall, cpu
    return r


def time_to(curve, target):
    """training seconds at the first evaluation whose BLEU reached target"""
    for c in curve:
        if c["bleu_13a"] is not None and c["bleu_13a"] >= target:
            return c["train_s"]
    return None


def med_range(xs, fmt):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chapter", default="build/11_translation")
    ap.add_argument("--out", default="build/bench-translate")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--threads", type=int, default=2, help="threads for each system")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--eval-every", type=int, default=250)
    a = ap.parse_args()
    a.threads_ref = a.threads
    # the size: the same for both systems
    size = {"--vocab": 2000, "--d-model": 64, "--layers": 2, "--heads": 4, "--d-ff": 256, "--dropout": 0.1,
            "--label-smoothing": 0.1, "--warmup": 200, "--factor": 0.6, "--tokens": 1000, "--steps": a.steps}
    a.model_flags = [str(x) for kv in size.items() for x in kv]
    a.ref_flags = [str(x) for k, v in size.items() if k not in ("--vocab",) for x in (k, v)]
    os.makedirs(a.out, exist_ok=True)
    load0 = os.getloadavg()
    print("bench-translate: %s; %d threads each; load average %.2f %.2f %.2f; OPENBLAS_CORETYPE=%s" % (
        " ".join(a.model_flags), a.threads, *load0, os.environ.get("OPENBLAS_CORETYPE", "(unset)")))
    results = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        out, data = os.path.join(a.out, "c_%d" % seed), os.path.join(a.out, "data_%d" % seed)
        c = run_c(a, seed, out, data)
        print("  seed %d  C:       dev ppl %7.2f  BLEU %5.2f  train %6.1f s" % (seed, c["dev_ppl"], c["bleu_13a"],
                                                                           c["train_wall_s"]), flush=True)
        r = run_ref(a, seed, data)
        print("  seed %d  PyTorch: dev ppl %7.2f  BLEU %5.2f  train %6.1f s" % (seed, r["dev_ppl"], r["bleu_13a"],
                                                                           r["train_wall_s"]), flush=True)
        results += [c, r]
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"load_before": load0, "load_after": os.getloadavg(), "results": results}, f, indent=1)

    sysname = {"c": "attention-in-c", "pytorch": "PyTorch %s" % next(
        (r.get("torch") for r in results if r["system"] == "pytorch"), "")}
    ref_bleu = statistics.median(r["bleu_13a"] for r in results if r["system"] == "pytorch")
    print("\n%d seeds each; median (range); the same data, batches, size, steps, schedule, dropout, label smoothing"
          % len(a.seeds.split(",")))
    print("%-22s %-22s %-22s %-22s %-22s %-22s %-24s" % ("system", "dev PPL", "test BLEU (13a)", "train wall s",
                                                        "train CPU s", "target tok/s",
                                                        "s to BLEU %.2f" % ref_bleu))
    for s in ("c", "pytorch"):
        rs = [r for r in results if r["system"] == s]
        tt = [time_to(r["curve"], ref_bleu) for r in rs]
        print("%-22s %-22s %-22s %-22s %-22s %-22s %-24s" % (
            sysname[s], med_range([r["dev_ppl"] for r in rs], "%.2f"), med_range([r["bleu_13a"] for r in rs], "%.2f"),
            med_range([r["train_wall_s"] for r in rs], "%.1f"), med_range([r["train_cpu_s"] for r in rs], "%.1f"),
            med_range([r["tok_per_s"] for r in rs], "%.0f"),
            med_range(tt, "%.1f") + ("" if None not in tt else " (%d not reached)" % tt.count(None))))
    med = lambda s, k: statistics.median(r[k] for r in results if r["system"] == s)
    ppl_ratio = med("c", "dev_ppl") / med("pytorch", "dev_ppl")
    bleu_diff = med("c", "bleu_13a") - med("pytorch", "bleu_13a")
    tc = [time_to(r["curve"], ref_bleu) for r in results if r["system"] == "c"]
    tr = [time_to(r["curve"], ref_bleu) for r in results if r["system"] == "pytorch"]
    tc_med = statistics.median(x if x is not None else float("inf") for x in tc)
    tr_med = statistics.median(x if x is not None else float("inf") for x in tr)
    print("\ndev PPL, C / PyTorch (medians): %.3f (goal <= 1.05): %s" % (ppl_ratio, "met" if ppl_ratio <= 1.05 else
                                                                            "MISSED"))
    print("test BLEU, C - PyTorch (medians): %+.2f (goal >= -0.5): %s" % (bleu_diff, "met" if bleu_diff >= -0.5 else
                                                                          "MISSED"))
    if tc_med == float("inf"):
        print("time to the reference's median BLEU: the C model did not reach it in most seeds (goal: "
              "<= 0.5x PyTorch's time): MISSED")
    else:
        ratio = tc_med / tr_med if tr_med not in (0, float("inf")) else 0.0
        print("time to the reference's median BLEU, C / PyTorch (medians): %.2f (goal <= 0.5): %s" % (
            ratio, "met" if ratio <= 0.5 else "MISSED"))
    print("BLEU signature: %s" % next((r.get("signature") for r in results if r.get("signature")), "n/a"))
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()

"""Time and peak RSS of attention under each training-free RoPE extension, as a ratio to plain RoPE attention
(rotate q and k, then causal SDPA), plus sinks+window streaming tokens/s through a rolling KV cache.

Peak RSS: each (method, length) runs once in a fresh subprocess, so that its peak is its own.  Time: one more
subprocess per length runs every method in turn, round after round, and keeps each method's fastest and median
round, so that a slow spell of a shared machine hits all methods alike.  Prints a table and one JSON line.

    python bench/extension.py [--lengths 4096,16384,32768] [--rounds 3] [--heads 4] [--head-dim 64] [--threads 1]
    python bench/extension.py --million [--length 1048576] [--extend sinks] [--runs runs/bench] [--threads 1]

``--million``: a cpu-preset rope run (trained ``--train-steps`` steps into --runs when missing; speed does not
depend on training) scores the first L held-out tokens as ONE sequence with ``--extend``, a bounded method that
streams through its rolling cache of sinks + window: tokens/s, wall seconds, peak RSS of that process, PPL.
``--threads``: torch threads in every child (on a shared 2-core machine two threads mostly wait on each other).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

METHODS = ["plain", "sinks", "lm-infinite", "self-extend", "dca", "rerope", "leaky-rerope", "string"]


def _call(method: str, L: int, H: int, D: int, L_tr: int):
    """One attention call at length L for ``method`` (a closure over q, k, v)."""
    import torch

    from extrap import positional
    from extrap.extend import extended_attention, parse, plain_rotate

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, H, L, D) for _ in range(3))
    scheme, pos = positional.get("rope"), torch.arange(L)
    if method == "plain":

        def fn():
            qr, kr = scheme.rotate(q, k, pos)
            return torch.nn.functional.scaled_dot_product_attention(qr, kr, v, is_causal=True)

        return fn
    m, rot = parse(method, L_tr), plain_rotate(scheme, L)
    return lambda: extended_attention(m, rot, q, k, v, pos, pos, D**-0.5)


def rss(method: str, L: int, H: int, D: int, L_tr: int) -> dict:
    import torch

    fn = _call(method, L, H, D, L_tr)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.no_grad():
        fn()
    return {"peak_rss_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024}  # KiB on Linux


def times(methods: list[str], L: int, H: int, D: int, L_tr: int, rounds: int) -> dict:
    import torch

    fns = {m: _call(m, L, H, D, L_tr) for m in methods}
    _call("rerope", 512, H, D, L_tr)()  # warm-up: threads and allocator, untimed
    got: dict[str, list[float]] = {m: [] for m in methods}
    with torch.no_grad():
        for _ in range(rounds):
            for m, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                got[m].append(time.perf_counter() - t0)
    return {m: {"min_s": min(t), "median_s": statistics.median(t)} for m, t in got.items()}


def stream(L: int, L_tr: int) -> dict:
    """Tokens/s of a 2-layer rope GPT (d = 256) streamed through the sinks cache in chunks of 256."""
    import torch

    from extrap.evaluate.streaming import stream_nll
    from extrap.extend import extend_model, parse
    from extrap.model.gpt import GPT, ModelConfig

    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=256, n_layer=2, d_model=256, n_head=4, pe="rope")).eval()
    extend_model(model, parse("sinks", L_tr))
    x = torch.randint(0, 256, (1, L))
    t0 = time.perf_counter()
    stream_nll(model, x, x, model.extension.window, chunk=256)
    s = time.perf_counter() - t0
    return {"seconds": s, "tokens_per_s": L / s}


def million(run_dir: str, length: int, spec: str) -> dict:
    """Stream ``length`` held-out tokens of the run at ``run_dir`` under the bounded method ``spec``; JSON-ready."""
    import extrap
    from extrap.evaluate.score import score_tokens
    from extrap.extend import extend_run
    from extrap.run import eval_stream

    run = extrap.load(run_dir)
    m = extend_run(run, spec)
    ids = eval_stream(run, "heldout", length + 1)[: length + 1]
    res = score_tokens(run.model, ids, m.bounded)
    return {"pe": run.pe, "window": m.bounded, "sinks": m.sinks_kept, "tokens": res.tokens,
            "seconds": round(res.seconds, 1), "tokens_per_s": round(res.tokens / res.seconds),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
            "ppl": round(res.ppl, 4)}  # fmt: skip


def ensure_run(runs: str, steps: int) -> str:
    """A cpu-preset rope run under ``runs`` (trained for ``steps`` steps when missing)."""
    d = Path(runs) / f"rope_steps{steps}"
    if not (d / "final.json").is_file():
        print(f"training rope (cpu preset, {steps} steps) -> {d}", flush=True)
        cmd = [sys.executable, "-m", "extrap.cli", "train", "--pe", "rope", "--preset", "cpu", "--steps", str(steps)]
        subprocess.run([*cmd, "--out", str(d)], check=True, capture_output=True)
    return str(d)


def _million_main(a) -> None:
    run_dir = ensure_run(a.runs, a.train_steps)
    row = _child(["million", str(a.length), "--run", run_dir, "--extend", a.extend, "--threads", str(a.threads)])
    row.update(threads=a.threads, cpus=os.cpu_count(), load_avg_1min_at_end=round(os.getloadavg()[0], 2))
    row.update(under_10_min=row["seconds"] < 600, under_2_gb=row["peak_rss_gb"] < 2)
    print(f"{row['pe']}  {row['tokens']:,} tokens  {row['seconds']:.1f} s  {row['tokens_per_s']:,} tokens/s  "
          f"peak RSS {row['peak_rss_gb']:.2f} GB  ppl {row['ppl']:.4f}  ({a.threads} thread(s), "
          f"load {row['load_avg_1min_at_end']})", flush=True)  # fmt: skip
    print(json.dumps({"extension_million": row}))


def _child(argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *argv], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run_child(a) -> None:
    import torch

    torch.set_num_threads(a.threads)
    kind, L, shape = a.child[0], int(a.child[1]), (a.heads, a.head_dim, a.train_length)
    if kind == "million":
        rec = million(a.run, L, a.extend)
    elif kind == "stream":
        rec = stream(L, a.train_length)
    elif kind == "time":
        rec = times(a.methods.split(","), L, *shape, a.rounds)
    else:
        rec = rss(kind, L, *shape)
    print(json.dumps(rec))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="4096,16384,32768")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--train-length", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--million", action="store_true", help="stream --length tokens of a cpu-preset rope run")
    ap.add_argument("--length", type=int, default=2**20)
    ap.add_argument("--extend", default="sinks")
    ap.add_argument("--runs", default="runs/bench")
    ap.add_argument("--train-steps", type=int, default=2)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs="*")
    a = ap.parse_args()
    if a.child is not None:
        return _run_child(a)
    if a.million:
        return _million_main(a)
    common = ["--threads", str(a.threads), "--heads", str(a.heads), "--head-dim", str(a.head_dim),
              "--train-length", str(a.train_length), "--rounds", str(a.rounds), "--methods", a.methods]  # fmt: skip
    rows = []
    for L in map(int, a.lengths.split(",")):
        t = _child(["time", str(L), *common])
        mem = {m: _child([m, str(L), *common])["peak_rss_mib"] for m in a.methods.split(",")}
        for m in a.methods.split(","):
            r = {"method": m, "length": L, **t[m], "peak_rss_mib": mem[m]}
            r["time_ratio"] = r["min_s"] / t["plain"]["min_s"]
            r["rss_ratio"] = mem[m] / max(mem["plain"], 1e-9)
            rows.append(r)
            print(f"{L:>6} {m:<13} min {r['min_s']:8.3f} s (median {r['median_s']:.3f})  x{r['time_ratio']:6.2f}  "
                  f"peak +{mem[m]:7.1f} MiB  x{r['rss_ratio']:5.2f}", flush=True)  # fmt: skip
        s = _child(["stream", str(L), *common])
        rows.append({"method": "sinks/stream", "length": L, **s})
        print(f"{L:>6} sinks/stream  {s['seconds']:8.3f} s  {s['tokens_per_s']:,.0f} tokens/s", flush=True)
    print(json.dumps({"extension_bench": rows}))


if __name__ == "__main__":
    main()

"""Time and peak RSS of attention under each training-free RoPE extension, as a ratio to plain RoPE attention
(rotate q and k, then causal SDPA), plus sinks+window streaming tokens/s through a rolling KV cache.

Peak RSS: each (method, length) runs once in a fresh subprocess, so that its peak is its own.  Time: one more
subprocess per length runs every method in turn, round after round, and keeps each method's fastest and median
round, so that a slow spell of a shared machine hits all methods alike.  Prints a table and one JSON line.

    python bench/extension.py [--lengths 4096,16384,32768] [--rounds 3] [--heads 4] [--head-dim 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

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


def _child(argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *argv], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run_child(a) -> None:
    kind, L, shape = a.child[0], int(a.child[1]), (a.heads, a.head_dim, a.train_length)
    if kind == "stream":
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
    ap.add_argument("--child", nargs="*")
    a = ap.parse_args()
    if a.child is not None:
        return _run_child(a)
    common = ["--heads", str(a.heads), "--head-dim", str(a.head_dim), "--train-length", str(a.train_length),
              "--rounds", str(a.rounds), "--methods", a.methods]  # fmt: skip
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

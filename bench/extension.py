"""Time and peak RSS of attention under each training-free RoPE extension, as a ratio to plain RoPE attention
(rotate q and k, then causal SDPA), plus sinks+window streaming tokens/s through a rolling KV cache.

Each (method, length) runs in a fresh subprocess so that its peak RSS is its own; the time is the median of
``--repeats`` calls.  Prints a table and ends with one JSON line.

    python bench/extension.py [--lengths 4096,16384,32768] [--heads 4] [--head-dim 64] [--train-length 4096]
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


def one(method: str, L: int, H: int, D: int, L_tr: int, repeats: int) -> dict:
    """Median seconds and peak RSS growth of one attention call at length L, alone in this process."""
    import torch

    from extrap import positional
    from extrap.extend import extended_attention, parse, plain_rotate

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, H, L, D) for _ in range(3))
    scheme, pos = positional.get("rope"), torch.arange(L)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if method == "plain":

        def fn():
            qr, kr = scheme.rotate(q, k, pos)
            return torch.nn.functional.scaled_dot_product_attention(qr, kr, v, is_causal=True)
    else:
        m, rot = parse(method, L_tr), plain_rotate(scheme, L)

        def fn():
            return extended_attention(m, rot, q, k, v, pos, pos, D**-0.5)

    times = []
    with torch.no_grad():
        small = q[:, :, :512], k[:, :, :512], v[:, :, :512]
        extended_attention(parse("rerope", L_tr), plain_rotate(scheme, 512), *small, pos[:512], pos[:512], D**-0.5)
        scheme.rotate(small[0], small[1], pos[:512])  # warm-up: threads and allocator, untimed
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024  # MiB (ru_maxrss: KiB on Linux)
    return {"method": method, "length": L, "seconds": statistics.median(times), "peak_rss_mib": rss}


def stream(L: int, L_tr: int) -> dict:
    """Tokens/s of a 2-layer rope GPT streamed through the sinks cache (chunks of 256)."""
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
    return {"method": "sinks/stream", "length": L, "seconds": s, "tokens_per_s": L / s}


def _child(argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *argv], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="4096,16384,32768")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--train-length", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--child", nargs="*")
    a = ap.parse_args()
    if a.child is not None:
        kind, L = a.child[0], int(a.child[1])
        rec = (
            stream(L, a.train_length)
            if kind == "stream"
            else one(kind, L, a.heads, a.head_dim, a.train_length, a.repeats)
        )
        print(json.dumps(rec))
        return
    common = ["--heads", str(a.heads), "--head-dim", str(a.head_dim), "--train-length", str(a.train_length),
              "--repeats", str(a.repeats)]  # fmt: skip
    rows = []
    for L in map(int, a.lengths.split(",")):
        recs = {m: _child([m, str(L), *common]) for m in a.methods.split(",")}
        plain = recs["plain"]
        for m, r in recs.items():
            r["time_ratio"] = r["seconds"] / plain["seconds"]
            r["rss_ratio"] = r["peak_rss_mib"] / max(plain["peak_rss_mib"], 1e-9)
            rows.append(r)
            print(f"{L:>6} {m:<13} {r['seconds']:8.3f} s  x{r['time_ratio']:6.2f}  "
                  f"peak +{r['peak_rss_mib']:7.1f} MiB  x{r['rss_ratio']:5.2f}", flush=True)  # fmt: skip
        s = _child(["stream", str(L), *common])
        rows.append(s)
        print(f"{L:>6} sinks/stream  {s['seconds']:8.3f} s  {s['tokens_per_s']:,.0f} tokens/s", flush=True)
    print(json.dumps({"extension_bench": rows}))


if __name__ == "__main__":
    main()

"""Forward time and peak memory of RPE-biased attention against causal SDPA with no bias.

Each (scheme, length) runs once in a fresh subprocess so that its peak RSS is its own.  Times come
from one more subprocess per length that runs every scheme in turn, round after round, and keeps
each scheme's median: a slow spell of the machine then hits all schemes alike.
Prints a table of ratios measured in this run and ends with one JSON line.

    python bench/attention.py [--lengths 1024,4096,8192,16384,32768] [--heads 8] [--head-dim 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

SCHEMES = ["sdpa", "alibi", "type1", "kerple-log", "t5", "alibi/flex"]


def _setup(pe: str, L: int, H: int):
    """The attention call for one scheme at length L (a closure over its context)."""
    import torch

    from extrap import positional
    from extrap.model.attention import BiasContext, attend, toeplitz_table

    pos = torch.arange(L)
    if pe == "sdpa":
        ctx = BiasContext(scheme=None, values={}, positions=pos)
    else:
        s = positional.get(pe.split("/")[0])
        vals = {n: x.float() for n, x in s.init_values(H).items()}
        ctx = BiasContext(
            scheme=s,
            values=vals,
            positions=pos,
            contiguous=True,
            table=toeplitz_table(s, vals, L - 1, torch.float32, "cpu"),
        )
    backend = "flex" if pe.endswith("/flex") else "blocked"
    return lambda q, k, v, block: attend(q, k, v, ctx, block=block, backend=backend)


def _qkv(L: int, H: int, D: int):
    import torch

    torch.manual_seed(0)
    return tuple(torch.randn(1, H, L, D) for _ in range(3))


def one(pe: str, L: int, H: int, D: int, block: int) -> dict:
    """Peak memory (and one time) of one scheme alone in this process."""
    import torch

    q, k, v = _qkv(L, H, D)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn = _setup(pe, L, H)
    with torch.no_grad():
        if pe.endswith("/flex"):
            fn(q, k, v, block)  # the first call compiles
        t0 = time.perf_counter()
        fn(q, k, v, block)
        seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "pe": pe,
        "length": L,
        "seconds": seconds,
        "peak_rss_mb": peak / 1024,
        "extra_rss_mb": (peak - base_rss) / 1024,
    }


def interleaved(pes: list[str], L: int, H: int, D: int, rounds: int, block: int) -> dict:
    """Median time of each scheme over ``rounds`` rounds that run every scheme once, in turn."""
    import torch

    q, k, v = _qkv(L, H, D)
    fns = {pe: _setup(pe, L, H) for pe in pes}
    times: dict[str, list[float]] = {pe: [] for pe in pes}
    with torch.no_grad():
        for fn in fns.values():
            fn(q, k, v, block)  # warm-up (and FlexAttention's compile)
        for _ in range(rounds):
            for pe, fn in fns.items():
                t0 = time.perf_counter()
                fn(q, k, v, block)
                times[pe].append(time.perf_counter() - t0)
    return {pe: sorted(ts)[len(ts) // 2] for pe, ts in times.items()}


def _sub(args: list[str]) -> tuple[dict | None, str]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if out.returncode != 0:
        return None, (out.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(out.stdout), ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="1024,4096,8192,16384,32768")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds per length (fewer beyond 8k)")
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--one", nargs=2, metavar=("PE", "L"))
    ap.add_argument("--timing", metavar="L")
    a = ap.parse_args()
    shape = ["--heads", str(a.heads), "--head-dim", str(a.head_dim), "--block", str(a.block)]
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]), a.heads, a.head_dim, a.block)))
        return
    if a.timing:
        print(json.dumps(interleaved(SCHEMES, int(a.timing), a.heads, a.head_dim, a.rounds, a.block)))
        return
    rows, ratios = [], {}
    for L in [int(x) for x in a.lengths.split(",")]:
        for pe in SCHEMES:
            r, err = _sub(["--one", pe, str(L), *shape])
            rows.append(r if r else {"pe": pe, "length": L, "error": err})
            print(f"L={L:>6} {pe:<11} " + (f"peak RSS {r['peak_rss_mb']:8.0f} MB" if r else err), flush=True)
        rounds = a.rounds if L <= 8192 else max(1, a.rounds // 3)
        med, err = _sub(["--timing", str(L), "--rounds", str(rounds), *shape])
        if med is None:
            print(f"L={L:>6} timing failed: {err}")
            continue
        base_rss = next(
            (r["peak_rss_mb"] for r in rows if r["length"] == L and r["pe"] == "sdpa" and "error" not in r), None
        )
        for r in rows:
            if r["length"] == L and "error" not in r:
                r["median_seconds"] = med[r["pe"]]
        for pe in SCHEMES[1:]:
            ratios[f"{pe}@{L}"] = round(med[pe] / med["sdpa"], 3)
            extra = next(
                (
                    r["peak_rss_mb"] - base_rss
                    for r in rows
                    if r["length"] == L and r["pe"] == pe and "error" not in r and base_rss is not None
                ),
                float("nan"),
            )
            print(
                f"L={L:>6} {pe:<11} time x{med[pe] / med['sdpa']:.2f}  (median of {rounds})  "
                f"extra peak RSS {extra:+.0f} MB",
                flush=True,
            )
    dense_gb = a.heads * 8192 * 8192 * 4 / 2**30
    print(f"ratio to causal SDPA; a dense fp32 bias (1,{a.heads},8192,8192) alone would be {dense_gb:.1f} GiB")
    print(
        json.dumps(
            {
                "bench": "attention",
                "heads": a.heads,
                "head_dim": a.head_dim,
                "block": a.block,
                "time_ratio_vs_sdpa": ratios,
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()

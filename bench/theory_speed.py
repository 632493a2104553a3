"""Time the theory engine on every built-in bias RPE: 8 heads, eps = 1e-12, cold caches; then the RoPE analysis.

    python bench/theory_speed.py [--heads 8] [--eps 1e-12] [--rounds 5] [--no-rope] [--cli 3]

What is timed: :func:`extrap.theory.analyse` of each built-in bias RPE (every registered
``BiasRPE``, default parameter values, all heads, the default dilution lengths), one call per scheme,
with torch on one thread.  Imports (Python, torch, sympy, extrap) are excluded and reported separately;
after them the process is set up as the ``extrap`` command sets up its own (:mod:`extrap.process`: the
imported objects frozen out of the collector's scans, freed heap memory kept for reuse).
Each round starts cold: the engine's caches and sympy's own cache are cleared first, so a round costs
what the first ``extrap theory`` call of a fresh process costs (minus the imports).  Several rounds;
per scheme and in total the minimum and median of process CPU time (``time.process_time``) and the
minimum wall time.  On a shared machine quote the CPU minimum.  The target is a total under 0.1 s
of CPU time (``under_0_1s_cpu``, from the minimum).

CLI line (``cli_cpu_s``): ``extrap theory all --json`` run by the console script's entry in ``--cli`` fresh
processes, each timed after its imports: every registered scheme (RoPE's and the not-applicable ones too),
the report and its JSON, and everything a first call pays that later rounds do not (first use of each
code path, fresh memory).  It is what a user waits for beyond the imports.

RoPE lines: :func:`extrap.theory.rope.analyse_rope` of published configurations (head dim 128) at
L' = 2^20, each under 1 s (``rope_under_1s``): per-pair angles, Liu et al.'s bounds, Men et al.'s first
negative B(m) searched to 2^24 (their least base is only searched up to L' = 2^17); and one at
L' = 2^17 with the least base, which checks every m < L' for each grid base (``rope_min_base_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

TARGET_S = 0.1  # seconds of CPU time: the theory at interactive speed
ROPE_TARGET_S = 1.0  # one RoPE configuration at L' = 2^20
ROPE_CONFIGS = {  # (spec, training length): Llama-2-7B, Llama-3.1-8B, Qwen2.5-7B with YaRN x4, and the variants
    "llama2": ("rope", 4096),
    "llama3.1": ("rope:base=500000,scaling=llama3,factor=8,original_max_position=8192", 8192),
    "qwen2.5-yarn": ("rope:base=1000000,scaling=yarn,factor=4,original_max_position=32768", 32768),
    "p-rope 0.75": ("rope:p=0.75", 4096),
    "partial 0.25": ("rope:partial=0.25", 2048),
    "resonance": ("rope:resonance=1", 4096),
    "xpos": ("xpos", 4096),
    "longrope x32": (  # Phi-3-mini-128k's shape (original 4096, factor 32) with smooth factors for 64 pairs
        "rope:scaling=longrope,factor=32,original_max_position=4096,"
        + "short_factor="
        + "/".join(f"{1 + 0.05 * i:.2f}" for i in range(64))
        + ",long_factor="
        + "/".join(f"{1 + 0.5 * i:.1f}" for i in range(64)),
        4096,
    ),
}


def rope_lines() -> dict:
    """Seconds (wall) of the RoPE analysis of each configuration at L' = 2^20, and of Llama-2 at 2^17."""
    from extrap.theory.rope import analyse_rope

    out = {}
    for name, (spec, train) in ROPE_CONFIGS.items():
        t = time.perf_counter()
        r = analyse_rope(spec, 128, train, 2**20)
        out[name] = (time.perf_counter() - t, r)
    t = time.perf_counter()
    r = analyse_rope("rope", 128, 4096, 2**17)
    out["llama2@2^17 min base"] = (time.perf_counter() - t, r)
    return out


def _round(names: list[str], heads: int, eps: float) -> tuple[dict, dict, dict]:
    """One cold round: CPU and wall seconds per scheme, and each scheme's verdicts."""
    import sympy.core.cache

    from extrap.theory import analyse, clear_cache

    clear_cache()
    sympy.core.cache.clear_cache()
    cpu, wall, verdicts = {}, {}, {}
    for name in names:
        c, w = time.process_time(), time.perf_counter()
        res = analyse(name, heads, eps=(eps,))
        cpu[name], wall[name] = time.process_time() - c, time.perf_counter() - w
        verdicts[name] = sorted({r.verdict for r in res})
    return cpu, wall, verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--eps", type=float, default=1e-12)
    ap.add_argument("--rounds", type=int, default=5, help="cold rounds; minimum and median are reported")
    ap.add_argument("--no-rope", action="store_true", help="skip the RoPE lines (several seconds)")
    ap.add_argument("--cli", type=int, default=3, help="fresh processes timing the command itself (0: none)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    import torch

    from extrap import positional, process
    from extrap.positional.base import BiasRPE
    from extrap.theory import analyse  # noqa: F401  the engine's imports (sympy, mpmath) count as imports

    import_s = time.perf_counter() - t0
    process.own()  # the process is set up as the extrap command sets up its own after its imports
    process.imports_done()
    torch.set_num_threads(1)  # single-threaded, as the engine's partial sums run anyway
    names = [n for n, cls in positional.REGISTRY.items() if issubclass(cls, BiasRPE)]
    rounds = [_round(names, args.heads, args.eps) for _ in range(max(1, args.rounds))]
    per_cpu = {n: [r[0][n] for r in rounds] for n in names}
    totals = [sum(r[0].values()) for r in rounds]
    wall_min = min(sum(r[1].values()) for r in rounds)
    cpu, cpu_median = min(totals), statistics.median(totals)
    verdicts = rounds[0][2]

    print(f"theory engine: {len(names)} built-in bias RPEs, {args.heads} heads, eps={args.eps:g}, {len(rounds)} rounds")
    print(f"  {'scheme':16s} {'min ms':>8s} {'median ms':>10s}   verdicts")
    for name in names:
        lo, med = min(per_cpu[name]), statistics.median(per_cpu[name])
        print(f"  {name:16s} {lo * 1000:8.1f} {med * 1000:10.1f}   {'/'.join(verdicts[name])}")
    print(
        f"total CPU {cpu:.3f} s min, {cpu_median:.3f} s median; wall {wall_min:.3f} s min "
        f"(imports {import_s:.2f} s, not counted)"
    )
    print("CPU per round (the first is the fresh process's): " + ", ".join(f"{x:.3f}" for x in totals))
    result = {
        "bench": "theory_speed",
        "schemes": len(names),
        "heads": args.heads,
        "eps": args.eps,
        "rounds": len(rounds),
        "cpu_s": round(cpu, 4),
        "cpu_median_s": round(cpu_median, 4),
        "cpu_first_round_s": round(totals[0], 4),
        "wall_s": round(wall_min, 4),
        "import_s": round(import_s, 3),
        "per_scheme_cpu_min_s": {n: round(min(v), 4) for n, v in per_cpu.items()},
        "per_scheme_cpu_median_s": {n: round(statistics.median(v), 4) for n, v in per_cpu.items()},
        "under_0_1s_cpu": cpu < TARGET_S,
        "cpus": os.cpu_count(),
        "load_avg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
    if args.cli > 0:
        result.update(_cli_report(args.cli, args.heads, args.eps))
    if not args.no_rope:
        result.update(_rope_report())
    print(json.dumps(result))


# One fresh process: its imports first (the command modules, the engine), then the command alone, timed.
CLI_SCRIPT = """
import contextlib, io, sys, time
from extrap import cli
cli.build_parser()
import extrap.theory
c = time.process_time()
with contextlib.redirect_stdout(io.StringIO()):
    code = cli.entry(["theory", "all", "--heads", sys.argv[1], "--eps", sys.argv[2], "--json"])
print(code, time.process_time() - c)
"""


def _cli_report(processes: int, heads: int, eps: float) -> dict:
    """CPU seconds of ``extrap theory all --json`` in fresh processes, imports excluded: what a user waits for
    beyond the imports (every scheme, not only the bias RPEs; tables and JSON; the first call's costs)."""
    seconds = []
    for _ in range(processes):
        out = subprocess.run(
            [sys.executable, "-c", CLI_SCRIPT, str(heads), repr(eps)], capture_output=True, text=True, check=True
        ).stdout.split()
        if out[0] != "0":
            raise SystemExit(f"extrap theory all failed with exit {out[0]}")
        seconds.append(float(out[1]))
    print(
        f"extrap theory all --json, {processes} fresh processes, imports excluded: CPU "
        + ", ".join(f"{x:.3f}" for x in seconds)
        + " s"
    )
    return {"cli_cpu_s": [round(x, 4) for x in seconds], "cli_cpu_median_s": round(statistics.median(seconds), 4)}


def _rope_report() -> dict:
    rope = rope_lines()
    print("RoPE analysis (head dim 128):")
    for name, (sec, r) in rope.items():
        print(
            f"  {name:22s} L'={r.length:<8d} {sec * 1000:8.1f} ms   in-distribution {r.in_distribution_length}, "
            f"first B(m) < 0 at {r.men.aggregation_first_negative}, least base {r.men.min_base_for_length}"
        )
    at_2_20 = [sec for name, (sec, _) in rope.items() if "min base" not in name]
    return {
        "rope_s": {k: round(sec, 4) for k, (sec, _) in rope.items()},
        "rope_under_1s": max(at_2_20) < ROPE_TARGET_S,
        "rope_min_base_s": round(rope["llama2@2^17 min base"][0], 4),
    }


if __name__ == "__main__":
    main()

"""A million tokens on CPU: streaming windowed evaluation of cpu-preset models of the convergent bias RPEs.

For each PE it trains a cpu-preset run (or reuses one in --runs), chooses W = TRF(eps) of the trained bias
(``--window auto``; eps = 1e-6 unless --eps) and scores the first L tokens of the stdlib's held-out stream
(validation then test) as ONE sequence, streamed through a rolling KV cache.  A model whose W exceeds
--max-window (the work is O(L·W)) is reported and not run.  Each model runs in its own subprocess so that its
peak RSS is its own.  Printed per model: seconds, tokens/s, peak RSS, W, PPL, the relative PPL difference
against exact attention at 32k, where the time goes (attention against MLP), and the cost per token in each
doubling of the position from 32k to L (flat: memory and work do not grow with L).  Ends with one JSON line.

    python bench/million.py [--pes alibi,kerple-log,type1,type2,window:512] [--length 1048576]
                            [--runs runs/bench] [--eps 1e-6] [--max-window 65536]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_PES = "alibi,kerple-log,type1,type2,window:512"


class Timer:
    """Forward hooks that add up the wall time of every attention and every MLP module."""

    def __init__(self, model):
        self.seconds = {"attention": 0.0, "mlp": 0.0}
        self._t0 = {}
        for blk in model.blocks:
            self._watch(blk.attn, "attention")
            self._watch(blk.mlp, "mlp")

    def _watch(self, module, part: str) -> None:
        module.register_forward_pre_hook(lambda m, a: self._t0.__setitem__(id(m), time.perf_counter()))
        module.register_forward_hook(lambda m, a, o: self._add(part, time.perf_counter() - self._t0[id(m)]))

    def _add(self, part: str, dt: float) -> None:
        self.seconds[part] += dt


class Doublings:
    """Seconds per token within each doubling of the position: [32k, 64k), [64k, 128k), ..., up to L."""

    def __init__(self, first: int = 2**15):
        self.done, self.next, self.t0, self.marks = 0, first, time.perf_counter(), []

    def __call__(self, n: int) -> None:  # told of every streamed chunk
        self.done += n
        while self.done >= self.next:
            self.marks.append((self.next, time.perf_counter() - self.t0))
            self.next *= 2

    def per_token_us(self) -> dict[str, float]:
        pairs = zip(self.marks, self.marks[1:])
        return {f"{a // 1024}k-{b // 1024}k": round(1e6 * (tb - ta) / (b - a), 2) for (a, ta), (b, tb) in pairs}


def one(run_dir: str, length: int, threads: int, eps: float, max_window: int) -> dict:
    """Score ``length`` tokens with the auto window, in this process; JSON-ready."""
    import torch

    import extrap
    from extrap.evaluate import resolve_window
    from extrap.evaluate.score import score_tokens
    from extrap.evaluate.window_error import window_error
    from extrap.run import eval_stream

    torch.set_num_threads(threads)
    run = extrap.load(run_dir)
    window_for, info = resolve_window(run, "auto", eps)
    W = window_for(length) if window_for else None
    if W is None:
        why = info.reason if info.size is None else f"W = {info.size:,} >= L: the window cuts nothing"
        return {"pe": run.pe, "eps": eps, "window": info.size, "error": f"no window to stream with ({why})"}
    if W > max_window:  # the work is O(L·W): say so instead of running for hours
        why = f"W = {W:,} keys per query: O(L·W) work, {W / 3537:.0f}x the attention of ALiBi's W = 3537"
        return {"pe": run.pe, "eps": eps, "window": W, "error": f"window over --max-window {max_window:,} ({why})"}
    stream = eval_stream(run, "heldout", length + 1)
    timer, marks = Timer(run.model), Doublings()
    res = score_tokens(run.model, stream[: length + 1], W, progress=marks)
    rss_stream = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    parts = dict(timer.seconds)  # the streaming pass only: the exact pass below runs the same hooks
    err = window_error(run.model, stream, W, 32768, info)
    return {
        "pe": run.pe,
        "eps": eps,
        "window": W,
        "tokens": res.tokens,
        "seconds": round(res.seconds, 1),
        "tokens_per_s": round(res.tokens / res.seconds),
        "peak_rss_gb_streaming": round(rss_stream, 3),
        "peak_rss_gb_with_exact_32k": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
        "ppl": round(res.ppl, 4),
        "loss_stderr": res.stderr,
        "exact_ppl_32k": err.measured.exact_ppl,
        "window_ppl_32k": err.measured.window_ppl,
        "rel_diff_32k": err.measured.rel_diff,
        "dropped_mass_max_32k": err.measured.dropped_mass_max,
        "bound_worst_tail": err.bound.worst_tail,
        "attention_s": round(parts["attention"], 1),
        "mlp_s": round(parts["mlp"], 1),
        "us_per_token_by_doubling": marks.per_token_us(),
    }


def ensure_run(runs: Path, pe: str) -> Path:
    """A cpu-preset run of ``pe`` under ``runs`` (trained here when missing)."""
    d = runs / pe.replace(":", "_")
    if not (d / "final.json").is_file():
        print(f"training {pe} (cpu preset) -> {d}", flush=True)
        subprocess.run(["extrap", "train", "--pe", pe, "--preset", "cpu", "--out", str(d)], check=True)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pes", default=DEFAULT_PES)
    ap.add_argument("--length", type=int, default=2**20)
    ap.add_argument("--runs", default="runs/bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eps", type=float, default=None, help="TRF(eps) chooses W (default: --window auto's 1e-6)")
    ap.add_argument("--max-window", type=int, default=65536, help="skip a model whose W is larger (default 65536)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.eps is None:
        from extrap.theory.receptive import WINDOW_AUTO_TRF

        a.eps = WINDOW_AUTO_TRF.eps
    if a.one:
        print(json.dumps(one(a.one, a.length, a.threads, a.eps, a.max_window)))
        return
    rows = []
    for pe in a.pes.split(","):
        d = ensure_run(Path(a.runs), pe)
        cmd = [sys.executable, __file__, "--one", str(d), "--length", str(a.length), "--threads", str(a.threads)]
        cmd += ["--eps", repr(a.eps), "--max-window", str(a.max_window)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        row = json.loads(out.stdout) if out.returncode == 0 else {"pe": pe, "error": out.stderr.strip()[-300:]}
        rows.append(row)
        if "error" in row:
            print(f"{pe}: {row['error']}", flush=True)
            continue
        print(
            f"{row['pe']:>12}  ε={row['eps']:g}  W={row['window']:>6}  {row['seconds']:>7.1f} s  "
            f"{row['tokens_per_s']:>7} tok/s  "
            f"RSS {row['peak_rss_gb_streaming']:.2f} GB  ppl {row['ppl']:.4f}  "
            f"|Δppl|/ppl at 32k {row['rel_diff_32k']:.2e}  attention {row['attention_s']:.0f} s, "
            f"MLP {row['mlp_s']:.0f} s  µs/token by doubling {row['us_per_token_by_doubling']}",
            flush=True,
        )
    ok = [r for r in rows if "error" not in r]
    summary = {
        "bench": "million",
        "length": a.length,
        "threads": a.threads,
        "eps": a.eps,
        "cpus": os.cpu_count(),
        "load_avg_1min_at_end": round(os.getloadavg()[0], 2),
        "under_10_min": all(r["seconds"] < 600 for r in ok),  # of the models that ran
        "under_2_gb": all(r["peak_rss_gb_with_exact_32k"] < 2 for r in ok),
        "not_run": [r["pe"] for r in rows if "error" in r],
        "rows": rows,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

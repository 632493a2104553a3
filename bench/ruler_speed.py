"""RULER-style scoring speed: samples/s by length for one task (rank scoring), and the peak RSS of one 32k sample.

The model is the effective-length study's cpu preset (3 layers, d = 64, 4 heads, ALiBi by default) trained
2 steps (its weights do not matter for speed).  Each length is scored by :func:`extrap.tasks.ruler.score_ruler`
as the study scores it: the example is built (haystack, needle) and ranked among its candidates, the prompt run
once into the KV cache (:func:`extrap.tasks.continuations.score_candidates`).  The peak RSS of scoring one
32,768-token sample is measured in a fresh subprocess, so it is that sample's own (target: under 2 GB).
Ends with one JSON line.

    PYTHONPATH=src python bench/ruler_speed.py [--pe alibi] [--task niah_single] [--lengths 1024,4096,16384,32768]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def train_model(out: Path, pe: str) -> Path:
    """The study's cpu-preset model, trained 2 steps into ``out``."""
    from extrap import train as training
    from extrap.experiments.effective_length.presets import PRESETS

    s = PRESETS["cpu"]
    over = {**s.train_overrides, "task": "niah_single", "train_length": s.train_length, "steps": 2, "threads": 1}
    m, t = training.build_configs(pe, s.train_preset, overrides={**over, "save_every": 2})
    training.train(out, m, t, progress=False)
    return out


def score(run_dir: str, task: str, length: int, n: int) -> dict:
    """Score ``n`` samples of ``task`` at ``length``: seconds, samples/s and this process's peak RSS."""
    import torch

    import extrap
    from extrap.tasks.filler import get_filler
    from extrap.tasks.ruler import RulerSettings, score_ruler
    from extrap.tasks.ruler.score import ruler_examples

    torch.set_num_threads(1)
    run = extrap.load(run_dir, "cpu")
    s = RulerSettings([task], [length], train_length=length, n=n, buckets=1, threshold="abs:0.85")
    score_ruler(run.model, run.tokenizer, RulerSettings([task], [1024], train_length=1024, n=1, buckets=1))  # warm
    t0 = time.perf_counter()
    rep = score_ruler(run.model, run.tokenizer, s)
    sec = time.perf_counter() - t0
    tokens = rep.tasks[0].results[0].mean_prompt_tokens
    t0 = time.perf_counter()  # of which building the examples (haystack, needle, tokenising): again, alone
    ruler_examples(task, run.tokenizer, length, replace(s, filler=get_filler(None, s.split)))
    build = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB -> GiB
    head = {"length": length, "n": n, "seconds": sec, "build_seconds": build, "samples_per_s": n / sec}
    return {**head, "tokens": tokens, "peak_rss_gb": rss}


def fresh(run_dir: str, task: str, length: int, n: int) -> dict:
    """:func:`score` in a new process, so that its peak RSS is its own."""
    cmd = [sys.executable, __file__, "--one", str(length), "--n", str(n), "--run", run_dir, "--task", task]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        return {"length": length, "error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pe", default="alibi")
    ap.add_argument("--task", default="niah_single")
    ap.add_argument("--lengths", default="1024,4096,16384,32768")
    ap.add_argument("--run")
    ap.add_argument("--one", type=int)
    ap.add_argument("--n", type=int)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(score(a.run, a.task, a.one, a.n)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = str(a.run or train_model(Path(tmp) / "run", a.pe))
        rows = []
        for L in [int(x) for x in a.lengths.split(",")]:
            r = fresh(run_dir, a.task, L, max(1, min(8, 8192 // L)))  # 8 samples at 1k, 2 at 4k, 1 beyond
            rows.append(r)
            print(
                f"L={L}: "
                + (
                    r["error"]
                    if "error" in r
                    else f"{r['samples_per_s']:.2f} samples/s ({r['n']} in {r['seconds']:.2f} s, building the "
                    f"examples {r['build_seconds']:.2f} s), peak RSS {r['peak_rss_gb']:.2f} GB"
                ),
                flush=True,
            )
    top = next((r for r in rows if r.get("length") == 32768 and "error" not in r), None)
    ok = top is not None and top["peak_rss_gb"] < 2
    print(json.dumps({"bench": "ruler_speed", "pe": a.pe, "task": a.task, "under_2gb_at_32k": ok, "rows": rows}))


if __name__ == "__main__":
    main()

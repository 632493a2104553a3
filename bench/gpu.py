"""Throughput on a GPU: streamed evaluation of a million tokens, training per preset, attention at long L.

Three parts (``--parts``, default all), each through extrap's own code paths, on ``--device`` (default cuda):

* ``eval``: a cpu-preset ALiBi run, briefly trained here (``--eval-steps`` steps of ``extrap train`` on the
  device, stdlib corpus, byte tokens), scores the first ``--length`` tokens (default 2^20) of the stdlib's
  held-out stream as ONE sequence with ``--window auto`` (W = TRF(1e-6) of the trained bias), streamed
  through the rolling KV cache exactly as ``extrap eval --file ... --window auto`` does (bench/million.py is
  the CPU version; where the held-out text is shorter than the length, as in Python 3.12's stdlib, the
  training split's tokens are scored instead, and ``split`` says so).  A 32k-token pass first warms the
  kernels up.  Tokens/s of the timed pass.
* ``train``: ``extrap train`` (the real loop: bf16 autocast and FlexAttention on a GPU, AdamW, the data
  sampler) of ALiBi at each preset (smoke, cpu, paper) for ``--warmup`` + ``--steps`` steps; tokens/s is the
  median of the per-step tokens/s that the run logs, after the warm-up steps (which include compiling).
* ``attention``: the forward pass of ``extrap.model.attention.attend`` at L = 8k..64k (B = 1, H = 8,
  Dh = 64, float32 like evaluation) for alibi, type1, kerple-log and t5 (blocked backend) and alibi with
  FlexAttention, as a ratio to causal SDPA without a bias at the same shape; medians of interleaved rounds.

Prints a table and ends with one JSON line (also written to ``--out``, after every part, so a run stopped
early keeps what it measured).  ``--dry-run`` runs every part at tiny sizes on the CPU in seconds.  The
default run took 85 s on an H200 (torch 2.11, Python 3.12), compiling included.

    PYTHONPATH=src python3 bench/gpu.py [--parts eval,train,attention] [--out gpu.json] [--device cuda:0]
    PYTHONPATH=src python3 bench/gpu.py --dry-run
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

PARTS = ("train", "eval", "attention")  # in this order: eval and attention reuse what training compiled
PRESETS = ("smoke", "cpu", "paper")
SCHEMES = ("sdpa", "alibi", "type1", "kerple-log", "t5", "alibi/flex")
TINY_MODEL = {"n_layer": 1, "d_model": 32, "n_head": 2, "batch_size": 2, "train_length": 32}  # --dry-run


def sync(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def peak_gb(dev) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated(dev) / 2**30, 3) if dev.type == "cuda" else None


def reset_peak(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)


def failure(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


# ---- training ------------------------------------------------------------------------------------


def train_run(folder: Path, preset: str, steps: int, dev, tiny: bool) -> Path:
    """``extrap train --pe alibi --preset P --steps N --device D`` into ``folder`` (log every step, one checkpoint)."""
    from extrap.train import build_configs, train

    over = {"steps": steps, "save_every": 10**9, "log_every": 1, "device": str(dev), **(TINY_MODEL if tiny else {})}
    m, t = build_configs("alibi", preset, overrides=over)
    train(folder, m, t, progress=False)
    return folder


def train_one(root: Path, preset: str, a, dev) -> dict:
    """Tokens/s of one preset: the median of the logged per-step tokens/s after ``a.warmup`` steps."""
    from extrap.run import RunDir

    reset_peak(dev)
    t0 = time.perf_counter()
    folder = train_run(root / f"train-{preset}", preset, a.warmup + a.steps, dev, a.dry_run)
    wall = time.perf_counter() - t0
    rows = RunDir(folder).read_metrics()
    cfg = RunDir(folder).read_config()
    per_step = cfg.train.batch_size * cfg.train.train_length * cfg.train.grad_accum
    timed = sorted(r.tokens_per_s for r in rows[a.warmup :])
    return {
        "tokens_per_s": round(timed[len(timed) // 2]),
        "step_ms": round(1e3 * per_step / timed[len(timed) // 2], 2),
        "first_step_s": round(per_step / rows[0].tokens_per_s, 2),  # compiling included
        "tokens_per_step": per_step,
        "steps_timed": len(timed),
        "wall_s": round(wall, 1),
        "peak_gpu_gb": peak_gb(dev),
    }


def train_part(root: Path, a, dev) -> dict:
    out = {}
    for preset in PRESETS:
        try:
            out[preset] = train_one(root, preset, a, dev)
        except Exception as e:  # one preset failing (memory, a compile error) keeps the others
            out[preset] = {"error": failure(e)}
        print(f"train {preset}: {out[preset]}", flush=True)
    return out


# ---- streamed evaluation -------------------------------------------------------------------------


def eval_tokens(run, n: int):
    """``n`` held-out tokens; where the corpus holds fewer (Python 3.12's stdlib: 0.9M bytes), the training split's."""
    from extrap.data import token_stream
    from extrap.errors import ExtrapError
    from extrap.run import eval_stream

    try:
        return eval_stream(run, "heldout", n)[:n], "heldout"
    except ExtrapError:
        ids = token_stream(run.eval_corpus(), run.tokenizer, "train")
        if ids.numel() < n:
            raise
        return ids[:n], "train"


def eval_part(root: Path, a, dev) -> dict:
    """Score ``a.length`` held-out tokens as one sequence, streamed with the window, on ``dev``."""
    import extrap
    from extrap.evaluate import resolve_window
    from extrap.evaluate.score import score_tokens
    from extrap.theory.receptive import WINDOW_AUTO_TRF

    folder = train_run(root / "eval-cpu-alibi", "cpu", a.eval_steps, dev, a.dry_run)
    run = extrap.load(folder, device=str(dev))
    window_for, info = resolve_window(run, a.window, WINDOW_AUTO_TRF.eps)
    W = window_for(a.length) if window_for else None
    if W is None:
        return {"error": f"no window shorter than L = {a.length} ({info.reason})"}
    stream, split = eval_tokens(run, a.length + 1)
    score_tokens(run.model, stream[: min(a.length, 32768) + 1], W)  # warm-up: kernels, allocator
    reset_peak(dev)
    res = score_tokens(run.model, stream, W)
    return {
        "model": f"cpu preset alibi ({run.model.shape.n_layer} layers, d={run.model.shape.d_model}), "
        f"trained {a.eval_steps} steps on {dev.type}" + (" (dry run: tiny model)" if a.dry_run else ""),
        "window": W,
        "window_mode": info.mode,
        "split": split,
        "tokens": res.tokens,
        "seconds": round(res.seconds, 2),
        "tokens_per_s": round(res.tokens / res.seconds),
        "ppl": round(res.ppl, 4),
        "peak_gpu_gb": peak_gb(dev),
    }


# ---- attention -----------------------------------------------------------------------------------


def attention_call(pe: str, L: int, H: int, dtype, dev):
    """``attend`` for one scheme at length L on ``dev`` (as bench/attention.py, on any device)."""
    import torch

    from extrap import positional
    from extrap.model.attention import BiasContext, attend, toeplitz_table

    if pe == "sdpa":  # the baseline: PyTorch's fused causal kernel, no bias
        return lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = positional.get(pe.split("/")[0])
    vals = {n: x.to(dev, torch.float32) for n, x in s.init_values(H).items()}
    table = toeplitz_table(s, vals, L - 1, dtype, dev)
    pos = torch.arange(L, device=dev)
    ctx = BiasContext(scheme=s, values=vals, positions=pos, contiguous=True, table=table)
    backend = "flex" if pe.endswith("/flex") else "blocked"
    return lambda q, k, v: attend(q, k, v, ctx, backend=backend)


def time_length(L: int, a, dev, schemes: list[str]) -> tuple[dict, dict]:
    """Median seconds per scheme over interleaved rounds (a slow spell hits every scheme alike); errors."""
    import torch

    dtype = getattr(torch, a.dtype)
    gen = torch.Generator(device=dev).manual_seed(0)
    q, k, v = (torch.randn(1, a.heads, L, a.head_dim, device=dev, dtype=dtype, generator=gen) for _ in range(3))
    fns, errors, times = {}, {}, {}
    with torch.no_grad():
        for pe in schemes:
            try:
                fns[pe] = attention_call(pe, L, a.heads, dtype, dev)
                fns[pe](q, k, v)  # warm-up (FlexAttention compiles here)
                sync(dev)
            except Exception as e:
                fns.pop(pe, None)
                errors[pe] = failure(e)
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
        rounds = a.rounds if L <= 16384 else max(1, a.rounds // 2)
        for _ in range(rounds):
            for pe, fn in fns.items():
                sync(dev)
                t0 = time.perf_counter()
                fn(q, k, v)
                sync(dev)
                times.setdefault(pe, []).append(time.perf_counter() - t0)
    return {pe: sorted(ts)[len(ts) // 2] for pe, ts in times.items()}, errors


def attention_part(a, dev) -> dict:
    schemes = [s for s in SCHEMES if not (a.dry_run and s.endswith("/flex"))]  # flex on CPU: a long compile
    out = {"heads": a.heads, "head_dim": a.head_dim, "dtype": a.dtype, "lengths": a.lengths}
    out.update(ratio_vs_sdpa={}, sdpa_ms={}, errors={})
    if len(schemes) < len(SCHEMES):
        out["errors"]["alibi/flex"] = "not run in --dry-run (FlexAttention compiles for minutes on a CPU)"
    for L in a.lengths:
        med, errors = time_length(L, a, dev, schemes)
        out["errors"].update({f"{pe}@{L}": e for pe, e in errors.items()})
        if "sdpa" not in med:
            continue
        out["sdpa_ms"][str(L)] = round(1e3 * med["sdpa"], 3)
        for pe, t in med.items():
            if pe != "sdpa":
                out["ratio_vs_sdpa"][f"{pe}@{L}"] = round(t / med["sdpa"], 3)
        print(f"attention L={L}: " + ", ".join(f"{pe} {1e3 * t:.2f} ms" for pe, t in med.items()), flush=True)
    return out


# ---- report --------------------------------------------------------------------------------------


def print_table(res: dict) -> None:
    print(f"\n{res['device_name']} ({res['device']}), torch {res['torch']}" + ("  [dry run]" if res["dry_run"] else ""))
    for part in res["parts"]:
        if "error" in res[part]:
            print(f"{part:<16} failed: {res[part]['error']}")
    ev = res["eval"]
    if ev is not None and "error" not in ev:
        print(
            f"{'streamed eval':<16} {ev['tokens_per_s']:,} tok/s ({ev['tokens']:,} tokens, W={ev['window']}, "
            f"{ev['seconds']} s, ppl {ev['ppl']}, peak GPU {ev['peak_gpu_gb']} GB)"
        )
    for preset, r in (res["train"] or {}).items():
        if isinstance(r, dict):
            first = f"first step {r.get('first_step_s')} s"
            text = r.get("error") or f"{r['tokens_per_s']:,} tok/s ({r['step_ms']} ms/step, {first})"
            print(f"{'train ' + preset:<16} {text}")
    att = res["attention"]
    if att is not None and "error" not in att:
        print(f"{'attention':<16} " + " ".join(f"{L:>8}" for L in att["lengths"]) + "   (time / causal SDPA)")
        for pe in SCHEMES[1:]:
            cells = [att["ratio_vs_sdpa"].get(f"{pe}@{L}") for L in att["lengths"]]
            print(f"{'  ' + pe:<16} " + " ".join(f"{'-' if c is None else f'x{c:.2f}':>8}" for c in cells))
        for key, e in att["errors"].items():
            print(f"  {key}: {e}")


def readme_row(res: dict) -> str:
    """The README's GPU table row for one result (``docs/bench/gpu_*.json``), so the table is rendered, not copied."""
    ev, tr, att = res["eval"], res["train"], res["attention"]
    name = f"{res['device_name']}, torch {res['torch']}"
    eval_cell = f"{ev['tokens_per_s']:,} (W = {ev['window']}, {ev['split']} split, {ev['seconds']} s)"
    train_cell = " / ".join(f"{tr[p]['tokens_per_s']:,}" for p in ("smoke", "cpu", "paper"))
    ratios = att["ratio_vs_sdpa"]
    att_cell = " / ".join(f"{ratios[f'alibi@{L}']:.2f}×" for L in att["lengths"])
    flex = " / ".join(f"{ratios[f'alibi/flex@{L}']:.2f}×" for L in att["lengths"])
    return f"| {name} | {eval_cell} | {train_cell} | ALiBi {att_cell}; FlexAttention {flex} |"


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated: train,eval,attention")
    ap.add_argument("--device", default=None, help="cuda | cuda:N | cpu (default cuda; cpu with --dry-run)")
    ap.add_argument("--dry-run", "--cpu", action="store_true", dest="dry_run", help="every part, tiny, on the CPU")
    ap.add_argument("--out", help="also write the JSON line to this file")
    ap.add_argument("--length", type=int, default=2**20, help="eval: tokens scored as one sequence")
    ap.add_argument("--window", default="auto", help="eval: auto (TRF(1e-6) of the trained bias) or W")
    ap.add_argument("--eval-steps", type=int, default=200, help="eval: training steps of its cpu-preset run")
    ap.add_argument("--warmup", type=int, default=5, help="train: steps before the timed ones")
    ap.add_argument("--steps", type=int, default=20, help="train: timed steps per preset")
    ap.add_argument("--lengths", default="8192,16384,32768,65536", help="attention: comma-separated L")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--rounds", type=int, default=5, help="attention: timing rounds (half beyond 16k)")
    a = ap.parse_args(argv)
    a.parts = [p for p in PARTS if p in a.parts.split(",")]
    a.lengths = [int(x) for x in a.lengths.split(",")]
    if a.dry_run:  # every part, at sizes a CPU runs in seconds
        a.length, a.window, a.eval_steps, a.warmup, a.steps = 4096, "64", 2, 1, 2
        a.lengths, a.heads, a.head_dim, a.rounds = [256, 512], 2, 16, 1
    return a


def main(argv=None) -> int:
    import torch

    from extrap.devices import resolve_device
    from extrap.errors import ExtrapError

    a = parse(argv)
    try:
        dev = resolve_device(a.device or ("cpu" if a.dry_run else "cuda"))
    except ExtrapError as e:
        print(f"gpu.py: {e}", file=sys.stderr)
        return 2
    res = {"bench": "gpu", "device": str(dev), "torch": torch.__version__, "dry_run": a.dry_run, "parts": a.parts}
    res["device_name"] = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    res.update(train=None, eval=None, attention=None, part_seconds={})
    with tempfile.TemporaryDirectory(prefix="extrap-gpu-") as tmp:
        for part in a.parts:
            t0 = time.perf_counter()
            try:
                res[part] = {
                    "train": lambda: train_part(Path(tmp), a, dev),
                    "eval": lambda: eval_part(Path(tmp), a, dev),
                    "attention": lambda: attention_part(a, dev),
                }[part]()
            except Exception as e:  # a part that fails is reported; the others still run
                res[part] = {"error": failure(e)}
            res["part_seconds"][part] = round(time.perf_counter() - t0, 1)
            if a.out:
                Path(a.out).write_text(json.dumps(res) + "\n")
    print_table(res)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

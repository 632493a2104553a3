"""bench/gpu.py's model parts: ``train`` (extrap train per preset) and ``eval`` (a million tokens streamed)."""

from __future__ import annotations

import time
from pathlib import Path

from gpu_common import failure, peak_gb, reset_peak

PRESETS = ("smoke", "cpu", "paper")
TINY_MODEL = {"n_layer": 1, "d_model": 32, "n_head": 2, "batch_size": 2, "train_length": 32}  # --dry-run


# ---- training ------------------------------------------------------------------------------------


def train_run(folder: Path, preset: str, steps: int, dev, tiny: bool, compiled: bool = False) -> Path:
    """``extrap train --pe alibi --preset P --steps N --device D [--compile]`` into ``folder`` (log every step)."""
    from extrap.train import build_configs, train

    over = {"steps": steps, "save_every": 10**9, "log_every": 1, "device": str(dev), **(TINY_MODEL if tiny else {})}
    m, t = build_configs("alibi", preset, overrides=over)
    train(folder, m, t, progress=False, compiled=compiled)
    return folder


def train_one(root: Path, preset: str, a, dev, compiled: bool = False) -> dict:
    """Tokens/s and MFU of one preset: the medians of the logged per-step values after ``a.warmup`` steps."""
    from extrap.run import RunDir

    reset_peak(dev)
    t0 = time.perf_counter()
    name = f"train-{preset}" + ("-compiled" if compiled else "")
    folder = train_run(root / name, preset, a.warmup + a.steps, dev, a.dry_run, compiled)
    wall = time.perf_counter() - t0
    rows = RunDir(folder).read_metrics()
    cfg = RunDir(folder).read_config()
    per_step = cfg.train.batch_size * cfg.train.train_length * cfg.train.grad_accum
    timed = sorted(r.tokens_per_s for r in rows[a.warmup :])
    mfus = sorted(r.mfu for r in rows[a.warmup :] if r.mfu is not None)
    return {
        "mfu": round(mfus[len(mfus) // 2], 4) if mfus else None,  # extrap.throughput: PaLM's count / the card's peak
        "tokens_per_s": round(timed[len(timed) // 2]),
        "step_ms": round(1e3 * per_step / timed[len(timed) // 2], 2),
        "first_step_s": round(per_step / rows[0].tokens_per_s, 2),  # compiling included
        "tokens_per_step": per_step,
        "steps_timed": len(timed),
        "wall_s": round(wall, 1),
        "peak_gpu_gb": peak_gb(dev),
    }


def train_part(root: Path, a, dev) -> dict:
    """Each preset as ``extrap train`` runs it, and on a GPU the paper preset with ``--compile`` too."""
    out = {}
    runs = [(p, False) for p in PRESETS] + ([("paper", True)] if dev.type == "cuda" else [])
    for preset, compiled in runs:
        key = preset + ("/compile" if compiled else "")
        try:
            out[key] = train_one(root, preset, a, dev, compiled)
        except Exception as e:  # one preset failing (memory, a compile error) keeps the others
            out[key] = {"error": failure(e)}
        print(f"train {key}: {out[key]}", flush=True)
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


def eval_part(root: Path, a, dev, shared: dict) -> dict:
    """Score ``a.length`` held-out tokens as one sequence, streamed with the window, on ``dev``."""
    import extrap
    from extrap.evaluate import resolve_window
    from extrap.evaluate.score import score_tokens
    from extrap.theory.receptive import WINDOW_AUTO_TRF

    folder = cpu_run(root, a, dev, shared)
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


def cpu_run(root: Path, a, dev, shared: dict) -> Path:
    """The cpu-preset ALiBi run that eval and dtype measure, trained once (``a.eval_steps`` steps) on ``dev``."""
    if "cpu_run" not in shared:
        shared["cpu_run"] = train_run(root / "eval-cpu-alibi", "cpu", a.eval_steps, dev, a.dry_run)
    return shared["cpu_run"]


DTYPE_TOKENS = 2**16  # scored in each dtype: enough for a 0.1% difference to stand out of the noise


def dtype_part(root: Path, a, dev, shared: dict) -> dict:
    """The same tokens' perplexity with the forward in bfloat16 (the GPU default) and in float32."""
    import extrap
    from extrap.evaluate.score import score_tokens

    folder = cpu_run(root, a, dev, shared)
    n = min(DTYPE_TOKENS, a.length)
    stream, split = eval_tokens(extrap.load(folder, device=str(dev)), n + 1)
    ppl = {}
    for dtype in ("float32", "bfloat16"):
        run = extrap.load(folder, device=str(dev), dtype=dtype)
        ppl[dtype] = score_tokens(run.model, stream, run.train_length).ppl  # windowed at L_tr: the cpu preset's own
    return {
        "tokens": n,
        "split": split,
        "window": "L_tr",
        "ppl_float32": round(ppl["float32"], 5),
        "ppl_bfloat16": round(ppl["bfloat16"], 5),
        "rel_diff": round(abs(ppl["bfloat16"] / ppl["float32"] - 1), 7),
    }

"""bench/gpu.py's ``hf`` part: a Llama-3.1-8B-shaped hf: model (random weights, no download) at 32k-128k.

The model is built from its config on the device in bfloat16 with SDPA attention (16 GB of weights), wrapped as
extrap wraps an ``hf:`` checkpoint (:class:`extrap.hf.model.HFModel`), and timed on one prefill of ``L`` random
token ids with ``last=1`` (one row of logits, as a prompt's prefill: 128k rows of a 128k vocabulary would be
34 GB on their own):

* ``transformers``: the transformers model's own forward (``logits_to_keep=1``), the reference;
* ``plain``: the same forward through extrap's wrapper (goal: tokens/s >= 0.95x the reference);
* each ``--extend`` method (``METHOD@L``): the wrapper with the method on (goal: <= 1.6x ``plain`` at 32k);
* beyond 32k (128k) one pass each: its peak memory (goal: every one fits in 80 GB) and its time, compile
  included (``first_pass``).

The extension methods take L_tr = 8192, Llama-3.1's original context (its own llama3 RoPE scaling is left out:
the methods are what stretch the plain RoPE model here).  ``--dry-run`` builds a 2-layer model of the same
family on the CPU and runs every step at 256 tokens.
"""

from __future__ import annotations

import functools
import time

from gpu_common import failure, peak_gb, reset_peak, sync

LLAMA31_8B = dict(  # meta-llama/Llama-3.1-8B's config.json, minus its rope_scaling
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    rope_theta=500000.0,
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
)
TINY = dict(LLAMA31_8B, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=512)  # fmt: skip
TRAIN_LENGTH = 8192  # Llama-3.1's original_max_position_embeddings: the methods' L_tr
METHODS = ("self-extend", "dca", "rerope", "leaky-rerope", "string", "sinks", "lm-infinite")
QUICK_METHODS = ("self-extend", "dca", "rerope", "sinks")  # --quick: one of each kind of branch set


def build(dev, tiny: bool):
    """The hf: model, as extrap wraps it: random weights in bf16 (float32 on a CPU) with SDPA attention."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from extrap.hf.model import HFModel

    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    cfg = LlamaConfig(**(TINY if tiny else LLAMA31_8B), attn_implementation="sdpa")
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in bf16 directly: 16 GB, never a float32 copy of 32 GB
    try:
        with torch.device(dev):
            hf = LlamaForCausalLM(cfg).eval()
    finally:
        torch.set_default_dtype(default)
    return HFModel(hf, "llama", "hf:llama/rope")


def _time(fn, dev, reps: int) -> float:
    """Median seconds of ``reps`` calls after one warm-up (which compiles what the call compiles)."""
    import torch

    fn()
    sync(dev)
    times = []
    for _ in range(reps):
        sync(dev)
        t0 = time.perf_counter()
        fn()
        sync(dev)
        times.append(time.perf_counter() - t0)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return sorted(times)[len(times) // 2]


def _peak(fn, dev) -> float | None:
    """Peak GB of one call (None on a CPU)."""
    import torch

    reset_peak(dev)
    fn()
    sync(dev)
    gb = peak_gb(dev)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return gb


def hf_part(a, dev) -> dict:
    """Prefill tokens/s of plain and extended runs at ``a.hf_lengths``; peak memory at the longest.

    The reference and the plain wrapper run first at every length; then each method in turn at every
    length (switching a method on replaces the previous one: there is no switching back).
    """
    import torch

    from extrap.extend import extend_model, parse

    model = build(dev, a.dry_run)
    L_tr = 64 if a.dry_run else TRAIN_LENGTH
    gen = torch.Generator(device=dev).manual_seed(0)
    ids = {L: torch.randint(0, model.shape.vocab_size, (1, L), device=dev, generator=gen) for L in a.hf_lengths}
    out = {"model": "tiny Llama (dry run)" if a.dry_run else "Llama-3.1-8B shape, random weights, bf16, sdpa"}
    out.update(train_length=L_tr, lengths=a.hf_lengths, tokens_per_s={}, ratio={}, peak_gb={}, errors={})
    runs = {
        "transformers": lambda x: model.hf(input_ids=x, use_cache=False, logits_to_keep=1),
        "plain": lambda x: model(x, last=1),
    }
    with torch.no_grad():
        for name, fn in runs.items():
            _measure(out, name, fn, ids, a, dev)
        for name in QUICK_METHODS if a.quick else METHODS:
            try:
                extend_model(model, parse(name, L_tr))
            except Exception as e:
                out["errors"][name] = failure(e)
                continue
            _measure(out, name, runs["plain"], ids, a, dev)
    for key, s in list(out.pop("seconds", {}).items()):
        name, L = key.split("@")
        base = out.get("_plain", {}).get(L)
        if base:
            out["ratio"][key] = round(s / base, 3)
    out.pop("_plain", None)
    return out


def _measure(out: dict, name: str, fn, ids: dict, a, dev) -> None:
    """Time ``fn`` at every length; an OOM is a result, recorded as an error.

    Beyond 32k (the memory check at 128k) one pass only, which measures the peak and, with it, a time that
    includes any compile for that shape (``first_pass`` lists those keys): the speed goals are read at 32k."""
    import torch

    for L, x in ids.items():
        key = f"{name}@{L}"
        call = functools.partial(fn, x)
        try:
            if L > 32768:
                t0 = time.perf_counter()
                out["peak_gb"][key] = _peak(call, dev)
                s = time.perf_counter() - t0
                out.setdefault("first_pass", []).append(key)
            else:
                s = _time(call, dev, a.hf_reps)
        except Exception as e:
            out["errors"][key] = failure(e)
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            continue
        out["tokens_per_s"][key] = round(L / s)
        out.setdefault("seconds", {})[key] = s
        if name == "plain":
            out.setdefault("_plain", {})[str(L)] = s
        print(f"hf {key}: {s:.3f} s, {L / s:,.0f} tokens/s, peak {out['peak_gb'].get(key)} GB", flush=True)

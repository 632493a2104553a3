"""bench/gpu.py's kernel parts: ``attention`` (float32 forward per backend), ``flex`` (generated score_mods)."""

from __future__ import annotations

import functools
import time

from gpu_common import failure, sync

SCHEMES = ("sdpa", "alibi", "type1", "kerple-log", "t5", "alibi/flex")


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


# ---- generated score_mods (issue 31 item 1) ----------------------------------------------------------

FLEX_SCHEMES = ("alibi", "kerple-log", "kerple-power", "type1", "type2", "t5", "sandwich", "sandwich/formula", "fire")
# --quick: one of each kind of score_mod (a few elementwise ops, a bucket and its table, the table mode, d̄/2
# cosines, an MLP): each scheme compiles its fused forward and backward once, tens of seconds on a GPU
QUICK_FLEX = ("alibi", "kerple-log", "t5", "sandwich", "sandwich/formula", "fire")


def flex_call(spec: str, L: int, H: int, dev, *, compiled: bool):
    """(fn(q, k, v) -> out, learned values) for ``extrap.model.flex.flex_attention`` of one scheme at length L.

    ``spec`` is a scheme, ``/formula`` or ``/table`` forcing a mode (else the scheme's default); the values
    are float32 leaves with grad where the scheme learns them, as in training."""
    import torch

    from extrap import positional
    from extrap.model import flex
    from extrap.model.attention import toeplitz_table

    name, _, mode = spec.partition("/")
    s = positional.get(name)
    vals = {n: x.to(dev, torch.float32).requires_grad_(s.learned) for n, x in s.init_values(H).items()}
    if "table" in vals:  # T5 starts at zero: random values, so the kernel reads something
        vals["table"] = torch.randn_like(vals["table"]).requires_grad_(True)
    mode = mode or flex.default_mode(s)
    table = None
    if mode == "table":
        table = toeplitz_table(s, {n: x.detach() for n, x in vals.items()}, L - 1, torch.float32, dev)
    fn = lambda q, k, v: flex.flex_attention(q, k, v, s, vals, table=table, mode=mode, compiled=compiled)  # noqa: E731
    return fn, [x for x in vals.values() if x.requires_grad]


def _fwd_bwd(fn, q, k, v):
    out = fn(q, k, v)
    out.float().square().mean().backward()


def _sdpa(q, k, v):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def flex_part(a, dev) -> dict:
    """Forward and forward + backward of each scheme's generated score_mod in bf16 against causal SDPA."""
    import torch

    from gpu_common import median

    cuda = dev.type == "cuda"  # FlexAttention on a CPU: forward only, and eager here (a compile per scheme is long)
    dtype = torch.bfloat16 if cuda else torch.float32
    out = {"dtype": str(dtype).split(".")[1], "heads": a.heads, "head_dim": a.head_dim, "lengths": a.flex_lengths}
    schemes = QUICK_FLEX if a.quick else FLEX_SCHEMES
    out.update(schemes=list(schemes), fwd={}, fwd_bwd={}, sdpa_ms={}, compiles={}, errors={})
    for L in a.flex_lengths:
        _flex_length(L, a, dev, dtype, out)
        print(f"flex L={L}: " + ", ".join(f"{s} x{out['fwd'].get(f'{s}@{L}')}" for s in schemes), flush=True)
    out["median_fwd_bwd"] = median(out["fwd_bwd"].values()) if out["fwd_bwd"] else None
    return out


def _flex_length(L: int, a, dev, dtype, out: dict) -> None:
    """Every scheme at one length, each ratio against causal SDPA measured at the same shape just before."""
    import torch
    import torch._dynamo.utils as du

    cuda = dev.type == "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    qkv = [torch.randn(1, a.heads, L, a.head_dim, device=dev, dtype=dtype, generator=gen) for _ in range(3)]
    grad_qkv = [x.clone().requires_grad_(True) for x in qkv]
    base = {"fwd": _timed(_sdpa, qkv, dev, a.rounds, no_grad=True)}
    if cuda:
        base["fwd_bwd"] = _timed(functools.partial(_fwd_bwd, _sdpa), grad_qkv, dev, a.rounds)
    out["sdpa_ms"][str(L)] = {k: round(1e3 * t, 3) for k, t in base.items()}
    for spec in out["schemes"]:
        key = f"{spec}@{L}"
        graphs = du.counters["stats"]["unique_graphs"]
        try:
            fn, _ = flex_call(spec, L, a.heads, dev, compiled=cuda)
            out["fwd"][key] = round(_timed(fn, qkv, dev, a.rounds, no_grad=True) / base["fwd"], 3)
            if cuda:
                t = _timed(functools.partial(_fwd_bwd, fn), grad_qkv, dev, a.rounds)
                out["fwd_bwd"][key] = round(t / base["fwd_bwd"], 3)
            else:
                out["errors"][key] = "forward only: FlexAttention has no backward on a CPU"
        except Exception as e:
            out["errors"][key] = failure(e)
        out["compiles"][key] = du.counters["stats"]["unique_graphs"] - graphs
        if cuda:
            torch.cuda.empty_cache()


def _timed(fn, args, dev, rounds: int, no_grad: bool = False) -> float:
    """Median seconds of ``fn(*args)`` over ``rounds`` calls after one warm-up (which compiles)."""
    import contextlib

    import torch

    from gpu_common import median

    ctx = torch.no_grad if no_grad else contextlib.nullcontext
    with ctx():
        fn(*args)
        times = []
        for _ in range(rounds):
            sync(dev)
            t0 = time.perf_counter()
            fn(*args)
            sync(dev)
            times.append(time.perf_counter() - t0)
    return median(times)

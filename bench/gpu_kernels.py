"""bench/gpu.py's kernel parts: ``attention`` (the float32 forward of each backend against causal SDPA)."""

from __future__ import annotations

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

"""bench/gpu.py's report: the printed table and the README's GPU tables, rendered from a result JSON."""

from __future__ import annotations

from gpu_kernels import SCHEMES


def print_table(res: dict) -> None:
    print(f"\n{res['device_name']} ({res['device']}), torch {res['torch']}" + ("  [dry run]" if res["dry_run"] else ""))
    for part in res["parts"]:
        if isinstance(res[part], dict) and "error" in res[part]:
            print(f"{part:<16} failed: {res[part]['error']}")
    ev = res.get("eval")
    if ev is not None and "error" not in ev:
        print(
            f"{'streamed eval':<16} {ev['tokens_per_s']:,} tok/s ({ev['tokens']:,} tokens, W={ev['window']}, "
            f"{ev['seconds']} s, ppl {ev['ppl']}, peak GPU {ev['peak_gpu_gb']} GB)"
        )
    for preset, r in (res.get("train") or {}).items():
        if isinstance(r, dict):
            first = f"first step {r.get('first_step_s')} s, MFU {r.get('mfu')}"
            text = r.get("error") or f"{r['tokens_per_s']:,} tok/s ({r['step_ms']} ms/step, {first})"
            print(f"{'train ' + preset:<16} {text}")
    _print_ratios("attention", res.get("attention"), "ratio_vs_sdpa", SCHEMES[1:])
    fx = res.get("flex")
    if fx is not None and "error" not in fx:
        for kind in ("fwd", "fwd_bwd"):
            _print_ratios(f"flex {kind}", fx, kind, fx["schemes"])
    for line in readme_tables(res).splitlines():
        print(line)


def _print_ratios(title: str, part: dict | None, key: str, names) -> None:
    if part is None or "error" in part:
        return
    print(f"{title:<22} " + " ".join(f"{L:>8}" for L in part["lengths"]) + "   (time / causal SDPA)")
    for pe in names:
        cells = [part[key].get(f"{pe}@{L}") for L in part["lengths"]]
        print(f"{'  ' + pe:<22} " + " ".join(f"{'-' if c is None else f'x{c:.2f}':>8}" for c in cells))
    for name, e in part.get("errors", {}).items():
        print(f"  {name}: {e}")


def readme_row(res: dict) -> str:
    """The README's first GPU table row (streamed eval, training, float32 attention) for one result."""
    ev, tr, att = res["eval"], res["train"], res["attention"]
    name = f"{res['device_name']}, torch {res['torch']}"
    eval_cell = f"{ev['tokens_per_s']:,} (W = {ev['window']}, {ev['split']} split, {ev['seconds']} s)"
    train_cell = " / ".join(f"{tr[p]['tokens_per_s']:,}" for p in ("smoke", "cpu", "paper"))
    ratios = att["ratio_vs_sdpa"]
    att_cell = " / ".join(f"{ratios[f'alibi@{L}']:.2f}×" for L in att["lengths"])
    flex = " / ".join(f"{ratios[f'alibi/flex@{L}']:.2f}×" for L in att["lengths"])
    return f"| {name} | {eval_cell} | {train_cell} | ALiBi {att_cell}; FlexAttention {flex} |"


def readme_tables(res: dict) -> str:
    """Markdown for the parts added with issue 31 (flex, hf, dtype, MFU); '' for a result without them."""
    out = []
    name = f"{res['device_name']}, torch {res['torch']}"
    fx = res.get("flex")
    if isinstance(fx, dict) and "fwd" in fx:
        out += [f"Generated score_mods, bf16, time / causal SDPA ({name}):", ""]
        out += ["| scheme | " + " | ".join(f"{_k(L)} fwd / fwd+bwd" for L in fx["lengths"]) + " |"]
        out += ["|---" * (1 + len(fx["lengths"])) + "|"]
        for pe in fx["schemes"]:
            cells = [_pair(fx["fwd"].get(f"{pe}@{L}"), fx["fwd_bwd"].get(f"{pe}@{L}")) for L in fx["lengths"]]
            out.append(f"| {pe} | " + " | ".join(cells) + " |")
        out.append("")
    hf = res.get("hf")
    if isinstance(hf, dict) and "ratio" in hf:
        longest = max(hf["lengths"])
        out += [f"{hf['model']} ({name}): prefill time / extrap's plain prefill, peak GB at {_k(longest)}:", ""]
        out += ["| run | " + " | ".join(_k(L) for L in hf["lengths"]) + " | peak GB |"]
        out += ["|---" * (2 + len(hf["lengths"])) + "|"]
        names = dict.fromkeys(k.split("@")[0] for k in list(hf["tokens_per_s"]) + list(hf["errors"]))
        for run in names:
            cells = [_cell(hf, run, L) for L in hf["lengths"]]
            peak = hf["peak_gb"].get(f"{run}@{longest}")
            out.append(f"| {run} | " + " | ".join(cells) + f" | {'-' if peak is None else peak} |")
        out.append("")
    dt = res.get("dtype")
    if isinstance(dt, dict) and "rel_diff" in dt:
        out.append(
            f"bf16 evaluation ({name}): perplexity {dt['ppl_bfloat16']} against {dt['ppl_float32']} in float32 on the "
            f"same {dt['tokens']:,} tokens, a relative difference of {100 * dt['rel_diff']:.3f}% (goal <= 0.1%)."
        )
    return "\n".join(out).strip()


def _pair(a, b) -> str:
    return "-" if a is None else f"{a:.2f}× / {'-' if b is None else f'{b:.2f}×'}"


def _cell(hf: dict, run: str, L: int) -> str:
    key = f"{run}@{L}"
    if key in hf["errors"]:
        return "failed: " + hf["errors"][key].split(":")[0]
    r = hf["ratio"].get(key)
    return "-" if r is None else f"{r:.2f}× ({hf['tokens_per_s'][key]:,} tok/s)"


def _k(L: int) -> str:
    return f"{L // 1024}k" if L % 1024 == 0 else f"{L:,}"

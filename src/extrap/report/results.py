"""Reading ``results.json``: the study's constants, tolerant accessors and shared lookups."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


PROTOCOLS = ("nonoverlapping", "sliding", "last-token")
VERDICT_PROTOCOLS = ("last-token", "nonoverlapping", "sliding")  # 003 §3.4's protocol first
PAPER_SLIDING_RELATIVE = 44.35  # 000 Table 1: sliding window vs nonoverlapping inference time
SLIDING_SLOWER_FACTOR = 10.0  # "much slower": our threshold for the Table 1 claim
SPEARMAN_MIN = 0.5  # TRF and ERF trends "agree" (000 Figs. 5-6) when rho >= this
SPEARMAN_MIN_N = 3  # below 3 PEs a rank correlation says nothing
HEATMAP_LENGTH = 32  # positions shown in each exp(RPE) heatmap (000 Fig. 7)
HEATMAP_HEAD = 0
DEFAULT_HEADS = 8  # when results.json does not record the number of heads
MAX_HEATMAPS = 12

# 003 Table 1 (ArXiv, L_tr = 512): perplexity vs L_ex for the three ALiBi-slope experiments.
PAPER_003_TABLE1 = {
    "source": "Chi et al. 2023 (003), Table 1, ArXiv, L_tr = 512",
    "train_length": 512,
    "lengths": [512, 1024, 2048, 4096, 8192],
    "groups": [
        {"group": "shift", "title": "Shift all h by Δ", "labels": ["Δ=-3", "Δ=0", "Δ=2", "Δ=4", "Δ=6", "Δ=8"],
         "ppl": [[5.76, 5.57, 5.50, 5.63, 5.70, 5.70],
                 [7.15, 5.64, 5.31, 5.81, 55.4, 55.4],
                 [7.15, 5.94, 5.89, 6.92, 94.4, 94.4],
                 [7.15, 5.95, 5.92, 6.94, 96.0, 96.0],
                 [7.15, 5.95, 5.92, 6.94, 96.0, 96.0]]},
        {"group": "same-h", "title": "Same h for all heads", "labels": ["h=0", "h=2", "h=4", "h=6", "h=8"],
         "ppl": [[9.45, 6.65, 5.85, 5.60, 5.70],
                 [9.20, 7.01, 8.66, 25.4, 55.4],
                 [9.21, 7.08, 8.66, 31.7, 94.4],
                 [9.21, 7.08, 8.66, 31.8, 96.0],
                 [9.21, 7.08, 8.66, 31.8, 96.0]]},
        {"group": "window", "title": "Windowed attention with size w",
         "labels": ["w=40", "w=80", "w=100", "w=120", "w=160", "w=320"],
         "ppl": [[8.27, 7.28, 7.04, 6.77, 6.41, 6.04],
                 [8.27, 7.29, 7.02, 8.90, 67.4, 178],
                 [8.27, 7.29, 7.03, 8.90, 67.5, 202],
                 [8.27, 7.29, 7.02, 8.90, 67.5, 202],
                 [8.27, 7.29, 7.02, 8.90, 67.5, 202]]},
    ],
}


def load_results(path: str | os.PathLike) -> dict:
    """``results.json`` (a file, or the study folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _num(x: Any) -> float | None:
    """A finite float, or None for missing / NaN / inf / non-numbers."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "∞" if x > 0 else "-∞"
        return f"{x:.{digits}g}"
    return str(x)


def _base(pe: str) -> str:
    """Scheme name of a spec ("window:64" -> "window")."""
    return pe.split(":", 1)[0].strip()


def _pes(results: dict) -> list[str]:
    """Every PE the results mention, in the study's order first."""
    seen = list(results.get("pes") or [])
    for section in ("runs", "eval", "erf"):
        seen += [pe for pe in (results.get(section) or {}) if pe not in seen]
    seen += [r.get("pe") for r in results.get("theory") or [] if r.get("pe") and r.get("pe") not in seen]
    return list(dict.fromkeys(seen))


def _match(keys, name: str) -> str | None:
    """The spec among ``keys`` whose scheme name is ``name`` (the exact spec preferred)."""
    keys = list(keys)
    if name in keys:
        return name
    return next((k for k in keys if _base(k) == name), None)


def pe_verdict(results: dict, pe: str) -> tuple[bool | None, float | None, str | None]:
    """(extrapolates, worst_ratio, protocol) of ``pe``: last-token first, then nonoverlapping."""
    ev = (results.get("eval") or {}).get(pe) or {}
    for proto in VERDICT_PROTOCOLS:
        rep = ev.get(proto)
        if rep and rep.get("extrapolates") is not None:
            return rep["extrapolates"], _num(rep.get("worst_ratio")), proto
    return None, None, None


def theory_rows(results: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in results.get("theory") or []:
        if row.get("pe") is not None:
            out.setdefault(row["pe"], []).append(row)
    return out


def _eps_keys(rows: list[dict]) -> list[str]:
    """ε keys of the TRF dicts, largest ε first."""
    keys = {k for r in rows for k in (r.get("trf") or {})}

    def val(k):
        try:
            return -float(k)
        except ValueError:
            return math.inf

    return sorted(keys, key=val)


def _trf_at(rows: list[dict], eps: str) -> int | None:
    """TRF of a PE at ε: the largest over heads (a layer sees as far as its widest head)."""
    vals = [v for r in rows if (v := _num((r.get("trf") or {}).get(eps))) is not None]
    return int(max(vals)) if vals else None


def _erf_table(results: dict) -> list[dict]:
    """Per PE: TRF (from the ERF section, else the theory at the smallest ε), grad and attn ERF."""
    rows = theory_rows(results)
    out = []
    for pe in _pes(results):
        e = (results.get("erf") or {}).get(pe)
        if e is None:
            continue
        trf = _num(e.get("trf"))
        if trf is None and rows.get(pe):
            keys = _eps_keys(rows[pe])
            trf = _trf_at(rows[pe], keys[-1]) if keys else None
        out.append({"pe": pe, "trf": trf, "grad_erf": _num(e.get("grad_erf")), "attn_erf": _num(e.get("attn_erf"))})
    return out


def _slope_groups(results: dict) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for v in (results.get("slopes") or {}).get("variants") or []:
        if v.get("pe"):
            groups.setdefault(v.get("group") or "variants", []).append(v)
    return groups


def _slopes_protocol(results: dict, variants: list[dict]) -> str | None:
    ev = results.get("eval") or {}
    return next((p for p in VERDICT_PROTOCOLS if any(p in (ev.get(v["pe"]) or {}) for v in variants)), None)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _run_path(results: dict, out_dir: Path | None, pe: str) -> Path | None:
    run = (results.get("runs") or {}).get(pe)
    if out_dir is None or not isinstance(run, dict) or not run.get("run_dir"):
        return None
    path = Path(out_dir) / run["run_dir"]
    return path if path.is_dir() else None


def num_heads(results: dict, out_dir: Path | None = None) -> int:
    """Heads per layer: results["n_head"], else a trained run's config.json, else DEFAULT_HEADS."""
    if isinstance(results.get("n_head"), int):
        return results["n_head"]
    for pe in results.get("runs") or {}:
        path = _run_path(results, out_dir, pe)
        try:
            n = json.loads((path / "config.json").read_text())["model"]["n_head"] if path else None
        except (OSError, ValueError, KeyError, TypeError):
            n = None
        if isinstance(n, int) and n > 0:
            return n
    return DEFAULT_HEADS


"""The claims checklist: each paper claim judged ✔ / ✘ / – against the study's numbers."""

from __future__ import annotations

from extrap.report.alignment import alignment_claims
from extrap.report.results import (PAPER_SLIDING_RELATIVE, SLIDING_SLOWER_FACTOR, SPEARMAN_MIN, SPEARMAN_MIN_N,
                                   _eps_keys, _fmt, _match, _num, _trf_at, pe_verdict, theory_rows)


def _claim(claim: str, ok: bool | None, evidence: str, source: str) -> dict:
    return {"claim": claim, "ok": ok, "evidence": evidence, "source": source}


def _verdict_text(results: dict, pe: str) -> str:
    ext, worst, proto = pe_verdict(results, pe)
    if proto is None:
        return f"{pe}: no verdict"
    word = "extrapolates" if ext else "does not extrapolate"
    return f"{pe}: {word} (worst |Δppl|/ppl {_fmt(worst, 3)}, {proto})"


def _claim_convergent(results: dict) -> dict:
    name, src = "Convergent RPEs extrapolate", "000 Theorem 0.4, Figs. 3/4"
    conv = [pe for pe, rows in theory_rows(results).items()
            if rows and all(r.get("verdict") == "converges" for r in rows)]
    judged = [pe for pe in conv if pe_verdict(results, pe)[0] is not None]
    unjudged = [pe for pe in conv if pe not in judged]
    if not judged:
        why = "no PE with a convergent series was evaluated" if conv else "no PE has a convergent verdict"
        return _claim(name, None, why, src)
    ok = all(pe_verdict(results, pe)[0] for pe in judged)
    ev = "; ".join(_verdict_text(results, pe) for pe in judged)
    if unjudged:
        ev += f". Not evaluated: {', '.join(unjudged)}"
    return _claim(name, ok, ev, src)


def _claim_not_extrapolate(results: dict, claim: str, names: list[str], source: str) -> dict:
    """Every PE in ``names`` must have extrapolates == False."""
    found = {n: _match(results.get("eval") or {}, n) for n in names}
    verdicts = {n: pe_verdict(results, pe)[0] if pe else None for n, pe in found.items()}
    parts = [_verdict_text(results, pe) if pe else f"{n}: not evaluated" for n, pe in found.items()]
    if any(v is True for v in verdicts.values()):
        ok = False  # one counterexample is enough, whatever else is missing
    elif any(v is None for v in verdicts.values()):
        ok = None
    else:
        ok = True
    return _claim(claim, ok, "; ".join(parts), source)


def _claim_trf_types(results: dict) -> dict:
    name, src = "TRF(Type2) < TRF(Type1)", "000 Theorem 0.5, Fig. 6"
    rows = theory_rows(results)
    t1, t2 = (rows.get(_match(rows, n) or "", []) for n in ("type1", "type2"))
    if not t1 or not t2:
        return _claim(name, None, "theory rows for type1 and type2 are both needed", src)
    pairs = [(e, _trf_at(t1, e), _trf_at(t2, e)) for e in _eps_keys(t1 + t2)]
    pairs = [(e, a, b) for e, a, b in pairs if a is not None and b is not None]
    if not pairs:
        return _claim(name, None, "no ε with a TRF for both type1 and type2", src)
    ok = all(b < a for _, a, b in pairs)
    ev = "; ".join(f"ε={e}: Type1 {a}, Type2 {b}" for e, a, b in pairs)
    return _claim(name, ok, ev, src)


def _slope_claim(results: dict, group: str, claim: str, source: str) -> dict:
    """003 §4: within a group, the mildest variants extrapolate and the most extreme one does not."""
    variants = [v for v in (results.get("slopes") or {}).get("variants", []) if v.get("group") == group]
    seen = [(v["label"], *pe_verdict(results, v["pe"])[:2]) for v in variants]
    seen = [x for x in seen if x[1] is not None]
    if len(seen) < 2:
        return {"claim": claim, "ok": None, "evidence": "fewer than two variants evaluated", "source": source}
    evidence = "; ".join(f"{lab}: {'extrapolates' if ok else 'does not'} ({w:.3g})" for lab, ok, w in seen)
    ok = seen[0][1] is True and seen[-1][1] is False
    return {"claim": claim, "ok": ok, "evidence": evidence, "source": source}


def _slope_claims(results: dict) -> list[dict]:
    return [
        _slope_claim(results, "shift", "Shifting every slope down (larger Δ) breaks extrapolation", "003 §4.1, Table 1"),
        _slope_claim(results, "same-h", "One slope for all heads extrapolates only when it is large (small h)",
                     "003 §4.2, Table 1"),
        _slope_claim(results, "window", "Windowed attention extrapolates for small w and fails for large w",
                     "003 §4.3, Table 1"),
    ]


def _claim_spearman(results: dict) -> dict:
    name, src = "TRF and ERF trends agree", "000 Figs. 5-6"
    sp = results.get("spearman") or {}
    grad, attn, n = _num(sp.get("grad")), _num(sp.get("attn")), sp.get("n")
    rho, kind = (grad, "gradient") if grad is not None else (attn, "attention")
    ev = f"Spearman ρ(TRF, grad ERF) = {_fmt(grad, 3)}, ρ(TRF, attn ERF) = {_fmt(attn, 3)}, n = {_fmt(n)} PEs"
    if rho is None:
        return _claim(name, None, ev + " (no correlation computed)", src)
    if not isinstance(n, int) or n < SPEARMAN_MIN_N:
        return _claim(name, None, ev + f" (fewer than {SPEARMAN_MIN_N} PEs: too few to rank)", src)
    return _claim(name, rho >= SPEARMAN_MIN, ev + f"; judged on the {kind} ERF, threshold ρ ≥ {SPEARMAN_MIN}", src)


def _timing_row(results: dict, method: str) -> dict | None:
    return next((r for r in (results.get("timing") or {}).get("rows") or [] if r.get("method") == method), None)


def _mean(xs) -> float | None:
    vals = [v for x in xs or [] if (v := _num(x)) is not None]
    return sum(vals) / len(vals) if vals else None


def sliding_relative(results: dict) -> float | None:
    """Average sliding-window time relative to nonoverlapping (000 Table 1)."""
    row = _timing_row(results, "sliding")
    if row is None:
        return None
    rel = _num(row.get("relative"))
    if rel is None:  # recompute from the raw seconds when the ratio was not stored
        base, slow = _mean((_timing_row(results, "nonoverlapping") or {}).get("seconds")), _mean(row.get("seconds"))
        rel = slow / base if base and slow is not None else None
    return rel


def _claim_timing(results: dict) -> dict:
    name, src = "Sliding-window inference is much slower than non-overlapping", "000 Table 1"
    rel = sliding_relative(results)
    if rel is None:
        return _claim(name, None, "no sliding / nonoverlapping timing", src)
    ev = (f"sliding / nonoverlapping average time = {rel:.2f}× (paper: {PAPER_SLIDING_RELATIVE}×); "
          f"threshold ≥ {SLIDING_SLOWER_FACTOR:g}×")
    return _claim(name, rel >= SLIDING_SLOWER_FACTOR, ev, src)


def compute_claims(results: dict) -> list[dict]:
    """The claims checklist: [{"claim", "ok": True | False | None, "evidence", "source"}]."""
    if results.get("experiment") == "alignment":  # 004's claims
        return alignment_claims(results)
    if results.get("experiment") == "alibi-slopes":
        return _slope_claims(results) + [_claim_spearman(results)]
    return [
        _claim_convergent(results),
        _claim_not_extrapolate(results, "1/n and 1/(n ln n) do not extrapolate", ["example1", "example2"],
                               "000, Validating the Necessity, Fig. 4"),
        _claim_not_extrapolate(results, "Sinusoidal does not extrapolate", ["sinusoidal"], "000 Fig. 3"),
        _claim_trf_types(results),
        _claim_spearman(results),
        _claim_timing(results),
    ]


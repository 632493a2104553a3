"""The claims of experiments ``extrapolation`` (000) and ``alibi-slopes`` (003 §4), each judged ✔ / ✘ / –.

A claim is True only when the data reproduce it, False when they contradict it, None when
the data it needs are missing: nothing is forced.  Claims about trained models are judged
only on the models that learned (:mod:`extrap.report.gate`); a claim none of whose models learned is
"not tested" (``untested``), with the losses and the unigram entropy as evidence.  Claims
about the formulas alone (TRF(Type2) < TRF(Type1)) and about inference cost do not depend
on training.
"""

from __future__ import annotations

from extrap.experiments.extrapolation.lookup import eps_keys, num_heads, pe_verdict, widest_head_trf
from extrap.experiments.extrapolation.results import block
from extrap.experiments.extrapolation.values import (
    PAPER_SLIDING_RELATIVE,
    PARAMS_WORDS,
    SLIDING_SLOWER_FACTOR,
    SPEARMAN_MIN,
    SPEARMAN_MIN_N,
    match_spec,
    trf_setting,
)
from extrap.report.gate import left_out_note, not_tested
from extrap.report.gate import split as gate_split
from extrap.report.values import fmt, num
from extrap.results import Claim, StudyResults


def verdict_text(results: StudyResults, pe: str) -> str:
    ext, worst, proto = pe_verdict(results, pe)
    if proto is None:
        return f"{pe}: no verdict"
    word = "extrapolates" if ext else "does not extrapolate"
    return f"{pe}: {word} (worst |Δppl|/ppl {fmt(worst, 3)}, {proto})"


def claim_convergent(results: StudyResults) -> Claim:
    name, src = "Convergent RPEs extrapolate", "000 Theorem 0.4, Figs. 3/4"
    theory = block(results).model_theory()
    conv = [pe for pe, rows in theory.items() if rows and all(r.verdict == "converges" for r in rows)]
    judged = [pe for pe in conv if pe_verdict(results, pe)[0] is not None]
    unjudged = [pe for pe in conv if pe not in judged]
    if not judged:
        why = "no PE with a convergent series was evaluated" if conv else "no PE has a convergent verdict"
        return Claim(name, None, why, src)
    gate = gate_split(results, judged)
    if not gate.learned:
        return Claim(name, None, not_tested(results, gate), src, untested=True)
    ok = all(pe_verdict(results, pe)[0] for pe in gate.learned)
    ev = "; ".join(verdict_text(results, pe) for pe in gate.learned)
    if unjudged:
        ev += f". Not evaluated: {', '.join(unjudged)}"
    return Claim(name, ok, ev + left_out_note(results, gate), src)


def claim_not_extrapolate(results: StudyResults, claim: str, names: list[str], source: str) -> Claim:
    """Every PE in ``names`` must have extrapolates == False (judged on models that learned)."""
    found = {n: match_spec(results.eval, n) for n in names}
    gate = gate_split(results, [pe for pe in found.values() if pe and pe_verdict(results, pe)[0] is not None])
    verdicts = {n: pe_verdict(results, pe)[0] if pe in gate.learned else None for n, pe in found.items()}
    parts = [
        verdict_text(results, pe) if pe else f"{n}: not evaluated" for n, pe in found.items() if pe not in gate.left_out
    ]
    if any(v is True for v in verdicts.values()):
        ok = False  # one counterexample is enough, whatever else is missing
    elif any(v is None for v in verdicts.values()):
        ok = None
    else:
        ok = True
    ev = "; ".join(parts)
    if not gate.learned and gate.left_out:
        return Claim(claim, None, "; ".join([not_tested(results, gate)] + parts), source, untested=True)
    untested = True if ok is None and gate.left_out else None
    return Claim(claim, ok, ev + left_out_note(results, gate), source, untested=untested)


FORMULA_EPS = ("0.001", "1e-06")  # ε of the TRF claim when the results hold no theory rows to take them from


def formula_trf(pe: str, eps: str, heads: int) -> int | None:
    """The TRF of ``pe``'s formula at its initial parameters (000 Eq. 22), as the study takes it (STUDY_TRF)."""
    from extrap.theory import STUDY_TRF, receptive_field

    return receptive_field(pe, eps=float(eps), reduce=STUDY_TRF.reduce, num_heads=heads).value


def claim_trf_types(results: StudyResults) -> Claim:
    """A property of the formulas: judged from the study's theory rows, else from the formulas themselves."""
    name, src = "TRF(Type2) < TRF(Type1)", "000 Theorem 0.5, Fig. 6"
    rows = {pe: [r for r in rs if not r.trained] for pe, rs in block(results).theory_by_pe().items()}  # the formulas
    t1, t2 = (rows.get(match_spec(rows, n) or "", []) for n in ("type1", "type2"))
    if t1 and t2:
        pairs = [(e, widest_head_trf(t1, e), widest_head_trf(t2, e)) for e in eps_keys(t1 + t2)]
        how = "initial parameters"
    else:  # the study ran neither (or one): the claim needs no model, so the formulas decide it
        heads = num_heads(results)
        eps = eps_keys([r for rs in rows.values() for r in rs]) or list(FORMULA_EPS)
        pairs = [(e, formula_trf("type1", e, heads), formula_trf("type2", e, heads)) for e in eps]
        how = f"from the formulas with {heads} heads: the study did not run both"
    pairs = [(e, a, b) for e, a, b in pairs if a is not None and b is not None]
    if not pairs:
        return Claim(name, None, "no ε with a TRF for both type1 and type2", src)
    ok = all(b < a for _, a, b in pairs)
    ev = "; ".join(f"ε={e}: Type1 {a}, Type2 {b}" for e, a, b in pairs)
    return Claim(name, ok, ev + f" (TRF of the widest head, {how})", src)


def slope_claim(results: StudyResults, group: str, claim: str, source: str) -> Claim:
    """003 §4: within a group, the mildest variants extrapolate and the most extreme one does not."""
    slopes = block(results).slopes
    variants = [v for v in (slopes.variants if slopes else []) if v.group == group]
    seen = [(v.label, *pe_verdict(results, v.pe)[:2], v.pe) for v in variants]
    seen = [x for x in seen if x[1] is not None]
    if len(seen) < 2:
        return Claim(claim, None, "fewer than two variants evaluated", source)
    gate = gate_split(results, [x[3] for x in seen])
    if gate.left_out:  # the claim compares the mildest with the most extreme: every one must have learned
        return Claim(claim, None, not_tested(results, gate), source, untested=True)
    evidence = "; ".join(f"{lab}: {'extrapolates' if ok else 'does not'} ({fmt(w, 3)})" for lab, ok, w, _ in seen)
    return Claim(claim, seen[0][1] is True and seen[-1][1] is False, evidence, source)


def slope_claims(results: StudyResults) -> list[Claim]:
    return [
        slope_claim(results, "shift", "Shifting every slope down (larger Δ) breaks extrapolation", "003 §4.1, Table 1"),
        slope_claim(
            results,
            "same-h",
            "One slope for all heads extrapolates only when it is large (small h)",
            "003 §4.2, Table 1",
        ),
        slope_claim(
            results, "window", "Windowed attention extrapolates for small w and fails for large w", "003 §4.3, Table 1"
        ),
    ]


def learned_rho(results: StudyResults, pes: list[str]) -> tuple[float | None, float | None]:
    """Spearman ρ of TRF against the gradient and the attention ERF over ``pes`` only."""
    from extrap.erf import spearman

    erf = block(results).erf
    rows = [erf[pe] for pe in pes]
    grad = spearman([num(e.trf) for e in rows], [num(e.grad_erf) for e in rows])
    attn = [num(e.attn_erf) for e in rows]
    return grad, spearman([num(e.trf) for e in rows], attn) if None not in attn else None


def claim_spearman(results: StudyResults) -> Claim:
    name, src = "TRF and ERF trends agree", "000 Figs. 5-6"
    own = block(results)
    sp = own.spearman
    if sp is None:
        return Claim(name, None, "no TRF/ERF correlation section", src)
    grad, attn, n = num(sp.grad), num(sp.attn), sp.n
    ranked = [pe for pe, e in own.erf.items() if num(e.trf) is not None and num(e.grad_erf) is not None]
    gate = gate_split(results, ranked)
    if ranked and not gate.learned:
        return Claim(name, None, not_tested(results, gate), src, untested=True)
    if gate.left_out:  # rank only the models that learned
        ranked, n = gate.learned, len(gate.learned)
        grad, attn = learned_rho(results, ranked) if n >= 2 else (None, None)
    rho, kind = (grad, "gradient") if grad is not None else (attn, "attention")
    ev = (
        f"Spearman ρ(TRF, grad ERF) = {fmt(grad, 3)}, ρ(TRF, attn ERF) = {fmt(attn, 3)}, n = {fmt(n)} PEs"
        + (f" ({', '.join(ranked)})" if ranked else "")
        + f"; TRF: {trf_setting(sp.trf_eps, sp.trf_reduce)}, {PARAMS_WORDS[sp.params]}"
    )
    note = left_out_note(results, gate)
    if rho is None:
        return Claim(name, None, ev + " (no correlation computed)" + note, src, untested=bool(note) or None)
    if not isinstance(n, int) or n < SPEARMAN_MIN_N:
        why = f" (fewer than {SPEARMAN_MIN_N} PEs: too few to rank)"
        return Claim(name, None, ev + why + note, src, untested=bool(note) or None)
    ok = rho >= SPEARMAN_MIN
    return Claim(name, ok, ev + f"; judged on the {kind} ERF, threshold ρ ≥ {SPEARMAN_MIN}" + note, src)


def _mean(xs) -> float | None:
    vals = [v for x in xs or [] if (v := num(x)) is not None]
    return sum(vals) / len(vals) if vals else None


def sliding_relative(results: StudyResults) -> float | None:
    """Average sliding-window time relative to nonoverlapping (000 Table 1)."""
    timing = block(results).timing
    row = timing.row("sliding") if timing else None
    if row is None:
        return None
    rel = num(row.relative)
    if rel is None:  # recompute from the raw seconds when the ratio was not stored
        base_row = timing.row("nonoverlapping")
        base, slow = _mean(base_row.seconds if base_row else None), _mean(row.seconds)
        rel = slow / base if base and slow is not None else None
    return rel


def claim_timing(results: StudyResults) -> Claim:
    name, src = "Sliding-window inference is much slower than non-overlapping", "000 Table 1"
    rel = sliding_relative(results)
    if rel is None:
        return Claim(name, None, "no sliding / nonoverlapping timing", src)
    pe = block(results).timing.pe
    model = f" ({pe})" if pe else ""
    ev = (
        f"sliding / nonoverlapping average time{model} = {rel:.2f}× (paper: {PAPER_SLIDING_RELATIVE}×); "
        f"threshold ≥ {SLIDING_SLOWER_FACTOR:g}×"
    )
    return Claim(name, rel >= SLIDING_SLOWER_FACTOR, ev, src)


def slope_study_claims(results: StudyResults) -> list[Claim]:
    """Experiment alibi-slopes: 003 §4's three slope claims and the TRF/ERF trend."""
    return slope_claims(results) + [claim_spearman(results)]


def extrapolation_claims(results: StudyResults) -> list[Claim]:
    """Experiment extrapolation: 000's claims."""
    return [
        claim_convergent(results),
        claim_not_extrapolate(
            results,
            "1/n and 1/(n ln n) do not extrapolate",
            ["example1", "example2"],
            "000, Validating the Necessity, Fig. 4",
        ),
        claim_not_extrapolate(results, "Sinusoidal does not extrapolate", ["sinusoidal"], "000 Fig. 3"),
        claim_trf_types(results),
        claim_spearman(results),
        claim_timing(results),
    ]

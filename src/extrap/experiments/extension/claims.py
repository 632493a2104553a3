"""The claims of ``extrap study --experiment extension`` and its goal line.

Claims (judged only when the model learned, :mod:`.gate`; never forced):

* "Methods that keep every distance within L_tr keep PPL flat": every distance-map method the extend theory
  keeps in distribution at every measured length (max distance <= L_tr − 1) must have no measured break
  (no length whose |Δppl|/ppl against its own L_tr exceeds δ beyond its noise).  ✘ on one that breaks.
* "A window without sinks breaks a RoPE model where sinks plus the same window do not" (StreamingLLM,
  Xiao et al. 2024): ``window`` must break, and ``sinks`` (the same L_tr keys per query, 4 of them the
  first) must not break there or before.

The goal line (issue 21): the in-distribution method (at the longest length) with the best passkey
accuracy there, against 0.9 × its accuracy at L_tr: met or not met, as measured.
"""

from __future__ import annotations

from extrap.experiments.extension.results import ExtensionMethod, block
from extrap.report.gate import left_out_note, not_tested
from extrap.report.gate import split as gate_split
from extrap.report.values import fmt
from extrap.results import Claim, StudyResults

FLAT = "Methods that keep every distance within L_tr keep PPL flat"
SINKS = "A window without sinks breaks a RoPE model where sinks plus the same window do not"
FLAT_SOURCE = "extrap theory --extend (max distance <= L_tr - 1); 000 Definition 0.1"
SINKS_SOURCE = "StreamingLLM, Xiao et al., ICLR 2024, Fig. 3"
GOAL_FRACTION = 0.9  # issue 21: retrieval at 16 × L_tr within 0.9 of retrieval at L_tr


def within(m: ExtensionMethod, lengths) -> bool:
    """In distribution at every measured length by the distance definition."""
    return m.basis == "distance" and len(m.in_distribution) == len(lengths) and all(m.in_distribution)


def gated(results: StudyResults, name: str, source: str) -> Claim | None:
    """The not-tested claim when the model did not learn (or that is unknown), else None."""
    b = block(results)
    gate = gate_split(results, [b.pe] if b.pe else [])
    return None if gate.learned else Claim(name, None, not_tested(results, gate), source, untested=True)


def claim_flat(results: StudyResults) -> Claim:
    b = block(results)
    kept = [m for m in b.methods.values() if within(m, b.lengths)]
    if not kept:
        return Claim(FLAT, None, "no measured method keeps every distance within L_tr", FLAT_SOURCE)
    stop = gated(results, FLAT, FLAT_SOURCE)
    if stop is not None:
        return stop
    said = [f"{m.name}: break {m.measured_break or 'none'}" + (" ✘" if m.measured_break else "") for m in kept]
    how = f"; break: the first length with |Δppl|/ppl > δ = {fmt(b.delta)} beyond its 95% interval"
    return Claim(FLAT, all(m.measured_break is None for m in kept), "; ".join(said) + how, FLAT_SOURCE)


def claim_sinks(results: StudyResults) -> Claim:
    b = block(results)
    w, s = b.methods.get("window"), b.methods.get("sinks")
    if w is None or s is None:
        return Claim(SINKS, None, "window and sinks were not both measured", SINKS_SOURCE)
    stop = gated(results, SINKS, SINKS_SOURCE)
    if stop is not None:
        return stop
    ok = w.measured_break is not None and (s.measured_break is None or s.measured_break > w.measured_break)
    ev = (
        f"window (last {b.train_length} keys): break {w.measured_break or 'none'}; sinks ({s.spec}): break "
        f"{s.measured_break or 'none'}; ppl at {max(b.lengths, default='–')}: window {fmt(last_ppl(w), 4)}, "
        f"sinks {fmt(last_ppl(s), 4)}" + left_out_note(results, gate_split(results, [b.pe]))
    )
    return Claim(SINKS, ok, ev, SINKS_SOURCE)


def last_ppl(m: ExtensionMethod) -> float | None:
    return m.ppl[-1].ppl if m.ppl else None


def claims(results: StudyResults) -> list[Claim]:
    return [claim_flat(results), claim_sinks(results)]


def goal_line(results: StudyResults) -> str:
    """The issue's goal as measured: met / not met, or why it cannot be judged."""
    b = block(results)
    if not b.lengths:
        return "Goal (retrieval at the longest length within 0.9 of L_tr): no measurements"
    longest, L_tr = max(b.lengths), b.train_length
    head = f"Goal: the best in-distribution method's passkey accuracy at {longest} (L_tr × {longest // L_tr})"
    inside = [m for m in b.methods.values() if m.in_distribution[-1:] == (True,) and m.passkey_at(longest) is not None]
    if not inside:
        return f"{head}: no method is in distribution there with a passkey accuracy"
    best = max(inside, key=lambda m: m.passkey_at(longest))
    acc, ref = best.passkey_at(longest), best.passkey_at(L_tr)
    if not ref:
        return f"{head}: {best.name} {fmt(acc, 2)}, but its accuracy at L_tr is {fmt(ref, 2)}: not met"
    met = acc >= GOAL_FRACTION * ref
    return (
        f"{head} vs {GOAL_FRACTION} × its accuracy at L_tr: {best.name} {acc:.2f} vs {GOAL_FRACTION} × {ref:.2f} = "
        f"{GOAL_FRACTION * ref:.2f}: {'met' if met else 'not met'}"
    )

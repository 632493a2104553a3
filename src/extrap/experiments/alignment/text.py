"""How the alignment report names settings and prints τ."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from extrap.align.records import ClosedForms, LogLengthForm

LABELS = {"none": "no alignment (τ = 1)", "pmax": "w/ P_max", "entropy": "w/ H", "pmax-layer": "w/ P_max per layer"}


def tau_text(t) -> str:
    """One τ, or a per-layer list, to three decimals."""
    return "[" + ", ".join(f"{x:.3f}" for x in t) + "]" if isinstance(t, list) else f"{t:.3f}"


def closed_form_value(cf: ClosedForms | LogLengthForm | None, mode: str):
    """The τ of a closed-form ``mode`` (prop1, prop2, log-length), or "no root" where Prop. 1 has none
    (extrap.align.prop1: no real / no valid root)."""
    if cf is None:
        return None
    v = cf.tau(mode)
    if mode == "prop1" and v is None and cf.prop1_status is not None:
        return "no root"
    return v


def closed_form_text(v) -> str:
    return v if isinstance(v, str) else "–" if v is None else f"{v:.3f}"

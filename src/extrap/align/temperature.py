"""Temperature requests (004): none, one τ, one τ per layer, or ``auto`` alignment at each L_ex.

:func:`parse_temperature_spec` reads what ``--temperature`` and the Python API accept into a
:class:`TemperatureSpec`; :func:`check_layer_taus` checks a per-layer list against a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extrap.align.formulas import SEARCH_MODES, check_mode, check_tau
from extrap.errors import ExtrapError

PER_LAYER = "per-layer"
TEMPERATURE_FORMS = "none, TAU, TAU_1,...,TAU_R (one per layer) or auto[:MODE][:per-layer]"


@dataclass(frozen=True)
class TemperatureSpec:
    """A temperature request: none, one τ, one τ per layer, or ``auto`` (004 alignment at each L_ex).

    ``kind``: "none" | "fixed" | "layers" | "auto".  ``tau``: the τ (fixed) or the τs (layers).
    ``mode``: the alignment mode named after ``auto:`` (None: the caller's default).  ``per_layer``:
    ``auto:per-layer``, Algorithm 1 layer by layer (one aligned τ per layer).
    """

    kind: str
    tau: float | tuple[float, ...] | None = None
    mode: str | None = None
    per_layer: bool = False

    def value(self) -> float | list[float] | str | None:
        """The canonical form: None, a float, a list of floats, or "auto[:MODE][:per-layer]"."""
        if self.kind == "none":
            return None
        if self.kind == "fixed":
            return float(self.tau)
        if self.kind == "layers":
            return list(self.tau)
        return ":".join(["auto", *([self.mode] if self.mode else []), *([PER_LAYER] if self.per_layer else [])])


def parse_temperature_spec(value) -> TemperatureSpec:
    """Read a temperature given as None, a number, a list of numbers, or text.

    Text: ``none``; ``TAU``; ``TAU_1,...,TAU_R`` (one per layer, checked against the model by
    :func:`check_layer_taus` where the model is known); ``auto``, ``auto:MODE``, ``auto:per-layer``
    or ``auto:MODE:per-layer``.  A mistake raises ExtrapError in one line.
    """
    if isinstance(value, TemperatureSpec):
        return value
    if value is None:
        return TemperatureSpec("none")
    if isinstance(value, (list, tuple)):
        if not value:
            raise ExtrapError("temperature: the list of per-layer values is empty")
        return TemperatureSpec("layers", tuple(check_tau(list(value))))
    if not isinstance(value, str):
        return TemperatureSpec("fixed", check_tau(value))
    text = value.strip().lower()
    if text in ("", "none"):
        return TemperatureSpec("none")
    if text.split(":")[0] == "auto":
        return _auto_spec(text.split(":")[1:])
    try:
        taus = [float(x) for x in text.split(",")]
    except ValueError:
        raise ExtrapError(f"temperature must be {TEMPERATURE_FORMS}, got {value!r}") from None
    if "," in text:
        return TemperatureSpec("layers", tuple(check_tau(taus)))
    return TemperatureSpec("fixed", check_tau(taus[0]))


def _auto_spec(parts: list[str]) -> TemperatureSpec:
    """``auto`` followed by ``parts`` (the words after each colon): at most one mode and ``per-layer``."""
    modes = [p for p in parts if p != PER_LAYER]
    if len(modes) > 1 or parts.count(PER_LAYER) > 1:
        raise ExtrapError(f"temperature must be {TEMPERATURE_FORMS}, got {':'.join(['auto', *parts])!r}")
    mode = check_mode(modes[0]) if modes else None
    per_layer = PER_LAYER in parts
    if per_layer and mode is not None and mode not in SEARCH_MODES:
        raise ExtrapError(f"per-layer temperatures need an Algorithm 1 mode (pmax or entropy), not {mode}")
    return TemperatureSpec("auto", mode=mode, per_layer=per_layer)


def check_layer_taus(taus: Sequence[float], n_layer: int) -> list[float]:
    """One positive finite τ per layer: a list of another length is refused in one line."""
    taus = check_tau(list(taus))
    if len(taus) != n_layer:
        raise ExtrapError(
            f"temperature: {len(taus)} values given for a model with {n_layer} layers (give one τ per layer)"
        )
    return taus

"""One theoretical receptive field for a scheme or a trained model (000 Eq. 22).

:func:`receptive_field` asks :func:`extrap.theory.analyse` for n(eps) of every head
(of every layer, for a trained model whose learned bias differs between layers)
and reduces them to one number: the widest head (``max``), the ``median`` or the
``mean``, or keeps the per-head list (``none``).  A divergent head counts as an
infinite TRF (no finite window holds all but eps of its mass), so a reduction that
reaches it has no number; the :class:`TRF` then says why.

Two settings are used by extrap's commands: :data:`REPORTED_TRF`, the one TRF that
is reported beside measured receptive fields (``extrap erf`` by default and the study;
:data:`ERF_TRF` and :data:`STUDY_TRF` are the same object), and :data:`WINDOW_AUTO_TRF`,
the safety window of ``--window auto``, a different quantity.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from extrap.errors import ExtrapError
from extrap.positional.base import Scheme
from extrap.positional.content import ContentBias
from extrap.theory.analysis import DEFAULT_EPS, analyse, not_applicable_reason, resolve
from extrap.theory.results import HeadResult, check_eps, eps_key
from extrap.theory.static import static_values

log = logging.getLogger(__name__)

REDUCTIONS = ("max", "median", "mean", "none")
"""How the per-head TRFs become one number; ``none`` keeps the per-head list only."""

DIVERGES = "the series diverges"  # how an infinite head's reason starts (its JSON value is null)


@dataclass(frozen=True)
class TRFSetting:
    """The eps of n(eps) (000 Eq. 22) and the reduction over heads that one consumer uses."""

    eps: float
    reduce: str


REPORTED_TRF = TRFSetting(eps=1e-3, reduce="max")
"""The TRF that extrap reports: n(1e-3) of the widest head (over all layers for trained values).

The widest head is the model's reach: keys further back hold less than eps of *every*
head's bias mass.  eps = 1e-3 has been the study's setting from its first results (an
unlabelled TRF in a results.json means this one), so recorded TRFs keep their meaning."""

ERF_TRF = REPORTED_TRF
"""The default TRF of ``extrap erf``, ranked against the measured ERFs (the attention ERF's
own eps, 1e-2, is a separate setting of n_emp)."""

STUDY_TRF = REPORTED_TRF
"""The TRF of a study's TRF-vs-ERF comparison (initial parameters)."""

WINDOW_AUTO_TRF = TRFSetting(eps=1e-6, reduce="max")
"""``--window auto`` of evaluation, a safety window rather than a reported TRF: keys further
back than the widest head's TRF(1e-6), over all layers, hold less than 1e-6 of every head's
bias mass, so dropping them is safe."""


@dataclass(frozen=True)
class HeadTRF:
    """n(eps) of one head: an int, ``math.inf`` when its series diverges, None when unknown."""

    layer: int | None  # index into the list of per-layer values; None for a single set of values
    head: int
    value: int | float | None
    reason: str | None = None  # why there is no finite number

    @property
    def where(self) -> str:
        return f"head {self.head}" if self.layer is None else f"layer {self.layer} head {self.head}"


@dataclass(frozen=True)
class TRF:
    """The receptive field n(eps) of a scheme or model, reduced over heads (and layers).

    ``value`` is None when there is no number (``reason`` says why) and always for
    ``reduce="none"``, whose result is the per-head list :attr:`values`.  A median
    of an even count or a mean is an int when it is one, else the nearest float.
    """

    pe: str
    eps: float
    reduce: str
    value: int | float | None
    heads: tuple[HeadTRF, ...] = ()
    reason: str | None = None

    @property
    def values(self) -> list[int | float | None]:
        """The per-head n(eps), layer by layer (``math.inf``: diverges, None: unknown)."""
        return [h.value for h in self.heads]

    @property
    def widest(self) -> HeadTRF | None:
        """The first head with the largest n(eps) (None if no head has a number)."""
        known = [h for h in self.heads if h.value is not None]
        return max(known, key=lambda h: h.value) if known else None

    def to_json(self) -> dict:
        """JSON-ready (an infinite head is written as null, its reason says it diverges)."""

        def num(v):
            return None if v is None or v == math.inf else v

        return {
            "pe": self.pe,
            "eps": self.eps,
            "reduce": self.reduce,
            "value": num(self.value),
            "reason": self.reason,
            "heads": [
                {"layer": h.layer, "head": h.head, "value": num(h.value), "reason": h.reason} for h in self.heads
            ],
        }

    @classmethod
    def from_json(cls, d: dict) -> TRF:
        """A TRF as written: a head written null whose reason says its series diverges is infinite again."""

        def _head(h: dict) -> HeadTRF:
            value, reason = h.get("value"), h.get("reason")
            if value is None and (reason or "").startswith(DIVERGES):
                value = math.inf
            return HeadTRF(h.get("layer"), h.get("head"), value, reason)

        heads = tuple(_head(h) for h in d.get("heads") or ())
        return cls(d.get("pe"), d.get("eps"), d.get("reduce"), d.get("value"), heads, d.get("reason"))


Values = Mapping[str, torch.Tensor]


def receptive_field(
    scheme: Scheme | str,
    values: Values | Sequence[Values] | None = None,
    *,
    eps: float = DEFAULT_EPS[0],
    reduce: str = "max",
    num_heads: int | None = None,
) -> TRF:
    """n(eps) = min{ j : sum_{t>=j} b_t < B eps } (000 Eq. 22) of every head, reduced to one number.

    ``values``: the scheme's parameter *values* (``scheme.values(stored)``, e.g. a layer's
    ``attn.bias_values()``), each (H, ...); a list of them, one per layer, for a trained
    model (the reduction then runs over every layer and head); None for the initial
    parameters, as 000 computes the TRF "without training".  ``num_heads`` defaults to
    the heads in ``values`` (1 for a parameter-free scheme).
    """
    scheme = resolve(scheme)
    eps = check_eps(eps)
    if reduce not in REDUCTIONS:
        raise ExtrapError(f"reduce must be one of {', '.join(REDUCTIONS)}, got {reduce!r}")
    reason = not_applicable_reason(scheme)
    if reason:
        return TRF(scheme.spec, eps, reduce, None, (), f"not a Toeplitz bias: {reason}")
    if isinstance(scheme, ContentBias):  # CAPE: the TRF of its static part b, the base RPE's
        trf = receptive_field(scheme.static, static_values(scheme, values), eps=eps, reduce=reduce, num_heads=num_heads)
        return replace(trf, pe=scheme.spec)
    layers = _layers(values)
    H = _num_heads(scheme, layers, num_heads)
    results = [(layer, r) for layer, v in layers for r in analyse(scheme, H, v, eps=(eps,), lengths=())]
    heads = tuple(_head(r, eps, layer) for layer, r in results)
    value, why = _reduce_heads(heads, reduce)
    failed = [h for (_, r), h in zip(results, heads) if r.verdict == "converges" and h.value is None]
    if failed:  # the engine could not sum a convergent series (time limit, precision)
        log.warning("no TRF for %s at eps=%g: %s: %s", scheme.spec, eps, failed[0].where, failed[0].reason)
    return TRF(scheme.spec, eps, reduce, value, heads, why)


def _layers(values) -> list[tuple[int | None, Values | None]]:
    """[(layer index or None, values as float64 CPU tensors)]: float32 -> float64 is exact."""

    def cpu64(vals):
        return (
            None if vals is None else {k: torch.as_tensor(v).detach().to("cpu", torch.float64) for k, v in vals.items()}
        )

    if values is None or isinstance(values, Mapping):
        return [(None, cpu64(values))]
    layers = [cpu64(v) for v in values]
    if not layers:
        raise ExtrapError("receptive_field: the list of per-layer values is empty")
    return list(enumerate(layers))


def _num_heads(scheme, layers, num_heads: int | None) -> int:
    """The head count: given, else from the first dimension of the values (1 without parameters)."""
    shapes = [(k, v.shape[0]) for _, vals in layers if vals for k, v in vals.items() if v.dim() > 0]
    if num_heads is None:
        if shapes:
            num_heads = max(n for _, n in shapes)
        elif layers[0][1] is not None or not scheme.params(1):
            num_heads = 1  # head-independent: every head has the same TRF
        else:
            raise ExtrapError(f"receptive_field: give num_heads for the initial parameters of {scheme.spec}")
    bad = sorted({k for k, n in shapes if n != num_heads})
    if bad:
        raise ExtrapError(f"receptive_field: parameter(s) {', '.join(bad)} do not have {num_heads} heads")
    return num_heads


def _head(r: HeadResult, eps: float, layer: int | None) -> HeadTRF:
    """One head's n(eps) from the engine's verdict (000 Theorem 0.4) and its TRF (Eq. 22)."""
    if r.verdict == "converges":
        n = r.trf.get(eps_key(eps))
        if n is not None:
            return HeadTRF(layer, r.head, n)
        note = (r.trf_note or "not computed").removeprefix(f"eps={eps_key(eps)}: ")
        return HeadTRF(layer, r.head, None, f"no TRF at eps={eps_key(eps)}: {note}")
    if r.verdict == "diverges":
        return HeadTRF(layer, r.head, math.inf, f"{DIVERGES} ({r.test})")
    if r.verdict == "inconclusive":
        return HeadTRF(layer, r.head, None, "no test decides whether the series converges")
    return HeadTRF(layer, r.head, None, r.explanation)


def _reduce_heads(heads: tuple[HeadTRF, ...], how: str) -> tuple[int | float | None, str | None]:
    """(number, None) or (None, why)."""
    if how == "none":
        return None, None
    unknown = [h for h in heads if h.value is None]
    if unknown:
        return None, f"{unknown[0].where}: {unknown[0].reason}"
    value = reduce_values([h.value for h in heads], how)
    if value != math.inf:
        return value, None
    infinite = [h for h in heads if h.value == math.inf]
    count = f" ({len(infinite)} of {len(heads)} heads diverge)" if len(infinite) > 1 else ""
    return None, f"{infinite[0].where}: {infinite[0].reason}{count}"


def reduce_values(values: list[int | float], how: str) -> int | float:
    """max, median or mean of per-head TRFs, exact on ints (``math.inf`` for a divergent head)."""
    if how == "max":
        return max(values)
    if how == "mean":
        if math.inf in values:
            return math.inf
        return _ratio(sum(values), len(values))
    if how != "median":
        raise ExtrapError(f"reduce must be one of max, median, mean, got {how!r}")
    s = sorted(values)
    mid = len(s) // 2
    if len(s) % 2:
        return s[mid]
    if math.inf in (s[mid - 1], s[mid]):
        return math.inf
    return _ratio(s[mid - 1] + s[mid], 2)


def _ratio(a, b: int) -> int | float:
    """a / b as an int when it is one, else the nearest float (Python divides ints exactly)."""
    if isinstance(a, int) and a % b == 0:
        return a // b
    return a / b


__all__ = [
    "ERF_TRF",
    "REDUCTIONS",
    "REPORTED_TRF",
    "STUDY_TRF",
    "TRF",
    "WINDOW_AUTO_TRF",
    "HeadTRF",
    "TRFSetting",
    "receptive_field",
    "reduce_values",
]

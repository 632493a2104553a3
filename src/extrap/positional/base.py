"""Scheme base classes and the option parser shared by every positional scheme."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from extrap.errors import ExtrapError
from extrap.positional import conventions, ops

if TYPE_CHECKING:
    import sympy
    import torch


@dataclass(frozen=True)
class Param:
    """A per-head parameter of a bias RPE.

    ``init(num_heads)`` returns the *values* (first dimension H).  A ``positive``
    parameter is stored by the model as ``raw`` with ``value = softplus(raw)``;
    :meth:`BiasRPE.values` applies that map, so the bias function always sees the
    actual value (r1, r2, ...), and so does the theory engine.
    """

    name: str
    init: Callable[[int], torch.Tensor]
    learnable: bool = False
    positive: bool = False
    doc: str = ""


def inverse_softplus(v: torch.Tensor) -> torch.Tensor:
    """raw such that softplus(raw) == v (v > 0)."""
    import torch  # here, not at the top: the registry loads without torch

    return v + torch.log(-torch.expm1(-v))


@dataclass(frozen=True)
class Option:
    """A user-settable option of a scheme, parsed from ``name:key=value``."""

    name: str
    type: type
    default: Any
    doc: str = ""
    check: Callable[[Any], bool] | None = None
    check_msg: str = ""


class Scheme:
    """A positional scheme: one entry of the registry.

    Subclasses set ``name``, ``kind`` and ``reference``; options declared in
    ``OPTIONS`` are parsed from the spec string and stored in ``self.opts``.
    """

    name: ClassVar[str]
    kind: ClassVar[str]  # "bias" | "ape" | "rotary" | "none"
    reference: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    OPTIONS: ClassVar[tuple[Option, ...]] = ()
    POSITIONAL_OPTION: ClassVar[str | None] = None  # e.g. window:64 -> W=64
    theory_reason: ClassVar[str | None] = None  # why Theorem 0.4 does not apply, when the kind alone does not say

    def __init__(self, **opts: Any):
        known = {o.name: o for o in self.OPTIONS}
        self.opts: dict[str, Any] = {o.name: o.default for o in self.OPTIONS}
        for key, raw in opts.items():
            if key not in known:
                names = ", ".join(known) or "none"
                raise ExtrapError(f"{self.name}: unknown option '{key}' (options: {names})")
            opt = known[key]
            value = _convert(self.name, opt, raw)
            if opt.check is not None and not opt.check(value):
                raise ExtrapError(f"{self.name}: option {key}={raw} is invalid: {opt.check_msg}")
            self.opts[key] = value
        self.validate()

    def validate(self) -> None:
        """Cross-option checks; raise ExtrapError."""

    def train_bytes(self, *, batch: int, length: int, max_position: int, n_head: int, n_layer: int, d_model: int):
        """A lower bound on the memory one training step needs for this scheme's own work, beyond the
        parameters and the activations every model has (:mod:`extrap.memory`); 0 for most schemes."""
        return 0

    # ---- capabilities: what the model, the theory and the plots ask of a scheme ----------
    @property
    def adds_bias(self) -> bool:
        """It adds a non-zero r to the attention logits (a bias RPE other than NoPE)."""
        return False

    @property
    def is_toeplitz(self) -> bool:
        """Its bias depends on the distance t alone (a Toeplitz matrix r(i - j))."""
        return False

    @property
    def rotates(self) -> bool:
        """It rotates queries and keys (RoPE, xPos and their interpolations)."""
        return False

    @property
    def embeds(self) -> bool:
        """It adds an absolute embedding to the token embeddings (APE)."""
        return False

    @property
    def learned(self) -> bool:
        """Training changes it: learnable bias parameters or a learned position table."""
        return False

    @property
    def spec(self) -> str:
        """Canonical spec string that recreates this scheme through the registry."""
        changed = {o.name: self.opts[o.name] for o in self.OPTIONS if self.opts[o.name] != o.default}
        if not changed:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_fmt(v)}" for k, v in changed.items())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) < 1e15 else repr(v)
    return str(v)


def _convert(scheme: str, opt: Option, raw: Any) -> Any:
    value = _parse(scheme, opt, raw)
    if opt.type is int and not -(2**63) <= value < 2**63:  # torch compares distances in int64
        raise ExtrapError(f"{scheme}: option {opt.name}={raw} is out of range (|value| < 2**63)")
    return value


def _parse(scheme: str, opt: Option, raw: Any) -> Any:
    if not isinstance(raw, str):
        return opt.type(raw)
    try:
        if opt.type is bool:
            if raw.lower() in ("1", "true", "yes"):
                return True
            if raw.lower() in ("0", "false", "no"):
                return False
            raise ValueError
        if opt.type is int:
            f = float(raw)
            if not f.is_integer():
                raise ValueError
            return int(f)
        value = opt.type(raw)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError
        return value
    except ValueError:
        raise ExtrapError(f"{scheme}: option {opt.name}={raw!r} is not a valid {opt.type.__name__}") from None


class BiasRPE(Scheme):
    """A relative positional encoding that adds ``r(t)`` to the attention logits.

    Subclasses implement :meth:`fn`, the single definition of the bias, written
    with the backend namespace ``xp`` (see :mod:`extrap.positional.ops`).
    """

    kind = "bias"
    is_identity: ClassVar[bool] = False  # r == 0 everywhere (NoPE): the model skips the bias
    toeplitz: ClassVar[bool] = True  # r depends on t only (False for FIRE: it also uses i)
    bidirectional_ok: ClassVar[bool] = False
    # r(t) costs O(d) per (query, key) pair (Sandwich's d̄/2 cosines): FlexAttention reads it from the
    # r(t) table by default instead of computing it in its kernel (extrap.model.flex)
    flex_table: ClassVar[bool] = False
    # not Toeplitz, but ``fn`` evaluates on the FLEX backend given the query position i (FIRE): FlexAttention
    # computes it in its kernel from q_idx (formula mode only: no r(t) table holds it)
    flex_query: ClassVar[bool] = False

    def params(self, num_heads: int) -> list[Param]:
        return []

    @property
    def adds_bias(self) -> bool:
        return not self.is_identity

    @property
    def is_toeplitz(self) -> bool:
        return self.adds_bias and self.toeplitz

    @property
    def learned(self) -> bool:
        return any(q.learnable for q in self.params(1))

    def fn(self, xp, t, p: dict[str, Any], i=None):  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- parameters -------------------------------------------------------------
    def init_values(self, num_heads: int) -> dict[str, torch.Tensor]:
        if num_heads <= 0:
            raise ExtrapError(f"number of heads must be positive, got {num_heads}")
        import torch

        return {q.name: q.init(num_heads).to(torch.float64) for q in self.params(num_heads)}

    def values(self, stored: dict[str, torch.Tensor], num_heads: int) -> dict[str, torch.Tensor]:
        """Map stored tensors (raw for positive parameters) to the values the bias uses."""
        import torch

        out = {}
        for q in self.params(num_heads):
            v = stored[q.name]
            out[q.name] = torch.nn.functional.softplus(v) if q.positive else v
        return out

    def to_stored(self, values: dict[str, torch.Tensor], num_heads: int) -> dict[str, torch.Tensor]:
        """Inverse of :meth:`values`: what a model stores for given values."""
        out = {}
        for q in self.params(num_heads):
            v = values[q.name]
            out[q.name] = inverse_softplus(v) if q.positive else v
        return out

    # ---- evaluation on each backend --------------------------------------------
    def bias(self, t: torch.Tensor, values: dict[str, torch.Tensor], i: torch.Tensor | None = None) -> torch.Tensor:
        """Torch: distances ``t`` of any shape -> bias of shape (H, *t.shape).

        Head-independent schemes return (1, *t.shape), which broadcasts over heads.
        """
        import torch

        out = self.fn(ops.TORCH, t, values, i)
        if not torch.is_tensor(out):
            out = torch.as_tensor(out, dtype=torch.get_default_dtype())
        if out.dim() == t.dim():
            out = out.unsqueeze(0)
        return out.expand(out.shape[0], *t.shape)

    def head_values(self, values: dict[str, torch.Tensor], head: int, exact: bool = True) -> dict[str, Any]:
        """One head's parameters as exact sympy numbers (or Python floats)."""
        out = {}
        for k, v in values.items():
            x = v[head].detach().double()
            if x.dim() == 0:
                out[k] = _exact(float(x)) if exact else float(x)
            else:
                out[k] = [(_exact(float(e)) if exact else float(e)) for e in x.flatten()]
        return out

    def toeplitz_until(self, values: dict[str, torch.Tensor]) -> float:
        """Largest query position i up to which r depends on t alone (inf for a Toeplitz scheme).

        Rows i <= this bound share one r(t) table, so the attention can read them as views.
        """
        return math.inf if self.toeplitz else -1.0

    def symbolic(self, head: int, values: dict[str, torch.Tensor], t: sympy.Symbol | None = None):
        """Sympy: r(t) for one head as an exact expression in the symbol ``t``."""
        t = t if t is not None else conventions.T
        return self.fn(ops.SYMPY, t, self.head_values(values, head))

    def scalar(self, t, head: int, values: dict[str, torch.Tensor]):
        """mpmath: r(t) for one head at a numeric distance, at mpmath's working precision."""
        import mpmath

        hv = {
            k: (mpmath.mpf(float(v)) if not isinstance(v, list) else [mpmath.mpf(float(e)) for e in v])
            for k, v in self.head_values(values, head, exact=False).items()
        }
        return self.fn(ops.MPMATH, mpmath.mpf(t), hv)


def _exact(x: float):
    """A float as an exact sympy number, simplified when it is a short decimal (0.5 -> 1/2)."""
    import sympy  # here, not at the top: the registry loads without sympy

    if x == math.inf:
        return sympy.oo
    if x == -math.inf:
        return -sympy.oo
    r = sympy.Rational(repr(x))  # the shortest decimal that round-trips, exactly
    return r


class EmbeddingScheme(Scheme):
    """Base for schemes that act on embeddings (APE) or on queries and keys (RoPE)."""

    kind = "ape"

    @property
    def embeds(self) -> bool:
        return self.kind == "ape"

    @property
    def rotates(self) -> bool:
        return self.kind == "rotary"


def __getattr__(name: str):
    """``T`` (re-exported from :mod:`extrap.positional.conventions`, built on first use)."""
    if name == "T":
        return conventions.T
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

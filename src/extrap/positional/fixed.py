"""Parameter-free Toeplitz biases, the same in every head: Qin et al.'s four, the window, NoPE.

Same contract as :mod:`extrap.positional.bias`: each ``fn(xp, t, p, i=None)`` is the
only definition of its bias.
"""

from __future__ import annotations

from extrap.positional.base import BiasRPE, Option
from extrap.positional.conventions import n_from_t
from extrap.positional.registry import register


# ---------------------------------------------------------------------------
# Qin et al. 2024 (000): Type1, Type2 and the two divergent examples
# ---------------------------------------------------------------------------
class _Fixed(BiasRPE):
    """A parameter-free Toeplitz bias, the same in every head."""


@register
class Type1(_Fixed):
    name = "type1"
    summary = "b_n = 1/n^2: r = -2 ln n"
    reference = "Qin et al. 2024 (000), Two New RPEs, Type1"

    def fn(self, xp, t, p, i=None):
        return -2 * xp.log(n_from_t(t))  # 000: b_n = 1/n^2 = exp(-2 ln n)


@register
class Type2(_Fixed):
    name = "type2"
    summary = "b_n = exp(-ln^2 n): r = -(ln n)^2"
    reference = "Qin et al. 2024 (000), Two New RPEs, Type2"

    def fn(self, xp, t, p, i=None):
        return -(xp.log(n_from_t(t)) ** 2)  # 000: b_n = exp(-ln^2 n)


@register
class Example1(_Fixed):
    name = "example1"
    summary = "b_n = 1/n: r = -ln n (divergent)"
    reference = "Qin et al. 2024 (000), Validating the Necessity, Example1"

    def fn(self, xp, t, p, i=None):
        return -xp.log(n_from_t(t))  # 000: b_n = 1/n


@register
class Example2(_Fixed):
    name = "example2"
    summary = "b = 1/(m ln m), m = n+1: r = -ln m - ln ln m (divergent)"
    reference = "Qin et al. 2024 (000), Validating the Necessity, Example2"

    def fn(self, xp, t, p, i=None):
        # 000 writes b_n = 1/(n ln n), which is infinite at n = 1; we index by m = n + 1
        # so that every distance has a finite bias.  The tail, hence the verdict, is unchanged.
        m = n_from_t(t) + 1
        return -xp.log(m) - xp.log(xp.log(m))


# ---------------------------------------------------------------------------
# Windowed attention and NoPE
# ---------------------------------------------------------------------------
@register
class Window(_Fixed):
    name = "window"
    summary = "attend to the last W tokens only: r = 0 for t < W, -inf beyond"
    reference = "Beltagy et al. 2020; 003 §3.3; 000 Eq. 8"
    POSITIONAL_OPTION = "W"
    OPTIONS = (Option("W", int, 512, "window size in tokens (self included)", lambda w: w >= 1, "must be >= 1"),)

    def fn(self, xp, t, p, i=None):
        return xp.where(t < self.opts["W"], xp.const(0, t), -xp.inf)  # 003 §3.3: n + w > m >= n


@register
class NoPE(_Fixed):
    name = "nope"
    summary = "no positional information beyond the causal mask: r = 0"
    reference = "Haviv et al. 2022; Kazemnejad et al. 2023"
    is_identity = True

    def fn(self, xp, t, p, i=None):
        return xp.const(0, t) * t

"""The one place where extrap pins its positional conventions.

Every scheme, the model, the theory engine and the plots use these, so a sign or
off-by-one can only be wrong here.

* Query position ``i``, key position ``j``; causal attention sees ``j <= i``.
* Distance ``t = i - j >= 0`` (0 is the token attending to itself): :func:`distance`,
  and :data:`T` for symbolic biases.
* ``n = t + 1 >= 1``, the index used by Qin et al. (2024) for Type1/Type2 and the
  examples (``b_n = 1/n**2`` means ``b = 1/(t+1)**2``): :func:`n_from_t`.
* A bias RPE returns ``r(t)``, which is *added* to the attention logits
  (after the ``1/sqrt(d)`` scaling), so the softmax weight of distance ``t`` is
  proportional to ``b_t = exp(r(t))`` (Qin et al. 2024, Eq. 4-7).
"""

from __future__ import annotations


def __getattr__(name: str):
    """``T``, the distance t = i - j as a sympy symbol: the variable of every symbolic bias r(t).

    Built on first use, so that importing the registry does not import sympy (~0.3 s of CPU).
    """
    if name != "T":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import sympy

    globals()["T"] = symbol = sympy.Symbol("t", integer=True, nonnegative=True)
    return symbol


def distance(i, j):
    """t = i - j: how far back key ``j`` lies from query ``i`` (numbers, tensors or sympy)."""
    return i - j


def n_from_t(t):
    """n = t + 1, so that n runs over 1, 2, 3, ... as in Qin et al. (2024)."""
    return t + 1

"""Every positional scheme in extrap, one definition each, in one registry.

>>> from extrap import positional
>>> pe = positional.get("alibi")
>>> pe.kind
'bias'

Conventions (distance t = i - j >= 0, n = t + 1, bias added to logits) are pinned in
:mod:`extrap.positional.conventions`.
"""

from extrap.positional import bias, fixed, formula  # noqa: F401  (register the bias RPEs first: registry order)
from extrap.positional.base import BiasRPE, EmbeddingScheme, Option, Param, Scheme
from extrap.positional.bias import alibi_slopes, t5_bucket
from extrap.positional.registry import REGISTRY, get, register

# isort: split
from extrap.positional import absolute, rotary  # noqa: F401  (then APE, RoPE and its interpolations)

# isort: split
from extrap.positional import bipe, cape_ctx, complex_order, cope, floater, shaw, tisa  # noqa: F401  (the survey's added bias RPEs: 002 §3.2)  # noqa: F401  (the survey's added encodings)


def names() -> list[str]:
    return sorted(REGISTRY)


def __getattr__(name: str):
    """``T``, the sympy distance symbol, built on first use: listing the registry needs no sympy."""
    if name == "T":
        from extrap.positional import conventions

        return conventions.T
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BiasRPE",
    "EmbeddingScheme",
    "Option",
    "Param",
    "Scheme",
    "T",
    "REGISTRY",
    "get",
    "register",
    "names",
    "alibi_slopes",
    "t5_bucket",
]

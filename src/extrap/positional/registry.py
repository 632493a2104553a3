"""The registry: scheme name -> scheme class, and the spec parser.

A spec is ``name``, ``name:value`` for a scheme's positional option
(``window:64``), or ``name:key=value,key=value`` (``sandwich:dbar=64``).  Anything
that is not a registered name is tried as a user formula in ``t`` and ``n``
(``"-2*log(n)"``); ``formula:EXPR`` forces that reading.
"""

from __future__ import annotations

import difflib

from extrap.errors import ExtrapError
from extrap.positional.base import Scheme

REGISTRY: dict[str, type[Scheme]] = {}

# Names a user may type that are not schemes but options of one.  A hint by spelling alone misleads
# here ('cape' is closest to 'cope', an unrelated scheme), so these hints take precedence.
ALIAS_HINTS: dict[str, str] = {
    "cape": "did you mean 'cape-ctx' (context-adaptive PE, Zheng et al. 2024)? "
    "'sinusoidal:cape=1' is CAPE, the 2021 augmentation of Likhomanenko et al.",
    "shape": "did you mean 'sinusoidal:shape=K' (SHAPE, Kiyono et al. 2021: a random shift up to K in training)?",
}


def register(cls: type[Scheme]) -> type[Scheme]:
    if cls.name in REGISTRY:
        raise RuntimeError(f"scheme {cls.name!r} registered twice")
    REGISTRY[cls.name] = cls
    return cls


def _split_options(name: str, text: str, positional: str | None) -> dict[str, str]:
    opts: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" in part:
            key, value = (s.strip() for s in part.split("=", 1))
            if not key:
                raise ExtrapError(f"{name}: empty option name in {text!r}")
            opts[key] = value
        elif positional is not None and positional not in opts:
            opts[positional] = part
        else:
            raise ExtrapError(f"{name}: option {part!r} must be written key=value")
    return opts


def get(spec: str | Scheme) -> Scheme:
    """Build a scheme from its spec string (a Scheme is returned as it is); ExtrapError with a hint when unknown."""
    from extrap.positional import formula  # noqa: F401  (registers the formula scheme)

    if isinstance(spec, Scheme):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ExtrapError("empty positional scheme name (see `extrap pe list`)")
    spec = spec.strip()
    if not spec.isprintable():  # every message quotes the spec on one line
        raise ExtrapError(f"positional scheme {spec!r} contains a control character")
    if spec.startswith("formula:"):
        return formula.Formula(expr=spec[len("formula:") :])
    name, _, rest = spec.partition(":")
    name = name.strip()
    if name in REGISTRY:
        cls = REGISTRY[name]
        return cls(**_split_options(name, rest, cls.POSITIONAL_OPTION))
    if formula.looks_like_formula(spec):
        return formula.Formula(expr=spec)
    raise ExtrapError(f"unknown positional scheme '{name}'{_hint(name)} (see `extrap pe list`)")


def _hint(name: str) -> str:
    """'; did you mean ...?' for an unknown scheme name: an alias hint, a RoPE scaling, else the closest name."""
    from extrap.positional.rope_scaling import SCALINGS

    if name in ALIAS_HINTS:
        return f"; {ALIAS_HINTS[name]}"
    if name in SCALINGS and name != "none":
        return f"; did you mean 'rope:scaling={name}' (a RoPE interpolation)?"
    close = difflib.get_close_matches(name, list(REGISTRY), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""

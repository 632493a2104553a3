"""Math backends: one scheme definition, evaluated on tensors, exactly, or symbolically.

A bias RPE is written once, as ``fn(xp, t, p)`` where ``xp`` is one of the
namespaces below.  The model calls it with :data:`TORCH` on blocks of distances,
and FlexAttention's generated score_mod with :data:`FLEX` on one (head, query, key)
entry; the theory engine calls it with :data:`SYMPY` (for convergence tests) and with
:data:`MPMATH` (for sums and receptive fields at high precision).  Only the
operations listed here may appear in a scheme, which keeps every scheme
evaluable on all four backends.
"""

from __future__ import annotations

import math

import mpmath


class _Torch:
    name = "torch"
    tensors = True  # r(t) on torch tensors (here and in :data:`FLEX`): per-head values, elementwise ops
    inf = math.inf
    pi = math.pi
    # torch's log, exp, ...: looked up on first use, so the registry loads without torch
    FUNCTIONS = ("log", "cos", "sin", "sqrt", "floor", "abs", "softplus")

    def __getattr__(self, name: str):
        if name not in _Torch.FUNCTIONS:
            raise AttributeError(f"the torch backend has no {name!r}")
        import torch

        value = getattr(torch.nn.functional if name == "softplus" else torch, name)
        setattr(self, name, value)  # an instance attribute: found directly from now on
        return value

    @staticmethod
    def exp(x):
        """torch.exp, bit for bit, but without its slow path where exp underflows (TISA's Gaussians: about
        6x slower on a CPU): lanes below the subnormal band are 0, and torch.exp sees only the others,
        gathered by index (TISA keeps under 1% of its lanes: a quarter of the masked-fill cost, and no
        slower where most lanes are kept).  Plain torch.exp for autograd, on accelerators (no host sync)
        and other dtypes."""
        import torch

        bounds = _EXP_UNDERFLOW.get(str(x.dtype)) if torch.is_tensor(x) and x.device.type == "cpu" else None
        if bounds is None or x.numel() == 0 or (x.requires_grad and torch.is_grad_enabled()):
            return torch.exp(x)
        if bool(x.min() >= bounds[0]):  # one reduction to a number: cheaper than any() of a mask (a NaN: False)
            return torch.exp(x)
        flat = x.reshape(-1)
        kept = torch.nonzero(~(flat < bounds[1])).squeeze(1)  # normal, subnormal, inf and NaN lanes
        out = torch.zeros_like(flat)
        out.index_copy_(0, kept, torch.exp(flat.index_select(0, kept)))
        return out.view(x.shape)

    @staticmethod
    def where(cond, a, b):
        import torch

        return torch.where(cond, torch.as_tensor(a, dtype=_dtype(a, b)), torch.as_tensor(b, dtype=_dtype(a, b)))

    @staticmethod
    def minimum(a, b):
        import torch

        return torch.minimum(torch.as_tensor(a), torch.as_tensor(b))

    @staticmethod
    def maximum(a, b):
        import torch

        return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))

    @staticmethod
    def per_head(v, like):
        """Shape a (H,) parameter to broadcast against a distance tensor: (H, 1, ..., 1)."""
        return v.reshape(v.shape[0], *([1] * like.dim()))

    @staticmethod
    def lookup(table, index):
        """table (H, K) indexed by an integer tensor of any shape -> (H, *index.shape)."""
        return table[:, index.long()]

    @staticmethod
    def const(x, like):
        import torch

        return torch.as_tensor(x, dtype=like.dtype if like.is_floating_point() else torch.get_default_dtype())

    @staticmethod
    def ratio(num, den):
        return num / den

    @staticmethod
    def divide(a, b):
        return a / b

    @staticmethod
    def add_all(terms):
        """((t0 + t1) + t2) + ... of one or more terms.  ``terms`` may be a generator, so that each term is freed
        once added (Sandwich's 64 cosines of 16384 distances: a list of them all costs more in fresh memory than
        the cosines)."""
        terms = iter(terms)
        out = next(terms)
        for x in terms:
            out = out + x
        return out

    @staticmethod
    def safe_pow(t, e):
        """t**e for t >= 0 with a finite gradient in e at t = 0 (0**e = 0 for e > 0)."""
        import torch

        pos = t > 0
        return torch.where(pos, torch.where(pos, t, torch.ones_like(t)) ** e, torch.zeros_like(t * e))


# dtype -> (a, z): exp(x) is a normal number for x >= a, and rounds to 0 for x < z (below ln of half the least
# subnormal: -745.13 in float64, -103.97 in float32).  Keyed by name: the registry loads without torch.
_EXP_UNDERFLOW = {"torch.float64": (-708.0, -746.0), "torch.float32": (-87.0, -104.0)}


def _dtype(a, b):
    import torch

    for x in (a, b):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.dtype
    return torch.get_default_dtype()


class _Sympy:
    """Exact symbolic evaluation for one head: parameters arrive as per-head scalars."""

    name = "sympy"
    tensors = False
    # sympy's names for inf, pi, log, ...: looked up on first use, so the registry loads without sympy
    ALIASES = {"inf": "oo", "pi": "pi", "log": "log", "exp": "exp", "cos": "cos", "sin": "sin", "sqrt": "sqrt",
               "floor": "floor", "abs": "Abs", "minimum": "Min", "maximum": "Max"}  # fmt: skip

    def __getattr__(self, name: str):
        if name not in _Sympy.ALIASES:
            raise AttributeError(f"the sympy backend has no {name!r}")
        import sympy

        value = getattr(sympy, _Sympy.ALIASES[name])
        setattr(self, name, value)  # an instance attribute: found directly from now on
        return value

    @staticmethod
    def softplus(x):
        import sympy

        return sympy.log(1 + sympy.exp(x))

    @staticmethod
    def where(cond, a, b):
        import sympy

        return sympy.Piecewise((a, cond), (b, True))

    @staticmethod
    def per_head(v, like):
        return v

    @staticmethod
    def lookup(table, index):
        import sympy

        index = sympy.sympify(index)
        if index.is_Integer:
            return table[int(index)]
        return sympy.Function("table")(index)

    @staticmethod
    def const(x, like):
        import sympy

        if isinstance(x, float):  # the shortest decimal that round-trips, as an exact rational
            return sympy.Rational(repr(x)) if math.isfinite(x) else sympy.sympify(x)
        return sympy.sympify(x)

    @staticmethod
    def ratio(num, den):
        import sympy

        return sympy.Rational(num, den)

    @staticmethod
    def divide(a, b):
        return a / b

    @staticmethod
    def add_all(terms):
        import sympy

        return sympy.Add(*terms)  # one n-ary sum: Python's sum() is quadratic on sympy terms

    @staticmethod
    def safe_pow(t, e):
        return t**e


EXP_MAG = 1100  # |x| >= 2**1100, beyond float64's 2**1024: exp(x) is 0 or beyond every range here


def saturating_exp(x):
    """mpmath.exp, but 0 or +inf for |x| >= 2**EXP_MAG (mpmath.exp slows down there, by ~2**|x|'s bits).

    Such a weight is below e^(-10^331) times the weight of any bias value float64 can hold
    (|r| < 2**1024): 0 to every digit a sum could keep.
    """
    if isinstance(x, mpmath.mpf) and mpmath.isfinite(x) and mpmath.mag(x) > EXP_MAG:
        return mpmath.mpf(0) if x < 0 else mpmath.inf
    return mpmath.exp(x)


class _Mpmath:
    """Arbitrary-precision scalar evaluation for one head (precision set by mpmath.mp)."""

    name = "mpmath"
    tensors = False
    inf = mpmath.inf
    pi = mpmath.pi

    log = staticmethod(mpmath.log)
    exp = staticmethod(saturating_exp)
    cos = staticmethod(mpmath.cos)
    sin = staticmethod(mpmath.sin)
    sqrt = staticmethod(mpmath.sqrt)
    floor = staticmethod(mpmath.floor)
    abs = staticmethod(abs)

    @staticmethod
    def softplus(x):
        return mpmath.log1p(mpmath.exp(x))

    @staticmethod
    def where(cond, a, b):
        return a if cond else b

    minimum = staticmethod(min)
    maximum = staticmethod(max)

    @staticmethod
    def per_head(v, like):
        return v

    @staticmethod
    def lookup(table, index):
        return table[int(index)]

    @staticmethod
    def const(x, like):
        return mpmath.mpf(x)

    @staticmethod
    def ratio(num, den):
        return mpmath.mpf(num) / den

    @staticmethod
    def divide(a, b):
        """a / b with IEEE semantics at b = 0 (+-inf, or nan for 0/0), like the torch backend."""
        if b == 0:
            return mpmath.nan if a == 0 else mpmath.inf if a > 0 else -mpmath.inf
        return a / b

    @staticmethod
    def add_all(terms):
        return mpmath.fsum(terms)

    @staticmethod
    def safe_pow(t, e):
        return t**e


class _Flex(_Torch):
    """One (head, query, key) entry inside a FlexAttention score_mod (:mod:`extrap.model.flex`).

    FlexAttention vmaps the score_mod over (b, h, q_idx, kv_idx), or compiles it into its kernel: ``t``
    is a 0-d float32 tensor and each parameter is already one head's value (``param[h]``: a 0-d tensor,
    or a row such as T5's buckets, indexed as ``row[i]``).  So ``per_head`` is the identity, ``lookup``
    indexes one head's row, and nothing here may sync with the host (no ``bool(tensor)``, no ``nonzero``): ``exp`` is
    plain torch.exp, constants stay Python numbers (folded into the kernel, no tensor on another
    device), ``where``/``minimum``/``maximum`` take a number on either side.
    """

    name = "flex"

    @staticmethod
    def exp(x):
        import torch

        return torch.exp(x)

    @staticmethod
    def where(cond, a, b):
        import torch

        if not torch.is_tensor(a) and not torch.is_tensor(b):  # torch.where(cond, number, number): float32
            return torch.where(cond, float(a), float(b))
        return torch.where(cond, a, b)

    @staticmethod
    def minimum(a, b):
        return _Flex._extremum(a, b, "clamp_max", "minimum", min)

    @staticmethod
    def maximum(a, b):
        return _Flex._extremum(a, b, "clamp_min", "maximum", max)

    @staticmethod
    def _extremum(a, b, clamp: str, both: str, numbers):
        import torch

        if torch.is_tensor(a) and torch.is_tensor(b):
            return getattr(torch, both)(a, b)
        if torch.is_tensor(a):
            return getattr(a, clamp)(b)
        if torch.is_tensor(b):
            return getattr(b, clamp)(a)
        return numbers(a, b)

    @staticmethod
    def per_head(v, like):
        return v  # the caller passed param[h] already

    @staticmethod
    def lookup(table, index):
        """table: one head's row (K,), indexed by a 0-d integer tensor."""
        return table[index.long()]

    @staticmethod
    def const(x, like):
        return float(x)


def _torch_function(name: str):
    """torch.<name> (softplus: torch.nn.functional's) as a plain function: a lazy attribute lookup that
    sets itself on first use, as :class:`_Torch` does, is not traceable by torch.compile."""

    def fn(x):
        import torch

        return getattr(torch.nn.functional if name == "softplus" else torch, name)(x)

    fn.__name__ = name
    return staticmethod(fn)


for _name in _Torch.FUNCTIONS:
    setattr(_Flex, _name, _torch_function(_name))

TORCH = _Torch()
FLEX = _Flex()
SYMPY = _Sympy()
MPMATH = _Mpmath()

"""FLOATER (Liu et al. 2020, "Learning to Encode Position for Transformer with Continuous Dynamical Model";
survey 002 Eq. 9): positions from an ODE, p(t) = p(s) + ∫_s^t h(τ, p(τ); θ_h) dτ.

Choices from the authors' code (github.com/xuanqing94/FLOATER, fairseq/models/flow_transformer.py):

* positions enter **every layer**: the state p(t) is (3, n_layer, d_model), the position-dependent biases
  added to each layer's query, key and value projections;
* h is two linear layers with the time τ appended to their input and a ReLU between them, applied to
  the last axis (``flow_func_linear``), weights Xavier-normal, biases 0; p(0) is Xavier-uniform;
* token i sits at t_i = i·Δt with Δt = 0.01, solved by fixed-step RK4 with step Δt/5 (torchdiffeq).

They back-propagate with the adjoint method and refresh a cached solution every 400 updates; extrap
back-propagates through the solver steps on every training step (exact gradients, more memory), and
at evaluation solves once up to the longest position and extends that solution for longer inputs
(p(t) = p(s) + ∫_s^t, O(L) solver steps in all).  The solver is torchdiffeq (``pip install 'extrap[floater]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extrap.errors import ExtrapError
from extrap.positional.base import Option, Scheme
from extrap.positional.registry import register

if TYPE_CHECKING:
    from collections.abc import Callable

    from torch import Tensor


def require_torchdiffeq():
    """The torchdiffeq module, or ExtrapError naming the extra that installs it."""
    try:
        import torchdiffeq
    except ImportError:
        raise ExtrapError("floater needs the torchdiffeq package: pip install 'extrap[floater]'") from None
    return torchdiffeq


def floater_solve(h: Callable[[Tensor, Tensor], Tensor], p_s: Tensor, t: Tensor, step_size: float) -> Tensor:
    """p at the times ``t`` (t[0] = s): p(t) = p(s) + ∫_s^t h(τ, p(τ)) dτ (Liu et al. 2020 §3; survey 002 Eq. 9).

    Fixed-step RK4 as the authors' code.  p_s: the state at t[0], any shape.  Returns (len(t), *p_s.shape).
    """
    odeint = require_torchdiffeq().odeint
    return odeint(h, p_s, t, method="rk4", options={"step_size": step_size})


@register
class Floater(Scheme):
    """FLOATER: per-layer q/k/v biases p(i·Δt) from a learned ODE."""

    name = "floater"
    kind = "floater"
    summary = "q/k/v biases of every layer from an ODE p' = h(t, p) (learned h, RK4 on t = i·dt); needs [floater]"
    reference = "Liu et al. 2020 (ICML), FLOATER (survey 002 §3.1.2, Eq. 9)"
    theory_reason = "FLOATER: absolute q/k/v biases from an ODE, there is no additive bias r(i - j)"
    OPTIONS = (
        Option("dt", float, 0.01, "Δt: token i sits at t = i·Δt", lambda x: x > 0, "must be > 0"),
        Option("substeps", int, 5, "RK4 steps per Δt", lambda n: 0 < n <= 1000, "must be in 1..1000"),
    )

    @property
    def learned(self) -> bool:
        return True

    def train_bytes(self, *, batch, length, max_position, n_head, n_layer, d_model) -> int:
        """Training solves p up to the largest position M and back-propagates through every RK4 step,
        (M - 1) x substeps of them.  Each step evaluates h four times, and each evaluation keeps its two
        inputs [p, τ] and its ReLU output, 3 x n_layer x (d_model + 1) float32 each, for the backward pass."""
        steps = max(0, max_position - 1) * self.opts["substeps"]
        return steps * 4 * 3 * (3 * n_layer * (d_model + 1)) * 4

    @property
    def step_size(self) -> float:
        return self.opts["dt"] / self.opts["substeps"]


__all__ = ["require_torchdiffeq", "floater_solve", "Floater"]

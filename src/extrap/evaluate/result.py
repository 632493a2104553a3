"""The result of evaluating one length: mean loss, its standard error, and what the window cost."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

Z95 = 1.959964  # two-sided 95% quantile of the standard normal


@dataclass
class LengthResult:
    length: int
    loss: float  # mean negative log-likelihood per scored token, nats (NaN when ``error`` is set)
    tokens: int  # scored tokens
    seconds: float
    window: int | None = None
    error: str | None = None
    exact_loss: float | None = None  # the same tokens with exact attention, when a window was used
    temperature: float | list | None = None  # softmax τ used at this length (004), when one was set
    exact_error: str | None = None  # why the exact-attention comparison could not be made
    stderr: float | None = None  # standard error of ``loss`` (evaluate.stats); None: too few tokens
    nll: torch.Tensor | None = field(default=None, repr=False, compare=False)  # per-token losses, stream order

    @property
    def ppl(self) -> float:
        return math.exp(self.loss) if math.isfinite(self.loss) else math.inf

    def to_dict(self) -> dict:
        """JSON-ready and strict: a failed length has null loss, ppl and bits, and its ``error``."""
        ok = self.error is None and math.isfinite(self.loss)
        se = self.stderr if ok else None
        return {
            "length": self.length,
            "loss": self.loss if ok else None,
            "loss_stderr": se,
            "ppl": self.ppl if ok else None,
            "ppl_ci95": [math.exp(self.loss - Z95 * se), math.exp(self.loss + Z95 * se)] if se is not None else None,
            "bits_per_token": self.loss / math.log(2) if ok else None,
            "tokens": self.tokens,
            "seconds": self.seconds,
            "window": self.window,
            **({"temperature": self.temperature} if self.temperature is not None else {}),
            **({"error": self.error} if self.error else {}),
            **(self._window_cost() if ok else {}),
        }

    def _window_cost(self) -> dict:
        """exact_ppl and window_rel_diff = |ppl - exact ppl| / exact ppl, both on the same scored tokens."""
        if self.exact_error is not None:
            return {"exact_ppl": None, "window_rel_diff": None, "exact_error": self.exact_error}
        if self.exact_loss is None:
            return {}
        exact = math.exp(self.exact_loss)
        return {"exact_ppl": exact, "window_rel_diff": abs(self.ppl - exact) / exact}

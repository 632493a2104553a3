"""What an evaluation is asked for (:class:`EvalSettings`), checked before any run is read.

The run itself is loaded by the caller (:func:`extrap.run.load`, which takes the hf: and RoPE
options); the settings say how to evaluate it: lengths and protocol, the window, the softmax
temperature, the verdict's δ and the resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from extrap.errors import ExtrapError
from extrap.evaluate.protocols import check_protocol, check_settings
from extrap.theory.receptive import WINDOW_AUTO_TRF

if TYPE_CHECKING:
    from extrap.align import TemperatureSpec

WINDOW_CHECK_MAX = 8192  # the exact-attention comparison of a windowed length runs up to this length
# Scored tokens per length by default: byte-level losses spread about 2 nats per token, and neighbours
# correlate, so 2^16 tokens keep the standard error of a loss near 0.01 nats, half of δ = 0.02.
DEFAULT_TOKENS = 2**16
DEFAULT_TARGETS = 256  # last-token targets by default: the verdict compares them paired, target by target


def parse_window(mode: str | int | None) -> str | int:
    """``none``, ``auto`` or a window of W >= 1 keys (an int, or its text)."""
    if mode is None or mode in ("none", "auto"):
        return mode or "none"
    try:
        w = int(mode)
    except (TypeError, ValueError):
        raise ExtrapError(f"window must be auto, none or an integer, got {mode!r}") from None
    if w < 1:
        raise ExtrapError("window must be >= 1")
    return w


@dataclass(frozen=True)
class EvalSettings:
    """How :func:`extrap.evaluate.evaluate_run` evaluates a run.

    ``lengths``: the L_ex to evaluate (L_tr, the verdict's reference, is always added; None:
    L_tr x 1, 2, 4, 8, 16).  ``tokens``: scored tokens at every length (nonoverlapping, sliding;
    None: :data:`DEFAULT_TOKENS`, or the whole split if shorter, and at least the longest length);
    ``targets``: last-token targets.  ``window``: "none", W or "auto" (TRF(``eps``) of the trained
    bias); a windowed length streams through a rolling KV cache, and up to ``exact_check_max`` it is
    scored again with exact attention.  ``temperature``: None, a τ, one τ per layer, "auto",
    "auto:per-layer" or "auto:MODE" (004, aligned by ``align_mode`` on ``align_segments`` segments,
    probing up to ``align_max_length``).  ``delta``: δ of 000 Definition 0.1.  ``backend``: the
    attention backend of an extrap run; ``corpus``: the evaluation corpus of an hf: model.
    ``progress``: log each length and show a bar of tokens/s and ETA on stderr.
    """

    lengths: tuple[int, ...] | None = None
    protocol: str = "nonoverlapping"
    stride: int | None = None
    targets: int = DEFAULT_TARGETS
    tokens: int | None = None
    split: str = "validation"
    window: str | int = "none"
    eps: float = WINDOW_AUTO_TRF.eps
    delta: float = 0.02
    batch: int = 8
    progress: bool = False
    exact_check_max: int = WINDOW_CHECK_MAX
    backend: str | None = None
    temperature: float | str | tuple[float, ...] | None = None
    align_mode: str = "pmax"
    align_segments: int = 4
    align_per_layer: bool = False
    align_max_length: int | None = None
    corpus: str | None = None

    def __post_init__(self):
        if self.lengths is not None:
            object.__setattr__(self, "lengths", tuple(self.lengths))
        if isinstance(self.temperature, list):
            object.__setattr__(self, "temperature", tuple(self.temperature))
        self.check()

    def check(self) -> None:
        """Refuse, in one line, what no run could be evaluated with."""
        from extrap.model.attention import BACKENDS
        from extrap.run import EVAL_SPLITS

        if self.lengths is None:  # L_tr x 2^k: checked against tokens and stride once L_tr is known
            check_protocol(self.protocol, self.targets)
        else:
            check_settings(list(self.lengths), self.protocol, self.tokens, self.stride, self.targets)
        if self.split not in EVAL_SPLITS:
            raise ExtrapError(f"split must be {' or '.join(EVAL_SPLITS)}, got {self.split!r}")
        if parse_window(self.window) == "auto" and not 0 < self.eps < 1:
            raise ExtrapError(f"eps must be in (0, 1), got {self.eps}")
        if not self.delta > 0:
            raise ExtrapError(f"delta must be > 0, got {self.delta}")
        for name in ("batch", "align_segments"):
            if getattr(self, name) < 1:
                raise ExtrapError(f"{name.replace('_', ' ')} must be >= 1, got {getattr(self, name)}")
        if self.exact_check_max < 0:
            raise ExtrapError(f"the exact-check length must be >= 0, got {self.exact_check_max}")
        if self.backend is not None and self.backend not in BACKENDS:
            raise ExtrapError(f"attention backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        self.temperature_spec()

    def temperature_spec(self) -> TemperatureSpec:
        """The temperature as :func:`extrap.align.parse_temperature_spec` reads it, its auto mode checked."""
        from extrap import align
        from extrap.align.formulas import check_mode

        spec = align.parse_temperature_spec(self.temperature)
        if spec.kind == "auto":
            mode, per_layer = spec.mode or self.align_mode, spec.per_layer or self.align_per_layer
            check_mode(mode)
            if per_layer and mode not in align.SEARCH_MODES:
                raise ExtrapError(f"per-layer temperatures need the pmax or entropy alignment mode, not {mode}")
        return spec

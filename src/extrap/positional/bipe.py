"""BiPE (He et al. 2024, "Two Stones Hit One Bird: Bilevel Positional Encoding for Better Length
Extrapolation"): an absolute encoding of a token's index *within its segment* plus a relative encoding
(ALiBi or RoPE) of the *segment index*.

Choices from the authors' code (github.com/zhenyuhe00/BiPE, ``get_bilevel_ids`` in my_modeling_llama_bipe_*.py):

* a segment ends at a boundary token, which belongs to the segment it ends; they end segments at full stops
  and newlines.  extrap reads bytes of Python source, where a line is the natural unit: ``segment=newline``
  (b"\\n") is the default, ``segment=sentence`` ends segments at b"." as well, as they do for text;
* the intra-segment encoding is a learned table of ``max_positions`` = 1024 rows (their train_scale), longer
  segments share its last row; ``intra=sinusoidal`` is the fixed alternative;
* BiPE-ALiBi multiplies Press et al.'s slopes by 96 (``slope_scale``), per segment of distance;
  BiPE-RoPE rotates by the segment index.  Both are the registry's own ``alibi`` and ``rope``, called with
  segment indices as positions; the causal mask stays the tokens'.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from extrap.errors import ExtrapError
from extrap.positional.base import Option, Scheme
from extrap.positional.registry import register

if TYPE_CHECKING:
    from torch import Tensor

# byte values that end a segment
SEGMENT_RULES = {"newline": b"\n", "sentence": b".\n"}
BASES = ("alibi", "rope")
INTRA = ("learned", "sinusoidal")


def bilevel_ids(idx: Tensor, boundary: bytes) -> tuple[Tensor, Tensor]:
    """(intra, segment), each (B, L) long, for byte tokens ``idx`` (B, L) (He et al. 2024 §3; their get_bilevel_ids).

    segment[i]: how many boundary tokens come before token i (a boundary token closes its own segment);
    intra[i]: i minus the index of its segment's first token.
    """
    import torch

    ends = torch.isin(idx, torch.tensor(list(boundary), device=idx.device))
    segment = ends.long().cumsum(-1) - ends.long()
    i = torch.arange(idx.shape[-1], device=idx.device).expand_as(idx)
    starts = torch.ones_like(ends)
    starts[..., 1:] = ends[..., :-1]
    first = torch.where(starts, i, torch.zeros_like(i)).cummax(-1).values
    return i - first, segment


@register
class BiPE(Scheme):
    """Bilevel PE: intra-segment absolute embedding + inter-segment ALiBi or RoPE."""

    name = "bipe"
    kind = "bipe"
    summary = "intra-segment APE + ALiBi/RoPE on the segment index (segment=newline: one line of source)"
    reference = "He et al. 2024 (ICML), Bilevel Positional Encoding (survey 002 §3.2)"
    theory_reason = "BiPE: the relative part reads segment indices, which depend on the text, not on i - j"
    no_stream = "bipe: KV-cache streaming is not available: segment ids depend on the whole prefix"
    OPTIONS = (
        Option("base", str, "alibi", "inter-segment RPE: alibi | rope", lambda b: b in BASES, "must be alibi or rope"),
        Option(
            "segment",
            str,
            "newline",
            "segment boundary: newline (b'\\n') | sentence (b'.' and b'\\n')",
            lambda s: s in SEGMENT_RULES,
            "must be " + " or ".join(SEGMENT_RULES),
        ),
        Option(
            "intra",
            str,
            "learned",
            "intra-segment APE: learned | sinusoidal",
            lambda s: s in INTRA,
            "must be learned or sinusoidal",
        ),
        Option("max_positions", int, 1024, "learned intra table rows", lambda n: 0 < n <= 2**20, "must be in 1..2^20"),
        Option("slope_scale", float, 96.0, "ALiBi slopes × this (authors: 96)", lambda s: s > 0, "must be > 0"),
    )

    def validate(self) -> None:
        if self.opts["base"] != "alibi" and self.opts["slope_scale"] != 96.0:
            raise ExtrapError("bipe: option slope_scale only applies with base=alibi")

    @property
    def learned(self) -> bool:
        return self.opts["intra"] == "learned"

    @property
    def boundary(self) -> bytes:
        return SEGMENT_RULES[self.opts["segment"]]

    @property
    def inter(self) -> Scheme:
        """The registry's ALiBi (slopes × slope_scale, as shift = -log2 scale) or RoPE, for segment indices."""
        from extrap.positional.bias import ALiBi
        from extrap.positional.rotary import Rotary

        if self.opts["base"] == "rope":
            return Rotary()
        return ALiBi(shift=-math.log2(self.opts["slope_scale"]))


__all__ = ["SEGMENT_RULES", "bilevel_ids", "BiPE"]

"""Training-free extension of RoPE models at inference: StreamingLLM, LM-Infinite, Self-Extend, Dual
Chunk Attention, ReRoPE / Leaky ReRoPE and STRING as one registry of distance maps.

* :mod:`.methods`, :mod:`.catalog`: each method's branches (positions q(i), k(j)) and selection, its
  options (defaults scaled to L_tr), citation and closed forms; :func:`parse` reads ``name:k=v,...``;
* :mod:`.attention`: blockwise attention with the run's own rotation, no (L, L) tensor;
* :mod:`.apply`, :mod:`.hf`: into an extrap GPT (rope, xpos) or an hf: Llama-family model;
* :mod:`.theory`: :func:`analyse_extension`, the largest distance and keys per query before running.
"""

from extrap.extend.apply import GptExtension, extend_model, extend_run, plain_rotate
from extrap.extend.attention import extended_attention, streamed_attention
from extrap.extend.catalog import METHODS, parse, split_spec
from extrap.extend.methods import MASKED, Branch, Method
from extrap.extend.theory import ExtensionTheory, analyse_extension

__all__ = [
    "MASKED",
    "METHODS",
    "Branch",
    "ExtensionTheory",
    "GptExtension",
    "Method",
    "analyse_extension",
    "extend_model",
    "extend_run",
    "extended_attention",
    "parse",
    "plain_rotate",
    "split_spec",
    "streamed_attention",
]

"""Hugging Face checkpoints as extrap runs: ``hf:PATH`` wherever a run directory is accepted.

:func:`load_hf` reads a *local* folder written by ``save_pretrained`` (nothing is ever
downloaded) and returns an :class:`HFRun`, which implements the :class:`extrap.run.Run` protocol:

* ``.model``: an :class:`HFModel` adapter around the transformers model that implements
  :class:`extrap.model.protocol.ExtrapLM`, the protocol that :mod:`extrap.evaluate`, :mod:`extrap.erf`,
  :mod:`extrap.align`, :mod:`extrap.tasks` and :mod:`extrap.model.generate` use (its ``scheme`` is None);
* ``.tokenizer``: the HF tokenizer behind extrap's tokenizer interface (``encode``,
  ``encode_array``, ``decode``, ``vocab_size``, ``name``, ``fingerprint``);
* ``.config``: an :class:`HFRunConfig` (shape, ``train_length`` and its source, evaluation corpus,
  ``hf_path``, ``config_hash``, dtype, RoPE re-scaling).

Supported: causal LMs with RoPE (llama, mistral, qwen2, qwen3, gpt_neox), learned APE (gpt2) and
ALiBi (bloom, mpt).  T5 checkpoints are read by :func:`hf_theory` (learned bucket tables) and
:mod:`extrap.hf.t5` (temperature, probes), not evaluated as causal LMs.

RoPE at inference (``rope=``): one of extrap's own scalings (linear, ntk, dynamic, ntk-by-parts,
yarn, truncated; :func:`extrap.positional.rotary.rope_frequencies`) written into the model's
rotary embedding (``inv_freq`` and ``attention_scaling``), or ``hf:<type>`` which sets the HF
config's ``rope_parameters`` and rebuilds HF's own rotary embedding.

How the attention is reached (transformers 5).  Llama/Mistral/Qwen, GPT-NeoX and GPT-2 call their
attention through transformers' ``AttentionInterface`` with ``scaling=module.scaling``; BLOOM and MPT
have hand-written eager attention that bypasses it, so no registry wrapper can reach them all.  Hence:

* temperature τ (004): every module's logit scale is divided by τ (``scaling``; BLOOM's
  ``inv_norm_factor`` and ``beta``, the weight of its ALiBi bias; MPT's ``softmax_scale``, and a
  forward pre-hook divides the ``position_bias`` it is given), so the whole logit q·k/√d + bias is
  divided by τ; the causal mask is applied afterwards and stays a mask.  The default attention
  implementation (sdpa) is kept: τ = 1 gives bit-identical outputs.
* window W (each query sees its W most recent keys, in every layer): the registry families run
  :func:`.attention.window_attention`, registered as ``extrap_window``, for that call: causal attention over
  query chunks and only the keys each chunk can see, so no (L, L) tensor is built.  BLOOM and MPT
  build (B·H, L, L) scores anyway; their pre-hook adds the band to the causal mask they are given.
* pre-softmax logits (:meth:`HFModel.layer_logits`, for Prop. 1 / Prop. 2): under eager attention,
  the input of the first softmax that the layer's attention module calls, recorded by a
  ``TorchFunctionMode``; the forward stops right there.  This works the same for every family.
* KV cache (:meth:`HFModel.step`, for generation and ranking task candidates): transformers' own
  ``past_key_values``; a rolling cache window is not available.

Modules: :mod:`.common` (families, checks), :mod:`.tokenizer`, :mod:`.model` (the adapter),
:mod:`.attention` (window, pre-hooks, softmax tap), :mod:`.rope`, :mod:`.load`, :mod:`.theory`
and :mod:`.t5`.
"""

from extrap.hf.common import CAUSAL_FAMILIES, HF_ROPE_KINDS, ROPE_KINDS, T5_FAMILIES, default_device_dtype, strip_prefix
from extrap.hf.load import HFRun, HFRunConfig, load_hf
from extrap.hf.model import HFModel
from extrap.hf.rope import apply_rope
from extrap.hf.theory import alibi_checkpoint_slopes, hf_theory, plot_t5_tables, t5_tables
from extrap.hf.tokenizer import HFTokenizer

__all__ = [
    "CAUSAL_FAMILIES",
    "HF_ROPE_KINDS",
    "ROPE_KINDS",
    "T5_FAMILIES",
    "HFModel",
    "HFRun",
    "HFRunConfig",
    "HFTokenizer",
    "alibi_checkpoint_slopes",
    "apply_rope",
    "default_device_dtype",
    "hf_theory",
    "load_hf",
    "plot_t5_tables",
    "strip_prefix",
    "t5_tables",
]

"""extrap's causal LM and what every causal LM here shares.

What each module owns:

* :mod:`~extrap.model.protocol`: :class:`ExtrapLM`, the protocol every causal LM implements (extrap's
  GPT and the ``hf:`` adapter), with :class:`ModelShape`, :class:`Output` and the temperature context;
* :mod:`~extrap.model.gpt`: the GPT itself (:class:`ModelConfig`, :class:`GPT`), every positional
  scheme on one forward pass;
* :mod:`~extrap.model.kernel`: the one attention kernel, softmax(q·k·s + bias) v (SDPA, an explicit
  softmax where a bias gradient or a probe needs it, or FlexAttention), the Toeplitz vector and its
  strided view, and the consecutive-positions check; every attention here and the ``hf:`` window call it;
* :mod:`~extrap.model.attention`: the bias blocks of a scheme (:class:`BiasContext`, r(t) tables), which
  path a layer takes (whole sequence, KV-cache step, backend) and the probes (probabilities, logits, rows);
* :mod:`~extrap.model.kv_cache`: the rolling KV cache that streaming and generation read (storage only);
* :mod:`~extrap.model.generate`: greedy or sampled continuation through the KV cache.
"""

from extrap.model.gpt import GPT, ModelConfig
from extrap.model.protocol import ExtrapLM, ModelShape, Output, model_device, temperature

__all__ = ["GPT", "ExtrapLM", "ModelConfig", "ModelShape", "Output", "model_device", "temperature"]

"""extrap's causal LM and what every causal LM here shares.

What each module owns:

* :mod:`~extrap.model.protocol`: :class:`ExtrapLM`, the protocol every causal LM implements (extrap's
  GPT and the ``hf:`` adapter), with :class:`ModelShape`, :class:`Output` and the temperature context;
* :mod:`~extrap.model.gpt`: the GPT itself (:class:`ModelConfig`, :class:`GPT`), every positional
  scheme on one forward pass;
* :mod:`~extrap.model.attention`: the attention kernels, softmax(q·k·s + r) block by block;
* :mod:`~extrap.model.kv_cache`: the rolling KV cache that streaming and generation read;
* :mod:`~extrap.model.generate`: greedy or sampled continuation through the KV cache.
"""

from extrap.model.gpt import GPT, ModelConfig
from extrap.model.protocol import ExtrapLM, ModelShape, Output, model_device, temperature

__all__ = ["GPT", "ExtrapLM", "ModelConfig", "ModelShape", "Output", "model_device", "temperature"]

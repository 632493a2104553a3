"""The floating-point type a model computes in (``--dtype``): its names, its default per device, its autocast.

Evaluation runs an extrap model under :func:`torch.autocast` rather than casting its weights: the weights,
the residual stream and the LayerNorms stay float32 and only the matrix products (the linear layers and
attention) run in bfloat16 or float16, the numerics the model was trained under (``extrap train`` trains in
bf16 autocast on CUDA).  Casting the weights would also round the residual stream at every layer.  The
explicit softmax of the attention kernel and the loss are taken in float32 in every dtype
(:func:`extrap.model.kernel.softmax_attention`, :mod:`extrap.evaluate.streaming`).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from extrap.errors import ExtrapError

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def default_dtype(device) -> str:
    """bfloat16 on a CUDA device, float32 elsewhere (on a CPU, bf16 products are not faster)."""
    return "bfloat16" if torch.device(device).type == "cuda" else "float32"


def eval_dtype(name: str | None, device) -> str:
    """``name`` checked (None: :func:`default_dtype` of ``device``)."""
    if name is None:
        return default_dtype(device)
    if name not in DTYPES:
        raise ExtrapError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return name


def at_least_float32(dtype: torch.dtype) -> torch.dtype:
    """The dtype a softmax is taken in: float32 for bf16 or fp16 scores (float64 stays float64)."""
    return torch.promote_types(dtype, torch.float32)


def autocast(device, dtype: torch.dtype):
    """The context that runs a forward pass on ``device`` in ``dtype`` (float32: none)."""
    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)

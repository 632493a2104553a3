"""Softmax temperature and attention probes for Hugging Face T5 (004's setting).

004 aligns the attention of Flan-T5 / T5 at long inputs by dividing every
attention logit by τ: softmax((q k + position_bias) / τ) (T5 does not scale
q k by 1/sqrt(d)).  This module adds that τ to a ``T5ForConditionalGeneration``
or ``T5EncoderModel`` (loaded from a local path, or given as an object) without
touching a weight, and measures the average P_max and entropy of its softmax rows.

How τ enters (transformers 5.x, ``T5Attention.forward``)
-------------------------------------------------------
``T5Attention.forward`` hands ``scaling=self.scaling`` (1.0 for T5) and
``position_bias`` to the attention function (eager or sdpa), which computes
softmax(q k * scaling + position_bias + mask).  Per attention module we register

* a forward pre-hook that sets ``module.scaling = scaling / τ`` and replaces the
  ``position_bias`` argument with ``position_bias / τ``;
* an instance-level wrapper of ``compute_bias`` (the first layer computes the
  bias itself) that returns ``bias / τ`` for this call;
* a forward hook that restores ``scaling`` and puts the *unscaled* bias back into
  the module's output, because T5 passes that bias on to the next layer (each
  layer scales it by its own τ).

The mask is not divided: masked keys stay masked.  With τ = 1 every hook returns
at once, so outputs are bit-identical to the unpatched model.
``set_t5_temperature`` returns a handle; ``handle.remove()`` (or
``remove_t5_temperature(model)``) takes every hook and wrapper away.

Probes switch the model to the eager attention implementation for the duration
of the call (sdpa does not return probabilities) and reduce each layer's
(B, H, Lq, Lk) weights to sums in a forward hook as soon as they are produced;
the previous implementation is restored afterwards.

Requires the optional ``[hf]`` extra (transformers); it is imported lazily.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from extrap.errors import ExtrapError
from extrap.hf.attention import attn_implementation
from extrap.hf.common import require_transformers
from extrap.model.protocol import temperature

PARTS = ("encoder", "decoder", "cross", "all")
_HOOKS = "_extrap_tau_handles"


def _t5_modules():
    """transformers and its T5 modelling module (ExtrapError naming the extra when it is missing)."""
    transformers = require_transformers()
    from transformers.models.t5 import modeling_t5

    return transformers, modeling_t5


def load_t5(model_or_path, encoder_only: bool = False):
    """A T5 model in eval mode: the object itself, or ``from_pretrained`` on a local directory (no download)."""
    transformers, mt5 = _t5_modules()
    if isinstance(model_or_path, torch.nn.Module):
        model = model_or_path
    else:
        path = Path(model_or_path)
        if not path.is_dir():
            raise ExtrapError(f"T5 model directory {path} does not exist")
        cls = transformers.T5EncoderModel if encoder_only else transformers.T5ForConditionalGeneration
        try:
            model = cls.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError) as e:
            raise ExtrapError(f"cannot load a T5 model from {path}: {str(e).splitlines()[0]}") from None
    if not attention_modules(model, "all"):
        raise ExtrapError(f"{type(model).__name__} has no T5Attention modules")
    return model.eval()


def attention_modules(model, part: str = "all") -> list:
    """T5Attention modules in forward order: [(name, module)] for encoder self, decoder self or cross attention."""
    _, mt5 = _t5_modules()
    if part not in PARTS:
        raise ExtrapError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    out = []
    for name, mod in model.named_modules():
        if not isinstance(mod, mt5.T5Attention):
            continue
        kind = "cross" if name.endswith("EncDecAttention") else ("decoder" if mod.is_decoder else "encoder")
        if part == "all" or part == kind:
            out.append((name, mod))
    return out


# ---------------------------------------------------------------------------
# temperature
# ---------------------------------------------------------------------------
@dataclass
class T5TemperatureHandle:
    model: object

    def remove(self) -> None:
        remove_t5_temperature(self.model)


def _check_tau(t) -> float:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (t > 0 and math.isfinite(t)):
        raise ExtrapError(f"temperature must be a positive finite number, got {t!r}")
    return float(t)


def _install(mod) -> None:
    if hasattr(mod, _HOOKS):
        return
    orig_compute_bias = mod.compute_bias  # bound method of the class

    def compute_bias(*args, **kwargs):
        bias = orig_compute_bias(*args, **kwargs)
        tau = getattr(mod, "_extrap_active", None)
        if tau is None:
            return bias
        mod._extrap_bias = bias  # unscaled: what the next layer must receive
        return bias / tau

    def pre(module, args, kwargs):
        tau = module._extrap_tau
        if tau == 1.0:
            return None
        module._extrap_active = tau
        module._extrap_scaling = module.scaling
        module.scaling = module.scaling / tau
        if "position_bias" in kwargs and kwargs["position_bias"] is not None:
            module._extrap_bias = kwargs["position_bias"]
            kwargs = {**kwargs, "position_bias": kwargs["position_bias"] / tau}
        elif len(args) > 3 and args[3] is not None:  # forward(hidden, mask, key_value_states, position_bias)
            module._extrap_bias = args[3]
            args = (*args[:3], args[3] / tau, *args[4:])
        return args, kwargs

    def post(module, args, kwargs, output):
        tau = getattr(module, "_extrap_active", None)
        if tau is None:
            return None
        module.scaling = module._extrap_scaling
        bias = getattr(module, "_extrap_bias", None)
        module._extrap_active = None
        module._extrap_bias = None
        if bias is not None and isinstance(output, tuple) and len(output) > 1:
            return (output[0], bias, *output[2:])
        return None

    mod.compute_bias = compute_bias
    mod._extrap_tau = 1.0
    mod._extrap_active = None
    handles = [mod.register_forward_pre_hook(pre, with_kwargs=True), mod.register_forward_hook(post, with_kwargs=True)]
    setattr(mod, _HOOKS, handles)


def set_t5_temperature(model, tau, part: str = "all") -> T5TemperatureHandle:
    """Divide every attention logit (scores + position_bias) of ``part`` by τ.

    ``tau``: one value, or a list with one value per attention module of ``part`` in forward
    order (``attention_modules(model, part)``; e.g. one per encoder layer with part="encoder").
    Modules outside ``part`` keep their τ.  Returns a handle whose ``remove()`` unpatches.
    """
    mods = [m for _, m in attention_modules(model, part)]
    if isinstance(tau, (list, tuple)):
        taus = [_check_tau(t) for t in tau]
        if len(taus) != len(mods):
            raise ExtrapError(f"temperature: {part} has {len(mods)} attention modules, got {len(taus)} values")
    else:
        taus = [_check_tau(tau)] * len(mods)
    for mod, t in zip(mods, taus):
        _install(mod)
        mod._extrap_tau = t
    return T5TemperatureHandle(model)


def get_t5_temperature(model, part: str = "all") -> list[float]:
    return [float(getattr(m, "_extrap_tau", 1.0)) for _, m in attention_modules(model, part)]


def remove_t5_temperature(model) -> None:
    """Remove every hook and wrapper that :func:`set_t5_temperature` installed."""
    for _, mod in attention_modules(model, "all"):
        handles = mod.__dict__.pop(_HOOKS, None)
        if handles is None:
            continue
        for h in handles:
            h.remove()
        if "_extrap_scaling" in mod.__dict__ and mod.__dict__.get("_extrap_active") is not None:
            mod.scaling = mod._extrap_scaling
        for attr in ("compute_bias", "_extrap_tau", "_extrap_active", "_extrap_bias", "_extrap_scaling"):
            mod.__dict__.pop(attr, None)


# ---------------------------------------------------------------------------
# probes
# ---------------------------------------------------------------------------
class _PartTemperature:
    """The τs of one ``part`` of a T5 model, as :func:`extrap.model.protocol.temperature` sets and restores them."""

    def __init__(self, model, part: str):
        self.model, self.part = model, part

    def temperatures(self) -> list[float]:
        return get_t5_temperature(self.model, self.part)

    def set_temperature(self, tau) -> None:
        if isinstance(tau, list) and tau == self.temperatures():
            return  # nothing to change: a model without τ hooks keeps none
        set_t5_temperature(self.model, tau, self.part)


def _row_sums(name: str, kind: str, sums: dict, attention_mask):
    """A forward hook that adds one module's softmax rows to ``sums[name]`` = [Σ P_max, Σ H, rows]."""

    def post(module, args, kwargs, output):
        w = output[2] if isinstance(output, tuple) and len(output) > 2 else None
        if w is None:
            raise ExtrapError("T5 attention returned no probabilities (eager attention is needed for probes)")
        p = w.double()
        pmax = p.amax(-1)  # (B, H, Lq)
        ent = -torch.special.xlogy(p, p).sum(-1)
        if kind == "encoder" and attention_mask is not None:
            keep = attention_mask.to(p.dtype)[:, None, :].expand_as(pmax)
        else:
            keep = torch.ones_like(pmax)
        acc = sums[name]
        acc[0] += float((pmax * keep).sum())
        acc[1] += float((ent * keep).sum())
        acc[2] += int(keep.sum())

    return post


def _run(model, part: str, input_ids, attention_mask, decoder_input_ids) -> None:
    """One forward pass of what ``part`` needs: the encoder alone for encoder attention."""
    if part == "encoder" and hasattr(model, "get_encoder"):
        model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
        return
    kw = {}
    if decoder_input_ids is not None or hasattr(model, "decoder"):
        if decoder_input_ids is None:
            raise ExtrapError(f"probing {part} attention needs decoder_input_ids")
        kw["decoder_input_ids"] = torch.as_tensor(decoder_input_ids).reshape(input_ids.shape[0], -1)
    model(input_ids=input_ids, attention_mask=attention_mask, **kw)


@torch.no_grad()
def t5_attention_stats(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    decoder_input_ids: torch.Tensor | None = None,
    part: str = "encoder",
    tau=None,
) -> dict:
    """Average P_max and entropy over every softmax row of ``part``'s attention modules.

    Rows of padded encoder queries (``attention_mask`` = 0) are left out of encoder
    self-attention.  ``tau``: a temperature for this probe only (one value or per module of
    ``part``); None keeps the current one.  Returns {"pmax", "entropy", "layers": [...], "rows"}.
    A ``T5ForConditionalGeneration`` probed on ``part="encoder"`` runs only its encoder.
    """
    mods = attention_modules(model, part)
    if not mods:
        raise ExtrapError(f"the model has no {part} attention")
    input_ids = torch.as_tensor(input_ids)
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if attention_mask is not None and attention_mask.dim() == 1:
        attention_mask = attention_mask[None]
    sums = {name: [0.0, 0.0, 0] for name, _ in mods}
    kinds = {name: k for k in ("encoder", "decoder", "cross") for name, _ in attention_modules(model, k)}
    handles = [
        mod.register_forward_hook(_row_sums(name, kinds[name], sums, attention_mask), with_kwargs=True)
        for name, mod in mods
    ]
    was_training = model.training
    model.eval()
    try:
        with temperature(_PartTemperature(model, part), tau), attn_implementation(model, "eager"):
            _run(model, part, input_ids, attention_mask, decoder_input_ids)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    layers = [{"module": name, "pmax": s[0] / s[2], "entropy": s[1] / s[2]} for name, s in sums.items()]
    return {
        "pmax": sum(v["pmax"] for v in layers) / len(layers),
        "entropy": sum(v["entropy"] for v in layers) / len(layers),
        "layers": layers,
        "rows": sums[mods[0][0]][2],
    }


def t5_algorithm1(
    model,
    short_ids: torch.Tensor,
    long_ids: torch.Tensor,
    mode: str = "pmax",
    *,
    grid: Sequence[float] | None = None,
    refine: bool = True,
    part: str = "encoder",
    set_result: bool = False,
):
    """004 Algorithm 1 on a T5 encoder: τ for ``long_ids`` whose average P_max/H matches ``short_ids`` at τ = 1.

    Same search as :func:`extrap.align.algorithm1` (paper grid 1.0 -> 0.5, optional bisection), and the same
    record (:class:`extrap.align.Algorithm1`).  ``set_result``: leave the chosen τ set on ``part`` (otherwise
    the previous τ is restored).
    """
    from extrap.align.formulas import DEFAULT_GRID, SEARCH_MODES, check_mode, search_tau
    from extrap.align.records import Algorithm1

    check_mode(mode, SEARCH_MODES)
    target = t5_attention_stats(model, short_ids, part=part, tau=1.0)[mode]
    res = search_tau(
        lambda t: t5_attention_stats(model, long_ids, part=part, tau=t)[mode], target, grid or DEFAULT_GRID, refine
    )
    if set_result:
        set_t5_temperature(model, res.tau, part)
    return Algorithm1(res.target, search=res)

"""RoPE at inference on HF models: extrap's own scalings, or transformers' ``rope_parameters``.

``rope`` is ``KIND[:key=value,...]`` (:class:`~extrap.positional.rope_scaling.RopeRequest`):

* one of extrap's scalings: the registry's :meth:`~extrap.positional.rotary.Rotary.rescaled`
  scheme gives ``inv_freq`` and the attention factor, written into the model's rotary modules;
* ``hf:TYPE``, any type in transformers' ``ROPE_INIT_FUNCTIONS``: the config's ``rope_parameters``
  are rebuilt for TYPE and HF's own rotary modules are recreated.  Each parameter comes from the
  request's options, else the model's config (``original_max_position_embeddings`` always; the
  others when the config already uses TYPE), else its default (:data:`HF_ROPE_PARAMETERS`).  A
  parameter that has none is refused in one line naming it.  The factor is the request's; without
  one, the config's own (when it already uses TYPE), else the one transformers derives for yarn and
  longrope (max_position_embeddings / original_max_position_embeddings), else 1.

A scaling whose θ depends on the sequence length (dynamic, longrope) takes it once per sequence
(:mod:`extrap.hf.rope_length`).
"""

from __future__ import annotations

import math

import torch

from extrap.errors import ExtrapError
from extrap.hf.common import ROPE_FAMILIES
from extrap.hf.model import HFModel
from extrap.hf.rope_length import hold_length, hold_native, release, rotary_modules
from extrap.positional.rope_scaling import RopeRequest, check_llama3

L_TR = "L_tr"  # default: the original length L of apply_rope
FROM_CONFIG = "config"  # no default: the model's config must hold it (lists of per-dimension factors)

HF_ROPE_PARAMETERS: dict[str, dict[str, tuple[type, object]]] = {
    "linear": {},
    "dynamic": {},  # transformers takes L from max_position_embeddings
    "proportional": {},  # partial_rotary_factor is the architecture's, read from the config
    "yarn": {
        "original_max_position_embeddings": (int, L_TR),
        "beta_fast": (float, None),
        "beta_slow": (float, None),
        "attention_factor": (float, None),
        "mscale": (float, None),
        "mscale_all_dim": (float, None),
        "truncate": (bool, None),
    },
    "llama3": {  # Llama 3.1's own values (Meta's release): low 1, high 4
        "original_max_position_embeddings": (int, L_TR),
        "low_freq_factor": (float, 1.0),
        "high_freq_factor": (float, 4.0),
    },
    "longrope": {
        "original_max_position_embeddings": (int, L_TR),
        "attention_factor": (float, None),
        "long_factor": (list, FROM_CONFIG),
        "short_factor": (list, FROM_CONFIG),
    },
}
"""Per transformers rope type: the parameters besides rope_theta and factor, as ``name: (type, default)``;
default None: left out (transformers' own default), ``L_TR``: the original length, ``FROM_CONFIG``: required."""

DERIVED_FACTOR = ("yarn", "longrope")
"""Types whose factor transformers derives when the config has none: max_position_embeddings /
original_max_position_embeddings (``_compute_yarn_parameters``, ``_compute_longrope_parameters``)."""


def _config_rope(c) -> dict:
    """The config's RoPE parameters, rope_theta included (transformers 5 ``rope_parameters``, 4 ``rope_scaling``)."""
    rp = getattr(c, "rope_parameters", None)
    if rp is None:
        rp = {**(getattr(c, "rope_scaling", None) or {}), "rope_theta": getattr(c, "rope_theta", 10000.0)}
    return dict(rp)


def apply_rope(model: HFModel, rope: str | RopeRequest, factor: float | None, original: int) -> dict:
    """Re-scale the model's RoPE (see the module docstring); returns the record kept in the run's config.

    ``original`` is L, the run's L_tr (the config's context length unless a training length is
    given); a config that names its pretraining length (``original_max_position_embeddings``, as
    Llama 3.1's does) gives that instead, and an option of the request overrides both.
    """
    req = rope if isinstance(rope, RopeRequest) else RopeRequest.parse(rope, factor)
    if model.family not in ROPE_FAMILIES:
        raise ExtrapError(f"RoPE re-scaling needs a RoPE model; {model.family} uses {model.shape.pe}")
    rots = rotary_modules(model.hf)
    if not rots:
        raise ExtrapError(f"RoPE re-scaling: no rotary embedding module found in {type(model.hf).__name__}")
    rp = _config_rope(model.hf.config)
    base = float(rp.get("rope_theta", 10000.0))
    original = int(rp.get("original_max_position_embeddings") or original)
    info = {"rope": req.name, "factor": req.factor, "original_max_position": original, "base": base}
    if req.options:
        info["options"] = dict(req.options)
    if req.hf:
        params = _apply_hf(model, rots, req, rp, original)
        info.update(
            factor=params.get("factor", req.factor),
            original_max_position=params.get("original_max_position_embeddings", original),
            rope_parameters=params,
        )
        return info
    from extrap.positional.rotary import Rotary

    scheme = Rotary(base=base).rescaled(req.kind, req.factor, original, req.options)
    info.update(original_max_position=scheme.opts["original_max_position"], pe=scheme.spec)
    _write_frequencies(model, rots, scheme)
    return info


def _write_frequencies(model: HFModel, rots, scheme) -> None:
    """Put the scheme's θ and attention factor into every rotary module (for the sequence's length:
    a length-dependent scaling, see :mod:`extrap.hf.rope_length`)."""
    for _, _, rot in rots:
        d = 2 * rot.inv_freq.numel()
        inv, af = scheme.frequencies(d)
        release(rot)  # the model's own dynamic/longrope no longer applies
        rot.rope_type, rot._extrap_rope_type = "default", None  # HF's per-call updates must not overwrite ours
        rot.inv_freq.copy_(inv.to(rot.inv_freq.device))
        rot.original_inv_freq = inv.clone().to(rot.inv_freq.device)
        rot.attention_scaling = float(af)
        if scheme.length_dependent:
            hold_length(rot, lambda n, d=d: scheme.frequencies(d, n), model.rope_length)


def _apply_hf(model: HFModel, rots, req: RopeRequest, rp: dict, original: int) -> dict:
    """transformers' own ``hf:TYPE``: set the config's rope parameters and rebuild its rotary modules."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if req.kind not in ROPE_INIT_FUNCTIONS:
        raise ExtrapError(f"RoPE hf:TYPE: TYPE must be one of {', '.join(ROPE_INIT_FUNCTIONS)}, got {req.kind!r}")
    half = rots[0][2].inv_freq.numel()  # rotary dimension / 2
    c = model.hf.config
    params = hf_rope_parameters(req, rp, original, half, getattr(c, "max_position_embeddings", None))
    if hasattr(c, "rope_parameters"):
        c.rope_parameters = params
    else:  # transformers 4: theta apart
        c.rope_scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    for parent, name, rot in rots:
        try:
            new = type(rot)(config=c)
        except KeyError as e:  # a type extrap has no table for: transformers names what it missed
            raise ExtrapError(
                f"RoPE {req.name} needs parameter {e.args[0]}: give it as --rope {req.name}:{e.args[0]}=VALUE"
            ) from None
        if new.inv_freq.numel() != half:
            raise ExtrapError(
                f"RoPE {req.name} gives {new.inv_freq.numel()} frequencies per head where this model's rotary "
                f"embedding has {half} (rope_parameters {params})"
            )
        if not torch.isfinite(new.inv_freq).all():
            raise ExtrapError(f"RoPE {req.name} with rope_parameters {params} gives frequencies that are not finite")
        setattr(parent, name, new.to(rot.inv_freq.device))
    hold_native(model.hf, model.rope_length)  # the new modules' dynamic / longrope: θ once per sequence
    return params


def hf_rope_parameters(req: RopeRequest, rp: dict, original: int, half: int, max_position: int | None = None) -> dict:
    """transformers ``rope_parameters`` for ``req`` (an ``hf:TYPE``): options, then the config, then defaults.

    ``rp``: the config's rope parameters; ``max_position``: its max_position_embeddings, from which
    transformers derives the factor of yarn and longrope when none is given (:func:`_factor`).
    """
    table = HF_ROPE_PARAMETERS.get(req.kind)
    params = {"rope_type": req.kind, "rope_theta": float(rp.get("rope_theta", 10000.0)), "factor": req.factor}
    if "partial_rotary_factor" in rp:
        params["partial_rotary_factor"] = rp["partial_rotary_factor"]
    if table is None:  # registered by transformers, unknown to extrap: options as numbers, checked by transformers
        return {**params, **{k: _convert(req, k, v, float) for k, v in req.options.items()}}
    unknown = sorted(set(req.options) - set(table))
    if unknown:
        takes = ", ".join(table) or "no option besides the factor"
        raise ExtrapError(f"RoPE {req.name} takes {takes}; got {', '.join(unknown)}")
    same_type = rp.get("rope_type", rp.get("type")) == req.kind
    for name, (kind, default) in table.items():
        if name in req.options:
            params[name] = _convert(req, name, req.options[name], kind)
        elif name in rp and (same_type or name == "original_max_position_embeddings"):
            params[name] = rp[name]
        elif default == L_TR:
            params[name] = original
        elif default is not None and default != FROM_CONFIG:
            params[name] = default
    params["factor"] = _factor(req, rp, same_type, params.get("original_max_position_embeddings"), max_position)
    missing = [n for n, (_, d) in table.items() if d == FROM_CONFIG and n not in params]
    if missing:
        raise ExtrapError(
            f"RoPE {req.name} needs {', '.join(missing)} (lists of {half} numbers) in the model's "
            "config.json rope_parameters, which has none: it cannot be given on the command line"
        )
    _check_hf(req, params, half)
    return params


def _factor(req: RopeRequest, rp: dict, same_type: bool, original: int | None, max_position: int | None) -> float:
    """The request's factor; without one, the config's (same type), else transformers' derived one, else 1.

    transformers derives yarn's and longrope's factor, and from it their attention factor, as
    max_position_embeddings / original_max_position_embeddings (Phi-3 configs carry no factor): a
    factor of 1 in its place would silently change the loaded model.
    """
    if req.factor_given:
        return req.factor
    if same_type and rp.get("factor") is not None:
        return float(rp["factor"])
    if req.kind in DERIVED_FACTOR and original and max_position:
        return max_position / original
    return req.factor


def _convert(req: RopeRequest, name: str, text: str, kind: type):
    """One option's value: int, float (positive, finite) or bool; lists only come from the config."""
    if kind is list:
        raise ExtrapError(f"RoPE {req.name}: {name} is a list, read from the model's config.json only")
    if kind is bool:
        if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ExtrapError(f"RoPE {req.name}: {name}={text} must be true or false")
        return text.lower() in ("1", "true", "yes")
    try:
        value = float(text)
    except ValueError:
        raise ExtrapError(f"RoPE {req.name}: {name}={text} must be a number") from None
    if not (value > 0 and math.isfinite(value)) or (kind is int and not value.is_integer()):
        raise ExtrapError(f"RoPE {req.name}: {name}={text} must be a positive {'integer' if kind is int else 'number'}")
    return int(value) if kind is int else value


def _check_hf(req: RopeRequest, params: dict, half: int) -> None:
    """What transformers would only warn about, or crash on later: refused here in one line."""
    if req.kind == "llama3":
        check_llama3(params["low_freq_factor"], params["high_freq_factor"])
    for name in ("long_factor", "short_factor"):
        if name in params and len(params[name]) != half:
            raise ExtrapError(
                f"RoPE {req.name}: the config's {name} has {len(params[name])} numbers; this model needs {half}"
            )

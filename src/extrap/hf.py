"""Hugging Face checkpoints as extrap runs: ``hf:PATH`` wherever a run directory is accepted.

:func:`load_hf` reads a *local* folder written by ``save_pretrained`` (nothing is ever
downloaded) and returns an :class:`HFRun` that duck-types :class:`extrap.runs.Run`:

* ``.model``: an :class:`HFModel` adapter around the transformers model with the interface
  that :mod:`extrap.evaluate`, :mod:`extrap.erf` and :mod:`extrap.align` use:
  ``forward(idx, positions=None, *, window=None, last=None, return_probs=False, embeds=None)``
  returning :class:`extrap.model.Output`, ``embed``, ``set_temperature``, ``cfg``;
* ``.tokenizer``: the HF tokenizer behind extrap's tokenizer interface (``encode``,
  ``encode_array``, ``decode``, ``vocab_size``, ``name``, ``fingerprint``);
* ``.config``: {"model": ..., "train": {"train_length", "corpus"}, "hf_path", "config_hash", "dtype", ...}.

Supported: causal LMs with RoPE (llama, mistral, qwen2, qwen3, gpt_neox), learned APE (gpt2) and
ALiBi (bloom, mpt).  T5 checkpoints are read by :func:`hf_theory` (learned bucket tables) and
:mod:`extrap.hf_t5` (temperature, probes), not evaluated as causal LMs.

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
  :func:`_window_attention`, registered as ``extrap_window``, for that call: causal attention over
  query chunks and only the keys each chunk can see, so no (L, L) tensor is built.  BLOOM and MPT
  build (B·H, L, L) scores anyway; their pre-hook adds the band to the causal mask they are given.
* pre-softmax logits (:meth:`HFModel.layer_logits`, for Prop. 1 / Prop. 2): under eager attention,
  the input of the first softmax that the layer's attention module calls, recorded by a
  ``TorchFunctionMode``; the forward stops right there.  This works the same for every family.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from extrap.errors import ExtrapError

ROPE_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gpt_neox")
CAUSAL_FAMILIES = {**{k: "rope" for k in ROPE_FAMILIES}, "gpt2": "learned", "bloom": "alibi", "mpt": "alibi"}
T5_FAMILIES = ("t5", "mt5", "umt5")
EAGER_FAMILIES = ("bloom", "mpt")  # hand-written eager attention, not through transformers' AttentionInterface
PROBS_MAX_LENGTH = 2048  # output_attentions / logits only up to this length (dense (B, H, L, L) per layer)
WINDOW_IMPL = "extrap_window"  # name of _window_attention in transformers' AttentionInterface
WINDOW_CHUNK = 256  # queries per block of _window_attention
ROPE_KINDS = ("linear", "ntk", "dynamic", "ntk-by-parts", "yarn", "truncated")
HF_ROPE_KINDS = ("linear", "dynamic", "yarn", "longrope", "llama3")


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ExtrapError("hf: models need transformers: pip install 'extrap[hf]'") from None
    return transformers


def strip_prefix(path) -> str:
    s = str(path)
    return s[3:] if s.startswith("hf:") else s


def _check_folder(path) -> Path:
    p = Path(strip_prefix(path)).expanduser()
    if not p.is_dir() or not (p / "config.json").is_file():
        raise ExtrapError(f"no such model folder: {strip_prefix(path)} (extrap does not download)")
    return p


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_hf_config(folder: Path):
    transformers = _transformers()
    try:
        return transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        raise ExtrapError(f"not supported: cannot read {folder}/config.json ({str(e).splitlines()[0]})") from None


def _arch(cfg) -> str:
    archs = getattr(cfg, "architectures", None) or []
    return archs[0] if archs else str(getattr(cfg, "model_type", "unknown"))


def default_device_dtype(device=None, dtype=None) -> tuple[str, torch.dtype]:
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype is None:
        dtype = torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    elif isinstance(dtype, str):
        names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                 "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
                 "float64": torch.float64}
        if dtype not in names:
            raise ExtrapError(f"--dtype must be one of {', '.join(names)}, got {dtype!r}")
        dtype = names[dtype]
    return str(device), dtype


# ---------------------------------------------------------------------------
# tokenizer
# ---------------------------------------------------------------------------
class HFTokenizer:
    """An HF tokenizer behind extrap's tokenizer interface (no special tokens are added)."""

    def __init__(self, tok, folder: Path):
        self.tok = tok
        tok.model_max_length = int(1e30)  # no "sequence longer than" warnings: we cut windows ourselves
        files = sorted(f for f in folder.iterdir() if f.name.startswith(("tokenizer", "vocab", "merges",
                                                                          "special_tokens", "spiece")))
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode())
            h.update(f.read_bytes())
        self.fingerprint = h.hexdigest()[:16]
        self.name = "hf"
        self.vocab_size = len(tok)

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def encode_array(self, text: str) -> np.ndarray:
        ids: list[int] = []
        lines = text.splitlines(keepends=True)
        chunk = 2000  # lines per call: bounded memory, identical ids for line-separated text
        for i in range(0, len(lines), chunk):
            ids.extend(self.encode("".join(lines[i:i + chunk])))
        return np.asarray(ids, dtype=np.int64)

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids])


# ---------------------------------------------------------------------------
# the model adapter
# ---------------------------------------------------------------------------
class _Attn:
    def __init__(self, tau: float = 1.0):
        self.temperature = torch.tensor(float(tau))


class _Stop(Exception):
    """Ends a forward pass once what was wanted has been recorded."""


class HFModel(nn.Module):
    """A transformers causal LM with the forward/embed/temperature interface of :class:`extrap.model.GPT`."""

    def __init__(self, hf_model, family: str, pe: str):
        super().__init__()
        self.hf = hf_model
        self.family = family
        c = hf_model.config
        n_layer = getattr(c, "num_hidden_layers", None) or getattr(c, "n_layer", None) or getattr(c, "n_layers")
        n_head = getattr(c, "num_attention_heads", None) or getattr(c, "n_head", None) or getattr(c, "n_heads")
        d_model = getattr(c, "hidden_size", None) or getattr(c, "n_embd", None) or getattr(c, "d_model")
        self.cfg = SimpleNamespace(n_layer=int(n_layer), n_head=int(n_head), d_model=int(d_model),
                                   vocab_size=int(c.vocab_size), pe=pe, attn_backend=None)
        self.attn_modules = [m for m in hf_model.modules()
                             if type(m).__name__.endswith("Attention")
                             and (hasattr(m, "scaling") or hasattr(m, "inv_norm_factor")
                                  or hasattr(m, "softmax_scale"))]
        if len(self.attn_modules) != self.cfg.n_layer:
            raise ExtrapError(f"not supported: {type(hf_model).__name__} ({len(self.attn_modules)} attention "
                              f"modules found for {self.cfg.n_layer} layers)")
        for m in self.attn_modules:
            for attr in ("scaling", "inv_norm_factor", "beta", "softmax_scale"):
                if hasattr(m, attr):
                    setattr(m, f"_extrap_base_{attr}", getattr(m, attr))
            m._extrap_tau, m._extrap_window = 1.0, None
            if family in EAGER_FAMILIES:
                m.register_forward_pre_hook(_eager_attention_pre_hook, with_kwargs=True)
        if family not in EAGER_FAMILIES:
            _transformers().AttentionInterface.register(WINDOW_IMPL, _window_attention)
        self._tau = [1.0] * self.cfg.n_layer
        params = inspect.signature(hf_model.forward).parameters
        self._keep = "logits_to_keep" in params
        self._pos_ids = "position_ids" in params and family != "bloom"

    # ---- interface used by evaluate/align ---------------------------------------
    @property
    def blocks(self) -> list:
        return [SimpleNamespace(attn=_Attn(t)) for t in self._tau]

    def default_positions(self, L: int, device) -> torch.Tensor:
        return torch.arange(L, device=device)

    def set_temperature(self, tau) -> None:
        R = self.cfg.n_layer
        taus = [float(t) for t in tau] if isinstance(tau, (list, tuple)) else [float(tau)] * R
        if len(taus) != R:
            raise ExtrapError(f"temperature: need {R} values, got {len(taus)}")
        if any(not (t > 0 and math.isfinite(t)) for t in taus):
            raise ExtrapError("temperature must be a positive finite number")
        for m, t in zip(self.attn_modules, taus):
            if hasattr(m, "_extrap_base_scaling"):
                m.scaling = m._extrap_base_scaling / t
            if hasattr(m, "_extrap_base_inv_norm_factor"):  # BLOOM: alibi.baddbmm(q, k, beta, alpha)
                m.inv_norm_factor = m._extrap_base_inv_norm_factor / t
                m.beta = m._extrap_base_beta / t
            if hasattr(m, "_extrap_base_softmax_scale"):  # MPT: q·k·softmax_scale + position_bias (pre-hook)
                m.softmax_scale = m._extrap_base_softmax_scale / t
            m._extrap_tau = t
        self._tau = taus

    def embed(self, idx: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Token embeddings (the HF model adds learned absolute positions itself)."""
        return self.hf.get_input_embeddings()(idx)

    def forward(self, idx: torch.Tensor, positions: torch.Tensor | None = None, *, window: int | None = None,
                last: int | None = None, return_probs: bool = False, embeds: torch.Tensor | None = None):
        from extrap.model import Output

        B, L = idx.shape
        kw: dict = {"use_cache": False}
        if embeds is not None:
            kw["inputs_embeds"] = embeds
        else:
            kw["input_ids"] = idx
        if positions is not None and not _is_arange(positions):
            if not self._pos_ids:
                raise ExtrapError(f"{self.family}: custom position ids are not supported")
            kw["position_ids"] = (positions if positions.dim() == 2 else positions[None].expand(B, -1)).long()
        if last is not None and self._keep:
            kw["logits_to_keep"] = int(last)
        if window is not None:
            if int(window) < 1:
                raise ExtrapError(f"--window must be >= 1, got {window}")
            if return_probs:
                raise ExtrapError("attention probabilities with a window are not available for hf: models")
            with self._window(int(window)):
                out = self.hf(**kw)
            probs = None
        elif return_probs:
            if L > PROBS_MAX_LENGTH:
                raise ExtrapError(f"attention probabilities of hf: models only up to L={PROBS_MAX_LENGTH}")
            with _attn_implementation(self.hf, "eager"):
                out = self.hf(**kw, output_attentions=True)
            probs = [[(0, a)] for a in out.attentions]
        else:
            out = self.hf(**kw)
            probs = None
        logits = out.logits
        if last is not None and logits.shape[1] != last:
            logits = logits[:, -last:]
        return Output(logits=logits, probs=probs, embeds=embeds)

    @contextmanager
    def _window(self, W: int):
        """Every layer attends to the W most recent keys for the duration of the block."""
        for m in self.attn_modules:
            m._extrap_window = W
        try:
            with _attn_implementation(self.hf, None if self.family in EAGER_FAMILIES else WINDOW_IMPL):
                yield
        finally:
            for m in self.attn_modules:
                m._extrap_window = None

    @torch.no_grad()
    def layer_logits(self, idx: torch.Tensor, layer: int = 0) -> torch.Tensor:
        """Pre-softmax logits q·k·scale + bias (at the current τ) of one layer: (B, H, L, L), -inf = masked.

        Runs eager attention and records the input of the first softmax called inside the layer's
        attention module, then stops the forward pass (later layers are not run).
        """
        L = idx.shape[1]
        if L > PROBS_MAX_LENGTH:
            raise ExtrapError(f"attention logits of hf: models only up to L={PROBS_MAX_LENGTH}")
        tap = _SoftmaxTap()
        hook = self.attn_modules[layer].register_forward_pre_hook(lambda *_: setattr(tap, "active", True))
        try:
            with _attn_implementation(self.hf, "eager"), tap:
                self.hf(input_ids=idx, use_cache=False)
        except _Stop:
            pass
        finally:
            hook.remove()
        s = tap.logits
        if s is None or s.dim() != 4 or s.shape[-2:] != (L, L):
            raise ExtrapError(f"not supported: no (L, L) attention logits found in layer {layer} of {self.family}")
        # eager masks fill (or add) finfo(dtype).min; the causal part is also set explicitly (fp16 scores)
        masked = (s <= torch.finfo(s.dtype).min / 2) | torch.ones(L, L, dtype=torch.bool, device=s.device).triu(1)
        return s.float().masked_fill(masked, -math.inf)

    # ---- 004 probes (extrap.align.attention_stats dispatches here) --------------
    @torch.no_grad()
    def attention_stats(self, segments: torch.Tensor, tau=None, *, upto_layer: int | None = None):
        from extrap.align import TOKEN_BUDGET, Stats, row_stats

        R = self.cfg.n_layer
        last = R - 1 if upto_layer is None else int(upto_layer)
        sums = [[0.0, 0.0, 0] for _ in range(last + 1)]
        old = list(self._tau)
        dev = next(self.parameters()).device
        self.eval()
        try:
            if tau is not None:
                self.set_temperature(tau)
            b = max(1, TOKEN_BUDGET // segments.shape[1])
            for i in range(0, segments.shape[0], b):
                out = self(segments[i:i + b].to(dev), return_probs=True, last=1)
                for layer in range(last + 1):
                    sp, sh, n = row_stats(out.probs[layer][0][1])
                    sums[layer][0] += sp
                    sums[layer][1] += sh
                    sums[layer][2] += n
        finally:
            self.set_temperature(old)
        layers = [{"pmax": s[0] / s[2], "entropy": s[1] / s[2]} for s in sums]
        return Stats(pmax=sum(v["pmax"] for v in layers) / len(layers),
                     entropy=sum(v["entropy"] for v in layers) / len(layers), layers=layers, rows=sums[0][2])


# ---------------------------------------------------------------------------
# attention: implementation switch, window, MPT/BLOOM pre-hook, softmax tap
# ---------------------------------------------------------------------------
@contextmanager
def _attn_implementation(hf_model, name: str | None):
    """Run every config of ``hf_model`` with attention implementation ``name`` in the block (None: as is)."""
    configs = {id(m.config): m.config for m in hf_model.modules()
               if hasattr(getattr(m, "config", None), "_attn_implementation")}
    saved = [(c, c._attn_implementation) for c in configs.values()]
    try:
        if name is not None:
            for c, _ in saved:
                c._attn_implementation = name
        yield
    finally:
        for c, impl in saved:
            c._attn_implementation = impl


def _window_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, sliding_window=None,
                      **kwargs):
    """Causal attention over the ``module._extrap_window`` most recent keys, block by block of queries.

    An ``AttentionInterface`` function: query (B, H, L, D), key/value (B, H_kv, L, D); returns
    (B, L, H, D) and no weights, like HF's eager attention.  transformers builds no mask for an
    implementation it does not know (``attention_mask`` is None): the causal band is made here, per
    block, so memory is O(B·H·WINDOW_CHUNK·(W + WINDOW_CHUNK)).  A config's own ``sliding_window``
    (Mistral, Qwen) still applies.
    """
    W = module._extrap_window
    if sliding_window:
        W = min(W, int(sliding_window))
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    rep = query.shape[1] // key.shape[1]  # grouped-query attention: each key/value head serves `rep` heads
    if rep > 1:
        key, value = key.repeat_interleave(rep, 1), value.repeat_interleave(rep, 1)
    L = query.shape[2]
    out = []
    for q0 in range(0, L, WINDOW_CHUNK):
        q1 = min(L, q0 + WINDOW_CHUNK)
        k0 = max(0, q0 - W + 1)
        s = (query[:, :, q0:q1] @ key[:, :, k0:q1].transpose(-1, -2)) * scaling
        t = torch.arange(q0, q1, device=s.device)[:, None] - torch.arange(k0, q1, device=s.device)[None]
        s = s.masked_fill((t < 0) | (t >= W), -math.inf)  # t: distance from query to key
        p = torch.softmax(s, dim=-1, dtype=torch.float32).to(value.dtype)
        p = nn.functional.dropout(p, p=dropout, training=module.training)
        out.append(p @ value[:, :, k0:q1])
    return torch.cat(out, 2).transpose(1, 2).contiguous(), None


def _band(mask: torch.Tensor, W: int) -> torch.Tensor:
    """``mask`` with every key W or more positions back masked too (BLOOM: additive; MPT: bool, True = masked)."""
    Lq, Lk = mask.shape[-2:]
    q = torch.arange(Lk - Lq, Lk, device=mask.device)[:, None]
    far = torch.arange(Lk, device=mask.device)[None] <= q - W
    return mask | far if mask.dtype == torch.bool else mask.masked_fill(far, torch.finfo(mask.dtype).min)


def _eager_attention_pre_hook(module, args, kwargs):
    """BLOOM / MPT attention: MPT's ALiBi ``position_bias`` divided by τ, and the window's band in the mask."""
    tau, W = module._extrap_tau, module._extrap_window
    if tau == 1.0 and W is None:
        return None
    kwargs = dict(kwargs)
    if tau != 1.0 and kwargs.get("position_bias") is not None:  # BLOOM's bias is scaled by `beta` instead
        kwargs["position_bias"] = kwargs["position_bias"] / tau
    if W is not None:
        kwargs["attention_mask"] = _band(kwargs["attention_mask"], W)
    return args, kwargs


_SOFTMAX = (torch.softmax, torch.Tensor.softmax, nn.functional.softmax)


class _SoftmaxTap(TorchFunctionMode):
    """Once ``active``, records the input of the next softmax and ends the forward pass (:class:`_Stop`)."""

    def __init__(self):
        super().__init__()
        self.active, self.logits = False, None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.active and func in _SOFTMAX:
            self.logits = args[0].detach()
            raise _Stop
        return func(*args, **(kwargs or {}))


def _is_arange(positions: torch.Tensor) -> bool:
    p = positions if positions.dim() == 1 else positions[0]
    return bool(torch.equal(p.long(), torch.arange(p.numel(), device=p.device)))


# ---------------------------------------------------------------------------
# RoPE at inference
# ---------------------------------------------------------------------------
def _rotary_modules(hf_model) -> list[tuple[nn.Module, str, nn.Module]]:
    """(parent, attribute, module) of every rotary embedding module."""
    out = []
    for parent in hf_model.modules():
        for name, child in parent.named_children():
            if type(child).__name__.endswith("RotaryEmbedding"):
                out.append((parent, name, child))
    return out


def apply_rope(model: HFModel, rope: str, factor: float | None, original: int) -> dict:
    """Re-scale the model's RoPE: extrap's own ``rope`` kind, or ``hf:<type>`` (HF's implementation)."""
    from extrap.positional.rotary import rope_frequencies

    if model.family not in ROPE_FAMILIES:
        raise ExtrapError(f"--rope needs a RoPE model; {model.family} uses {model.cfg.pe}")
    rots = _rotary_modules(model.hf)
    if not rots:
        raise ExtrapError(f"--rope: no rotary embedding module found in {type(model.hf).__name__}")
    factor = 1.0 if factor is None else float(factor)
    if not factor > 0:
        raise ExtrapError(f"--factor must be > 0, got {factor}")
    c = model.hf.config
    rp = dict(getattr(c, "rope_parameters", None) or {})
    base = float(rp.get("rope_theta", getattr(c, "rope_theta", 10000.0)))
    info = {"rope": rope, "factor": factor, "original_max_position": original, "base": base}
    if rope.startswith("hf:"):
        kind = rope[3:]
        if kind not in HF_ROPE_KINDS:
            raise ExtrapError(f"--rope hf:TYPE: TYPE must be one of {', '.join(HF_ROPE_KINDS)}, got {kind!r}")
        new = {**rp, "rope_type": kind, "factor": factor}
        if kind in ("dynamic", "yarn", "longrope", "llama3"):
            new["original_max_position_embeddings"] = original
        c.rope_parameters = new
        for parent, name, rot in rots:
            setattr(parent, name, type(rot)(config=c).to(rot.inv_freq.device))
        return info
    if rope not in ROPE_KINDS:
        raise ExtrapError(f"--rope must be one of {', '.join(ROPE_KINDS)} or hf:TYPE, got {rope!r}")
    for _, _, rot in rots:
        d = 2 * rot.inv_freq.numel()

        def freqs(seq_len=None, d=d):
            return rope_frequencies(rope, d, base=base, factor=factor, original_max_position=original,
                                    seq_len=seq_len)

        inv, af = freqs()
        rot.rope_type = "default"  # HF's dynamic/longrope updates must not overwrite ours
        rot.inv_freq.copy_(inv.to(rot.inv_freq.device))
        rot.original_inv_freq = inv.clone().to(rot.inv_freq.device)
        rot.attention_scaling = float(af)
        if rope == "dynamic":  # stateless: frequencies of the current sequence length, every call
            def pre(module, args, kwargs, freqs=freqs):
                pos = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
                seq = int(pos.max()) + 1 if pos is not None else original
                inv_s, af_s = freqs(seq_len=seq)
                module.inv_freq.copy_(inv_s.to(module.inv_freq.device))
                module.attention_scaling = float(af_s)
            rot.register_forward_pre_hook(pre, with_kwargs=True)
    return info


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------
@dataclass
class HFRun:
    model: HFModel
    tokenizer: HFTokenizer
    config: dict
    path: str
    step: int | None = None
    extra: dict = field(default_factory=dict)

    def __iter__(self):
        return iter((self.model, self.tokenizer, self.config))

    @property
    def train_length(self) -> int:
        return int(self.config["train"]["train_length"])


def is_hf(path) -> bool:
    return str(path).startswith("hf:")


def load_hf(path, dtype=None, device=None, rope: str | None = None, factor: float | None = None,
            train_length: int | None = None, corpus: str = "stdlib") -> HFRun:
    """An HF causal LM from a local folder as an extrap run (see the module docstring)."""
    transformers = _transformers()
    folder = _check_folder(path)
    hf_cfg = _read_hf_config(folder)
    mtype = str(getattr(hf_cfg, "model_type", ""))
    if mtype in T5_FAMILIES:
        raise ExtrapError(f"not supported: {_arch(hf_cfg)} is an encoder-decoder; use "
                          f"`extrap theory --checkpoint hf:PATH` or extrap.hf_t5 for T5")
    if mtype not in CAUSAL_FAMILIES:
        raise ExtrapError(f"not supported: {_arch(hf_cfg)}")
    device, dt = default_device_dtype(device, dtype)
    try:
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=dt)
    except (OSError, ValueError) as e:
        raise ExtrapError(f"cannot load a model from {folder}: {str(e).splitlines()[0]}") from None
    hf_model.to(device).eval()
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, TypeError) as e:
        raise ExtrapError(f"{folder} has no usable tokenizer: {str(e).splitlines()[0]}") from None
    pe = f"hf:{mtype}/{CAUSAL_FAMILIES[mtype]}"
    model = HFModel(hf_model, mtype, pe)
    n_pos = getattr(hf_cfg, "max_position_embeddings", None) or getattr(hf_cfg, "n_positions", None) \
        or getattr(hf_cfg, "max_seq_len", None)
    tl_source = "--train-length"
    if train_length is None:
        if n_pos is not None:
            train_length, tl_source = int(n_pos), "config"
        elif mtype == "bloom":  # ALiBi: the config stores no length; BLOOM was trained at 2048 tokens
            train_length, tl_source = 2048, "bloom default (2048)"
        else:
            raise ExtrapError(f"{folder}: the config gives no context length; pass --train-length")
    if train_length < 2:
        raise ExtrapError(f"--train-length must be >= 2, got {train_length}")
    rope_info = None
    if rope is not None:
        rope_info = apply_rope(model, rope, factor, int(n_pos or train_length))
        model.cfg.pe = f"{pe}+{rope}x{rope_info['factor']:g}"
    elif factor is not None:
        raise ExtrapError("--factor needs --rope")
    config = {
        "model": {"pe": model.cfg.pe, "n_layer": model.cfg.n_layer, "n_head": model.cfg.n_head,
                  "d_model": model.cfg.d_model, "vocab_size": model.cfg.vocab_size, "architecture": _arch(hf_cfg),
                  "model_type": mtype},
        "train": {"train_length": int(train_length), "train_length_source": tl_source, "corpus": corpus},
        "hf_path": str(folder), "config_hash": _sha256(folder / "config.json"),
        "dtype": str(dt).replace("torch.", ""), "device": device,
        **({"rope": rope_info} if rope_info else {}),
    }
    return HFRun(model=model, tokenizer=HFTokenizer(tok, folder), config=config, path=f"hf:{folder}")


# ---------------------------------------------------------------------------
# theory on learned / fixed biases of HF checkpoints
# ---------------------------------------------------------------------------
def t5_tables(path) -> list[dict]:
    """T5's learned bucket tables: [{"part", "table": (H, num_buckets), "num_buckets", "max_distance",
    "bidirectional"}] for the encoder (bidirectional) and, when present, the decoder (causal)."""
    from safetensors.torch import load_file

    folder = _check_folder(path)
    cfg = _read_hf_config(folder)
    weights = {}
    for f in sorted(folder.glob("*.safetensors")):
        weights.update({k: v for k, v in load_file(str(f)).items() if "relative_attention_bias" in k})
    if not weights:
        bins = sorted(folder.glob("pytorch_model*.bin"))
        for f in bins:
            sd = torch.load(str(f), map_location="cpu", weights_only=True)
            weights.update({k: v for k, v in sd.items() if "relative_attention_bias" in k})
    out = []
    for part in ("encoder", "decoder"):
        keys = sorted(k for k in weights if k.startswith(part) or f".{part}." in k or k.startswith(f"{part}."))
        if not keys:
            continue
        w = weights[keys[0]].detach().double()  # (num_buckets, H)
        out.append({"part": part, "table": w.T.contiguous(), "num_buckets": int(cfg.relative_attention_num_buckets),
                    "max_distance": int(getattr(cfg, "relative_attention_max_distance", 128)),
                    "bidirectional": part == "encoder", "key": keys[0]})
    if not out:
        raise ExtrapError(f"{folder}: no relative_attention_bias weights found")
    return out


def alibi_checkpoint_slopes(folder: Path, cfg) -> list[float]:
    """The ALiBi slopes the checkpoint's own code uses (BLOOM: Press et al.; MPT: alibi_bias_max)."""
    mtype = cfg.model_type
    if mtype == "bloom":
        from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

        return [float(s) for s in _get_alibi_slopes(int(cfg.n_head), torch.device("cpu"))]
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    n_heads = int(cfg.n_heads)
    a = build_mpt_alibi_tensor(n_heads, 2, int(cfg.attn_config.alibi_bias_max))  # (H, 1, 2): [-m, 0]
    return [float(-a[h, 0, 0]) for h in range(n_heads)]


def hf_theory(path, eps=(1e-3, 1e-6), lengths=None, train_length: int | None = None) -> list[dict]:
    """Per-head theory rows for an HF checkpoint's positional bias (T5 tables, BLOOM/MPT ALiBi)."""
    from extrap.positional import alibi_slopes
    from extrap.theory import analyse

    folder = _check_folder(path)
    cfg = _read_hf_config(folder)
    mtype = str(getattr(cfg, "model_type", ""))
    rows = []
    if mtype in T5_FAMILIES:
        tl = train_length or 512
        for t in t5_tables(folder):
            spec = (f"t5:num_buckets={t['num_buckets']},max_distance={t['max_distance']},"
                    f"bidirectional={str(t['bidirectional']).lower()}")
            H = t["table"].shape[0]
            for r in analyse(spec, H, {"table": t["table"]}, eps=eps, lengths=lengths, train_length=tl):
                rows.append({"checkpoint": f"hf:{folder}", "part": t["part"], "layer": 0, **r.to_dict()})
        return rows
    if mtype in ("bloom", "mpt"):
        slopes = alibi_checkpoint_slopes(folder, cfg)
        H = len(slopes)
        tl = train_length or int(getattr(cfg, "max_position_embeddings", None)
                                 or getattr(cfg, "max_seq_len", None) or 2048)
        press = alibi_slopes(H)
        values = {"slope": torch.tensor(slopes, dtype=torch.float64)}
        for r in analyse("alibi", H, values, eps=eps, lengths=lengths, train_length=tl):
            rows.append({"checkpoint": f"hf:{folder}", "part": "decoder", "layer": None, **r.to_dict(),
                         "slope": slopes[r.head], "press_slope": press[r.head]})
        return rows
    if mtype in CAUSAL_FAMILIES:
        scheme = "rope" if CAUSAL_FAMILIES[mtype] == "rope" else "learned"
        for r in analyse(scheme, 1, eps=eps):
            rows.append({"checkpoint": f"hf:{folder}", "part": "decoder", "layer": None, **r.to_dict()})
        return rows
    raise ExtrapError(f"not supported: {_arch(cfg)}")


def plot_t5_tables(path, out_dir) -> list[Path]:
    """004 Fig. 1 style heatmap of each T5 bucket table (heads x buckets), PNG + SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for t in t5_tables(path):
        fig, ax = plt.subplots(figsize=(6, 3))
        im = ax.imshow(t["table"].numpy(), aspect="auto", cmap="viridis")
        ax.set_xlabel("bucket")
        ax.set_ylabel("head")
        ax.set_title(f"T5 {t['part']} relative attention bias")
        fig.colorbar(im, ax=ax)
        for ext in ("png", "svg"):
            f = out_dir / f"t5_{t['part']}_buckets.{ext}"
            fig.savefig(f, bbox_inches="tight")
            files.append(f)
        plt.close(fig)
    return files


def config_summary(run) -> dict:
    """What a results JSON records about an hf: run (empty for project runs)."""
    c = getattr(run, "config", {}) or {}
    if "hf_path" not in c:
        return {}
    return {k: c[k] for k in ("hf_path", "config_hash", "dtype", "rope") if k in c}


def dump(obj) -> str:
    return json.dumps(obj, default=str)

"""HFModel: a transformers causal LM behind the interface of :class:`extrap.model.GPT`."""

from __future__ import annotations

import inspect
import math
from contextlib import contextmanager
from types import SimpleNamespace

import torch
from torch import nn

from extrap.errors import ExtrapError
from extrap.hf.attention import (_attn_implementation, _eager_attention_pre_hook, _is_arange, _SoftmaxTap, _Stop,
                                 _window_attention)
from extrap.hf.common import EAGER_FAMILIES, PROBS_MAX_LENGTH, WINDOW_IMPL, _transformers


class _Attn:
    def __init__(self, tau: float = 1.0):
        self.temperature = torch.tensor(float(tau))


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

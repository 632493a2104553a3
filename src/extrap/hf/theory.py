"""Theory on HF checkpoints: T5 per-head bucket tables, and the ALiBi slopes BLOOM/MPT models compute."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from extrap.errors import ExtrapError
from extrap.hf.common import CAUSAL_FAMILIES, T5_FAMILIES, architecture, check_folder, read_hf_config
from extrap.hf.rope_config import is_rope_config

if TYPE_CHECKING:
    from extrap.theory.reports import CheckpointHead

T5_TRAIN_LENGTH = 512  # T5's pre-training input length (Raffel et al. 2020)


def _t5_layer(key: str) -> int:
    """The block index in a T5 weight name (``encoder.block.3.layer.0...`` -> 3; 0 when none)."""
    m = re.search(r"block\.(\d+)\.", key)
    return int(m.group(1)) if m else 0


def _t5_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every ``relative_attention_bias`` tensor of the checkpoint (safetensors, else pytorch_model*.bin)."""
    from safetensors.torch import load_file

    weights = {}
    for f in sorted(folder.glob("*.safetensors")):
        weights.update({k: v for k, v in load_file(str(f)).items() if "relative_attention_bias" in k})
    if not weights:
        for f in sorted(folder.glob("pytorch_model*.bin")):
            sd = torch.load(str(f), map_location="cpu", weights_only=True)
            weights.update({k: v for k, v in sd.items() if "relative_attention_bias" in k})
    return weights


def t5_tables(path) -> list[dict]:
    """T5's learned bucket tables: [{"part", "layer", "table": (H, num_buckets), "num_buckets",
    "max_distance", "bidirectional", "key"}] for the encoder (bidirectional) and, when present, the
    decoder (causal); one per layer that has its own table (T5: the first; UMT5: every layer)."""
    folder = check_folder(path)
    cfg = read_hf_config(folder)
    weights = _t5_weights(folder)
    out = []
    for part in ("encoder", "decoder"):
        keys = [k for k in weights if k.startswith(f"{part}.") or f".{part}." in k]
        for key in sorted(keys, key=lambda k: (_t5_layer(k), k)):
            if any(t["part"] == part and t["layer"] == _t5_layer(key) for t in out):
                continue  # a tied copy of the same layer's table
            out.append(
                {
                    "part": part,
                    "layer": _t5_layer(key),
                    "table": weights[key].detach().double().T.contiguous(),  # stored (num_buckets, H)
                    "num_buckets": int(cfg.relative_attention_num_buckets),
                    "max_distance": int(getattr(cfg, "relative_attention_max_distance", 128)),
                    "bidirectional": part == "encoder",
                    "key": key,
                }
            )
    if not out:
        raise ExtrapError(f"{folder}: no relative_attention_bias weights found")
    return out


@dataclass(frozen=True)
class CheckpointSlopes:
    """The ALiBi slopes a BLOOM/MPT checkpoint's model computes, and why they may differ from its config."""

    slopes: list[float]
    note: str | None = None  # set when the config asks for other slopes than the model computes


def _mpt_model_slopes(cfg) -> list[float]:
    """The slopes transformers' MptModel adds, read from the ``position_bias`` its first block receives.

    A one-layer copy of the configuration (same heads, attention settings and max_seq_len, tiny
    width) runs one forward pass, so the slopes are whatever this transformers version computes.
    """
    import transformers

    n_heads = int(cfg.n_heads)
    small = type(cfg).from_dict({**cfg.to_dict(), "d_model": 2 * n_heads, "n_layers": 1, "vocab_size": 4})
    model = transformers.MptModel(small).eval()
    seen = {}

    def record(module, args, kwargs) -> None:
        seen.setdefault("bias", kwargs.get("position_bias"))

    hook = model.blocks[0].register_forward_pre_hook(record, with_kwargs=True)
    try:
        with torch.no_grad():
            model(input_ids=torch.zeros(1, 2, dtype=torch.long))
    finally:
        hook.remove()
    bias = seen.get("bias")
    if bias is None:
        raise ExtrapError("MptModel passed no position_bias to its blocks: cannot read its ALiBi slopes")
    bias = bias.reshape(n_heads, -1).double()  # (H, max_seq_len): the row -m_h * (max_seq_len - 1 - k)
    return [float(bias[h, -1] - bias[h, -2]) for h in range(n_heads)]  # Press et al. 2022 §3: one step is m_h


def alibi_checkpoint_slopes(folder: Path, cfg) -> CheckpointSlopes:
    """The ALiBi slopes the checkpoint's model uses (BLOOM: Press et al.'s; MPT: what MptModel computes)."""
    if cfg.model_type == "bloom":
        from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

        return CheckpointSlopes([float(s) for s in _get_alibi_slopes(int(cfg.n_head), torch.device("cpu"))])
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    slopes = _mpt_model_slopes(cfg)
    n_heads, asked = len(slopes), float(cfg.attn_config.alibi_bias_max)
    wanted = build_mpt_alibi_tensor(n_heads, 2, asked).reshape(n_heads, 2).double()  # [-m_h, 0]
    if torch.allclose(-wanted[:, 0], torch.tensor(slopes, dtype=torch.float64), rtol=1e-6, atol=0):
        return CheckpointSlopes(slopes)
    # MPT's slopes are 2^(-b * k / H') for k = 1..H' (H' the power of two >= H): the largest is 2^(-b / H')
    used = -math.log2(max(slopes)) * 2 ** math.ceil(math.log2(n_heads))
    note = (
        f"config.json sets attn_config.alibi_bias_max = {asked:g}, but transformers' MptModel computes "
        f"the slopes of alibi_bias_max = {used:.6g}; the slopes reported are the ones the model computes"
    )
    return CheckpointSlopes(slopes, note)


def _t5_rows(folder: Path, eps, lengths, train_length: int) -> list[CheckpointHead]:
    from extrap.theory import analyse
    from extrap.theory.reports import CheckpointHead

    rows = []
    for t in t5_tables(folder):
        spec = (
            f"t5:num_buckets={t['num_buckets']},max_distance={t['max_distance']},"
            f"bidirectional={str(t['bidirectional']).lower()}"
        )
        H = t["table"].shape[0]
        for r in analyse(spec, H, {"table": t["table"]}, eps=eps, lengths=lengths, train_length=train_length):
            params = {"table": t["table"][r.head].tolist()}
            rows.append(CheckpointHead(f"hf:{folder}", t["part"], t["layer"], r, params))
    return rows


def _alibi_rows(folder: Path, cfg, eps, lengths, train_length: int) -> list[CheckpointHead]:
    from extrap.positional import alibi_slopes
    from extrap.theory import analyse
    from extrap.theory.reports import CheckpointHead

    found = alibi_checkpoint_slopes(folder, cfg)
    slopes = found.slopes
    H = len(slopes)
    press = alibi_slopes(H)
    values = {"slope": torch.tensor(slopes, dtype=torch.float64)}
    return [
        CheckpointHead(
            f"hf:{folder}",
            "decoder",
            None,
            r,
            params={"slope": slopes[r.head]},
            slope=slopes[r.head],
            press_slope=press[r.head],
            slope_note=found.note,
        )
        for r in analyse("alibi", H, values, eps=eps, lengths=lengths, train_length=train_length)
    ]


def hf_theory(path, eps=(1e-3, 1e-6), lengths=None, train_length: int | None = None) -> list[CheckpointHead]:
    """Per-head theory rows for an HF checkpoint's positional bias (T5 tables, BLOOM/MPT ALiBi).

    ``train_length`` None: 512 for T5 (its pre-training input length), the config's
    ``max_position_embeddings``/``max_seq_len`` for BLOOM/MPT (else 2048).  Each row's
    ``params`` holds the head's parameters (T5: its bucket table; ALiBi: its slope).
    """
    from extrap.theory import analyse
    from extrap.theory.reports import CheckpointHead

    folder = check_folder(path)
    cfg = read_hf_config(folder)
    mtype = str(getattr(cfg, "model_type", ""))
    if mtype in T5_FAMILIES:
        return _t5_rows(folder, eps, lengths, train_length or T5_TRAIN_LENGTH)
    if mtype in ("bloom", "mpt"):
        tl = train_length or int(
            getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "max_seq_len", None) or 2048
        )
        return _alibi_rows(folder, cfg, eps, lengths, tl)
    if mtype in CAUSAL_FAMILIES or is_rope_config(folder):  # any RoPE config (Phi-3, Gemma): the rope row
        scheme = "rope" if CAUSAL_FAMILIES.get(mtype, "rope") == "rope" else "learned"
        return [CheckpointHead(f"hf:{folder}", "decoder", None, r) for r in analyse(scheme, 1, eps=eps)]
    raise ExtrapError(f"not supported: {architecture(cfg)}")


def t5_bias_by_distance(table: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(t (D,), bias (H, D)): every head's bias at each distance t = i - j (query i, key j; negative: future
    keys of a bidirectional table) up to twice ``max_distance``; beyond it the last bucket holds."""
    from extrap.positional.bias import t5_bucket

    reach = 2 * table["max_distance"]
    ts = torch.arange(-reach if table["bidirectional"] else 0, reach + 1)
    buckets = t5_bucket(ts, table["bidirectional"], table["num_buckets"], table["max_distance"])
    return ts, table["table"][:, buckets]


def plot_t5_tables(path, out_dir) -> list[Path]:
    """004 Fig. 1 style heatmap of each T5 bias table against distance (heads x distance t), PNG + SVG."""
    from matplotlib.ticker import MaxNLocator

    from extrap.plotting import new_figure, save_figure

    files = []
    for t in t5_tables(path):
        ts, bias = t5_bias_by_distance(t)
        heads = bias.shape[0]
        fig = new_figure(8, 1.8 + 0.22 * heads)
        ax = fig.add_subplot()
        edges = torch.arange(int(ts[0]), int(ts[-1]) + 2).double() - 0.5  # one cell per distance
        im = ax.pcolormesh(edges.numpy(), (torch.arange(heads + 1) - 0.5).numpy(), bias.numpy(), cmap="viridis")
        ax.set_xscale("symlog", linthresh=1)  # T5's exact buckets near 0 and its log buckets both visible
        for d in (-t["max_distance"], t["max_distance"]) if t["bidirectional"] else (t["max_distance"],):
            ax.axvline(d, color="white", ls=":", lw=1)
        future = ", < 0: future keys" if t["bidirectional"] else ""
        ax.set_xlabel(f"distance t = i − j (tokens{future}); dotted: max_distance")
        ax.set_ylabel("head")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.invert_yaxis()  # head 0 on top, as in a table
        layer = f", layer {t['layer']}" if t["layer"] else ""
        ax.set_title(f"T5 {t['part']} relative attention bias{layer}")
        fig.colorbar(im, ax=ax, label="bias (brighter = larger)")
        suffix = f"_L{t['layer']}" if t["layer"] else ""
        files += save_figure(fig, out_dir, f"t5_{t['part']}{suffix}_buckets")
    return files

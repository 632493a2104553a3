"""Theory on HF checkpoints: T5 per-head bucket tables and ALiBi slopes read from BLOOM/MPT configs."""

from __future__ import annotations

from pathlib import Path

import torch

from extrap.errors import ExtrapError
from extrap.hf.common import CAUSAL_FAMILIES, T5_FAMILIES, architecture, check_folder, read_hf_config


def t5_tables(path) -> list[dict]:
    """T5's learned bucket tables: [{"part", "table": (H, num_buckets), "num_buckets", "max_distance",
    "bidirectional"}] for the encoder (bidirectional) and, when present, the decoder (causal)."""
    from safetensors.torch import load_file

    folder = check_folder(path)
    cfg = read_hf_config(folder)
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
        out.append(
            {
                "part": part,
                "table": w.T.contiguous(),
                "num_buckets": int(cfg.relative_attention_num_buckets),
                "max_distance": int(getattr(cfg, "relative_attention_max_distance", 128)),
                "bidirectional": part == "encoder",
                "key": keys[0],
            }
        )
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

    folder = check_folder(path)
    cfg = read_hf_config(folder)
    mtype = str(getattr(cfg, "model_type", ""))
    rows = []
    if mtype in T5_FAMILIES:
        tl = train_length or 512
        for t in t5_tables(folder):
            spec = (
                f"t5:num_buckets={t['num_buckets']},max_distance={t['max_distance']},"
                f"bidirectional={str(t['bidirectional']).lower()}"
            )
            H = t["table"].shape[0]
            for r in analyse(spec, H, {"table": t["table"]}, eps=eps, lengths=lengths, train_length=tl):
                rows.append({"checkpoint": f"hf:{folder}", "part": t["part"], "layer": 0, **r.to_dict()})
        return rows
    if mtype in ("bloom", "mpt"):
        slopes = alibi_checkpoint_slopes(folder, cfg)
        H = len(slopes)
        tl = train_length or int(
            getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "max_seq_len", None) or 2048
        )
        press = alibi_slopes(H)
        values = {"slope": torch.tensor(slopes, dtype=torch.float64)}
        for r in analyse("alibi", H, values, eps=eps, lengths=lengths, train_length=tl):
            rows.append(
                {
                    "checkpoint": f"hf:{folder}",
                    "part": "decoder",
                    "layer": None,
                    **r.to_dict(),
                    "slope": slopes[r.head],
                    "press_slope": press[r.head],
                }
            )
        return rows
    if mtype in CAUSAL_FAMILIES:
        scheme = "rope" if CAUSAL_FAMILIES[mtype] == "rope" else "learned"
        for r in analyse(scheme, 1, eps=eps):
            rows.append({"checkpoint": f"hf:{folder}", "part": "decoder", "layer": None, **r.to_dict()})
        return rows
    raise ExtrapError(f"not supported: {architecture(cfg)}")


def plot_t5_tables(path, out_dir) -> list[Path]:
    """004 Fig. 1 style heatmap of each T5 bucket table (heads x buckets), PNG + SVG."""
    from extrap.plotting import new_figure, save_figure

    files = []
    for t in t5_tables(path):
        fig = new_figure(6, 3)
        ax = fig.add_subplot()
        im = ax.imshow(t["table"].numpy(), aspect="auto", cmap="viridis")
        ax.set_xlabel("bucket")
        ax.set_ylabel("head")
        ax.set_title(f"T5 {t['part']} relative attention bias")
        fig.colorbar(im, ax=ax, label="bias added to the logit")
        files += save_figure(fig, out_dir, f"t5_{t['part']}_buckets")
    return files

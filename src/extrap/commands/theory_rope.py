"""``extrap theory``'s RoPE section: the flags, the analyses of rotary PEs and checkpoints, and their text.

    extrap theory rope --head-dim 128 --train-length 4096 --length 16384
    extrap theory "rope:base=5e5,scaling=llama3,factor=8,original_max_position=8192" --head-dim 128 --train-length 8192
    extrap theory --checkpoint hf:~/models/Llama-3.1-8B          # from config.json alone
    extrap theory --checkpoint RUN_DIR                          # an extrap run trained with rope or xpos

The Toeplitz-series table keeps its ``not-applicable`` row for a rotary PE; this section follows it
(``"rope"`` in ``--json``), computed by :func:`extrap.theory.rope.analyse_rope`.
"""

from __future__ import annotations

from extrap.commands import args as types
from extrap.commands import theory_modes
from extrap.errors import ExtrapError

# The RoPE analysis flags of ``extrap theory``: (flag, type, help); each is None unless given.
_FLAGS = (
    (
        "--head-dim",
        types.natural,
        "rotary dimension of one head: turns on the RoPE analysis of rotary PEs (rope, xpos)",
    ),
    (
        "--length",
        types.positive_int,
        "RoPE: the length L' analysed, distances 0..L'-1 (default: factor x training length of a scaling, "
        "else the training length; a config's max_position_embeddings)",
    ),
    (
        "--pretrain-base",
        float,
        "RoPE: the base of pre-training, for Liu et al.'s critical dimension (default: the scheme's base)",
    ),
    (
        "--tune-length",
        types.positive_int,
        "RoPE: the fine-tuning length with the scheme's own frequencies (Liu et al.'s critical base and regime)",
    ),
)


def add_arguments(p) -> None:
    """The RoPE analysis flags of ``extrap theory``."""
    for flag, kind, text in _FLAGS:
        p.add_argument(flag, type=kind, default=None, help=text)


def rope_for_pes(schemes, args, default_train_length: int) -> tuple:
    """The RoPE analysis of every rotary scheme among ``schemes`` (none without ``--head-dim``)."""
    from extrap.memory import check_head_dim
    from extrap.theory.aggregation import search_bytes
    from extrap.theory.rope import analyse_rope

    rotary = [s for s in schemes if s.rotates]
    if not rotary:
        theory_modes.refuse_rope_flags(args, "without a rotary PE (rope, xpos) to analyse")
    if not rotary or args.head_dim is None:
        return ()
    check_head_dim(args.head_dim, search_bytes(1), "the RoPE analysis")
    out = []
    for s in rotary:
        train = args.train_length or s.opts.get("original_max_position") or default_train_length
        out.append(analyse_rope(s, args.head_dim, train, args.length, **_extra(args)))
    return tuple(out)


def _extra(args) -> dict:
    return {"pretrain_base": args.pretrain_base, "tune_length": args.tune_length}


def rope_for_checkpoint(src, args) -> tuple:
    """The RoPE analysis of an hf: model with RoPE (its config.json) or of an extrap run trained with rope/xpos."""
    if args.head_dim is not None:
        raise ExtrapError("--head-dim is for PEs given by name: a checkpoint's config sets its head dimension")
    from extrap.run import is_hf

    if is_hf(src):
        from extrap.hf.rope_config import hf_rope_theory, is_rope_config

        if not is_rope_config(src):
            theory_modes.refuse_rope_flags(args, f"with --checkpoint {src}: its config has no RoPE")
            return ()
        return (hf_rope_theory(src, args.train_length, args.length, **_extra(args)),)
    from extrap import positional
    from extrap.run.directory import RunDir
    from extrap.theory.rope import analyse_rope

    try:
        cfg = RunDir(src).read_config()
    except (ExtrapError, TypeError, ValueError, KeyError):  # a foreign export: its bias rows say what it is
        theory_modes.refuse_rope_flags(args, f"with --checkpoint {src}: it records no rotary PE")
        return ()
    scheme = positional.get(cfg.pe)
    if not scheme.rotates:
        theory_modes.refuse_rope_flags(args, f"with --checkpoint {src}: it uses {cfg.pe}, not RoPE")
        return ()
    train = args.train_length or cfg.train_length
    head_dim = cfg.model.d_model // cfg.model.n_head
    r = analyse_rope(scheme, head_dim, train, args.length, pretrained=True, **_extra(args))
    return (_with_position_frequency(r, cfg),)


def _with_position_frequency(r, cfg):
    """The run's position frequency (An et al. 2025) added to its analysis: LM runs, packed windows of its L_tr."""
    if cfg.train.task:  # trained on retrieval examples, not the sampler's windows
        return r
    from dataclasses import replace

    from extrap.data.position_frequency import packed_windows

    t = cfg.train
    windows = int(t.steps) * int(t.batch_size) * int(getattr(t, "grad_accum", 1) or 1)
    return replace(r, position_frequency=packed_windows(t.corpus, cfg.train_length, windows=windows))


def _pair_table(r) -> list[str]:
    header = ["PAIR", "THETA", "PERIOD", "FULL", "TRAIN_ANGLE", f"ANGLE@{r.length}", "BEYOND"]
    rows = [
        [
            str(p.index),
            f"{p.theta:.6g}",
            "inf" if p.period is None else f"{p.period:.6g}",
            "yes" if p.full_period_seen else "no",
            f"{p.train_angle:.6g}",
            f"{p.angle_at_length:.6g}",
            "BEYOND" if p.beyond_training else "",
        ]
        for p in r.pairs
    ]
    widths = [max(len(x[i]) for x in [header] + rows) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header] + rows]


def _value(x, fmt: str = ",") -> str:
    return "none" if x is None else format(x, fmt)


def rope_text(analyses, explain_pairs: bool = True) -> str:
    """The RoPE section of the text output: the key numbers, the paragraph, and the per-pair table."""
    lines = []
    for r in analyses:
        liu, men = r.liu, r.men
        lines += [
            "",
            f"RoPE analysis: {r.pe} (head dim {r.head_dim}, L_tr {r.train_length:,}, L' {r.length:,})",
            f"  in-distribution length: {_value(r.in_distribution_length)} (decided by {r.decided_by})",
            f"  Liu et al. 2024: critical_dim {liu.critical_dim}, extrapolation_bound "
            f"{_value(liu.extrapolation_bound, ',.0f')}"
            + (f", critical_base {liu.critical_base:.6g}, regime {liu.regime}" if liu.regime else ""),
            f"  Men et al. 2024: aggregation_first_negative {_value(men.aggregation_first_negative)} "
            f"(searched below {men.aggregation_cap:,}), min_base_for_length {_value(men.min_base_for_length, '.4g')}"
            + (f" ({men.min_base_note})" if men.min_base_note else ""),
            "",
            r.explanation,
        ]
        if men.paper_note:
            lines.append(f"Men et al.'s table: {men.paper_min_base:g}; this value {men.paper_note}.")
        pf = r.position_frequency
        if pf is not None:
            lines.append(
                f"Position frequency (An et al. 2025): {pf.sequences} of {pf.train_length:,}, f(i) = L_tr - i per "
                f"window; below {pf.fraction:g}·f(0) from i = {_value(pf.below_fraction_at)}."
            )
        if explain_pairs:
            lines += [""] + _pair_table(r)
    return "\n".join(lines)


def head_dim_note(schemes, args) -> str | None:
    """The line that says how to get the RoPE analysis when rotary PEs were given without ``--head-dim``."""
    if args.head_dim is None and any(s.rotates for s in schemes):
        return "note: give --head-dim D for the RoPE analysis of the rotary PEs (Liu et al. 2024, Men et al. 2024)"
    return None

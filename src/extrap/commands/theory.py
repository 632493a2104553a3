"""``extrap theory``: convergence verdicts, series sums and receptive fields of RPEs.

    extrap theory alibi type1 "-2*log(n)" --eps 1e-3,1e-6,1e-12
    extrap theory all --json
    extrap theory kerple-log:r1=0.9 sandwich --plot figs/

For each PE and head: does sum_t exp(r(t)) converge (Qin et al. 2024 Theorem 0.4),
the sum B and the theoretical receptive field n(eps) (their Eq. 22) when it does,
and otherwise how the partial sums grow and how much the attention dilutes from
the training length to longer contexts.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extrap import process
from extrap.commands import args as types
from extrap.commands import theory_modes, theory_rope
from extrap.errors import ExtrapError
from extrap.io import json_text

if TYPE_CHECKING:  # the theory engine loads sympy and torch: imported when the command runs
    from extrap.theory import HeadResult
    from extrap.theory.reports import CheckpointHead

log = logging.getLogger(__name__)

DEFAULT_EPS_TEXT = theory_modes.DEFAULT_EPS_TEXT
DEFAULT_LENGTHS_TEXT = theory_modes.DEFAULT_LENGTHS_TEXT
DEFAULT_TRAIN_LENGTH = 512  # L_train of PEs given by name, and of checkpoints that do not record theirs


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "theory",
        help="convergence, series sum B and receptive field n(eps) of positional encodings",
        description="Per head: does sum_t exp(r(t)) converge (Qin et al. 2024, Theorem 0.4)? If so, its sum B "
        "and the theoretical receptive field n(eps) = min{j : sum_{t>=j} b_t < B*eps} (their Eq. 22); "
        "if not, the growth of the partial sums and the attention dilution S(L)/S(L_train).",
    )
    p.add_argument(
        "pe",
        nargs="*",
        metavar="PE",
        help="a registry spec (alibi, window:64, sandwich:dbar=128, kerple-log:r1=0.9), a formula in "
        "t and n = t+1, or 'all' for every registered scheme; write a formula that starts with '-' "
        "as formula:-2*log(n) (or put all options first, then --, then the PEs)",
    )
    p.add_argument(
        "--checkpoint",
        metavar="RUN_OR_HF",
        help="analyse a checkpoint's own bias instead of PEs: a run directory (learned bias per layer) or "
        "hf:PATH (T5 bucket tables per head; BLOOM/MPT ALiBi slopes)",
    )
    p.add_argument("--heads", type=types.heads, help="number of heads, at most 1024 (default 8)")
    p.add_argument(
        "--eps",
        type=types.fractions,
        help=f"comma-separated eps values in (0, 1) for n(eps) (default {DEFAULT_EPS_TEXT})",
    )
    p.add_argument(
        "--lengths",
        type=types.lengths_from(1),
        help=f"comma-separated evaluation lengths for S(L)/S(L_train) (default {DEFAULT_LENGTHS_TEXT})",
    )
    p.add_argument(
        "--train-length",
        type=types.positive_int,
        default=None,
        help="training length L_train (default: the run's own under --checkpoint, else 512)",
    )
    p.add_argument("--json", action="store_true", help='print one JSON object {"results": [...]} instead of a table')
    p.add_argument(
        "--csv", metavar="PATH", help="also write one CSV row per PE (or layer), head and eps to PATH (atomically)"
    )
    p.add_argument("--plot", metavar="DIR", help="write heatmaps, TRF curves and partial-sum plots (PNG+SVG) to DIR")
    p.add_argument(
        "--compare",
        action="store_true",
        help="Theorem 0.5: compare the first PE's receptive field with each other PE's (head 0)",
    )
    p.add_argument("--explain", action="store_true", help="print each verdict's explanation under the table")
    theory_rope.add_arguments(p)
    p.add_argument("--extend", type=types.extend_spec, metavar="METHOD[:k=v,...]", help=EXTEND_HELP)
    p.set_defaults(func=run)


EXTEND_HELP = (
    "a training-free RoPE extension (extrap pe list --extend): its largest distance, whether it stays in "
    "distribution and its keys per query at --length, for --train-length"
)


# ---------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------
def _print_table(rows, keys: list[str], longest: int, explain: bool) -> None:
    print(format_table(rows, keys, longest))
    if explain:
        print()
        for line in _explanations(rows):
            print(line)


def _print_rope(rope, note: str | None = None) -> None:
    if rope:
        print(theory_rope.rope_text(rope))
    if note:
        print(f"\n{note}")


def _layer_index(key: str) -> int | str:
    """'blocks.3.attn' (a run's parameter prefix) or '3' -> 3; other keys are kept as they are."""
    numbers = re.findall(r"\d+", str(key))
    return int(numbers[0]) if numbers else str(key)


def expand_pes(names: list[str]) -> list[str]:
    """'all' becomes every registered scheme, in registry order."""
    from extrap.positional import REGISTRY

    out: list[str] = []
    for name in names:
        out.extend(REGISTRY if name.strip() == "all" else [name])
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    from extrap.theory import analyse, collapse, compare, eps_key
    from extrap.theory.reports import TheoryReport

    process.imports_done()  # torch and sympy are loaded: out of the collector's scans, freed memory kept
    theory_modes.check(args)  # a flag that the mode does not read: one line, before any work
    eps = args.eps
    lengths = args.lengths
    types.check_outputs(args, runs=[args.checkpoint], flags=("csv",))
    if args.extend is not None:
        from extrap.commands.theory_extend import run_extend

        return run_extend(args)
    types.check_folder_output("--plot", args.plot)
    if args.checkpoint:
        if args.pe:
            raise ExtrapError("give either PEs or --checkpoint, not both")
        return _run_checkpoint(args, eps, lengths)
    if not args.pe:
        raise ExtrapError("give at least one PE (or --checkpoint RUN_OR_HF)")
    schemes = [_scheme(name) for name in expand_pes(args.pe)]  # unknown names / bad formulas: ExtrapError

    rows = []
    for scheme in schemes:
        res = analyse(
            scheme, args.heads, eps=eps, lengths=lengths, train_length=args.train_length or DEFAULT_TRAIN_LENGTH
        )
        rows.extend(collapse(res, scheme))
    comparisons = []
    if args.compare:
        for other in schemes[1:]:
            comparisons.append(compare(schemes[0], other, args.heads, eps=eps))
    rope = theory_rope.rope_for_pes(schemes, args, DEFAULT_TRAIN_LENGTH)  # before anything is written
    plots = _plots(schemes, args) if args.plot else []
    if _write_outputs(args, rows, TheoryReport(tuple(rows), tuple(comparisons), tuple(str(p) for p in plots), rope)):
        return 0
    keys = [eps_key(e) for e in eps]
    _print_table(rows, keys, max(lengths), args.explain)
    _print_rope(rope, theory_rope.head_dim_note(schemes, args))
    for c in comparisons:
        verdict = {"a": f"{c.a} has the smaller TRF", "b": f"{c.b} has the smaller TRF"}.get(c.smaller, "undecided")
        print(f"\nTheorem 0.5, {c.a} vs {c.b}: {verdict}. {c.explanation}")
    for p in plots:
        print(f"wrote {p}")
    return 0


def _scheme(name: str):
    """The registry's scheme ``name``; a checkpoint given in its place (``hf:PATH``, a run directory) is
    pointed to ``--checkpoint``."""
    import os

    from extrap.positional import get

    try:
        return get(name)
    except ExtrapError:
        if name.startswith("hf:") or os.path.isdir(name):
            raise ExtrapError(
                f"{name} is a checkpoint, not a positional scheme: analyse it with --checkpoint {name}"
            ) from None
        raise


@dataclass(frozen=True)
class CheckpointRow:
    """One printed line of ``--checkpoint``: a head's result, labelled with its part and layer."""

    pe: str
    head: Any
    verdict: str | None
    test: str | None
    series_sum: float | None
    trf: Mapping
    growth: Any = None
    tail_term: Any = None
    trf_note: str | None = None
    explanation: str | None = None
    dilution: Any = None
    params: Mapping | None = None  # the head's learned parameter values

    @classmethod
    def of(cls, h: CheckpointHead) -> CheckpointRow:
        r = h.result
        layer = "" if h.layer is None else f" L{h.layer}"
        keep = ("head", "verdict", "test", "growth", "tail_term", "trf_note", "explanation")
        return cls(
            pe=f"{r.pe} [{h.part}{layer}]",
            series_sum=_finite(r.series_sum),
            trf=r.trf,
            dilution=None if r.dilution is None else {k: _finite(v) for k, v in r.dilution.items()},
            params=h.params,
            **{k: getattr(r, k) for k in keep},
        )


def _finite(x) -> float | None:
    """``x`` as a float, None where it has no finite float64 value (as --json writes it)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _run_checkpoint(args, eps, lengths) -> int:
    """``--checkpoint``: per-head verdicts of a run's learned bias, or of an hf: checkpoint's."""
    from extrap.run import is_hf
    from extrap.theory import eps_key
    from extrap.theory.reports import CheckpointTheory

    src = args.checkpoint
    rope = theory_rope.rope_for_checkpoint(src, args)  # first: a bad RoPE config fails before transformers reads it
    plots = []
    if is_hf(src):
        from extrap.hf import hf_theory, plot_t5_tables

        rows = hf_theory(src, eps, lengths, args.train_length)
        if args.plot and any(r.result.pe.startswith("t5") for r in rows):
            plots = plot_t5_tables(src, args.plot)
    else:
        rows = _run_rows(src, eps, lengths, args.train_length)
    if args.plot and not plots:  # before anything is written
        raise ExtrapError(f"--plot with --checkpoint draws a T5 checkpoint's bucket tables; {src} has none")
    if _write_outputs(args, rows, CheckpointTheory(str(src), tuple(rows), tuple(str(p) for p in plots), rope)):
        return 0
    keys = [eps_key(e) for e in eps]
    view = [CheckpointRow.of(r) for r in rows]
    _print_table(view, keys, max(lengths), args.explain)
    _print_rope(rope)
    for note in dict.fromkeys(r.slope_note for r in rows if r.slope_note):
        print(f"note: {note}")
    for p in plots:
        print(f"wrote {p}")
    return 0


def _run_rows(src, eps, lengths, train_length: int | None) -> list[CheckpointHead]:
    """Rows of a run directory: each layer's heads, with their learned parameter values, analysed at
    the run's own training length unless ``train_length`` is given."""
    from extrap.positional import get
    from extrap.run.parameters import head_values, read_checkpoint_bias
    from extrap.theory import analyse_checkpoint
    from extrap.theory.reports import CheckpointHead

    ckpt = read_checkpoint_bias(src)
    tl = train_length or ckpt.train_length or DEFAULT_TRAIN_LENGTH
    if train_length is None and ckpt.train_length is None:
        log.info("extrap: L_train = %d assumed: %s records no training length; give --train-length", tl, src)
    res = analyse_checkpoint(ckpt.layers, ckpt.spec, ckpt.heads, eps=eps, lengths=lengths, train_length=tl)
    scheme = get(ckpt.spec)
    rows = []
    for layer in res.layers:
        stored = {k: v.detach().double() for k, v in ckpt.layers[layer.name].items()}
        values = scheme.values(stored, ckpt.heads) if stored else {}
        for r in layer.heads:
            params = head_values(values, r.head) if values else None
            rows.append(CheckpointHead(str(src), "decoder", _layer_index(layer.name), r, params))
    return rows


# ---------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------
def _write_outputs(args, rows, report) -> bool:
    """--csv (the rows) and --json (``report``, one line); True when the JSON took the place of the table."""
    if args.csv:
        _write_csv(args.csv, rows)
    if args.json:
        print(json_text(report.to_json(), indent=None, default=str))  # non-finite: null, with an error
    return bool(args.json)


def _write_csv(path: str, results: list[HeadResult] | list[CheckpointHead]) -> None:
    from extrap.io import run_metadata
    from extrap.results.tables import theory_table, write_csv

    write_csv(path, theory_table(results, run_metadata()))


def format_table(rows, eps_keys: list[str], top_length: int) -> str:
    """An aligned text table: one row per head (or 'all' when heads agree)."""
    with_params = any(getattr(r, "params", None) for r in rows)  # a checkpoint's learned values
    header = (
        ["PE", "HEAD", "VERDICT", "TEST", "B"]
        + [f"TRF@{k}" for k in eps_keys]
        + [f"S({top_length})/S(Ltr)"]
        + (["PARAMS"] if with_params else [])
        + ["NOTE"]
    )
    body = []
    for r in rows:
        cells = [
            r.pe,
            "all" if r.head is None else str(r.head),
            r.verdict,
            r.test,
            "-" if r.series_sum is None else f"{float(r.series_sum):.6g}",
        ]
        cells += ["-" if r.trf.get(k) is None else str(r.trf[k]) for k in eps_keys]
        dil = (r.dilution or {}).get(str(top_length))
        cells.append("-" if dil is None else f"{dil:.4g}")
        if with_params:
            cells.append(_params_text(r.params))
        cells.append(_note(r))
        body.append(cells)
    widths = [max(len(str(row[i])) for row in [header] + body) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _params_text(params: Mapping | None, most: int = 8) -> str:
    """``r1=1.62 r2=0.931``; a vector shows its first and last values past ``most`` (JSON has them all)."""

    def show(v) -> str:
        if not isinstance(v, list):
            return f"{v:.4g}"
        flat = [show(x) for x in v]
        if len(flat) > most:
            flat = flat[: most - 2] + [f"...({len(v)})"] + flat[-1:]
        return "[" + ",".join(flat) + "]"

    return " ".join(f"{k}={show(v)}" for k, v in (params or {}).items()) or "-"


def _note(r) -> str:
    parts = []
    if r.growth:
        parts.append(r.growth)
    if r.tail_term is not None:
        parts.append(f"tail weight {r.tail_term:.3g} of max")
    if r.trf_note:
        parts.append(r.trf_note)
    if r.verdict == "not-applicable":
        parts.append(r.explanation)
    return "; ".join(parts)


def _explanations(rows) -> list[str]:
    return [f"{r.pe} [{'all' if r.head is None else r.head}]: {r.explanation}" for r in rows]


def _plots(schemes, args) -> list:
    from extrap.positional.base import BiasRPE
    from extrap.theory import not_applicable_reason, plots

    out = []
    biases = [s for s in schemes if isinstance(s, BiasRPE)]  # heatmaps of Toeplitz and non-Toeplitz biases
    for s in biases:
        heads = [0] if not s.params(args.heads) else sorted({0, args.heads - 1})
        for h in heads:
            out.extend(plots.heatmap(s, args.plot, head=h, num_heads=args.heads))
    toeplitz = [s for s in schemes if not not_applicable_reason(s)]
    if not biases and not toeplitz:  # before any file: nothing to draw is a flag without effect
        raise ExtrapError("--plot draws biases and TRF curves; none of these PEs has a bias to draw")
    if toeplitz:
        out.extend(plots.trf_curves(toeplitz, args.plot, num_heads=args.heads))
        out.extend(plots.partial_sums_plot(toeplitz, args.plot, max_length=max(args.lengths), num_heads=args.heads))
    log.info("extrap theory: %d figure files in %s", len(out), args.plot)
    return out

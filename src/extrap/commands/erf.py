"""``extrap erf``: empirical receptive fields (gradient, 003 §5.1; attention, 000) and TRF vs ERF."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from extrap.commands import args as types
from extrap.errors import ExtrapError

if TYPE_CHECKING:  # the records import torch: loaded when the command runs, not when the CLI starts
    from extrap.erf import ErfReport, ErfSettings, RunErf


def register(sub) -> None:
    p = sub.add_parser(
        "erf",
        help="empirical receptive field of trained runs (and TRF vs ERF)",
        description="Gradient ERF (003 §5.1: tokens holding --threshold of the normalised input "
        "gradient of the last prediction) and attention ERF (000: n_emp(eps) per head). "
        "With several runs, also the theory's TRF against both ERFs and their Spearman "
        "rank correlation.",
    )
    p.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="run directories, or hf:PATH (local Hugging Face checkpoint folders)"
    )
    p.add_argument(
        "--length",
        type=types.length,
        help="L_ex: context of L_ex-1 tokens predicting the L_ex-th "
        "(default 4 x L_tr; the attention ERF uses at most 2048)",
    )
    p.add_argument(
        "--segments", type=types.positive_int, default=8, help="segments of the split to average over (default 8)"
    )
    p.add_argument("--threshold", type=types.fraction, help="gradient ERF threshold in (0, 1) (default 0.99)")
    p.add_argument("--eps", type=types.fraction, help="eps of the attention ERF's n_emp, in (0, 1) (default 0.01)")
    p.add_argument(
        "--trf-eps",
        type=types.fraction,
        dest="trf_eps",
        help="eps of the TRF n(eps), in (0, 1) (default 0.001: extrap.theory.receptive.REPORTED_TRF)",
    )
    p.add_argument("--kind", default="both", choices=("grad", "attn", "both"), help="grad | attn | both (default both)")
    types.add_split(p)
    p.add_argument(
        "--trf-reduce",
        dest="trf_reduce",
        choices=("mean", "median", "max"),
        help="how per-head TRFs become one number: mean | median | max (default max: REPORTED_TRF)",
    )
    p.add_argument(
        "--trf-source",
        default="init",
        dest="trf_source",
        choices=("init", "trained"),
        help="TRF parameters: init (the scheme's formula values, as in 000) | trained (the run's "
        "learned bias, every layer) (default init)",
    )
    p.add_argument("--batch", type=types.positive_int, help="gradient ERF: segments per backward pass (default 4)")
    types.add_device(p, default="cpu")
    p.add_argument("--corpus", help="hf: models: corpus tokenized with the model's tokenizer (default stdlib)")
    p.add_argument("--plot", metavar="DIR", help="write the cumulative gradient curves to DIR as PNG and SVG")
    p.add_argument("--csv", metavar="PATH", help="also write one CSV row per run to PATH (atomically)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


# The flags of one kind of ERF (None unless given): refused where --kind does not measure it.
KIND_FLAGS = {"threshold": "grad", "batch": "grad", "plot": "grad", "eps": "attn"}


def _check(args) -> None:
    if args.plot and args.kind == "attn":
        raise ExtrapError("--plot draws gradient curves; use --kind grad or both")
    reads = [name for name, kind in KIND_FLAGS.items() if args.kind in (kind, "both")]
    types.refuse_unread(args, reads, KIND_FLAGS, f"with --kind {args.kind}")
    types.check_outputs(args, runs=args.runs)
    types.check_folder_output("--plot", args.plot)


def _fmt(v, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def _trf_setting(row: RunErf) -> str:
    return f"eps={row.trf_eps:g}, {row.trf_reduce}"


def _print_table(report: ErfReport) -> None:
    rows = report.runs
    r0 = rows[0]
    width = max(len("run"), *(len(r.run) for r in rows))
    pw = max(len("pe"), *(len(r.pe) for r in rows))
    trf = f"TRF({_trf_setting(r0)})"
    print(f"{'run':<{width}}  {'pe':<{pw}}  {'L_ex':>6}  {'grad ERF':>9}  {'attn ERF':>9}  {trf:>7}")
    for r in rows:
        grad = r.grad.erf if r.grad else None
        attn = r.attn.summary if r.attn else None
        print(
            f"{r.run:<{width}}  {r.pe:<{pw}}  {r.length:>6}  {_fmt(grad):>9}  "
            f"{_fmt(attn):>9}  {_fmt(r.trf, 'd' if isinstance(r.trf, int) else '.1f'):>{len(trf)}}"
        )
    notes = [
        f"grad ERF: mean over {r0.segments} segments of the fewest most recent tokens holding "
        f"> {r0.threshold} of the input gradient (003 §5.1)"
    ]
    if r0.attn:
        a = r0.attn
        notes.append(
            f"attn ERF: mean over heads of the median n_emp(eps={a.eps:g}) (000), L={a.length}, "
            f"queries i >= {a.first_query}" + (" (capped for dense attention)" if a.length < r0.length else "")
        )
    params = "initial" if r0.trf_source == "init" else "trained"
    notes.append(
        f"TRF: theory n_the(eps={r0.trf_eps:g}) (000 Eq. 22) at the {params} bias parameters, "
        f"{r0.trf_reduce} over heads"
        + (" and layers" if params == "trained" else "")
        + "; '-' = not a Toeplitz bias RPE, divergent, or unknown"
    )
    for n in notes:
        print("  " + n)
    if len(rows) > 1:
        for s, label in ((report.spearman.grad, "grad ERF"), (report.spearman.attn, "attn ERF")):
            print(
                f"Spearman(TRF({_trf_setting(r0)}), {label}) = {_fmt(s.rho, '.3f')} over {s.n} run(s) with a finite TRF"
            )


def settings_of(args) -> ErfSettings:
    """The measurement the command line asks for (an unset --trf-eps / --trf-reduce: ERF_TRF's)."""
    from extrap.erf import ErfSettings

    given = ("trf_eps", "trf_reduce", "threshold", "eps", "batch")  # None: ErfSettings' defaults
    return ErfSettings(
        **types.flags(args, ("kind", "length", "segments", "split", "trf_source", "corpus")),
        device=types.loading_device(args),
        **types.given_flags(args, given),
    )


def run(args) -> int:
    from extrap.erf import compare_trf_erf, plot_gradient_curves
    from extrap.io import json_text, run_metadata

    _check(args)
    report = compare_trf_erf(args.runs, settings_of(args), progress=not args.json)
    meta = run_metadata()
    report = replace(report, extrap_version=meta["extrap_version"], command=meta["command"])
    if args.plot:
        report = replace(report, plots=tuple(str(p) for p in plot_gradient_curves(report.runs, args.plot)))
    if args.csv:
        from extrap.results.tables import erf_table, write_csv

        write_csv(args.csv, erf_table(report))
    if args.json:
        print(json_text(report.to_json()))  # strict JSON: NaN or Infinity as null, with an error
    else:
        _print_table(report)
        for p in report.plots:
            print(f"wrote {p}")
    sys.stdout.flush()
    return 0

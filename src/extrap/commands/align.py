"""``extrap align``: attention alignment by softmax temperature (004 Algorithm 1, Props. 1-2)."""

from __future__ import annotations

import sys

from extrap.commands import args as types
from extrap.errors import ExtrapError


def register(sub) -> None:
    p = sub.add_parser(
        "align",
        help="softmax temperature that aligns attention at L_ex with L_tr (004)",
        description="Per L_ex: the temperature τ chosen by --mode (004 Algorithm 1 by average "
        "P_max or entropy over all softmax rows, Prop. 1, Prop. 2 or the log-length "
        "rule), Algorithm 1's curve S(τ), all closed-form τs, and P_max / entropy at "
        "L_tr and at L_ex before and after applying τ.",
    )
    p.add_argument(
        "run", help="run directory, or hf:PATH (a local Hugging Face checkpoint folder; T5: its encoder is aligned)"
    )
    p.add_argument("--corpus", help="hf: probing corpus, tokenized with the model's tokenizer (default stdlib)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), help="hf: float32 | bfloat16 | float16")
    p.add_argument(
        "--mode",
        default="pmax",
        choices=("pmax", "entropy", "log-length", "prop1", "prop2"),
        help="pmax | entropy | log-length | prop1 | prop2 (default pmax)",
    )
    p.add_argument(
        "--per-layer",
        action="store_true",
        dest="per_layer",
        help="one τ per layer (greedy, layer by layer; pmax or entropy only)",
    )
    p.add_argument("--train-length", type=types.length, dest="train_length", help="L_tr (default: the run's)")
    p.add_argument(
        "--lengths",
        type=types.lengths,
        default=None,
        help="comma-separated L_ex (default: L_tr x 2,4,8, at most --max-length)",
    )
    p.add_argument(
        "--segments", type=types.positive_int, default=4, help="segments of the split averaged per length (default 4)"
    )
    types.add_split(p)
    p.add_argument("--grid", type=types.floats, default=None, help="comma-separated τ grid (default 1.0,0.95,...,0.5)")
    p.add_argument(
        "--no-refine",
        action="store_false",
        dest="refine",
        help="keep the paper's grid answer (no bisection between grid points)",
    )
    p.add_argument(
        "--max-length",
        type=types.length,
        default=None,
        dest="max_length",
        help="cap on probed lengths (default 4096: O(L^2) memory per layer)",
    )
    p.add_argument("--out", help="also write the JSON report to this file (atomically)")
    p.add_argument("--csv", metavar="PATH", help="also write one CSV row per length to PATH (atomically)")
    types.add_rope_arguments(p)
    types.add_extend_argument(p)
    types.add_device(p, note="default: cpu for extrap runs, cuda when available for hf: models")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _check_source(args) -> None:
    """--extend is for extrap runs, --dtype for hf: models, refused in one line on the other."""
    hf = str(args.run).startswith("hf:")
    if args.extend is not None and hf:
        raise ExtrapError("--extend with align: extrap runs only (hf: models probe attention with eager attention)")
    if args.dtype is not None and not hf:  # its probes run in float32
        raise ExtrapError("--dtype with align: hf: models only (an extrap run's attention is probed in float32)")


def run(args) -> int:
    import extrap
    from extrap.align import AlignSettings, align_report
    from extrap.align.formulas import DEFAULT_GRID, MAX_PROBE_LENGTH, SEARCH_MODES, check_grid, check_lengths
    from extrap.align.records import AlignRun
    from extrap.run import eval_stream

    if args.per_layer and args.mode not in SEARCH_MODES:
        raise ExtrapError(f"--per-layer needs --mode pmax or entropy, not {args.mode}")
    if args.mode not in SEARCH_MODES and (args.grid or not args.refine):  # Algorithm 1's search, not a closed form
        flag = "--grid" if args.grid else "--no-refine"
        raise ExtrapError(f"{flag} has no effect with --mode {args.mode}: it sets Algorithm 1's search (pmax, entropy)")
    types.check_outputs(args, runs=[args.run])
    types.check_extend_flags(args, ("rope", "factor"))
    _check_source(args)
    grid = check_grid(args.grid) if args.grid else list(DEFAULT_GRID)
    lengths = args.lengths

    # T5: the encoder is aligned (004)
    run_ = extrap.load(args.run, device=types.loading_device(args), dtype=args.dtype, **types.rope_options(args))
    types.apply_extend(run_, args)
    if args.corpus:
        run_.use_corpus(args.corpus)
    L_tr = args.train_length or run_.train_length
    if args.train_length is None:
        types.state_assumed_length(run_)
    cap = args.max_length or MAX_PROBE_LENGTH
    if lengths is None:
        lengths = [L_tr * k for k in (2, 4, 8) if L_tr * k <= cap] or [min(cap, 2 * L_tr)]
    check_lengths(L_tr, lengths, cap)
    stream = eval_stream(run_, args.split, max([L_tr, *lengths]) + 1)
    settings = AlignSettings(
        L_tr,
        tuple(lengths),
        args.mode,
        per_layer=args.per_layer,
        segments=args.segments,
        grid=tuple(grid),
        refine=args.refine,
        max_length=cap,
    )
    rep = AlignRun(str(run_.path), run_.pe, args.split, run_.step, align_report(run_.model, stream, settings))
    if args.out:
        from extrap.io import json_text, write_output

        write_output(args.out, json_text(rep.to_json()) + "\n")  # strict JSON, as --json prints it
    if args.csv:
        from extrap.results.tables import align_table, write_csv

        write_csv(args.csv, align_table(rep))
    if args.json:
        from extrap.io import json_text

        print(json_text(rep.to_json()))  # strict JSON: NaN or Infinity as null, with an error
        return 0
    _print(rep)
    sys.stdout.flush()
    return 0


def _fmt_tau(t) -> str:
    if t is None:
        return "-"
    if isinstance(t, (list, tuple)):
        return "[" + ", ".join(f"{x:.3f}" for x in t) + "]"
    return f"{t:.3f}"


def _print(aligned) -> None:
    rep, ref = aligned.report, aligned.report.reference
    print(
        f"{aligned.run}  pe={aligned.pe}  L_tr={rep.train_length}  mode={rep.mode}"
        f"{'  per-layer' if rep.per_layer else ''}  segments={rep.segments}"
    )
    print(
        f"dispersed attention (004 Table 1): L_tr={ref.length}: P_max {ref.stats.pmax:.4f}  H {ref.stats.entropy:.4f}"
    )
    print(
        f"{'L_ex':>6} {'tau':>8} {'grid':>6} {'prop1':>7} {'prop2':>7} {'log_L':>7} {'sig_tr':>7} {'sig_ex':>7}"
        f"  {'P_max bef>aft':>15}  {'H bef>aft':>15}"
    )
    for r in rep.lengths:
        if r.error is not None:  # recorded: the other lengths are kept
            print(f"{r.length:>6}  failed: {r.error}")
            continue
        _print_length(r, rep.per_layer, rep.train_length)


def _print_length(r, per_layer: bool, L_tr: int) -> None:
    """One L_ex of the text report: the τs, σs and P_max / H, then Algorithm 1's curve or layers."""
    cf, b, a, a1 = r.closed_form, r.before, r.after, r.algorithm1
    grid = a1.grid_tau if a1 is not None else None
    ap, ah = (a.pmax, a.entropy) if a else (float("nan"), float("nan"))
    print(
        f"{r.length:>6} {_fmt_tau(r.tau):>8} {_fmt_tau(grid) if grid is not None else '-':>6} "
        f"{_fmt_tau(cf.prop1):>7} {_fmt_tau(cf.prop2):>7} {cf.log_length:>7.3f} {cf.sigma_tr:>7.3f} "
        f"{cf.sigma_ex:>7.3f}  {b.pmax:.4f}>{ap:.4f}  {b.entropy:.4f}>{ah:.4f}"
    )
    edge = "  (target outside the grid" + ("; L_ex < L_tr: the target needs τ > 1)" if r.length < L_tr else ")")
    if a1 and not per_layer:
        curve = "  ".join(f"{t:.2f}:{s:.4f}" for t, s in a1.search.curve)
        print(f"       S(τ) target {a1.target:.4f}: {curve}" + (edge if a1.at_grid_edge else ""))
    elif a1:
        for i, lay in enumerate(a1.layers):
            print(
                f"       layer {i}: τ {lay.tau:.3f} (grid {lay.grid_tau:.2f}) target "
                f"{lay.target:.4f} -> {lay.value:.4f}" + (edge if lay.at_grid_edge else "")
            )
    if cf.prop1_note:
        print(f"       {cf.prop1_note}")

"""``extrap eval``: perplexity versus length, three protocols, the extrapolation verdict."""

from __future__ import annotations

import sys
from dataclasses import replace

from extrap.commands import args as types
from extrap.commands import eval_longppl
from extrap.errors import ExtrapError
from extrap.io import json_text


def _tau_text(t) -> str:
    return "[" + ",".join(f"{x:.3f}" for x in t) + "]" if isinstance(t, list) else f"{t:.3f}"


PROTOCOLS = ("nonoverlapping", "sliding", "last-token")
EXTEND_REFUSES = ("rope", "factor", "window", "cache_window")  # flags --extend is not combined with
# Flags that only some modes read (each None unless given): one given where it has no effect is refused, not dropped.
MODE_FLAGS = ("protocol", "targets", "delta", "batch", "backend", "temperature", "align_mode", "corpus")
FILE_READS = ()  # --file scores one sequence: no protocol, no verdict, no temperature, no corpus
BY_PROTOCOL = {"stride": ("sliding",), "targets": ("last-token",), "tokens": ("nonoverlapping", "sliding")}


def register(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="perplexity versus evaluation length",
        description="Evaluate a run at several lengths with one protocol; print a table or JSON.",
    )
    p.add_argument("run", help="run directory, or hf:PATH (a local Hugging Face checkpoint folder)")
    p.add_argument(
        "--lengths", type=types.lengths, default=None, help="comma-separated L_ex (default: L_tr x 1,2,4,...,16)"
    )
    p.add_argument(
        "--protocol", choices=PROTOCOLS, help="nonoverlapping | sliding | last-token (default nonoverlapping)"
    )
    p.add_argument("--stride", type=types.positive_int, help="sliding stride (default L_ex/2)")
    p.add_argument("--targets", type=types.positive_int, help="last-token: number of target tokens (default 256)")
    p.add_argument(
        "--tokens",
        type=types.length,
        help="nonoverlapping, sliding: tokens scored at every length, at least the longest length "
        "(default: 65,536, or the whole split if shorter, and at least the longest length)",
    )
    types.add_split(p)
    _add_window_arguments(p)
    eval_longppl.add_arguments(p)
    p.add_argument(
        "--file",
        help="score this UTF-8 text file as one sequence (streamed with --window; lengths and protocol do not apply)",
    )
    p.add_argument("--delta", type=types.positive_float, help="δ of 000 Definition 0.1 (default 0.02)")
    p.add_argument("--batch", type=types.positive_int, help="sequences per forward pass (default 8)")
    p.add_argument(
        "--backend",
        choices=("auto", "blocked", "flex", "flex-formula", "flex-table"),
        help="attention: auto | blocked | flex (FlexAttention, r(t) from each scheme's formula; sandwich reads its "
        "r(t) table) | flex-formula | flex-table (force either); flex on CPU compiles (inference only)",
    )
    p.add_argument(
        "--temperature",
        type=types.temperature_spec,
        default=None,
        help="softmax temperature (004): TAU | TAU_1,...,TAU_R (one per layer) | auto (the aligned τ for each "
        "L_ex, see --align-mode) | auto:per-layer (one aligned τ per layer) | auto:MODE",
    )
    p.add_argument(
        "--align-mode",
        dest="align_mode",
        help="--temperature auto: pmax | entropy | log-length | prop1 | prop2 (default pmax)",
    )
    types.add_dtype(p)
    types.add_hf_arguments(p)
    types.add_extend_argument(p)
    types.add_device(p, note="default: cpu for extrap runs, cuda when available for hf: models")
    p.add_argument("--out", help="also write the JSON result to this file (atomically)")
    p.add_argument(
        "--csv", metavar="PATH", help="also write one CSV row per length (with --file: one row) to PATH (atomically)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _add_window_arguments(p) -> None:
    p.add_argument(
        "--window",
        type=types.window,
        help="auto | none | W: attend to the W most recent keys; windowed lengths stream through a rolling "
        "KV cache, so memory depends on W, not on the length (default none)",
    )
    p.add_argument(
        "--eps",
        type=types.fraction,
        help="window auto: TRF(eps) of the trained bias, max over layers and heads "
        "(default 1e-6: extrap.theory.WINDOW_AUTO_TRF)",
    )
    p.add_argument(
        "--cache-window",
        type=types.positive_int,
        dest="cache_window",
        help="rolling KV cache of W tokens (003 Appendix B); same as --window W (give one of the two)",
    )


def _check(args) -> None:
    """What the lengths on the command line already rule out, said with the options' names."""
    if args.tokens is not None and args.lengths and args.protocol != "last-token" and args.tokens < max(args.lengths):
        raise ExtrapError(
            f"--tokens {args.tokens} is fewer than the longest length {max(args.lengths)}: "
            f"{args.protocol or 'nonoverlapping'} needs --tokens >= {max(args.lengths)}"
        )
    if args.stride is not None and args.lengths and args.protocol == "sliding" and args.stride > min(args.lengths):
        raise ExtrapError(f"--stride {args.stride} is longer than the shortest length {min(args.lengths)}")
    ignored = [f for f, v in (("--lengths", args.lengths), ("--stride", args.stride), ("--tokens", args.tokens)) if v]
    if args.file and ignored:
        raise ExtrapError(f"{', '.join(ignored)}: not with --file, which scores the whole file as one sequence")
    if args.cache_window is not None and args.window is not None and args.window != str(args.cache_window):
        raise ExtrapError(
            f"--window {args.window} and --cache-window {args.cache_window} ask for different windows: give one"
        )
    _check_modes(args)
    types.check_outputs(args, runs=[args.run, args.evaluator], inputs=[("--file", args.file)])
    types.check_extend_flags(args, EXTEND_REFUSES)
    types.check_extend_temperature(args, args.align_mode)


def _check_modes(args) -> None:
    """The flags given that the asked mode would not read (MODE_FLAGS, BY_PROTOCOL, --eps, --align-mode)."""
    from extrap.align import parse_temperature_spec

    if args.file:
        types.refuse_unread(args, FILE_READS, MODE_FLAGS, "with --file, which scores the whole file as one sequence")
    protocol = args.protocol or "nonoverlapping"
    reads = [name for name, protocols in BY_PROTOCOL.items() if protocol in protocols]
    types.refuse_unread(args, reads, BY_PROTOCOL, f"with --protocol {protocol}")
    if _window(args) != "auto":
        types.refuse_unread(args, (), ("eps",), "without --window auto (it sets the TRF's eps of the auto window)")
    spec = parse_temperature_spec(args.temperature)
    if spec.kind != "auto" or spec.mode:
        where = "without --temperature auto" if spec.kind != "auto" else f"with --temperature {args.temperature}"
        types.refuse_unread(args, (), ("align_mode",), where)


def _window(args) -> str:
    """``--window`` or ``--cache-window`` (the same option under two names), default none."""
    return str(args.cache_window) if args.cache_window is not None else (args.window or "none")


def _load(args):
    """The run on ``--device`` (None: cpu for extrap runs, cuda when available for hf: models)."""
    import extrap

    run = extrap.load(args.run, device=types.loading_device(args), **types.hf_options(args))
    types.require_causal(run, "eval")
    types.apply_extend(run, args)
    no_stream = getattr(getattr(run.model, "scheme", None), "no_stream", None)  # BiPE: ids need the whole prefix
    if no_stream and _window(args).isdigit():
        raise ExtrapError(f"--window {_window(args)}: {no_stream}")
    return run


def _score_file(args, window: str) -> int:
    from extrap.evaluate.score import score_file_run

    score = score_file_run(_load(args), args.file, window, args.eps, progress=not args.json or sys.stderr.isatty())
    _emit(args, score, _print_file)
    return 0


def _print_file(r) -> None:
    se = f" ± {r.stderr:.4f}" if r.stderr is not None else ""
    print(f"{r.run}  file={r.file}  " + _window_line(r.window))
    print(f"{r.tokens} tokens: loss {r.loss:.4f}{se}, ppl {r.ppl:.3f} ({r.seconds:.1f} s)")
    for line in _error_lines(r.window):
        print(line)


def _emit(args, report, table) -> None:
    """``report`` (an EvalReport or a FileScore) as JSON (stdout, --out), CSV (--csv) or a table."""
    text = json_text(report.to_json())  # strict JSON: NaN or Infinity as null, with an error
    if args.out:
        from extrap.io import write_output

        write_output(args.out, text + "\n")
    if args.csv:
        from extrap.results.tables import eval_table, file_table, longppl_table, write_csv

        longppl = getattr(report, "longppl", None) is not None
        write_csv(
            args.csv, file_table(report) if args.file else longppl_table(report) if longppl else eval_table(report)
        )
    if args.json:
        print(text)
    else:
        table(report)
    sys.stdout.flush()


def settings(args, window: str):
    """The :class:`~extrap.evaluate.EvalSettings` that the command line asks for."""
    from extrap.evaluate import EvalSettings

    given = ("protocol", "targets", "eps", "delta", "batch", "align_mode")  # None: EvalSettings' defaults
    return EvalSettings(
        **types.flags(args, ("lengths", "stride", "tokens", "split", "backend", "temperature")),
        window=window,
        **types.given_flags(args, given),
        progress=not args.json or sys.stderr.isatty(),  # JSON goes to stdout; a terminal still sees progress
        corpus=getattr(args, "corpus", None),
    )


def run(args) -> int:
    from extrap.evaluate import evaluate_run

    _check(args)
    spec = eval_longppl.settings(args)
    window = _window(args)
    if args.file:
        return _score_file(args, window)
    wanted = settings(args, window)  # checked before the run is loaded
    run_ = _load(args)
    _state_cost(run_, wanted)
    if spec is not None:
        rep = eval_longppl.report(args, run_, wanted, spec)
        _emit(args, replace(rep, report=_gated(args, rep.report)), eval_longppl.table_printer(_print_table))
        return 0
    _emit(args, _gated(args, evaluate_run(run_, wanted)), _print_table)
    return 0


def _gated(args, report):
    """No verdict for an extrap run that did not learn (:mod:`extrap.evaluate.learned`); hf: models keep theirs."""
    from extrap.evaluate.learned import gated
    from extrap.run import is_hf

    return report if is_hf(args.run) else gated(report, args.run)


def _state_cost(run, wanted) -> None:
    """Say how long the evaluation will at least take, when that is long (:mod:`extrap.cost`)."""
    from extrap.cost import sequence_flops, state_estimate
    from extrap.evaluate.settings import DEFAULT_TOKENS
    from extrap.model import model_device

    model, s = run.model, wanted
    shape, params = model.shape, sum(p.numel() for p in model.parameters())
    lengths = sorted({*(s.lengths or [run.train_length * 2**k for k in range(5)]), run.train_length})
    W = int(s.window) if str(s.window).isdigit() else None  # auto: not known yet, counted as exact
    tokens = s.tokens or max(DEFAULT_TOKENS, max(lengths))
    total = 0.0
    for L in lengths:
        one = sequence_flops(params, shape.n_layer, shape.d_model, L, W if W is not None and W < L else None)
        if s.protocol == "last-token":
            total += s.targets * one
        else:
            total += -(-tokens // (s.stride or max(1, L // 2) if s.protocol == "sliding" else L)) * one
    what = f"evaluating {len(lengths)} length(s) up to {max(lengths):,} tokens ({s.protocol})"
    state_estimate(what, total, str(model_device(model)))


def _window_line(w) -> str:
    """The window and, for ``auto``, the TRF's eps and reduction that chose it."""
    if w.mode == "auto":
        size = w.size if w.size is not None else "none"
        return f"window=auto W={size}, TRF eps={w.trf_eps:g}, {w.trf_reduce} over layers and heads ({w.reason})"
    if w.mode == "fixed":
        return f"window={w.size} ({w.reason})"
    return "window=none"


def _result_line(r) -> str:
    if r.error:
        return f"{r.length:>7}  failed: {r.error}"
    extra = ""
    if r.exact_error is not None:
        extra = f"  (no exact comparison: {r.exact_error})"
    elif r.exact_ppl is not None:
        change = 100 * r.window_rel_diff
        extra = f"  (exact ppl {r.exact_ppl:.3f} on the same tokens, window changes ppl by {change:.4f}%)"
    extra += f"  τ={_tau_text(r.temperature)}" if r.temperature is not None else ""
    se = f"{r.stderr:.4f}" if r.stderr is not None else "-"
    return (
        f"{r.length:>7} {r.loss:>8.4f} {se:>7} {r.ppl:>9.3f} {r.bits_per_token:>9.4f} {r.tokens:>8} "
        f"{r.seconds:>7.2f} {str(r.window or '-'):>7}{extra}"
    )


def _error_lines(w) -> list[str]:
    """The window's theory bound and measured effect (``window.error``), in words."""
    if w.error is None:
        return []
    b, m = w.error.bound, w.error.measured
    if b.worst_tail is not None:
        chose = f", chosen as TRF(eps={b.eps:g}, {b.reduce})" if b.eps is not None else ""
        lines = [
            f"window bound (000 Eq. 22): beyond W={b.window} every head keeps at most "
            f"{b.worst_tail:.3g} of its bias mass B (worst: {b.where}){chose}"
        ]
    else:
        lines = [f"window bound: none ({b.reason})"]
    if m.rel_diff is not None:
        mass = ""
        if m.dropped_mass_max is not None:
            mass = f"; attention mass dropped on {m.rows} sampled rows: max {m.dropped_mass_max:.3g}"
        lines.append(
            f"window measured on one sequence of the first {m.length} tokens: exact ppl {m.exact_ppl:.4f}, "
            f"windowed {m.window_ppl:.4f}, |Δppl|/ppl {100 * m.rel_diff:.3g}%{mass}"
        )
    if m.note:
        lines.append(f"window measurement: {m.note}")
    return lines


def _print_table(report) -> None:
    print(f"{report.run}  protocol={report.protocol}  L_tr={report.train_length}  " + _window_line(report.window))
    print(f"{'L_ex':>7} {'loss':>8} {'± se':>7} {'ppl':>9} {'bits/tok':>9} {'tokens':>8} {'sec':>7} {'window':>7}")
    for r in report.results:
        print(_result_line(r))
    for line in _error_lines(report.window):
        print(line)
    v, worst, se = report.extrapolates, report.worst_ratio, report.worst_ratio_stderr
    word = {True: "extrapolates", False: "does not extrapolate"}.get(v) or f"no verdict ({report.verdict_reason})"
    print(
        f"verdict (000 Def. 0.1, δ={report.delta}): {word}"
        + (f"; worst |Δppl|/ppl = {worst:.4f}" if worst is not None else "")
        + (f" ± {1.96 * se:.4f} (95%)" if se is not None else "")
        + (f"; {report.noise}" if report.within_noise else "")
    )

"""``extrap task`` for the RULER-style tasks (:mod:`extrap.tasks.ruler`): their flags, sample and suite score.

:mod:`extrap.commands.task` hands a RULER-style task, or ``task score --suite ruler``, to this module.
"""

from __future__ import annotations

import argparse
import difflib
import sys

from extrap.commands import args as types
from extrap.errors import ExtrapError
from extrap.io import json_text

PLAIN_TASKS = ("passkey", "line", "topic")
# The RULER registry's RULER_TASKS (extrap.tasks.ruler.registry), spelled out for the help text only: importing
# extrap.tasks loads torch, which `extrap --help` must not (tests/test_startup.py); test_sweep.py checks the two agree.
RULER_NAMES = ("niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa1", "qa2")
RULER_ONLY = ("suite", "tasks", "threshold", "haystack", "params", "plot")


def task_name(text: str) -> str:
    """``--task``: a retrieval task or a RULER-style one; a wrong name says which is closest."""
    from extrap.tasks.ruler.registry import RULER_TASKS

    known = PLAIN_TASKS + RULER_TASKS
    if text in known:
        return text
    close = difflib.get_close_matches(text, known, n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r}{hint} (choose from {', '.join(known)})")


def param(text: str) -> tuple[str, int | float]:
    """``--param NAME=VALUE``: one task setting, a number."""
    name, eq, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = None
    if not eq or not name.strip() or number is None:
        raise argparse.ArgumentTypeError(f"must be NAME=NUMBER (e.g. num_hops=2), got {text!r}")
    return name.strip(), int(number) if number.is_integer() and "." not in value else number


def check_params(pairs) -> tuple:
    """``--param`` pairs, each setting once: a repeated one is refused (the last would silently win)."""
    seen: dict[str, object] = {}
    for name, value in pairs or ():
        if name in seen:
            raise ExtrapError(f"--param {name} is given twice ({seen[name]}, then {value}): give each setting once")
        seen[name] = value
    return tuple(pairs or ())


def add_sample_arguments(s) -> None:
    s.add_argument("--haystack", choices=("corpus", "noise"), help="RULER-style tasks: corpus text or RULER's noise")
    s.add_argument(
        "--param", type=param, action="append", dest="params", metavar="NAME=VALUE", help="a RULER-style task setting"
    )


def add_score_arguments(c) -> None:
    c.add_argument("--suite", choices=("ruler",), help="score the RULER-style suite (with --tasks; see the README)")
    c.add_argument("--tasks", type=types.names, help="with --suite ruler: comma-separated tasks (default: all)")
    c.add_argument(
        "--threshold",
        default=None,
        help="effective length: rel:R (R x the score at L_tr, NoLiMa; default rel:0.85) or abs:S (RULER)",
    )
    add_sample_arguments(c)
    c.add_argument("--plot", metavar="DIR", help="write the needle heatmaps (depth x length) to DIR as PNG and SVG")


def wants_ruler(args) -> bool:
    """``task score`` of a RULER-style task: ``--suite ruler``, such a ``--task``, or a run trained on one."""
    from extrap.tasks.ruler.registry import RULER_TASKS

    if args.suite or args.task:
        return bool(args.suite) or args.task in RULER_TASKS
    if str(args.run).startswith("hf:"):
        return False
    from extrap.run import RunDir

    try:
        task = RunDir(args.run).read_config().train.task
    except (ExtrapError, OSError, ValueError):  # not a run: the plain path says why
        return False
    return bool(task) and all(t in RULER_TASKS for t in task.split(","))  # one task or a mix of them


def check_plain(args) -> None:
    """Refuse the RULER-only flags on passkey, line and topic."""
    for name in RULER_ONLY:
        if getattr(args, name, None):
            raise ExtrapError(f"--{name} is for the RULER-style tasks (--suite ruler or --task niah_single, ...)")
    if getattr(args, "method", None) == "generate":
        raise ExtrapError("--score generate is for the RULER-style tasks (--suite ruler or --task niah_single, ...)")


def run_ruler_sample(args, tok, corpus) -> int:
    from extrap.tasks.ruler import make_ruler_example

    ex = make_ruler_example(
        args.task,
        tok,
        args.length,
        args.seed,
        depth=args.depth,
        filler=corpus,
        split=args.split,
        haystack=args.haystack,
        params=args.params or (),
    )
    if args.csv:
        from extrap.results.tables import record_table, write_csv

        write_csv(args.csv, record_table(ex.to_json()))
    if args.json:
        print(json_text(ex.to_json()))
        return 0
    print(ex.prompt)
    depth = "-" if ex.depth is None else f"{ex.depth:.3f} (asked {ex.requested_depth:.3f})"
    print(
        f"--- target: {ex.target!r}  answers: {list(ex.answers)}  depth {depth}  {ex.prompt_tokens} prompt tokens "
        f"of {ex.length} ({tok.name}), answer {ex.target_tokens} tokens  haystack {ex.haystack or '-'}  "
        f"metric string_match_{ex.metric}" + "".join(f"  {k}={v}" for k, v in ex.params)
    )
    print(f"--- candidates (rank scoring): {' | '.join(ex.candidates)}")
    return 0


def _settings(args, run, tasks):
    from extrap.tasks.ruler import RulerSettings

    return RulerSettings(
        tasks=tasks,
        lengths=args.lengths or [run.train_length * 2**k for k in range(4)],
        train_length=run.train_length,
        n=args.n,
        seed=args.seed,
        method=args.method,
        threshold=args.threshold or "rel:0.85",
        buckets=args.buckets,
        filler=args.corpus or run.corpus,
        split=args.split,
        haystack=args.haystack,
        params=tuple(args.params or ()),
        batch=args.batch,
        details=args.details,
        progress=not args.json,
    )


def _check_request(args) -> list[str]:
    """The suite's tasks, after the checks that need no model."""
    from extrap.tasks.ruler import check_ruler_task, parse_threshold
    from extrap.tasks.ruler.registry import MAX_LENGTH

    if args.temperature is not None:
        raise ExtrapError("--temperature is not available for the RULER-style tasks")
    if args.suite and args.task:
        raise ExtrapError("give --suite ruler with --tasks, or one --task, not both")
    if args.tasks and not args.suite:
        raise ExtrapError("--tasks needs --suite ruler")
    tasks = [check_ruler_task(t) for t in (args.tasks or [])] or ([args.task] if args.task else [])
    parse_threshold(args.threshold or "rel:0.85")
    check_params(args.params)
    for L in args.lengths or []:
        if L > MAX_LENGTH:
            raise ExtrapError(f"length {L:,} is above the longest RULER-style example, {MAX_LENGTH:,} tokens")
    types.check_folder_output("--plot", args.plot)
    return tasks


def load_scored(args):
    """The run that ``task score`` scores, on every path: with --rope/--factor or --extend, whose conflicts
    are refused before anything is loaded (an extension on a run that does not rotate: one line after)."""
    import extrap

    types.check_extend_flags(args, ("rope", "factor"))  # RULER refuses --temperature itself (_check_request)
    device, dtype = types.loading_device(args), types.eval_dtype(args)
    run = extrap.load(args.run, device=device, train_length=args.train_length, dtype=dtype, **types.rope_options(args))
    types.apply_extend(run, args)
    return run


def check_memory(run, lengths, batch: int) -> None:
    """Refuse a length whose forward pass cannot fit (extrap.evaluate.check_evaluation), before any example is
    built: ``batch`` examples of each length, scored on their answer tokens."""
    from extrap.evaluate.driver import check_evaluation

    hint = "give shorter lengths or a smaller --batch"
    check_evaluation(run.model, [(L, batch, None) for L in lengths], logits=False, hint=hint)


def run_ruler_score(args) -> int:
    from extrap.tasks.ruler import RulerRun, score_ruler

    tasks = _check_request(args)
    types.check_outputs(args, runs=[args.run])
    run = load_scored(args)
    if args.train_length is None:
        types.state_assumed_length(run)
    tasks = tasks or (run.task.split(",") if run.task and not args.suite else [])  # a mix: each of its tasks
    settings = _settings(args, run, tasks)
    check_memory(run, settings.lengths, args.batch)
    scored = RulerRun.of(run, score_ruler(run.model, run.tokenizer, settings))
    return emit(args, scored, ruler_table, format_ruler, also=_plot)


def _plot(args, scored) -> None:
    if args.plot:
        from extrap.tasks.ruler.heatmap import plot_heatmaps

        plot_heatmaps(scored.report, args.plot, scored.train_length)


def emit(args, scored, table, text, also=None) -> int:
    """``scored`` (a TaskRun or RulerRun) to --out as JSON, to --csv as ``table(scored)``, ``also(args, scored)``
    (the suite's heatmaps), then to stdout: as JSON with --json, else as ``text(scored)``."""
    if args.out:
        from extrap.io import write_output

        write_output(args.out, json_text(scored.to_json()) + "\n")
    if args.csv:
        from extrap.results.tables import write_csv

        write_csv(args.csv, table(scored))
    if also is not None:
        also(args, scored)
    print(json_text(scored.to_json()) if args.json else text(scored))
    sys.stdout.flush()
    return 0


def ruler_table(scored):
    """One CSV row per task and length: its score, its effective length, the score per depth bucket."""
    from extrap.results.tables import Table, provenance

    rep, meta = scored.report, scored.provenance
    head = {**provenance({**meta, "seed": rep.seed}), "run": scored.run, "pe": scored.pe, "suite": rep.suite}
    head.update(method=rep.method, train_length=scored.train_length, tokenizer=rep.tokenizer, filler=rep.filler)
    rows = []
    for t in [*rep.tasks, None]:
        results = t.results if t else [_mean_row(m) for m in rep.mean]
        eff = (t or rep).effective_length
        for r in results:
            row = {**head, "task": t.task if t else "mean", "length": r.length, "n": r.n, "score": r.score}
            row.update(effective_length=eff.length, threshold=f"{eff.form}:{eff.ratio:g}", cutoff=eff.cutoff)
            row.update(seconds=r.seconds, error=r.error)
            row.update({f"score_depth_{c.lo:g}-{c.hi:g}": c.score for c in r.by_depth})
            rows.append({**row, **({"command": meta["command"]} if "command" in meta else {})})
    return Table(rows)


def _mean_row(m):
    from extrap.tasks.ruler import RulerLength

    return RulerLength(m.length, 0, score=m.score)


def format_ruler(scored) -> str:
    """A text table: each task's score per length and its effective length, then the mean."""
    rep = scored.report
    lines = [
        f"{scored.run}  suite=ruler  score={rep.method}  n={rep.n}  L_tr={scored.train_length}  "
        f"threshold={rep.threshold}  haystack={rep.filler}"
    ]
    lines.append(f"{'task':<16}" + "".join(f"{L:>8}" for L in rep.lengths) + f"{'effective':>11}")

    def cell(s):
        return f"{s:>8.2f}" if s is not None else f"{'-':>8}"

    def eff(e):
        return f"{e.length:>11}" if e.length is not None else f"{'-':>11}"

    for t in rep.tasks:
        lines.append(f"{t.task:<16}" + "".join(cell(r.score) for r in t.results) + eff(t.effective_length))
    lines.append(f"{'mean':<16}" + "".join(cell(m.score) for m in rep.mean) + eff(rep.effective_length))
    e = rep.effective_length
    if e.length is None and e.note:
        lines.append(f"effective length: {e.note}")
    if rep.skipped:
        lines.append(f"left out (longer than the shortest length): {', '.join(rep.skipped)}")
    return "\n".join(lines)

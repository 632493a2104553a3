"""``extrap study``: reproduce the paper's figures at CPU scale and write an HTML report."""

from __future__ import annotations

import argparse
import sys

from extrap.commands import args as types
from extrap.errors import ExtrapError
from extrap.experiments import registry
from extrap.experiments.protocol import Choice


def _description() -> str:
    """One line per registered experiment, from its About (argparse keeps the lines: RawDescriptionHelpFormatter)."""
    width = max(map(len, registry.names()))
    lines = [f"  {name:<{width}}  {registry.about(name).summary}" for name in registry.names()]
    return "\n".join(["Run one experiment and write an HTML report of its claims, tables and figures:", *lines])


def _option_help(option: str, what: str) -> str:
    """``what``, then the experiments that honour ``option``, grouped by what they take and its default."""
    groups: dict[Choice | None, list[str]] = {}
    for name in registry.names():
        choices = registry.about(name).choices
        if option in choices:
            groups.setdefault(choices[option], []).append(name)
    if not groups:
        return f"{what}. No experiment takes it"
    return f"{what}. For " + "; ".join(_takes(names, choice) for choice, names in groups.items())


def _takes(names: list[str], choice: Choice | None) -> str:
    if choice is None:  # as the option's own help says
        return ", ".join(names)
    what = f"{choice.accepts} (default: {choice.default})" if choice.accepts else f"default {choice.default}"
    return f"{', '.join(names)}: {what}"


def register(sub) -> None:
    p = sub.add_parser(
        "study",
        help="theory, training, evaluation, receptive fields and a report",
        description=_description(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", default="cpu", help="smoke | cpu | paper (default: cpu)")
    p.add_argument(
        "--experiment",
        default=registry.DEFAULT,
        choices=registry.names(),
        help=f"which experiment (default: {registry.DEFAULT}): " + " | ".join(registry.names()),
    )
    p.add_argument("--pe", type=types.pes, help=_option_help("pe", "comma-separated PEs"))
    p.add_argument("--methods", type=types.names, help=_option_help("methods", "comma-separated methods"))
    p.add_argument("--tasks", type=types.names, help=_option_help("tasks", "comma-separated tasks"))
    p.add_argument("--out", default="study", help="output folder (default: ./study)")
    p.add_argument("--resume", action="store_true", help="continue a study in --out, reusing finished runs")
    p.add_argument(
        "--jobs", type=types.positive_int, default=2, help="PEs trained at once, one thread each (default 2)"
    )
    p.add_argument("--steps", type=types.positive_int, help="override the preset's training steps")
    p.add_argument("--corpus", help="override the corpus (default: stdlib)")
    p.add_argument(
        "--delta",
        type=types.positive_float,
        help=_option_help("delta", "δ of 000 Definition 0.1 (default 0.02; PPL verdicts)"),
    )
    types.add_device(p, note="default: training auto, evaluation and measurements cpu")
    p.set_defaults(func=run)


# the flags that are run_study's keywords of the same name, passed on as they are
_FORWARDED = ("preset", "experiment", "resume", "jobs", "delta", "steps", "corpus", "tasks", "methods")


def run(args) -> int:
    from extrap.study import StudyExistsError, StudyMismatchError, run_study

    for flag, value in (("tasks", args.tasks), ("methods", args.methods), ("delta", args.delta)):
        takers = [n for n in registry.names() if flag in registry.get(n).options] if value is not None else []
        if value is not None and args.experiment not in takers:
            raise ExtrapError(f"--{flag} is only for --experiment {' or '.join(takers)}")
    try:  # progress lines reach stderr through the logging handler that extrap.cli installs
        forwarded = types.flags(args, _FORWARDED)
        results = run_study(args.out, pes=args.pe, device=types.loading_device(args), **forwarded)
    except StudyExistsError as e:
        raise ExtrapError(f"{e}; pass --resume to continue or choose another --out") from None
    except StudyMismatchError as e:
        raise ExtrapError(f"{e}; use another --out") from None
    print("claims:")
    for c in results.claims:
        mark = {True: "✔", False: "✘", None: "–"}[c.ok]
        print(f"  {mark} {c.claim}: {c.evidence}")
    print(f"report: {args.out}/report.html")
    if results.failures:  # the report exists but is incomplete: a script must not mistake it for success
        print(f"extrap: {len(results.failures)} job(s) failed: {', '.join(sorted(results.failures))}", file=sys.stderr)
        return 1
    return 0

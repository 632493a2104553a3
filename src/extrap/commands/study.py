"""``extrap study``: reproduce the paper's figures at CPU scale and write an HTML report."""

from __future__ import annotations

from extrap.errors import ExtrapError


def register(sub) -> None:
    p = sub.add_parser(
        "study",
        help="theory, training, evaluation, receptive fields and a report",
        description="Run the extrapolation study (000), the ALiBi slope study (003 §4) or the "
        "attention alignment study (004 §5.2).",
    )
    p.add_argument("--preset", default="cpu", help="smoke | cpu | paper (default: cpu)")
    p.add_argument(
        "--pe",
        help="comma-separated PEs (default: alibi,kerple-log,sandwich,type1,type2,example1,"
        "example2,sinusoidal,rope,nope)",
    )
    p.add_argument("--experiment", default="extrapolation", help="extrapolation | alibi-slopes | alignment")
    p.add_argument(
        "--tasks",
        help="alignment: comma-separated retrieval tasks, passkey,line,topic (default: the preset's; smoke: passkey)",
    )
    p.add_argument("--out", default="study", help="output folder (default: ./study)")
    p.add_argument("--resume", action="store_true", help="continue a study in --out, reusing finished runs")
    p.add_argument("--jobs", type=int, default=2, help="PEs trained at once, one thread each (default 2)")
    p.add_argument("--steps", type=int, help="override the preset's training steps")
    p.add_argument("--corpus", help="override the corpus (default: stdlib)")
    p.add_argument("--delta", type=float, default=0.02, help="δ of 000 Definition 0.1")
    p.set_defaults(func=run)


def _names(flag: str, value: str | None) -> list[str] | None:
    """A comma-separated flag as a list (None when the flag was not given)."""
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise ExtrapError(f"{flag} is empty")
    return names


def run(args) -> int:
    from extrap.study import StudyExistsError, StudyMismatchError, run_study

    pes, tasks = _names("--pe", args.pe), _names("--tasks", args.tasks)
    if args.steps is not None and args.steps < 1:
        raise ExtrapError("--steps must be positive")
    if args.jobs < 1:
        raise ExtrapError("--jobs must be >= 1")
    if tasks is not None and args.experiment != "alignment":
        raise ExtrapError("--tasks is only for --experiment alignment")
    try:  # progress lines reach stderr through the logging handler that extrap.cli installs
        results = run_study(
            args.out,
            preset=args.preset,
            pes=pes,
            experiment=args.experiment,
            resume=args.resume,
            jobs=args.jobs,
            delta=args.delta,
            steps=args.steps,
            corpus=args.corpus,
            tasks=tasks,
        )
    except StudyExistsError as e:
        raise ExtrapError(f"{e}; pass --resume to continue or choose another --out") from None
    except StudyMismatchError as e:
        raise ExtrapError(f"{e}; use another --out") from None
    print("claims:")
    for c in results.claims:
        mark = {True: "✔", False: "✘", None: "–"}[c.ok]
        print(f"  {mark} {c.claim}: {c.evidence}")
    print(f"report: {args.out}/report.html")
    return 0

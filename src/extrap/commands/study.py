"""``extrap study``: reproduce the paper's figures at CPU scale and write an HTML report."""

from __future__ import annotations

import sys

from extrap.commands import args as types
from extrap.errors import ExtrapError
from extrap.experiments import registry


def register(sub) -> None:
    p = sub.add_parser(
        "study",
        help="theory, training, evaluation, receptive fields and a report",
        description="Run the extrapolation study (000), the ALiBi slope study (003 §4), the "
        "attention alignment study (004 §5.2), the RoPE base study (RoPE's theory against trained models), the "
        "effective-length study (RULER-style effective length beside the TRF) or the "
        "extension study (training-free RoPE extension methods on one model).",
    )
    p.add_argument("--preset", default="cpu", help="smoke | cpu | paper (default: cpu)")
    p.add_argument(
        "--pe",
        type=types.pes,
        help="comma-separated PEs (default: alibi,kerple-log,sandwich,type1,type2,example1,"
        "example2,sinusoidal,rope,nope; rope-base: rope:base=100 ... rope:base=1000000, rope:p=0.75, "
        "rope:partial=0.5, nope; effective-length: alibi,kerple-log,type1,rope,nope)",
    )
    p.add_argument(
        "--experiment",
        default=registry.DEFAULT,
        choices=registry.names(),
        help=" | ".join(registry.names()),
    )
    p.add_argument(
        "--methods",
        type=types.names,
        help="extension: comma-separated methods, none,pi,ntk,dynamic,yarn,llama3,rerope,leaky-rerope,"
        "self-extend,dca,lm-infinite,string,window,sinks (default: all)",
    )
    p.add_argument(
        "--tasks",
        type=types.names,
        help="alignment: comma-separated retrieval tasks, passkey,line,topic (default: the preset's; smoke: passkey); "
        "effective-length: RULER-style tasks that fit L_tr (default: the preset's; cpu: niah_single,qa1)",
    )
    p.add_argument("--out", default="study", help="output folder (default: ./study)")
    p.add_argument("--resume", action="store_true", help="continue a study in --out, reusing finished runs")
    p.add_argument(
        "--jobs", type=types.positive_int, default=2, help="PEs trained at once, one thread each (default 2)"
    )
    p.add_argument("--steps", type=types.positive_int, help="override the preset's training steps")
    p.add_argument("--corpus", help="override the corpus (default: stdlib)")
    p.add_argument("--delta", type=types.positive_float, help="δ of 000 Definition 0.1 (default 0.02; PPL verdicts)")
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

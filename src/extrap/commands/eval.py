"""``extrap eval``: perplexity versus length, three protocols, the extrapolation verdict."""

from __future__ import annotations

import json
import sys

from extrap.commands import args as types


def _tau_text(t) -> str:
    return "[" + ",".join(f"{x:.3f}" for x in t) + "]" if isinstance(t, list) else f"{t:.3f}"


PROTOCOLS = ("nonoverlapping", "sliding", "last-token")


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
        "--protocol", default="nonoverlapping", choices=PROTOCOLS, help="nonoverlapping | sliding | last-token"
    )
    p.add_argument("--stride", type=types.positive_int, help="sliding stride (default L_ex/2)")
    p.add_argument("--targets", type=types.positive_int, default=64, help="last-token: number of target tokens")
    p.add_argument("--tokens", type=types.length, help="tokens evaluated per length (default: the longest length)")
    types.add_split(p)
    p.add_argument("--window", default="none", help="auto | none | W: attention window used at evaluation")
    p.add_argument("--eps", type=types.fraction, default=1e-6, help="window auto: TRF(eps) of the trained bias")
    p.add_argument(
        "--cache-window",
        type=types.positive_int,
        dest="cache_window",
        help="rolling KV cache of W tokens (003 Appendix B); same as --window W",
    )
    p.add_argument("--delta", type=types.positive_float, default=0.02, help="δ of 000 Definition 0.1")
    p.add_argument("--batch", type=types.positive_int, default=8)
    p.add_argument(
        "--backend",
        choices=("auto", "blocked", "flex"),
        help="attention: auto | blocked | flex (flex on CPU compiles once per length)",
    )
    p.add_argument(
        "--temperature",
        default=None,
        help="softmax temperature (004): auto (the aligned τ for each L_ex, see --align-mode) | TAU",
    )
    p.add_argument(
        "--align-mode",
        default="pmax",
        dest="align_mode",
        help="--temperature auto: pmax | entropy | log-length | prop1 | prop2 (default pmax)",
    )
    types.add_hf_arguments(p)
    p.add_argument("--out", help="also write the JSON result to this file (atomically)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from extrap.evaluate import evaluate_run

    window = args.window if args.cache_window is None else str(args.cache_window)
    report = evaluate_run(
        args.run,
        lengths=args.lengths,
        protocol=args.protocol,
        stride=args.stride,
        targets=args.targets,
        tokens=args.tokens,
        split=args.split,
        window=window,
        eps=args.eps,
        delta=args.delta,
        batch=args.batch,
        backend=args.backend,
        temperature=args.temperature,
        align_mode=args.align_mode,
        progress=not args.json,
        corpus=getattr(args, "corpus", None),
        hf_options=types.hf_options(args),
    )
    if args.out:
        from extrap.io import atomic_write_json

        atomic_write_json(args.out, report)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{report['run']}  protocol={report['protocol']}  L_tr={report['train_length']}  "
        f"window={report['window']['mode']}" + (f" ({report['window']['reason']})" if report["window"]["size"] else "")
    )
    print(f"{'L_ex':>7} {'loss':>8} {'ppl':>9} {'bits/tok':>9} {'tokens':>8} {'sec':>7} {'window':>7}")
    for r in report["results"]:
        if "error" in r:
            print(f"{r['length']:>7}  failed: {r['error']}")
            continue
        extra = (
            f"  (exact ppl {r['exact_ppl']:.3f}, window changes ppl by {100 * r['window_rel_diff']:.4f}%)"
            if "exact_ppl" in r
            else ""
        )
        extra += f"  τ={_tau_text(r['temperature'])}" if "temperature" in r else ""
        print(
            f"{r['length']:>7} {r['loss']:>8.4f} {r['ppl']:>9.3f} {r['bits_per_token']:>9.4f} {r['tokens']:>8} "
            f"{r['seconds']:>7.2f} {str(r['window'] or '-'):>7}{extra}"
        )
    v = report["extrapolates"]
    word = {True: "extrapolates", False: "does not extrapolate", None: "no verdict (L_tr not evaluated)"}[v]
    worst = report["worst_ratio"]
    print(
        f"verdict (000 Def. 0.1, δ={report['delta']}): {word}"
        + (f"; worst |Δppl|/ppl = {worst:.4f}" if worst is not None else "")
    )
    sys.stdout.flush()
    return 0

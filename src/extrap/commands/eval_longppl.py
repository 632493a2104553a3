"""``extrap eval --longppl``: its options and checks, the evaluator, and the LongPPL table (Fang et al., 2025)."""

from __future__ import annotations

from collections.abc import Callable

from extrap.commands import args as types
from extrap.errors import ExtrapError


def add_arguments(p) -> None:
    from extrap.results.longppl import ALPHA, BETA, BLOCK_FRACTION

    p.add_argument(
        "--longppl",
        action="store_true",
        help="also LongPPL (Fang et al., ICLR 2025): the PPL over the key tokens, those the evaluator predicts "
        "much better with the whole context than with L_tr + k tokens (the cut is RUN's L_tr: 4096 for a run "
        "trained at 4k, the longppl package's trunc_len)",
    )
    p.add_argument("--evaluator", help="--longppl: the run that chooses the key tokens (default: RUN itself)")
    p.add_argument(
        "--longppl-alpha", type=float, help=f"--longppl: key when loss_short - loss_full > ALPHA (default {ALPHA:g})"
    )
    p.add_argument(
        "--longppl-beta", type=float, help=f"--longppl: key when loss_full < -BETA (default {BETA:g}, i.e. < 2)"
    )
    p.add_argument(
        "--longppl-block",
        type=float,
        metavar="F",
        help=f"--longppl: tokens sharing one truncated context, as a fraction of L_tr (default {BLOCK_FRACTION:g}: "
        f"{round(BLOCK_FRACTION * 4096)} tokens at L_tr = 4096, the longppl package's sliding_window)",
    )


def settings(args):
    """The :class:`~extrap.evaluate.longppl.LongPPLSettings` asked for (one line for a bad α, β or block, or a
    LongPPL option without ``--longppl``), or None without ``--longppl``."""
    from extrap.evaluate.longppl import LongPPLSettings

    names = {"alpha": "alpha", "beta": "beta", "block": "block_fraction"}  # flag -> LongPPLSettings field
    given = {k: v for k in names if (v := getattr(args, f"longppl_{k}")) is not None}
    if args.evaluator is not None and not args.evaluator.strip():  # not RUN itself in disguise
        raise ExtrapError("--evaluator is empty: give a run directory or hf:PATH (leave it out for RUN itself)")
    if not args.longppl:
        flags = [f"--longppl-{k}" for k in given] + (["--evaluator"] if args.evaluator else [])
        if flags:
            raise ExtrapError(f"{', '.join(flags)}: only with --longppl")
        return None
    if args.file:
        raise ExtrapError("--longppl: not with --file; LongPPL is reported for each evaluation length")
    return LongPPLSettings(**{names[k]: v for k, v in given.items()})


def report(args, run, wanted, spec):
    """The evaluation and LongPPL at every length (a LongPPLReport); ``--evaluator`` is loaded on RUN's device."""
    import extrap
    from extrap.evaluate.longppl import longppl_report

    evaluator = None
    if args.evaluator:
        dtype = types.eval_dtype(args, "evaluator")
        evaluator = extrap.load(args.evaluator, device=types.loading_device(args), dtype=dtype)
        types.require_causal(evaluator, "eval --longppl (its --evaluator)")
    return longppl_report(run, wanted, evaluator, spec)


def table_printer(print_eval: Callable) -> Callable:
    """A printer of a LongPPLReport: the evaluation's table (``print_eval``), then LongPPL at each length."""

    def show(rep) -> None:
        print_eval(rep.report)
        lp = rep.longppl
        print(
            f"LongPPL (Fang et al. 2025): key when loss_short - loss_full > {lp.alpha:g} and loss_full < "
            f"{-lp.beta:g}; truncated context {lp.trunc_len} + k tokens in blocks of {lp.block}; "
            f"evaluator {lp.evaluator}"
        )
        print(f"{'L_ex':>7} {'LongPPL':>9} {'key':>8} {'tokens':>8} {'key %':>7} {'ppl':>9}")
        for r in lp.results:
            if r.error:
                print(f"{r.length:>7}  failed: {r.error}")
                continue
            longppl = f"{r.longppl:.3f}" if r.longppl is not None else "-"
            frac = 100 * r.key_fraction
            print(f"{r.length:>7} {longppl:>9} {r.key_tokens:>8} {r.tokens:>8} {frac:>7.3f} {r.ppl:>9.3f}")

    return show

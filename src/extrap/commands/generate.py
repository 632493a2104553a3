"""``extrap generate``: continue a prompt with a (rolling) KV cache (003 Appendix B)."""

from __future__ import annotations

import time

from extrap.commands import args as types
from extrap.errors import ExtrapError

MAX_NEW_TOKENS = 10**6  # one step per token: a million take minutes to hours, more is a typing error


def register(sub) -> None:
    p = sub.add_parser("generate", help="generate text with a KV cache, optionally a rolling window of W tokens")
    p.add_argument("run", help="run directory or hf:PATH")
    p.add_argument("--prompt", default="def ", help="prompt text")
    p.add_argument(
        "--tokens",
        type=types.bounded_int(0, MAX_NEW_TOKENS),
        default=200,
        help=f"new tokens (default 200, at most {MAX_NEW_TOKENS:,})",
    )
    p.add_argument("--cache-window", type=types.positive_int, dest="cache_window", help="rolling KV cache of W tokens")
    p.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    p.add_argument("--seed", type=types.seed, help="random seed of --sample (default 0)")
    types.add_rope_arguments(p)
    types.add_extend_argument(p)
    types.add_device(p, note="default: cpu for extrap runs, cuda when available for hf: models")
    p.add_argument("--json", action="store_true")
    p.add_argument("--csv", metavar="PATH", help="also write the result as one CSV row to PATH (atomically)")
    p.set_defaults(func=run)


def run(args) -> int:
    import torch

    import extrap
    from extrap.io import json_text
    from extrap.model import model_device
    from extrap.model.generate import generate

    try:
        args.prompt.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes on the command line arrive as surrogates
        raise ExtrapError("--prompt is not valid UTF-8 text") from None
    if args.seed is not None and not args.sample:
        raise ExtrapError("--seed has no effect without --sample: greedy decoding draws nothing")
    args.seed = args.seed or 0
    types.check_outputs(args, runs=[args.run])
    types.check_extend_flags(args, ("rope", "factor", "cache_window"))
    run = extrap.load(args.run, device=types.loading_device(args), **types.rope_options(args))
    types.require_causal(run, "generate")
    types.apply_extend(run, args)
    model, tok = run.model, run.tokenizer
    ids = tok.encode(args.prompt)
    if not ids:
        raise ExtrapError("--prompt is empty")
    if len(ids) + args.tokens > types.MAX_LENGTH:
        raise ExtrapError(
            f"--prompt and --tokens make {len(ids) + args.tokens:,} tokens, more than {types.MAX_LENGTH:,}"
        )
    device = model_device(model)  # the prompt and the sampler's generator live where the model does
    _state_prefill(model, len(ids), args.cache_window, str(device))
    t0 = time.perf_counter()
    out = generate(
        model,
        torch.tensor([ids], device=device),
        args.tokens,
        cache_window=args.cache_window,
        greedy=not args.sample,
        generator=torch.Generator(device=device).manual_seed(args.seed),
    )
    seconds = time.perf_counter() - t0
    text = tok.decode(out[0].tolist())
    report = {
        "run": args.run,
        "text": text,
        "tokens": args.tokens,
        "cache_window": args.cache_window,
        "seconds": seconds,
        "seed": args.seed,
        "pe": run.pe,
    }
    if args.csv:
        from extrap.results.tables import generate_table, write_csv

        write_csv(args.csv, generate_table(report))
    print(json_text(report, indent=None) if args.json else text)
    return 0


def _state_prefill(model, length: int, window: int | None, device: str) -> None:
    """Say how long reading a long prompt will at least take (:mod:`extrap.cost`); new tokens are timed as
    they come (:func:`extrap.model.generate.generate`)."""
    from extrap.cost import sequence_flops, state_estimate

    shape, params = model.shape, sum(p.numel() for p in model.parameters())
    flops = sequence_flops(params, shape.n_layer, shape.d_model, length, window)
    state_estimate(f"reading a prompt of {length:,} tokens", flops, device)

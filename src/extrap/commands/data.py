"""``extrap corpus``: list the available corpora, fetch and prepare one, or count its position frequency.

``prepare`` does everything a training run would do on first use (download,
split, train the tokenizer, encode every split) so that the slow part can be
done ahead of time, and prints what it built.
"""

from __future__ import annotations

import argparse
import time

from extrap.io import json_text


def register(subparsers: argparse._SubParsersAction) -> None:
    corpus = subparsers.add_parser("corpus", help="list, fetch and tokenize training corpora")
    sub = corpus.add_subparsers(dest="corpus_command", required=True, parser_class=type(corpus))

    ls = sub.add_parser("list", help="show the corpus names load_corpus accepts")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.add_argument("--csv", metavar="PATH", help="also write one CSV row per corpus to PATH (atomically)")
    ls.set_defaults(func=cmd_list)

    prep = sub.add_parser("prepare", help="fetch a corpus, build its tokenizer and token streams, print sizes")
    prep.add_argument(
        "name", nargs="?", default="stdlib", help="corpus name (default: stdlib); see `extrap corpus list`"
    )
    prep.add_argument("--tokenizer", default="bytes", help="'bytes' or 'bpe:V' (V >= 257); default: bytes")
    prep.add_argument("--cache", default=None, help="cache folder (default: $EXTRAP_CACHE or ~/.cache/extrap)")
    prep.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    prep.add_argument("--csv", metavar="PATH", help="also write one CSV row per split to PATH (atomically)")
    prep.set_defaults(func=cmd_prepare)

    from extrap.commands import args as types

    pf = sub.add_parser(
        "position-frequency",
        help="how often training shows each relative distance: STRING's f(i) (An et al. 2025) of the sampler's windows",
    )
    pf.add_argument("name", help="corpus name; see `extrap corpus list`")
    pf.add_argument("--train-length", type=types.positive_int, required=True, help="L_tr, the training window")
    pf.add_argument("--tokenizer", default="bytes", help="'bytes' or 'bpe:V' (V >= 257); default: bytes")
    pf.add_argument(
        "--fraction",
        type=types.fraction,
        default=None,
        help="report the smallest i with f(i) < FRACTION·f(0) (default: 0.5, half of f(0))",
    )
    pf.add_argument("--cache", default=None, help="cache folder (default: $EXTRAP_CACHE or ~/.cache/extrap)")
    pf.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    pf.add_argument("--csv", metavar="PATH", help="also write one CSV row per distance i to PATH (atomically)")
    pf.set_defaults(func=cmd_position_frequency)


def cmd_list(args: argparse.Namespace) -> int:
    from extrap.commands.args import check_outputs
    from extrap.data import list_corpora

    check_outputs(args)
    rows = list_corpora()
    data = [{"name": n, "description": d} for n, d in rows]
    if getattr(args, "csv", None):
        from extrap.results.tables import corpus_list_table, write_csv

        write_csv(args.csv, corpus_list_table(data))
    if getattr(args, "json", False):
        print(json_text(data))
    else:
        width = max(len(n) for n, _ in rows)
        for name, desc in rows:
            print(f"{name:<{width}}  {desc}")
    return 0


def prepare(name: str, tokenizer_spec: str, cache: str | None) -> dict:
    """Load the corpus, tokenizer and all three streams; return a JSON-ready summary."""
    from extrap.data import SPLITS, cache_root, get_tokenizer, load_corpus, token_stream

    t0 = time.perf_counter()
    corpus = load_corpus(name, cache)
    tok = get_tokenizer(tokenizer_spec, corpus, cache)
    tokens = {s: int(token_stream(corpus, tok, s, cache).numel()) for s in SPLITS}
    summary = corpus.summary()
    summary.update(
        tokenizer=tok.name,
        vocab_size=tok.vocab_size,
        tokens=tokens,
        cache=str(cache_root(cache)),
        seconds=round(time.perf_counter() - t0, 2),
    )
    return summary


def cmd_prepare(args: argparse.Namespace) -> int:
    from extrap.commands.args import check_outputs
    from extrap.data import SPLITS

    check_outputs(args)
    s = prepare(args.name, args.tokenizer, args.cache)
    if args.csv:
        from extrap.results.tables import corpus_table, write_csv

        write_csv(args.csv, corpus_table(s))
    if args.json:
        print(json_text(s))
        return 0
    print(f"corpus     {s['name']}  ({s['split_mode']} split)")
    print(f"hash       {s['hash']}")
    print(f"tokenizer  {s['tokenizer']}  (vocab {s['vocab_size']})")
    print(f"{'split':<11}{'bytes':>14}{'tokens':>14}{'bytes/token':>13}" + ("" if not s["files"] else f"{'files':>8}"))
    for split in SPLITS:
        nb, nt = s["bytes"][split], s["tokens"][split]
        ratio = f"{nb / nt:.2f}" if nt else "-"
        files = f"{s['files'][split]:>8}" if s["files"] else ""
        print(f"{split:<11}{nb:>14,}{nt:>14,}{ratio:>13}{files}")
    print(f"cache      {s['cache']}  ({s['seconds']} s)")
    return 0


def position_frequency(name: str, train_length: int, tokenizer_spec: str, fraction: float | None, cache: str | None):
    """STRING's position frequency of the windows extrap's sampler draws from ``name``'s training split."""
    from extrap.data import get_tokenizer, load_corpus, token_stream
    from extrap.data.position_frequency import DEFAULT_FRACTION, check_fraction, check_length, packed_windows

    fraction = DEFAULT_FRACTION if fraction is None else fraction  # the library's default (not imported at startup)
    check_length(train_length), check_fraction(fraction)  # before any corpus is read
    corpus = load_corpus(name, cache)
    tokens = int(token_stream(corpus, get_tokenizer(tokenizer_spec, corpus, cache), "train", cache).numel())
    return packed_windows(corpus.name, train_length, fraction, stream_tokens=tokens)


def position_frequency_text(r) -> str:
    """The summary table of a :class:`~extrap.data.position_frequency.PositionFrequency`."""
    lines = [
        f"corpus {r.corpus}: {r.sequences}, L_tr {r.train_length:,}"
        + (f", {r.stream_tokens:,} training tokens" if r.stream_tokens is not None else ""),
        f"{r.definition}; {r.sequences_note}",
        f"{'i':>10}  {'f(i)':>10}  {'f(i)/f(0)':>9}",
    ]
    lines += [f"{i:>10,}  {f:>10,}  {x:>9.4f}" for i, f, x in zip(r.distances, r.frequency, r.relative)]
    where = "none" if r.below_fraction_at is None else f"{r.below_fraction_at:,}"
    lines.append(f"smallest i with f(i) < {r.fraction:g}·f(0): {where}")
    return "\n".join(lines)


def cmd_position_frequency(args: argparse.Namespace) -> int:
    from extrap.commands.args import check_outputs

    check_outputs(args)
    r = position_frequency(args.name, args.train_length, args.tokenizer, args.fraction, args.cache)
    if args.csv:
        from extrap.results.tables import position_frequency_table, write_csv

        write_csv(args.csv, position_frequency_table(r))
    print(json_text(r.to_json()) if args.json else position_frequency_text(r))
    return 0

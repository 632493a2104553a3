"""``extrap corpus``: list the available corpora, or fetch and prepare one.

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

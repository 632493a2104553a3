"""``extrap theory --extend METHOD --train-length L --length L'``: what an extension feeds RoPE, before running.

    extrap theory --extend self-extend:group=8,window=1024 --train-length 4096 --length 32768 [--json]
    ... [--head-dim 128 [--pretrain-base 500000]]   # also RoPE's pairs that turn past training's angles

From the same distance maps the attention runs (:func:`extrap.extend.analyse_extension`, block by block).
"""

from __future__ import annotations

import math

from extrap.errors import ExtrapError
from extrap.io import json_text


def run_extend(args) -> int:
    from extrap.extend import analyse_extension
    from extrap.memory import check_head_dim

    if args.pe or args.checkpoint:
        raise ExtrapError("--extend is analysed alone: give no PE and no --checkpoint with it")
    if args.train_length is None or args.length is None:
        raise ExtrapError("--extend needs --train-length L (the training length) and --length L' (the one analysed)")
    base = args.pretrain_base or 10000.0
    check_head_dim(args.head_dim, 3 * 8, "the extension's RoPE pairs (θ, angles, comparison)")
    r = analyse_extension(args.extend, args.train_length, args.length, args.head_dim, base)
    if args.csv:
        from extrap.results.tables import Table, write_csv

        write_csv(args.csv, Table([r.to_json()["extension"]]))
    if args.json:
        print(json_text(r.to_json()))
        return 0
    up_to = "any length" if r.in_distribution_up_to is None else f"L' <= {r.in_distribution_up_to:,}"
    verdict = "in distribution" if r.in_distribution else "out of distribution"
    print(f"{r.method}  [{r.citation}]")
    print(f"L_tr = {r.train_length:,}, L' = {r.length:,}")
    print(f"largest distance fed to RoPE: {_num(r.max_distance)} (trained: 0..{r.train_length - 1}): {verdict}")
    print(f"in distribution for {up_to}")
    bounded = "bounded, streams through a rolling cache" if r.bounded else "grows with the length"
    print(f"keys attended per query: max {r.keys_per_query_max:,}, mean {r.keys_per_query_mean:,.1f} ({bounded})")
    if r.head_dim is not None:
        print(f"RoPE pairs (d = {r.head_dim}, base {r.base:g}) turned past training's angles: {r.new_angle_pairs}")
    return 0


def _num(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and float(x).is_integer() else f"{x:.4g}"

"""The line task (Li et al. 2023): many ``line <key>: REGISTER_CONTENT is <value>`` lines, one asked for."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from extrap.errors import ExtrapError
from extrap.tasks.formats import (
    LINE_FORMAT,
    LINE_HEADER,
    LINE_QUESTION,
    N_CANDIDATES,
    check_length,
    check_request,
    finish,
    first_fit,
    fit,
    ntok,
    number,
    word,
)
from extrap.tasks.records import Example


def line(
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    digits: int = 5,
    include_target: bool = False,
) -> Example:
    """Many ``line <key>: REGISTER_CONTENT is <value>`` lines; asks for one key's value (Li et al. 2023).

    Keys are random pronounceable words (letters only), values distinct
    ``digits``-digit numbers, so every value occurs exactly once.  ``filler`` is
    accepted for a uniform signature and unused.  The line count is the largest
    that fits; the remaining few tokens are taken up by lengthening keys.
    """
    length, depth = check_request("line", length, depth)
    if not 2 <= int(digits) <= 18:
        raise ExtrapError(f"line: digits must be in 2..18, got {digits}")
    check_length("line", tokenizer, length, include_target, digits=int(digits))
    return first_fit(
        "line",
        tokenizer,
        length,
        seed,
        include_target,
        lambda rng: _line_once(rng, tokenizer, length, seed, depth, int(digits), include_target),
    )


class _Lines:
    """Distinct keys and values drawn lazily, in order, from their own generator."""

    def __init__(self, rng: random.Random, digits: int):
        self.rng, self.digits = rng, digits
        self.keys: list[str] = []
        self.values: list[str] = []
        self._seen_k: set[str] = set()
        self._seen_v: set[str] = set()

    def ensure(self, n: int) -> None:
        while len(self.keys) < n:
            k = word(self.rng, 3)
            if k in self._seen_k:
                continue
            v = number(self.rng, self.digits)
            while v in self._seen_v:
                v = number(self.rng, self.digits)
            self._seen_k.add(k)
            self._seen_v.add(v)
            self.keys.append(k)
            self.values.append(v)


def _line_once(rng, tokenizer, length, seed, depth, digits, include_target):
    want = rng.random() if depth is None else depth
    pool = _Lines(random.Random(rng.getrandbits(63)), digits)
    # the target's width is fixed, its token count can vary with BPE: budget for the widest
    t_max = max(ntok(tokenizer, f" {number(rng, digits)}\n") for _ in range(4)) if include_target else 0
    budget = length - t_max

    def render(n: int, keys: list[str] | None = None) -> tuple[str, str, str, int]:
        pool.ensure(n)
        keys = keys or pool.keys[:n]
        lines = [LINE_FORMAT.format(key=keys[i], value=pool.values[i]) for i in range(n)]
        q = _nearest_line(lines, want)
        head, hay = "".join(lines[:q]), "".join(lines)  # the one-line instruction is not part of the haystack
        return head, hay, LINE_HEADER + hay + LINE_QUESTION.format(key=keys[q]), q

    per_line = max(1, ntok(tokenizer, LINE_FORMAT.format(key="kobapu", value="1" * digits)))
    n = fit(lambda k: ntok(tokenizer, render(k)[2]), budget, 2, budget // per_line + 2, limit=budget + 2)
    if n is None:
        return None
    keys = _lengthen_keys(rng, lambda ks: ntok(tokenizer, render(n, ks)[2]), list(pool.keys[:n]), budget)
    head, hay, prompt, q = render(n, keys)
    answer = pool.values[q]
    others = [pool.values[i] for i in range(n) if i != q]
    rng.shuffle(others)
    return finish(
        "line",
        tokenizer,
        length,
        seed,
        include_target,
        prompt=prompt,
        answer=answer,
        candidates=[answer] + others[: N_CANDIDATES - 1],
        head=head,
        needle=LINE_FORMAT.format(key=keys[q], value=answer),
        hay=hay,
        requested_depth=want,
        extra={"n_lines": n, "key": keys[q], "line_index": q},
    )


def _nearest_line(lines: list[str], want: float) -> int:
    """The line whose depth (in characters) is closest to the requested one."""
    total, before, best, q = sum(map(len, lines)), 0, math.inf, 0
    for i, ln in enumerate(lines):
        gap = abs(before / max(1, total - len(ln)) - want)
        if gap < best:
            best, q = gap, i
        before += len(ln)
    return q


def _lengthen_keys(rng, count: Callable[[list[str]], int], keys: list[str], budget: int) -> list[str]:
    """Take up the slack (less than one line) by lengthening keys one syllable at a time.

    ``count(keys)`` is the prompt's token count with these keys; a key grows at most 4 times.
    """
    n = len(keys)
    used = count(keys)
    order = list(range(n))
    rng.shuffle(order)
    grown = {i: 0 for i in order}
    tries = 0
    while used < budget and order and tries < 8 * n + 64:
        i = order[tries % len(order)]
        tries += 1
        cand = keys[i] + word(rng, 1)
        if cand in keys or grown[i] >= 4:
            order.remove(i)
            continue
        trial = keys[:i] + [cand] + keys[i + 1 :]
        t = count(trial)
        if t <= budget:
            keys, used, grown[i] = trial, t, grown[i] + 1
        else:
            order.remove(i)
    return keys

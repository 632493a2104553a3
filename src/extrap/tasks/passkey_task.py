"""The passkey task (Mohtashami & Jaggi 2023): a pass key hidden at a depth of real filler text."""

from __future__ import annotations

from typing import Any

from extrap.errors import ExtrapError
from extrap.tasks.filler import Filler, get_filler
from extrap.tasks.formats import (
    N_CANDIDATES,
    PASSKEY_NEEDLE,
    PASSKEY_QUESTION,
    check_length,
    check_request,
    cut_by_tokens,
    finish,
    first_fit,
    fit,
    ntok,
    number,
    snap,
)
from extrap.tasks.records import Example


def passkey(
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    digits: int = 5,
    include_target: bool = False,
) -> Example:
    """A ``digits``-digit pass key hidden at ``depth`` of real filler text (Mohtashami & Jaggi 2023)."""
    length, depth = check_request("passkey", length, depth)
    if not 1 <= int(digits) <= 18:
        raise ExtrapError(f"passkey: digits must be in 1..18, got {digits}")
    check_length("passkey", tokenizer, length, include_target, digits=int(digits))
    fill = get_filler(filler)
    return first_fit(
        "passkey",
        tokenizer,
        length,
        seed,
        include_target,
        lambda rng: _passkey_once(rng, tokenizer, length, seed, depth, fill, int(digits), include_target),
    )


def _passkey_once(rng, tokenizer, length, seed, depth, fill: Filler, digits, include_target):
    key = number(rng, digits)
    want = rng.random() if depth is None else depth
    offset = fill.random_offset(rng)
    others: list[str] = []
    while len(others) < N_CANDIDATES - 1:
        k = number(rng, digits)
        if k != key and k not in others:
            others.append(k)
    needle = PASSKEY_NEEDLE.format(key=key)
    budget = length - (ntok(tokenizer, f" {key}\n") if include_target else 0)

    def render(n_chars: int, exact: bool = False) -> tuple[str, str, str]:
        chunk = fill.take(offset, n_chars)
        p = cut_by_tokens(tokenizer, chunk, want) if exact else snap(chunk, want)
        before, after = chunk[:p].strip(), chunk[p:].strip()
        head = before + "\n" if before else ""
        hay = head + needle + "\n" + (after + "\n" if after else "")
        return head, hay, hay + PASSKEY_QUESTION

    guess = int(budget * fill.chars_per_token(tokenizer) * 1.25) + 8
    n = fit(lambda c: ntok(tokenizer, render(c)[2]), budget, 0, guess, limit=64 * budget + 64)
    if n is None:
        return None
    # the fit placed the needle by characters; place it by tokens (BPE density varies), then re-check the length
    for _ in range(8):
        head, hay, prompt = render(n, exact=True)
        if ntok(tokenizer, prompt) <= budget or n == 0:
            break
        n = max(0, n - max(1, n // 200))
    return finish(
        "passkey",
        tokenizer,
        length,
        seed,
        include_target,
        prompt=prompt,
        answer=key,
        candidates=[key] + others,
        head=head,
        needle=needle + "\n",
        hay=hay,
        requested_depth=want,
        extra={},
    )

"""Seeded generators of the three retrieval tasks of 004 §5.2 (passkey, line, topic).

Every generator takes a tokenizer and a target length in *tokens* and returns a
JSON-ready example::

    {"task", "seed", "length", "prompt", "answer", "target", "candidates",
     "depth", "requested_depth", "prompt_tokens", "target_tokens", "needle_token", ...}

* ``target`` is the continuation the model must produce: ``" " + answer + "\\n"``
  (the newline marks the end of the answer, so exact match also checks that the
  model stops).  Scoring and training tokenise ``prompt`` and ``target``
  separately and concatenate the ids.
* ``prompt_tokens <= length`` and ``prompt_tokens >= 0.9 * length``
  (:data:`TOLERANCE`); with ``include_target=True`` the same holds for
  ``prompt_tokens + target_tokens`` (training sequences of exactly L_tr + 1).
* ``answer`` occurs exactly once in ``prompt``; this is checked on every
  example (a failing draw is redrawn deterministically).
* ``depth`` is where the needed information (the needle: the pass-key
  sentence, the queried line, the first topic's opening turn) sits: the
  tokens of context before the needle divided by all context tokens except the
  needle's, in [0, 1].  The context is the prompt minus the final question
  (and, for line, minus the one-line instruction).  0 = the needle opens the
  context, 1 = nothing but the question follows it: the needle-in-a-haystack
  "depth percent".  ``needle_token`` is the index of the needle's first token
  in the prompt.  ``requested_depth`` is what was asked for (uniform at random when
  ``depth`` is None); the realised depth is as close as a word (passkey), a line
  (line) or the other topics' opening turns (topic, which cannot reach 1) allow.
* ``candidates`` (answer included) are for scoring by ranking: passkey, three
  random numbers of the same width; line, other values *from the prompt*;
  topic, other topics *of the same conversation*.

The same ``(task, tokenizer, length, seed, depth, filler)`` always gives the
same example.  A length below what the task needs raises :class:`ExtrapError`.

Formats (after Mohtashami & Jaggi 2023 and Li et al. 2023, shortened so that
the tasks fit the short training lengths of CPU-scale models)::

    passkey  <filler>\\nThe pass key is 48213. Remember it.\\n<filler>\\n
             What is the pass key? The pass key is                   -> " 48213\\n"
    line     Remember each line's REGISTER_CONTENT.\\n
             line kobapu: REGISTER_CONTENT is 24164\\n ...
             What is the REGISTER_CONTENT in line kobapu? It is      -> " 24164\\n"
    topic    [USER: <filler>\\nASSISTANT: <filler>\\n]   (small talk, only when depth > 0)
             USER: Let's talk about coral reefs.\\nASSISTANT: <filler>\\n[USER: ..\\nASSISTANT: ..\\n]
             USER: Let's talk about ...
             USER: What was the first topic we talked about?\\nASSISTANT: The first topic was
                                                                     -> " coral reefs\\n"

For ``topic`` the depth is that of the first topic: small talk of the requested
share of the context comes before it (``depth=0``, the layout of Li et al.,
opens the conversation with the first topic).
"""

from __future__ import annotations

import math
import numbers
import random
from typing import Any

from extrap.errors import ExtrapError
from extrap.tasks.filler import Filler, get_filler
from extrap.tasks.formats import (
    LINE_FORMAT,
    LINE_HEADER,
    LINE_QUESTION,
    MAX_TOPICS,
    N_CANDIDATES,
    PASSKEY_NEEDLE,
    PASSKEY_QUESTION,
    TASKS,
    TOPIC_INTRO,
    TOPIC_QUESTION,
    TOPICS,
    cut_by_tokens,
    finish,
    fit,
    fit_error,
    min_length,
    ntok,
    number,
    seed_of,
    snap,
    split_words,
    word,
)

_ATTEMPTS = 8


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def _check_length(task: str, tokenizer, length: int, include_target: bool, **kw) -> None:
    need = min_length(task, tokenizer, include_target=include_target, **kw)
    if length < need:
        what = "prompt + answer" if include_target else "prompt"
        raise ExtrapError(
            f"{task}: length {length} is below the minimum of {need} tokens ({what}) with the "
            f"{tokenizer.name} tokenizer; use a length >= {need}"
        )


def _check(task: str, length: Any, depth: Any) -> tuple[int, float | None]:
    if isinstance(length, bool) or not isinstance(length, numbers.Real) or length != int(length) or length < 1:
        raise ExtrapError(f"{task}: length must be a positive integer number of tokens, got {length!r}")
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, numbers.Real) or not 0 <= depth <= 1:
            raise ExtrapError(f"{task}: depth must be a number in [0, 1], got {depth!r}")
        depth = float(depth)
    return int(length), depth


# ---------------------------------------------------------------------------
# passkey
# ---------------------------------------------------------------------------
def passkey(
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    digits: int = 5,
    include_target: bool = False,
) -> dict:
    """A ``digits``-digit pass key hidden at ``depth`` of real filler text (Mohtashami & Jaggi 2023)."""
    length, depth = _check("passkey", length, depth)
    if not 1 <= int(digits) <= 18:
        raise ExtrapError(f"passkey: digits must be in 1..18, got {digits}")
    _check_length("passkey", tokenizer, length, include_target, digits=int(digits))
    fill = get_filler(filler)
    for attempt in range(_ATTEMPTS):
        rng = random.Random(seed_of("passkey", seed, attempt))
        ex = _passkey_once(rng, tokenizer, length, seed, depth, fill, int(digits), include_target)
        if ex is not None:
            return ex
    raise fit_error("passkey", tokenizer, length, include_target)


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


# ---------------------------------------------------------------------------
# line
# ---------------------------------------------------------------------------
def line(
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    digits: int = 5,
    include_target: bool = False,
) -> dict:
    """Many ``line <key>: REGISTER_CONTENT is <value>`` lines; asks for one key's value (Li et al. 2023).

    Keys are random pronounceable words (letters only), values distinct
    ``digits``-digit numbers, so every value occurs exactly once.  ``filler`` is
    accepted for a uniform signature and unused.  The line count is the largest
    that fits; the remaining few tokens are taken up by lengthening keys.
    """
    length, depth = _check("line", length, depth)
    if not 2 <= int(digits) <= 18:
        raise ExtrapError(f"line: digits must be in 2..18, got {digits}")
    _check_length("line", tokenizer, length, include_target, digits=int(digits))
    for attempt in range(_ATTEMPTS):
        rng = random.Random(seed_of("line", seed, attempt))
        ex = _line_once(rng, tokenizer, length, seed, depth, int(digits), include_target)
        if ex is not None:
            return ex
    raise fit_error("line", tokenizer, length, include_target)


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

    def query(lines: list[str]) -> int:
        """The line whose depth (in characters) is closest to the requested one."""
        total, before, best, q = sum(map(len, lines)), 0, math.inf, 0
        for i, ln in enumerate(lines):
            gap = abs(before / max(1, total - len(ln)) - want)
            if gap < best:
                best, q = gap, i
            before += len(ln)
        return q

    def render(n: int, keys: list[str] | None = None) -> tuple[str, str, str, int]:
        pool.ensure(n)
        keys = keys or pool.keys[:n]
        lines = [LINE_FORMAT.format(key=keys[i], value=pool.values[i]) for i in range(n)]
        q = query(lines)
        head, hay = "".join(lines[:q]), "".join(lines)  # the one-line instruction is not part of the haystack
        return head, hay, LINE_HEADER + hay + LINE_QUESTION.format(key=keys[q]), q

    per_line = max(1, ntok(tokenizer, LINE_FORMAT.format(key="kobapu", value="1" * digits)))
    n = fit(lambda k: ntok(tokenizer, render(k)[2]), budget, 2, budget // per_line + 2, limit=budget + 2)
    if n is None:
        return None
    # take up the slack (less than one line) by lengthening keys one syllable at a time
    keys = list(pool.keys[:n])
    used = ntok(tokenizer, render(n, keys)[2])
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
        t = ntok(tokenizer, render(n, trial)[2])
        if t <= budget:
            keys, used, grown[i] = trial, t, grown[i] + 1
        else:
            order.remove(i)
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


# ---------------------------------------------------------------------------
# topic
# ---------------------------------------------------------------------------
def topic(
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    n_topics: int | None = None,
    include_target: bool = False,
) -> dict:
    """A multi-topic USER/ASSISTANT conversation over real filler text; asks for the FIRST topic (Li et al. 2023).

    ``n_topics``: number of topics (default: random in 2..min(25, what fits)).
    ``depth``: share of the context taken by small talk before the first topic
    (0 = the conversation opens with it, the layout of Li et al.; None = random).
    """
    length, depth = _check("topic", length, depth)
    if n_topics is not None and not 2 <= int(n_topics) <= len(TOPICS):
        raise ExtrapError(f"topic: n_topics must be in 2..{len(TOPICS)}, got {n_topics}")
    _check_length("topic", tokenizer, length, include_target)
    fill = get_filler(filler)
    for attempt in range(_ATTEMPTS):
        rng = random.Random(seed_of("topic", seed, attempt))
        ex = _topic_once(rng, tokenizer, length, seed, depth, fill, n_topics, include_target)
        if ex is not None:
            return ex
    raise fit_error("topic", tokenizer, length, include_target)


def _topic_once(rng, tokenizer, length, seed, depth, fill: Filler, n_topics, include_target):
    want = rng.random() if depth is None else depth
    order = rng.sample(TOPICS, len(TOPICS))
    weights = [rng.uniform(0.5, 1.5) for _ in TOPICS]
    turns = [rng.choice((1, 1, 3)) for _ in TOPICS]  # one assistant turn, or assistant-user-assistant
    offset = fill.random_offset(rng)
    answer = order[0]
    budget = length - (ntok(tokenizer, f" {answer}\n") if include_target else 0)
    q_tok = ntok(tokenizer, TOPIC_QUESTION)
    if n_topics is None:
        # at least as much filler as opening turns, so that small talk can reach a useful depth
        per_block = 2 * ntok(tokenizer, TOPIC_INTRO.format(topic=answer) + "ASSISTANT: \n") + 8
        room = (budget - q_tok) // max(1, per_block)
        n_topics = rng.randint(2, max(2, min(MAX_TOPICS, room)))
    n = int(n_topics)
    intros = [TOPIC_INTRO.format(topic=t) for t in order[:n]]
    overhead = sum(len(s) + len("ASSISTANT: \n") for s in intros) + len("USER: \nASSISTANT: \n") - len(intros[0])

    def render(n_chars: int) -> tuple[str, str, str]:
        text = " ".join(fill.take(offset, n_chars).split())
        # small talk takes `want` of the context other than the first topic's opening turn
        # (at most 90% of the filler, so that the topics keep some text)
        p = snap(text, min(0.9, want * (overhead + len(text)) / max(1, len(text)))) if text else 0
        small, rest = text[:p].strip(), text[p:].strip()
        head = ""
        if small:
            a, b = split_words(small, [1, 1]) if " " in small else (small, "")
            head = f"USER: {a}\n" + (f"ASSISTANT: {b}\n" if b else "")
        pieces = split_words(rest, weights[:n]) if rest else [""] * n
        blocks = []
        for j in range(n):
            body = pieces[j]
            if turns[j] == 3 and len(body) >= 60:
                x, y, z = split_words(body, [2, 1, 2])
                blocks.append(f"{intros[j]}ASSISTANT: {x}\nUSER: {y}\nASSISTANT: {z}\n")
            else:
                blocks.append(f"{intros[j]}ASSISTANT: {body}".rstrip() + "\n")
        hay = head + "".join(blocks)
        return head, hay, hay + TOPIC_QUESTION

    guess = int(budget * fill.chars_per_token(tokenizer) * 1.25) + 8
    c = fit(lambda k: ntok(tokenizer, render(k)[2]), budget, 0, guess, limit=64 * budget + 64)
    if c is None:
        return None
    head, hay, prompt = render(c)
    low = prompt.lower()
    if any(low.count(t) != 1 for t in order[:n]):  # a topic name also in the filler: redraw
        return None
    others = list(order[1:n])
    rng.shuffle(others)
    return finish(
        "topic",
        tokenizer,
        length,
        seed,
        include_target,
        prompt=prompt,
        answer=answer,
        candidates=[answer] + others[: N_CANDIDATES - 1],
        head=head,
        needle=intros[0],
        hay=hay,
        requested_depth=want,
        extra={"n_topics": n, "topics": list(order[:n])},
    )


# ---------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------
GENERATORS = {"passkey": passkey, "line": line, "topic": topic}


def check_task(task: str) -> str:
    if task not in GENERATORS:
        raise ExtrapError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    return task


def make_example(
    task: str,
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    include_target: bool = False,
    **kw,
) -> dict:
    """One example of ``task`` (see the module docstring); ``depth=None`` draws it at random."""
    return GENERATORS[check_task(task)](
        tokenizer, length, seed, depth=depth, filler=filler, include_target=include_target, **kw
    )


def needs_filler(task: str) -> bool:
    return check_task(task) != "line"

"""The topic task (Li et al. 2023): a multi-topic USER/ASSISTANT conversation; asks for the first topic."""

from __future__ import annotations

from typing import Any

from extrap.errors import ExtrapError
from extrap.tasks.filler import Filler, get_filler
from extrap.tasks.formats import (
    MAX_TOPICS,
    N_CANDIDATES,
    TOPIC_INTRO,
    TOPIC_QUESTION,
    TOPICS,
    check_length,
    check_request,
    finish,
    first_fit,
    fit,
    ntok,
    snap,
    split_words,
)
from extrap.tasks.records import Example


def topic(
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    n_topics: int | None = None,
    include_target: bool = False,
) -> Example:
    """A multi-topic USER/ASSISTANT conversation over real filler text; asks for the FIRST topic (Li et al. 2023).

    ``n_topics``: number of topics (default: random in 2..min(25, what fits)).
    ``depth``: share of the context taken by small talk before the first topic
    (0 = the conversation opens with it, the layout of Li et al.; None = random).
    """
    length, depth = check_request("topic", length, depth)
    if n_topics is not None and not 2 <= int(n_topics) <= len(TOPICS):
        raise ExtrapError(f"topic: n_topics must be in 2..{len(TOPICS)}, got {n_topics}")
    check_length("topic", tokenizer, length, include_target)
    fill = get_filler(filler)
    return first_fit(
        "topic",
        tokenizer,
        length,
        seed,
        include_target,
        lambda rng: _topic_once(rng, tokenizer, length, seed, depth, fill, n_topics, include_target),
    )


def _topic_once(rng, tokenizer, length, seed, depth, fill: Filler, n_topics, include_target):
    want = rng.random() if depth is None else depth
    order = rng.sample(TOPICS, len(TOPICS))
    weights = [rng.uniform(0.5, 1.5) for _ in TOPICS]
    turns = [rng.choice((1, 1, 3)) for _ in TOPICS]  # one assistant turn, or assistant-user-assistant
    offset = fill.random_offset(rng)
    answer = order[0]
    budget = length - (ntok(tokenizer, f" {answer}\n") if include_target else 0)
    n = int(n_topics) if n_topics is not None else _draw_n_topics(rng, tokenizer, answer, budget)
    intros = [TOPIC_INTRO.format(topic=t) for t in order[:n]]
    overhead = sum(len(s) + len("ASSISTANT: \n") for s in intros) + len("USER: \nASSISTANT: \n") - len(intros[0])

    def render(n_chars: int) -> tuple[str, str, str]:
        text = " ".join(fill.take(offset, n_chars).split())
        # small talk takes `want` of the context other than the first topic's opening turn
        # (at most 90% of the filler, so that the topics keep some text)
        p = snap(text, min(0.9, want * (overhead + len(text)) / max(1, len(text)))) if text else 0
        small, rest = text[:p].strip(), text[p:].strip()
        head = _small_talk(small)
        pieces = split_words(rest, weights[:n]) if rest else [""] * n
        hay = head + "".join(_topic_blocks(intros, pieces, turns))
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
        extra={"n_topics": n, "topics": tuple(order[:n])},
    )


def _draw_n_topics(rng, tokenizer, answer: str, budget: int) -> int:
    """A random topic count in 2..MAX_TOPICS that leaves room for small talk."""
    q_tok = ntok(tokenizer, TOPIC_QUESTION)
    # at least as much filler as opening turns, so that small talk can reach a useful depth
    per_block = 2 * ntok(tokenizer, TOPIC_INTRO.format(topic=answer) + "ASSISTANT: \n") + 8
    room = (budget - q_tok) // max(1, per_block)
    return rng.randint(2, max(2, min(MAX_TOPICS, room)))


def _small_talk(small: str) -> str:
    """Small talk before the first topic: a USER turn, and an ASSISTANT reply with its second half."""
    if not small:
        return ""
    a, b = split_words(small, [1, 1]) if " " in small else (small, "")
    return f"USER: {a}\n" + (f"ASSISTANT: {b}\n" if b else "")


def _topic_blocks(intros: list[str], pieces: list[str], turns: list[int]) -> list[str]:
    """Each topic's opening turn and its filler: one ASSISTANT turn, or ASSISTANT-USER-ASSISTANT."""
    blocks = []
    for j, intro in enumerate(intros):
        body = pieces[j]
        if turns[j] == 3 and len(body) >= 60:
            x, y, z = split_words(body, [2, 1, 2])
            blocks.append(f"{intro}ASSISTANT: {x}\nUSER: {y}\nASSISTANT: {z}\n")
        else:
            blocks.append(f"{intro}ASSISTANT: {body}".rstrip() + "\n")
    return blocks

"""Haystacks and the layout shared by the RULER-style generators.

Two haystacks (RULER's ``essay`` and ``noise``):

* ``corpus``: real text from a project corpus (:class:`extrap.tasks.filler.Filler`: digit-free, sanitised),
  with every line that mentions a task's own words (magic numbers, ``VAR``, the qa names, places and objects)
  dropped, so the haystack never imitates a needle or a fact;
* ``noise``: RULER's five repeated sentences (``The grass is green. ...``), one block a line.

A generator hands :func:`weave` the pieces it hides (needles, assignments, facts), each with a fraction of the
haystack in front of it; :func:`fit_example` finds the largest haystack whose prompt fits the length and
builds a checked :class:`~extrap.tasks.ruler.records.RulerExample`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from extrap.errors import ExtrapError
from extrap.tasks.filler import Filler, get_filler
from extrap.tasks.formats import ATTEMPTS, TOLERANCE, cut_by_tokens, fit, ntok, seed_of, snap
from extrap.tasks.ruler.records import RulerExample

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
HAYSTACKS = ("corpus", "noise")
PEOPLE = ("Mary", "John", "Daniel", "Sandra")  # bAbI's qa1/qa2 cast
PLACES = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")  # BABILong's qa1/qa2 labels
OBJECTS = ("apple", "football", "milk")
_WORDS = "|".join(PEOPLE + PLACES + OBJECTS)
_FORBID = re.compile(rf"magic|\bvar\b|\b({_WORDS})\b", re.IGNORECASE)
_VOCAB = re.compile(r"\b[a-z]{3,10}\b")
_CACHE: dict[tuple[str, int], Filler] = {}
_VOCAB_CACHE: dict[tuple, tuple[str, ...]] = {}


@dataclass(frozen=True)
class Haystack:
    """Text to hide pieces in: ``kind`` "corpus" (a filtered Filler) or "noise" (RULER's sentences)."""

    kind: str
    filler: Filler | None
    name: str

    def chunk(self, rng_offset: int, n_chars: int) -> str:
        """About ``n_chars`` characters of haystack (corpus: from ``rng_offset``; noise: whole sentences)."""
        if self.kind == "noise":
            text = "\n".join([NOISE] * (n_chars // (len(NOISE) + 1) + 2))[:n_chars]
            end = max(text.rfind(". "), text.rfind(".\n"), text.rfind(".", len(text) - 1))
            return text[: end + 1] if end >= 0 else ""
        return self.filler.take(rng_offset, n_chars)

    def offset(self, rng: random.Random) -> int:
        return self.filler.random_offset(rng) if self.kind == "corpus" else 0

    def cut(self, text: str, frac: float) -> int:
        """A cut of ``text`` near ``frac`` of its characters: between words (corpus) or sentences (noise)."""
        if self.kind == "corpus":
            return snap(text, frac)
        ends = [0] + [m.end() for m in re.finditer(r"\.(?=\s|$)", text)]
        goal = frac * len(text)
        return min(ends, key=lambda p: abs(p - goal))

    def chars_per_token(self, tokenizer) -> float:
        if self.kind == "corpus":
            return self.filler.chars_per_token(tokenizer)
        return max(1.0, len(NOISE) / max(1, ntok(tokenizer, NOISE)))


def get_haystack(kind: str, filler=None, split: str = "validation") -> Haystack:
    """The ``kind`` haystack ("corpus" from ``filler``, a corpus spec or Filler; or "noise")."""
    if kind not in HAYSTACKS:
        raise ExtrapError(f"unknown haystack {kind!r}; choose from {', '.join(HAYSTACKS)}")
    if kind == "noise":
        return Haystack("noise", None, "noise")
    base = get_filler(filler, split)
    key = (base.name, id(base))
    if key not in _CACHE:
        kept = "\n".join(ln for ln in base.text.splitlines() if not _FORBID.search(ln))
        _CACHE[key] = Filler(kept, base.name, clean=True)
    return Haystack("corpus", _CACHE[key], base.name)


def vocabulary(filler=None, split: str = "validation") -> tuple[str, ...]:
    """Distinct lowercase words (3-10 letters) of the corpus, sorted: keys and word lists come from here."""
    text = get_haystack("corpus", filler, split).filler.text
    key = (len(text), hash(text[:4096]), hash(text[-4096:]))
    if key not in _VOCAB_CACHE:
        _VOCAB_CACHE[key] = tuple(sorted(set(_VOCAB.findall(text))))
    words = _VOCAB_CACHE[key]
    if len(words) < 100:
        raise ExtrapError(f"the corpus has only {len(words)} distinct words; the RULER tasks need >= 100")
    return words


def spread(rng: random.Random, depth: float, before: int, after: int) -> list[float]:
    """Fractions for pieces in order: ``before`` of them in [0, depth], one at ``depth``, ``after`` in [depth, 1]."""
    lo = sorted(rng.uniform(0, depth) for _ in range(before))
    hi = sorted(rng.uniform(depth, 1) for _ in range(after))
    return lo + [depth] + hi


def weave(hay: Haystack, text: str, pieces: list[tuple[float, str]], primary: int, exact=None) -> tuple[str, str]:
    """The context: ``text`` with each piece on its own line at its fraction; and the context before ``primary``.

    Pieces appear in the order of their fractions (ties: in the order given).  ``exact`` (a tokenizer) places
    the primary piece by tokens rather than characters (the final render; the fitting renders use characters).
    """
    order = sorted(range(len(pieces)), key=lambda i: (pieces[i][0], i))
    cuts, last = {}, 0
    for i in order:  # in order of fraction, never before the previous piece
        frac = pieces[i][0]
        if i == primary and exact is not None and text:
            c = hay.cut(text, cut_by_tokens(exact, text, frac) / len(text))
        else:
            c = hay.cut(text, frac)
        cuts[i] = last = max(last, c)
    parts, prev, head = [], 0, ""
    for i in order:
        seg = text[prev : cuts[i]].strip()
        if seg:
            parts.append(seg)
        prev = max(prev, cuts[i])
        if i == primary:
            head = "\n".join(parts) + ("\n" if parts else "")
        parts.append(pieces[i][1])
    tail = text[prev:].strip()
    return "\n".join(parts + ([tail] if tail else [])) + "\n", head


@dataclass(frozen=True)
class Draft:
    """A rendered prompt: the answers, the candidates, and (for depth) the context and what precedes the needle."""

    prompt: str
    answers: tuple[str, ...]
    candidates: tuple[str, ...]
    context: str = ""
    head: str | None = None  # context before the first needed piece (None: no depth)
    needle: str = ""
    requested_depth: float | None = None
    params: tuple = ()


def fit_example(
    task: str,
    tokenizer,
    length: int,
    seed: int,
    include_target: bool,
    draw: Callable[[random.Random], tuple[Callable[..., Draft], int, int]],
    check: Callable[[Draft], bool],
    haystack: str | None,
    metric: str,
) -> RulerExample:
    """The first of :data:`ATTEMPTS` seeded draws that fits ``length`` and passes ``check``.

    ``draw(rng)`` gives ``(render, lo, guess)``: ``render(n, exact=False)`` is the draft with ``n`` units of
    haystack (characters, words, list entries), ``lo`` the fewest units, ``guess`` a start for the bisection.
    """
    for attempt in range(ATTEMPTS):
        render, lo, guess = draw(random.Random(seed_of(task, seed, attempt)))

        def count(n: int, render=render) -> int:
            d = render(n)
            return ntok(tokenizer, d.prompt) + (ntok(tokenizer, target_of(d)) if include_target else 0)

        n = fit(count, length, lo, guess, limit=64 * length + 64)
        if n is None:
            continue
        d = render(n, exact=True)
        if count_draft(tokenizer, d, include_target) > length:  # the exact placement moved a few tokens
            d = render(max(lo, n - max(1, n // 100)), exact=True)
        ex = _finish(task, tokenizer, length, seed, include_target, d, haystack, metric)
        if ex is not None and check(d):
            return ex
    raise ExtrapError(
        f"{task}: could not fit an example into {length} tokens (tolerance {TOLERANCE:.0%}..100%) with the "
        f"{tokenizer.name} tokenizer; try a longer length"
    )


def target_of(d: Draft) -> str:
    return " " + ", ".join(d.answers) + "\n"


def count_draft(tokenizer, d: Draft, include_target: bool) -> int:
    return ntok(tokenizer, d.prompt) + (ntok(tokenizer, target_of(d)) if include_target else 0)


def _finish(task, tokenizer, length, seed, include_target, d: Draft, haystack, metric) -> RulerExample | None:
    total = count_draft(tokenizer, d, include_target)
    if total > length or total < TOLERANCE * length:
        return None
    depth = needle_token = None
    if d.head is not None:
        rest = ntok(tokenizer, d.context) - ntok(tokenizer, d.needle)
        depth = min(1.0, ntok(tokenizer, d.head) / rest) if rest > 0 else 0.0
        needle_token = ntok(tokenizer, d.prompt[: d.prompt.index(d.context) + len(d.head)])
    target = target_of(d)
    return RulerExample(
        task=task,
        seed=seed,
        length=length,
        prompt=d.prompt,
        answers=d.answers,
        answer=target[1:-1],
        target=target,
        candidates=d.candidates,
        depth=depth,
        requested_depth=d.requested_depth,
        prompt_tokens=ntok(tokenizer, d.prompt),
        target_tokens=ntok(tokenizer, target),
        needle_token=needle_token,
        tokenizer=tokenizer.name,
        haystack=haystack,
        metric=metric,
        params=d.params,
    )

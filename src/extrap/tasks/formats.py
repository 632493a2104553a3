"""The formats of the retrieval tasks and the text layout their generators share: seeds, token
counts, cuts at word boundaries, fitting a prompt into a token budget, assembling a checked
example, checking a generator's arguments, redrawing until an example fits, and the shortest
length each task needs (see :mod:`extrap.tasks.generators`)."""

from __future__ import annotations

import hashlib
import math
import numbers
import random
import weakref
from collections.abc import Callable
from typing import Any

from extrap.errors import ExtrapError
from extrap.tasks.records import Example

TASKS = ("passkey", "line", "topic")
TOLERANCE = 0.9  # an example has between TOLERANCE * length and length tokens
MAX_TOPICS = 25  # 004 Table 4 goes up to 25 topics
N_CANDIDATES = 4
ATTEMPTS = 8  # draws of an example before giving up

TOPICS = (
    "medieval castles",
    "coral reefs",
    "jazz music",
    "ancient egypt",
    "space exploration",
    "volcanoes",
    "chess openings",
    "bird migration",
    "renaissance painting",
    "desert ecology",
    "deep sea creatures",
    "mountain climbing",
    "baking bread",
    "solar power",
    "greek mythology",
    "origami",
    "beekeeping",
    "railway history",
    "quantum mechanics",
    "wine making",
    "polar bears",
    "roman aqueducts",
    "classical ballet",
    "tropical rainforests",
    "viking ships",
    "photography",
    "coffee roasting",
    "earthquakes",
    "silk road trade",
    "ancient olympics",
    "lighthouse keepers",
    "tea ceremonies",
    "glacier formation",
    "opera singing",
    "cave paintings",
    "hot air balloons",
    "pirate legends",
    "bonsai trees",
    "marathon running",
    "samurai armor",
    "honey badgers",
    "northern lights",
    "kite flying",
    "stained glass",
    "wild mushrooms",
    "clock making",
    "sand dunes",
    "paper making",
    "whale songs",
    "printing presses",
    "pottery glazes",
    "ant colonies",
    "submarine design",
    "folk dances",
    "comet tails",
    "bamboo forests",
    "steam engines",
    "sign languages",
    "moon landings",
    "river deltas",
    "salt marshes",
    "fireflies",
    "glass blowing",
    "tide pools",
)

PASSKEY_NEEDLE = "The pass key is {key}. Remember it."
PASSKEY_QUESTION = "What is the pass key? The pass key is"
LINE_HEADER = "Remember each line's REGISTER_CONTENT.\n"
LINE_FORMAT = "line {key}: REGISTER_CONTENT is {value}\n"
LINE_QUESTION = "What is the REGISTER_CONTENT in line {key}? It is"
TOPIC_INTRO = "USER: Let's talk about {topic}.\n"
TOPIC_QUESTION = "USER: What was the first topic we talked about?\nASSISTANT: The first topic was"

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def seed_of(*parts: Any) -> int:
    """A 63-bit seed from any printable parts; nearby inputs give unrelated seeds."""
    blob = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little") & ((1 << 63) - 1)


def ntok(tokenizer, text: str) -> int:
    return int(len(tokenizer.encode_array(text))) if text else 0


def fit(count: Callable[[int], int], budget: int, lo: int, hi: int, limit: int) -> int | None:
    """Largest x >= lo with count(x) <= budget, by bisection (count ~ non-decreasing); None if count(lo) > budget."""
    memo: dict[int, int] = {}

    def c(x):
        if x not in memo:
            memo[x] = count(x)
        return memo[x]

    if c(lo) > budget:
        return None
    hi = max(hi, lo + 1)
    while c(hi) <= budget:
        if hi >= limit:
            return hi
        lo, hi = hi, min(limit, hi * 2)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if c(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def snap(text: str, frac: float) -> int:
    """A cut near ``frac`` of ``text`` that falls on whitespace (never inside a word)."""
    p = round(frac * len(text))
    if p <= 0 or p >= len(text) or text[p - 1].isspace() or text[p].isspace():
        return min(max(p, 0), len(text))
    back = max(text.rfind(" ", 0, p), text.rfind("\n", 0, p))
    fwd = [i for i in (text.find(" ", p), text.find("\n", p)) if i != -1]
    options = ([back + 1] if back != -1 else [0]) + ([min(fwd)] if fwd else [len(text)])
    return min(options, key=lambda q: abs(q - p))


def cut_by_tokens(tokenizer, text: str, frac: float) -> int:
    """A word boundary of ``text`` with about ``frac`` of its tokens before it (bisection on characters)."""
    if not text or frac <= 0:
        return 0
    if frac >= 1:
        return len(text)
    goal = frac * ntok(tokenizer, text)
    lo, hi = 0, len(text)  # ntok(text[:lo]) < goal <= ntok(text[:hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ntok(tokenizer, text[:mid]) < goal:
            lo = mid
        else:
            hi = mid
    return snap(text, hi / len(text))


def split_words(text: str, fractions: list[float]) -> list[str]:
    """Cut ``text`` (one line of words) into pieces with about these shares of its characters."""
    total = sum(fractions)
    cuts, acc = [], 0.0
    for f in fractions[:-1]:
        acc += f / total
        cuts.append(snap(text, acc))
    bounds = [0] + sorted(cuts) + [len(text)]
    return [text[a:b].strip() for a, b in zip(bounds[:-1], bounds[1:])]


def word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))


def number(rng: random.Random, digits: int) -> str:
    return str(rng.randrange(10 ** (digits - 1), 10**digits))


def finish(
    task,
    tokenizer,
    length,
    seed,
    include_target,
    *,
    prompt,
    answer,
    candidates,
    head,
    needle,
    hay,
    requested_depth,
    extra,
) -> Example | None:
    """Assemble and validate an example; None when it misses the length window or repeats its answer.

    ``head`` is the context before the needle, ``needle`` the span holding the
    answer, ``hay`` the whole context (prompt minus question).
    """
    target = f" {answer}\n"
    p_tok, t_tok = ntok(tokenizer, prompt), ntok(tokenizer, target)
    total = p_tok + (t_tok if include_target else 0)
    if total > length or total < TOLERANCE * length or prompt.count(answer) != 1:
        return None
    rest = ntok(tokenizer, hay) - ntok(tokenizer, needle)
    depth = min(1.0, ntok(tokenizer, head) / rest) if rest > 0 else 0.0
    return Example(
        task=task,
        seed=seed,
        length=length,
        prompt=prompt,
        answer=answer,
        target=target,
        candidates=tuple(candidates),
        depth=depth,
        requested_depth=requested_depth,
        prompt_tokens=p_tok,
        target_tokens=t_tok,
        needle_token=ntok(tokenizer, prompt[: prompt.index(needle)]),
        tokenizer=tokenizer.name,
        **extra,
    )


def check_request(task: str, length: Any, depth: Any) -> tuple[int, float | None]:
    """A generator's ``length`` (a positive integer) and ``depth`` (None or in [0, 1]), checked."""
    if isinstance(length, bool) or not isinstance(length, numbers.Real) or length != int(length) or length < 1:
        raise ExtrapError(f"{task}: length must be a positive integer number of tokens, got {length!r}")
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, numbers.Real) or not 0 <= depth <= 1:
            raise ExtrapError(f"{task}: depth must be a number in [0, 1], got {depth!r}")
        depth = float(depth)
    return int(length), depth


def check_length(task: str, tokenizer, length: int, include_target: bool, **kw) -> None:
    """Refuse a length below :func:`min_length` up front, rather than failing every draw."""
    need = min_length(task, tokenizer, include_target=include_target, **kw)
    if length < need:
        what = "prompt + answer" if include_target else "prompt"
        raise ExtrapError(
            f"{task}: length {length} is below the minimum of {need} tokens ({what}) with the "
            f"{tokenizer.name} tokenizer; use a length >= {need}"
        )


def first_fit(
    task: str, tokenizer, length: int, seed: int, include_target: bool, draw: Callable[[random.Random], Example | None]
) -> Example:
    """The first of :data:`ATTEMPTS` seeded draws that fits; ``draw`` returns None for a miss, redrawn."""
    for attempt in range(ATTEMPTS):
        ex = draw(random.Random(seed_of(task, seed, attempt)))
        if ex is not None:
            return ex
    raise fit_error(task, tokenizer, length, include_target)


def fit_error(task: str, tokenizer, length: int, include_target: bool) -> ExtrapError:
    what = "prompt + answer" if include_target else "prompt"
    return ExtrapError(
        f"{task}: could not fit an example into {length} tokens ({what}, tolerance "
        f"{TOLERANCE:.0%}..100%) with the {tokenizer.name} tokenizer; try a longer length"
    )


_MIN_CACHE: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def min_length(task: str, tokenizer, *, include_target: bool = False, digits: int = 5) -> int:
    """The fewest tokens an example of ``task`` needs with ``tokenizer``: every length from here on works.

    The worst case over a few draws of the minimal example (passkey: no
    filler; line: two lines; topic: two topics, the longest names, no filler).
    """
    if task not in TASKS:
        raise ExtrapError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    try:
        cache = _MIN_CACHE.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: no cache
        cache = {}
    key = (task, include_target, digits)
    if key not in cache:
        cache[key] = _min_length(task, tokenizer, include_target, digits)
    return cache[key]


def _min_length(task: str, tokenizer, include_target: bool, digits: int) -> int:
    rng = random.Random(seed_of("min_length", task))
    worst = 0
    for _ in range(8):
        if task == "passkey":
            key = number(rng, digits)
            prompt, answer = PASSKEY_NEEDLE.format(key=key) + "\n" + PASSKEY_QUESTION, key
        elif task == "line":
            keys, vals = [word(rng, 3) for _ in range(2)], [number(rng, digits) for _ in range(2)]
            prompt = LINE_HEADER + "".join(LINE_FORMAT.format(key=k, value=v) for k, v in zip(keys, vals))
            prompt, answer = prompt + LINE_QUESTION.format(key=keys[1]), vals[1]
        else:
            pair = rng.sample(TOPICS, 2)
            prompt = "".join(TOPIC_INTRO.format(topic=t) + "ASSISTANT:\n" for t in pair) + TOPIC_QUESTION
            answer = pair[0]
        worst = max(worst, ntok(tokenizer, prompt) + (ntok(tokenizer, f" {answer}\n") if include_target else 0))
    if task == "topic":  # the longest topic names
        longest = sorted(TOPICS, key=lambda t: ntok(tokenizer, t))[-2:]
        prompt = "".join(TOPIC_INTRO.format(topic=t) + "ASSISTANT:\n" for t in longest) + TOPIC_QUESTION
        worst = max(worst, ntok(tokenizer, prompt) + (ntok(tokenizer, f" {longest[0]}\n") if include_target else 0))
    return int(math.ceil(worst)) + 1

"""Needle in a haystack, RULER's four kinds (Hsieh et al. 2024, §3.1; NVIDIA/RULER ``niah.py``).

Each needle is ``The special magic number for KEY is: VALUE.``: KEY two corpus words joined by a hyphen
(RULER: an adjective-noun pair), VALUE a 7-digit number.

* ``niah_single``: one needle, asked for.
* ``niah_multikey``: the needle and ``num_keys - 1`` = 3 distractor needles with other keys.
* ``niah_multivalue``: ``num_values`` = 4 needles with the same key, all asked for (in the order they appear).
* ``niah_multiquery``: ``num_queries`` = 4 needles with different keys, all asked for (in the question's order).

The first needle the answer needs sits at ``depth`` of the haystack, the other needed needles after it and
the distractors anywhere.  The candidates (rank scoring) are whole answers: for one value, the distractors'
values and random 7-digit numbers; for several, the answer with one value replaced, or (multi-query) with the
values given to the wrong keys.
"""

from __future__ import annotations

import random

from extrap.tasks.formats import number
from extrap.tasks.ruler.haystack import Draft, get_haystack, spread, vocabulary, weave

NEEDLE = "The special magic number for {key} is: {value}."
DIGITS = 7
N_CANDIDATES = 4
KINDS = {  # (keys in the haystack, values per key, keys asked for): RULER's synthetic.yaml
    "niah_single": (1, 1, 1),
    "niah_multikey": (4, 1, 1),
    "niah_multivalue": (1, 4, 1),
    "niah_multiquery": (4, 1, 4),
}


def question(keys: list[str], n_values: int) -> str:
    if len(keys) == 1 and n_values == 1:
        return f"What is the special magic number for {keys[0]}? It is"
    if len(keys) == 1:
        return f"What are all the special magic numbers for {keys[0]}? They are"
    return f"What are the special magic numbers for {', '.join(keys[:-1])} and {keys[-1]}? They are"


def niah_draw(task: str, tokenizer, depth, filler, split, haystack: str):
    """The ``draw`` of :func:`extrap.tasks.ruler.haystack.fit_example` for one niah kind."""
    n_keys, n_values, n_queries = KINDS[task]
    hay = get_haystack(haystack, filler, split)
    words = vocabulary(filler, split)

    def draw(rng: random.Random):
        want = rng.random() if depth is None else depth
        keys: list[str] = []
        while len(keys) < n_keys:
            k = f"{rng.choice(words)}-{rng.choice(words)}"
            if k not in keys:
                keys.append(k)
        pool = _numbers(rng, n_keys * n_values + N_CANDIDATES)
        values = [pool[i * n_values : (i + 1) * n_values] for i in range(n_keys)]
        spare = pool[n_keys * n_values :]
        asked = rng.sample(range(n_keys), n_queries)
        needed = [(keys[i], x) for i in asked for x in values[i]]
        others = [(keys[i], values[i][0]) for i in range(n_keys) if i not in asked]
        rng.shuffle(needed)  # which needed needle comes first in the haystack
        fracs = spread(rng, want, 0, len(needed) - 1) + [rng.random() for _ in others]
        pieces = [(f, NEEDLE.format(key=k, value=v)) for f, (k, v) in zip(fracs, needed + others)]
        # several keys asked: in the question's order; one key: in the order its needles appear
        answers = [values[i][0] for i in asked] if n_queries > 1 else [v for _, v in needed]
        cands = _candidates(rng, answers, [v for _, v in others], spare, n_queries > 1)
        q = question([keys[i] for i in asked], n_values)
        offset = hay.offset(rng)

        def render(n: int, exact: bool = False) -> Draft:
            context, head = weave(hay, hay.chunk(offset, n), pieces, 0, tokenizer if exact else None)
            return Draft(
                prompt=context + q,
                answers=tuple(answers),
                candidates=cands,
                context=context,
                head=head,
                needle=pieces[0][1] + "\n",
                requested_depth=want,
            )

        return render, 0, int(64 * hay.chars_per_token(tokenizer))

    return draw


def _numbers(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        v = number(rng, DIGITS)
        if v not in out:
            out.append(v)
    return out


def _candidates(rng, answers: list[str], distractors: list[str], spare: list[str], rotate: bool) -> tuple[str, ...]:
    """The true answer first, then wrong whole answers (see the module docstring)."""
    out = [", ".join(answers)]
    if len(answers) == 1:
        out += [v for v in distractors + spare if v != answers[0]]
        return tuple(out[:N_CANDIDATES])
    if rotate:  # the values given to the wrong keys
        out += [", ".join(answers[s:] + answers[:s]) for s in range(1, len(answers))]
    for v in spare:  # one value replaced
        wrong = list(answers)
        wrong[rng.randrange(len(wrong))] = v
        out.append(", ".join(wrong))
    return tuple(dict.fromkeys(out))[:N_CANDIDATES]

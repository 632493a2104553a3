"""The RULER-style tasks by name: their settings, one example, the shortest length each needs.

``make_ruler_example(task, tokenizer, length, seed, depth=..., filler=..., haystack=..., params=...)`` gives a
:class:`~extrap.tasks.ruler.records.RulerExample`; the same arguments always give the same example.
"""

from __future__ import annotations

import difflib
import math
import numbers
import random
import re
import weakref
from collections.abc import Sequence
from typing import Any

from extrap.errors import ExtrapError
from extrap.tasks.formats import TOLERANCE, ntok
from extrap.tasks.ruler.haystack import HAYSTACKS, count_draft, fit_example, target_of
from extrap.tasks.ruler.niah import KINDS, niah_draw
from extrap.tasks.ruler.qa import qa_draw
from extrap.tasks.ruler.vt import vt_draw
from extrap.tasks.ruler.words import cwe_draw, fwe_draw, min_words

RULER_TASKS = (*KINDS, "vt", "cwe", "fwe", "qa1", "qa2")
MAX_LENGTH = 2**17  # the longest example built (a 128k-token prompt takes seconds with the bytes tokenizer)
# each task's settings and their defaults (RULER's synthetic.yaml; qa: bAbI-sized stories)
PARAMS: dict[str, dict[str, Any]] = {
    **{t: {} for t in KINDS},
    "vt": {"num_chains": 1, "num_hops": 4},
    "cwe": {"num_cw": 10, "freq_cw": None, "freq_ucw": None},
    "fwe": {"alpha": 2.0},
    "qa1": {"facts": 8},
    "qa2": {"facts": 10},
}
LIMITS = {"num_chains": (1, 16), "num_hops": (1, 32), "num_cw": (2, 100), "freq_cw": (2, 1000)}
LIMITS.update({"freq_ucw": (1, 999), "facts": (2, 200)})
HAYSTACK = {**{t: "corpus" for t in KINDS}, "vt": "noise", "qa1": "corpus", "qa2": "corpus"}  # RULER's choices
LOWER = {"vt": "num_chains or num_hops", "cwe": "num_cw or freq_cw", "fwe": "alpha", "qa1": "facts", "qa2": "facts"}
"""The settings that make each task's smallest example longer: the ones to lower when none fits the cap."""
METRIC = {t: "part" if t.startswith("qa") else "all" for t in RULER_TASKS}  # RULER: string_match_part for qa


def check_ruler_task(task: Any, known: Sequence[str] = RULER_TASKS) -> str:
    """``task`` if it is one of ``known``, else ExtrapError with the closest names."""
    if task in known:
        return task
    close = difflib.get_close_matches(str(task), list(known), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise ExtrapError(f"unknown task {task!r}{hint} (choose from {', '.join(known)})")


def has_depth(task: str) -> bool:
    return check_ruler_task(task) not in ("cwe", "fwe")


def ruler_params(task: str, given: Sequence[tuple[str, Any]] = ()) -> tuple[tuple[str, Any], ...]:
    """The task's settings as (name, value) pairs: its defaults with ``given`` (name, value) pairs, each checked."""
    return tuple(_settings(task, given).items())


def _settings(task: str, given: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(PARAMS[check_ruler_task(task)])
    for name, value in given:
        if name not in out:
            known = ", ".join(out) or "none"
            close = difflib.get_close_matches(name, list(out), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ExtrapError(f"{task}: unknown setting {name!r}{hint} (its settings: {known})")
        out[name] = _check_value(task, name, value)
    return out


def _check_value(task: str, name: str, value: Any) -> Any:
    if name == "alpha":
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not 1 < value <= 10:
            raise ExtrapError(f"{task}: alpha must be a number in (1, 10], got {value!r}")
        return float(value)
    lo, hi = LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= value <= hi:
        raise ExtrapError(f"{task}: {name} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def _check_request(task, length, depth, haystack) -> tuple[int, float | None, str | None]:
    check_ruler_task(task)
    if isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 1:
        raise ExtrapError(f"{task}: length must be a positive integer number of tokens, got {length!r}")
    if length > MAX_LENGTH:
        raise ExtrapError(f"{task}: length {length:,} is above the longest example the task builds, {MAX_LENGTH:,}")
    if depth is not None:
        if not has_depth(task):
            raise ExtrapError(f"{task} spreads its answer over the whole list: it has no depth; leave it out")
        ok = isinstance(depth, numbers.Real) and not isinstance(depth, bool) and math.isfinite(depth)
        if not ok or not 0 <= depth <= 1:
            raise ExtrapError(f"{task}: depth must be a number in [0, 1], got {depth!r}")
        depth = float(depth)
    if task in ("cwe", "fwe"):
        if haystack is not None:
            raise ExtrapError(f"{task} is a list of words with no haystack; leave the haystack out")
        return int(length), depth, None
    kind = haystack or HAYSTACK[task]
    if kind not in HAYSTACKS:
        raise ExtrapError(f"unknown haystack {kind!r}; choose from {', '.join(HAYSTACKS)}")
    return int(length), depth, kind


def _draw(task, tokenizer, length, depth, filler, split, kind, p):
    if task in KINDS:
        return niah_draw(task, tokenizer, depth, filler, split, kind)
    if task == "vt":
        return vt_draw(tokenizer, depth, filler, split, kind, p["num_chains"], p["num_hops"])
    if task == "cwe":
        return cwe_draw(tokenizer, length, filler, split, p["num_cw"], p["freq_cw"], p["freq_ucw"])
    if task == "fwe":
        return fwe_draw(tokenizer, length, p["alpha"])
    return qa_draw(task, tokenizer, depth, filler, split, kind, p["facts"])


def make_ruler_example(
    task: str,
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    split: str = "validation",
    haystack: str | None = None,
    params: Sequence[tuple[str, Any]] = (),
    include_target: bool = False,
) -> Any:
    """One example of ``task`` (a :class:`RulerExample`); ``depth=None`` draws it at random."""
    length, depth, kind = _check_request(task, length, depth, haystack)
    p = _settings(task, params)
    need = ruler_min_length(task, tokenizer, include_target=include_target, filler=filler, split=split, params=params)
    if length < need:
        raise ExtrapError(
            f"{task}: length {length} is below the minimum of {need} tokens with the {tokenizer.name} "
            f"tokenizer; use a length >= {need}"
        )
    draw = _draw(task, tokenizer, length, depth, filler, split, kind, p)
    if task == "cwe":
        _check_cwe_reach(tokenizer, length, draw, include_target)
    name = None if kind is None else ("noise" if kind == "noise" else _filler_name(filler, split))
    return fit_example(
        task, tokenizer, length, seed, include_target, draw, lambda d: _unique(task, d), name, METRIC[task]
    )


def _check_cwe_reach(tokenizer, length: int, draw, include_target: bool) -> None:
    """cwe lists every word of its vocabulary at most once per repetition: refuse a length the longest list
    cannot reach (:data:`~extrap.tasks.formats.TOLERANCE` of it), saying what reaches it instead."""
    render, lo, _ = draw(random.Random(0))  # every draw lists the same words: the same longest list
    top, bottom = (render(n) for n in (1 << 62, lo))  # render caps n at the vocabulary
    tokens = [count_draft(tokenizer, d, include_target) for d in (top, bottom)]
    if tokens[0] >= TOLERANCE * length:
        return
    p = dict(top.params)
    per = (tokens[0] - tokens[1]) / p["freq_ucw"]  # tokens one more repetition of the uncommon words adds
    raise ExtrapError(
        f"cwe: its vocabulary's longest list is {tokens[0]:,} tokens (freq_cw={p['freq_cw']}, "
        f"freq_ucw={p['freq_ucw']}), short of {TOLERANCE:.0%} of {length:,}: use a length <= "
        f"{int(tokens[0] / TOLERANCE):,}, or raise --param freq_ucw (each repetition adds about {per:,.0f} tokens)"
    )


def _unique(task: str, d) -> bool:
    """The answer's pieces occur only where the task put them (a haystack word could imitate one: redrawn)."""
    if task in KINDS:
        return all(d.prompt.count(v) == 1 for v in d.answers)
    if task == "vt":  # each name is assigned once and (but the last) read once
        seen = [len(re.findall(rf"\b{v}\b", d.prompt)) for v in d.answers]
        return seen == [2] * (len(seen) - 1) + [1]
    return True


def _filler_name(filler, split) -> str:
    from extrap.tasks.ruler.haystack import get_haystack

    return get_haystack("corpus", filler, split).name


_MIN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def ruler_min_length(
    task: str, tokenizer, *, include_target: bool = False, filler=None, split="validation", params=()
) -> int:
    """The fewest tokens an example of ``task`` needs: the worst of a few draws of its smallest example."""
    p = _settings(task, params)
    key = (task, include_target, str(getattr(filler, "name", filler)), split, tuple(sorted(p.items(), key=str)))
    try:
        cache = _MIN.setdefault(tokenizer, {})
    except TypeError:
        cache = {}
    if key not in cache:
        if task == "fwe" and min_words(p["alpha"], 8) > MAX_LENGTH:  # each coded word is at least one token
            words = min_words(p["alpha"], 8)
            _unreachable(task, p, f"at least {words:,} tokens (one per coded word: the fewest with a unique top 3)")
        kind = None if task in ("cwe", "fwe") else "noise"  # no haystack is used at the minimum
        worst = 0
        draw = _draw(task, tokenizer, 1, None, filler, split, kind, p)  # cwe: the repetitions below 4096 tokens
        for s in range(8):
            render, lo, _ = draw(random.Random(s))
            d = render(lo)
            worst = max(worst, ntok(tokenizer, d.prompt) + (ntok(tokenizer, target_of(d)) if include_target else 0))
        if worst + 1 > MAX_LENGTH:
            _unreachable(task, p, f"{worst + 1:,} tokens")
        cache[key] = worst + 1
    return cache[key]


def _unreachable(task: str, p: dict, need: str) -> None:
    settings = ", ".join(f"{k}={v}" for k, v in p.items() if v is not None)
    raise ExtrapError(
        f"{task}: its smallest example ({settings}) needs {need}, above the longest example built, "
        f"{MAX_LENGTH:,}: no length fits; lower {LOWER.get(task, 'its settings')}"
    )

"""RULER-style generators (extrap.tasks.ruler): each answer checked by independent means.

The needle is found at its depth, the variable chain followed, the words counted, the qa facts replayed:
none of these checks calls the generators' own bookkeeping.
"""

from __future__ import annotations

import json
import math
import re
import sysconfig
from collections import Counter
from pathlib import Path

import pytest

from extrap.data import ByteTokenizer, get_tokenizer, load_corpus
from extrap.errors import ExtrapError
from extrap.tasks.filler import Filler
from extrap.tasks.ruler import NOISE, RULER_TASKS, RulerExample, make_ruler_example, ruler_min_length
from extrap.tasks.ruler.haystack import OBJECTS, PEOPLE, PLACES
from extrap.tasks.ruler.words import min_words, zeta, zipf_counts

BYTES = ByteTokenizer()
CASES = [(600, 0, 0.0), (900, 1, 0.5), (1500, 2, 1.0), (1200, 3, 0.25), (2500, 4, 0.8)]


@pytest.fixture(scope="module")
def filler():
    src = Path(sysconfig.get_paths()["stdlib"])
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(src.glob("*.py"))[:40])
    return Filler(text, "tiny")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    src = Path(sysconfig.get_paths()["stdlib"])
    for p in sorted(src.glob("*.py"))[:30]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    return get_tokenizer("bpe:400", load_corpus(f"text:{folder}"))


def _make(task, L, seed, depth, filler, tok=BYTES, **kw):
    depth = None if task in ("cwe", "fwe") else depth
    need = ruler_min_length(
        task, tok, filler=filler, include_target=kw.get("include_target", False), params=kw.get("params", ())
    )
    L = max(L, need)
    return make_ruler_example(task, tok, L, seed, depth=depth, filler=filler, **kw)


def _context_lines(ex: RulerExample) -> list[str]:
    return ex.prompt.splitlines()[:-1]


# ---------------------------------------------------------------------------
# every task: length window, determinism, JSON, target
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("task", RULER_TASKS)
def test_length_window_determinism_and_json(task, filler, bpe):
    for tok in (BYTES, bpe):
        for L, seed, depth in CASES[:3]:
            ex = _make(task, L, seed, depth, filler, tok)
            assert 0.9 * ex.length <= ex.prompt_tokens <= ex.length
            assert ex.prompt_tokens == len(tok.encode(ex.prompt))
            assert ex.target == " " + ", ".join(ex.answers) + "\n" and ex.candidates[0] == ex.answer
            assert len(set(ex.candidates)) == len(ex.candidates) >= 2
    a, b = _make(task, 900, 7, 0.4, filler), _make(task, 900, 7, 0.4, filler)
    c = _make(task, 900, 8, 0.4, filler)
    assert a == b and a.prompt != c.prompt
    assert RulerExample.from_json(json.loads(json.dumps(a.to_json()))) == a
    tgt = _make(task, 900, 1, 0.4, filler, include_target=True)
    assert 0.9 * tgt.length <= tgt.prompt_tokens + tgt.target_tokens <= tgt.length


# ---------------------------------------------------------------------------
# niah: the needle found at its depth, the answer read off the needles
# ---------------------------------------------------------------------------
NEEDLE = re.compile(r"^The special magic number for (\S+) is: (\d{7})\.$")


@pytest.mark.parametrize("task", ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery"])
@pytest.mark.parametrize("L,seed,depth", CASES)
def test_niah_answer_read_off_the_needles(task, L, seed, depth, filler):
    ex = _make(task, L, seed, depth, filler)
    lines = _context_lines(ex)
    needles = [(i, *NEEDLE.match(ln).groups()) for i, ln in enumerate(lines) if NEEDLE.match(ln)]
    n_keys = len({k for _, k, _ in needles})
    assert (len(needles), n_keys) == {"niah_single": (1, 1), "niah_multikey": (4, 4)}.get(
        task, (4, 4 if "query" in task else 1)
    )
    asked = re.findall(r"[a-z]+-[a-z]+", ex.prompt.splitlines()[-1])
    truth = [v for k in asked for _, kk, v in needles if kk == k]  # the question's keys, in order, values in order
    assert list(ex.answers) == truth
    for v in ex.answers:
        assert ex.prompt.count(v) == 1 and re.findall(r"\d{7}", ex.prompt).count(v) == 1
    # the first needed needle: its first token is needle_token, its depth what was asked (to a line of haystack)
    first = min(i for i, k, v in needles if v in ex.answers)
    before = "".join(ln + "\n" for ln in lines[:first])
    assert ex.needle_token == len(BYTES.encode(before))
    context = "".join(ln + "\n" for ln in lines)
    rest = len(BYTES.encode(context)) - len(BYTES.encode(lines[first] + "\n"))
    assert ex.depth == pytest.approx(len(BYTES.encode(before)) / rest)
    assert abs(ex.depth - depth) < 0.1 + 4 * 40 / L  # the other needles take room too


def test_niah_noise_haystack_is_rulers_sentences(filler):
    ex = _make("niah_single", 800, 0, 0.5, filler, haystack="noise")
    hay = [ln for ln in _context_lines(ex) if not NEEDLE.match(ln)]
    assert set(" ".join(hay).replace(". ", ".\n").split("\n")) <= set(NOISE.replace(". ", ".\n").split("\n"))
    assert ex.haystack == "noise"


# ---------------------------------------------------------------------------
# vt: follow the chain
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("L,seed,depth", CASES)
@pytest.mark.parametrize("chains,hops", [(1, 4), (2, 1), (3, 3)])
def test_vt_answer_is_the_chain_followed(L, seed, depth, chains, hops, filler):
    ex = _make("vt", L, seed, depth, filler, params=[("num_chains", chains), ("num_hops", hops)])
    value = re.search(r"assigned the value (\d+)\?", ex.prompt).group(1)
    binds = {}
    for m in re.finditer(r"^VAR ([A-Z]{5}) = (VAR ([A-Z]{5})|\d{5})\.$", ex.prompt, re.MULTILINE):
        name, src = m.group(1), m.group(3) or m.group(2)
        assert name not in binds  # each name assigned once
        binds[name] = src
    assert len(binds) == chains * (hops + 1)

    def resolve(n):
        while n in binds:
            n = binds[n]
        return n

    bound = [n for n in binds if resolve(n) == value]  # in order of appearance
    assert list(ex.answers) == bound and len(bound) == hops + 1
    first = next(i for i, ln in enumerate(_context_lines(ex)) if ln.startswith(f"VAR {bound[0]} = {value}"))
    assert ex.needle_token == len(BYTES.encode("".join(x + "\n" for x in _context_lines(ex)[:first])))


# ---------------------------------------------------------------------------
# cwe and fwe: count the words
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("L,seed", [(1000, 0), (2000, 1), (4096, 2), (3000, 3)])
def test_cwe_answer_is_the_most_common_words(L, seed, filler):
    ex = _make("cwe", L, seed, None, filler)
    listing = ex.prompt.splitlines()[1]
    items = re.findall(r"(\d+)\. (\S+)", listing)
    assert [int(i) for i, _ in items] == list(range(1, len(items) + 1))
    counts = Counter(w for _, w in items).most_common()
    top = [w for w, _ in counts[:10]]
    assert set(ex.answers) == set(top) and counts[9][1] > counts[10][1]  # the ten are strictly more common
    first_seen = list(dict.fromkeys(w for _, w in items if w in top))
    assert list(ex.answers) == first_seen
    assert {c for _, c in counts[:10]} == ({30} if L >= 4096 else {6}) and ex.depth is None


@pytest.mark.parametrize("L,seed", [(600, 0), (1500, 1), (3000, 2)])
def test_fwe_answer_is_the_three_most_frequent_coded_words(L, seed, filler):
    ex = _make("fwe", L, seed, None, filler)
    words = ex.prompt.splitlines()[1].split()
    counts = Counter(w for w in words if w != "...").most_common()
    assert [w for w, _ in counts[:3]] == list(ex.answers)
    assert counts[0][1] > counts[1][1] > counts[2][1] > counts[3][1]
    assert Counter(words)["..."] > counts[0][1]  # rank 1 is the dots


def test_zeta_and_zipf_counts_against_closed_forms():
    assert zeta(2.0) == pytest.approx(math.pi**2 / 6, rel=1e-12)  # Basel problem
    assert zeta(4.0) == pytest.approx(math.pi**4 / 90, rel=1e-12)
    assert zeta(3.0) == pytest.approx(1.2020569031595942, rel=1e-12)  # Apéry's constant
    # count(k) = floor(N k^-2 / ζ(2)) by hand for N = 1000: 607.9, 151.9, 67.5, 37.9
    assert zipf_counts(1000, 4, 2.0) == [607, 151, 67, 37]
    n = min_words(2.0, 10)
    assert all(len(set(zipf_counts(m, 10, 2.0)[1:5])) == 4 for m in range(n, n + 500))
    assert n == math.ceil(1 / ((1 / 16 - 1 / 25) / (math.pi**2 / 6)))


# ---------------------------------------------------------------------------
# qa1 / qa2: replay the facts
# ---------------------------------------------------------------------------
MOVE = re.compile(rf"^({'|'.join(PEOPLE)}) (?:went|moved|journeyed|travelled|went back) to the ({'|'.join(PLACES)})\.$")
GET = re.compile(rf"^({'|'.join(PEOPLE)}) (?:picked up|got|grabbed|took) the ({'|'.join(OBJECTS)})\.$")
DROP = re.compile(rf"^({'|'.join(PEOPLE)}) (?:dropped|put down|discarded|left) the ({'|'.join(OBJECTS)})\.$")


def _replay(lines):
    where, holder, place = {}, {}, {}
    for ln in lines:
        if m := MOVE.match(ln):
            where[m[1]] = m[2]
            for o, h in holder.items():
                if h == m[1]:
                    place[o] = m[2]
        elif m := GET.match(ln):
            assert m[2] not in holder and m[1] in where  # a free object, taken by someone somewhere
            holder[m[2]], place[m[2]] = m[1], where[m[1]]
        elif m := DROP.match(ln):
            assert holder.pop(m[2]) == m[1]
            place[m[2]] = where[m[1]]
    return where, place


@pytest.mark.parametrize("task", ["qa1", "qa2"])
@pytest.mark.parametrize("L,seed,depth", CASES)
def test_qa_answer_is_the_facts_replayed(task, L, seed, depth, filler):
    ex = _make(task, L, seed, depth, filler)
    lines = _context_lines(ex)
    facts = [ln for ln in lines if MOVE.match(ln) or GET.match(ln) or DROP.match(ln)]
    assert len(facts) == (8 if task == "qa1" else 10)
    where, place = _replay(facts)
    subject = re.match(r"Where is (?:the )?(\w+)\?", ex.prompt.splitlines()[-1])[1]
    truth = where[subject] if task == "qa1" else place[subject]
    assert ex.answers == (truth,) and truth not in ex.candidates[1:]
    assert 0 <= ex.depth <= 1


# ---------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw,needle",
    [
        (dict(task="niah_singel"), "did you mean niah_single"),
        (dict(length=20), "below the minimum of"),
        (dict(depth=1.5), "depth must be a number in [0, 1]"),
        (dict(depth=float("nan")), "depth must be"),
        (dict(task="cwe", depth=0.5), "has no depth"),
        (dict(task="vt", params=[("num_hops", 0)]), "num_hops must be an integer in [1, 32]"),
        (dict(task="vt", params=[("num_hop", 2)]), "did you mean num_hops"),
        (dict(task="fwe", depth=None, params=[("alpha", 1.0)]), "alpha must be"),
        (dict(task="cwe", depth=None, params=[("freq_cw", 2), ("freq_ucw", 3)]), "must be larger"),
        (dict(haystack="essay"), "unknown haystack"),
        (dict(length=2**18), "longest example"),
        (dict(task="fwe", depth=None, haystack="noise"), "no haystack"),
    ],
)
def test_bad_requests_are_refused(kw, needle, filler):
    args = dict(task="niah_single", length=1000, depth=0.5) | kw
    with pytest.raises(ExtrapError, match=re.escape(needle)):
        make_ruler_example(args.pop("task"), BYTES, args.pop("length"), 0, filler=filler, **args)


# ---------------------------------------------------------------------------
# training: the task sampler takes the RULER-style tasks, the loss only on the answer
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["qa2", "vt", "fwe"])
def test_task_sampler_scores_only_the_answer(task, filler):
    from extrap.tasks import ALL_TASKS, IGNORE_INDEX, TaskSampler

    assert task in ALL_TASKS
    L = ruler_min_length(task, BYTES, filler=filler, include_target=True) + 40
    sampler = TaskSampler(task, BYTES, 2, L, seed=3, filler=filler)
    x, y = sampler.next()
    assert x.shape == y.shape == (2, L)
    for r in range(2):
        ex = sampler.example(r)
        scored = y[r][y[r] != IGNORE_INDEX].tolist()
        assert BYTES.decode(scored) == ex.target and ex.task == task
        start = ex.prompt_tokens  # x holds prompt + target (but its last token): y is x shifted by one
        assert x[r, : start + len(scored) - 1].tolist() == BYTES.encode(ex.prompt + ex.target)[:-1]
    with pytest.raises(ExtrapError, match="training length of at least"):
        TaskSampler(task, BYTES, 2, L - 60, filler=filler)

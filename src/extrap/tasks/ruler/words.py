"""Aggregation: common-words and frequent-words extraction (Hsieh et al. 2024, §3.3; NVIDIA/RULER
``common_words_extraction.py`` and ``freq_words_extraction.py``).

* ``cwe``: a numbered list ``1. word 2. word ...`` of corpus words (RULER: wonderwords' nouns, adjectives
  and verbs); ``num_cw`` = 10 common words appear ``freq_cw`` times each, every other word ``freq_ucw``
  times, shuffled.  The answer is the common words, in the order of their first appearance.  RULER's
  repetitions: 30 and 3 from 4096 tokens up, 6 and 1 below.
* ``fwe``: a coded text of random 6-letter words whose counts follow Zipf's law, count(rank k) =
  floor(N k^-α / ζ(α)) with α = 2; the most frequent "word" is ``...`` (noise), and the answer is the
  three next most frequent, most frequent first (ranks 2-4, strictly more frequent than rank 5).

Neither has a needle: the answer is spread over the whole list, so ``depth`` does not apply (None).
The candidates are the answer with one word swapped for a less frequent one.
"""

from __future__ import annotations

import math
import random
import string

from extrap.errors import ExtrapError
from extrap.tasks.ruler.haystack import Draft, vocabulary

N_CANDIDATES = 4
CWE_HEADER = "Below is a numbered list of words; some appear more often than others.\n"
FWE_HEADER = "Below is a coded text; count how often each coded word appears.\n"


def zeta(s: float) -> float:
    """Riemann ζ(s) for s > 1 by Euler-Maclaurin: Σ_{k<N} k^-s + N^(1-s)/(s-1) + N^-s/2 + s N^(-s-1)/12 - ..."""
    N = 64  # ζ(s) = Σ_{k=1}^{N-1} k^-s + ∫_N^∞ + the Bernoulli corrections B2, B4 (Abramowitz & Stegun 23.2)
    head = math.fsum(k**-s for k in range(1, N))
    return (
        head + N ** (1 - s) / (s - 1) + N**-s / 2 + s * N ** (-s - 1) / 12 - s * (s + 1) * (s + 2) * N ** (-s - 3) / 720
    )


def zipf_counts(n_words: int, vocab: int, alpha: float) -> list[int]:
    """count(k) = floor(N k^-α / ζ(α)) for ranks k = 1..vocab (RULER's fwe)."""
    z = zeta(alpha)
    return [int(n_words * k**-alpha / z) for k in range(1, vocab + 1)]


def cwe_draw(tokenizer, length: int, filler, split, num_cw: int, freq_cw: int | None, freq_ucw: int | None):
    """The ``draw`` of :func:`extrap.tasks.ruler.haystack.fit_example` for cwe; ``n`` is the uncommon words."""
    words = vocabulary(filler, split)
    f_cw, f_ucw = (30, 3) if length >= 4096 else (6, 1)  # RULER's repetitions by length
    f_cw, f_ucw = freq_cw or f_cw, freq_ucw or f_ucw
    if f_cw <= f_ucw:
        raise ExtrapError(f"cwe: freq_cw ({f_cw}) must be larger than freq_ucw ({f_ucw})")
    q = f"What are the {num_cw} most common words in the list? They are"

    def draw(rng: random.Random):
        pool = list(words)
        rng.shuffle(pool)
        common = pool[:num_cw]
        rest = pool[num_cw:]
        keys = [rng.random() for _ in range(num_cw * f_cw + len(rest) * f_ucw)]

        def render(n: int, exact: bool = False) -> Draft:
            n = min(n, len(rest))
            items = [w for w in common for _ in range(f_cw)] + [w for w in rest[:n] for _ in range(f_ucw)]
            items = [w for _, w in sorted(zip(keys, items))]
            order = list(dict.fromkeys(w for w in items if w in common))
            swaps = [", ".join(order[:j] + [rest[j]] + order[j + 1 :]) for j in range(N_CANDIDATES - 1)]
            listing = " ".join(f"{i + 1}. {w}" for i, w in enumerate(items))
            return Draft(
                prompt=CWE_HEADER + listing + "\n" + q,
                answers=tuple(order),
                candidates=(", ".join(order), *swaps),
                params=(("num_cw", num_cw), ("freq_cw", f_cw), ("freq_ucw", f_ucw)),
            )

        return render, num_cw, num_cw * 4

    return draw


def fwe_draw(tokenizer, length: int, alpha: float):
    """The ``draw`` of :func:`extrap.tasks.ruler.haystack.fit_example` for fwe; ``n`` is N, Zipf's total."""
    if not (isinstance(alpha, (int, float)) and 1 < alpha <= 10):
        raise ExtrapError(f"fwe: alpha must be a number in (1, 10] (Zipf's exponent), got {alpha!r}")
    vocab = max(8, length // 50)  # RULER: one coded word per 50 tokens
    lo = min_words(alpha, vocab)
    q = "Ignoring the dots, what are the 3 most frequent coded words? They are"

    def draw(rng: random.Random):
        coded: list[str] = []
        while len(coded) < vocab:
            w = "".join(rng.choice(string.ascii_lowercase) for _ in range(6))
            if w not in coded:
                coded.append(w)
        coded[0] = "..."  # the most frequent rank is noise
        seed = rng.getrandbits(63)

        def render(n: int, exact: bool = False) -> Draft:
            counts = zipf_counts(n, vocab, alpha)
            items = [w for w, c in zip(coded, counts) for _ in range(c)]
            random.Random(seed).shuffle(items)
            top = coded[1:4]
            swaps = [
                ", ".join(top[:j] + [coded[4 + j]] + top[j + 1 :]) for j in range(min(N_CANDIDATES - 1, vocab - 4))
            ]
            return Draft(
                prompt=FWE_HEADER + " ".join(items) + "\n" + q,
                answers=tuple(top),
                candidates=(", ".join(top), *swaps),
                params=(("alpha", alpha), ("vocab", vocab)),
            )

        return render, lo, lo * 2

    return draw


def min_words(alpha: float, vocab: int) -> int:
    """The smallest N from which every Zipf count list has rank 2 > 3 > 4 > 5 strictly (a unique answer).

    floor(N a) - floor(N b) >= 1 whenever N (a - b) >= 1, so N >= 1 / (a_k - a_(k+1)) for k = 2, 3, 4 suffices.
    """
    a = [k**-alpha / zeta(alpha) for k in range(1, 6)]
    return max(4, max(math.ceil(1 / (a[k] - a[k + 1])) for k in (1, 2, 3)))

"""Variable tracking (multi-hop tracing; Hsieh et al. 2024, §3.2; NVIDIA/RULER ``variable_tracking.py``).

Each of ``num_chains`` chains binds a 5-digit value to a fresh 5-letter name, ``VAR ABCDE = 48213.``, then
passes it on ``num_hops`` times, ``VAR FGHIJ = VAR ABCDE.``.  The question gives the first chain's value;
the answer is every name bound to it, in the chain's order.  The chains' statements keep their order; the
first chain's first statement sits at ``depth`` of the haystack and its hops after it, the other chains
anywhere.  The candidates are the other chains' names and the answer with one name replaced.  RULER's
default haystack here is ``noise``, and so is this one's.
"""

from __future__ import annotations

import random
import string

from extrap.tasks.formats import number
from extrap.tasks.ruler.haystack import Draft, get_haystack, spread, weave

N_CANDIDATES = 4


def vt_draw(tokenizer, depth, filler, split, haystack: str, num_chains: int, num_hops: int):
    """The ``draw`` of :func:`extrap.tasks.ruler.haystack.fit_example` for variable tracking."""
    hay = get_haystack(haystack, filler, split)

    def draw(rng: random.Random):
        want = rng.random() if depth is None else depth
        names: list[str] = []
        while len(names) < (num_hops + 1) * (num_chains + 1):  # one spare chain for the candidates
            v = "".join(rng.choice(string.ascii_uppercase) for _ in range(5))
            if v not in names:
                names.append(v)
        chains = [names[c * (num_hops + 1) : (c + 1) * (num_hops + 1)] for c in range(num_chains + 1)]
        values: list[str] = []
        while len(values) < num_chains:
            v = number(rng, 5)
            if v not in values:
                values.append(v)
        pieces = []
        for c in range(num_chains):
            lines = [f"VAR {chains[c][0]} = {values[c]}."]
            lines += [f"VAR {chains[c][j + 1]} = VAR {chains[c][j]}." for j in range(num_hops)]
            fracs = spread(rng, want, 0, num_hops) if c == 0 else sorted(rng.random() for _ in lines)
            pieces += list(zip(fracs, lines))
        answers = tuple(chains[0])
        cands = [", ".join(ch) for ch in chains[1:num_chains]]
        for j in range(num_hops + 1):  # one name replaced by a spare one
            wrong = list(answers)
            wrong[j] = chains[num_chains][j]
            cands.append(", ".join(wrong))
        rng.shuffle(cands)
        q = f"Which variables are assigned the value {values[0]}? They are"
        offset = hay.offset(rng)

        def render(n: int, exact: bool = False) -> Draft:
            context, head = weave(hay, hay.chunk(offset, n), pieces, 0, tokenizer if exact else None)
            return Draft(
                prompt=context + q,
                answers=answers,
                candidates=(", ".join(answers), *cands[: N_CANDIDATES - 1]),
                context=context,
                head=head,
                needle=pieces[0][1] + "\n",
                requested_depth=want,
                params=(("num_chains", num_chains), ("num_hops", num_hops)),
            )

        return render, 0, int(64 * hay.chars_per_token(tokenizer))

    return draw

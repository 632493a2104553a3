"""BABILong-style qa1 and qa2 (Kuratov et al. 2024; bAbI tasks 1 and 2, Weston et al. 2015), generated here.

Facts about four people (bAbI's Mary, John, Daniel, Sandra), six places and three objects are drawn
by simulating them, then scattered in order through the haystack:

* ``qa1`` (one supporting fact): ``Mary went to the kitchen.``; asks where a person who moved is; the answer
  is their last place.
* ``qa2`` (two supporting facts): moves plus ``John picked up the apple.`` / ``John dropped the apple.``;
  asks where an object that was picked up is: where its carrier is now, or was when dropping it.

The first fact the answer needs sits at ``depth`` of the haystack; the facts before it are spread over the
haystack before it and the facts after it over the rest.  The candidates are other places.
"""

from __future__ import annotations

import random

from extrap.tasks.ruler.haystack import OBJECTS, PEOPLE, PLACES, Draft, get_haystack, spread, weave

MOVES = ("went to", "moved to", "journeyed to", "travelled to", "went back to")
GETS = ("picked up", "got", "grabbed", "took")
DROPS = ("dropped", "put down", "discarded", "left")
N_CANDIDATES = 4


def story(rng: random.Random, task: str, n_facts: int) -> tuple[list[str], str, str, int]:
    """(facts, question subject, answer place, index of the first fact the answer needs)."""
    where: dict[str, str] = {}
    last_move: dict[str, int] = {}
    holder: dict[str, str] = {}
    picked: dict[str, int] = {}
    known: dict[str, tuple[str, list[int]]] = {}  # object -> (place, supporting fact indices)
    facts: list[str] = []
    for i in range(n_facts):
        p = rng.choice(PEOPLE)
        mine = [o for o, h in holder.items() if h == p]
        free = [o for o in OBJECTS if o not in holder]
        act = rng.random() if task == "qa2" and p in where else 0.0
        if act > 0.75 and mine:
            o = rng.choice(mine)
            del holder[o]
            known[o] = (where[p], [last_move[p], i])
            facts.append(f"{p} {rng.choice(DROPS)} the {o}.")
        elif act > 0.5 and free:
            o = rng.choice(free)
            holder[o], picked[o] = p, i
            known[o] = (where[p], [last_move[p], i])
            facts.append(f"{p} {rng.choice(GETS)} the {o}.")
        else:
            where[p] = rng.choice([x for x in PLACES if x != where.get(p)])
            last_move[p] = i
            facts.append(f"{p} {rng.choice(MOVES)} the {where[p]}.")
            for o, h in holder.items():  # what they carry goes with them
                if h == p:
                    known[o] = (where[p], [picked[o], i])
    if task == "qa1":
        who = rng.choice(sorted(where))
        return facts, who, where[who], last_move[who]
    if not known:
        return facts, "", "", -1
    obj = rng.choice(sorted(known))
    place, support = known[obj]
    return facts, obj, place, min(support)


def qa_draw(task: str, tokenizer, depth, filler, split, haystack: str, n_facts: int):
    """The ``draw`` of :func:`extrap.tasks.ruler.haystack.fit_example` for qa1 / qa2."""
    hay = get_haystack(haystack, filler, split)

    def draw(rng: random.Random):
        want = rng.random() if depth is None else depth
        facts, subject, answer, k = story(rng, task, n_facts)
        while k < 0:  # qa2 with no object picked up: draw the story again
            facts, subject, answer, k = story(rng, task, n_facts)
        fracs = spread(rng, want, k, len(facts) - k - 1)
        pieces = list(zip(fracs, facts))
        others = [x for x in PLACES if x != answer]
        rng.shuffle(others)
        q = (
            f"Where is {subject}? {subject} is in the"
            if task == "qa1"
            else f"Where is the {subject}? The {subject} is in the"
        )
        offset = hay.offset(rng)

        def render(n: int, exact: bool = False) -> Draft:
            context, head = weave(hay, hay.chunk(offset, n), pieces, k, tokenizer if exact else None)
            return Draft(
                prompt=context + q,
                answers=(answer,),
                candidates=(answer, *others[: N_CANDIDATES - 1]),
                context=context,
                head=head,
                needle=facts[k] + "\n",
                requested_depth=want,
                params=(("facts", n_facts),),
            )

        return render, 0, int(64 * hay.chars_per_token(tokenizer))

    return draw

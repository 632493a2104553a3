"""What the rope-base study measures on one model, and the two numbers it sets beside the theory.

* Last-token perplexity at every length, with |Δppl|/ppl against L_tr and its paired standard error from
  :func:`extrap.evaluate.verdict.verdict` (000 Definition 0.1 and its noise test, not a second one).
  **Measured break**: the first length whose ratio exceeds δ outside its 95% interval
  (:func:`measured_break`).
* Passkey exact match (greedy) at every length, with the needle's **distance** from the query: the
  tokens from the needle's first token to the end of the prompt, where the answer is predicted.
  Distances are binned (0, L_tr/2], (L_tr/2, L_tr], (L_tr, 2L_tr], ... (:func:`distance_edges`) and
  pooled over lengths.  **Retrieval fall-off**: the lower edge of the first bin whose accuracy is below
  ``fall_fraction`` (0.5) × the accuracy of the nearest bin that holds examples (:func:`falloff_distance`);
  None when no bin falls so low, or when the nearest bin's accuracy is 0 (nothing to fall from).
* The theory's predictions for the model (:func:`prediction`), from :func:`extrap.theory.rope.analyse_rope`,
  the code of ``extrap theory rope``.
"""

from __future__ import annotations

from extrap.errors import ExtrapError
from extrap.evaluate.verdict import verdict
from extrap.experiments.rope_base.results import DistanceBin, PasskeyLength, PplLength, RopePrediction
from extrap.results import EvalReport


def ppl_rows(report: EvalReport, train_length: int, delta: float) -> tuple[PplLength, ...]:
    """Each length of a last-token report with its ratio to L_tr and whether it exceeds δ beyond its noise.

    The report's results must still hold their per-token losses (``nll``) for the paired standard error;
    without them the verdict falls back to the two lengths' own standard errors, as it does for any report.
    """
    return length_rows(report.results, train_length, delta)


def length_rows(results, train_length: int, delta: float) -> tuple[PplLength, ...]:
    """:func:`ppl_rows` of last-token :class:`~extrap.results.LengthResult` s, however they were evaluated."""
    v = verdict(list(results), train_length, delta, independent=True)
    by_length = {c.length: c for c in v.comparisons}
    rows = []
    for r in results:
        c = by_length.get(r.length)
        noisy = c.noisy(delta) if c is not None else None
        above = None if c is None or noisy is None else (c.ratio > delta and not noisy)
        rows.append(PplLength(r.length, r.ppl, r.stderr, c.ratio if c else None, c.stderr if c else None, above))
    return tuple(rows)


def measured_break(rows: tuple[PplLength, ...]) -> int | None:
    """The first length (ascending) whose |Δppl|/ppl exceeds δ outside its 95% interval; None if none does."""
    return next((r.length for r in sorted(rows, key=lambda r: r.length) if r.above_delta), None)


def distance_edges(train_length: int, longest: int) -> list[int]:
    """Bin edges 0, L_tr/2, L_tr, 2 L_tr, ... up to the first edge >= ``longest``."""
    edges = [0, max(1, train_length // 2), train_length]
    while edges[-1] < longest:
        edges.append(edges[-1] * 2)
    return edges


def distance_bins(pairs: list[tuple[int, bool]], edges: list[int]) -> tuple[DistanceBin, ...]:
    """(distance, correct) pairs counted into the bins (edges[i], edges[i + 1]]."""
    bins = []
    for lo, hi in zip(edges, edges[1:]):
        hits = [ok for d, ok in pairs if lo < d <= hi]
        bins.append(DistanceBin(lo, hi, len(hits), sum(hits)))
    return tuple(bins)


def pooled(lengths: tuple[PasskeyLength, ...]) -> tuple[DistanceBin, ...]:
    """Every length's bins added up, bin by bin (all lengths share the edges)."""
    if not lengths:
        return ()
    first = [ln for ln in lengths if ln.bins]
    if not first:
        return ()
    out = []
    for i, b in enumerate(first[0].bins):
        n = sum(ln.bins[i].n for ln in first)
        out.append(DistanceBin(b.lo, b.hi, n, sum(ln.bins[i].correct for ln in first)))
    return tuple(out)


def falloff_distance(bins: tuple[DistanceBin, ...], fraction: float) -> int | None:
    """Lower edge of the first bin, beyond the nearest non-empty one, with accuracy < ``fraction`` × its."""
    filled = [b for b in bins if b.n]
    if not filled or not filled[0].accuracy:
        return None
    limit = fraction * filled[0].accuracy
    return next((b.lo for b in filled[1:] if b.accuracy < limit), None)


def passkey_by_distance(model, tokenizer, lengths: tuple[int, ...], n: int, edges: list[int]) -> tuple:
    """Greedy passkey exact match at each length, ``n`` examples with stratified needle depths, by distance."""
    from extrap.tasks import get_filler, score_continuations, task_examples

    fill = get_filler(None, "validation")
    out = []
    for L in lengths:
        try:
            examples = task_examples("passkey", tokenizer, L, n, seed=0, buckets=n, filler=fill)
            pairs = [(ex.prompt_ids(tokenizer), tokenizer.encode(ex.target)) for ex in examples]
            scored = score_continuations(model, pairs, batch=4)
        except (RuntimeError, MemoryError, ExtrapError) as e:  # e.g. out of memory: keep the other lengths
            out.append(PasskeyLength(L, n, 0, (), str(e).splitlines()[0][:200] or type(e).__name__))
            continue
        hits = [(ex.prompt_tokens - ex.needle_token, c.greedy) for ex, c in zip(examples, scored)]
        out.append(PasskeyLength(L, n, sum(ok for _, ok in hits), distance_bins(hits, edges)))
    return tuple(out)


def plain_rope(scheme) -> bool:
    """Plain RoPE: no interpolation, no p-RoPE, partial rotary or Resonance RoPE (xPos is not plain)."""
    o = scheme.opts
    variants = o.get("p", 1.0) == 1.0 and o.get("partial", 1.0) == 1.0 and not o.get("resonance")
    return scheme.name == "rope" and o.get("scaling") == "none" and variants


def prediction(pe: str, head_dim: int, train_length: int, longest: int) -> RopePrediction:
    """``extrap theory rope``'s numbers for ``pe`` at L_tr, analysed up to the longest measured length."""
    from extrap.theory.rope import analyse_rope, rotary

    try:
        scheme = rotary(pe)
        r = analyse_rope(scheme, head_dim, train_length, longest)
    except ExtrapError as e:
        return RopePrediction(head_dim=head_dim, error=str(e))
    d = r.rotary_dim or head_dim
    return RopePrediction(
        head_dim=head_dim,
        rotary_dim=d,
        plain=plain_rope(scheme),
        base=r.base,
        in_distribution_length=r.in_distribution_length,
        decided_by=r.decided_by,
        critical_dim=r.liu.critical_dim,
        extrapolation_bound=r.liu.extrapolation_bound,
        # Liu et al. 2024 (arXiv 2310.05209), from scratch: the break lies in [T_train, T_train·β^(2/d))
        scratch_bound=train_length * r.base ** (2 / d),
        first_negative=r.men.aggregation_first_negative,
        aggregation_cap=r.men.aggregation_cap,
    )

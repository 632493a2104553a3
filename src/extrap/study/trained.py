"""The theory of a trained bias: 000 Theorem 0.4 and Eq. 22 at the learned values, every layer and head.

000 computes the TRF "without training", from a scheme's formula; a scheme with learnable
bias parameters (KERPLE's r1, r2, T5's bucket table) ends training with other values in
every layer and head.  The study analyses both: the initial rows (:func:`initial_rows`)
and, for such schemes, the trained rows and TRF of each run (:func:`trained_theory`), so
the report can show the two side by side and rank the measured ERFs against the TRF of
the model that was measured.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from extrap.results import INITIAL, TRAINED
from extrap.theory import STUDY_TRF, analyse, receptive_field


def head_values(values: Mapping[str, torch.Tensor], head: int | None) -> dict | None:
    """{name: value} of one head where every parameter is one number per head (KERPLE's r1, r2), else None."""
    if head is None or not values:
        return None
    out = {}
    for name, v in values.items():
        v = torch.as_tensor(v).detach()
        if v.dim() != 1 or not 0 <= head < v.shape[0]:
            return None  # a table per head (T5, FIRE): too many numbers for a table cell
        out[name] = float(v[head])
    return out


def initial_rows(pe: str, num_heads: int, eps, lengths: list[int], train_length: int) -> list[dict]:
    """000 Theorem 0.4 and Eq. 22 for every head of ``pe`` at its initial parameters (JSON rows)."""
    from extrap import positional

    scheme = positional.get(pe)
    init = scheme.init_values(num_heads) if scheme.adds_bias and scheme.learned else {}
    rows = []
    for r in analyse(pe, num_heads, eps=list(eps), lengths=lengths, train_length=train_length):
        row = {**r.to_dict(), "pe": pe}  # keep the study's spelling of the spec
        if init:
            row.update(params=INITIAL, values=head_values(init, r.head))
        rows.append(row)
    return rows


def trained_theory(run, pe: str, eps, lengths: list[int], train_length: int) -> dict:
    """For a run whose bias has learned parameters: its theory rows per layer and head, and its TRF.

    Returns {"rows": [theory rows, params "trained"], "trf": n(ε) of :data:`STUDY_TRF` over every
    layer and head (None when there is none), "trf_reason"}; {} for any other scheme.
    """
    scheme = run.model.scheme
    if scheme is None or not scheme.adds_bias or not scheme.learned:
        return {}
    H = run.model.shape.n_head
    layers = [{k: v.detach().double() for k, v in vals.items()} for vals in run.model.bias_values()]
    init = scheme.init_values(H)
    rows = []
    for layer, vals in enumerate(layers):
        for r in analyse(scheme, H, vals, eps=list(eps), lengths=lengths, train_length=train_length):
            rows.append(
                {
                    **r.to_dict(),
                    "pe": pe,
                    "params": TRAINED,
                    "layer": layer,
                    "values": head_values(vals, r.head),
                    "initial_values": head_values(init, r.head),
                }
            )
    trf = receptive_field(scheme, layers, eps=STUDY_TRF.eps, reduce=STUDY_TRF.reduce, num_heads=H)
    return {"rows": rows, "trf": trf.value, "trf_reason": trf.reason}

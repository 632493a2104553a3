"""The theory of a trained bias: 000 Theorem 0.4 and Eq. 22 at the learned values, every layer and head.

000 computes the TRF "without training", from a scheme's formula; a scheme with learnable
bias parameters (KERPLE's r1, r2, T5's bucket table, FIRE's MLP) ends training with other
values in every layer and head.  The study analyses both: the initial rows
(:func:`initial_rows`) and, for such schemes, the trained rows and TRF of each run
(:func:`trained_theory`), so the report can show the two side by side and rank the measured
ERFs against the TRF of the model that was measured.

The trained values are read exactly as ``extrap theory --checkpoint RUN`` reads them: the
stored tensors of the run's latest checkpoint (:func:`extrap.run.parameters.read_checkpoint_bias`)
in float64, mapped by the scheme to the values its bias uses, and analysed by
:func:`extrap.theory.analyse_checkpoint`.  The study's rows are therefore the command's rows.
"""

from __future__ import annotations

from pathlib import Path

import torch

from extrap.results import INITIAL, TRAINED
from extrap.run.parameters import head_values, read_checkpoint_bias
from extrap.theory import STUDY_TRF, analyse, analyse_checkpoint, receptive_field


def learns_bias(scheme) -> bool:
    """Whether training changes the scheme's bias (a bias with learnable parameters)."""
    return bool(scheme.adds_bias and scheme.learned)


def initial_rows(pe: str, num_heads: int, eps, lengths: list[int], train_length: int) -> list[dict]:
    """000 Theorem 0.4 and Eq. 22 for every head of ``pe`` at its initial parameters (JSON rows).

    A scheme whose bias learns records each head's initial ``values`` (a table per head, such
    as T5's buckets, as a list), which the trained rows are shown against.
    """
    from extrap import positional

    scheme = positional.get(pe)
    init = scheme.init_values(num_heads) if learns_bias(scheme) else {}
    rows = []
    for r in analyse(pe, num_heads, eps=list(eps), lengths=lengths, train_length=train_length):
        row = {**r.to_dict(), "pe": pe}  # keep the study's spelling of the spec
        if init:
            row.update(params=INITIAL, values=head_values(init, r.head))
        rows.append(row)
    return rows


def trained_theory(run_dir: str | Path, pe: str, eps, lengths: list[int], train_length: int) -> dict:
    """For a run whose bias has learned parameters: its theory rows per layer and head, and its TRF.

    Returns {"rows": [theory rows, params "trained", with ``layer``, the head's ``values`` and its
    ``initial_values``], "trf": n(ε) of :data:`STUDY_TRF` over every layer and head (None when
    there is none), "trf_reason"}; {} for a scheme whose bias learns nothing.
    """
    from extrap import positional

    ckpt = read_checkpoint_bias(run_dir)
    scheme = positional.get(ckpt.spec)
    if not learns_bias(scheme):
        return {}
    H = ckpt.heads
    res = analyse_checkpoint(
        ckpt.layers, ckpt.spec, H, eps=list(eps), lengths=lengths, train_length=train_length or ckpt.train_length
    )
    init = scheme.init_values(H)
    layers, rows = [], []
    for index, (name, results) in enumerate(res["layers"].items()):  # blocks.0.attn, blocks.1.attn, ...
        stored = {k: torch.as_tensor(v).detach().double() for k, v in ckpt.layers[name].items()}
        values = scheme.values(stored, H)
        layers.append(values)
        for r in results:
            rows.append(
                {
                    **r.to_dict(),
                    "pe": pe,
                    "params": TRAINED,
                    "layer": index,
                    "values": head_values(values, r.head),
                    "initial_values": head_values(init, r.head),
                }
            )
    trf = receptive_field(scheme, layers, eps=STUDY_TRF.eps, reduce=STUDY_TRF.reduce, num_heads=H)
    return {"rows": rows, "trf": trf.value, "trf_reason": trf.reason}

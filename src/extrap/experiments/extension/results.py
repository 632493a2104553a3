"""The section of ``extrap study --experiment extension``: one RoPE model read with each extension method.

Frozen records, each with ``to_json`` and ``from_json`` (a missing key reads as None or empty, so a partial
file still loads).  :class:`ExtensionMethod` is one method: its last-token perplexity per length with the
ratio to its own L_tr and its noise, passkey accuracy per length (rope-base's records
:class:`~extrap.experiments.rope_base.results.PplLength` and ``PasskeyLength``), the
theory's in-distribution verdict per length and length, the measured break and the passkey fall-off.
:class:`ExtensionBlock` holds every method and the settings they were measured with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extrap.experiments.rope_base.results import PasskeyLength, PplLength, measured_from_json, measured_json
from extrap.results import ResultsBlock, StudyResults
from extrap.results.records import as_mapping


@dataclass(frozen=True)
class ExtensionMethod:
    """One method on the study's model: measurements beside the theory's prediction."""

    name: str
    kind: str  # none | scaling | extend | window
    spec: str | None  # the rope kind or the extend spec as run (defaults filled in); None: none, window
    ppl: tuple[PplLength, ...]
    passkey: tuple[PasskeyLength, ...]
    in_distribution: tuple[bool | None, ...]  # per length of the block: every distance (angle) within training
    basis: str  # distance (the extend theory's max distance <= L_tr - 1) | angles (extrap theory rope)
    predicted_length: int | None  # the longest length in distribution (None: no bound at the measured lengths)
    measured_break: int | None  # first length whose |Δppl|/ppl vs L_tr exceeds δ beyond its noise
    passkey_falloff: int | None  # first length whose accuracy < fall_fraction × the accuracy at L_tr

    def passkey_at(self, length: int) -> float | None:
        return next((p.accuracy for p in self.passkey if p.length == length), None)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "spec": self.spec,
            "ppl": [p.to_json() for p in self.ppl],
            "passkey": [p.to_json() for p in self.passkey],
            "in_distribution": list(self.in_distribution),
            "basis": self.basis,
            "predicted_length": self.predicted_length,
            "measured_break": self.measured_break,
            "passkey_falloff": self.passkey_falloff,
        }

    @classmethod
    def from_json(cls, d: Any) -> ExtensionMethod:
        d = as_mapping(d)
        return cls(
            name=d.get("name"),
            kind=d.get("kind"),
            spec=d.get("spec"),
            ppl=tuple(PplLength.from_json(p) for p in d.get("ppl") or ()),
            passkey=tuple(PasskeyLength.from_json(p) for p in d.get("passkey") or ()),
            in_distribution=tuple(d.get("in_distribution") or ()),
            basis=d.get("basis"),
            predicted_length=d.get("predicted_length"),
            measured_break=d.get("measured_break"),
            passkey_falloff=d.get("passkey_falloff"),
        )


@dataclass(frozen=True)
class ExtensionBlock:
    """Every method of the experiment, with the model and the settings its numbers were measured with."""

    pe: str | None = None  # the trained model's spec
    train_length: int | None = None
    lengths: tuple[int, ...] = ()
    delta: float | None = None  # δ of 000 Definition 0.1
    fall_fraction: float | None = None  # passkey falls off below this fraction of its accuracy at L_tr
    passkey_n: int | None = None  # passkey examples per length
    targets: int | None = None  # last-token targets per length
    methods: Mapping[str, ExtensionMethod] = field(default_factory=dict)  # {name: method}, the study's order

    def to_json(self) -> dict:
        return {"pe": self.pe, **measured_json(self), "methods": {n: m.to_json() for n, m in self.methods.items()}}

    @classmethod
    def from_json(cls, d: Any) -> ExtensionBlock:
        d = as_mapping(d)
        methods = {str(n): ExtensionMethod.from_json(m) for n, m in as_mapping(d.get("methods")).items()}
        return cls(pe=d.get("pe"), **measured_from_json(d), methods=methods)


RESULTS = ResultsBlock("extension", ExtensionBlock)


def block(results: StudyResults) -> ExtensionBlock:
    """The extension block of ``results`` (empty when the results hold none)."""
    return RESULTS.of(results) or ExtensionBlock()


__all__ = ["ExtensionBlock", "ExtensionMethod", "block"]

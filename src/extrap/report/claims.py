"""The claims checklist: each paper claim judged ✔ / ✘ / – against the study's numbers.

A claim is True only when the data reproduce it, False when they contradict it, None when
the data it needs are missing: nothing is forced.  Claims about trained models are judged
only on the models that learned (:mod:`.gate`); a claim none of whose models learned is
"not tested" (``untested``), with the losses and the unigram entropy as evidence.  Each
experiment judges its own claims (its spec's ``claims``).
"""

from __future__ import annotations

from extrap.experiments import registry
from extrap.results import Claim, StudyResults


def compute_claims(results: StudyResults) -> list[Claim]:
    """The claims checklist of the results' experiment (its spec's ``claims``)."""
    return registry.get(results.experiment).claims(results)

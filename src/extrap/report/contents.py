"""How a reader finds their way in the report: its table of contents, and the section or figure that decides
each claim (the claims checklist links there)."""

from __future__ import annotations

from extrap.report.lookup import slope_groups
from extrap.results import Claim, StudyResults, slug

# section ids of templates/extrapolation.html.j2, in page order, with their titles
EXTRAPOLATION_SECTIONS = (
    ("main-figure", "Perplexity against length"),
    ("theory", "Theory: verdicts and TRFs per PE"),
    ("runs", "Training runs"),
    ("ppl", "Perplexity tables per protocol"),
    ("shapes", "exp(RPE) heatmaps and TRF curves"),
    ("erf", "TRF vs ERF"),
    ("timing", "Inference time"),
    ("slopes", "ALiBi slopes and windowed attention"),
)
ALIGNMENT_SECTIONS = (("runs", "Training runs"), ("alignment", "Attention alignment on retrieval"))
ROPE_BASE_SECTIONS = (("runs", "Training runs"), ("rope-base", "RoPE base: theory against measurement"))
EFFECTIVE_LENGTH_SECTIONS = (("runs", "Training runs"), ("effective-length", "Effective length beside the TRF"))
EXTENSION_SECTIONS = (("runs", "Training runs"), ("extension", "Training-free extension of a RoPE model"))

# claim (compute_claims' names) -> the id of what decides it
DECIDED_BY = {
    "Convergent RPEs extrapolate": "main-figure",
    "1/n and 1/(n ln n) do not extrapolate": "main-figure",
    "Sinusoidal does not extrapolate": "main-figure",
    "TRF(Type2) < TRF(Type1)": "theory",
    "TRF and ERF trends agree": "erf",
    "Sliding-window inference is much slower than non-overlapping": "timing",
}
SLOPE_CLAIM_GROUPS = {"Shifting": "shift", "One slope": "same-h", "Windowed": "window"}  # claim's first words


def has_timing(results: StudyResults) -> bool:
    """Only the extrapolation experiment times inference (000 Table 1); the others never do."""
    return results.experiment not in ("alibi-slopes", "alignment", "effective-length")


def contents(results: StudyResults, missing: bool, slopes: bool) -> list[tuple[str, str]]:
    """(id, title) of every section the page shows, in order."""
    head = [("claims", "Claims checklist")] + ([("missing", "Missing or failed")] if missing else [])
    if results.experiment == "alignment":
        return head + list(ALIGNMENT_SECTIONS)
    if results.experiment == "rope-base":
        return head + list(ROPE_BASE_SECTIONS)
    if results.experiment == "effective-length":
        return head + list(EFFECTIVE_LENGTH_SECTIONS)
    if results.experiment == "extension":
        return head + list(EXTENSION_SECTIONS)
    body = [
        (i, t)
        for i, t in EXTRAPOLATION_SECTIONS
        if (i != "timing" or has_timing(results)) and (i != "slopes" or slopes)
    ]
    return head + body


def claim_anchor(results: StudyResults, claim: Claim, figures: dict) -> tuple[str, str] | None:
    """(id, title) of the figure or section that decides ``claim`` (None for a claim this report does not know)."""
    titles = dict(EXTRAPOLATION_SECTIONS + ALIGNMENT_SECTIONS)
    if claim.claim in DECIDED_BY:
        return DECIDED_BY[claim.claim], titles[DECIDED_BY[claim.claim]]
    group = next((g for words, g in SLOPE_CLAIM_GROUPS.items() if claim.claim.startswith(words)), None)
    if group is not None:
        if group in slope_groups(results):
            return f"slopes-{slug(group)}", f"ALiBi slopes: {group}"
        return "slopes", titles["slopes"]
    if results.experiment == "rope-base":
        return ("fig-rope_base", "rope-base figure") if "rope_base" in figures else ("rope-base", "RoPE base section")
    if results.experiment == "effective-length":
        return "effective-length", "Effective length beside the TRF"
    if results.experiment == "extension":
        return ("fig-extension", "extension figure") if "extension" in figures else ("extension", "extension section")
    if results.experiment == "alignment":
        fig, title = ("alignment_tau", "τ figure") if "τ" in claim.claim else ("alignment_accuracy", "accuracy figure")
        return (f"fig-{fig}", title) if fig in figures else ("alignment", titles["alignment"])
    return None

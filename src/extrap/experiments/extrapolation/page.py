"""The extrapolation experiments' page: the sections it shows, the section that decides each claim, what is missing."""

from __future__ import annotations

from extrap.report.lookup import slope_groups
from extrap.results import Claim, StudyResults, slug

# section ids of extrapolation.html.j2, in page order, with their titles
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

# claim (the claims' names) -> the id of what decides it
DECIDED_BY = {
    "Convergent RPEs extrapolate": "main-figure",
    "1/n and 1/(n ln n) do not extrapolate": "main-figure",
    "Sinusoidal does not extrapolate": "main-figure",
    "TRF(Type2) < TRF(Type1)": "theory",
    "TRF and ERF trends agree": "erf",
    "Sliding-window inference is much slower than non-overlapping": "timing",
}
SLOPE_CLAIM_GROUPS = {"Shifting": "shift", "One slope": "same-h", "Windowed": "window"}  # claim's first words


def toc(timed: bool):
    """The sections of a page: the timing section only where the experiment times, the slopes where shown."""

    def sections(results: StudyResults, body: dict) -> tuple[tuple[str, str], ...]:
        return tuple(
            (i, t)
            for i, t in EXTRAPOLATION_SECTIONS
            if (i != "timing" or timed) and (i != "slopes" or bool(body["slopes"]))
        )

    return sections


def anchor(results: StudyResults, claim: Claim, figures: dict) -> tuple[str, str] | None:
    """(id, title) of the figure or section that decides ``claim`` (None for a claim this page does not know)."""
    titles = dict(EXTRAPOLATION_SECTIONS)
    if claim.claim in DECIDED_BY:
        return DECIDED_BY[claim.claim], titles[DECIDED_BY[claim.claim]]
    group = next((g for words, g in SLOPE_CLAIM_GROUPS.items() if claim.claim.startswith(words)), None)
    if group is not None:
        if group in slope_groups(results):
            return f"slopes-{slug(group)}", f"ALiBi slopes: {group}"
        return "slopes", titles["slopes"]
    return None


def missing(timed: bool, slopes: bool):
    """What an extrapolation study's results lack, one line each (``slopes``: the slope variants are expected)."""

    def lines(results: StudyResults) -> list[str]:
        out = []
        for section, what in (
            (results.theory, "theory verdicts"),
            (results.runs, "training runs"),
            (results.eval, "evaluation"),
            (results.erf, "receptive fields"),
            (results.spearman, "TRF/ERF correlation"),
            (results.timing if timed else True, "timing"),  # the slope experiment never times
        ):
            if not section:
                out.append(f"no {what} section")
        for section, what in (
            (results.runs, "no training run"),
            (results.eval, "no evaluation"),
            (results.erf, "no receptive field"),
        ):
            lack = [pe for pe in results.pes if pe not in section]
            if section and lack:
                out.append(f"{what} for {', '.join(lack)}")
        if slopes and not (results.slopes and results.slopes.variants):
            out.append("no ALiBi-slope variants")
        return out

    return lines

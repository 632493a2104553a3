"""How a reader finds their way in the report: its table of contents (each experiment adds its sections)."""

from __future__ import annotations


def contents(missing: bool, sections: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """(id, title) of every section the page shows, in order: the claims, what is missing, the experiment's."""
    head = [("claims", "Claims checklist")] + ([("missing", "Missing or failed")] if missing else [])
    return head + list(sections)


def figure_or_section(figure: str, figure_title: str, section: tuple[str, str]):
    """A page's claim anchor: the figure that decides every claim where it was drawn, else its ``section``."""

    def anchor(results, claim, figures: dict) -> tuple[str, str]:
        return (f"fig-{figure}", figure_title) if figure in figures else section

    return anchor


def missing_results(experiment: str, measured, wanted) -> list[str]:
    """What an experiment's page lacks, one line each: everything when nothing was ``measured``, else the
    items of ``wanted`` (PEs, methods) that have no result."""
    if not measured:
        return [f"no {experiment} results"]
    lack = [w for w in wanted if w not in measured]
    return [f"no {experiment} result for {', '.join(lack)}"] if lack else []

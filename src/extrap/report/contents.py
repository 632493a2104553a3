"""How a reader finds their way in the report: its table of contents (each experiment adds its sections)."""

from __future__ import annotations


def contents(missing: bool, sections: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """(id, title) of every section the page shows, in order: the claims, what is missing, the experiment's."""
    head = [("claims", "Claims checklist")] + ([("missing", "Missing or failed")] if missing else [])
    return head + list(sections)

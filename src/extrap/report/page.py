"""The self-contained HTML page, rendered from templates/*.j2 (Jinja2, autoescaped), figures by relative path."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from extrap.experiments import registry
from extrap.experiments.protocol import ExperimentSpec
from extrap.io import atomic_write_text
from extrap.report.claims import compute_claims
from extrap.report.contents import contents
from extrap.report.figures import write_figures
from extrap.report.runs import learning_text, runs_table
from extrap.report.values import fmt
from extrap.results import Claim, StudyResults
from extrap.results.blocks import own_part

STATUS = {True: ("✔", "ok"), False: ("✘", "bad"), None: ("–", "na")}
UNTESTED = ("not tested", "na")  # the claim's models did not learn (report.gate)


def status(claim: Claim) -> tuple[str, str]:
    return UNTESTED if claim.untested and claim.ok is None else STATUS[claim.ok]


@cache
def environment(folder: str):
    """Templates from the experiment's ``folder`` first, then the shell's own (``templates/``)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [jinja2.FileSystemLoader(folder), jinja2.PackageLoader("extrap.report", "templates")]
        ),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def missing_summary(results: StudyResults) -> list[str]:
    """What the results lack, one line each."""
    return registry.get(results.experiment).missing(results) + recorded_errors(results)


def recorded_errors(results: StudyResults) -> list[str]:
    """Errors the study recorded in place of a result."""
    out = [f"{pe} failed: {why}" for pe, why in results.failures.items()]
    out += [f"runs {pe}: {r.error}" for pe, r in results.runs.items() if r.error]
    out += own_part(registry.get(results.experiment).results, results, "errors")  # the experiment's own block
    for pe, reports in results.eval.items():
        out += [f"eval {pe} ({proto}): {rep.error}" for proto, rep in reports.items() if rep.error]
    return out


def header(results: StudyResults) -> list[tuple[str, str]]:
    meta = [
        ("preset", results.preset),
        ("experiment", results.experiment),
        ("PEs", ", ".join(results.pes) or None),
        ("training length", results.train_length),
        ("evaluation lengths", ", ".join(map(str, results.lengths)) or None),
        ("δ (000 Def. 0.1)", results.delta),
        ("extrap version", results.extrap_version),
        ("command", results.command),
        ("seed", results.seed),
        ("corpus", results.corpus),
        ("corpus hash", results.corpus_hash),
        ("created", results.created),
    ]
    return [(k, fmt(v)) for k, v in meta]


def render_html(results: StudyResults, figures: dict, claims: list[Claim], notes: dict | None = None) -> str:
    """The report as one HTML string (figures referenced by the relative paths in ``figures``)."""
    notes = notes or {}
    spec: ExperimentSpec = registry.get(results.experiment)
    missing = missing_summary(results) + [f"figure {k[6:]}: {v}" for k, v in notes.items() if k.startswith("error:")]
    body = spec.page.context(results, figures, notes)
    return (
        environment(str(spec.page.folder))
        .get_template("report.html.j2")
        .render(
            title=results.experiment or "study",
            meta=header(results),
            toc=contents(bool(missing), spec.page.toc(results, body)),
            missing=missing,
            failures=sorted((results.failures or {}).items()),
            claims=[(status(c), c, spec.page.anchor(results, c, figures)) for c in claims],
            timing=spec.timed,
            runs_first=spec.page.runs,
            fragment=spec.page.template,
            runs=runs_table(results),
            learning=learning_text(results, spec.gated),
            body=body,
        )
    )


def write_report(results: StudyResults, out_dir: str | os.PathLike) -> Path:
    """Write the figures and ``out_dir/report.html``; returns the report's path."""
    out_dir = Path(out_dir)
    notes: dict[str, str] = {}
    figures = write_figures(results, out_dir, notes)
    path = out_dir / "report.html"
    atomic_write_text(path, render_html(results, figures, compute_claims(results), notes))
    return path

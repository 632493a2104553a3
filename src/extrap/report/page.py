"""The self-contained HTML page, rendered from templates/*.j2 (Jinja2, autoescaped), figures by relative path."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from extrap.io import atomic_write_text
from extrap.report.alignment import alignment_context
from extrap.report.alignment import missing as alignment_missing
from extrap.report.claims import compute_claims
from extrap.report.contents import claim_anchor, contents, has_timing
from extrap.report.effective_length_page import effective_length_context, effective_length_missing
from extrap.report.extension import extension_missing
from extrap.report.extension_view import extension_context
from extrap.report.figures import write_figures
from extrap.report.rope_base_page import rope_base_context, rope_base_missing
from extrap.report.sections import extrapolation_context, learning_text, runs_table
from extrap.report.values import fmt
from extrap.results import Claim, StudyResults

STATUS = {True: ("✔", "ok"), False: ("✘", "bad"), None: ("–", "na")}
UNTESTED = ("not tested", "na")  # the claim's models did not learn (report.gate)


def status(claim: Claim) -> tuple[str, str]:
    return UNTESTED if claim.untested and claim.ok is None else STATUS[claim.ok]


@cache
def environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("extrap.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def missing_summary(results: StudyResults) -> list[str]:
    """What the results lack, one line each."""
    if results.experiment == "alignment":
        return alignment_missing(results) + recorded_errors(results)
    if results.experiment == "rope-base":
        return rope_base_missing(results) + recorded_errors(results)
    if results.experiment == "effective-length":
        return effective_length_missing(results) + recorded_errors(results)
    if results.experiment == "extension":
        return extension_missing(results) + recorded_errors(results)
    out = []
    for section, what in (
        (results.theory, "theory verdicts"),
        (results.runs, "training runs"),
        (results.eval, "evaluation"),
        (results.erf, "receptive fields"),
        (results.spearman, "TRF/ERF correlation"),
        (results.timing if has_timing(results) else True, "timing"),  # the slope experiment never times
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
    if results.experiment == "alibi-slopes" and not (results.slopes and results.slopes.variants):
        out.append("no ALiBi-slope variants")
    return out + recorded_errors(results)


def recorded_errors(results: StudyResults) -> list[str]:
    """Errors the study recorded in place of a result."""
    out = [f"{pe} failed: {why}" for pe, why in results.failures.items()]
    out += [f"runs {pe}: {r.error}" for pe, r in results.runs.items() if r.error]
    out += [f"erf {pe}: {e.error}" for pe, e in results.erf.items() if e.error]
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
    missing = missing_summary(results) + [f"figure {k[6:]}: {v}" for k, v in notes.items() if k.startswith("error:")]
    alignment = results.experiment == "alignment"  # 004 §5.2: no theory / perplexity / ERF sections
    rope = results.experiment == "rope-base"
    efflen = results.experiment == "effective-length"
    extension = results.experiment == "extension"
    if alignment:
        body = alignment_context(results, figures, notes)
    elif rope:
        body = rope_base_context(results, figures, notes)
    elif efflen:
        body = effective_length_context(results, figures, notes)
    elif extension:
        body = extension_context(results, figures, notes)
    else:
        body = extrapolation_context(results, figures, notes)
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            title=results.experiment or "study",
            meta=header(results),
            toc=contents(
                results, bool(missing), not (alignment or rope or efflen or extension) and bool(body["slopes"])
            ),
            missing=missing,
            failures=sorted((results.failures or {}).items()),
            claims=[(status(c), c, claim_anchor(results, c, figures)) for c in claims],
            timing=has_timing(results),
            alignment=alignment,
            rope=rope,
            efflen=efflen,
            extension=extension,
            runs=runs_table(results),
            learning=learning_text(results),
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

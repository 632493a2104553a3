"""Flat tables of extrap's JSON reports, written as CSV for spreadsheets.

Each ``*_table`` function turns one kind of report into a :class:`Table` with one row per
natural record: an evaluation length, a theory head and eps, an ERF run, a study's
evaluation point.  Columns are flat: a nested object becomes dotted column names
(``closed_form.prop2``, ``dilution.4096``), a list of plain values (a per-layer τ, a
confidence interval) one JSON cell, and null an empty cell; lists of objects (per-layer
breakdowns, curves) stay in the JSON only.  Provenance (``extrap_version``, and ``seed``
and ``corpus_hash`` where the report has them) leads every row, repeated, so a row copied
elsewhere still says where it came from; ``command``, where recorded, is the last column.
Numbers are written in Python's shortest round-trip form, so a cell reads back as exactly
the JSON's number.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extrap.io import finite_json, write_output
from extrap.results.blocks import own_part

if TYPE_CHECKING:
    from extrap.align.records import AlignRun
    from extrap.data.position_frequency import PositionFrequency
    from extrap.erf import ErfReport
    from extrap.results import StudyResults
    from extrap.results.blocks import ResultsBlock
    from extrap.results.evaluation import EvalReport, FileScore, Provenance
    from extrap.results.longppl import LongPPLReport
    from extrap.run.records import TrainReport
    from extrap.tasks.records import Example, TaskRun
    from extrap.theory import HeadResult
    from extrap.theory.reports import CheckpointHead

PROVENANCE = ("extrap_version", "seed", "corpus_hash")
TRAILING = ("text", "prompt", "explanation", "command")  # long text: the last columns


@dataclass(frozen=True)
class Table:
    """Rows as {column: value}; the columns are every row's keys in first-seen order."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def columns(self) -> list[str]:
        cols: dict[str, None] = {}
        for row in self.rows:
            cols.update(dict.fromkeys(row))
        for name in TRAILING:
            if name in cols:
                cols[name] = cols.pop(name)
        return list(cols)

    def to_csv(self) -> str:
        """The rows as CSV; a NaN or infinity is an empty cell, named in its row's ``error`` (as in the JSON)."""
        rows = [finite_json(row) for row in self.rows]
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        columns = Table(rows).columns
        writer.writerow(columns)
        for row in rows:
            writer.writerow([cell(row.get(c)) for c in columns])
        return buf.getvalue()


def write_csv(path: str | os.PathLike, table: Table) -> None:
    """Write ``table`` to ``path`` as CSV (UTF-8, header row): a file atomically, a pipe or a terminal directly."""
    write_output(path, table.to_csv())


def cell(value: Any) -> str:
    """One CSV cell: empty for null, true/false, shortest round-trip numbers, JSON for a list."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def flat(record: Mapping, prefix: str = "", skip: Iterable[str] = ()) -> dict[str, Any]:
    """``record`` with nested objects as dotted keys; lists of objects are left out."""
    out: dict[str, Any] = {}
    skip = set(skip)
    for key, value in record.items():
        if key in skip:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat(value, name + ".") if value else {name: None})
        elif isinstance(value, (list, tuple)) and not all(_plain(v) for v in value):
            continue  # per-layer objects, curves of pairs: the JSON's
        else:
            out[name] = value
    return out


def provenance(report: Mapping) -> dict[str, Any]:
    """The leading columns: extrap's version (this one when the report does not say), seed and corpus hash if known."""
    from extrap.version import __version__

    out = {"extrap_version": report.get("extrap_version") or __version__}
    out.update({k: report[k] for k in PROVENANCE[1:] if report.get(k) is not None})
    return out


def _pick(report: Mapping, keys: Iterable[str]) -> dict[str, Any]:
    return {k: report[k] for k in keys if k in report}


def _command(report: Mapping) -> dict[str, Any]:
    return _pick(report, ("command",))


# ---------------------------------------------------------------------------
# command reports
# ---------------------------------------------------------------------------
def record_table(report: Mapping) -> Table:
    """A report of one record (``eval --file``, ``generate``, ``train``): one row of its flat fields."""
    return Table([{**provenance(report), **flat(report, skip=(*PROVENANCE, "command")), **_command(report)}])


def eval_table(report: EvalReport) -> Table:
    """``extrap eval``: one row per evaluation length, the run and the verdict repeated on each."""
    run = {"run": report.run, "pe": report.pe, "protocol": report.protocol, "split": report.split}
    run.update(train_length=report.train_length, step=report.step)
    verdict = {"delta": report.delta, "extrapolates": report.extrapolates, "worst_ratio": report.worst_ratio}
    verdict["verdict_reason"] = report.verdict_reason
    window = flat(report.window.to_json() if report.window is not None else {}, "window.")
    head, command = _provenance(report.provenance), _command(report.provenance.to_json())
    rows = []
    for r in report.results:
        point = flat(r.to_json(), skip=("ppl_ci95",))
        ci = r.ppl_ci95 or [None, None]
        point.update({"ppl_ci95_low": ci[0], "ppl_ci95_high": ci[1]})
        rows.append({**head, **run, **point, **verdict, **window, **command})
    return Table(rows)


def longppl_table(report: LongPPLReport) -> Table:
    """``extrap eval --longppl``: :func:`eval_table`'s rows, each with its length's LongPPL as ``longppl.*`` columns
    (the value, key and scored tokens, the settings and the evaluator)."""
    lp = report.longppl
    settings = {f"longppl.{k}": v for k, v in lp.to_json().items() if k != "results"}
    rows = []
    for row in eval_table(report.report).rows:
        r = lp.result_at(row["length"])
        point = {f"longppl.{k}": v for k, v in (r.to_json() if r is not None else {}).items() if k != "length"}
        rows.append({**row, **point, **settings})
    return Table(rows)


def file_table(score: FileScore) -> Table:
    """``extrap eval --file``: one text scored as one sequence, one row (the window's bound and measurement
    as ``window.error.*`` columns)."""
    return record_table(score.to_json())


def _provenance(p: Provenance) -> dict[str, Any]:
    """:func:`provenance` of a typed record's provenance."""
    return provenance({"extrap_version": p.extrap_version, "seed": p.seed, "corpus_hash": p.corpus_hash})


THEORY_FRONT = ("checkpoint", "part", "layer", "pe", "head", "verdict", "test", "series_sum")


def theory_rows(result: Mapping) -> list[dict[str, Any]]:
    """One theory result (a scheme's head, or a checkpoint's layer and head): one row per eps."""
    front = _pick(result, THEORY_FRONT)
    rest = flat(result, skip=(*THEORY_FRONT, "trf", "explanation", "evidence"))
    trf = result.get("trf") or {None: None}  # no eps: one row all the same
    tail = _pick(result, ("explanation",))
    return [{**front, "eps": eps, "trf": n, **rest, **tail} for eps, n in trf.items()]


def theory_table(results: Iterable[HeadResult | CheckpointHead], meta: Mapping | None = None) -> Table:
    """``extrap theory`` (PEs or ``--checkpoint``): one row per scheme or layer, head and eps."""
    head = provenance(meta or {})
    return Table([{**head, **row, **_command(meta or {})} for r in results for row in theory_rows(r.to_json())])


def erf_table(report: ErfReport) -> Table:
    """``extrap erf``: one row per run, Spearman's ρ over the runs repeated on each."""
    rho = flat(report.spearman.to_json(), "spearman.")
    rows = []
    for r in (run.to_json() for run in report.runs):
        values = flat(r, skip=(*PROVENANCE, "command", "grad_curve"))
        rows.append({**provenance(r), **values, **rho, **_command(r)})
    return Table(rows)


def align_table(aligned: AlignRun) -> Table:
    """``extrap align``: one row per evaluation length (τ, closed forms, Algorithm 1, P_max and H)."""
    rep = aligned.report
    run = {"run": aligned.run, "pe": aligned.pe, "split": aligned.split, "step": aligned.step}
    run.update(train_length=rep.train_length, mode=rep.mode, per_layer=rep.per_layer, segments=rep.segments)
    ref = flat(rep.reference.to_json(), "reference.")
    return Table([{**provenance({}), **run, **flat(r.to_json()), **ref} for r in rep.lengths])


def task_table(scored: TaskRun) -> Table:
    """``extrap task score``: one row per length, the accuracy per answer-depth bucket as columns."""
    report, meta = scored.report, scored.provenance
    run = {"run": scored.run, "pe": scored.pe, "task": report.task, "method": report.method}
    run.update(train_length=scored.train_length, trained_on=scored.trained_on, step=scored.step)
    run.update(tokenizer=report.tokenizer, filler=report.filler)
    head = provenance({**meta, "seed": report.seed})
    rows = []
    for r in report.results:
        row = {**head, **run, **flat(r.to_json(), skip=("by_depth", "details"))}
        for b in r.by_depth:
            row[f"accuracy_depth_{b.lo:g}-{b.hi:g}"] = b.accuracy
        rows.append({**row, **_command(meta)})
    return Table(rows)


def corpus_table(summary: Mapping) -> Table:
    """``extrap corpus prepare``: one row per split (bytes, tokens, files)."""
    head = {**provenance({}), "corpus": summary.get("name"), "corpus_hash": summary.get("hash")}
    head.update(_pick(summary, ("split_mode", "tokenizer", "vocab_size")))
    rows = []
    for split, tokens in (summary.get("tokens") or {}).items():
        files = (summary.get("files") or {}).get(split)
        rows.append({**head, "split": split, "bytes": summary["bytes"].get(split), "tokens": tokens, "files": files})
    return Table(rows)


def generate_table(report: Mapping) -> Table:
    """``extrap generate``: one row (run, PE, seed, cache window, timing), the generated text last."""
    return record_table(report)


def train_table(report: TrainReport) -> Table:
    """``extrap train``: one row, the run's summary (steps, final loss, time, tokens, parameters)."""
    return record_table(report.to_json())


def position_frequency_table(r: PositionFrequency) -> Table:
    """``extrap corpus position-frequency``: one row per distance i of the summary, the sampler's facts first."""
    head = {
        **provenance({}),
        **{k: v for k, v in r.to_json().items() if k not in ("distances", "frequency", "relative")},
    }
    return Table([{**head, "i": i, "f": f, "relative": x} for i, f, x in zip(r.distances, r.frequency, r.relative)])


def corpus_list_table(corpora: Iterable[Mapping]) -> Table:
    """``extrap corpus list``: one row per corpus name (its description)."""
    return Table([{**provenance({}), **_pick(c, ("name", "description"))} for c in corpora])


def task_example_table(example: Example) -> Table:
    """``extrap task sample``: one row, the example's statistics first and its prompt last."""
    return record_table(example.to_json())


def pe_table(schemes: Iterable[Mapping]) -> Table:
    """``extrap pe list``: one row per scheme, its options as ``name=default`` pairs."""
    rows = []
    for s in schemes:
        options = "; ".join(f"{k}={o.get('default')}" for k, o in (s.get("options") or {}).items())
        rows.append({**provenance({}), **_pick(s, ("name", "kind", "summary", "reference")), "options": options})
    return Table(rows)


# ---------------------------------------------------------------------------
# a study's results.csv
# ---------------------------------------------------------------------------
def study_table(results: StudyResults, block: ResultsBlock | None = None) -> Table:
    """``results.csv``: one row per record of every section of ``results.json``; ``section`` says which.
    ``block``: the experiment's own block of results.json (its spec's ``results``), whose rows it lists (its
    ``first_rows`` after the runs, its ``rows`` after the evaluation)."""
    record = results.to_json()
    head = {**provenance(record), **_pick(record, ("experiment", "preset"))}
    first, own = own_part(block, results, "first_rows"), own_part(block, results, "rows")
    sections = (_runs, lambda res: first, _eval, lambda res: own, _claims, _failures)
    return Table([{**head, **row, **_command(record)} for section in sections for row in section(results)])


def _runs(res: StudyResults) -> list[dict]:
    """One row per trained run: its loss, training time and size, and whether it learned."""
    return [
        {
            "section": "run",
            "pe": pe,
            "run_dir": r.run_dir,
            "final_loss": r.final_loss,
            "train_seconds": r.seconds,
            "n_params": r.params,
            "learned": res.learned(pe),
            "error": r.error,
        }
        for pe, r in res.runs.items()
    ]


def _eval(res: StudyResults) -> list[dict]:
    rows = []
    for pe, by_protocol in res.eval.items():
        for protocol, rep in by_protocol.items():
            head = {"section": "eval", "pe": pe, "protocol": protocol}
            verdict = {"extrapolates": rep.extrapolates, "worst_ratio": rep.worst_ratio}
            points = [{"length": p.length, "ppl": p.ppl, "error": p.error or rep.error} for p in rep.results]
            rows += [{**head, **point, **verdict} for point in points or [{"error": rep.error}]]
    return rows


def _claims(res: StudyResults) -> list[dict]:
    return [{"section": "claim", **flat(c.to_json())} for c in res.claims]


def _failures(res: StudyResults) -> list[dict]:
    return [{"section": "failure", "job": job, "error": str(why)} for job, why in res.failures.items()]

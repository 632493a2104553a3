"""The README's study blocks, rendered from a study's results.json so that their numbers cannot drift.

``python -m extrap.report.readme RESULTS README.md`` rewrites the README's block of the results' experiment
(each experiment's :class:`~extrap.experiments.protocol.ReadmeBlock`: its markers and its renderer, found
through :mod:`extrap.experiments.registry`); ``--section NAME`` renders into a block that shows another
experiment's results (the survey's table of an extrapolation study).  This module holds what every block
shares: the command and models line, the claims table and the wall time (:func:`experiment_markdown`).
``--check`` only compares (exit 1 when the README differs), as tests/test_readme_render.py does on the
committed results.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from extrap.errors import ExtrapError
from extrap.experiments import registry
from extrap.io import atomic_write_text
from extrap.report.claims import compute_claims
from extrap.report.page import status
from extrap.report.values import fmt
from extrap.results import Claim, StudyResults, load_results

# the README's main study block; each experiment's own block has its markers in its package
BEGIN = "<!-- study:begin: rendered from the committed results by python -m extrap.report.readme; do not edit -->"
END = "<!-- study:end -->"
VERDICT_PROTOCOL = "last-token"


def duration(seconds: float) -> str:
    """A wall time in words: "48 s", "9 min 4 s", "2 h 5 min"."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, on one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def models_text(results: StudyResults) -> str:
    """ "4-layer, d=128, 4-head byte-level models, 600 steps × 16 × 128 tokens of stdlib source" (what is known)."""
    t = results.training
    if t is None:
        return "models and training not recorded"
    tok = "byte-level" if t.tokenizer == "bytes" else f"{t.tokenizer or 'unknown'}-tokenizer"
    shape = f"{fmt(t.n_layer)}-layer, d={fmt(t.d_model)}, {fmt(t.n_head)}-head {tok} models"
    return f"{shape}, {fmt(t.steps)} steps × {fmt(t.batch_size)} × {fmt(t.train_length)} tokens of {t.corpus} source"


def lengths_text(results: StudyResults) -> str:
    L_tr, lengths = results.train_length, [L for L in results.lengths if isinstance(L, int)]
    if not isinstance(L_tr, int) or not lengths:
        return "lengths not recorded"
    top = max(lengths)
    return f"L_tr = {L_tr}, evaluated up to {top // L_tr}× = {top}" if top % L_tr == 0 else f"up to {top}"


def timing_text(results: StudyResults) -> str:
    """The study's own record of its wall time and machine; "not recorded" for results that predate it."""
    if results.seconds is None:
        return "Wall time: not recorded (these results predate it)."
    text = f"Wall time: {duration(results.seconds)}"
    h = results.host
    if h is None:
        return text + " (machine not recorded)."
    jobs = f"{count(h.jobs, 'job')} at a time, {count(h.torch_threads, 'torch thread')} each"
    where = f", on {h.device}" if h.device else ""
    resumed = "; resumed, so only the part left to do" if h.resumed else ""
    return f"{text} on a machine with {count(h.cpu_count, 'CPU')} ({jobs}{where}{resumed})."


def count(n: int | None, noun: str) -> str:
    """ "1 job", "2 jobs", "– jobs" (not recorded)."""
    return f"{fmt(n)} {noun}{'' if n == 1 else 's'}"


def claims_text(claims: list[Claim]) -> str:
    marks = [status(c)[0] for c in claims]
    n, ok = len(marks), marks.count("✔")
    if n and ok == n:
        return "reproduces every claim it checks"
    return f"reproduces {ok} of the {n} claims it checks"


def claims_table(claims: list[Claim]) -> list[str]:
    lines = ["| claim | paper | result |", "|---|---|---|"]
    for c in claims:
        mark, ev = status(c)[0], cell(c.evidence)
        result = ev if ev.startswith(mark) else f"{mark} {ev}"  # "not tested: ..." says so itself
        lines.append(f"| {cell(c.claim)} | {cell(c.source)} | {result} |")
    return lines


def bits_table(results: StudyResults) -> list[str]:
    """Bits per token (per byte for a byte tokenizer) at every length, one row per PE, last-token protocol."""
    reps = {pe: rep for pe in results.all_pes() if (rep := (results.eval.get(pe) or {}).get(VERDICT_PROTOCOL))}
    lengths = sorted({r.length for rep in reps.values() for r in rep.results if isinstance(r.length, int)})
    if not reps or not lengths:
        return []
    unit = "byte" if results.training is not None and results.training.tokenizer == "bytes" else "token"
    scored = {r.tokens for rep in reps.values() for r in rep.results if isinstance(r.tokens, int)}
    targets = scored.pop() if len(scored) == 1 else results.settings.get("targets")  # what was scored, else asked
    how = f"{targets} fixed targets" if isinstance(targets, int) else "fixed targets"
    lines = [
        f"Bits per {unit} under the last-token protocol ({how}, each with L_ex − 1 tokens of context):",
        "",
        "| PE | " + " | ".join(map(str, lengths)) + " |",
        "|---|" + "---|" * len(lengths),
    ]
    for pe, rep in reps.items():
        name = pe + (" (did not learn)" if results.learned(pe) is False else "")
        bits = [rep.result_at(L) for L in lengths]
        row = [f"{b.bits_per_token:.3f}" if b is not None and b.bits_per_token is not None else "–" for b in bits]
        lines.append(f"| {cell(name)} | " + " | ".join(row) + " |")
    return lines


def study_markdown(results: StudyResults) -> str:
    """The README's study section (between the markers) from the results alone: the claims as this
    version judges them (as its report does), not as the study wrote them."""
    claims = compute_claims(results)
    head = (
        f"`extrap study --preset {results.preset}` ({models_text(results)}, {lengths_text(results)}) "
        f"{claims_text(claims)}:"
    )
    parts = [head, "", *claims_table(claims), "", timing_text(results)]
    bits = bits_table(results)
    if bits:
        parts += ["", *bits]
    return "\n".join(parts) + "\n"


# ----


def experiment_markdown(results: StudyResults, what: str, middle: list[str], table: list[str]) -> str:
    """An experiment's README section: its command and models (``what``: extra words), the claims as this
    version judges them, ``middle`` lines, the wall time, and the experiment's own ``table``."""
    claims = compute_claims(results)
    head = (
        f"`extrap study --experiment {results.experiment} --preset {results.preset}` ({models_text(results)}, "
        f"{lengths_text(results)}{what}) {claims_text(claims)}:"
    )
    return "\n".join([head, "", *claims_table(claims), "", *middle, timing_text(results), "", *table]) + "\n"


def replace_region(text: str, rendered: str, begin: str = BEGIN, end_mark: str = END) -> str:
    """``text`` with what lies between the markers ``begin`` and ``end_mark`` replaced by ``rendered``."""
    start, end = text.find(begin), text.find(end_mark)
    if start < 0 or end < start:
        raise ExtrapError(f"the README has no study section between {begin!r} and {end_mark!r}")
    return text[: start + len(begin)] + "\n" + rendered + text[end:]


def render(text: str, results: StudyResults, section: str | None = None) -> str:
    """``text`` with the block of the results' experiment rendered, or with ``section`` (another block that
    shows this experiment's results, e.g. ``"survey"``) rendered instead."""
    if section is not None:
        s = registry.section(section)
        if results.experiment != s.of:
            raise ExtrapError(f"the {s.name} section shows an {s.of} study, not {results.experiment!r}")
        block = s.block
    else:
        block = registry.get(results.experiment).readme
        if block is None:
            raise ExtrapError(f"experiment {results.experiment!r} has no README block")
    return replace_region(text, block.render(results), block.begin, block.end)


def __getattr__(name: str):
    """The markers and renderers this module exported before each experiment had its package."""
    return registry.readme_alias(name)


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with --check, compare) the README's study section; 1 when --check finds it differs."""
    ap = argparse.ArgumentParser(prog="python -m extrap.report.readme", description=__doc__.split("\n")[0])
    ap.add_argument("results", help="a study's results.json (or its folder)")
    ap.add_argument("readme", nargs="?", default="README.md")
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when the README differs")
    ap.add_argument(
        "--section", choices=tuple(registry.SECTIONS), help="render into this section instead of the experiment's"
    )
    args = ap.parse_args(argv)
    readme = Path(args.readme)
    try:
        old = readme.read_text(encoding="utf-8")
        new = render(old, load_results(args.results), args.section)
    except (OSError, ExtrapError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        if old == new:
            return 0
        diff = difflib.unified_diff(old.splitlines(), new.splitlines(), str(readme), "rendered", lineterm="")
        print("\n".join(diff), file=sys.stderr)
        return 1
    if new != old:
        atomic_write_text(readme, new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

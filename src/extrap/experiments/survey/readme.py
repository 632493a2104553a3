"""The survey's README block: last-token perplexity ± its standard error by length, one row per PE."""

from __future__ import annotations

import math

from extrap.report.readme import cell, lengths_text, models_text, timing_text
from extrap.results import StudyResults

BEGIN = "<!-- survey:begin: rendered from a study of other encodings by python -m extrap.report.readme -->"
END = "<!-- survey:end -->"
VERDICT_PROTOCOL = "last-token"


def ppl_table(results: StudyResults) -> list[str]:
    """Last-token perplexity ± its standard error (delta method) at every length, one row per PE."""
    reps = {pe: rep for pe in results.all_pes() if (rep := (results.eval.get(pe) or {}).get(VERDICT_PROTOCOL))}
    lengths = sorted({r.length for rep in reps.values() for r in rep.results if isinstance(r.length, int)})
    if not reps or not lengths:
        return []
    lines = ["| PE | " + " | ".join(map(str, lengths)) + " |", "|---|" + "---|" * len(lengths)]
    for pe, rep in reps.items():
        name = pe + (" (did not learn)" if results.learned(pe) is False else "")
        row = []
        for r in (rep.result_at(L) for L in lengths):
            if r is None or not r.ok:
                row.append("–")
                continue
            ppl = math.exp(r.loss)  # se(ppl) = ppl · se(loss), the delta method
            row.append(f"{ppl:.2f}" + (f" ± {ppl * r.stderr:.2f}" if r.stderr is not None else ""))
        lines.append(f"| {cell(name)} | " + " | ".join(row) + " |")
    return lines


def survey_markdown(results: StudyResults) -> str:
    """The README's table of the survey's encodings: last-token PPL by length beside the baselines."""
    head = (
        f"`extrap study --preset {results.preset} --pe {','.join(results.pes)}` ({models_text(results)}, "
        f"{lengths_text(results)}), last-token perplexity ± its standard error:"
    )
    return "\n".join([head, "", *ppl_table(results), "", timing_text(results)]) + "\n"

"""A toy experiment declared through the public protocol only (tests/test_study_toy_experiment.py copies it
into a temporary package): two jobs that each measure a number, one claim, one table, one figure, and its
own block of results.json (:class:`ToyBlock`, kept raw by StudyResults, read and written by the spec).  Report
modules are imported where used, so that its spawned workers start fast."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from extrap.experiments.protocol import About, ExperimentSpec, Page, ReadmeBlock, ResultsBlock
from extrap.results import Claim, StudyResults
from extrap.study.plan import Experiment, Job, Outcome, StudyRecord, StudyRequest

NAME = "toy"
PRESETS = {"smoke": (2, 3)}  # the numbers whose squares the two jobs measure


@dataclass(frozen=True)
class ToyJob:
    x: int
    out: str  # where the job leaves its mark, so a resumed study can see it ran


@dataclass(frozen=True)
class ToyBlock:
    """The toy's own record in results.json: the largest square measured."""

    largest: int | None = None

    def to_json(self) -> dict:
        return {"largest": self.largest}

    @classmethod
    def from_json(cls, d: dict) -> ToyBlock:
        return cls(d.get("largest"))


BLOCK = ResultsBlock("toy_block", ToyBlock)  # its block of results.json: written and read only through it


def measure(job: ToyJob) -> dict:
    """One job, in a worker process when jobs run two at a time: x², and which process computed it."""
    import os

    Path(job.out).write_text(str(job.x * job.x))
    return {"x": job.x, "square": job.x * job.x, "pid": os.getpid()}


def assemble(request: StudyRequest, outcome: Outcome) -> StudyResults:
    done = [outcome.done[k] for k in sorted(outcome.done)]
    return StudyResults(
        preset=request.preset,
        experiment=NAME,
        pes=sorted(outcome.done),
        settings={"squares": {str(d["x"]): d["square"] for d in done}, "pids": sorted({d["pid"] for d in done})},
        failures=outcome.failures,
        extra=BLOCK.entry(ToyBlock(max((d["square"] for d in done), default=None))),
    )


def plan(request: StudyRequest) -> Experiment:
    jobs = [Job(f"x{x}", ToyJob(x, str(request.out / f"x{x}.txt"))) for x in PRESETS[request.preset]]
    return Experiment(
        record=StudyRecord(request.preset, NAME, tuple(j.name for j in jobs)),
        must_match=("preset", "experiment"),
        headline=f"study {NAME}: {len(jobs)} jobs",
        worker=measure,
        jobs=jobs,
        progress=lambda out: f"{out['x']}² = {out['square']}",
        assemble=lambda outcome: assemble(request, outcome),
    )


def claims(results: StudyResults) -> list[Claim]:
    squares = results.settings.get("squares", {})
    ok = bool(squares) and all(int(x) ** 2 == v for x, v in squares.items())
    return [Claim("Squares are squares", ok, f"{len(squares)} measured", "toy Eq. 1")]


def figures(results: StudyResults, notes: dict, out_dir: Path):
    def draw():
        from extrap.plotting import new_figure

        fig = new_figure(3, 2)
        squares = results.settings["squares"]
        fig.add_subplot().plot([int(x) for x in squares], list(squares.values()), marker="o")
        return fig

    return [("toy_squares", draw)]


def context(results: StudyResults, figures: dict, notes: dict) -> dict:
    from extrap.report.view import figure_ref, table

    rows = [[x, v] for x, v in results.settings.get("squares", {}).items()]
    return {"table": table(["x", "x²"], rows), "figure": figure_ref(figures, notes, "toy_squares", "x² against x")}


def readme(results: StudyResults) -> str:
    from extrap.report.readme import experiment_markdown

    rows = [f"| {x} | {v} |" for x, v in results.settings.get("squares", {}).items()]
    return experiment_markdown(results, "", [], ["| x | x² |", "|---|---|", *rows])


SPEC = ExperimentSpec(
    name=NAME,
    citation="toy",
    presets=PRESETS,
    plan=plan,
    claims=claims,
    missing=lambda results: [] if results.settings.get("squares") else ["no squares"],
    figures=figures,
    page=Page(
        "toy.html.j2",
        Path(__file__).parent,
        context,
        lambda results, body: (("toy", "Toy squares"),),
        lambda results, claim, figures: ("toy", "Toy squares"),
        runs=False,
    ),
    readme=ReadmeBlock("<!-- toy:begin -->", "<!-- toy:end -->", readme),
    results=BLOCK,
    about=About("squares of small numbers, two jobs at a time (the toy of a test)"),
)

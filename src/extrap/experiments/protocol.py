"""What an experiment is: the one typed spec that the orchestrator, the page shell and the README renderer read.

An experiment package exports one :class:`ExperimentSpec`.  The shared skeleton calls only these fields,
so adding an experiment means one new package and one line in :mod:`extrap.experiments.registry`:

* ``plan(request)`` returns the :class:`~extrap.study.orchestrator.Experiment` the orchestrator runs: its jobs,
  its worker (the measurement of one job, ``measure(job) -> record``, module-level so spawned processes can
  import it), what ``study.json`` records and how the workers' records become a
  :class:`~extrap.results.StudyResults`;
* ``claims(results)``: the checklist; ``missing(results)``: what the results lack, one line each;
* ``figures(results, notes, out_dir)``: (name, draw) pairs, draw returning a figure or None;
* ``page``: its fragment of the HTML page (template, table-of-contents entries, context);
* ``readme``: its block of the README, between its own markers;
* ``results``: its own block of ``results.json`` (:class:`ResultsBlock`), which alone reads and writes it,
  and the block's rows of ``results.csv``;
* ``about``: what ``extrap study --help`` says of it (:class:`About`), and so the request options it honours.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extrap.results.blocks import ResultsBlock

if TYPE_CHECKING:
    from extrap.results import Claim, StudyResults
    from extrap.study.plan import Experiment, StudyRequest

Toc = tuple[tuple[str, str], ...]  # (section id, title), in page order
FigurePlan = list[tuple[str, Callable[[], Any]]]


@dataclass(frozen=True)
class Page:
    """An experiment's part of ``report.html``: ``template`` (a file in ``folder``) rendered with ``body``.

    ``context(results, figures, notes)`` builds ``body``; ``toc(results, body)`` lists the sections it shows
    (after the claims); ``anchor(results, claim, figures)`` is the (id, title) that decides a claim.
    ``runs``: the shell shows the training-runs table before the fragment."""

    template: str
    folder: Path
    context: Callable[[StudyResults, dict, dict], dict]
    toc: Callable[[StudyResults, dict], Toc]
    anchor: Callable[[StudyResults, Claim, dict], tuple[str, str] | None]
    runs: bool = True


@dataclass(frozen=True)
class ReadmeBlock:
    """The README's block of an experiment's results: ``render(results)`` goes between ``begin`` and ``end``."""

    begin: str
    end: str
    render: Callable[[StudyResults], str]


@dataclass(frozen=True)
class Choice:
    """What one option of ``extrap study`` takes in an experiment: ``accepts`` (its values; "": any the option
    takes) and its ``default``."""

    accepts: str
    default: str


@dataclass(frozen=True)
class About:
    """What ``extrap study --help`` says of an experiment: a one-line ``summary`` and, per option it honours
    (``pe``, ``tasks``, ``methods``, ``delta``), what it accepts and its default (None: as the option's help
    says).  A package declares it in its ``about`` module, which imports nothing heavy: the CLI reads it
    without loading the experiment."""

    summary: str
    choices: Mapping[str, Choice | None] = field(default_factory=dict)

    @property
    def options(self) -> frozenset[str]:
        """The request options it honours besides ``pe`` (which every plan reads, or refuses)."""
        return frozenset(self.choices) - {"pe"}


@dataclass(frozen=True)
class ExperimentSpec:
    """One experiment, as the shared skeleton sees it (see the module's docstring)."""

    name: str  # --experiment NAME; results.json's "experiment"
    citation: str  # what it reproduces, e.g. "000 Figs. 3-6"
    presets: Mapping[str, object]  # preset name -> its settings record
    plan: Callable[[StudyRequest], Experiment]
    claims: Callable[[StudyResults], list[Claim]]
    missing: Callable[[StudyResults], list[str]]
    figures: Callable[[StudyResults, dict, Path], FigurePlan]
    page: Page
    readme: ReadmeBlock | None = None
    results: ResultsBlock | None = None  # None: it fills only the shared sections of results.json
    options: frozenset[str] = field(default_factory=frozenset)  # request options it honours: tasks, methods, delta
    timed: bool = False  # it times inference (000 Table 1): the page has a timing section
    gated: bool = True  # it records the learning gate (results without one predate it)
    about: About | None = None  # its lines of `extrap study --help` (None: its citation stands for its summary)

    def __post_init__(self) -> None:
        if self.about is not None and self.about.options != self.options:  # the help would list other options
            raise TypeError(f"experiment {self.name}: options {sorted(self.options)} but its About's are "
                            f"{sorted(self.about.options)}")  # fmt: skip


@dataclass(frozen=True)
class ReadmeSection:
    """A README block that shows another experiment's results (``python -m extrap.report.readme --section``)."""

    name: str
    of: str  # the experiment whose results it shows
    block: ReadmeBlock


__all__ = [
    "About",
    "Choice",
    "ExperimentSpec",
    "FigurePlan",
    "Page",
    "ReadmeBlock",
    "ReadmeSection",
    "ResultsBlock",
    "Toc",
]

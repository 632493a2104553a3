"""The results of ``extrap study``: the schema between the study, which writes it, and the report, which reads it.

:class:`StudyResults` is ``results.json``; :func:`load_results` reads one (also one written by an
earlier version) and :func:`save_results` writes one; each experiment reads and writes its own block of it
through its :class:`ResultsBlock`.  Its evaluation section
holds the records of ``extrap eval`` itself (:mod:`.evaluation`: :class:`EvalReport` and its
:class:`LengthResult` per length, :class:`WindowInfo`, :class:`TemperatureInfo`; and the
:class:`FileScore` of ``eval --file``).
"""

from extrap.results.blocks import ResultsBlock
from extrap.results.evaluation import EvalReport, FileScore, LengthResult, Provenance, TemperatureInfo
from extrap.results.names import slug
from extrap.results.records import Record
from extrap.results.sections import INITIAL, TRAINED, Claim, LearningGate, RunSummary
from extrap.results.study import RESULTS_FILE, StudyHost, StudyResults, StudyTraining, load_results, save_results
from extrap.results.window import WindowBound, WindowError, WindowInfo, WindowMeasure

__all__ = [
    "INITIAL",
    "TRAINED",
    "RESULTS_FILE",
    "Claim",
    "EvalReport",
    "LearningGate",
    "FileScore",
    "LengthResult",
    "Provenance",
    "TemperatureInfo",
    "WindowInfo",
    "Record",
    "ResultsBlock",
    "RunSummary",
    "StudyHost",
    "StudyResults",
    "StudyTraining",
    "WindowBound",
    "WindowError",
    "WindowMeasure",
    "load_results",
    "save_results",
    "slug",
]

"""Retrieval tasks of 004 §5.2: passkey, line and topic retrieval.

Generate examples at any length in tokens, train on them, and score a model's
exact-match accuracy by length and by answer depth (lost in the middle)::

    from extrap.tasks import TaskSettings, make_example, score_task
    ex = make_example("passkey", tokenizer, 512, seed=0, depth=0.5)      # an Example
    report = score_task(model, tokenizer, TaskSettings("passkey", [128, 256, 512], n=50))  # a TaskReport

``extrap train --task passkey`` trains on the task (:class:`TaskSampler`), and
``extrap task score RUN_DIR`` / ``extrap task sample`` are the command line.  T5
(``hf:PATH``, a :class:`extrap.model.protocol.Seq2SeqLM`) is scored through its encoder and decoder
(:mod:`extrap.tasks.seq2seq`).  The records (:mod:`extrap.tasks.records`) have ``to_json`` / ``from_json``.
"""

from extrap.tasks.continuations import Continuation, score_candidates, score_continuations
from extrap.tasks.filler import Filler, get_filler, sanitize
from extrap.tasks.formats import TASKS, TOLERANCE, TOPICS, min_length
from extrap.tasks.generators import make_example, needs_filler
from extrap.tasks.line_task import line
from extrap.tasks.passkey_task import passkey
from extrap.tasks.records import DepthBucket, Example, ExampleScore, LengthScore, TaskReport, TaskRun, TaskSettings
from extrap.tasks.ruler.registry import RULER_TASKS, check_ruler_task
from extrap.tasks.sampler import IGNORE_INDEX, TaskSampler
from extrap.tasks.score import METHODS, parse_temperature, score_task, task_examples
from extrap.tasks.seq2seq import seq2seq_candidates, seq2seq_continuations
from extrap.tasks.topic_task import topic

ALL_TASKS = TASKS + RULER_TASKS  # what extrap train --task takes (the RULER-style ones: extrap.tasks.ruler)

__all__ = [
    "ALL_TASKS",
    "RULER_TASKS",
    "IGNORE_INDEX",
    "METHODS",
    "TASKS",
    "TOLERANCE",
    "TOPICS",
    "Continuation",
    "DepthBucket",
    "Example",
    "ExampleScore",
    "Filler",
    "LengthScore",
    "TaskReport",
    "TaskRun",
    "TaskSampler",
    "TaskSettings",
    "check_ruler_task",
    "get_filler",
    "line",
    "make_example",
    "min_length",
    "needs_filler",
    "parse_temperature",
    "passkey",
    "sanitize",
    "score_candidates",
    "score_continuations",
    "score_task",
    "seq2seq_candidates",
    "seq2seq_continuations",
    "task_examples",
    "topic",
]

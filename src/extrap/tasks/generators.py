"""Seeded generators of the three retrieval tasks of 004 §5.2 (passkey, line, topic).

Each task has its own module (:mod:`extrap.tasks.passkey_task`, :mod:`extrap.tasks.line_task`,
:mod:`extrap.tasks.topic_task`); :func:`make_example` picks one by name.

Every generator takes a tokenizer and a target length in *tokens* and returns an
:class:`extrap.tasks.records.Example` (``to_json()`` gives its JSON)::

    task, seed, length, prompt, answer, target, candidates,
    depth, requested_depth, prompt_tokens, target_tokens, needle_token, tokenizer, ...

* ``target`` is the continuation the model must produce: ``" " + answer + "\\n"``
  (the newline marks the end of the answer, so exact match also checks that the
  model stops).  Scoring and training tokenise ``prompt`` and ``target``
  separately and concatenate the ids.
* ``prompt_tokens <= length`` and ``prompt_tokens >= 0.9 * length``
  (:data:`TOLERANCE`); with ``include_target=True`` the same holds for
  ``prompt_tokens + target_tokens`` (training sequences of exactly L_tr + 1).
* ``answer`` occurs exactly once in ``prompt``; this is checked on every
  example (a failing draw is redrawn deterministically).
* ``depth`` is where the needed information (the needle: the pass-key
  sentence, the queried line, the first topic's opening turn) sits: the
  tokens of context before the needle divided by all context tokens except the
  needle's, in [0, 1].  The context is the prompt minus the final question
  (and, for line, minus the one-line instruction).  0 = the needle opens the
  context, 1 = nothing but the question follows it: the needle-in-a-haystack
  "depth percent".  ``needle_token`` is the index of the needle's first token
  in the prompt.  ``requested_depth`` is what was asked for (uniform at random when
  ``depth`` is None); the realised depth is as close as a word (passkey), a line
  (line) or the other topics' opening turns (topic, which cannot reach 1) allow.
* ``candidates`` (answer included) are for scoring by ranking: passkey, three
  random numbers of the same width; line, other values *from the prompt*;
  topic, other topics *of the same conversation*.

The same ``(task, tokenizer, length, seed, depth, filler)`` always gives the
same example.  A length below what the task needs raises :class:`ExtrapError`.

Formats (after Mohtashami & Jaggi 2023 and Li et al. 2023, shortened so that
the tasks fit the short training lengths of CPU-scale models)::

    passkey  <filler>\\nThe pass key is 48213. Remember it.\\n<filler>\\n
             What is the pass key? The pass key is                   -> " 48213\\n"
    line     Remember each line's REGISTER_CONTENT.\\n
             line kobapu: REGISTER_CONTENT is 24164\\n ...
             What is the REGISTER_CONTENT in line kobapu? It is      -> " 24164\\n"
    topic    [USER: <filler>\\nASSISTANT: <filler>\\n]   (small talk, only when depth > 0)
             USER: Let's talk about coral reefs.\\nASSISTANT: <filler>\\n[USER: ..\\nASSISTANT: ..\\n]
             USER: Let's talk about ...
             USER: What was the first topic we talked about?\\nASSISTANT: The first topic was
                                                                     -> " coral reefs\\n"

For ``topic`` the depth is that of the first topic: small talk of the requested
share of the context comes before it (``depth=0``, the layout of Li et al.,
opens the conversation with the first topic).
"""

from __future__ import annotations

from typing import Any

from extrap.errors import ExtrapError
from extrap.tasks.formats import TASKS
from extrap.tasks.line_task import line
from extrap.tasks.passkey_task import passkey
from extrap.tasks.records import Example
from extrap.tasks.topic_task import topic

GENERATORS = {"passkey": passkey, "line": line, "topic": topic}
# The longest example each task builds, in tokens.  Passkey and topic grow linearly (a 2^20-token example
# takes about a second); line re-tokenizes its prompt while it lengthens keys to fill the last line's
# slack, which grows quadratically: about 10 s at 2^17 tokens, a minute at 4 x 10^5.
MAX_LENGTHS = {"passkey": 2**20, "line": 2**17, "topic": 2**20}


def check_task(task: str) -> str:
    if task not in GENERATORS:
        raise ExtrapError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    return task


def check_length(task: str, length: int) -> int:
    """``length`` if ``task`` builds examples that long (:data:`MAX_LENGTHS`), else ExtrapError."""
    cap = MAX_LENGTHS[check_task(task)]
    if length > cap:
        raise ExtrapError(f"{task}: length {length:,} is above the longest example the task builds, {cap:,} tokens")
    return length


def make_example(
    task: str,
    tokenizer,
    length: int,
    seed: int = 0,
    *,
    depth: float | None = None,
    filler: Any = None,
    include_target: bool = False,
    **kw,
) -> Example:
    """One example of ``task`` (see the module docstring); ``depth=None`` draws it at random."""
    return GENERATORS[check_task(task)](
        tokenizer, check_length(task, length), seed, depth=depth, filler=filler, include_target=include_target, **kw
    )


def needs_filler(task: str) -> bool:
    return check_task(task) != "line"

"""The one list of experiments: the only place their names appear outside their own packages.

Each entry names the package attribute holding the experiment's :class:`~.protocol.ExperimentSpec`; a
package is imported only when its experiment is asked for, so the CLI lists the choices without loading
any of them (and the shared skeleton, which looks experiments up here, imports none).  What
``extrap study --help`` says of an experiment (:class:`~.protocol.About`) is the attribute of the same name
(``ABOUT`` for ``SPEC``) in the package's light ``about`` module: the package's ``__init__`` builds its spec
on first use (:func:`~.assemble.lazy`), so reading it loads nothing else.
:func:`register` adds one at run time (a plug-in, or a test's toy experiment).
"""

from __future__ import annotations

import importlib

from extrap.errors import ExtrapError
from extrap.experiments.protocol import About, ExperimentSpec, ReadmeSection

EXPERIMENTS = {  # --experiment name -> "module:attribute" of its spec
    "extrapolation": "extrap.experiments.extrapolation:EXTRAPOLATION",
    "alibi-slopes": "extrap.experiments.extrapolation:ALIBI_SLOPES",
    "alignment": "extrap.experiments.alignment:SPEC",
    "rope-base": "extrap.experiments.rope_base:SPEC",
    "effective-length": "extrap.experiments.effective_length:SPEC",
    "extension": "extrap.experiments.extension:SPEC",
    "finetune-extension": "extrap.experiments.finetune_extension:SPEC",
}
SECTIONS = {"survey": "extrap.experiments.survey:SECTION"}  # README blocks of another experiment's results
DEFAULT = "extrapolation"  # results.json without an "experiment" (written by an early version)

_added: dict[str, ExperimentSpec] = {}


def _load(where: str):
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module), attr)


def _entry(name: str) -> str:
    if name not in EXPERIMENTS:
        raise ExtrapError(f"unknown experiment {name!r} ({' | '.join(names())})")
    return EXPERIMENTS[name]


def names() -> tuple[str, ...]:
    """Every experiment's name, in the order ``extrap study --help`` lists them."""
    return (*EXPERIMENTS, *(n for n in _added if n not in EXPERIMENTS))


def register(spec: ExperimentSpec) -> None:
    """Add (or replace) an experiment at run time; :func:`unregister` takes it out again."""
    _added[spec.name] = spec


def unregister(name: str) -> None:
    _added.pop(name, None)


def get(name: str | None) -> ExperimentSpec:
    """The spec of experiment ``name`` (None: :data:`DEFAULT`); unknown: ExtrapError."""
    name = name or DEFAULT
    if name in _added:
        return _added[name]
    return _load(_entry(name))


def about(name: str) -> About:
    """What ``extrap study --help`` says of experiment ``name``, read without loading it (a registered spec
    without one: its citation stands for its summary)."""
    if name in _added:
        return _added[name].about or About(_added[name].citation)
    module, _, attr = _entry(name).partition(":")
    return _load(f"{module}.about:{attr if attr != 'SPEC' else 'ABOUT'}")


def section(name: str) -> ReadmeSection:
    if name not in SECTIONS:
        raise ExtrapError(f"unknown README section {name!r} ({' | '.join(SECTIONS)})")
    return _load(SECTIONS[name])


ALIASES = {  # names extrap.report.readme exported before each experiment had its package
    "SURVEY_BEGIN": "extrap.experiments.survey:BEGIN",
    "SURVEY_END": "extrap.experiments.survey:END",
    "survey_markdown": "extrap.experiments.survey:survey_markdown",
}


def readme_alias(name: str):
    """``extrap.report.readme.<name>`` for a name that moved into an experiment's package."""
    if name not in ALIASES:
        raise AttributeError(f"module 'extrap.report.readme' has no attribute {name!r}")
    return _load(ALIASES[name])

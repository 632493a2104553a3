"""An experiment's spec assembled by convention from its package's modules (as lm-eval-harness reads a task's
folder): each part of :class:`~.protocol.ExperimentSpec` is a module attribute of a fixed name.

=====================  ==========================================================================
``presets.PRESETS``    {preset: settings}
``about.ABOUT``        its :class:`~.protocol.About` (``extrap study --help``), whose choices are the request
                       options it honours (``tasks``, ``methods``, ``delta``); a light module
``plan.build``         ``build(request) -> Experiment``
``claims.claims``      ``claims(results) -> list[Claim]``
``figures.figures``    ``figures(results, notes, out_dir) -> [(name, draw)]``
``page.context``       the fragment's context; ``page.missing``: what the results lack;
``page.SECTIONS``      its (id, title) entries of the table of contents; ``page.anchor`` (optional:
                       the last section decides every claim); template ``<package>.html.j2`` beside
``readme``             optional module: ``BEGIN``, ``END`` and ``markdown(results)``
``results.RESULTS``    optional: its :class:`~extrap.results.blocks.ResultsBlock` of results.json
=====================  ==========================================================================

A keyword given to :func:`package_spec` replaces what the convention would read (a README block that
another experiment renders, say).  The package's ``__init__`` builds its spec on first use (:func:`lazy`), so
that the CLI imports its ``about`` module alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock


def part(package: str, module: str, attribute: str, *, optional: bool = False) -> Any:
    """``package.module.attribute``; a missing one is a TypeError naming it (None when ``optional``)."""
    where = f"{package}.{module}"
    if importlib.util.find_spec(where) is None:
        if optional:
            return None
        raise TypeError(f"experiment package {package} has no module {module!r} (it needs {where}.{attribute})")
    found = getattr(importlib.import_module(where), attribute, None)
    if found is None and not optional:
        raise TypeError(f"{where} defines no {attribute!r}, which an experiment package's {module} module declares")
    return found


def package_page(package: str, *, runs: bool = True) -> Page:
    """The HTML fragment of ``package``: its ``page`` module and ``<leaf>.html.j2`` in its folder."""
    sections = tuple(part(package, "page", "SECTIONS"))
    anchor = part(package, "page", "anchor", optional=True) or (lambda results, claim, figures: sections[-1])
    folder = Path(importlib.import_module(package).__file__).parent
    template = f"{package.rsplit('.', 1)[-1]}.html.j2"
    return Page(template, folder, part(package, "page", "context"), lambda results, body: sections, anchor, runs=runs)


def package_readme(package: str) -> ReadmeBlock | None:
    """``package``'s README block from its ``readme`` module; None when it has none."""
    if part(package, "readme", "markdown", optional=True) is None:
        return None
    begin, end = part(package, "readme", "BEGIN"), part(package, "readme", "END")
    return ReadmeBlock(begin, end, part(package, "readme", "markdown"))


def package_spec(package: str, *, name: str, citation: str, **given: Any) -> ExperimentSpec:
    """The spec of the experiment in ``package`` (its ``__name__``), read by the module's convention;
    ``given``: the spec's other fields (``options``, ``gated``, ...) and any part the convention would read."""
    parts = {
        "presets": lambda: part(package, "presets", "PRESETS"),
        "plan": lambda: part(package, "plan", "build"),
        "about": lambda: part(package, "about", "ABOUT"),
        "claims": lambda: part(package, "claims", "claims"),
        "missing": lambda: part(package, "page", "missing"),
        "figures": lambda: part(package, "figures", "figures"),
        "page": lambda: package_page(package),
        "readme": lambda: package_readme(package),
        "results": lambda: part(package, "results", "RESULTS", optional=True),
    }
    read = {key: find() for key, find in parts.items() if key not in given}
    about = given.get("about", read.get("about"))
    options = {"options": about.options} if about is not None and "options" not in given else {}
    return ExperimentSpec(name=name, citation=citation, **read, **options, **given)


def lazy_spec(package: str, name: str, citation: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of a package whose one spec, ``SPEC``, is :func:`package_spec` of its parts."""
    return lazy(package, SPEC=lambda: package_spec(package, name=name, citation=citation))


def lazy(package: str, **specs: Callable[[], Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: attribute ``NAME`` is ``specs[NAME]()``, built on first use
    and kept (PEP 562), so importing the package, or its ``about`` module, loads none of its parts."""

    def getattr_(name: str) -> Any:
        if name not in specs:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = specs[name]()
        setattr(sys.modules[package], name, value)
        return value

    return getattr_

"""``extrap study --help`` is built from the registry and each experiment's ``about`` (its summary, and what each
option it honours takes), without loading any experiment."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys

import pytest

from extrap.cli import build_parser
from extrap.commands import study
from extrap.experiments import registry
from extrap.experiments.extension.about import METHODS as EXTENSION_METHODS
from extrap.experiments.finetune_extension.about import METHODS as FINETUNE_METHODS


def study_help(capsys) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["study", "--help"])
    return capsys.readouterr().out


def option_help(option: str) -> str:
    """The help string of ``extrap study``'s ``option``, as given (before argparse wraps it)."""
    sub = argparse.ArgumentParser().add_subparsers()
    study.register(sub)
    return next(a.help for a in sub.choices["study"]._actions if option in a.option_strings)


def named(text: str) -> set[str]:
    """The experiments an option's help lists after its "For": groups "a, b: what" or "a, b", split by "; "."""
    groups = text.split(". For ", 1)[1].split("; ")
    return {n for g in groups for n in g.split(":", 1)[0].split(", ")}


def test_help_names_every_experiment_with_its_summary(capsys):
    lines = [line.split(None, 1) for line in study_help(capsys).splitlines()]
    for name in registry.names():
        assert [name, registry.about(name).summary] in lines, name


def test_methods_help_lists_each_experiments_methods_from_its_tuple():
    text = option_help("--methods")
    assert f"extension: {', '.join(EXTENSION_METHODS)} (default: all)" in text
    assert f"finetune-extension: {', '.join(FINETUNE_METHODS)} (default: all)" in text


def test_each_option_help_names_exactly_the_experiments_that_honour_it():
    for option in ("methods", "tasks", "delta"):
        takers = {n for n in registry.names() if option in registry.get(n).options}
        assert named(option_help(f"--{option}")) == takers, option


def test_the_about_the_help_reads_is_the_loaded_specs():
    for name in registry.names():
        spec = registry.get(name)
        assert registry.about(name) is spec.about and spec.options == spec.about.options, name


def test_study_help_loads_only_the_experiments_about_modules():
    probe = """
import json, sys
from extrap.cli import main
try:
    main(["study", "--help"])
except SystemExit:
    pass
loaded = sorted(m for m in sys.modules if m.startswith("extrap.experiments.") or m == "torch")
print(json.dumps(loaded), file=sys.stderr)
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    parts = {m.rsplit(".", 1)[-1] for m in loaded if m.count(".") == 3}
    assert "torch" not in loaded and parts == {"about"}, loaded


def test_a_spec_whose_about_lists_other_options_is_refused():
    spec = registry.get("rope-base")
    with pytest.raises(TypeError, match="About's are"):
        dataclasses.replace(spec, options=frozenset({"tasks"}))  # its About lists delta

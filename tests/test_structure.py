"""The source tree's shape: no import circle, no private imports, small functions and files."""

import structure


def test_no_import_cycles():
    assert structure.cycles() == []


def test_no_private_names_imported_across_modules():
    assert structure.private_imports() == []


def test_functions_stay_short():
    assert structure.long_functions() == [], f"over {structure.MAX_FUNCTION_LINES} lines"


def test_files_stay_small():
    assert structure.long_files() == [], f"over {structure.MAX_FILE_LINES} lines"


def test_checker_finds_a_cycle_and_a_private_import(tmp_path, monkeypatch):
    """The checks themselves: a two-module loop and a private import in a fake tree are found."""
    pkg = tmp_path / "extrap"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from extrap.b import _hidden\n")
    (pkg / "b.py").write_text("def _hidden():\n    from extrap import a\n" + "    x = 1\n" * 70)
    monkeypatch.setattr(structure, "SRC", tmp_path)
    assert structure.cycles() == [["extrap.a", "extrap.b"]]
    assert structure.private_imports() == ["extrap/a.py:1: _hidden from extrap.b"]
    assert structure.long_functions() == ["extrap/b.py:1: _hidden has 72 lines"]

"""The source tree's shape: no import circle, no private imports, small functions and files, typed reports."""

import structure


def test_no_import_cycles():
    assert structure.cycles() == []


def test_no_private_names_imported_across_modules():
    assert structure.private_imports() == []


def test_functions_stay_short():
    assert structure.long_functions() == [], f"over {structure.MAX_FUNCTION_LINES} lines"


def test_files_stay_small():
    assert structure.long_files() == [], f"over {structure.MAX_FILE_LINES} lines"


def test_typed_packages_speak_in_records_not_dicts():
    assert structure.dict_signatures() == [], "return a typed record; take one settings record"


def test_dict_rule_sees_returns_and_parameters_and_exempts_json_edges(tmp_path, monkeypatch):
    pkg = tmp_path / "extrap" / "evaluate"
    pkg.mkdir(parents=True)
    (tmp_path / "extrap" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(
        "def report() -> dict: ...\n"
        "def run(settings: 'dict[str, int] | None'): ...\n"
        "def weights() -> dict[str, torch.Tensor]: ...\n"
        "def _private() -> dict: ...\n"
        "class R:\n    def to_json(self) -> dict: ...\n"
    )
    (tmp_path / "extrap" / "hf.py").write_text("def outside() -> dict: ...\n")  # not a typed package
    monkeypatch.setattr(structure, "SRC", tmp_path)
    assert structure.dict_signatures() == [
        "extrap/evaluate/m.py:1: report (return)",
        "extrap/evaluate/m.py:2: run (settings)",
    ]


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


def test_every_write_goes_through_the_checked_writer():
    assert structure.raw_writes() == [], "write through extrap.io (atomic_write_bytes, write_output, make_folder)"


def test_raw_write_rule_fires_and_spares_reads_and_memory(tmp_path, monkeypatch):
    """The rule itself: each raw write in a fake module is found; reads and serialising into memory are not."""
    pkg = tmp_path / "extrap"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "io.py").write_text("import os\nos.replace('a', 'b')\n")  # the writer itself may
    (pkg / "m.py").write_text(
        "import io, os, shutil, torch\n"
        "from safetensors.torch import save_file\n"
        "fig.savefig('x.svg')\n"
        "path.write_text('x')\n"
        "open(p, 'w')\n"
        "p.open('a')\n"
        "os.replace(a, b)\n"
        "shutil.copy(a, b)\n"
        "torch.save(obj, 'w.pt')\n"
        "out.mkdir(parents=True)\n"
        "buf = io.BytesIO()\n"
        "fig.savefig(buf, format='png')\n"
        "torch.save(obj, buf)\n"
        "open(p)\n"
        "open(p, 'rb')\n"
        "gzip.open(p)\n"
        "table.to_csv()\n"
    )
    monkeypatch.setattr(structure, "SRC", tmp_path)
    assert structure.raw_writes() == [
        "extrap/m.py:2: from safetensors.torch import save_file",
        "extrap/m.py:3: fig.savefig",
        "extrap/m.py:4: path.write_text",
        "extrap/m.py:5: open for writing",
        "extrap/m.py:6: p.open for writing",
        "extrap/m.py:7: os.replace",
        "extrap/m.py:8: shutil.copy",
        "extrap/m.py:9: torch.save",
        "extrap/m.py:10: out.mkdir",
    ]


def test_no_shared_module_imports_an_experiment():
    assert structure.experiment_imports() == []


def test_checker_finds_a_shared_module_that_imports_an_experiment(tmp_path, monkeypatch):
    """A shared module importing an experiment's package is found, an experiment importing the skeleton is not."""
    exp = tmp_path / "extrap" / "experiments"
    (exp / "toy").mkdir(parents=True)
    for init in (tmp_path / "extrap", exp, exp / "toy"):
        (init / "__init__.py").write_text("")
    (exp / "protocol.py").write_text("")
    (exp / "registry.py").write_text("from extrap.experiments import protocol\n")
    (exp / "toy" / "plan.py").write_text("from extrap import page\nfrom extrap.experiments.protocol import x\n")
    (tmp_path / "extrap" / "page.py").write_text("def f():\n    from extrap.experiments.toy.plan import g\n")
    monkeypatch.setattr(structure, "SRC", tmp_path)
    assert structure.experiment_imports() == ["extrap/page.py:2: imports extrap.experiments.toy.plan"]


def test_no_shared_module_names_an_experiment():
    assert structure.experiment_name_literals() == [], "look the experiment up in its spec or the registry"


def test_checker_finds_an_experiment_name_in_a_shared_module(tmp_path, monkeypatch):
    """A shared module comparing with a registered name is found; its docstring, the registry and the
    experiment's own package are not."""
    exp = tmp_path / "extrap" / "experiments"
    (exp / "toy").mkdir(parents=True)
    for init in (tmp_path / "extrap", exp, exp / "toy"):
        (init / "__init__.py").write_text("")
    (exp / "registry.py").write_text('EXPERIMENTS = {"toy": "extrap.experiments.toy:SPEC"}\n')
    (exp / "toy" / "plan.py").write_text('NAME = "toy"\n')
    (tmp_path / "extrap" / "report").mkdir()
    (tmp_path / "extrap" / "report" / "__init__.py").write_text("")
    page = '"""toy"""\n\n\ndef f(e):\n    """toy"""\n    return e == "toy"\n'
    (tmp_path / "extrap" / "report" / "page.py").write_text(page)
    (tmp_path / "extrap" / "theory.py").write_text(page)  # outside the skeleton: "toy" may be a word of its own
    monkeypatch.setattr(structure, "SRC", tmp_path)
    assert structure.experiment_name_literals() == ["extrap/report/page.py:6: 'toy'"]


def test_no_cli_module_names_an_experiment():
    assert structure.command_experiment_mentions() == [], "build the help from the registry and the experiments' about"


def test_checker_finds_an_experiment_named_in_a_cli_module(tmp_path, monkeypatch):
    """Any registered name in ``extrap study``'s module, a hyphenated one in another command's help; a one-word
    name used as a word of another command ("toy" below) is not one."""
    exp = tmp_path / "extrap" / "experiments"
    exp.mkdir(parents=True)
    (exp / "registry.py").write_text('EXPERIMENTS = {"toy": "x:SPEC", "toy-box": "y:SPEC"}\n')
    cmd = tmp_path / "extrap" / "commands"
    cmd.mkdir()
    (cmd / "study.py").write_text('"""Run a study."""\n\nHELP = "pick one"  # toy: the default\n')
    (cmd / "other.py").write_text('HELP = "a toy model, or a toys list"\nMORE = "toy-box: its PEs"\n')
    monkeypatch.setattr(structure, "SRC", tmp_path)
    assert structure.command_experiment_mentions() == ["extrap/commands/other.py:2: 'toy-box'",
                                                       "extrap/commands/study.py:3: 'toy'"]  # fmt: skip

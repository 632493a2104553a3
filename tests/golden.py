"""Golden ``--json`` outputs: what each command prints for a fixed smoke run, kept across refactors.

``python tests/golden.py`` trains the fixed runs in a temporary folder, runs every command in
:data:`COMMANDS` and writes ``tests/data/golden.json``; ``tests/test_golden.py`` runs them again and
compares key by key. Paths and wall-clock fields are normalised away; every other key must be equal
(floats to a relative 1e-6, which survives a change of BLAS kernel but not of behaviour), apart from
keys listed in :data:`ADDED`, the documented additions since the file was written.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import sysconfig
from pathlib import Path

GOLDEN = Path(__file__).parent / "data" / "golden.json"
VOLATILE = {"seconds", "command", "extrap_version", "version", "tokens_per_second", "elapsed", "wall_seconds"}
ADDED: set[str] = set()  # dotted keys added on purpose since the golden file was written (documented in README)

# name -> argv, with {run}, {t5} and {corpus} filled in
COMMANDS = {
    "eval-nonoverlapping": "eval {run} --lengths 32,64 --tokens 256 --window 16 --json",
    "eval-sliding": "eval {run} --lengths 32,64 --protocol sliding --stride 16 --tokens 256 --window 16 --json",
    "eval-last-token": "eval {run} --lengths 32,64 --protocol last-token --targets 8 --window 16 --json",
    "eval-temperature": "eval {run} --lengths 32,64 --tokens 256 --temperature auto --json",
    "eval-file": "eval {run} --file {file} --window 16 --json",
    "erf": "erf {run} --length 64 --segments 2 --kind both --json",
    "align": "align {run} --lengths 48,64 --segments 2 --json",
    "align-per-layer": "align {run} --lengths 64 --segments 2 --per-layer --json",
    "align-t5": "align hf:{t5} --train-length 32 --lengths 64 --segments 2 --corpus {corpus} --json",
    "task-score": "task score {run} --task passkey --lengths 160 --n 4 --score rank --details --json",
    "task-score-t5": "task score hf:{t5} --task passkey --lengths 150 --n 3 --corpus {corpus} --json",
    "theory": "theory alibi type1 kerple-log sandwich t5 --heads 2 --eps 1e-3,1e-6 --json",
    "theory-checkpoint": "theory --checkpoint {run} --json",
}


def corpus_dir(root: Path, files: int = 60) -> Path:
    """The first ``files`` stdlib sources, as the tests' tiny corpus."""
    folder = root / "corpus"
    folder.mkdir(exist_ok=True)
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:files]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    return folder


TRAIN = "train --pe alibi --preset smoke --steps 30 --train-length 32 --corpus {corpus} --out {run} --json"


def t5_folder(root: Path, tokenizer) -> Path:
    """A tiny random T5 (seed 0) with non-trivial bucket tables, saved as an hf: folder."""
    import torch
    import transformers

    cfg = transformers.T5Config(
        d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, relative_attention_num_buckets=8,
        relative_attention_max_distance=16, vocab_size=300, dropout_rate=0.0, decoder_start_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(cfg)
    with torch.no_grad():
        for m in model.modules():
            if hasattr(m, "relative_attention_bias"):
                m.relative_attention_bias.weight.normal_(0, 1)
    out = root / "t5"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def bpe_tokenizer():
    """The tests' 300-token byte-level BPE, trained on five stdlib files."""
    import tokenizers
    import transformers

    root = Path(sysconfig.get_paths()["stdlib"])
    text = [p.read_text(encoding="utf-8", errors="replace")[:4000] for p in sorted(root.glob("*.py"))[:5]]
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(text, vocab_size=300, min_frequency=1, show_progress=False)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer)


def run_command(argv: list[str]) -> dict:
    """``extrap ARGV`` in process; its stdout parsed as strict JSON."""
    from extrap.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    if code != 0:
        raise AssertionError(f"extrap {' '.join(argv)} exited {code}")
    return json.loads(out.getvalue(), parse_constant=lambda c: pytest_fail(f"non-strict JSON constant {c}"))


def pytest_fail(msg: str):
    raise AssertionError(msg)


def capture(root: Path) -> dict[str, dict]:
    """Train the fixed runs under ``root`` and return every command's normalised JSON by name."""
    import torch

    torch.set_num_threads(1)
    corpus = f"text:{corpus_dir(root)}"
    file = root / "sample.txt"
    file.write_text((Path(sysconfig.get_paths()["stdlib"]) / "abc.py").read_text()[:3000])
    t5 = t5_folder(root, bpe_tokenizer())
    subst = {"run": str(root / "alibi"), "t5": str(t5), "corpus": corpus, "file": str(file)}
    out = {}
    for name, template in {"train": TRAIN, **COMMANDS}.items():  # train first: the others read its run
        argv = [a.format(**subst) for a in template.split()]
        out[name] = normalise(run_command(argv), {str(root): "<ROOT>"})
    return out


def normalise(obj, paths: dict[str, str]):
    """Drop wall-clock keys and replace temporary paths, recursively."""
    if isinstance(obj, dict):
        return {k: normalise(v, paths) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [normalise(v, paths) for v in obj]
    if isinstance(obj, str):
        for p, name in paths.items():
            obj = obj.replace(p, name)
    return obj


def differences(old, new, where: str = "") -> list[str]:
    """Every place where ``new`` differs from ``old``; keys new in ``new`` count unless in ADDED."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = [f"{where}.{k}: missing" for k in old if k not in new]
        out += [f"{where}.{k}: added" for k in new if k not in old and f"{where}.{k}".lstrip(".") not in ADDED]
        for k in old.keys() & new.keys():
            out += differences(old[k], new[k], f"{where}.{k}")
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{where}: {len(old)} items, now {len(new)}"]
        return [d for i, (a, b) in enumerate(zip(old, new)) for d in differences(a, b, f"{where}[{i}]")]
    if isinstance(old, float) and isinstance(new, (int, float)) and not isinstance(new, bool):
        return [] if math.isclose(old, new, rel_tol=1e-6, abs_tol=1e-12) else [f"{where}: {old!r} -> {new!r}"]
    return [] if old == new and type(old) is type(new) else [f"{where}: {old!r} -> {new!r}"]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ["EXTRAP_CACHE"] = str(Path(tmp) / "cache")
        data = capture(Path(tmp))
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} ({len(data)} commands)", file=sys.stderr)

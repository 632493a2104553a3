"""Golden ``--json`` outputs: what each command prints for a fixed smoke run, kept across refactors.

``python tests/golden.py`` trains the fixed runs in a temporary folder, runs every command in
:data:`COMMANDS` and writes ``tests/data/golden.json``; ``tests/test_golden.py`` runs them again and
compares key by key. Paths and wall-clock fields are normalised away. Keys, list lengths, strings, bools,
None and integers must be equal; keys new since the file was written count unless listed in :data:`ADDED`.

Floats compare with the tolerance each can keep on any CPU, BLAS kernel and thread count (:func:`tolerance`,
keyed by command and key name). The smoke models compute in float32, u = 2^-24 = 6.0e-8; their longest
reduction has K = 300 terms (T5's vocabulary; 256 bytes, 256 scored tokens). A float32 reduction's
rounding error is of random sign whatever the summation order, split or FMA use, so ~ sqrt(K) u; we allow
4 sqrt(K) u for the few reductions chained through two layers: R32 = 4.1e-6 relative. A loss l then has
an ABSOLUTE error R32 l (l ~ 4 nats here), which every quantity derived from losses inherits:

=========================  ==============================================  ==================================
class (keys)               tolerance                                       why
=========================  ==============================================  ==================================
float64: the ``theory``    relative R64 = 1e-12, as                        float64 engine (u = 1.1e-16) on
commands                   tests/test_theory_reference.py                  one thread, its sums bounded in
                                                                           mpmath: a CPU changes only libm's
                                                                           or SLEEF's last ulp
loss-difference:           absolute D = 2 R32 l, l = the largest loss of   |e^(l1-l2) - 1| ~ |l1 - l2|: near
``*_diff``, ``*ratio*``,   the command's golden record (10 nats if none)   zero, its error is the two losses'
``*stderr*``                                                               absolute errors, not relative to
                                                                           it; a stderr of per-token losses
                                                                           moves by <= R32 l / sqrt(n-1) < D
exp-of-loss: ``*ppl*``     relative D                                      d(e^l)/e^l = dl = R32 l; a CI end
                                                                           exp(l +- Z se) adds Z R32 l /
                                                                           sqrt(n-1) < R32 l for n >= 8
float32 (everything else)  relative R32, absolute floor u                  one float32 statistic (loss, bits,
                                                                           pmax, entropy, ERF curve...); a
                                                                           count or grid value (accuracy,
                                                                           tau, delta) moves by a whole step;
                                                                           the floor: a value near 0 keeps
                                                                           the ulp of its order-1 inputs
=========================  ==============================================  ==================================

Measured (``PYTHONPATH=src python bench/golden_perturb.py``: threads 1 and 2, and the eval commands in
float64 on the same weights): the largest |difference| / tolerance is 0.045 (float32), 0.005 (loss-difference)
and 0.004 (exp-of-loss); the AMD EPYC differences that failed the old flat 1e-6 relative rule are <= 0.005 of
theirs. The theory engine pins one thread itself, so its class saw no change. A behaviour change still fails:
a 1% change of a loss is 2400x R32 and moves a difference of losses by 0.04 nats, 1200x D (test_golden.py).
Integers derived from float32 statistics (an ERF position, a task's prediction) are compared exactly: a
rounding change can flip one only where a statistic sits on its threshold; none moved under the perturbations.
So are the eval commands' ``verdict_reason`` strings (the run did not learn: "not learned: loss 4.325 nats ..."):
their losses are printed to 3 decimals, each at least 2.6 R32 l from a rounding boundary of that digit, and the
unigram entropy is float64 from integer counts; none moved under the perturbations.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
import math
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

GOLDEN = Path(__file__).parent / "data" / "golden.json"
VOLATILE = {
    *("seconds", "command", "extrap_version", "version", "tokens_per_second", "elapsed", "wall_seconds"),
    "tokens_per_s",  # train's summary: a timing
}
# dotted keys added on purpose since the golden file was written (documented in README); empty when it was
# last written (python tests/golden.py)
ADDED: set[str] = {"dtype", "tokens_per_s", "mfu"}  # the forward's dtype; train's throughput and MFU

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


def capture(root: Path, threads: int = 1, dtype=None) -> dict[str, dict]:
    """Train the fixed runs under ``root`` and return every command's normalised JSON by name.

    ``threads``: torch's intra-op threads for every command (the golden file was written with 1).
    ``dtype``: a torch default dtype for every command after ``train`` (float64: the same weights, evaluated
    in float64), restored afterwards; None keeps float32.
    """
    import torch

    before_threads, before_dtype = torch.get_num_threads(), torch.get_default_dtype()
    torch.set_num_threads(threads)
    try:
        return _capture(root, dtype)
    finally:
        torch.set_num_threads(before_threads)
        torch.set_default_dtype(before_dtype)


def _capture(root: Path, dtype) -> dict[str, dict]:
    import torch

    corpus = f"text:{corpus_dir(root)}"
    file = root / "sample.txt"
    file.write_text((Path(sysconfig.get_paths()["stdlib"]) / "abc.py").read_text()[:3000])
    t5 = t5_folder(root, bpe_tokenizer())
    subst = {"run": str(root / "alibi"), "t5": str(t5), "corpus": corpus, "file": str(file)}
    out = {}
    for name, template in {"train": TRAIN, **COMMANDS}.items():  # train first: the others read its run
        argv = [a.format(**subst) for a in template.split()]
        out[name] = normalise(run_command(argv), {str(root): "<ROOT>"})
        if dtype is not None:  # after train: the weights stay the golden file's
            torch.set_default_dtype(dtype)
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


U32 = 2.0**-24  # float32 unit roundoff
K32 = 300  # the longest float32 reduction in the golden models (T5's 300-token vocabulary)
R32 = 4 * math.sqrt(K32) * U32  # 4.1e-6: relative tolerance of one float32 statistic
R64 = 1e-12  # relative tolerance of the float64 theory engine (as tests/test_theory_reference.py)
LOSS_SCALE = 10.0  # nats, for a record with no loss (ln 22026: above any vocabulary here)
FLOAT64_COMMANDS = {"theory", "theory-checkpoint"}  # float64 math on exact inputs (ALiBi's slopes are fixed 2^-k)
DIFF_KEYS = ("*_diff", "*ratio*", "*stderr*")  # differences of two losses, their ratios and standard errors
EXP_KEYS = ("*ppl*",)  # exp of a loss (or of a loss +- Z se)


@dataclass(frozen=True)
class Tolerance:
    """|new - old| <= max(rel |old|, abs), named by its class."""

    name: str
    rel: float = 0.0
    abs: float = 0.0

    def bound(self, old: float) -> float:
        """The largest |new - old| allowed."""
        return max(self.rel * abs(old), self.abs)

    def ratio(self, old: float, new: float) -> float:
        """|new - old| over the allowed difference (0 when equal, inf when nothing is allowed)."""
        diff, bound = abs(new - old), self.bound(old)
        return 0.0 if diff == 0 else diff / bound if bound > 0 else math.inf


def tolerance(command: str, key: str, loss: float = LOSS_SCALE) -> Tolerance:
    """The tolerance of float ``key`` in ``command``'s output; ``loss``: the largest loss in its record."""
    if command in FLOAT64_COMMANDS:
        return Tolerance("float64", rel=R64)
    if any(fnmatch.fnmatchcase(key, p) for p in DIFF_KEYS):
        return Tolerance("loss-difference", abs=2 * R32 * loss)
    if any(fnmatch.fnmatchcase(key, p) for p in EXP_KEYS):
        return Tolerance("exp-of-loss", rel=2 * R32 * loss)
    return Tolerance("float32", rel=R32, abs=U32)


def loss_scale(record) -> float:
    """The largest |loss| (``loss`` or ``final_loss``) anywhere in ``record``; LOSS_SCALE when it has none."""
    found: list[float] = []

    def walk(obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                if k in ("loss", "final_loss") and isinstance(v, float):
                    found.append(abs(v))
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(record)
    return max(found, default=LOSS_SCALE)


@dataclass(frozen=True)
class Comparison:
    """One leaf or structural change: where, its tolerance class (None: exact), |diff| / tolerance, what changed,
    and the |diff| allowed."""

    where: str
    tolerance: str | None
    ratio: float
    change: str
    allowed: float = 0.0

    def __str__(self) -> str:
        return f"{self.where}: {self.change}"


def compare(old, new, command: str = "") -> Iterator[Comparison]:
    """Every leaf of ``new`` against ``old`` (floats under :func:`tolerance`), and every structural change."""
    yield from _compare(old, new, "", "", command, loss_scale(old))


def _compare(old, new, where: str, key: str, command: str, loss: float) -> Iterator[Comparison]:
    if isinstance(old, dict) and isinstance(new, dict):
        for k in old:
            if k not in new:
                yield Comparison(f"{where}.{k}", None, math.inf, "missing")
        for k in new:
            if k not in old and f"{where}.{k}".lstrip(".") not in ADDED:
                yield Comparison(f"{where}.{k}", None, math.inf, "added")
        for k in [k for k in old if k in new]:
            yield from _compare(old[k], new[k], f"{where}.{k}", k, command, loss)
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            yield Comparison(where, None, math.inf, f"{len(old)} items, now {len(new)}")
        else:
            for i, (a, b) in enumerate(zip(old, new)):
                yield from _compare(a, b, f"{where}[{i}]", key, command, loss)
    elif isinstance(old, float) and isinstance(new, (int, float)) and not isinstance(new, bool):
        tol = tolerance(command, key, loss)
        ratio = tol.ratio(old, new)
        said = f"{old!r} -> {new!r} ({ratio:.3g} x the {tol.name} tolerance)"
        yield Comparison(where, tol.name, ratio, said, tol.bound(old))
    else:
        same = old == new and type(old) is type(new)
        yield Comparison(where, None, 0.0 if same else math.inf, f"{old!r} -> {new!r}")


def differences(old, new, command: str = "") -> list[str]:
    """Every place where ``new`` differs from ``old`` beyond its tolerance (see :func:`tolerance`)."""
    return [str(c) for c in compare(old, new, command) if c.ratio > 1]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ["EXTRAP_CACHE"] = str(Path(tmp) / "cache")
        data = capture(Path(tmp))
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} ({len(data)} commands)", file=sys.stderr)

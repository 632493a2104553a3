"""A run directory written by ``extrap train``, loaded as a :class:`~extrap.run.protocol.Run`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

import torch

from extrap.config import TrainConfig
from extrap.errors import ExtrapError
from extrap.io import run_metadata
from extrap.precision import DTYPES, eval_dtype
from extrap.results.evaluation import Provenance
from extrap.run.config import RunConfig
from extrap.run.directory import Checkpoint, RunDir
from extrap.run.parameters import trained_bias_values

log = logging.getLogger(__name__)


def model_weights(model) -> dict[str, torch.Tensor]:
    """The model's tensors as a checkpoint stores them (a tied head is stored once, as tok.weight)."""
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if model.cfg.tie_embeddings:
        state.pop("head.weight", None)  # shared with tok.weight; safetensors refuses aliases
    return state


def load_model_weights(model, run_dir: RunDir, ckpt: Checkpoint) -> None:
    apply_weights(model, run_dir.read_weights(ckpt), ckpt.weights)


def apply_weights(model, state: dict[str, torch.Tensor], source) -> None:
    """Load a checkpoint's tensors (as :func:`model_weights` stores them) into ``model``, strictly."""
    if model.cfg.tie_embeddings and "tok.weight" in state:
        state = {**state, "head.weight": state["tok.weight"]}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # a tensor whose shape the config does not predict
        lines = [ln.strip() for ln in str(e).splitlines() if "size mismatch" in ln]
        raise ExtrapError(f"{source} does not match its config: {lines[0] if lines else 'shapes differ'}") from None
    if missing or unexpected:
        raise ExtrapError(
            f"checkpoint {source} does not match its config (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )


@dataclass
class TrainedRun:
    """A GPT at its latest checkpoint (eval mode), its tokenizer and its typed config."""

    model: torch.nn.Module
    tokenizer: object
    config: RunConfig
    path: Path
    step: int
    rope: dict | None = None  # RoPE re-scaling applied at load (kind, factor, original_max_position, pe)
    dtype: str | None = None  # the forward's autocast dtype (extrap.precision); None: float32, not recorded

    def __iter__(self):  # model, tokenizer, config = extrap.load(run_dir)
        return iter((self.model, self.tokenizer, self.config))

    @property
    def directory(self) -> RunDir:
        return RunDir(self.path)

    @property
    def pe(self) -> str:
        """The PE the model runs: the trained one, or its re-scaled spec under ``rope``."""
        return self.rope["pe"] if self.rope else self.config.pe

    @property
    def train_length(self) -> int:
        return self.config.train_length

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def task(self) -> str | None:
        return self.config.train.task

    @property
    def corpus(self) -> str:
        return self.config.train.corpus

    @property
    def corpus_hash(self) -> str | None:
        return self.config.corpus_hash

    def use_corpus(self, name: str) -> None:
        if name != self.corpus:
            raise ExtrapError(
                f"{self.path} is evaluated on its training corpus ({self.corpus}); another "
                "corpus is only for hf: models"
            )

    def eval_corpus(self):
        """The training corpus, refused if its content changed since training."""
        from extrap.data import load_corpus

        corpus = load_corpus(self.corpus)
        if self.corpus_hash is not None and corpus.hash != self.corpus_hash:
            raise ExtrapError(
                f"corpus {corpus.name} changed since {self.path} was trained (hash differs); evaluate on the same data"
            )
        return corpus

    def use_attention_backend(self, name: str) -> None:
        """Run the model's attention on backend ``name``, checked as a new ModelConfig checks it (one rule:
        an unknown name, or flex-table for a scheme no r(t) table can hold, is refused before any work)."""
        replace(self.model.cfg, attn_backend=name)
        self.model.cfg.attn_backend = name

    def checkpoint_bias(self) -> list[Mapping[str, torch.Tensor]] | None:
        if not self.model.scheme.adds_bias:
            return None
        try:
            return trained_bias_values(self.path)
        except ExtrapError as e:  # a foreign or damaged checkpoint: the values in memory will do
            log.debug("%s: %s; the bias values in memory are used", self.path, e)
            return None

    def provenance(self) -> Provenance:
        source = {"rope": self.rope} if self.rope else {}
        return Provenance(**run_metadata(self.seed, self.corpus_hash), source=source | self._dtype_record())

    def _dtype_record(self) -> dict:
        return {"dtype": self.dtype} if self.dtype else {}


def open_run(
    path: str | Path, device: str | None = None, rope: str | None = None, factor: float | None = None, dtype=None
) -> TrainedRun:
    """The run in directory ``path`` at its latest checkpoint, on ``device`` (default cpu).

    ``dtype``: bfloat16 | float16 | float32, the autocast of its forward pass (:mod:`extrap.precision`),
    recorded in its provenance; None: float32, unrecorded.

    ``rope`` (``KIND[:key=value,...]``, see :class:`~extrap.positional.rope_scaling.RopeRequest`)
    and ``factor``: evaluate a rotary run with that interpolation, its L being the run's L_tr
    (:func:`rescaled_model_config`).
    """
    from extrap.data import load_tokenizer
    from extrap.model import GPT

    run_dir = RunDir(path)
    if not run_dir.path.is_dir():
        what = "is a file, not a run directory" if run_dir.path.exists() else "does not exist"
        raise ExtrapError(f"run directory {run_dir.path} {what}")
    config = run_dir.read_config()
    ckpt = run_dir.latest()
    if ckpt is None:
        raise ExtrapError(f"{run_dir.path} has no checkpoint yet (train it, or resume it)")
    model_cfg, rope_info = rescaled_model_config(config, run_dir.path, rope, factor)
    model = GPT(model_cfg)
    load_model_weights(model, run_dir, ckpt)
    model.to(device or "cpu").eval()
    if dtype is not None:
        model.compute_dtype = DTYPES[eval_dtype(dtype, device or "cpu")]
    return TrainedRun(
        model=model,
        tokenizer=load_tokenizer(run_dir.path),
        config=config,
        path=run_dir.path,
        step=ckpt.step,
        rope=rope_info,
        dtype=dtype,
    )


def rescaled_model_config(config: RunConfig, path, rope, factor: float | None):
    """``(model config, rope record)``: the run's model config with its rotary PE re-scaled by ``rope``.

    The registry builds the scaled scheme (:meth:`extrap.positional.rotary.Rotary.rescaled`), so the
    model runs the one rotary definition with ``original_max_position`` = the run's L_tr unless the
    request sets it.  ``rope``: the request's text, a :class:`RopeRequest` (its own factor), or None:
    the config is returned as it is and the record is None.
    """
    from extrap import positional
    from extrap.positional.rope_scaling import RopeRequest

    if rope is None:
        if factor is not None:
            raise ExtrapError("a RoPE factor needs a RoPE scaling (rope)")
        return config.model, None
    req = rope if isinstance(rope, RopeRequest) else RopeRequest.parse(rope, factor)
    if req.hf:
        raise ExtrapError(f"RoPE {req.name} is transformers' implementation, for hf: models; give the kind without hf:")
    scheme = positional.get(config.pe)
    if not scheme.rotates:
        raise ExtrapError(f"RoPE re-scaling needs a run trained with a rotary PE (rope, xpos); {path} uses {config.pe}")
    scaled = scheme.rescaled(req.kind, req.factor, config.train_length, req.options)
    info = {
        "rope": req.kind,
        "factor": req.factor,
        "original_max_position": scaled.opts["original_max_position"],
        **({"options": dict(req.options)} if req.options else {}),
        "trained_pe": config.pe,
        "pe": scaled.spec,
    }
    return replace(config.model, pe=scaled.spec), info


def changed_settings(
    saved: RunConfig, model_cfg, train_cfg, ignore: tuple[str, ...] = ()
) -> list[tuple[str, list[str]]]:
    """Settings that differ between a saved run and a resumption of it: (section, names) for each section
    with a difference (``ignore``: train keys)."""
    out = []
    for section, mine, theirs in (("model", model_cfg, saved.model), ("train", train_cfg, saved.train)):
        diff = differing(mine, theirs, (*TrainConfig.RESUMABLE, *ignore) if section == "train" else ())
        if diff:
            out.append((section, diff))
    return out


def differing(mine, theirs, skip: tuple[str, ...] = ()) -> list[str]:
    """The fields of two dataclasses of one type whose values differ (sorted), ``skip`` left out."""
    return sorted(
        f.name for f in fields(mine) if f.name not in skip and getattr(mine, f.name) != getattr(theirs, f.name)
    )


def refuse_changed_settings(saved: RunConfig, model_cfg, train_cfg, ignore: tuple[str, ...] = (), hint: str = ""):
    """ExtrapError naming every setting of a resumption that differs from the saved run (``hint``: appended)."""
    diff = changed_settings(saved, model_cfg, train_cfg, ignore)
    if diff:
        named = "; ".join(f"{sec}: {', '.join(keys)}" for sec, keys in diff)
        raise ExtrapError(f"resume: settings differ from the saved run ({named})" + (f"; {hint}" if hint else ""))

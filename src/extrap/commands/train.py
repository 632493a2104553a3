"""``extrap train``: train a small causal LM with any positional scheme."""

from __future__ import annotations

import os
import sys

from extrap.commands import args as types
from extrap.errors import ExtrapError


def register(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train a causal LM with a positional scheme",
        description="Train a GPT-style LM; checkpoints are safetensors + JSON, resume is exact.",
    )
    p.add_argument(
        "--pe",
        type=types.pe,
        help="positional scheme spec (see `extrap pe list`); default from preset/config, with --init-from the parent's",
    )
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--config", help="YAML or JSON file with 'model' and 'train' sections")
    p.add_argument(
        "--preset",
        help="smoke | cpu | paper: model and training settings (default: cpu). With --init-from the model is the "
        "parent's (a preset's layers, width, heads must be the parent's) and training is the preset's; with "
        "--resume every setting is the run's own (config.json) and a preset, --config or flag must agree with it",
    )
    p.add_argument("--steps", type=int)
    p.add_argument("--train-length", type=int, dest="train_length")
    p.add_argument("--batch-size", type=int, dest="batch_size")
    p.add_argument("--grad-accum", type=int, dest="grad_accum")
    p.add_argument("--lr", type=float)
    p.add_argument("--corpus", help="stdlib | python-docs | shakespeare | text:PATH | hf:NAME")
    p.add_argument("--tokenizer", help="bytes | bpe:V")
    p.add_argument("--seed", type=types.seed)
    p.add_argument("--save-every", type=int, dest="save_every")
    p.add_argument("--positions", help="contiguous | randomized:max=N | pose:target=N,chunks=K")
    p.add_argument(
        "--attention",
        help="full | s2[:ratio=R]: the training attention; s2 is LongLoRA's shifted sparse attention (groups of R x "
        "the training length, half the heads shifted), rotary or NoPE only; evaluation always reads full attention",
    )
    p.add_argument(
        "--task",
        help="passkey | line | topic | a RULER-style task (niah_single, vt, qa1, ...; `extrap task sample`), or a "
        "comma-separated mix: train on their examples, loss on the answer tokens",
    )
    p.add_argument(
        "--task-mix",
        type=float,
        dest="task_mix",
        help="with --task: fraction of batches that are plain LM batches (default 0: task only)",
    )
    types.add_device(p, note="default: the config's, else auto")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its last checkpoint with its own saved settings: no other flag is "
        "needed (a fine-tune's PE and parent included); a setting given that differs from the run's is refused, "
        "except a larger --steps (train further), --device, --threads and --save-every",
    )
    _add_init_arguments(p)
    _add_output_arguments(p)
    p.set_defaults(func=run)


def _add_output_arguments(p) -> None:
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile each transformer block (CUDA only; the first steps pay the compile)",
    )
    p.add_argument(
        "--tensorboard",
        action="store_true",
        help="also write loss and tokens/s as TensorBoard events to RUN_DIR/tb (pip install 'extrap[tensorboard]')",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the final summary as JSON (progress then shows only on a terminal; warnings always)",
    )
    p.add_argument("--csv", metavar="PATH", help="also write the final summary as one CSV row to PATH (atomically)")


def _add_init_arguments(p) -> None:
    """Fine-tuning: --init-from, --rope, --factor, --init-step."""
    p.add_argument(
        "--init-from",
        dest="init_from",
        metavar="RUN",
        help="fine-tune: start from this run's weights (its latest checkpoint) with the same shapes and scheme; "
        "--pe may change the scheme's options (default: the parent's PE), --train-length may not be shorter; "
        "hf:DIR: fine-tune a local Llama-family model (--rope TYPE --factor F) into a new HF folder --out",
    )
    p.add_argument(
        "--rope",
        metavar="KIND[:key=value,...]",
        help="with --init-from: fine-tune with the parent's RoPE re-scaled as `eval --rope` reads it, L = the "
        "parent's L_tr (linear | ntk | dynamic | ntk-by-parts | yarn | truncated | llama3 | longrope); or give the "
        "whole spec with --pe (rope:scaling=yarn,factor=4,original_max_position=L)",
    )
    p.add_argument("--factor", type=types.positive_float, help="with --rope: the scale factor s (default 1)")
    p.add_argument(
        "--init-step", dest="init_step", type=int, metavar="N", help="with --init-from: its checkpoint of step N"
    )


# The flags that set a run's settings (the same names in ModelConfig/TrainConfig).
SETTINGS = (
    "steps",
    "train_length",
    "batch_size",
    "grad_accum",
    "lr",
    "corpus",
    "tokenizer",
    "seed",
    "save_every",
    "positions",
    "attention",
    "device",
    "threads",
    "task",
    "task_mix",
)


def run(args) -> int:
    from extrap.config import read_config_file
    from extrap.train import train

    # found out now, not after the training: a --csv that is a folder, a device, or a file of the run
    types.check_outputs(args, runs=[args.out], inputs=[("--config", args.config)], flags=("csv",))
    config = read_config_file(args.config)
    record = _hf_record(args.out) if args.resume and args.init_from is None else None
    init_from = _init_from(args, config, record is not None)
    if record is not None:  # an hf: fine-tune stopped before it was written whole
        from extrap.run.lineage import InitFrom

        init_from = InitFrom(record.parent.path)
    if init_from is not None and init_from.source.startswith("hf:"):
        return _run_hf(args, config, init_from, record)
    model_cfg, train_cfg = _configs(args, config, init_from)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        import torch.distributed as dist

        backend = "nccl" if train_cfg.device != "cpu" and _cuda() else "gloo"
        dist.init_process_group(backend)
    try:
        # progress: a bar on a terminal, else a log line every 30 s; --json keeps a non-terminal stderr quiet
        progress = not args.json or sys.stderr.isatty()
        summary = train(
            args.out,
            model_cfg,
            train_cfg,
            resume=args.resume,
            progress=progress,
            tensorboard=args.tensorboard,
            init_from=init_from,
            compiled=args.compile,
        )
    finally:
        if distributed:
            _shutdown_distributed()
    if int(os.environ.get("RANK", "0")) == 0:
        _emit(args, _report(args.out, summary))
    return 0


def _configs(args, config: dict, init_from):
    """The settings, later layers winning: the base (the run's own on --resume, the parent's model with
    --init-from, else none), the preset (given, else cpu without a base; a fine-tune's training part always),
    the --config file, the flags.  Resumed, the result must be the run's own settings."""
    from extrap.config import build_configs

    saved, base, where = _base(args, init_from)
    overrides = {k: getattr(args, k) for k in SETTINGS}
    try:
        model_cfg, train_cfg = build_configs(args.pe, args.preset, config, overrides, base)
    except ExtrapError as e:  # say where a bad setting may have come from
        raise ExtrapError(
            f"{e} (settings: {where}" + (f", {args.config}" if args.config else "") + ", command line)"
        ) from None
    if saved is not None:  # every setting that differs, named; more steps extend a run only when asked by name
        from extrap.run import refuse_changed_settings

        steps_given = args.steps is not None or "steps" in (config.get("train") or {})
        more = not steps_given and train_cfg.steps != saved.train.steps
        hint = "give --steps N to train it further" if more else ""
        refuse_changed_settings(saved, model_cfg, train_cfg, ignore=("steps",) if steps_given else (), hint=hint)
    return model_cfg, train_cfg


def _base(args, init_from):
    """The saved config of a run resumed (else None), the settings a run starts from before the preset,
    config and flags (None: none), and where they come from."""
    from dataclasses import asdict

    from extrap.config import PRESETS
    from extrap.hf.finetune_state import RECORD_FILE
    from extrap.run import RunDir

    run = RunDir(args.out)
    record = _hf_record(args.out) if args.resume else None
    if record is not None:  # an hf: fine-tune's training settings (the rest: extrap.hf.finetune checks)
        return None, ({}, asdict(record.train)), f"{args.out}/{RECORD_FILE}"
    if args.resume and run.exists():  # the run's own settings: --resume --out RUN needs no other flag
        saved = run.read_config()
        return saved, (saved.model.to_dict(), asdict(saved.train)), f"{args.out}/config.json"
    if init_from is None:
        return None, None, "preset " + (args.preset or "cpu")
    from extrap.run.lineage import parent_config

    # the parent's model (its shapes, PE and the rest) and tokenizer; training from the preset as for any run
    parent = parent_config(init_from.source)
    train = {**PRESETS[args.preset or "cpu"].train, "tokenizer": parent.tokenizer}
    return None, (parent.model.to_dict(), train), f"parent {init_from.source}, preset {args.preset or 'cpu'}"


def _init_from(args, config: dict, hf_resume: bool = False):
    """The parent of a fine-tune (None: a run from scratch, or resumed); --rope re-scales the parent's PE.
    ``hf_resume``: an hf: fine-tune is resumed (its --rope/--factor, if given, must be the recorded ones)."""
    if args.init_from is None:
        rope = args.rope is not None or args.factor is not None
        if args.resume and (args.init_step is not None or rope and not hf_resume):
            raise ExtrapError("--init-step/--rope/--factor choose a fine-tune's start: a resumed run keeps its own")
        if args.init_step is not None or rope and not hf_resume:
            flag = "--init-step" if args.init_step is not None else "--rope/--factor"
            raise ExtrapError(
                f"{flag} needs --init-from (a scaling from scratch is a --pe spec: "
                "rope:scaling=yarn,factor=4,original_max_position=L)"
            )
        return None
    if args.resume:
        raise ExtrapError("--init-from starts a new run from a parent and --resume continues one: give one of them")
    from extrap.run.lineage import InitFrom, rescaled_parent_pe

    if args.init_from.startswith("hf:"):  # its RoPE is its config's: --rope goes to extrap.hf.finetune
        return InitFrom(args.init_from, args.init_step)
    if args.rope is not None or args.factor is not None:
        if args.pe is not None or "pe" in (config.get("model") or {}):
            raise ExtrapError(
                "--rope re-scales the parent's PE and --pe (or a --config model pe) replaces it: give one of them"
            )
        args.pe = rescaled_parent_pe(args.init_from, args.rope, args.factor)
    return InitFrom(args.init_from, args.init_step)


def _hf_record(out):
    """The record of an hf: fine-tune in progress in ``out`` (None: none); a finished one is kept."""
    from extrap.hf.finetune_state import is_finished, read_record

    if is_finished(out):
        raise ExtrapError(f"{out} holds a finished hf: fine-tune; its result is kept")
    return read_record(out)


def _run_hf(args, config: dict, init_from, record=None) -> int:
    """``--init-from hf:DIR``: fine-tune the HF model and write it as an HF folder (:mod:`extrap.hf.finetune`);
    ``record``: resume that fine-tune, with its settings unless a flag names one (then it must agree)."""
    from extrap.hf.finetune import abf_base, finetune_hf
    from extrap.run.records import TrainReport

    base = abf_base(args.pe) if args.pe is not None else None
    refused = [
        flag
        for flag, given in (
            ("--tokenizer (an hf: model keeps its own)", args.tokenizer is not None),
            ("--attention (an hf: fine-tune trains with full attention)", args.attention is not None),
            ("--tensorboard", args.tensorboard),
            ("--compile", args.compile),
            ("a --config model section", bool(config.get("model"))),
            ("torchrun", int(os.environ.get("WORLD_SIZE", "1")) > 1),
        )
        if given
    ]
    if refused:
        raise ExtrapError(f"--init-from hf: cannot honour {', '.join(refused)}")
    _, train_cfg = _configs(args, config, None)  # the model is the folder's; the preset gives training only
    given = dict(rope=args.rope, factor=args.factor, positions=args.positions, base=base)
    if record is not None:
        given = {k: getattr(record, k) if v is None else v for k, v in given.items()}
    summary = finetune_hf(args.out, init_from, train_cfg, resume=record is not None, **given)
    from extrap.hf.rope_config import read_rope_config

    pe = read_rope_config(args.out).spec
    report = TrainReport(str(args.out), pe, train_cfg.train_length, train_cfg.corpus, train_cfg.seed, None, summary)
    _emit(args, report)
    return 0


def _report(out: str, summary):
    """The final summary with the run it describes: folder, PE, L_tr, corpus and its hash, seed."""
    from extrap.run import RunDir
    from extrap.run.records import TrainReport

    cfg = RunDir(out).read_config()
    return TrainReport(str(out), cfg.pe, cfg.train_length, cfg.corpus, cfg.seed, cfg.corpus_hash, summary)


def _emit(args, report) -> None:
    if args.csv:
        from extrap.results.tables import train_table, write_csv

        write_csv(args.csv, train_table(report))
    if args.json:
        from extrap.io import json_text

        print(json_text(report.to_json(), indent=None))
    else:
        s = report.summary
        speed = f", {s.tokens_per_s:,.0f} tok/s" if s.tokens_per_s is not None else ""
        speed += f", MFU {s.mfu:.1%}" if s.mfu is not None else ""
        print(
            f"trained {report.pe} for {s.step} steps: final loss {s.final_loss:.4f} ({s.seconds:.0f} s{speed}) "
            f"-> {args.out}"
        )


def _shutdown_distributed() -> None:
    """Free the DDP wrapper before its process group: left to interpreter exit, gloo's threads can
    outlive the group and the process aborts ('terminate called without an active exception')."""
    import gc

    import torch.distributed as dist

    gc.collect()  # the DDP wrapper sits in reference cycles; collect it while the group still exists
    dist.destroy_process_group()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()

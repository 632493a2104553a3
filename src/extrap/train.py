"""Training: AdamW, warmup + cosine, clipping, accumulation, exact resume, optional DDP.

What a run directory holds, and how checkpoints are written crash-safely, is owned by
:mod:`extrap.run`; this module only decides what goes into it.
"""

from __future__ import annotations

import logging
import math
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from extrap import throughput as tp
from extrap.config import PRESETS, TrainConfig, build_configs
from extrap.devices import resolve_device
from extrap.errors import ExtrapError
from extrap.io import run_metadata
from extrap.model import GPT, ModelConfig
from extrap.model.budget import check_training_memory
from extrap.model.shifted_sparse import group_size, s2_ratio
from extrap.progress import StepProgress
from extrap.run import RunConfig, RunDir, load_model_weights, model_weights, refuse_changed_settings
from extrap.run.lineage import InitFrom, ParentWeights, check_child, read_parent, reread_parent, start_from_parent
from extrap.run.lock import exclusive
from extrap.run.records import MetricsRecord, TrainingSummary, TrainState
from extrap.version import __version__

log = logging.getLogger(__name__)

__all__ = ["PRESETS", "InitFrom", "TrainConfig", "build_configs", "lr_at", "resolve_device", "train"]


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to ``lr``, then cosine to ``lr * min_lr_ratio`` at the last step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine)


def _dist_info() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _param_groups(model: GPT, weight_decay: float):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        # matrices decay; norms, biases, embeddings' positional parameters do not
        (decay if p.dim() >= 2 and "bias_params" not in name else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@dataclass
class _Session:
    """Everything one training process holds between steps."""

    run_dir: RunDir
    cfg: TrainConfig
    model: GPT
    opt: torch.optim.Optimizer
    sampler: object
    pos_gen: torch.Generator
    device: torch.device
    rank: int
    world: int
    step: int = 0
    flops_per_token: float = 0.0  # extrap.throughput.training_flops_per_token of this model at L_tr
    peak: float | None = None  # the device's peak bf16 FLOP/s (None: no MFU)

    def state(self) -> TrainState:
        """The training state a checkpoint needs for a bit-exact resume (tensors and numbers only)."""
        return TrainState(
            optimizer=self.opt.state_dict(),
            sampler=self.sampler.state_dict(),
            torch_rng=torch.get_rng_state(),
            pos_rng=self.pos_gen.get_state(),
        )

    def restore(self) -> None:
        ckpt = self.run_dir.latest()
        if ckpt is None:
            return
        load_model_weights(self.model, self.run_dir, ckpt)
        state = self.run_dir.read_state(ckpt)
        for group in state.optimizer["param_groups"]:  # this device's kernel, not the one the checkpoint ran
            group["fused"] = tp.fused_adamw(self.device)
        self.opt.load_state_dict(state.optimizer)
        self.sampler.load_state_dict(state.sampler)
        torch.set_rng_state(state.torch_rng)
        self.pos_gen.set_state(state.pos_rng)
        self.step = ckpt.step


def _rank_device(train_cfg: TrainConfig, rank: int, world: int) -> torch.device:
    device = resolve_device(train_cfg.device)
    if world > 1 and device.type == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
    return device


def training_sampler(cfg: TrainConfig, corpus, tokenizer, rank: int, world: int):
    """Deterministic training batches: LM windows, or retrieval examples scored on their answers."""
    from extrap.data import BatchSampler, token_stream

    lm = BatchSampler(token_stream(corpus, tokenizer, "train"), cfg.batch_size, cfg.train_length, cfg.seed, rank, world)
    if not cfg.task:
        return lm
    from extrap.tasks import TaskSampler

    return TaskSampler(
        cfg.task,
        tokenizer,
        cfg.batch_size,
        cfg.train_length,
        cfg.seed,
        rank,
        world,
        filler=corpus,
        split="train",
        lm=lm if cfg.task_mix > 0 else None,
        mix=cfg.task_mix,
    )


def _check_resume(run_dir: RunDir, model_cfg: ModelConfig, train_cfg: TrainConfig, rank: int) -> None:
    """Resume only the run that was saved; a finished run keeps its results unless asked for more steps."""
    saved = run_dir.read_config()
    done = run_dir.read_final()
    if done is not None and train_cfg.steps <= done.step:
        raise ExtrapError(
            f"{run_dir.path} finished training at step {done.step}; its results are kept "
            "(to train it further, resume with more steps)"
        )
    extend = train_cfg.steps > saved.train.steps
    refuse_changed_settings(saved, model_cfg, train_cfg, ignore=("steps",) if extend else ())
    if extend and rank == 0:  # the run now aims further: its config says so, and it is no longer finished
        log.info("%s: extending from %d to %d steps", run_dir.path, saved.train.steps, train_cfg.steps)
        run_dir.write_config(replace(saved, train=replace(saved.train, steps=train_cfg.steps)))
        run_dir.clear_final()


def _parent(run_dir: RunDir, init_from: InitFrom | None, resume: bool) -> ParentWeights | None:
    """The run a fine-tune starts from: the one asked for, or, resuming a fine-tune that was stopped
    before its first checkpoint, the one its config records (refused if its weights changed since)."""
    if init_from is not None:
        if resume:
            raise ExtrapError("a fine-tune from a parent run starts a new run and resume continues one: not both")
        return read_parent(init_from)
    if resume and run_dir.exists() and run_dir.latest() is None:
        saved = run_dir.read_config().parent
        return reread_parent(saved) if saved is not None else None
    return None


def _tokenizer(run_dir: RunDir, train_cfg: TrainConfig, corpus, parent: ParentWeights | None, resume: bool):
    """A fine-tune keeps its parent's tokenizer (a BPE learnt on the parent's corpus), and resumes with its own."""
    from extrap.data import get_tokenizer, load_tokenizer

    if parent is not None:
        return load_tokenizer(parent.path)
    if resume and run_dir.exists() and run_dir.read_config().parent is not None:
        return load_tokenizer(run_dir.path)
    return get_tokenizer(train_cfg.tokenizer, corpus)


def _start(
    run_dir: RunDir, model_cfg: ModelConfig, train_cfg: TrainConfig, resume: bool, init_from: InitFrom | None
) -> _Session:
    """Check the directory, build data, model and optimiser, then restore or record the run."""
    from extrap.data import load_corpus

    rank, world = _dist_info()
    device = _rank_device(train_cfg, rank, world)
    run_dir.check_new_run()
    if rank == 0 and run_dir.path.is_dir():
        run_dir.remove_temporaries()
    if run_dir.exists() and not resume:
        raise ExtrapError(f"{run_dir.path} already holds a run; resume it or choose another output directory")
    parent = _parent(run_dir, init_from, resume)
    if parent is not None:  # before the corpus is read: a fine-tune that cannot start stops at once
        model_cfg.vocab_size = parent.config.model.vocab_size
        check_child(parent, model_cfg, train_cfg)
    if (ratio := s2_ratio(model_cfg.attention)) is not None:  # S²-Attn's groups must tile L: refused before writing
        group_size(train_cfg.train_length, ratio)
    corpus = load_corpus(train_cfg.corpus)
    tokenizer = _tokenizer(run_dir, train_cfg, corpus, parent, resume)
    model_cfg.vocab_size = tokenizer.vocab_size
    if resume and run_dir.exists():
        _check_resume(run_dir, model_cfg, train_cfg, rank)
    check_training_memory(model_cfg, train_cfg, device)  # before any allocation: numbers, not the allocator's error
    torch.manual_seed(train_cfg.seed)
    model = GPT(model_cfg)
    if parent is not None:
        start_from_parent(model, parent)
    model = model.to(device)
    opt = torch.optim.AdamW(
        _param_groups(model, train_cfg.weight_decay),
        lr=train_cfg.lr,
        betas=(train_cfg.beta1, train_cfg.beta2),
        fused=tp.fused_adamw(device),
        foreach=False,
    )
    sampler = training_sampler(train_cfg, corpus, tokenizer, rank, world)
    pos_gen = torch.Generator().manual_seed(train_cfg.seed + 7919 * (rank + 1))
    session = _Session(run_dir, train_cfg, model, opt, sampler, pos_gen, device, rank, world)
    shape = (model_cfg.n_layer, model_cfg.d_model, train_cfg.train_length)
    session.flops_per_token, session.peak = (
        tp.training_flops_per_token(tp.matmul_params(model), *shape),
        tp.peak_flops(device),
    )
    if resume:
        session.restore()
    if session.step == 0 and rank == 0:
        _record_config(run_dir, model_cfg, train_cfg, corpus, tokenizer, world, parent)
    return session


def _record_config(run_dir: RunDir, model_cfg, train_cfg, corpus, tokenizer, world: int, parent) -> None:
    meta = run_metadata(train_cfg.seed, corpus.hash)
    config = RunConfig(
        model=model_cfg,
        train=train_cfg,
        tokenizer=tokenizer.name,
        corpus=corpus.name,
        corpus_hash=corpus.hash,
        seed=train_cfg.seed,
        extrap_version=meta["extrap_version"],
        command=meta["command"],
        world_size=world,
        parent=parent.record if parent is not None else None,
    )
    run_dir.write_config(config)
    tokenizer.save(run_dir.path)


def _step(s: _Session, ddp_model, amp) -> float:
    """One optimiser step over ``grad_accum`` micro-batches; the mean loss of the global batch."""
    cfg = s.cfg
    for g in s.opt.param_groups:
        g["lr"] = lr_at(s.step, cfg)
    loss_sum = 0.0
    for micro in range(cfg.grad_accum):
        x, y = s.sampler.next()
        x, y = x.to(s.device), y.to(s.device)
        positions = s.model.train_positions(x.shape[0], x.shape[1], s.pos_gen, s.device)
        sync = micro == cfg.grad_accum - 1 or s.world == 1
        with amp, nullcontext() if sync else ddp_model.no_sync():
            logits = ddp_model(x, positions).logits
            loss = torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100
            )  # -100: unscored
            (loss / cfg.grad_accum).backward()
        loss_sum += float(loss.detach())
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(s.model.parameters(), cfg.grad_clip)
    s.opt.step()
    s.opt.zero_grad(set_to_none=True)
    s.step += 1
    loss = loss_sum / cfg.grad_accum
    if s.world > 1:  # report the loss of the global batch, not just this rank's share
        t_loss = torch.tensor([loss], dtype=torch.float64, device=s.device)
        dist.all_reduce(t_loss)
        loss = float(t_loss) / s.world
    if not math.isfinite(loss):
        raise ExtrapError(f"training diverged at step {s.step} (loss {loss}); lower the learning rate")
    return loss


def _logged_loss(s: _Session) -> float:
    """The loss logged at the checkpoint's step: the final loss of a run resumed after its last step."""
    if s.rank != 0 or s.step == 0:
        return math.nan
    return next((r.loss for r in s.run_dir.read_metrics() if r.step == s.step), math.nan)


def _record(s: _Session, loss: float, tps: float, writer, bar: StepProgress | None) -> None:
    """Rank 0: metrics line, TensorBoard (when asked for), progress, and a checkpoint when one is due."""
    cfg = s.cfg
    if s.step % cfg.log_every == 0 or s.step == cfg.steps:
        used = tp.mfu(tps, s.flops_per_token, s.peak)
        s.run_dir.append_metrics(MetricsRecord(s.step, loss, lr_at(s.step - 1, cfg), tps, used))
        if writer is not None:
            writer.add_scalar("train/loss", loss, s.step)
            writer.add_scalar("train/tokens_per_s", tps, s.step)
            if used is not None:
                writer.add_scalar("train/mfu", used, s.step)
    if bar is not None:
        bar.update(s.step, loss)
    if s.step % cfg.save_every == 0 or s.step == cfg.steps:
        s.run_dir.save_checkpoint(s.step, model_weights(s.model), s.state())


def train(
    run_dir: str | os.PathLike,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    resume: bool = False,
    progress: bool = True,
    stop_after: int | None = None,
    tensorboard: bool = False,
    init_from: InitFrom | str | os.PathLike | None = None,
    compiled: bool = False,
) -> TrainingSummary:
    """Train (or resume) a run; returns the final summary that is also written to final.json.

    ``compiled``: torch.compile each block (:func:`extrap.throughput.compile_blocks`; CUDA only, refused
    before anything is written elsewhere).  Each metrics line and the summary carry tokens/s and MFU
    (:mod:`extrap.throughput`; None on a CPU or a card without a known peak).

    ``progress``: a bar when stderr is a terminal, else an INFO log line now and then
    (:mod:`extrap.progress`).  ``tensorboard``: also write loss and tokens/s as TensorBoard
    events to ``RUN_DIR/tb`` (needs the ``tensorboard`` package; ExtrapError before anything
    is written when it is missing).  The process that writes the run (rank 0) holds the run
    directory's lock throughout: a second writer stops at once, naming this one.

    ``init_from``: fine-tune, a new run whose weights start from another run's checkpoint
    (:class:`~extrap.run.lineage.InitFrom`: a run directory and optionally a step; a path means its latest
    checkpoint).  ``model_cfg`` may change the parent's PE options (a RoPE base or scaling), not its scheme
    or shapes, and ``train_cfg`` may not train shorter than the parent; the child's config records the
    parent (path, step, sha256 of its weights, PE).  Not together with ``resume``: a fine-tune is resumed
    like any run, and one stopped before its first checkpoint starts again from the parent it recorded.
    """
    writer_class = _summary_writer() if tensorboard else None
    if compiled:
        tp.check_compile(resolve_device(train_cfg.device))
    if init_from is not None and not isinstance(init_from, InitFrom):
        init_from = InitFrom(str(init_from))
    rank, _ = _dist_info()
    with exclusive(run_dir) if rank == 0 else nullcontext():
        return _train(
            RunDir(run_dir), model_cfg, train_cfg, resume, progress, stop_after, writer_class, init_from, compiled
        )


def _train(
    run_dir: RunDir, model_cfg, train_cfg, resume: bool, progress: bool, stop_after, writer_class, init_from, compiled
) -> TrainingSummary:
    s = _start(run_dir, model_cfg, train_cfg, resume, init_from)
    if train_cfg.threads:
        torch.set_num_threads(train_cfg.threads)
    ddp_model = s.model
    if s.world > 1:
        ddp_model = torch.nn.parallel.DistributedDataParallel(
            s.model, device_ids=[s.device.index] if s.device.type == "cuda" else None
        )
    if s.rank == 0:
        s.run_dir.truncate_metrics(s.step)
    writer = writer_class(log_dir=str(s.run_dir.path / "tb")) if writer_class and s.rank == 0 else None
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if s.device.type == "cuda" else nullcontext()
    if compiled:
        tp.compile_blocks(s.model)
    t_start, loss, first = time.perf_counter(), _logged_loss(s), s.step
    ntok = train_cfg.batch_size * train_cfg.train_length * train_cfg.grad_accum * s.world
    bar = StepProgress(train_cfg.steps, s.step, ntok) if progress and s.rank == 0 else None
    s.model.train()
    while s.step < train_cfg.steps and (stop_after is None or s.step < stop_after):
        t0 = time.perf_counter()
        loss = _step(s, ddp_model, amp)
        if s.rank == 0:
            _record(s, loss, ntok / max(1e-9, time.perf_counter() - t0), writer, bar)
    for closing in (bar, writer):
        if closing is not None:
            closing.close()
    seconds = time.perf_counter() - t_start
    tps = (s.step - first) * ntok / seconds if s.step > first else None  # this process's
    summary = TrainingSummary(
        step=s.step,
        final_loss=loss,
        seconds=seconds,
        tokens=s.step * ntok,  # trained in all, across resumptions
        params=s.model.num_params(),
        extrap_version=__version__,
        tokens_per_s=tps,
        mfu=None if tps is None else tp.mfu(tps, s.flops_per_token, s.peak),
    )
    if s.rank == 0 and s.step >= train_cfg.steps:
        s.run_dir.write_final(summary)
    return summary


def _summary_writer():
    """TensorBoard's SummaryWriter class, or a one-line ExtrapError naming the extra to install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ExtrapError(
            "TensorBoard logging needs the tensorboard package: pip install 'extrap[tensorboard]'"
        ) from None
    return SummaryWriter

"""What the extension study measures for one method on one model, with rope-base's code
(:mod:`extrap.experiments.rope_base.measure`).

At each length L the run is read with the method (:func:`.methods.loaded`: a scaling's factor
depends on L), then:

* last-token perplexity over the same targets at every length (those of the longest length,
  ``evaluate(longest=...)``), so that :func:`extrap.evaluate.verdict.verdict` pairs them target by target:
  |Δppl|/ppl against the method's own L_tr with its paired standard error (000 Definition 0.1), and the
  **measured break**, the first length whose ratio exceeds δ outside its 95% interval
  (:func:`extrap.experiments.rope_base.measure.measured_break`);
* passkey exact match (greedy) of rope-base's examples
  (:func:`extrap.experiments.rope_base.measure.passkey_by_distance`), and the
  **passkey fall-off**, the first length whose accuracy is below ``fall_fraction`` × the accuracy at L_tr
  (:func:`passkey_falloff`; None when nothing falls so low or the accuracy at L_tr is 0);
* whether the theory keeps L in distribution (:func:`.methods.in_distribution`).
"""

from __future__ import annotations

from dataclasses import dataclass

from extrap.experiments.extension.methods import Windowed, closed_form, in_distribution, loaded, study_method
from extrap.experiments.extension.results import ExtensionMethod
from extrap.experiments.rope_base import measure
from extrap.experiments.rope_base.results import PasskeyLength
from extrap.results import EvalReport, LengthResult

PROTOCOL = "last-token"


@dataclass(frozen=True)
class MethodJob:
    """One method to measure on the run at ``source`` (picklable: a worker process receives it)."""

    name: str
    source: str  # a run folder or hf:PATH
    train_length: int
    lengths: tuple[int, ...]  # ascending, L_tr first
    targets: int  # last-token targets per length
    passkey_n: int  # passkey examples per length (0: no passkey)
    delta: float
    fall_fraction: float
    threads: int = 1
    device: str | None = None


def passkey_falloff(passkey: tuple[PasskeyLength, ...], train_length: int, fraction: float) -> int | None:
    """First length past L_tr whose accuracy < ``fraction`` × the accuracy at L_tr (None: none, or 0 at L_tr)."""
    ref = next((p.accuracy for p in passkey if p.length == train_length), None)
    if not ref:
        return None
    return next((p.length for p in passkey if p.length > train_length and (p.accuracy or 0.0) < fraction * ref), None)


def predicted_length(job: MethodJob, flags: list[bool | None]) -> int | None:
    """The longest length in distribution: the last measured length before the first one the theory puts
    out, or the method's closed form where it has one and it is shorter (None: no bound found)."""
    out = next((i for i, ok in enumerate(flags) if ok is False), None)
    measured = None if out is None else (job.lengths[out - 1] if out else job.train_length)
    method = study_method(job.name)
    closed = closed_form(method, job.train_length) if method.kind in ("none", "extend") else None
    return min((x for x in (measured, closed) if x is not None), default=None)


def at_length(job: MethodJob, stream, length: int) -> tuple[LengthResult, PasskeyLength, bool | None, str]:
    """One length: the last-token result, the passkey accuracy and the theory's verdict."""
    from extrap.evaluate.protocols import evaluate

    method = study_method(job.name)
    run = loaded(job.source, method, length, job.train_length, job.device)
    W = method.window(job.train_length)
    (result,) = evaluate(
        run.model, stream, [length], PROTOCOL, targets=job.targets, longest=max(job.lengths),
        window_for=(lambda _: W) if W else None,
    )  # fmt: skip
    model = Windowed(run.model, W) if W else run.model
    edges = measure.distance_edges(job.train_length, max(job.lengths))
    if job.passkey_n:
        (passkey,) = measure.passkey_by_distance(model, run.tokenizer, (length,), job.passkey_n, edges)
    else:
        passkey = PasskeyLength(length, 0, 0)
    inside, basis = in_distribution(method, run, length, job.train_length)
    return result, passkey, inside, basis


def as_run(method, train_length: int) -> str | None:
    """What ran, in words: the extend spec with its defaults, the scaling and its factor, the window."""
    from extrap.extend import parse

    if method.kind == "extend":
        return parse(method.spec, train_length).spec
    if method.kind == "scaling":
        return f"{method.spec}, factor " + ("1 (θ set by n / L_tr)" if method.spec == "dynamic" else "L / L_tr")
    return f"window={train_length}" if method.kind == "window" else None


def measure_method(job: MethodJob) -> tuple[ExtensionMethod, EvalReport]:
    """Every length of ``job``'s method: its record and its last-token report (the per-token losses kept)."""
    import torch

    import extrap
    from extrap.evaluate.driver import evaluation_stream
    from extrap.evaluate.settings import EvalSettings

    torch.set_num_threads(job.threads)
    plain = extrap.load(job.source, job.device)
    stream, _ = evaluation_stream(plain, EvalSettings(job.lengths, PROTOCOL, targets=job.targets), list(job.lengths))
    rows = [at_length(job, stream, L) for L in job.lengths]
    results = tuple(r for r, _, _, _ in rows)
    passkey = tuple(p for _, p, _, _ in rows)
    flags = [f for _, _, f, _ in rows]
    ppl = measure.length_rows(results, job.train_length, job.delta)
    spec = as_run(study_method(job.name), job.train_length)
    method = study_method(job.name)
    record = ExtensionMethod(
        name=job.name,
        kind=method.kind,
        spec=spec,
        ppl=ppl,
        passkey=passkey,
        in_distribution=tuple(flags),
        basis=rows[-1][3],
        predicted_length=predicted_length(job, flags),
        measured_break=measure.measured_break(ppl),
        passkey_falloff=passkey_falloff(passkey, job.train_length, job.fall_fraction),
    )
    report = EvalReport(
        run=job.source, pe=f"{plain.pe}+{job.name}", protocol=PROTOCOL, train_length=job.train_length,
        delta=job.delta, results=results,
    )  # fmt: skip
    return record, report

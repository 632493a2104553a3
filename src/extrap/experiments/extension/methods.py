"""The methods of the extension study: how each reads one trained RoPE model at one length, and what the
theory predicts for it.

Four kinds, each applied by the code its command-line flag runs (no second implementation here):

* ``none``: the model as trained;
* frequency scalings at inference (``extrap.load(rope=KIND, factor=s)``, README "RoPE scaling at
  inference"): ``pi`` (linear, Chen et al. 2023), ``ntk``, ``yarn`` and ``llama3`` with s = L / L_tr at each
  length L (at L_tr, s = 1 is the identity, so the model as trained runs); ``dynamic`` with s = 1, since it
  sets its own s' = n / L_tr from the sequence length n (emozilla 2023);
* training-free extensions (:mod:`extrap.extend`, ``--extend``) with their defaults scaled to L_tr;
  ``sinks`` is StreamingLLM's 4 sinks and the last L_tr − 4 keys;
* ``window``: the last W = L_tr keys (``--window``), no sinks: the same L_tr keys per query as ``sinks``.

Predicted in-distribution length, with the extend theory's definition (every relative distance RoPE sees
is at most L_tr − 1; :func:`extrap.extend.analyse_extension`): ``none`` L_tr, ``window`` any length (its
largest distance is W − 1), an extension its closed form.  A frequency scaling changes the angles rather
than the distances, so its lengths are judged by ``extrap theory rope``'s definition (every pair turns only
angles training saw, :func:`extrap.theory.rope.analyse_rope`) on the scaled scheme of each length.  With
s = L / L_tr, linear interpolation puts the last position at (L − 1)/s = L_tr − 1/s, past L_tr − 1: PI, and
YaRN and llama3 through their interpolated low frequencies, stay in distribution only up to s·(L_tr − 1) + 1,
so the definition puts them just out at every L > L_tr (NTK and dynamic further out); it is reported as is.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from extrap.errors import ExtrapError

SCALINGS = {"pi": "linear", "ntk": "ntk", "dynamic": "dynamic", "yarn": "yarn", "llama3": "llama3"}
EXTENSIONS = ("rerope", "leaky-rerope", "self-extend", "dca", "lm-infinite", "string", "sinks")
NAMES = ("none", *SCALINGS, *EXTENSIONS, "window")


@dataclass(frozen=True)
class StudyMethod:
    """One method of the study: ``kind`` none | scaling | extend | window; ``spec``: the rope kind or extend spec."""

    name: str
    kind: str
    spec: str | None = None

    def factor(self, length: int, train_length: int) -> float | None:
        """The scaling factor at ``length`` (None: the model as trained, the identity of every scaling at L_tr)."""
        if self.kind != "scaling" or length <= train_length:
            return None
        return 1.0 if self.spec == "dynamic" else length / train_length

    def window(self, train_length: int) -> int | None:
        return train_length if self.kind == "window" else None


def study_method(name: str) -> StudyMethod:
    """The method called ``name`` (one of :data:`NAMES`)."""
    if name == "none":
        return StudyMethod(name, "none")
    if name in SCALINGS:
        return StudyMethod(name, "scaling", SCALINGS[name])
    if name in EXTENSIONS:
        return StudyMethod(name, "extend", name)
    if name == "window":
        return StudyMethod(name, "window")
    raise ExtrapError(f"extension: unknown method {name!r} (choose from {', '.join(NAMES)})")


def check_methods(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The methods, in order and each once; ExtrapError names the first unknown one."""
    names = tuple(dict.fromkeys(names))
    if not names:
        raise ExtrapError("extension: no method given")
    for n in names:
        study_method(n)
    return names


def loaded(source: str, method: StudyMethod, length: int, train_length: int, device: str | None):
    """The run at ``source`` read with ``method`` at ``length`` (a fresh load: scalings differ per length)."""
    import extrap
    from extrap.extend import extend_run

    factor = method.factor(length, train_length)
    options = {"rope": method.spec, "factor": factor} if factor is not None else {}
    run = extrap.load(source, device, **options)
    if method.kind == "extend":
        extend_run(run, method.spec)
    return run


class Windowed(torch.nn.Module):
    """``model`` whose every call attends to its last ``window`` keys (``model(x, window=W)``)."""

    def __init__(self, model, window: int):
        super().__init__()
        self.model, self.window = model, window

    def forward(self, x, **kw):
        return self.model(x, window=self.window, **kw)


def in_distribution(method: StudyMethod, run, length: int, train_length: int) -> tuple[bool | None, str]:
    """(whether ``method`` on the loaded ``run`` keeps ``length`` in distribution, the definition used)."""
    from extrap.extend import analyse_extension
    from extrap.theory.rope import analyse_rope

    if method.kind == "none":
        return length <= train_length, "distance"
    if method.kind == "window":
        return True, "distance"
    if method.kind == "extend":
        return analyse_extension(method.spec, train_length, length).in_distribution, "distance"
    if method.factor(length, train_length) is None:
        return True, "angles"
    try:
        limit = analyse_rope(run.pe, run.model.shape.head_dim, train_length, length).in_distribution_length
    except ExtrapError:  # an hf: model's pe is not a registry spec
        return None, "angles"
    return limit is None or limit >= length, "angles"


def closed_form(method: StudyMethod, train_length: int) -> int | None:
    """The length up to which a distance-map method stays in distribution (None: any length, or not closed)."""
    from extrap.extend import parse

    if method.kind == "none":
        return train_length
    if method.kind == "extend":
        up_to = parse(method.spec, train_length).usable_length()
        return None if up_to == float("inf") else int(up_to)
    return None

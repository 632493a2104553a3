"""The records of 004's alignment: what a probe, Algorithm 1, the closed forms and ``extrap align`` return.

Each is a frozen dataclass with one ``to_json()`` (exactly the JSON that ``extrap align --json`` and the
alignment study print and store) and one ``from_json()`` (reads what earlier versions wrote; unknown keys
are ignored).  A per-layer τ is a tuple here and a list in the JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from extrap.align.formulas import DEFAULT_GRID, SEARCH_MODES, Prop1, Search, SoftmaxStat, check_mode

Tau = float | tuple[float, ...]  # one τ, or one per layer


def tau_json(tau: Tau | None) -> float | list[float] | None:
    """A τ as the JSON holds it: a number, a list (one per layer) or null."""
    return list(tau) if isinstance(tau, tuple) else tau


def tau_of(value) -> Tau | None:
    """A τ read from JSON (a list becomes a tuple)."""
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Stats:
    """Average P_max and entropy over all softmax rows, overall and per layer."""

    pmax: float
    entropy: float
    layers: tuple[SoftmaxStat, ...]  # per layer probed
    rows: int  # rows averaged per layer

    def get(self, mode: str, layer: int | None = None) -> float:
        check_mode(mode, SEARCH_MODES)
        return getattr(self, mode) if layer is None else self.layers[layer].get(mode)

    def to_json(self) -> dict:
        return {
            "pmax": self.pmax,
            "entropy": self.entropy,
            "rows_per_layer": self.rows,
            "layers": [v.to_json() for v in self.layers],
        }

    @classmethod
    def from_json(cls, d: dict) -> Stats:
        layers = tuple(SoftmaxStat.from_json(v) for v in d.get("layers") or ())
        return cls(pmax=d["pmax"], entropy=d["entropy"], layers=layers, rows=d.get("rows_per_layer", 0))


@dataclass(frozen=True)
class LengthStats:
    """:class:`Stats` at one length (004 Table 1: the reference at L_tr, or one row of ``dispersion``)."""

    length: int
    stats: Stats

    def to_json(self) -> dict:
        return {"length": self.length, **self.stats.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> LengthStats:
        return cls(length=d["length"], stats=Stats.from_json(d))


@dataclass(frozen=True)
class Algorithm1:
    """004 Algorithm 1 at one L_ex: one global search, or one search per layer (greedy, layer by layer).

    ``target``: the statistic at L_tr, τ = 1 (all layers).  ``tau``, ``grid_tau``: one value, or a tuple per layer.
    ``brief``: a summary without the curves (:meth:`summary`, what the alignment study stores).
    """

    target: float
    search: Search | None = None  # global
    layers: tuple[Search, ...] = ()  # per layer, in layer order
    brief: bool = False

    @property
    def per_layer(self) -> bool:
        return bool(self.layers)

    @property
    def tau(self) -> Tau:
        return tuple(s.tau for s in self.layers) if self.layers else self.search.tau

    @property
    def grid_tau(self) -> Tau:
        return tuple(s.grid_tau for s in self.layers) if self.layers else self.search.grid_tau

    @property
    def at_grid_edge(self) -> bool:
        return any(s.at_grid_edge for s in self.layers) if self.layers else self.search.at_grid_edge

    def summary(self) -> Algorithm1:
        """The picks without the curves (what the alignment study stores)."""
        search = self.search.summary() if self.search else None
        return Algorithm1(self.target, search, tuple(s.summary() for s in self.layers), brief=True)

    def to_json(self) -> dict:
        if not self.layers:
            return self.search.to_json()
        head = {"tau": list(self.tau), "grid_tau": list(self.grid_tau), "target": self.target}
        if self.brief:  # the study's summary: the layers' picks only, unnumbered
            return {**head, "at_grid_edge": self.at_grid_edge, "layers": [s.to_json() for s in self.layers]}
        layers = [{"layer": i, **s.to_json()} for i, s in enumerate(self.layers)]
        return {**head, "layers": layers, "at_grid_edge": self.at_grid_edge}

    @classmethod
    def from_json(cls, d: dict) -> Algorithm1:
        if "layers" in d:
            layers = tuple(Search.from_json(v) for v in d["layers"])
            return cls(d["target"], layers=layers, brief=any(s.curve is None for s in layers))
        search = Search.from_json(d)
        return cls(d["target"], search=search, brief=search.curve is None)


@dataclass(frozen=True)
class ClosedForms:
    """004 §6 at one L_ex, from layer 0 at τ = 1: σ and l_max at L_tr and L_ex, P, Prop. 1 (its coefficients,
    roots, peak and status; ``prop1_note`` says why there is no root), Prop. 2 and the log-length rule."""

    sigma_tr: float | None = None
    sigma_ex: float | None = None
    lmax_tr: float | None = None
    lmax_ex: float | None = None
    P: float | None = None
    P_softmax: float | None = None
    A: float | None = None
    B: float | None = None
    C: float | None = None
    prop1: float | None = None
    prop1_status: str | None = None
    prop1_roots: tuple[float, ...] = ()
    prop1_peak_tau: float | None = None
    prop1_peak_pmax: float | None = None
    prop1_note: str | None = None
    prop1_softmax_P: float | None = None
    prop2: float | None = None
    log_length: float | None = None

    @classmethod
    def of(cls, p1: Prop1, length: int, sigma: tuple[float, float], lmax: tuple[float, float], **taus) -> ClosedForms:
        """From Prop. 1 solved at L_ex = ``length``, σ and l_max at (L_tr, L_ex), and the other τs
        (``P_softmax``, ``prop1_softmax_P``, ``prop2``, ``log_length``)."""
        return cls(
            sigma_tr=sigma[0],
            sigma_ex=sigma[1],
            lmax_tr=lmax[0],
            lmax_ex=lmax[1],
            P=p1.P,
            A=p1.A,
            B=p1.B,
            C=p1.C,
            prop1=p1.tau,
            prop1_status=p1.status,
            prop1_roots=p1.roots,
            prop1_peak_tau=p1.peak_tau,
            prop1_peak_pmax=p1.peak_pmax,
            prop1_note=None if p1.tau is not None else p1.explain(length),
            **taus,
        )

    def tau(self, mode: str) -> float | None:
        """The τ of a closed-form mode: prop1, prop2 or log-length."""
        return {"prop1": self.prop1, "prop2": self.prop2, "log-length": self.log_length}[mode]

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**out, "prop1_roots": list(self.prop1_roots)}

    @classmethod
    def from_json(cls, d: dict) -> ClosedForms:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in names}
        if values.get("prop1") is None and "prop1_status" not in d and "prop1_closest" in d:
            values["prop1_status"] = "no valid root"  # written before the status was recorded
        return cls(**{**values, "prop1_roots": tuple(d.get("prop1_roots") or ())})


@dataclass(frozen=True)
class LogLengthForm:
    """Where probing is capped (O(L²)): only the log-length rule, and why (the alignment study's ``closed_forms``)."""

    log_length: float
    note: str

    @property
    def prop1_status(self) -> None:
        """Prop. 1 was not solved (nothing was probed)."""
        return None

    def tau(self, mode: str) -> float | None:
        return self.log_length if mode == "log-length" else None

    def to_json(self) -> dict:
        return {"log_length": self.log_length, "note": self.note}

    @classmethod
    def from_json(cls, d: dict) -> LogLengthForm:
        return cls(log_length=d["log_length"], note=d.get("note", ""))


def read_closed_forms(value) -> ClosedForms | LogLengthForm | None:
    """Closed forms as stored: the full set, only the log-length rule beyond the probe cap, or null."""
    if not isinstance(value, dict):
        return None
    capped = "note" in value and "sigma_tr" not in value
    return (LogLengthForm if capped else ClosedForms).from_json(value)


@dataclass(frozen=True)
class AlignSettings:
    """What ``extrap align`` / :func:`extrap.align.align_report` is asked: L_tr, the L_ex, the mode and the search."""

    train_length: int
    lengths: tuple[int, ...]
    mode: str = "pmax"  # pmax | entropy | log-length | prop1 | prop2
    per_layer: bool = False  # Algorithm 1 layer by layer (pmax / entropy only)
    segments: int = 4  # segments of the stream averaged per length
    grid: tuple[float, ...] = DEFAULT_GRID
    refine: bool = True  # bisect between grid points
    max_length: int | None = None  # cap on probed lengths (None: MAX_PROBE_LENGTH)

    def __post_init__(self):
        object.__setattr__(self, "lengths", tuple(int(L) for L in self.lengths))
        object.__setattr__(self, "grid", tuple(float(t) for t in self.grid))


@dataclass(frozen=True)
class LengthReport:
    """One L_ex of ``extrap align``: the τ, how it was found, and P_max / H before and after; or the failure."""

    length: int
    tau: Tau | None = None
    closed_form: ClosedForms | None = None
    algorithm1: Algorithm1 | None = None
    note: str | None = None  # why a closed-form mode gives no τ
    before: Stats | None = None
    after: Stats | None = None
    error: str | None = None  # this length failed; the others are kept

    def to_json(self) -> dict:
        if self.error is not None:
            return {"length": self.length, "tau": None, "error": self.error}
        out: dict = {"length": self.length, "closed_form": self.closed_form.to_json()}
        if self.algorithm1 is not None:
            out["algorithm1"] = self.algorithm1.to_json()
        if self.note is not None:
            out["note"] = self.note
        out["tau"] = tau_json(self.tau)
        out["before"] = self.before.to_json()
        out["after"] = self.after.to_json() if self.after is not None else None
        return out

    @classmethod
    def from_json(cls, d: dict) -> LengthReport:
        def opt(kind, key):
            return kind.from_json(d[key]) if isinstance(d.get(key), dict) else None

        return cls(
            length=d["length"],
            tau=tau_of(d.get("tau")),
            closed_form=opt(ClosedForms, "closed_form"),
            algorithm1=opt(Algorithm1, "algorithm1"),
            note=d.get("note"),
            before=opt(Stats, "before"),
            after=opt(Stats, "after"),
            error=d.get("error"),
        )


@dataclass(frozen=True)
class AlignReport:
    """``extrap align``: the settings, the reference statistics at L_tr, and one :class:`LengthReport` per L_ex."""

    train_length: int
    mode: str
    per_layer: bool
    segments: int
    grid: tuple[float, ...]
    refine: bool
    reference: LengthStats
    lengths: tuple[LengthReport, ...]

    def to_json(self) -> dict:
        return {
            "train_length": self.train_length,
            "mode": self.mode,
            "per_layer": self.per_layer,
            "segments": self.segments,
            "grid": list(self.grid),
            "refine": self.refine,
            "reference": self.reference.to_json(),
            "lengths": [r.to_json() for r in self.lengths],
        }

    @classmethod
    def from_json(cls, d: dict) -> AlignReport:
        return cls(
            train_length=d["train_length"],
            mode=d["mode"],
            per_layer=d.get("per_layer", False),
            segments=d["segments"],
            grid=tuple(d.get("grid") or DEFAULT_GRID),
            refine=d.get("refine", True),
            reference=LengthStats.from_json(d["reference"]),
            lengths=tuple(LengthReport.from_json(r) for r in d.get("lengths") or ()),
        )


@dataclass(frozen=True)
class AlignRun:
    """``extrap align --json``: which run, split and step were aligned, and the report."""

    run: str
    pe: str
    split: str
    step: int | None
    report: AlignReport

    def to_json(self) -> dict:
        return {"run": self.run, "pe": self.pe, "split": self.split, "step": self.step, **self.report.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> AlignRun:
        return cls(run=d["run"], pe=d["pe"], split=d["split"], step=d.get("step"), report=AlignReport.from_json(d))


def per_layer_taus(tau: Tau, n_layer: int) -> list[float]:
    """One τ per layer, from one τ or a per-layer tuple."""
    return list(tau) if isinstance(tau, Sequence) else [tau] * n_layer

"""JSON records: the dataclasses of ``results.json``, read tolerantly and written back unchanged.

A :class:`Record` reads every field it declares from a dict (a missing key keeps the
field's default, so a partial or older file still loads) and keeps the keys it does
not declare in ``extra``, so that writing it back loses nothing.  Fields whose values
are records themselves say how to read and write them with :func:`one`, :func:`listed`
and :func:`mapped`.  Every record, a :class:`Record` or a frozen one, reads itself with ``from_json``
and writes itself with ``to_json``; a frozen one may write and read its plain fields with :func:`record_json`
and :func:`record_fields`, or take both from :class:`FlatRecord`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self


def _write(record) -> Any:
    return record.to_json()


def _record_or_none(cls) -> Callable[[Any], Any]:
    return lambda v: cls.from_json(v) if isinstance(v, dict) else None


def one(cls, *, omit: bool = False):
    """A field holding one ``cls`` record, or None (then left out of the JSON when ``omit``)."""
    return field(default=None, metadata={"load": _record_or_none(cls), "dump": _write, "omit": omit})


def listed(cls, *, omit: bool = False):
    """A field holding a list of ``cls`` records (JSON: a list of objects)."""
    return field(
        default_factory=list,
        metadata={
            "load": lambda v: [cls.from_json(x) for x in v] if isinstance(v, list) else [],
            "dump": lambda v: [_write(x) for x in v],
            "omit": omit,
        },
    )


def mapped(cls, depth: int = 1, *, omit: bool = False):
    """A field holding {name: record} (``depth`` 2: {name: {name: record}})."""

    def load(v, d=depth):
        if not isinstance(v, dict):
            return {}
        return {str(k): (cls.from_json(x) if d == 1 else load(x, d - 1)) for k, x in v.items()}

    def dump(v, d=depth):
        return {k: (_write(x) if d == 1 else dump(x, d - 1)) for k, x in v.items()}

    return field(default_factory=dict, metadata={"load": load, "dump": dump, "omit": omit})


def plain(default: Any = None, *, factory: Callable[[], Any] | None = None, omit: bool = False):
    """A JSON value kept as it is; ``omit``: left out of the JSON when None or empty."""
    if factory is not None:
        return field(default_factory=factory, metadata={"omit": omit})
    return field(default=default, metadata={"omit": omit})


def as_mapping(d: Any) -> Mapping:
    """``d`` when it is a JSON object, else an empty one (a missing or malformed value reads as empty)."""
    return d if isinstance(d, Mapping) else {}


def finite_number(x: Any) -> float | None:
    """A finite JSON number as a float (None for NaN, infinity and non-numbers, as failed lengths were once written)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def json_value(v: Any) -> Any:
    """A field's JSON: a record by its own ``to_json``, a tuple or list item by item, anything else as it is."""
    if hasattr(v, "to_json"):
        return v.to_json()
    return [json_value(x) for x in v] if isinstance(v, (list, tuple)) else v


def record_json(record) -> dict:
    """A frozen dataclass record's JSON: every field in declaration order (:func:`json_value`)."""
    return {f.name: json_value(getattr(record, f.name)) for f in fields(record)}


def record_fields(cls, d: Any) -> dict:
    """``cls``'s fields read from JSON object ``d`` as they are (a missing key reads as None)."""
    d = as_mapping(d)
    return {f.name: d.get(f.name) for f in fields(cls)}


class FlatRecord:
    """Base of a frozen dataclass record whose JSON is its fields in order (:func:`record_json`), read back
    as they are (:func:`record_fields`: unknown keys are ignored, a missing key reads as None)."""

    def to_json(self) -> dict:
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> Self:
        return cls(**record_fields(cls, d))


@dataclass
class Record:
    """Base of every results record: :meth:`from_json` and :meth:`to_json`, unknown keys kept in ``extra``."""

    extra: dict = field(default_factory=dict, repr=False, kw_only=True)

    @classmethod
    def from_json(cls, d: Any):
        d = d if isinstance(d, dict) else {}
        declared = [f for f in fields(cls) if f.name != "extra"]
        values = {}
        for f in declared:
            if f.name in d:
                load = f.metadata.get("load")
                values[f.name] = load(d[f.name]) if load else d[f.name]
        names = {f.name for f in declared}
        return cls(**values, extra={k: v for k, v in d.items() if k not in names})

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            v = getattr(self, f.name)
            if f.metadata.get("omit") and (v is None or v == [] or v == {}):
                continue
            dump = f.metadata.get("dump")
            out[f.name] = dump(v) if dump and v is not None else v
        out.update(self.extra)
        return out

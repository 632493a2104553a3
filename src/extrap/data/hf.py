"""Hugging Face datasets as corpora (``hf:NAME[:CONFIG]``).

``datasets`` is an optional dependency (``pip install 'extrap[hf]'``) and is
imported only here, only when such a corpus is asked for.  NAME may be a hub
dataset or a local folder: one written by ``save_to_disk`` is read with
``load_from_disk``, any other folder with ``load_dataset`` (e.g. a folder of
parquet/json/text files), so everything can be used offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extrap.errors import ExtrapError

TEXT_COLUMN = "text"
_SAVED_MARKERS = ("dataset_dict.json", "state.json")


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``hf:NAME[:CONFIG]`` -> (NAME, CONFIG).  A NAME that is an existing path keeps its colons."""
    rest = spec[len("hf:") :] if spec.startswith("hf:") else spec
    if not rest:
        raise ExtrapError("corpus 'hf:' needs a dataset, e.g. hf:wikitext:wikitext-103-raw-v1")
    if Path(rest).expanduser().exists() or ":" not in rest:
        return rest, None
    name, _, config = rest.rpartition(":")
    return name, (config or None)


def _import_datasets() -> Any:
    try:
        import datasets
    except ImportError as e:
        raise ExtrapError("hf: corpora need the 'datasets' package; run `pip install 'extrap[hf]'`") from e
    return datasets


def _open(name: str, config: str | None) -> Any:
    datasets = _import_datasets()
    local = Path(name).expanduser()
    try:
        if local.is_dir() and any((local / m).is_file() for m in _SAVED_MARKERS):
            return datasets.load_from_disk(str(local))
        return datasets.load_dataset(str(local) if local.is_dir() else name, config)
    except ExtrapError:
        raise
    except Exception as e:  # the library raises many types (network, missing config, bad files)
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ExtrapError(
            f"could not load Hugging Face dataset {name!r}{f' config {config!r}' if config else ''}: {msg}; "
            "check the name/config and network access, or use the stdlib corpus"
        ) from e


def load_splits(name: str, config: str | None) -> dict[str, list[str]]:
    """Text documents per split.  A single un-split dataset counts as ``train``."""
    ds = _open(name, config)
    parts = dict(ds.items()) if hasattr(ds, "keys") else {"train": ds}
    out: dict[str, list[str]] = {}
    for split, part in parts.items():
        if TEXT_COLUMN not in part.column_names:
            raise ExtrapError(
                f"dataset {name!r} split {split!r} has no {TEXT_COLUMN!r} column "
                f"(columns: {', '.join(part.column_names)}); use a dataset with a 'text' column"
            )
        out[str(split)] = [t for t in part[TEXT_COLUMN] if isinstance(t, str)]
    if "validation" not in out and "valid" in out:
        out["validation"] = out.pop("valid")
    return {s: out[s] for s in ("train", "validation", "test") if s in out}

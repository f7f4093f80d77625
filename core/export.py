"""Anonymize a table with a chain of methods, and write a table in the format its file name asks for.

Formats, chosen by the output path: ``.arrow`` (Arrow IPC, memory-mapped when read back), ``.parquet``, ``.csv``
(tabular ``features`` only: one row per sample, ``sample_id``, ``subject``, ``attr.*`` and ``feature_<i>``
columns), or a path without a suffix: a folder of files — ``<subject>/<sample_id>.png`` for images,
``<subject>/<sample_id>.wav`` (32-bit float) for audio — with ``metadata.csv`` (``file``, ``subject``, ``attr.*``).
Every write is atomic: a file or folder either appears whole or not at all, and an existing folder is never
overwritten; the temp file or folder of a write that was killed is removed by the next write to the same
path (its name carries the writer's pid). ``any.table`` reads ``.arrow`` and ``.parquet`` back, so
``anonymize`` → ``evaluate`` round-trips.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .errors import BioanonError, DataError, TableError
from .fileio import atomic_write, output_problem, remove_dead_temps, temp_prefix, write_error
from .table import SampleTable

if TYPE_CHECKING:
    from collections.abc import Callable

    from .methods import Anonymizer
    from .registry import Registry

TABLE_SUFFIXES = (".arrow", ".parquet")
FORMATS = ".arrow, .parquet, .csv (features only) or a folder (a path without suffix)"


def as_chain(methods: Sequence[Anonymizer], registry: Registry) -> Anonymizer:
    """``methods`` (Anonymizer instances) as one anonymizer: the method itself when there is one, else one
    ``any.chain`` of them in the order given, built from their ids and parameters with ``registry``."""
    if len(methods) == 1:
        return methods[0]
    chain_cls = cast("Callable[..., Anonymizer]", registry.get("any.chain", kind="anonymizer"))
    return chain_cls(steps=tuple({"id": m.id, "params": m.get_params()} for m in methods))


def anonymize(table: SampleTable, methods: Iterable[Any], *, registry: Any = None) -> SampleTable:
    """Apply anonymizers in order, each fitted on (and applied to) the previous one's output, and record it in
    the table's lineage: one step, an ``any.chain`` of them when there are several (as ``bioanon anonymize -m a
    -m b`` does). ``methods`` are Anonymizer instances or ids (default parameters) of ``registry`` (default:
    the current run's, :func:`bioanon.context.current_context`)."""
    from .cache import table_fingerprint
    from .context import current_context
    from .fileio import jsonable

    if registry is None:
        registry = current_context().registry
    steps = [registry.create(m) if isinstance(m, str) else m for m in methods]
    if not steps:
        raise BioanonError("anonymize: give at least one anonymizer")
    for m in steps:
        if getattr(m, "kind", None) != "anonymizer":
            raise BioanonError(f"anonymize: {getattr(m, 'id', m)!r} is not an anonymizer")
    m = as_chain(steps, registry)
    out: SampleTable = m.fit(table).transform(table)
    if not np.array_equal(out.sample_ids, table.sample_ids):
        raise BioanonError(f"{m.id} changed the sample ids or their order")
    return out.with_lineage_step(
        {
            "step": m.id,
            "fingerprint": m.fingerprint(),
            "input": table_fingerprint(table),
            "params": jsonable(m.get_params()),
        }
    )


WRITERS = (".arrow", ".parquet", ".csv", "")  # "": a folder of files


def check_output(path: str | os.PathLike[str]) -> None:
    """BioanonError unless ``path`` names a known format and can be written there (an output folder must not
    exist or be empty): checked before any work, nothing is created."""
    p = Path(path)
    if p.suffix.lower() not in WRITERS:
        raise BioanonError(f"--out {p}: unknown output format {p.suffix!r}; use {FORMATS}")
    if not p.suffix and p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise BioanonError(f"{p}: exists and is not an empty folder; choose a new output folder")
    why = output_problem(p.parent if p.suffix else p)
    if why:
        raise BioanonError(f"--out: cannot write {why}")


def write_table(table: SampleTable, path: str | os.PathLike[str]) -> Path:
    """Write ``table`` in the format ``path`` names (see the module docstring); return the path written."""
    check_output(path)
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".arrow":
        table.save(p)
    elif suffix == ".parquet":
        table.to_parquet(p)
    elif suffix == ".csv":
        _write_csv(table, p)
    else:
        _write_folder(table, p)
    return p


def _attribute_frame(table: SampleTable) -> dict[str, Any]:
    cols: dict[str, Any] = {"sample_id": table.sample_ids, "subject": table.subjects}
    for name in table.attribute_names:
        cols[f"attr.{name}"] = table.attribute(name)
    return cols


def _write_csv(table: SampleTable, path: Path) -> None:
    import pandas as pd

    if table.payload_names != ["features"]:
        raise TableError(
            f"{path}: a CSV holds tabular features only, but the table has the payload(s) "
            f"{table.payload_names}; write .arrow or .parquet, or a folder for images/audio"
        )
    x = np.asarray(table.payload("features"))
    if x.ndim != 2:
        raise TableError(f"{path}: a CSV holds one feature vector per sample; 'features' has shape {x.shape[1:]}")
    df = pd.DataFrame(_attribute_frame(table))
    feats = pd.DataFrame(x, columns=[f"feature_{i}" for i in range(x.shape[1])])
    out = pd.concat([df, feats], axis=1)
    atomic_write(path, lambda f: f.write(out.to_csv(index=False).encode("utf-8")))


def _safe(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))
    return keep.lstrip(".") or "_"


def _write_folder(table: SampleTable, path: Path) -> None:
    import pandas as pd

    kinds = [n for n in table.payload_names if n in ("image", "audio")]
    if len(kinds) != 1:
        raise TableError(
            f"{path}: a folder of files holds images or audio; the table has {table.payload_names}; "
            "write .arrow or .parquet instead"
        )
    kind = kinds[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(path)  # what a killed write to the same place left
    tmp = path.with_name(f"{temp_prefix(path)}dir.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        files = _write_files(table, kind, tmp)
        meta = pd.DataFrame({"file": files, **{k: v for k, v in _attribute_frame(table).items() if k != "sample_id"}})
        meta.insert(1, "sample_id", table.sample_ids)
        meta.to_csv(tmp / "metadata.csv", index=False)
        if path.exists():
            path.rmdir()  # empty, checked above
        os.replace(tmp, path)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, BioanonError):  # e.g. disk full: name the folder
            raise write_error(path, exc) from exc
        raise


def _write_files(table: SampleTable, kind: str, root: Path) -> list[str]:
    ext = ".png" if kind == "image" else ".wav"
    names = []
    seen: set[str] = set()
    for subject, sid in zip(table.subjects, table.sample_ids, strict=True):
        rel = f"{_safe(subject)}/{_safe(sid)}{ext}"
        if rel in seen:
            raise BioanonError(f"sample ids {sid!r} collide as file names after cleaning; rename them")
        seen.add(rel)
        names.append(rel)
    for d in {n.split("/")[0] for n in names}:
        (root / d).mkdir()
    x = table.payload(kind)
    if kind == "image":
        from PIL import Image

        for rel, img in zip(names, x, strict=True):
            img = np.asarray(img)
            if img.dtype != np.uint8:
                raise TableError(f"images must be uint8 to be written as PNG, got {img.dtype}")
            Image.fromarray(img[..., 0] if img.ndim == 3 and img.shape[2] == 1 else img).save(root / rel)
    else:
        from scipy.io import wavfile

        rate = table.metadata.get("sample_rate")
        if not rate:
            raise TableError("the audio table has no 'sample_rate' in its metadata; cannot write WAV files")
        for rel, a in zip(names, x, strict=True):
            wavfile.write(root / rel, int(rate), np.asarray(a, dtype=np.float32))
    return names


def read_table(path: str | os.PathLike[str]) -> SampleTable:
    """A sample table written by :func:`write_table` as ``.arrow`` or ``.parquet`` (validated)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise DataError(
            f"{p}: any.table reads sample tables saved as {' or '.join(TABLE_SUFFIXES)}; "
            f"got {suffix or 'no suffix'} (a folder of files is read by the trait's folder source)"
        )
    if not p.is_file():
        raise DataError(f"{p}: no such file")
    return SampleTable.load(p, validate=True) if suffix == ".arrow" else SampleTable.from_parquet(p, validate=True)

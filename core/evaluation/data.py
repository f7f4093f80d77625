"""The evaluated data: importing the data set and the attacker data set through the import cache, checking
the attacker data against the evaluated data, and the disk space they need.

Planning (:mod:`bioanon.evaluation.run`) and config checks (:mod:`bioanon.evaluation.checks`) both read it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ..cache import Cache, table_fingerprint
from ..errors import BioanonError
from ..sanity import SANITY_VERSION, check_data
from ..table import SampleTable
from .config import raise_problems

log = logging.getLogger("bioanon.evaluation.run")  # the messages of the run they belong to


@attrs.frozen
class ResourceEstimate:
    """Disk the run's new cache entries need, and the peak memory of its largest task (rough upper bounds)."""

    disk_bytes: int
    memory_bytes: int
    new_tasks: int

    def __str__(self) -> str:
        from ..cache import format_bytes

        return (
            f"{self.new_tasks} tasks to compute; about {format_bytes(self.disk_bytes)} of new cache entries "
            f"and {format_bytes(self.memory_bytes)} of memory at the peak"
        )


def check_disk_space(estimate: ResourceEstimate, cache: Cache) -> None:
    """Refuse to start when the cache volume lacks the space the run needs (local caches only)."""
    import shutil

    from ..cache import format_bytes

    root = getattr(cache, "root", None)
    if not isinstance(root, (str, os.PathLike)) or "://" in str(root):
        return
    path = Path(root)
    while not path.exists() and path != path.parent:
        path = path.parent
    free = shutil.disk_usage(path).free
    if free < 1.1 * estimate.disk_bytes:
        raise BioanonError(
            f"not enough disk space for the cache at {root}: the run needs about "
            f"{format_bytes(estimate.disk_bytes)} and {format_bytes(free)} are free "
            f"(free space, point --cache-dir elsewhere, or run `bioanon cache clear`)"
        )


def load_data(cfg: Any, data: SampleTable | None = None, cache: Cache | None = None) -> SampleTable:
    """The configured data set (or ``data`` when given); with a ``cache``, through the import cache
    (:func:`import_data`)."""
    return import_data(cfg, data, cache)[0]


def import_data(cfg: Any, data: SampleTable | None, cache: Cache | None) -> tuple[SampleTable, str | None]:
    """The data set and its content fingerprint when known without hashing it (else None).

    With a ``cache``, an import done before is found there *before* anything is read: the key is the dataset
    source (id, version, parameters, the code of its module), the ``on_bad`` policy of the data checks
    (:mod:`bioanon.sanity`, applied to a new import before it is stored) and the files under the path (names, sizes and
    modification times, or their bytes with ``[dataset] files = "content"``); on a hit the stored table is
    opened memory-mapped. A new import is stored under its content fingerprint, with the import key pointing
    to it, and returned memory-mapped from there; a later run imports again when a file, a parameter or the
    source's code changed."""
    if data is not None:
        return data, None
    return import_dataset(cfg.dataset, cache)


def import_dataset(spec: Any, cache: Cache | None, what: str = "data set") -> tuple[SampleTable, str | None]:
    """Import a DatasetSpec (``[dataset]`` or ``[attacker_dataset]``) through the import cache (see
    :func:`import_data`); ``what`` names it in the log."""
    key = import_key(spec) if cache is not None else None
    if key is not None and cache is not None:
        ref = cache.get_json(key)
        table = cache.get_table(ref["dataset"]) if isinstance(ref, Mapping) and "dataset" in ref else None
        if table is not None:
            log.info("%s %s: %d samples, imported before (from the cache)", what, spec.source, table.num_rows)
            return table, ref["dataset"]
    from ..context import current_context

    log.info("importing the %s %s%s", what, spec.source, f" from {spec.path}" if spec.path else "")
    table = current_context().load_dataset(spec.source, spec.path, **spec.params)
    # the data checks (bioanon.sanity), with the policy [dataset] on_bad: an error, or the samples skipped or kept
    # with a warning kept in the table's metadata (so a cached import still reports it)
    table = check_data(table, getattr(spec, "on_bad", "error"), where=f"the {what} {dataset_name(spec)}")
    if key is None or cache is None:
        return table, None
    check_disk_space(ResourceEstimate(2 * int(table.arrow.nbytes), 0, 0), cache)  # room for the table itself
    dataset_key = table_fingerprint(table)
    cache.put_table(dataset_key, table)
    cache.put_json(key, {"dataset": dataset_key, "source": spec.source, "path": spec.path, "rows": table.num_rows})
    stored = cache.get_table(dataset_key)  # memory-mapped: the imported copy can be freed
    return (stored, dataset_key) if stored is not None else (table, dataset_key)


def import_key(spec: Any) -> str | None:
    """The cache key of importing ``spec`` (a DatasetSpec) as it is on disk now; None when the path is not a
    local file or folder (nothing to recognize it by: it is imported every time)."""
    import importlib
    import inspect

    from ..cache import fingerprint
    from ..fileio import code_digest, content_digest, file_digest

    source = spec.create()
    code_id = code_digest(type(source))
    # modules the source reads its files with (e.g. bioanon.interop for any.hf): a change to them re-imports
    for module in getattr(type(source), "import_code", ()):
        path = inspect.getsourcefile(importlib.import_module(module))
        code_id = f"{code_id}+{file_digest(path) if path else module}"
    files: list[Any] = []
    if spec.path is not None:
        root = Path(spec.path)
        if not root.exists():
            return None
        paths = [root] if root.is_file() else sorted(Path(d) / f for d, _, names in os.walk(root) for f in names)
        for p in paths:
            try:
                st = p.stat()
            except OSError:  # vanished or unreadable: the import reports it
                continue
            rel = p.name if p == root else p.relative_to(root).as_posix()
            if spec.files == "content":
                files.append([rel, st.st_size, content_digest(p)])
            else:
                files.append([rel, st.st_size, st.st_mtime_ns])
    where = str(Path(spec.path).resolve()) if spec.path is not None and spec.files != "content" else None
    return fingerprint(
        {
            "import": source.fingerprint(),
            "code": code_id,
            "path": where,
            "files": files,
            "check": spec.files,
            "on_bad": getattr(spec, "on_bad", "error"),
            "sanity": SANITY_VERSION,
        }
    )


# --------------------------------------------------------------------------------- [attacker_dataset]


def dataset_name(spec: Any) -> str:
    """A data set as the messages and the report name it: its source, and its path when it has one."""
    return f"{spec.source} ({spec.path})" if spec.path else spec.source


def prepare_attacker_data(cfg: Any, data: SampleTable, cache: Cache) -> tuple[SampleTable, str]:
    """The ``[attacker_dataset]`` of ``cfg`` ready for the plan, and its cache key.

    Imported through the import cache (:func:`import_dataset`, like ``[dataset]``), its attributes mapped onto
    the evaluated data's names and values and its subject ids prefixed (:func:`map_attacker_table`), then
    checked against the evaluated data ``data`` (:func:`attacker_data_problems`): one ConfigError lists every
    problem. The mapped table is stored under a key derived from the import's and the mapping's, so a rerun
    neither re-imports nor re-hashes it."""
    from ..cache import fingerprint

    spec = cfg.attacker_dataset
    raw, raw_key = import_dataset(spec, cache, "attacker data set")
    problems: list[str] = []
    table = map_attacker_table(raw, spec, problems)
    if table is not None:
        problems += attacker_data_problems(cfg, data, table)
    raise_problems(
        problems,
        f"config {cfg.name!r}: the attacker data set {dataset_name(spec)} does not suit the "
        f"evaluated data set {dataset_name(cfg.dataset)}",
    )
    assert table is not None  # else map_attacker_table reported a problem, raised above
    raw_key = raw_key or table_fingerprint(raw)
    if not spec.attributes and not spec.subject_prefix:
        return raw, raw_key
    key = fingerprint(
        {
            "attacker_dataset": raw_key,
            "prefix": spec.subject_prefix,
            "attributes": {k: m.to_dict() for k, m in spec.attributes.items()},
        }
    )
    if not cache.has_table(key):
        cache.put_table(key, table)
    stored = cache.get_table(key)  # memory-mapped
    return (stored if stored is not None else table), key


def _value_text(value: Any) -> str:
    """An attribute value as the keys of ``attributes.<column>.values`` write it (TOML keys are text)."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    return str(value.item() if isinstance(value, np.generic) else value)


def map_attacker_table(table: SampleTable, spec: Any, problems: list[str]) -> SampleTable | None:
    """``table`` with the attribute mapping of ``spec`` (an AttackerDatasetSpec) applied (each column renamed,
    values listed in ``values`` replaced, the others kept) and its subject ids prefixed with
    ``spec.subject_prefix``; None, with ``problems`` extended, when a mapped column does not exist or mixes
    types after mapping."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..errors import TableError

    names = table.attribute_names
    mapped: dict[str, tuple[str, Any]] = {}
    for col, m in spec.attributes.items():
        where = f"attacker_dataset.attributes.{col}"
        if col not in names:
            problems.append(
                f"{where}: the attacker data set {dataset_name(spec)} has no attribute column "
                f"'attr.{col}'; available: {names}"
            )
            continue
        values = table.arrow.column(f"attr.{col}").to_pylist()
        if m.values:
            values = [v if v is None else m.values.get(_value_text(v), v) for v in values]
        mapped[m.name] = (where, values)
    if problems:
        return None
    out = SampleTable(table.arrow.drop_columns([f"attr.{c}" for c in spec.attributes]), validate=False)
    for name, (where, values) in mapped.items():  # every column read before any is replaced (swaps work)
        try:
            out = out.with_attribute(name, values)
        except (TableError, pa.ArrowException) as exc:
            problems.append(
                f"{where}.values: the mapped column 'attr.{name}' mixes value types (map every value "
                f"to the same type): {exc}"
            )
            return None
    if spec.subject_prefix:
        arrow = out.arrow
        i = arrow.schema.get_field_index("subject")
        field = arrow.schema.field(i)
        prefixed = pc.binary_join_element_wise(spec.subject_prefix, arrow.column(i), "").cast(field.type)
        out = SampleTable(arrow.set_column(i, field, prefixed), validate=False)
    return out


def attacker_data_problems(cfg: Any, data: SampleTable, attacker: SampleTable) -> list[str]:
    """What makes the (mapped) attacker data set unusable beside the evaluated data ``data``, one line each:
    subject ids in both (the protocol needs subject-disjoint people), the evaluation's attribute label missing
    from the attacker data or not covering the evaluated values, payloads missing or of another shape."""
    import pyarrow.compute as pc

    problems: list[str] = []
    ours, theirs = dataset_name(cfg.dataset), dataset_name(cfg.attacker_dataset)
    both = sorted(set(data.subject_names) & set(attacker.subject_names))
    if both:
        problems.append(
            f"attacker_dataset: {len(both)} subject id(s) occur in both the data set {ours} and the attacker data "
            f"set {theirs}: {', '.join(map(str, both[:5]))}{' …' if len(both) > 5 else ''}; a cross-database "
            "protocol needs attacker and evaluation subjects to be different people. If the two data sets number "
            'different people with the same ids, set attacker_dataset.subject_prefix (e.g. "xdb:")'
        )
    label = cfg.label
    if label != "subject":
        if label not in attacker.attribute_names:
            problems.append(
                f"attacker_dataset: the attacker data set {theirs} has no attribute column "
                f"'attr.{label}' (the evaluation's label) after the mapping; available: "
                f"{attacker.attribute_names}; map one onto it with attacker_dataset.attributes = "
                f'{{ <column> = "{label}" }}'
            )
        elif label in data.attribute_names:
            have = set(pc.unique(attacker.arrow.column(f"attr.{label}")).drop_null().to_pylist())
            want = pc.unique(data.arrow.column(f"attr.{label}")).drop_null().to_pylist()
            missing = sorted((v for v in want if v not in have), key=repr)
            if missing:
                problems.append(
                    f"attacker_dataset: the attacker data set {theirs} has no sample with {label} = "
                    f"{', '.join(map(repr, missing))}, found in the data set {ours} (the attacker's values: "
                    f"{', '.join(map(repr, sorted(have, key=repr)))}); map values with "
                    f"attacker_dataset.attributes.<column>.values"
                )
    for name in data.payload_names:
        if name not in attacker.payload_names:
            problems.append(
                f"attacker_dataset: the data set {ours} has payload {name!r}, the attacker data set "
                f"{theirs} has not (it has {', '.join(attacker.payload_names) or 'no payload'})"
            )
        elif data.payload_shape(name) != attacker.payload_shape(name):
            problems.append(
                f"attacker_dataset: payload {name!r} has per-sample shape {data.payload_shape(name)} in "
                f"the data set {ours} but {attacker.payload_shape(name)} in the attacker data set "
                f"{theirs}; both must hold the same kind of samples"
            )
    return problems

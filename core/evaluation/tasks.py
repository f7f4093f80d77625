"""The evaluation's task operations.

A task is a JSON-able :class:`TaskSpec` (operation name, arguments, the keys of its inputs) whose output is
written to the cache under its key. Tasks exchange fingerprints, never data: every input table is read from
the cache, so the same spec runs unchanged in this process or on a remote worker. A task is complete when its
JSON record exists under its key (written last, atomically); outputs written before a crash are reused, never
half-read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import attrs
import numpy as np
from numpy.typing import NDArray

from ..arrow_numpy import to_numpy
from ..cache import Cache, derive_fingerprint, fingerprint
from ..context import RunContext, current_context
from ..errors import BioanonError
from ..fileio import jsonable
from ..methods import Anonymizer, Deanonymizer, Method, Recognizer, Selector, UtilityMeasure, with_comparator
from ..table import SampleTable
from .scenarios import (
    SCENARIOS_BASE,  # noqa: F401 -- re-exported (bioanon.evaluation.tasks.SCENARIOS_BASE)
    scenario_sets,
)

OPS: dict[str, Callable[..., dict[str, Any]]] = {}


def op(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Register a task operation under its function name."""
    OPS[fn.__name__] = fn
    return fn


@attrs.frozen
class TaskSpec:
    """One unit of work: ``OPS[op](cache, context=<the run context>, key=key, **args)`` returns a JSON-able
    record stored under ``key``."""

    key: str
    op: str
    args: Mapping[str, Any]
    deps: tuple[str, ...] = ()
    stage: str = ""
    label: str = ""
    #: tasks with the same non-empty affinity fit the same model on the same data (e.g. the clear and naive
    #: attacks of every setting train one recognizer on the clear attacker set): a pool runs them on one worker
    #: where it can, which fits it once and reuses the fit (not part of the key)
    affinity: str = ""
    #: tasks of one kind cost about the same (:func:`task_kind`): a pool learns what a kind costs from its first
    #: tasks and starts the longest first (not part of the key)
    kind: str = ""


def task_kind(op_name: str, args: Mapping[str, Any]) -> str:
    """The :attr:`TaskSpec.kind` of a task: its operation, the ids of the methods it runs and its scenario (e.g.
    one recognizer's attack in one scenario, which costs about the same at every anonymization setting)."""
    ids = [f"{k}={v['id']}" for k, v in sorted(args.items()) if isinstance(v, Mapping) and "id" in v]
    scenario = args.get("scenario")
    return " ".join([op_name, *ids, *([str(scenario)] if isinstance(scenario, str) else [])])


def output_key(task_key: str, name: str) -> str:
    """Key of a named table output of a task."""
    return fingerprint({"task": task_key, "output": name})


def derived_seed(*parts: Any) -> int:
    """A 31-bit seed derived from any JSON-able parts (stable across processes)."""
    return int(fingerprint(list(parts))[:8], 16) & 0x7FFFFFFF


# bumped when what an operation computes changes, so records cached by an older bioanon are not reused
# (2: expanded-BCa intervals, notes on undefined metrics, float64 scores, attacker-only subjects in splits)
TASK_VERSION = "2"


def task_key(op_name: str, args: Mapping[str, Any], deps: tuple[str, ...], registry: Any = None) -> str:
    """The cache key of a task: its operation, arguments and inputs. A method in the arguments
    (``{"id": ..., "params": {...}}``) enters through :meth:`~bioanon.methods.Method.fingerprint` — the
    parameters that change results and, for torch-backed methods, the device kind (cpu / cuda / mps) — so the
    thread count or the GPU index do not change the key, while a CPU and a GPU run never share results.
    ``registry`` creates those methods (default: the current run's)."""
    registry = registry if registry is not None else current_context().registry
    return derive_fingerprint(
        method_id=f"task.{op_name}", version=TASK_VERSION, params=_key_args(dict(args), registry), inputs=list(deps)
    )


def _key_args(value: Any, registry: Any) -> Any:
    """``value`` with every method spec in it replaced by the method's id and fingerprint."""
    if isinstance(value, Mapping):
        if set(value) == {"id", "params"} and isinstance(value["id"], str) and isinstance(value["params"], Mapping):
            try:
                method = registry.create(value["id"], **dict(value["params"]))
            except (BioanonError, KeyError, TypeError, ValueError):
                return {k: _key_args(v, registry) for k, v in value.items()}
            return {"id": value["id"], "fingerprint": method.fingerprint()}
        return {k: _key_args(v, registry) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_key_args(v, registry) for v in value]
    return value


def method_dicts(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every method dict (``{"id": ..., "params": {...}}``) nested in a task's arguments."""
    if isinstance(value, Mapping):
        if isinstance(value.get("id"), str) and isinstance(value.get("params"), Mapping):
            yield value
        for v in value.values():
            yield from method_dicts(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from method_dicts(v)


def make_task(
    op_name: str, args: Mapping[str, Any], deps: tuple[str, ...], *, stage: str, label: str, registry: Any = None
) -> TaskSpec:
    """A TaskSpec whose key covers the operation, all its arguments and its inputs' keys (the methods in them
    created with ``registry``, default the current run's)."""
    affinity = AFFINITY[op_name](args) if op_name in AFFINITY else ""
    key = task_key(op_name, args, deps, registry)
    return TaskSpec(key, op_name, dict(args), tuple(deps), stage, label, affinity, task_kind(op_name, args))


def run_task(task: TaskSpec, cache: Cache, context: RunContext | None = None) -> dict[str, Any]:
    """Run a task unless its record exists; return the record (thread- and process-safe via the cache).
    The task runs with ``context`` active (default: the active one, else a fresh one): the operations and
    the methods they call create methods with its registry and reuse fits and computed arrays in its stores."""
    from ..nettrain import using_weight_cache

    done: dict[str, Any] | None = cache.get_json(task.key)
    if done is not None:
        return done
    context = context if context is not None else current_context()
    with context.activate(), using_weight_cache(cache):  # trained networks are kept beside the results
        record = OPS[task.op](cache, context=context, key=task.key, **task.args)
    cache.put_json(task.key, record)
    return record


def _training_id(train_kind: str, sets: Mapping[str, str], mix_seed: int) -> list[Any]:
    """What identifies the attacker's training data of a score task (its recognizer's fit is reused for it)."""
    if train_kind.startswith("mix:"):
        return ["mix", sets["clear_attacker"], sets["anon_attacker"], train_kind, mix_seed]
    return [train_kind, sets[f"{train_kind}_attacker"]]


def fit_affinity(recognizer: Mapping[str, Any], train_id: Any, label: str) -> str:
    """What identifies a fit of ``recognizer`` on the training data ``train_id`` (:func:`_training_id`) for
    ``label``: the affinity of the score tasks that use it, and the key of :attr:`RunContext.fit_uses`."""
    return fingerprint({"recognizer": recognizer, "train": train_id, "label": label})


def _score_affinity(args: Mapping[str, Any]) -> str:
    """Score tasks that fit the same recognizer on the same attacker data share an affinity; none with
    ``attacker_fit = "enrolment"`` (a fit per selection)."""
    if args.get("attacker_fit", "attacker") == "enrolment":
        return ""
    train_kind = scenario_sets(args["scenario"])[0]
    train = _training_id(train_kind, args["sets"], derived_seed(args["seed"], "mix"))
    return fit_affinity(args["recognizer"], train, args["label"])


#: how the tasks of an operation get their :attr:`TaskSpec.affinity` from their arguments
AFFINITY: dict[str, Callable[[Mapping[str, Any]], str]] = {"score": _score_affinity}


def record_outputs(record: Any) -> list[str]:
    """The cache keys of the tables a task's record names as its outputs (``outputs`` and per-probe ``scores``)."""
    keys: list[str] = []
    if isinstance(record, Mapping):
        for field in ("outputs", "scores"):
            named = record.get(field)
            if isinstance(named, Mapping):
                keys += [k for k in named.values() if isinstance(k, str)]
    return keys


def reusable_record(cache: Cache, task: TaskSpec, *, deep: bool = False, record: Any = None) -> dict[str, Any] | None:
    """The cached record of ``task`` (``record``: already read) if its output tables are all there — with ``deep``,
    also readable and matching their checksums (they are read whole). A record whose outputs are missing or damaged
    is removed with one :class:`~bioanon.cache.CacheWarning` naming the task, so that the task is computed again
    (a damaged table itself is moved aside when it is read)."""
    if record is None:
        record = cache.get_json(task.key)
    if record is None:
        return None
    outputs = record_outputs(record)
    if deep:
        bad = [k for k in outputs if cache.get_table(k) is None]
    else:
        bad = [k for k in outputs if not cache.has_table(k)]
    if not bad:
        return cast(dict[str, Any], record)
    import warnings

    from ..cache import CacheWarning

    cache.discard_json(task.key)
    warnings.warn(
        f"bioanon cache: {task.label}: {len(bad)} of its stored output table(s) are missing or damaged "
        f"({', '.join(k[:12] for k in bad[:3])}{' …' if len(bad) > 3 else ''}); computing the task again",
        CacheWarning,
        stacklevel=2,
    )
    return None


def _create(context: RunContext, spec: Mapping[str, Any]) -> Method:
    return context.create(spec["id"], **spec.get("params", {}))


def _table(cache: Cache, key: str, rows: tuple[int, int] | None = None, **how: Any) -> SampleTable:
    """The stored table (``rows``, ``columns``, ``take``: :meth:`~bioanon.cache.Cache.get_table`'s); an error
    where it is missing."""
    t: SampleTable | None = cache.get_table(key, rows=rows, **how)
    if t is None:
        raise BioanonError(f"cache entry {key} is missing: was the cache cleared during the run?")
    return t


# --------------------------------------------------------------------------------------------------- ops


@op
def split(
    cache: Cache,
    *,
    context: RunContext,
    dataset: str,
    rates: list[float],
    seed: int,
    key: str,
    training_only: Sequence[str] = (),
    attacker_dataset: str | None = None,
    attacker_subjects: float = 1.0,
    stratify: Sequence[str] = (),
    rounding: str = "largest_remainder",
) -> dict[str, Any]:
    """Subject-disjoint split into background / attacker / evaluation (subject counts rounded by ``rounding``,
    see :meth:`SampleTable.split_subjects`). A background rate of 0 gives an empty
    background part (the attacker and evaluation shares then sum to 1 on their own). The ``training_only``
    subjects (too few samples to enrol and test) are left out of the rates and added to the attacker part.
    ``stratify``: attribute columns the subjects are stratified by (:meth:`SampleTable.split_subjects`).

    With ``attacker_dataset`` (the key of ``[attacker_dataset]``'s table) the attacker part is that table (a
    seeded ``attacker_subjects`` share of its subjects); ``dataset`` gives only background and evaluation
    (``rates[1]`` is 0) and its ``training_only`` subjects are left out."""
    full = {dataset: _table(cache, dataset)}
    if attacker_dataset is not None:
        full[attacker_dataset] = _table(cache, attacker_dataset)
    # the split reads subjects and attributes only: it runs on the tables without their payloads (no copy of
    # the payloads' values), and each part is stored as the row positions of its samples in a stored table;
    # where a part's rows cannot be found there (repeated sample ids), the split runs again on the whole tables
    # and that part is stored as a copy
    light = {k: _without_payloads(t) for k, t in full.items()}
    for tables in (light, full):
        bases = [(k, tables[k]) for k in full]
        parts = _split_parts(
            tables[dataset],
            tables[attacker_dataset] if attacker_dataset is not None else None,
            rates,
            seed,
            training_only,
            attacker_subjects,
            stratify,
            rounding,
        )
        labelled = {
            name: part.with_lineage_step({"step": "split:" + name, "fingerprint": output_key(key, name)})
            for name, part in zip(("background", "attacker", "evaluation"), parts, strict=True)
        }
        found = {name: _rows_of(part, bases) for name, part in labelled.items()}
        if all(f is not None for f in found.values()) or tables is full:
            break
    out = {}
    for name, part in labelled.items():
        k = output_key(key, name)
        where = found[name]
        if where is not None:
            cache.put_rows(k, where[0], where[1], part.arrow.schema.metadata)
        else:
            cache.put_table(k, part)
        out[name] = k
    return {"outputs": out, "subjects": {n: p.subject_names for n, p in zip(out, parts, strict=True)}}


def _without_payloads(table: SampleTable) -> SampleTable:
    """``table`` without its payload columns (a view: no values are copied)."""
    names = table.payload_names
    return type(table)(table.arrow.drop_columns(names), validate=False) if names else table


def _split_parts(
    table: SampleTable,
    attacker: SampleTable | None,
    rates: list[float],
    seed: int,
    training_only: Sequence[str],
    attacker_subjects: float,
    stratify: Sequence[str],
    rounding: str,
) -> list[SampleTable]:
    """The background, attacker and evaluation parts of :func:`split` (its documentation)."""
    extra = None
    if training_only:
        import pyarrow as pa
        import pyarrow.compute as pc

        mask = pc.is_in(table.arrow.column("subject"), value_set=pa.array(list(training_only), pa.string()))
        extra, table = table.filter(mask), table.filter(pc.invert(mask))
    if attacker is not None:
        parts = _cross_parts(table, attacker, rates, seed, attacker_subjects, stratify)
        extra = None  # the attacker's data are the other data set's only
    elif rates[0] == 0:
        empty = table.filter(np.zeros(len(table), dtype=bool))
        parts = [empty, *table.split_subjects(rates[1:], seed, stratify=list(stratify), rounding=rounding)]
    else:
        parts = table.split_subjects(rates, seed, stratify=list(stratify), rounding=rounding)
    if extra is not None:
        parts[1] = SampleTable.concat([parts[1], extra])
    return parts


def _rows_of(part: SampleTable, bases: Sequence[tuple[str, SampleTable]]) -> tuple[str, Any] | None:
    """``(key, rows)``: the first table of ``bases`` (key, table) with ``part``'s columns that holds all its
    samples (found by sample id and subject, :func:`_rows_in`), and their positions there; None where none does
    (or where sample ids repeat)."""
    for base_key, base in bases:
        if part.arrow.schema.equals(base.arrow.schema, check_metadata=False):
            rows = _rows_in(base, part)
            if rows is not None:  # the same samples (two data sets may share sample ids)
                return base_key, rows
    return None


def _cross_parts(
    table: SampleTable,
    attacker: SampleTable,
    rates: list[float],
    seed: int,
    share: float,
    stratify: Sequence[str] = (),
) -> list[SampleTable]:
    """[background, attacker, evaluation] of a cross-database protocol: background and evaluation from
    ``table`` (``rates[0]``, ``rates[2]``; ``rates[1]`` is 0; stratified by the ``stratify`` columns), the
    attacker part a seeded ``share`` of the subjects of ``attacker`` (at least one)."""
    if rates[0] == 0:
        background, evaluation = table.filter(np.zeros(len(table), dtype=bool)), table
    else:
        background, evaluation = table.split_subjects([rates[0], rates[2]], seed, stratify=list(stratify))
    if share < 1:
        subjects = np.array(attacker.subject_names, dtype=object)
        n = max(1, int(round(share * len(subjects))))
        chosen = np.random.default_rng(derived_seed(seed, "attacker_subjects")).permutation(len(subjects))[:n]
        attacker = attacker.select_subjects(subjects[np.sort(chosen)].tolist())
    return [background, attacker, evaluation]


@op
def templates(
    cache: Cache,
    *,
    context: RunContext,
    method: dict[str, Any],
    fit: str,
    label: str,
    background: str,
    attacker: str,
    evaluation: str,
    key: str,
    shards: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The ``[templates]`` stage: fit the template extractor (a recognizer that embeds) on the ``fit`` part
    (``background`` or ``attacker``) for ``label``, then replace every part's payloads by its templates (payload
    ``features``; subjects, sample ids, attributes and metadata kept).

    With ``shards`` (an encoder that embeds each sample on its own: data set key → the output keys of its
    :func:`templates_rows` tasks) every part is a row selection of its data set's templates: nothing is embedded
    here."""
    from ..errors import ConfigError

    m = cast(Recognizer, _create(context, method))  # a recognizer that embeds (checked next)
    if not getattr(m, "has_embedding", False):
        raise ConfigError(f"[templates] recognizer {m.id} has no embedding (has_embedding is false)")
    parts = {"background": background, "attacker": attacker, "evaluation": evaluation}
    if shards:
        wholes = _wholes_from_shards(cache, shards)
        selected: dict[str, str] = {}
        for name, k_in in parts.items():
            k = output_key(key, name)
            if not _rows_from_wholes(cache, wholes, k_in, k, _lineage_stamp("templates:" + m.id, k, m)):
                break  # a part outside the embedded data sets: the whole stage as below (the same templates)
            selected[name] = k
        else:
            return {"outputs": selected, "dim": int(wholes[0][1].payload_shape("features")[0] or 0)}
    train = _table(cache, parts[fit])
    if not len(train):
        raise ConfigError(f"[templates] fit = {fit!r}: the {fit} part is empty (rates.{fit} = 0?)")
    m.fit(train, label)
    out: dict[str, str] = {}
    dim: int | None = None
    for name in ("attacker", "evaluation", "background"):  # the empty background last: its width is known then
        table = _table(cache, parts[name])
        if len(table):
            emb = np.asarray(m.embed(table), dtype=np.float32)
            if emb.ndim != 2 or len(emb) != len(table):
                raise BioanonError(f"[templates] {m.id}.embed() returned shape {emb.shape} for {len(table)} samples")
            dim = emb.shape[1]
        else:
            emb = np.zeros((0, dim or 1), dtype=np.float32)
        tpl = template_table(table, emb)
        k = output_key(key, name)
        cache.put_table(
            k,
            tpl.with_lineage_step({"step": "templates:" + m.id, "fingerprint": k, "params": jsonable(m.get_params())}),
        )
        out[name] = k
    return {"outputs": out, "dim": int(dim or 0)}


def template_table(table: SampleTable, templates: NDArray[Any]) -> SampleTable:
    """``table`` with its payloads replaced by ``templates`` as the ``features`` payload."""
    out = table.with_payload("features", templates)
    others = [p for p in out.payload_names if p != "features"]
    return SampleTable(out.arrow.drop_columns(others), validate=False) if others else out


def _fitted_anonymizer(
    context: RunContext, method: dict[str, Any], background: SampleTable, clear: SampleTable | None
) -> Anonymizer:
    """The anonymizer as the ``anonymize`` op fits it: on ``background``, or on ``clear`` (the set it
    anonymizes) when the background is empty (unfitted when ``clear`` is None then)."""
    m = cast(Anonymizer, _create(context, method))
    if len(background):
        m.fit(background)
    elif clear is not None:
        m.fit(clear)
    return m


#: Bytes of payload in one shard of a per-sample anonymization or of fixed templates (:func:`shard_bounds`).
SHARD_BYTES = 32 * 2**20
#: Fewest rows of a shard (rows larger than 2 MiB, e.g. long recordings, make shards of more than 32 MiB).
SHARD_MIN_ROWS = 16


def shard_bounds(n_rows: int, row_bytes: float) -> list[tuple[int, int]]:
    """``[start, stop)`` of the shards a table of ``n_rows`` rows of ``row_bytes`` each is cut into for a
    per-sample anonymization or the templates of a fixed encoder: equal shards of about :data:`SHARD_BYTES` (at
    least :data:`SHARD_MIN_ROWS` rows). A function of the table only (never of the number of workers), so the
    shards' cache keys stay the same whatever ``--jobs`` or executor runs them."""
    if n_rows <= 0:
        return []
    per_shard = max(SHARD_MIN_ROWS, int(SHARD_BYTES // max(row_bytes, 1.0)))
    n_shards = -(-n_rows // per_shard)
    edges = np.linspace(0, n_rows, n_shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


@op
def anonymize_rows(
    cache: Cache, *, context: RunContext, method: dict[str, Any], dataset: str, start: int, stop: int, key: str
) -> dict[str, Any]:
    """One shard of a per-sample anonymization (:attr:`~bioanon.methods.Anonymizer.per_sample`): rows
    ``[start, stop)`` of the stored table ``dataset``, anonymized on their own (the anonymizer learns nothing
    from a fit). The ``anonymize`` task of each split takes its parts' rows from the shards."""
    shard = _table(cache, dataset, (start, stop))  # of compact audio, only these rows are decompressed
    m = cast(Anonymizer, _create(context, method)).fit(shard)
    anon = m.transform(shard)
    if not np.array_equal(anon.sample_ids, shard.sample_ids):
        raise BioanonError(f"{m.id} changed the sample ids or their order")
    k = output_key(key, "rows")
    cache.put_table(k, anon)
    return {"outputs": {"rows": k}}


@op
def templates_rows(
    cache: Cache, *, context: RunContext, method: dict[str, Any], dataset: str, start: int, stop: int, key: str
) -> dict[str, Any]:
    """One shard of the ``[templates]`` stage of an encoder that embeds each sample on its own
    (:attr:`~bioanon.methods.Recognizer.embeds_per_sample`): the templates of rows ``[start, stop)`` of the stored
    table ``dataset``. The ``templates`` task of each split takes its parts' rows from the shards."""
    shard = _table(cache, dataset, (start, stop))
    m = cast(Recognizer, _create(context, method))  # nothing to fit: the encoder is fixed
    emb = np.asarray(m.embed(shard), dtype=np.float32)
    if emb.ndim != 2 or len(emb) != len(shard):
        raise BioanonError(f"[templates] {m.id}.embed() returned shape {emb.shape} for {len(shard)} samples")
    k = output_key(key, "rows")
    cache.put_table(k, template_table(shard, emb))
    return {"outputs": {"rows": k}}


def _rows_from_wholes(
    cache: Cache,
    wholes: list[tuple[str, SampleTable]],
    part_key: str,
    key: str,
    step: Callable[[SampleTable], SampleTable],
) -> bool:
    """Store under ``key`` the rows of one of ``wholes`` (key, table) that hold the samples of the stored part
    ``part_key`` (only its ids are read), with the metadata ``step`` gives the whole's; False when none does."""
    ids = cache.get_table(part_key, columns=("subject", "sample_id"))
    if ids is None:
        raise BioanonError(f"cache entry {part_key} is missing: was the cache cleared during the run?")
    for whole_key, whole in wholes:
        rows = _rows_in(whole, ids)
        if rows is not None:
            cache.put_rows(key, whole_key, rows, step(whole.take(np.zeros(0, np.int64))).arrow.schema.metadata)
            return True
    return False


def _lineage_stamp(step: str, key: str, m: Method, *, comparator: bool = False) -> Callable[[SampleTable], SampleTable]:
    """The table metadata a stage's output ``key`` gets from method ``m``: its lineage step (and, for an
    anonymizer, its comparator)."""

    def stamp(table: SampleTable) -> SampleTable:
        if comparator:
            table = with_comparator(table, cast(Anonymizer, m))
        return table.with_lineage_step({"step": step, "fingerprint": key, "params": jsonable(m.get_params())})

    return stamp


def _rows_in(whole: SampleTable, part: SampleTable) -> NDArray[np.int64] | None:
    """The positions of ``part``'s samples in ``whole`` (found by sample id and subject), or None when one is not
    there or ``whole``'s sample ids repeat."""
    import pyarrow.compute as pc

    whole_ids = whole.arrow.column("sample_id")
    if pc.count_distinct(whole_ids).as_py() != len(whole_ids):
        return None
    rows = pc.index_in(part.arrow.column("sample_id"), value_set=whole_ids)
    if rows.null_count:
        return None
    same = pc.all(pc.equal(whole.arrow.column("subject").take(rows), part.arrow.column("subject"))).as_py()
    return to_numpy(rows).astype(np.int64) if same in (True, None) else None


def _wholes_from_shards(cache: Cache, shards: Mapping[str, Sequence[str]]) -> list[tuple[str, SampleTable]]:
    """Each data set's whole result (its anonymization or its templates), stored as the concatenation of its
    shards' outputs (``shards``: data set key → the shards' output keys in order): ``(key, table)``."""
    out = []
    for keys in shards.values():
        whole_key = fingerprint({"concat": list(keys)})
        cache.put_concat(whole_key, list(keys))
        out.append((whole_key, _table(cache, whole_key)))
    return out


@op
def anonymize(
    cache: Cache,
    *,
    context: RunContext,
    method: dict[str, Any],
    background: str,
    attacker: str,
    evaluation: str,
    key: str,
    shards: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Fit the anonymizer on the background set; anonymize the attacker and evaluation sets. With an empty
    background (``rates.background = 0``) the anonymizer is fitted on each set it anonymizes.

    With ``shards`` (a per-sample anonymizer: data set key → the output keys of its :func:`anonymize_rows`
    tasks) every part is a row selection of its data set's anonymized whole: nothing is anonymized or stored
    again here."""
    parts = [("attacker", attacker), ("evaluation", evaluation)]
    out: dict[str, str] = {}
    if shards:  # rows of the anonymized wholes; only the parts' ids are read (no payload)
        m = cast(Anonymizer, _create(context, method))  # per sample: its fit learns nothing
        wholes = _wholes_from_shards(cache, shards)
        rest = []
        for name, k_in in parts:
            k = output_key(key, name)
            if _rows_from_wholes(cache, wholes, k_in, k, _lineage_stamp(m.id, k, m, comparator=True)):
                out[name] = k
            else:  # not a subset of a data set anonymized whole: anonymized on its own below
                rest.append((name, k_in))
        parts = rest
        if not parts:
            return {"outputs": out}
    back = _table(cache, background)
    m = _fitted_anonymizer(context, method, back, None)
    for name, k_in in parts:
        clear = _table(cache, k_in)
        k = output_key(key, name)
        if not len(back):
            m = _fitted_anonymizer(context, method, back, clear)
        anon = m.transform(clear)
        if not np.array_equal(anon.sample_ids, clear.sample_ids):
            raise BioanonError(f"{m.id} changed the sample ids or their order")
        anon = with_comparator(anon, m)  # a protection's own comparator travels with its templates
        cache.put_table(k, anon.with_lineage_step({"step": m.id, "fingerprint": k, "params": jsonable(m.get_params())}))
        out[name] = k
    return {"outputs": out}


@op
def deanonymize(
    cache: Cache,
    *,
    context: RunContext,
    method: dict[str, Any],
    clear_attacker: str,
    anon_attacker: str,
    anon_evaluation: str,
    key: str,
    augment: dict[str, Any] | None = None,
    anonymizer: dict[str, Any] | None = None,
    background: str = "",
) -> dict[str, Any]:
    """Train the de-anonymizer on (clear, anonymized) attacker pairs; apply it to the anonymized evaluation set.
    The record says whether it learned (:func:`learning_check` on the pairs it held out).

    ``augment`` (``{"flip": bool, "shift": int}``, ``[deanonymizer] augment``): the attacker also trains on
    flipped and shifted copies of its clear images (:func:`bioanon.augment.augment_table`), anonymized by
    ``anonymizer`` fitted as the ``anonymize`` op fits it for the attacker set (on ``background``, or on the
    clear attacker set when the background is empty); the record gives their count (``augmented_pairs``). The
    learning check reads the real pairs only."""
    m = cast(Deanonymizer, _create(context, method))
    clear, anonymized = _table(cache, clear_attacker), _table(cache, anon_attacker)
    train_clear, train_anon, extra = clear, anonymized, 0
    if augment is not None and anonymizer is not None:
        train_clear, train_anon = augmented_pairs(context, m, clear, anonymized, augment, anonymizer, cache, background)
        extra = len(train_clear) - len(clear)
    m.fit(train_clear, train_anon)
    del train_clear, train_anon
    learning = learning_check(m, clear, anonymized)
    anon = _table(cache, anon_evaluation)
    out = m.transform(anon)
    k = output_key(key, "evaluation")
    cache.put_table(k, out.with_lineage_step({"step": m.id, "fingerprint": k}))
    record: dict[str, Any] = {"outputs": {"evaluation": k}, "learning": learning}
    if augment is not None:
        record["augmented_pairs"] = int(extra)
    return record


def augmented_pairs(
    context: RunContext,
    m: Deanonymizer,
    clear: SampleTable,
    anonymized: SampleTable,
    augment: Mapping[str, Any],
    anonymizer: dict[str, Any],
    cache: Cache,
    background: str,
) -> tuple[SampleTable, SampleTable]:
    """The attacker's (clear, anonymized) pairs followed by their augmented copies: ``clear``'s images flipped
    and shifted (:func:`bioanon.augment.augment_table` on the de-anonymizer ``m``'s payload), anonymized by
    ``anonymizer`` fitted on the ``background`` table (key), or on ``clear`` when it is empty."""
    from ..augment import augment_table

    column = m.payload_column(anonymized, getattr(m, "payload", "") or None)
    copies = augment_table(clear, column, bool(augment.get("flip", False)), int(augment.get("shift", 0)))
    if not len(copies):
        return clear, anonymized
    back = _table(cache, background) if background else clear.filter(np.zeros(len(clear), dtype=bool))
    a = _fitted_anonymizer(context, anonymizer, back, clear)
    anon_copies = a.transform(copies)
    if not np.array_equal(anon_copies.sample_ids, copies.sample_ids):
        raise BioanonError(f"{a.id} changed the sample ids or their order")
    anon_copies = with_comparator(anon_copies, a)
    return SampleTable.concat([clear, copies]), SampleTable.concat([anonymized, anon_copies])


#: A de-anonymizer has learned when its reconstruction error on the pairs it held out is at most this share of
#: the better trivial baseline's: the anonymized input itself, or the mean of the clear payloads it trained on.
LEARNED_BELOW = 0.95


def learning_check(m: Deanonymizer, clear: SampleTable, anonymized: SampleTable) -> dict[str, Any]:
    """Whether the fitted de-anonymizer ``m`` learned: on the attacker pairs its fit held out
    (:meth:`~bioanon.methods.Deanonymizer.held_out_ids`), the mean squared error of its output against the clear
    payloads, beside that of two trivial baselines — the anonymized payloads themselves and the mean of the clear
    payloads of the pairs it trained on. ``learned`` is False when it does no better than
    :data:`LEARNED_BELOW` × the better baseline (a collapsed or untrained model); ``checked`` is False (with
    ``why``) when the method held out no pairs or its payload has no fixed shape.

    Beside it, identification on the held-out pairs (:func:`_held_out_top1`): a 1-nearest-neighbour (cosine on
    the flattened payloads) with the attacker's other clear images as gallery and the held-out pairs' clear,
    anonymized and restored images as probes gives ``top1_clear``, ``top1_anonymized`` (None when the
    anonymized payload has another shape) and ``top1_restored`` over ``top1_probes`` probes — the held-out pairs
    whose subject has a gallery image; ``top1_why`` says why there are none. They do not change ``learned``."""
    from ..payloads import flatten_payload

    ids = m.held_out_ids()
    if ids is None or len(ids) == 0:
        return {"checked": False, "why": f"{m.id} held out no attacker pairs (its validation share is 0 or too few)"}
    column = getattr(m, "column_", None) or m.payload_column(anonymized, getattr(m, "payload", "") or None)
    if None in anonymized.payload_shape(column):
        return {"checked": False, "why": f"payload {column!r} has no fixed shape"}

    from ..builtin.deanonymizers import _pairing, paired_payloads

    held_c, held_a = np.isin(clear.sample_ids, ids), np.isin(anonymized.sample_ids, ids)
    truth, probes = clear.filter(held_c), anonymized.filter(held_a)
    y, x = (a.astype(np.float64) for a in paired_payloads(truth, probes, column))
    restored = paired_payloads(truth, m.transform(probes), column)[1].astype(np.float64)
    rows = _pairing(truth, probes)[1]
    probe_subjects = truth.subjects if rows is None else truth.subjects[rows]
    trained_on = np.flatnonzero(~held_c & np.isin(clear.sample_ids, anonymized.sample_ids))
    gallery = np.flatnonzero(~held_c)
    mean = np.zeros(y.shape[1])
    payload = cast(np.ndarray, clear.payload(column))
    for start in range(0, len(trained_on), 4096):  # the clear training payloads summed in blocks
        mean += flatten_payload(payload[trained_on[start : start + 4096]]).sum(axis=0, dtype=np.float64)
    mean /= max(len(trained_on), 1)
    error = float(np.mean((restored - y) ** 2))
    identity = float(np.mean((x - y) ** 2)) if x.shape == y.shape else math.inf  # (inf: another shape)
    mean_error = float(np.mean((mean - y) ** 2))
    return {
        "checked": True,
        "pairs": int(len(ids)),
        "error": error,
        "identity_error": identity,
        "mean_error": mean_error,
        "learned": bool(error <= LEARNED_BELOW * min(identity, mean_error)),
        **_held_out_top1(
            payload, clear.subjects, gallery, probe_subjects, {"clear": y, "anonymized": x, "restored": restored}
        ),
    }


def _held_out_top1(
    payload: NDArray[Any],
    subjects: NDArray[Any],
    gallery: NDArray[Any],
    probe_subjects: NDArray[Any],
    probes: Mapping[str, NDArray[Any]],
) -> dict[str, Any]:
    """Top-1 identification of each set of flattened ``probes`` (name → P×D, the same P probes of
    ``probe_subjects``) by the nearest (cosine) of the gallery rows ``gallery`` of ``payload`` (their subjects
    ``subjects[gallery]``), read in blocks; probes whose subject has no gallery image are left out. A probe set
    of another width than the gallery gives None."""
    from ..payloads import flatten_payload

    known = np.isin(probe_subjects, subjects[gallery])
    if not known.any():
        why = "no gallery image" if not len(gallery) else "none of the held-out subjects has another clear image"
        return {"top1_why": f"identification on the held-out pairs not measured: {why} in the attacker's set"}
    width = int(np.prod(payload.shape[1:]))

    def unit(a: NDArray[Any]) -> NDArray[Any]:
        a = a.astype(np.float32)
        return cast(NDArray[Any], a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), np.float32(1e-12)))

    sets = {k: unit(v[known]) for k, v in probes.items() if v.ndim == 2 and v.shape[1] == width}
    n = int(known.sum())
    best = {k: np.full(n, -np.inf, dtype=np.float32) for k in sets}
    found = {k: np.empty(n, dtype=subjects.dtype) for k in sets}
    for start in range(0, len(gallery), 4096):  # the gallery in blocks: scores of every probe against each block
        rows = gallery[start : start + 4096]
        g = unit(flatten_payload(payload[rows]))
        for k, p in sets.items():
            scores = p @ g.T
            top = np.argmax(scores, axis=1)
            value = scores[np.arange(n), top]
            better = value > best[k]
            best[k][better], found[k][better] = value[better], subjects[rows][top[better]]
    truth = probe_subjects[known]
    out: dict[str, Any] = {"top1_probes": n}
    for k in probes:
        out[f"top1_{k}"] = float(np.mean(found[k] == truth)) if k in sets else None
    return out


@op
def select(
    cache: Cache, *, context: RunContext, method: dict[str, Any], n: int, evaluation: str, attacker: str, key: str
) -> dict[str, Any]:
    """Select n subjects of the evaluation set: the anonymized one (the selector may train on the anonymized
    attacker set), or the clear one for a selector of subjects alone (``Selector.subjects_only``)."""
    from ..table import ATTR_PREFIX

    m = cast(Selector, _create(context, method))
    columns = None if m.reads_payloads else ("subject", "sample_id", ATTR_PREFIX + "*")  # no payload read
    subjects = m.select(
        _table(cache, evaluation, columns=columns), n, attacker=_table(cache, attacker, columns=columns)
    )
    return {"subjects": [str(s) for s in subjects]}


#: An attribute column that fixes each sample's part in the enrolment/test split of the evaluation subjects:
#: ``"enrolment"`` (gallery) or ``"trial"`` (probe); samples with another value (null) are neither. Data sources
#: of predefined protocols set it (e.g. ``voice.kaldi`` from VoicePrivacy's enrolment and trial lists); without
#: it each evaluation subject's samples are split at random by ``rates.enrolment``.
ROLE_COLUMN = "role"
ENROLMENT_ROLE = "enrolment"
TRIAL_ROLE = "trial"
ROLE_VALUES = (ENROLMENT_ROLE, TRIAL_ROLE)


def has_roles(table: SampleTable) -> bool:
    """Whether the table fixes the enrolment/test split (an attribute column :data:`ROLE_COLUMN`)."""
    return ROLE_COLUMN in table.attribute_names


def enrolment_split(table: SampleTable, enrolment: float, seed: int, by_role: bool) -> tuple[SampleTable, SampleTable]:
    """(enrolment, test) samples of every subject of ``table``: by the :data:`ROLE_COLUMN` column when
    ``by_role``, else a seeded random share ``enrolment`` of each subject's samples."""
    if not by_role:
        enrol, test = table.split_within_subjects([enrolment, 1.0 - enrolment], seed)
        return enrol, test
    role = table.attribute(ROLE_COLUMN).astype(object)
    return table.filter(role == ENROLMENT_ROLE), table.filter(role == TRIAL_ROLE)


def _mixed(clear: SampleTable, anon: SampleTable, share: float, seed: int) -> SampleTable:
    """Attacker training data with a share of the samples anonymized (the %-parrot attacker)."""
    rng = np.random.default_rng(seed)
    n = len(clear)
    chosen = np.zeros(n, bool)
    chosen[rng.permutation(n)[: int(round(share * n))]] = True
    pa_payloads: dict[str, list[Any] | NDArray[Any]] = {}
    for name in anon.payload_names:
        x_clear, x_anon = clear.payload(name), anon.payload(name)
        if isinstance(x_clear, list):
            pa_payloads[name] = [a if c else b for a, b, c in zip(x_anon, x_clear, chosen, strict=True)]
        else:
            pa_payloads[name] = np.where(chosen.reshape((-1,) + (1,) * (x_clear.ndim - 1)), x_anon, x_clear)
    out = clear
    for name, values in pa_payloads.items():
        out = out.with_payload(name, values)
    return out


@op
def score(
    cache: Cache,
    *,
    context: RunContext,
    recognizer: dict[str, Any],
    scenario: str,
    label: str,
    sets: dict[str, str],
    selections: list[dict[str, Any]],
    enrolment: float,
    seed: int,
    bootstrap: int,
    confidence: float,
    per_probe_scores: bool,
    key: str,
    enrol_by: str = "",
    breakdown: tuple[str, ...] = (),
    attacker_fit: str = "attacker",
) -> dict[str, Any]:
    """Fit a recognizer once on the scenario's training data, then enrol and probe every subject selection.

    ``sets`` maps 'clear_attacker', 'anon_attacker', 'clear_evaluation', 'anon_evaluation' and optionally
    'deanon_evaluation' to table keys. Each selection gives its subjects; each selected subject's samples are
    split into enrolment and test (seeded, the same split for clear and anonymized data; with ``enrol_by =
    "role"`` by the data's :data:`ROLE_COLUMN` instead). ``breakdown``: attribute columns whose groups get their
    own EER and min Cllr (:func:`~bioanon.evaluation.scoring.breakdown_metrics`, the record's ``breakdown``).

    ``attacker_fit = "enrolment"`` (SEBA): no attacker set; the recognizer is fitted per selection on the
    enrolment part of the selected subjects in the scenario's training kind (clear for naive and lazy,
    anonymized for parrot, a mix for %-parrot), then enrolled as usual. A cross-validated recognizer
    (``cv_folds``) adds the spread of its per-fold balanced accuracies (rows ``cv_balanced_accuracy``,
    ``_std``, ``_min``, ``_max``)."""
    import pyarrow as pa

    from ..allocator import free_memory_returned
    from .scoring import DEFAULT_BLOCK_BYTES, ScoreBlocks, breakdown_metrics, score_metrics

    train_kind, enrol_kind, probe_kind = scenario_sets(scenario)
    mix_seed = derived_seed(seed, "mix")
    on_enrolment = attacker_fit == "enrolment"
    by_role = enrol_by == ROLE_COLUMN
    # the split needs subjects, ids and roles only; each selection's parts, then only their rows with payloads
    clear_eval = _ids_view(cache, sets["clear_evaluation"], by_role)
    parts = []
    for sel in selections:
        subjects = sel.get("subjects")
        if subjects is None:
            record = cache.get_json(sel["task"])
            if record is None:
                raise BioanonError(f"selection {sel['id']} has not been computed")
            subjects = record["subjects"]
        subset = clear_eval.select_subjects(subjects)
        parts.append((sel, subjects, *enrolment_split(subset, enrolment, seed, by_role)))
    ids = [np.asarray(p.sample_ids, dtype=object) for _, _, *both in parts for p in both]
    needed = pa.array(np.concatenate(ids) if ids else [], pa.string())
    kinds = {enrol_kind, probe_kind}
    if on_enrolment:
        kinds |= {"clear", "anon"} if train_kind.startswith("mix:") else {train_kind}
    rec: Any = None  # fitted per selection with attacker_fit = "enrolment"
    if not on_enrolment:
        attacker = {
            "clear": lambda: _table(cache, sets["clear_attacker"]),
            "anon": lambda: _table(cache, sets["anon_attacker"]),
        }
        if train_kind.startswith("mix:"):

            def train() -> SampleTable:
                return _mixed(attacker["clear"](), attacker["anon"](), float(train_kind[4:]), mix_seed)
        else:
            train = attacker[train_kind]
        train_id = _training_id(train_kind, sets, mix_seed)
        rec = context.fit(recognizer, train_id, label, train, affinity=fit_affinity(recognizer, train_id, label))
        free_memory_returned()  # what the fit's temporaries left in the allocator's heap, before the reads below
    # the selected subjects' samples, read once the attacker's training data are gone
    evaluation = {k: _needed_rows(cache, sets[f"{k}_evaluation"], needed) for k in sorted(kinds)}
    rows: list[dict[str, Any]] = []
    groups_out: list[dict[str, Any]] = []
    probes_out: dict[str, str] = {}
    for sel, subjects, enrol_part, test_part in parts:
        gallery = _rows(evaluation[enrol_kind], enrol_part.sample_ids)
        probes = _rows(evaluation[probe_kind], test_part.sample_ids)
        if on_enrolment:
            rec = _fit_on_enrolment(
                context,
                recognizer,
                label,
                train_kind,
                evaluation,
                sets,
                enrol_part.sample_ids,
                [str(s) for s in subjects],
                enrolment,
                seed,
                mix_seed,
            )
        rec.enroll(gallery, label)
        true = probes.subjects if label == "subject" else probes.attribute(label)
        enrolled = gallery.subjects if label == "subject" else gallery.attribute(label)
        scores = ScoreBlocks.from_recognizer(
            rec,
            probes,
            memory=context.memory or DEFAULT_BLOCK_BYTES,
            n_classes=len(np.unique(enrolled.astype(str))),
            true_labels=true,  # the metrics' first pass made while scoring: the blocks are read back once fewer
        )
        groups = probes.subjects
        for r in score_metrics(
            scores,
            true,
            groups,
            bootstrap=bootstrap,
            confidence=confidence,
            seed=derived_seed(seed, "bootstrap", sel["id"]),
            attribute=label != "subject",
        ):
            rows.append({"selection": sel["id"], **r})
        if breakdown:
            for r in breakdown_metrics(
                scores, true, {c: probes.attribute(c) for c in breakdown}, within=label == "subject"
            ):
                groups_out.append({"selection": sel["id"], **r})
        rows += [{"selection": sel["id"], **r} for r in cv_rows(rec)]
        if per_probe_scores:
            k = output_key(key, "scores:" + sel["id"])
            cache.put_table(k, _scores_table(scores, true, probes))
            probes_out[sel["id"]] = k
        scores.close()
    used = getattr(rec, "comparator_used", lambda: "")()  # a protection's declared comparator, if one was used
    out: dict[str, Any] = {"rows": rows, "scores": probes_out, "comparator": used}
    if breakdown:
        out["breakdown"] = groups_out
    return out


def _fit_on_enrolment(
    context: RunContext,
    recognizer: dict[str, Any],
    label: str,
    train_kind: str,
    evaluation: dict[str, SampleTable],
    sets: dict[str, str],
    ids: NDArray[Any],
    subjects: list[str],
    enrolment: float,
    seed: int,
    mix_seed: int,
) -> Any:
    """The recognizer fitted on the enrolment samples ``ids`` of the selected subjects in the scenario's
    training kind (``attacker_fit = "enrolment"``). Memoized under an identifier that starts with "enrolment",
    so it never meets a fit on an attacker set."""
    if train_kind.startswith("mix:"):
        train_id = ["enrolment", train_kind, mix_seed, sets["clear_evaluation"], sets["anon_evaluation"]]

        def train() -> SampleTable:
            return _mixed(
                _rows(evaluation["clear"], ids), _rows(evaluation["anon"], ids), float(train_kind[4:]), mix_seed
            )
    else:
        train_id = ["enrolment", train_kind, sets[f"{train_kind}_evaluation"]]

        def train() -> SampleTable:
            return _rows(evaluation[train_kind], ids)

    # the enrolment part is fixed by the evaluation tables, the subjects, the enrolment share and the seed
    return context.fit(recognizer, [*train_id, sorted(subjects), enrolment, seed], label, train)


def cv_rows(rec: Any) -> list[dict[str, Any]]:
    """Metric rows of a cross-validated recognizer (``cv_folds``): the mean, std, min and max over folds of the
    balanced accuracy on each fold's held-out part; no rows without cross-validation."""
    from ..builtin.recognizers import cv_summary

    cv = cv_summary(rec)
    if cv is None:
        return []
    note = (
        f"{cv['folds']}-fold stratified cross-validation of the classifier on its {cv['samples']} training "
        f"samples (keep = {cv['keep']}): balanced accuracy per held-out fold"
    )
    chance = 1.0 / cv["classes"]
    return [
        {
            "metric": "cv_balanced_accuracy" + suffix,
            "value": cv[stat],
            "ci_low": float("nan"),
            "ci_high": float("nan"),
            "chance": chance if stat != "std" else float("nan"),
            "n_probes": cv["samples"],
            "note": note,
        }
        for stat, suffix in (("mean", ""), ("std", "_std"), ("min", "_min"), ("max", "_max"))
    ]


def _ids_view(cache: Cache, key: str, roles: bool) -> SampleTable:
    """The stored table's subjects and sample ids (and with ``roles`` its :data:`ROLE_COLUMN`), no payload: of a
    row selection, nothing else is copied."""
    from ..table import ATTR_PREFIX

    return _table(cache, key, columns=("subject", "sample_id", *((ATTR_PREFIX + ROLE_COLUMN,) if roles else ())))


def _needed_rows(cache: Cache, key: str, ids: Any) -> SampleTable:
    """The stored table's rows whose sample id is among ``ids`` (an Arrow string array), in table order: only
    they are copied out of a row selection's base table."""
    import pyarrow.compute as pc

    position = np.flatnonzero(to_numpy(pc.is_in(_ids_view(cache, key, False).arrow.column("sample_id"), value_set=ids)))
    return _table(cache, key, take=position)


def _rows(table: SampleTable, ids: NDArray[Any]) -> SampleTable:
    """The rows whose sample id is in ``ids`` (vectorized), in table order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return table.filter(pc.is_in(table.arrow.column("sample_id"), value_set=pa.array(ids, pa.string())))


def _scores_table(scores: Any, true: NDArray[Any], probes: SampleTable) -> SampleTable:
    """The per-probe score matrix (:class:`~bioanon.evaluation.scoring.ScoreBlocks`) as a table: payload
    ``scores`` (float64, exactly the matrix the metrics were computed from: float32 rounding flipped top-1
    decisions between near-tied classes), the true label, and the column classes in the metadata."""
    return SampleTable.from_arrays(
        subject=probes.subjects,
        sample_id=probes.sample_ids,
        payloads={"scores": scores.dense(np.float64)},
        attributes={"true_label": np.asarray(true).astype(str)},
        metadata={"classes": [str(c) for c in scores.classes]},
    )


@op
def extract(cache: Cache, *, context: RunContext, measure: dict[str, Any], table: str, key: str) -> dict[str, Any]:
    """The slow first stage of a two-stage utility measure (``UtilityMeasure.extracts``, e.g. speech
    recognition) on one table, as its own cached task: ``{"sample_ids": [...], "values": [...]}``."""
    m = cast(UtilityMeasure, _create(context, measure))
    t = _table(cache, table)
    values = list(m.extract(t))
    if len(values) != len(t):
        raise BioanonError(f"{m.id}.extract returned {len(values)} values for {len(t)} samples")
    return {"sample_ids": t.sample_ids.tolist(), "values": values}


def _extracted(cache: Cache, task_key: str, table: SampleTable) -> list[Any]:
    """An extract task's values in the row order of ``table``."""
    record = cache.get_json(task_key)
    if record is None:
        raise BioanonError(f"extraction {task_key} has not been computed")
    pos = {s: i for i, s in enumerate(record["sample_ids"])}
    try:
        return [record["values"][pos[s]] for s in table.sample_ids.tolist()]
    except KeyError as e:
        raise BioanonError(f"extraction {task_key} has no value for sample {e.args[0]!r}") from None


@op
def utility(
    cache: Cache,
    *,
    context: RunContext,
    measure: dict[str, Any],
    clear_attacker: str,
    clear_evaluation: str,
    anon_evaluation: str,
    bootstrap: int,
    confidence: float,
    seed: int,
    key: str,
    extracted: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A utility measure: fitted on the clear attacker set, measured on the anonymized evaluation set, beside
    its clear level (the same measure on clear data) and its floor. ``extracted`` ('clear', 'anon': extract
    task keys) holds the first stage of a two-stage measure."""
    from ..metrics import bootstrap_ci

    m = cast(UtilityMeasure, _create(context, measure))
    m.fit(_table(cache, clear_attacker))
    clear = _table(cache, clear_evaluation)
    anon = _table(cache, anon_evaluation)
    if extracted:
        ex_clear = _extracted(cache, extracted["clear"], clear)
        values = np.asarray(m.compare(clear, ex_clear, _extracted(cache, extracted["anon"], clear)), dtype=np.float64)
        clear_values = np.asarray(m.compare(clear, ex_clear, ex_clear), dtype=np.float64)
    else:
        values = np.asarray(m.measure(clear, anon), dtype=np.float64)
        clear_values = np.asarray(m.measure(clear, clear), dtype=np.float64)
    _, groups = np.unique(clear.subjects, return_inverse=True)
    known = np.isfinite(values)  # e.g. samples whose attribute is missing
    if not known.any():
        raise BioanonError(f"{m.id}: no sample has a finite utility value")
    lo = hi = float("nan")
    if bootstrap > 0 and len(np.unique(groups[known])) > 1:
        lo, hi = bootstrap_ci(values[known], groups[known], n_resamples=bootstrap, seed=seed, alpha=1 - confidence)
    return {
        "value": float(np.mean(values[known])),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "n_missing": int((~known).sum()),
        "clear_value": float(np.nanmean(clear_values)),
        "floor": float(m.floor(clear)),
        "higher_is_better": bool(m.higher_is_better),
    }


@op
def protocol(
    cache: Cache,
    *,
    context: RunContext,
    attribute: str,
    clear_evaluation: str,
    anon_evaluation: str,
    seed: int,
    key: str,
) -> dict[str, Any]:
    """The paper's own evaluation protocol (the utility-preserving anonymization paper §5.1.3) on the evaluation
    set: attribute-of-interest accuracy of a random forest trained on original data, mixture, top-k mixture and
    KL from random guess of an identity classifier trained on original data. Payloads that cannot be flattened
    (e.g. ``audio``) go through a trait plugin's default feature view (:func:`bioanon.methods.feature_matrix`);
    without one the task fails with an error naming the setting and the payloads."""
    from ..builtin.protocol import paper_protocol

    try:
        out = paper_protocol(_table(cache, clear_evaluation), _table(cache, anon_evaluation), attribute, seed=seed)
    except BioanonError as e:  # name the setting that asked for it
        msg = f"[report] paper_protocol = {attribute!r}: {e}"
        try:
            err = type(e)(msg)
        except TypeError:  # an error type with another constructor
            err = BioanonError(msg)
        raise err from None
    flat: dict[str, float] = {}
    for name, value in out.items():
        if isinstance(value, dict):
            prefix = "top" if name == "top_k_mixture" else "random_top"
            for k, v in value.items():
                flat[f"{prefix}{k}_mixture"] = float(v)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[name] = float(value)
    return {"values": flat}

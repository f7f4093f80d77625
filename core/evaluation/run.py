"""Plan, execute and collect a strong evaluation (DESIGN §7).

For every repeat (its own subject split) and anonymizer setting: split subjects into background / attacker /
evaluation → anonymize attacker and evaluation sets → select subjects → optionally de-anonymize → split each
selected subject's samples into enrolment and test → every recognizer under every attacker scenario, plus the
clear level → metrics with CIs → utility → privacy–utility trade-off and its AUC.
Every stage is a cached task keyed by fingerprint, so a sweep shares its splits, a rerun reuses everything and
an interrupted run resumes.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
import platform
import sys
import time
import warnings as _warnings
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import numpy as np
from numpy.typing import NDArray

from ..cache import Cache, table_fingerprint
from ..context import RunContext
from ..errors import BioanonError, ConfigError
from ..fileio import atomic_write, atomic_write_text, jsonable
from ..table import LOAD_WARNINGS, SampleTable, _part_sizes
from .checks import data_problems, device_problems
from .config import background_fit_problems, fit_defined_anonymizers, raise_problems, stratify_columns
from .data import (  # noqa: F401 -- re-exported (the names of bioanon.evaluation.run before the split)
    ResourceEstimate,
    attacker_data_problems,
    check_disk_space,
    dataset_name,
    import_data,
    import_dataset,
    import_key,
    load_data,
    map_attacker_table,
    prepare_attacker_data,
)
from .rundir import RunFolder, RunInterrupted, check_run_id
from .scenarios import (
    ATTACK_SCENARIOS,  # noqa: F401 -- re-exported (bioanon.evaluation.run.ATTACK_SCENARIOS)
    CLEAR,
    NOT_CONVERGED,
    headline_metric_of,
    planned_scenarios,
    scenario_tables,
    worst_case,
)
from .tasks import TaskSpec, derived_seed, make_task, output_key, shard_bounds

if TYPE_CHECKING:
    from ..methods import Anonymizer

log = logging.getLogger(__name__)


@attrs.define
class Plan:
    """The task graph of one evaluation, with what is needed to interpret its results."""

    tasks: list[TaskSpec]
    dataset_key: str
    warnings: list[str]
    # {key, anonymizer, setting, setting_index, params, repeat, recognizer, scenario, deanonymizer_task,
    # anonymize_task}
    score_tasks: list[dict[str, Any]]
    utility_tasks: list[dict[str, Any]]
    split_tasks: list[dict[str, Any]]
    n_evaluation_subjects: int
    protocol_tasks: list[dict[str, Any]] = attrs.field(factory=list)
    attacker_dataset_key: str | None = None  # the prepared [attacker_dataset] (cross-database protocol)
    # about the data, for the report: {"protocol": table metadata "protocol" (e.g. "voiceprivacy") or "",
    # "enrolment": "role" (split by the data's role column) or "share", "breakdown": [columns]}
    data_info: dict[str, Any] = attrs.field(factory=dict)


class _RunsInCache:
    """The default output of :func:`evaluate`: ``<cache root>/runs`` (never the working directory)."""

    def __repr__(self) -> str:
        return "RUNS_IN_CACHE"


RUNS_IN_CACHE: Any = _RunsInCache()


def runs_folder(cache: Cache) -> Path:
    """Where :func:`evaluate` writes runs when no ``out_dir`` is given: ``runs/`` under a local cache root,
    else under the user data folder (``bioanon cache clear`` leaves it alone)."""
    if getattr(cache, "_local", False):
        return Path(cache.root) / "runs"
    import platformdirs

    return Path(platformdirs.user_data_dir("bioanon")) / "runs"


@attrs.define
class EvaluationResult:
    """The outcome of :func:`evaluate`: where the results are, the tidy tables, and what was recomputed."""

    run_dir: Path | None
    metrics: Any  # pandas.DataFrame
    utility: Any
    tradeoff: Any
    auc: Any
    warnings: list[str]
    failures: list[dict[str, str]]
    executed: int
    cached: int
    report_path: Path | None = None
    stages: dict[str, dict[str, float]] = attrs.field(factory=dict)  # per stage: executed, cached, seconds
    protocol: Any = None  # the paper's own protocol per setting (when report.paper_protocol is set)
    breakdown: Any = None  # EER and min Cllr per group of [report] breakdown (see collect_breakdown)
    config: dict[str, Any] | None = None  # the validated config as written to config.json

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EvaluationResult:
        """The result of the evaluation whose results folder is ``path`` (``<out>/<run id>``), as
        :func:`evaluate` returned it: the same tables, warnings, failures, task counts and config, read from the
        folder's files. See :func:`open_results` (the same, as ``bioanon.open_results``) for the errors."""
        return open_results(path)

    def headline(self) -> Any:
        """Worst case per anonymizer setting (max over recognizers and attack scenarios) of the headline metric:
        top-1 for identity, balanced accuracy for an attribute label (see :func:`headline_table`)."""
        return headline_table(self.metrics)

    def summary(self) -> Any:
        """The headline with each setting's privacy level (0 = clear, 1 = chance) and normalized utilities
        (a pandas DataFrame; see :func:`bioanon.notebook.summary`)."""
        from ..notebook import summary

        return summary(self)

    def curves(self) -> Any:
        """The privacy–utility points of the headline selector and subject count, in sweep order (a pandas
        DataFrame; see :func:`bioanon.notebook.curves`)."""
        from ..notebook import curves

        return curves(self)

    def plot(self, kind: str = "tradeoff") -> Any:
        """A matplotlib Figure: ``"tradeoff"`` (privacy–utility curves with AUCs), ``"headline"`` (worst-case
        attack per setting with clear level and chance), or another of the report's (``"subjects"``,
        ``"scenarios"``, ``"reversibility"``)."""
        from ..notebook import plot

        return plot(self, kind)

    def plots(self, kinds: Any = None) -> list[Any]:
        """Every figure of the report, drawn from this result's tables (:class:`bioanon.report.Plot`: the
        figure and a caption saying how to read it)."""
        from ..notebook import plots

        return plots(self, kinds)

    def _repr_html_(self) -> str:
        from ..notebook import result_html

        return result_html(self)


#: the states of a run folder whose results are whole
_FINISHED = ("complete", "complete with failures")


def _read_table(path: Path, columns: list[str] | None) -> Any:
    """A results table of a run folder as :func:`_results` made it (an empty table of ``columns`` when the run did
    not write it; ``columns`` None: the table is required)."""
    import pandas as pd

    from ..report import ReportError, ResultsNotFoundError

    if not path.is_file():
        if columns is None:
            raise ResultsNotFoundError(
                f"{path}: {path.name} not found in the results folder; the evaluation did not finish writing its "
                "results (run the same config again)"
            )
        return pd.DataFrame([], columns=columns)
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a damaged file
        raise ReportError(f"{path}: cannot read {path.name}: {type(exc).__name__}: {exc}") from exc


def _read_json(path: Path, default: Any) -> Any:
    from ..report import ReportError

    if not path.is_file():
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: cannot read {path.name}: {exc}") from exc


def _unfinished(run_dir: Path, status: dict[str, Any]) -> str:
    """What a run folder's status says about a run that did not finish, for a message naming the folder."""
    from .rundir import LOCK_FILE, lock_owner

    state = str(status.get("state"))
    if state == "running":
        owner = lock_owner(run_dir / LOCK_FILE)
        if owner is not None:
            return f"its run is still going (pid {owner.get('pid')} on {owner.get('host')}); wait for it to finish"
        return "its run's process ended without finishing (killed?); run the same config again to resume"
    detail = ""
    if status.get("tasks_total"):
        detail = f", {status.get('tasks_saved')} of {status.get('tasks_total')} tasks saved in the cache"
    if status.get("error"):
        detail += f": {status['error']}"
    return f"its run was {state}{detail}; run the same config again to resume"


def open_results(path: str | os.PathLike[str]) -> EvaluationResult:
    """The :class:`EvaluationResult` of a finished evaluation, read from its results folder ``path``
    (``<out>/<run id>``, as :func:`evaluate` and ``bioanon evaluate`` write it): equal to the result the run
    returned, with ``report_path`` set when ``report.html`` exists (render it again with
    :func:`bioanon.report.render_report`). Nothing is recomputed.

    Raises :class:`~bioanon.report.ResultsNotFoundError` (a :class:`~bioanon.errors.BioanonError`) naming the
    path when it is not a results folder, and :class:`~bioanon.errors.BioanonError` when the folder was written
    by a newer bioanon (its ``status.json`` records a newer results format) or its run did not finish and wrote
    no results. A folder whose run did not finish but holds results (an earlier run's, or a run killed while
    writing them) opens with a warning saying so."""
    from .._version import __version__
    from ..report import ResultsNotFoundError
    from .rundir import RESULTS_FORMAT, STATUS_FILE, read_status

    run_dir = Path(path)
    if not run_dir.is_dir():
        raise ResultsNotFoundError(
            f"{run_dir}: no such results folder; give the folder of one run, <out>/<run id>, as `bioanon "
            "evaluate` prints it"
        )
    metrics = run_dir / "metrics.parquet"
    status = read_status(run_dir)
    if status is None and (run_dir / STATUS_FILE).exists():
        raise BioanonError(f"{run_dir / STATUS_FILE}: unreadable run status (not JSON); is this a results folder?")
    if status is None and not metrics.is_file():
        raise ResultsNotFoundError(
            f"{run_dir}: not a results folder of an evaluation (it has neither {STATUS_FILE} nor metrics.parquet); "
            "give the folder of one run, <out>/<run id>, as `bioanon evaluate` prints it"
        )
    fmt = (status or {}).get("format", 1)
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt > RESULTS_FORMAT:
        raise BioanonError(
            f"{run_dir}: written by a newer bioanon (results format {fmt!r}; bioanon {__version__} reads format "
            f"{RESULTS_FORMAT} and older): upgrade bioanon (pip install -U bioanon) to open it"
        )
    if status is not None and status.get("state") not in _FINISHED:
        why = _unfinished(run_dir, status)
        if not metrics.is_file():
            raise BioanonError(f"{run_dir}: the evaluation did not finish and wrote no results: {why}")
        _warnings.warn(
            f"{run_dir}: the evaluation did not finish ({why}); its results files may be partial or left by "
            "an earlier run",
            UserWarning,
            stacklevel=3,
        )
    env = _read_json(run_dir / "environment.json", {})
    found = env.get("tasks") if isinstance(env, dict) else None
    tasks: dict[str, Any] = found if isinstance(found, dict) else {}
    report = run_dir / "report.html"
    return EvaluationResult(
        run_dir,
        _read_table(metrics, None),
        _read_table(run_dir / "utility.parquet", None),
        _read_table(run_dir / "tradeoff.parquet", None),
        _read_table(run_dir / "auc.parquet", None),
        list(_read_json(run_dir / "warnings.json", [])),
        list(_read_json(run_dir / "failures.json", [])),
        int(tasks.get("executed", 0)),
        int(tasks.get("cached", 0)),
        report if report.is_file() else None,
        dict(tasks.get("by_stage") or {}),
        _read_table(run_dir / "protocol.parquet", _PROTOCOL_COLUMNS),
        _read_table(run_dir / "breakdown.parquet", BREAKDOWN_COLUMNS),
        _read_json(run_dir / "config.json", None),
    )


# --------------------------------------------------------------------------------------------------- planning


def _method_dict(spec: Any, setting: Mapping[str, Any] | None = None) -> dict[str, Any]:
    m = spec.create(setting)
    params = jsonable(m.get_params())
    if params.get("device", None) in ("", "auto") and "device" in attrs.fields_dict(type(m)):
        # the run's device, resolved here, so every worker runs the method where the plan says
        from ..device import resolve_device

        params["device"] = resolve_device(params["device"], who=m.id)
    return {"id": m.id, "params": params}


def _with_seed(method: dict[str, Any], seed: int) -> dict[str, Any]:
    """Give a method's ``seed`` parameter (if it has one) a derived value."""
    if "seed" in method["params"]:
        return {"id": method["id"], "params": {**method["params"], "seed": int(seed)}}
    return method


def _unsplittable(table: SampleTable, enrolment: float, label: str, cross: bool = False) -> tuple[list[str], list[str]]:
    """Subjects whose samples cannot give both an enrolment and a test sample (they cannot be evaluated, but
    stay legitimate attacker training material), and the warning that says so. With a role column
    (:data:`~bioanon.evaluation.tasks.ROLE_COLUMN`) a subject needs an enrolment and a trial sample."""
    from .tasks import ENROLMENT_ROLE, ROLE_COLUMN, TRIAL_ROLE, has_roles

    if has_roles(table):
        role = table.attribute(ROLE_COLUMN).astype(object)
        subjects = np.unique(table.subjects)
        enrolled = set(table.subjects[role == ENROLMENT_ROLE])
        tried = set(table.subjects[role == TRIAL_ROLE])
        ok = np.array([s in enrolled and s in tried for s in subjects], dtype=bool)
        why = (
            f"have no {ENROLMENT_ROLE!r} or no {TRIAL_ROLE!r} sample in the column {ROLE_COLUMN!r} (they are "
            "not in the data's enrolment and trial lists)"
        )
    else:
        subjects, counts = np.unique(table.subjects, return_counts=True)
        sizes = _part_sizes(counts.astype(np.int64), np.array([enrolment, 1.0 - enrolment]))
        ok = cast("NDArray[np.bool_]", (sizes >= 1).all(axis=1))  # one flag per subject
        why = f"have too few samples for an enrolment share of {enrolment} (need ≥ 1 enrolment and ≥ 1 test sample)"
    warnings = []
    if not ok.all():
        bad = subjects[~ok]
        warnings.append(
            f"{'not enrolled and probed' if has_roles(table) else 'too few samples per subject'}: {len(bad)} of "
            f"{len(subjects)} subjects {why}; they are kept out of the "
            + (
                "evaluation set (and out of the attacker's, which is [attacker_dataset]): "
                if cross
                else "evaluation set and used as attacker training data: "
            )
            + ", ".join(map(str, bad[:5]))
            + (" …" if len(bad) > 5 else "")
        )
    return [str(s) for s in subjects[~ok]], warnings


def _stratified_plan(
    data: SampleTable, training_only: list[str], rates: list[float], names: tuple[str, ...], asked: Any
) -> tuple[tuple[str, ...], NDArray[np.int64], list[str]]:
    """The stratified split of the subjects the rates divide (``data`` without ``training_only``): the columns
    it stratifies by (``asked == "auto"`` leaves out a column whose value varies within most subjects: a
    per-sample attribute such as a transcript makes no subject strata), the subjects per part (background,
    attacker, evaluation; as the split task will cut them: they do not depend on the seed) and the warnings:
    subjects counted by their most frequent value, strata too small for every part to get one of them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..table_transforms import stratified_sizes, subject_strata

    table = data
    if training_only:
        mask = pc.is_in(data.arrow.column("subject"), value_set=pa.array(training_only, pa.string()))
        table = data.filter(pc.invert(mask))
    warnings: list[str] = []
    stratum, labels, varying = subject_strata(table, names)
    n_subjects = table.num_subjects
    if asked == "auto":
        per_sample = [n for n in names if varying[n] > n_subjects / 2]
        if per_sample:
            log.info(
                "[rates] stratify = auto: not by %s (its value varies within most subjects)", ", ".join(per_sample)
            )
            names = tuple(n for n in names if n not in per_sample)
            if not names:
                return (), _part_sizes(np.array([n_subjects]), np.array(rates))[0], warnings
            stratum, labels, varying = subject_strata(table, names)
    for name in names:
        if varying[name]:
            warnings.append(
                f"[rates] stratify: {varying[name]} of {n_subjects} subjects have samples with different values "
                f"of {name!r}; each is counted in the stratum of its most frequent value"
            )
    used = [i for i, rate in enumerate(rates) if rate > 0]  # the parts the split divides (rate 0: none)
    counts = np.bincount(stratum, minlength=len(labels))
    per_stratum = stratified_sizes(counts, [rates[i] for i in used])
    sizes = np.zeros(len(rates), dtype=np.int64)
    sizes[used] = per_stratum.sum(axis=0)
    small = np.flatnonzero((per_stratum == 0).any(axis=1))
    if small.size:
        parts = ("background", "attacker", "evaluation")
        shown = ", ".join(
            "/".join(f"{n}={v}" for n, v in zip(names, labels[i], strict=True)) + f" ({int(counts[i])} subjects)"
            for i in small[:5]
        )
        warnings.append(
            f"[rates] stratify: {small.size} of {len(labels)} strata have too few subjects for each of the parts "
            f"({', '.join(parts[i] for i in used)}) to get one: {shown}{' …' if small.size > 5 else ''}; "
            "some parts lack these values"
        )
    return names, sizes, warnings


def least_tasks(cfg: Any) -> int:
    """The fewest tasks the plan of ``cfg`` can have, known from the config alone (before its data are read):
    per repeat, the split, one anonymization per anonymizer setting, and per recognizer its clear level and one
    score per setting and attack scenario. (Selections, shards, templates and de-anonymizers only add tasks.)"""
    settings = sum(len(a.settings()) for a in cfg.anonymizers)
    attacks = len(planned_scenarios(cfg.scenarios)) - 1
    return int(cfg.repeats) * (1 + settings + len(cfg.recognizers) * (1 + settings * attacks))


def build_plan(
    cfg: Any, cache: Cache, data: SampleTable, dataset_key: str | None = None, attacker_key: str | None = None
) -> Plan:
    """Turn a validated config into the task graph (the data set is stored in the cache first; ``dataset_key``:
    its content fingerprint when already known). With ``[attacker_dataset]``, ``attacker_key`` is the cache key
    of the prepared attacker data (:func:`prepare_attacker_data`, called here when not given)."""
    cross = getattr(cfg, "attacker_dataset", None) is not None
    if cross and attacker_key is None:
        attacker_key = prepare_attacker_data(cfg, data, cache)[1]
    skipped = data.metadata.get("skipped_files") or []
    training_only, warnings = _unsplittable(data, cfg.rates.enrolment, cfg.label, cross)
    if skipped:
        warnings.insert(
            0,
            f"{len(skipped)} unreadable data file(s) skipped: "
            + ", ".join(map(str, skipped[:5]))
            + (" …" if len(skipped) > 5 else ""),
        )
    # what the data source reported while loading (table metadata LOAD_WARNINGS, e.g. images without a face)
    warnings[:0] = [str(w) for w in data.metadata.get(LOAD_WARNINGS) or []]
    dataset_key = dataset_key or table_fingerprint(data)
    if not cache.has_table(dataset_key):
        cache.put_table(dataset_key, data)
    rates = [cfg.rates.background, cfg.rates.attacker, cfg.rates.evaluation]
    n_split = data.num_subjects - len(training_only)  # the subjects the rates divide
    rounding = getattr(cfg.rates, "rounding", "largest_remainder")
    sizes = _part_sizes(np.array([n_split]), np.array(rates), rounding)[0]
    stratify = stratify_columns(cfg)
    if stratify and n_split:
        stratify, sizes, notes = _stratified_plan(data, training_only, rates, stratify, cfg.rates.stratify)
        warnings += notes
    n_eval = int(sizes[2])
    # background = 0: no background part, by request; attacker = 0: the attacker set is [attacker_dataset]
    if min(sizes[[i for i, rate in enumerate(rates) if rate > 0]]) < 1:
        raise BioanonError(
            f"rates {rates} over {n_split} subjects with enough samples to evaluate leave a part "
            "(background/attacker/evaluation) empty"
        )
    if rates[0] == 0:
        fitted = [spec.id for _, spec in fit_defined_anonymizers(cfg.anonymizers)]
        warnings.append(
            "rates.background = 0: no background set; every anonymizer is fitted on the set it "
            "anonymizes (the attacker and evaluation sets each on their own)"
            + (
                f"; the output columns of {', '.join(dict.fromkeys(fitted))} depend on that fit, so the attacker's "
                "and the evaluated outputs may not line up (a background share > 0, e.g. 0.2, fits them once)"
                if fitted
                else ""
            )
        )
    counts = sorted(set(cfg.selection.subject_counts), reverse=True) or [n_eval]
    reachable = [n for n in counts if n <= n_eval]
    for n in counts:
        if n > n_eval:
            warnings.append(f"selection cannot reach {n} subjects: the evaluation set has only {n_eval}; skipped")
    if not reachable:
        raise BioanonError(f"no subject count in {counts} is reachable with {n_eval} evaluation subjects")

    tasks: list[TaskSpec] = []
    score_tasks: list[dict[str, Any]] = []
    utility_tasks: list[dict[str, Any]] = []
    split_tasks: list[dict[str, Any]] = []
    protocol_tasks: list[dict[str, Any]] = []
    rep = cfg.report
    scenarios = planned_scenarios(cfg.scenarios)
    data_info = data_description(cfg, data)
    score_extra: dict[str, Any] = {}  # only when used, so the keys of other runs' score tasks stay the same
    if data_info["enrolment"] == "role":
        score_extra["enrol_by"] = "role"
    if data_info["breakdown"]:
        score_extra["breakdown"] = list(data_info["breakdown"])

    planned: dict[str, TaskSpec] = {}

    def add(task: TaskSpec) -> TaskSpec:
        """The plan's task with ``task``'s key: ``task``, added now, or the same task added earlier (e.g. the
        clear level of a selection every anonymizer setting shares)."""
        if task.key not in planned:
            planned[task.key] = task
            tasks.append(task)
        return planned[task.key]

    # per-sample anonymizers anonymize each data set once, in shards (each a cached task); every repeat's parts
    # are row selections of that (tasks.anonymize_rows)
    # (and an encoder that embeds each sample on its own embeds each data set once: tasks.templates_rows)
    data_sets: list[tuple[str, SampleTable]] = [(dataset_key, data)]
    if cross and attacker_key is not None:
        attacker_table = cache.get_table(attacker_key)  # (prepared before the plan: in the cache)
        if attacker_table is None:
            data_sets = []  # nothing sharded: every part is anonymized on its own
        else:
            data_sets.append((attacker_key, attacker_table))
    sharded_sets = data_sets if cfg.templates is None else []  # (templates change per split)
    shard_tasks: dict[str, TaskSpec] = {}

    def shards_of(
        op: str, method: dict[str, Any], what: str, sets: list[tuple[str, SampleTable]]
    ) -> tuple[dict[str, list[str]], tuple[str, ...]]:
        """The output keys of the shard tasks ``op`` of ``method`` per data set of ``sets``, and those tasks'
        keys."""
        outputs: dict[str, list[str]] = {}
        keys: list[str] = []
        stage, verb = ("templates", "templates of") if op == "templates_rows" else ("anonymize", "anonymize")
        for set_key, table in sets:
            outputs[set_key] = []
            for start, stop in shard_bounds(len(table), table.arrow.nbytes / max(len(table), 1)):
                t = make_task(
                    op,
                    {"method": method, "dataset": set_key, "start": start, "stop": stop},
                    (),
                    stage=stage,
                    label=f"{verb} {what} rows {start}–{stop}"
                    + (" of the attacker data" if set_key != dataset_key else ""),
                )
                if t.key not in shard_tasks:  # the same shards serve every repeat
                    shard_tasks[t.key] = add(t)
                outputs[set_key].append(output_key(t.key, "rows"))
                keys.append(t.key)
        return outputs, tuple(keys)

    for r in range(cfg.repeats):
        seed_r = derived_seed(cfg.seed, "repeat", r)
        split_args = {"dataset": dataset_key, "rates": rates, "seed": seed_r}
        if rounding != "largest_remainder":  # only when used, so other runs' split keys stay the same
            split_args["rounding"] = rounding
        if training_only:
            split_args["training_only"] = training_only
        if cross:
            split_args["attacker_dataset"] = attacker_key
            split_args["attacker_subjects"] = cfg.attacker_dataset.subjects
        if stratify:  # only when asked, so that the keys of plain splits stay the same
            split_args["stratify"] = list(stratify)
        t_split = add(make_task("split", split_args, (), stage="split", label=f"split repeat {r}"))
        split_tasks.append({"key": t_split.key, "repeat": r})
        clear = {n: output_key(t_split.key, n) for n in ("background", "attacker", "evaluation")}
        if cfg.templates is not None:  # every part becomes templates before any protection
            tpl = cfg.templates
            tpl_method = _method_dict(tpl.recognizer)
            tpl_args: dict[str, Any] = {"method": tpl_method, "fit": tpl.fit, "label": tpl.label, **clear}
            tpl_deps: tuple[str, ...] = (t_split.key,)
            if getattr(tpl.recognizer.method_class(), "embeds_per_sample", False):
                tpl_args["shards"], shard_keys = shards_of("templates_rows", tpl_method, tpl.recognizer.id, data_sets)
                tpl_deps += shard_keys
            t_tpl = add(
                make_task(
                    "templates",
                    tpl_args,
                    tpl_deps,
                    stage="templates",
                    label=f"templates {tpl.recognizer.id} repeat {r}",
                )
            )
            clear = {n: output_key(t_tpl.key, n) for n in clear}
            t_split = t_tpl  # the later stages read its outputs: they depend on it
        for a_spec in cfg.anonymizers:
            for s_idx, setting in enumerate(a_spec.settings()):
                label = a_spec.setting_label(setting)
                where = f"{a_spec.name}[{label}] repeat {r}" if label else f"{a_spec.name} repeat {r}"
                method = _method_dict(a_spec, setting)
                anon_args: dict[str, Any] = {"method": method, **clear}
                anon_deps: tuple[str, ...] = (t_split.key,)
                if sharded_sets and cast("type[Anonymizer]", a_spec.method_class()).rows_independent(setting):
                    what = f"{a_spec.name}[{label}]" if label else a_spec.name
                    anon_args["shards"], shard_keys = shards_of("anonymize_rows", method, what, sharded_sets)
                    anon_deps += shard_keys
                t_anon = add(
                    make_task("anonymize", anon_args, anon_deps, stage="anonymize", label=f"anonymize {where}")
                )
                anon = {n: output_key(t_anon.key, n) for n in ("attacker", "evaluation")}
                sets = {
                    "clear_attacker": clear["attacker"],
                    "anon_attacker": anon["attacker"],
                    "clear_evaluation": clear["evaluation"],
                    "anon_evaluation": anon["evaluation"],
                }
                deps_anon: tuple[str, ...] = (t_split.key, t_anon.key)
                t_de = None
                if cfg.deanonymizer is not None:
                    de_args: dict[str, Any] = {
                        "method": _method_dict(cfg.deanonymizer),
                        "clear_attacker": clear["attacker"],
                        "anon_attacker": anon["attacker"],
                        "anon_evaluation": anon["evaluation"],
                    }
                    if cfg.augment is not None:  # only then: the keys of other runs stay the same
                        de_args["augment"] = cfg.augment.to_dict()
                        de_args["anonymizer"] = method
                        de_args["background"] = clear["background"]
                    t_de = add(
                        make_task(
                            "deanonymize",
                            de_args,
                            deps_anon,
                            stage="deanonymize",
                            label=f"de-anonymize {where}",
                        )
                    )
                    sets["deanon_evaluation"] = output_key(t_de.key, "evaluation")
                    deps_anon = deps_anon + (t_de.key,)
                selections = []
                clear_only = True  # every selection the same for all settings: their clear level too
                for sel_spec in cfg.selection.selectors:
                    base = _method_dict(sel_spec)
                    draws = cfg.selection.random_draws if base["id"] == "any.select_random" else 1
                    # a selection of subjects alone is made once per repeat, from the clear tables
                    subjects_only = bool(getattr(sel_spec.method_class(), "subjects_only", False))
                    clear_only = clear_only and subjects_only
                    sel_from, sel_deps = (clear, (t_split.key,)) if subjects_only else (anon, (t_anon.key,))
                    sel_where = f"repeat {r}" if subjects_only else where
                    for n in reachable:
                        for d in range(draws):
                            if n == n_eval and draws > 1 and d > 0:
                                break  # every draw of all subjects is the same set
                            m = _with_seed(base, derived_seed(cfg.seed, r, sel_spec.name, n, d))
                            t_sel = add(
                                make_task(
                                    "select",
                                    {
                                        "method": m,
                                        "n": n,
                                        "evaluation": sel_from["evaluation"],
                                        "attacker": sel_from["attacker"],
                                    },
                                    sel_deps,
                                    stage="select",
                                    label=f"select {sel_spec.name} n={n} {sel_where}",
                                )
                            )
                            selections.append({"id": f"{sel_spec.name}|{n}|{d}", "task": t_sel.key})
                sel_keys = tuple(s["task"] for s in selections)
                for rec_spec in cfg.recognizers:
                    rec = _method_dict(rec_spec)
                    for scen in scenarios:
                        needed = scenario_tables(scen, sets, cfg.attacker_fit)
                        fit_arg = {"attacker_fit": cfg.attacker_fit} if cfg.attacker_fit != "attacker" else {}
                        # the clear level of selections that no setting changes: one task for every setting
                        shared = scen == CLEAR and clear_only
                        t_score = add(
                            make_task(
                                "score",
                                {
                                    "recognizer": rec,
                                    "scenario": scen,
                                    "label": cfg.label,
                                    "sets": needed,
                                    "selections": selections,
                                    "enrolment": cfg.rates.enrolment,
                                    "seed": seed_r,
                                    "bootstrap": rep.bootstrap,
                                    "confidence": rep.confidence,
                                    "per_probe_scores": rep.per_probe_scores,
                                    **score_extra,
                                    **fit_arg,
                                },
                                ((t_split.key,) if shared else deps_anon) + sel_keys,
                                stage="score",
                                label=f"score {rec_spec.name} {scen} {f'repeat {r}' if shared else where}",
                            )
                        )
                        score_tasks.append(
                            {
                                "key": t_score.key,
                                "anonymizer": a_spec.name,
                                "setting": label,
                                "setting_index": s_idx,
                                "params": json.dumps(method["params"]),
                                "repeat": r,
                                "recognizer": rec_spec.name,
                                "scenario": scen,
                                # the de-anonymization task whose output this scenario reads ("" when none)
                                "deanonymizer_task": t_de.key if t_de and "deanon_evaluation" in needed else "",
                                "anonymize_task": t_anon.key,  # its setting: no rows when that failed
                            }
                        )
                for u_spec in cfg.utility:
                    u_args = {
                        "measure": _method_dict(u_spec),
                        "clear_attacker": clear["attacker"],
                        "clear_evaluation": clear["evaluation"],
                        "anon_evaluation": anon["evaluation"],
                        "bootstrap": rep.bootstrap,
                        "confidence": rep.confidence,
                        "seed": derived_seed(seed_r, "utility"),
                    }
                    u_deps: tuple[str, ...] = (t_split.key, t_anon.key)
                    if u_spec.method_class().extracts:  # the slow first stage: one cached task per table
                        ex = {
                            k: add(
                                make_task(
                                    "extract",
                                    {"measure": u_args["measure"], "table": tbl},
                                    dep,
                                    stage="extract",
                                    label=f"extract {u_spec.name} {k} {where}",
                                )
                            ).key
                            for k, tbl, dep in (
                                ("clear", clear["evaluation"], (t_split.key,)),
                                ("anon", anon["evaluation"], (t_anon.key,)),
                            )
                        }
                        u_args["extracted"] = ex
                        u_deps += tuple(ex.values())
                    t_u = add(
                        make_task("utility", u_args, u_deps, stage="utility", label=f"utility {u_spec.name} {where}")
                    )
                    utility_tasks.append(
                        {
                            "key": t_u.key,
                            "anonymizer": a_spec.name,
                            "setting": label,
                            "setting_index": s_idx,
                            "params": json.dumps(method["params"]),
                            "repeat": r,
                            "measure": u_spec.name,
                        }
                    )
                if rep.paper_protocol:
                    t_p = add(
                        make_task(
                            "protocol",
                            {
                                "attribute": rep.paper_protocol,
                                "clear_evaluation": clear["evaluation"],
                                "anon_evaluation": anon["evaluation"],
                                "seed": derived_seed(seed_r, "protocol"),
                            },
                            (t_split.key, t_anon.key),
                            stage="protocol",
                            label=f"paper protocol {where}",
                        )
                    )
                    protocol_tasks.append(
                        {
                            "key": t_p.key,
                            "anonymizer": a_spec.name,
                            "setting": label,
                            "setting_index": s_idx,
                            "repeat": r,
                        }
                    )
    order = {
        "split": 0,
        "templates": 0.5,
        "anonymize": 1,
        "deanonymize": 2,
        "select": 3,
        "score": 4,
        "extract": 5,
        "utility": 6,
        "protocol": 7,
    }
    tasks.sort(key=lambda t: order[t.stage])  # stable: dependencies always come first
    return Plan(
        tasks,
        dataset_key,
        warnings,
        score_tasks,
        utility_tasks,
        split_tasks,
        n_eval,
        protocol_tasks,
        attacker_key,
        data_info,
    )


def data_description(cfg: Any, data: SampleTable) -> dict[str, Any]:
    """What the report says about the data: the table metadata ``protocol`` (e.g. ``"voiceprivacy"``, set by
    ``voice.kaldi``; "" when none), how evaluation subjects are split into enrolment and test (``"role"``: by
    the role column, else ``"share"``: ``rates.enrolment``), and the attribute columns EER and min Cllr are
    broken down by (``[report] breakdown``; ``"auto"``: those of :data:`~bioanon.evaluation.config.BREAKDOWN_AUTO`
    the data have)."""
    from .config import BREAKDOWN_AUTO
    from .tasks import has_roles

    breakdown = cfg.report.breakdown
    if breakdown == "auto":
        breakdown = [c for c in BREAKDOWN_AUTO if c in data.attribute_names]
    protocol = data.metadata.get("protocol")
    return {
        "protocol": protocol if isinstance(protocol, str) else "",
        "enrolment": "role" if has_roles(data) else "share",
        "breakdown": list(breakdown),
    }


def task_memory(cfg: Any) -> int:
    """Bytes of working memory one task may use: ``[run] memory`` (default half the machine's) shared by the
    local executor's workers."""
    from ..executors import resolve_jobs
    from .config import machine_memory, parse_memory

    return parse_memory(cfg.run.memory, machine_memory()) // max(1, resolve_jobs(cfg.run.jobs or None))


def estimate_resources(
    plan: Plan, cfg: Any, data_bytes: int, cache: Cache, attacker_bytes: int = 0, n_rows: int = 0
) -> ResourceEstimate:
    """Estimate what the tasks still to compute will write to the cache and need in memory.

    A split writes the data set once more; an anonymization writes the attacker and evaluation shares; a
    de-anonymization the evaluation share; scores and JSON records are small (≈ 64 KiB each, or the per-probe
    score matrices when kept). Peak memory: the data set, its anonymized copy and a working copy of the largest
    task's inputs, and the working memory of the largest score matrix, within the per-task memory budget
    (:func:`task_memory`). ``attacker_bytes``: the size of ``[attacker_dataset]`` (split and anonymized with the
    rest); ``n_rows``: the data set's samples."""
    share = {"split": 1.0, "anonymize": cfg.rates.attacker + cfg.rates.evaluation, "deanonymize": cfg.rates.evaluation}
    shard_rows: dict[str, int] = {}  # data set key -> its rows (the last shard's end)
    for t in plan.tasks:
        if t.op in ("anonymize_rows", "templates_rows"):
            shard_rows[t.args["dataset"]] = max(shard_rows.get(t.args["dataset"], 0), int(t.args["stop"]))
    disk = 0
    new = 0
    for t in plan.tasks:
        if cache.has_json(t.key):
            continue
        new += 1
        if t.op in ("anonymize_rows", "templates_rows"):  # its share of the data set (then row positions)
            whole = data_bytes if t.args["dataset"] == plan.dataset_key else attacker_bytes
            rows = int(t.args["stop"]) - int(t.args["start"])
            disk += int(whole * rows / max(shard_rows[t.args["dataset"]], 1)) + 64 * 1024
            continue
        if t.op in ("anonymize", "templates") and t.args.get("shards"):
            disk += 64 * 1024
            continue
        disk += int(share.get(t.stage, 0.0) * data_bytes) + 64 * 1024
        disk += attacker_bytes if t.stage in ("split", "anonymize") else 0
    # the score matrices are read in blocks within the per-task budget, whatever their size (scoring.py)
    from .scoring import DEFAULT_BLOCK_BYTES

    scores = min(task_memory(cfg), DEFAULT_BLOCK_BYTES, _largest_score_matrix(plan, cfg, n_rows))
    return ResourceEstimate(disk, 3 * data_bytes + scores + 256 * 1024 * 1024, new)


def _largest_score_matrix(plan: Plan, cfg: Any, n_rows: int) -> int:
    """Working bytes of the largest score matrix of the plan (an upper bound: the evaluation share's samples ×
    its subjects, :data:`~bioanon.evaluation.scoring.BYTES_PER_SCORE` each)."""
    from .scoring import BYTES_PER_SCORE

    return int(cfg.rates.evaluation * n_rows) * int(plan.n_evaluation_subjects) * BYTES_PER_SCORE


#: The tables a scenario reads (:func:`bioanon.evaluation.scenarios.scenario_tables`; the old name).
_sets_for = scenario_tables


# --------------------------------------------------------------------------------------------------- results


#: The columns that place a metric row in the run, first in the metrics and the breakdown tables.
RUN_COLUMNS = [
    "anonymizer",
    "setting",
    "setting_index",
    "params",
    "repeat",
    "selector",
    "n_subjects",
    "draw",
    "recognizer",
    "scenario",
    "label",
]


def _run_columns(st: Mapping[str, Any], row: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """The columns that place a metric row in the run (shared by the metrics and the breakdown tables): the
    score task ``st``'s anonymizer setting, repeat, recognizer and scenario, and ``row``'s selection."""
    selector, n, draw = row["selection"].split("|")
    return {
        "anonymizer": st["anonymizer"],
        "setting": st["setting"],
        "setting_index": st["setting_index"],
        "params": st["params"],
        "repeat": st["repeat"],
        "selector": selector,
        "n_subjects": int(n),
        "draw": int(draw),
        "recognizer": st["recognizer"],
        "scenario": st["scenario"],
        "label": labels.get(st["key"], "subject"),
    }  # the keys of RUN_COLUMNS, in its order


def scored(plan: Plan, records: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(row of ``plan.score_tasks``, its task's record) for every score task that ran, of the settings whose
    anonymization ran: the clear level that a selection of subjects alone shares between settings is computed
    whatever becomes of them, and is not reported for a setting whose anonymization failed."""
    for st in plan.score_tasks:
        rec, anonymized = records.get(st["key"]), st.get("anonymize_task")
        if rec is None or (anonymized is not None and anonymized not in records):
            continue
        yield st, rec


def collect_metrics(plan: Plan, records: Mapping[str, Any]) -> Any:
    """The tidy metrics table: one row per score task × selection × metric, with the evaluation's ``label``
    ("subject" for identity, else the attribute), a ``note`` that explains undefined values (NaN) and missing or
    approximate CIs ("" when there is nothing to say) and the ``comparator`` a protection declared that the
    recognizer compared templates with ("" when it used its own comparison)."""
    import pandas as pd

    labels = {t.key: str(t.args.get("label", "subject")) for t in plan.tasks if t.op == "score"}
    rows = []
    for st, rec in scored(plan, records):
        unlearned = not_learned_note(records.get(st.get("deanonymizer_task", "")))
        for row in rec["rows"]:
            note = "; ".join(n for n in (unlearned, row.get("note", "")) if n)
            rows.append(
                {
                    **_run_columns(st, row, labels),
                    **{k: row[k] for k in ("metric", "value", "ci_low", "ci_high", "chance", "n_probes")},
                    "note": note,
                    "comparator": rec.get("comparator", ""),
                }
            )
    cols = [
        *RUN_COLUMNS,
        "metric",
        "value",
        "ci_low",
        "ci_high",
        "chance",
        "n_probes",
        "note",
        "comparator",
    ]
    return pd.DataFrame(rows, columns=cols)


BREAKDOWN_COLUMNS = [
    *RUN_COLUMNS,
    "by",
    "group",
    "metric",
    "value",
    "chance",
    "n_probes",
    "group_subjects",
    "n_mated",
    "n_nonmated",
    "note",
]


def collect_breakdown(plan: Plan, records: Mapping[str, Any]) -> Any:
    """The tidy breakdown table (``breakdown.parquet``): EER and min Cllr per group of probes, one row per score
    task × selection × attribute (``by``) × value (``group``) × metric, with the run columns of the metrics table;
    ``group_subjects`` counts the group's subjects, ``n_mated``/``n_nonmated`` its scores
    (:func:`~bioanon.evaluation.scoring.breakdown_metrics`)."""
    import pandas as pd

    labels = {t.key: str(t.args.get("label", "subject")) for t in plan.tasks if t.op == "score"}
    rows = []
    for st, rec in scored(plan, records):
        for row in rec.get("breakdown", []):
            rows.append(
                {
                    **_run_columns(st, row, labels),
                    "group_subjects": row["n_subjects"],
                    **{
                        k: row[k]
                        for k in (
                            "by",
                            "group",
                            "metric",
                            "value",
                            "chance",
                            "n_probes",
                            "n_mated",
                            "n_nonmated",
                            "note",
                        )
                    },
                }
            )
    return pd.DataFrame(rows, columns=BREAKDOWN_COLUMNS)


#: The headline metric of a metrics table (:func:`bioanon.evaluation.scenarios.headline_metric_of`): ``top1``
#: for identity, ``balanced_accuracy`` for an attribute label.
headline_metric = headline_metric_of


def collect_utility(plan: Plan, records: Mapping[str, Any]) -> Any:
    import pandas as pd

    from ..metrics import utility_level

    rows = []
    for ut in plan.utility_tasks:
        rec = records.get(ut["key"])
        if rec is None:
            continue
        rows.append(
            {k: ut[k] for k in ("anonymizer", "setting", "setting_index", "params", "repeat", "measure")}
            | {k: rec[k] for k in ("value", "ci_low", "ci_high", "clear_value", "floor")}
            | {"normalized": float(utility_level(rec["value"], rec["clear_value"], rec["floor"]))}
        )
    cols = [
        "anonymizer",
        "setting",
        "setting_index",
        "params",
        "repeat",
        "measure",
        "value",
        "ci_low",
        "ci_high",
        "clear_value",
        "floor",
        "normalized",
    ]
    return pd.DataFrame(rows, columns=cols)


_PROTOCOL_COLUMNS = ["anonymizer", "setting", "setting_index", "repeat", "metric", "value"]


def collect_protocol(plan: Plan, records: Mapping[str, Any]) -> Any:
    import pandas as pd

    rows = []
    for pt in plan.protocol_tasks:
        rec = records.get(pt["key"])
        if rec is None:
            continue
        for metric, value in rec["values"].items():
            rows.append(
                {k: pt[k] for k in ("anonymizer", "setting", "setting_index", "repeat")}
                | {"metric": metric, "value": value}
            )
    return pd.DataFrame(rows, columns=_PROTOCOL_COLUMNS)


def headline_table(metrics: Any) -> Any:
    """Per anonymizer setting: the worst case (highest mean of the headline metric over recognizers × attack
    scenarios) at the largest subject count of the first selector, with the recognizer and scenario that achieved
    it, beside the clear level and chance.

    ``metric`` names the headline metric (:func:`headline_metric`): top-1 accuracy for identity, balanced accuracy
    for an attribute label. ``worst_accuracy``, ``ci_low``, ``ci_high`` (CI bounds averaged over repeats and
    draws), ``clear_accuracy`` and ``chance`` are of that metric (for balanced accuracy the uniform chance
    1/|classes|). ``top1`` and ``majority_rate`` are the plain top-1 accuracy of the same attack and its chance
    (the majority-class rate for an attribute, 1/|G| for identity), shown side by side."""
    import pandas as pd

    hm = headline_metric(metrics)
    top1 = metrics[metrics.metric == hm]
    if top1.empty:
        return pd.DataFrame()
    first_sel = top1.selector.iloc[0]
    nmax = top1[top1.selector == first_sel].n_subjects.max()
    t = top1[(top1.selector == first_sel) & (top1.n_subjects == nmax)]
    keys = ["anonymizer", "setting_index", "setting", "recognizer", "scenario"]
    mean = (
        t.groupby(keys, sort=False)
        .agg(value=("value", "mean"), lo=("ci_low", "mean"), hi=("ci_high", "mean"), chance=("chance", "mean"))
        .reset_index()
    )
    plain = metrics[(metrics.metric == "top1") & (metrics.selector == first_sel) & (metrics.n_subjects == nmax)]
    plain = plain.groupby(keys, sort=False).agg(top1=("value", "mean"), majority=("chance", "mean"))
    out = []
    for (anon, idx, setting), g in mean.groupby(["anonymizer", "setting_index", "setting"], sort=False):
        worst_rows = worst_case(g)  # ties: recognizers in config order, then scenarios in display order
        clear = g[g.scenario == CLEAR]
        if worst_rows.empty:
            continue
        worst = worst_rows.iloc[0]
        pk = (anon, idx, setting, worst.recognizer, worst.scenario)
        p = plain.loc[pk] if pk in plain.index else None
        out.append(
            {
                "anonymizer": anon,
                "setting": setting,
                "setting_index": idx,
                "metric": hm,
                "worst_accuracy": worst.value,
                "ci_low": worst.lo,
                "ci_high": worst.hi,
                "worst_recognizer": worst.recognizer,
                "worst_scenario": worst.scenario,
                "clear_accuracy": clear.value.max() if not clear.empty else math.nan,
                "chance": worst.chance,
                "top1": float(p.top1) if p is not None else math.nan,
                "majority_rate": float(p.majority) if p is not None else math.nan,
                "selector": first_sel,
                "n_subjects": int(nmax),
            }
        )
    return pd.DataFrame(out)


def tradeoff_tables(metrics: Any, utility: Any, has_deanon: bool) -> tuple[Any, Any]:
    """Privacy–utility points (one per anonymizer setting × selector × subject count × measure × deanon) and the
    AUC of each curve: privacy from the worst case over recognizers and scenarios (mean over repeats
    and random draws), utility normalized between its floor and clear level.

    Privacy uses the headline metric (:func:`headline_metric`, named in the ``metric`` column): top-1 accuracy
    for identity; for an attribute label balanced accuracy with uniform chance, consistent with the headline (with
    plain accuracy and the majority-class rate, an attacker whose only skill is guessing the majority class would
    count as chance and one exploiting a skewed class balance would be misjudged). ``accuracy``, ``clear_accuracy``
    and ``chance`` are of that metric."""
    import pandas as pd

    from ..metrics import privacy_level, tradeoff_auc, utility_level

    hm = headline_metric(metrics)
    top1 = metrics[metrics.metric == hm]
    keys = ["anonymizer", "setting_index", "setting", "selector", "n_subjects", "recognizer", "scenario"]
    acc = top1.groupby(keys, sort=False).agg(value=("value", "mean"), chance=("chance", "mean")).reset_index()
    if utility is not None and not utility.empty:
        util = (
            utility.groupby(["anonymizer", "setting_index", "measure"], sort=False)
            .agg(value=("value", "mean"), clear_value=("clear_value", "mean"), floor=("floor", "mean"))
            .reset_index()
        )
        measures = list(dict.fromkeys(util.measure))
    else:
        util, measures = None, [""]
    points = []
    for (anon, idx, setting, sel, n), g in acc.groupby(
        ["anonymizer", "setting_index", "setting", "selector", "n_subjects"], sort=False
    ):
        clear = g[g.scenario == CLEAR]
        a_clear = clear.value.max() if not clear.empty else math.nan
        chance = g.chance.mean()
        for deanon in [False, True] if has_deanon else [False]:
            worst_rows = worst_case(g, deanon=deanon)  # ties: as in worst_case (the report's rule)
            if worst_rows.empty:
                continue
            worst = worst_rows.iloc[0]
            privacy = float(privacy_level(worst.value, a_clear, chance))
            for measure in measures:
                y = math.nan
                if util is not None:
                    u = util[(util.anonymizer == anon) & (util.setting_index == idx) & (util.measure == measure)]
                    if not u.empty:
                        y = float(utility_level(u.value.iloc[0], u.clear_value.iloc[0], u.floor.iloc[0]))
                points.append(
                    {
                        "anonymizer": anon,
                        "setting": setting,
                        "setting_index": idx,
                        "selector": sel,
                        "n_subjects": int(n),
                        "measure": measure,
                        "deanon": deanon,
                        "metric": hm,
                        "accuracy": float(worst.value),
                        "worst_recognizer": worst.recognizer,
                        "worst_scenario": worst.scenario,
                        "clear_accuracy": float(a_clear),
                        "chance": float(chance),
                        "privacy": privacy,
                        "utility": y,
                    }
                )
    tradeoff = pd.DataFrame(
        points,
        columns=[
            "anonymizer",
            "setting",
            "setting_index",
            "selector",
            "n_subjects",
            "measure",
            "deanon",
            "metric",
            "accuracy",
            "worst_recognizer",
            "worst_scenario",
            "clear_accuracy",
            "chance",
            "privacy",
            "utility",
        ],
    )
    aucs = []
    if util is not None and not tradeoff.empty:
        for (anon, sel, n, measure), g in tradeoff.groupby(
            ["anonymizer", "selector", "n_subjects", "measure"], sort=False
        ):
            per = {}
            for deanon, h in g.groupby("deanon"):
                h = h.dropna(subset=["privacy", "utility"])
                if not h.empty:
                    per[bool(deanon)] = float(tradeoff_auc(h.privacy.to_numpy(), h.utility.to_numpy()))
            if not per:
                continue
            low = min(per.values())
            counted_done = False
            for deanon, value in per.items():
                counted = value == low and not counted_done
                counted_done |= counted
                aucs.append(
                    {
                        "anonymizer": anon,
                        "selector": sel,
                        "n_subjects": int(n),
                        "measure": measure,
                        "deanon": deanon,
                        "auc": value,
                        "counted": counted,
                    }
                )
    auc = pd.DataFrame(aucs, columns=["anonymizer", "selector", "n_subjects", "measure", "deanon", "auc", "counted"])
    return tradeoff, auc


def not_learned_note(record: Mapping[str, Any] | None) -> str:
    """The note of the metric rows that read a de-anonymization task's output: "" unless its learning check
    (:func:`~bioanon.evaluation.tasks.learning_check`) found that it did not learn."""
    check = (record or {}).get("learning") or {}
    if not check.get("checked") or check.get("learned", True):
        return ""
    top1 = ""
    if check.get("top1_probes"):
        values = ", ".join(
            f"{k} {check[f'top1_{k}']:.2f}"
            for k in ("clear", "anonymized", "restored")
            if check.get(f"top1_{k}") is not None
        )
        top1 = f" (1-NN top-1 of its {check['top1_probes']} probes: {values})"
    return (
        f"{NOT_CONVERGED}: on {check['pairs']} held-out attacker pairs its error {check['error']:.4g} is no better "
        f"than the anonymized input's {check['identity_error']:.4g} or the mean's {check['mean_error']:.4g}{top1}"
    )


def learning_warnings(plan: Plan, records: Mapping[str, Any]) -> list[str]:
    """One line per de-anonymization task that did not learn, naming the setting and repeat."""
    out = []
    for t in plan.tasks:
        note = not_learned_note(records.get(t.key)) if t.op == "deanonymize" else ""
        if note:
            out.append(
                f"{t.label}: {t.args['method']['id']} {note}; its rows are marked '{NOT_CONVERGED}' and no "
                f"setting is called irreversible on its strength (train longer, more pairs, or another seed)"
            )
    return out


#: The attacker-too-weak guard's bar, as a share of the way from chance to a perfect attack: a recognizer whose
#: clear-level confidence interval lies wholly below chance + WEAK_ATTACKER_SHARE × (1 − chance) (a chance-
#: normalized accuracy of 0.25) is too weak for its privacy figures to say much.
WEAK_ATTACKER_SHARE = 0.25


def weak_attacker_bar(chance: float, share: float = WEAK_ATTACKER_SHARE) -> float:
    """The level below which a clear-level attacker is too weak: ``chance + share × (1 − chance)``."""
    return chance + share * (1.0 - chance)


def judge_attacker(value: float, ci_low: float, ci_high: float, chance: float) -> str:
    """The attacker-too-weak guard's verdict on a recognizer's clear-level headline metric, judged on its
    confidence interval, not on the point estimate:

    * ``"weak"``: the whole CI lies below :func:`weak_attacker_bar` (the attacker is weak with confidence);
    * ``"unclear"``: the CI reaches from chance (or below) to the bar (or above), too wide to tell a strong
      attacker from one at chance (few subjects);
    * ``"ok"``: otherwise, including a CI that straddles the bar but excludes chance (demonstrably above chance).

    Without a CI (NaN bounds: bootstrap off, or fewer than 2 subjects) the value stands for both bounds."""
    lo = value if math.isnan(ci_low) else ci_low
    hi = value if math.isnan(ci_high) else ci_high
    bar = weak_attacker_bar(chance)
    if hi < bar - 1e-12:
        return "weak"
    if lo <= chance + 1e-12:
        return "unclear"
    return "ok"


def sanity_warnings(metrics: Any) -> list[str]:
    """The attacker-too-weak guard, per recognizer, selector and subject count, on the clear-level headline
    metric (top-1 for identity, balanced accuracy for an attribute; mean value and CI bounds over repeats and
    draws), as :func:`judge_attacker` decides: "attacker too weak" when its CI lies wholly below
    :func:`weak_attacker_bar`, a softer "attacker strength unclear" note when its CI spans chance and the bar."""
    out: list[str] = []
    hm = headline_metric(metrics)
    name = {"top1": "top-1", "balanced_accuracy": "balanced accuracy"}[hm]
    clear = metrics[(metrics.metric == hm) & (metrics.scenario == CLEAR)]
    if clear.empty:
        return out
    g = clear.groupby(["recognizer", "selector", "n_subjects"], sort=False).agg(
        value=("value", "mean"), lo=("ci_low", "mean"), hi=("ci_high", "mean"), chance=("chance", "mean")
    )
    for (rec, sel, n), row in g.iterrows():
        verdict = judge_attacker(row.value, row.lo, row.hi, row.chance)
        if verdict == "ok":
            continue
        no_ci = math.isnan(row.lo) or math.isnan(row.hi)
        ci = "no CI: judged on the value" if no_ci else f"CI {row.lo:.3f}–{row.hi:.3f}"
        bar = weak_attacker_bar(row.chance)
        where = f"({sel}, {n} subjects)"
        if verdict == "weak":
            out.append(
                f"attacker too weak: {rec} reaches only {row.value:.3f} {name} on CLEAR data ({ci}), below "
                f"{bar:.3f}, a quarter of the way from chance {row.chance:.3f} to 1 {where}; its privacy figures "
                f"say little: add a stronger attacker (another recognizer, more attacker data)"
            )
        else:
            out.append(
                f"attacker strength unclear: {rec} reaches {row.value:.3f} {name} on CLEAR data, but its {ci} "
                f"spans chance {row.chance:.3f} and {bar:.3f}, a quarter of the way to 1 {where}: too few "
                f"subjects to tell whether it beats chance (not a verdict on the attacker); its privacy figures "
                f"are uncertain, more subjects or repeats narrow the CI"
            )
    return out


def _environment(seed: int) -> dict[str, Any]:
    from .._version import __version__
    from ..plugins import get_plugin_manager

    versions = {}
    for mod in ("numpy", "pyarrow", "sklearn", "pandas", "scipy", "torch"):
        m = sys.modules.get(mod)
        if m is not None:
            versions[mod] = getattr(m, "__version__", "?")
    return {
        "bioanon": __version__,
        "plugins": {s.distribution: s.version for s in get_plugin_manager().statuses if s.status == "loaded"},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
        "seed": seed,
        "cpu_count": os.cpu_count(),
    }


def _write_parquet(df: Any, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    atomic_write(path, lambda f: pq.write_table(table, f))


def _run_id(cfg: Any) -> str:
    from ..cache import fingerprint

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in cfg.name)[:40] or "run"
    return f"{safe}-{stamp}-{fingerprint(cfg.to_dict())[:6]}"


def _config_digest(cfg: Any, data_key: str | None) -> str:
    """What tells two runs of the same config apart from others (recorded in the run folder's status): the
    validated config and, for data given directly instead of the configured source, its content fingerprint."""
    from ..cache import fingerprint

    return fingerprint({"config": cfg.to_dict(), "data": data_key})


def evaluate(
    config: Any,
    *,
    data: SampleTable | None = None,
    out_dir: str | os.PathLike[str] | None = RUNS_IN_CACHE,
    run_id: str | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    executor: Any = "local",
    scheduler: Any = None,
    keep_going: bool | None = None,
    progress: bool = True,
    report: bool = True,
    device: str | None = None,
    jobs: int | None = None,
    context: RunContext | None = None,
) -> EvaluationResult:
    """Run a strong evaluation.

    Parameters
    ----------
    config : a path to a TOML file, a dict, or a validated :class:`~bioanon.evaluation.config.EvalConfig`.
        It is validated completely before any work.
    data : a SampleTable to evaluate instead of loading the configured dataset source.
    out_dir : where ``<run-id>/`` is written (default: ``runs/`` in the cache, see :func:`runs_folder`, so a
        notebook never writes into its working directory; None: write nothing, only return the tables).
    run_id : the run directory's name (default: name, time and config fingerprint, with ``-2``, ``-3``, … when
        a concurrent run took it): a plain name (letters, digits, ``.``, ``_``, ``-``; no ``/`` or ``..``), else
        a ConfigError before any work; a symbolic link out of ``out_dir`` is refused. The folder is created
        before any work and holds ``status.json`` (running / complete / failed / interrupted); a folder in use
        by a live run is refused; folders of runs that were killed are marked failed. A rerun of the same
        config (and data) whose latest run folder did not finish (interrupted, failed, or its process gone)
        resumes into that folder and completes it, saying so in the log (see :mod:`bioanon.evaluation.rundir`).
    cache : a :class:`~bioanon.cache.Cache` or its root (default: ``$BIOANON_CACHE`` or the user cache).
    executor : ``"local"`` (default), ``"dask"``, or an object with ``run(tasks) -> ExecutionReport``.
    scheduler : for ``executor="dask"``: the scheduler address, or a ``distributed.Client``.
    keep_going : True: finish everything that does not depend on a failed task, then report the failures;
        False: stop at the first failure (:class:`~bioanon.executors.TaskFailed`); None (default): ``[run]
        keep_going`` of the config, else stop unless the failure is a data problem of one setting (such as a part
        of the split holding one value of the attribute a protection suppresses): that setting's tasks fail, are
        reported in ``failures``, and the other settings finish (:func:`~bioanon.executors.stops_run`).
    progress : progress bars per stage.
    report : render ``report.html`` with plots.
    device : the torch device of every torch-backed method whose ``device`` parameter is ``""``: ``auto``,
        ``cpu``, ``cuda``, ``cuda:N`` or ``mps``; overrides ``[run] device`` (default: that, else
        ``$BIOANON_DEVICE``, else ``auto``). Resolved once, when the plan is made; recorded in
        ``environment.json`` and shown by the report. See :mod:`bioanon.device`.
    jobs : worker processes of the local executor (and of the local Dask cluster ``executor="dask"`` starts
        without a scheduler); overrides ``[run] jobs`` (default: that, else ``$BIOANON_JOBS``, else every usable
        core). Results do not depend on it.
    context : the run's :class:`~bioanon.context.RunContext` (its registry; :func:`bioanon.evaluate` makes a
        new one per run; default: the active one, else a new one). The run's cache and device are set on it;
        it is active while the config is validated, the plan is made and tasks run in this process, so the
        run's fitted recognizers and computed arrays are reused within the run only.

    Raises
    ------
    RunInterrupted
        (a ``KeyboardInterrupt``) on Ctrl-C, saying how many tasks are saved; the same call resumes.
    """
    from ..context import current_context

    context = context if context is not None else current_context()
    with context.activate():
        return _evaluate_in(
            context,
            config,
            data,
            out_dir,
            run_id,
            cache,
            executor,
            scheduler,
            keep_going,
            progress,
            report,
            device,
            jobs,
        )


def _evaluate_in(
    context: RunContext,
    config: Any,
    data: Any,
    out_dir: Any,
    run_id: Any,
    cache: Any,
    executor: Any,
    scheduler: Any,
    keep_going: bool | None,
    progress: bool,
    report: bool,
    device: str | None,
    jobs: int | None,
) -> EvaluationResult:
    """:func:`evaluate` with ``context`` active."""
    from .config import EvalConfig, load_config

    started = time.time()
    check_run_id(run_id)  # a plain folder name, before any work
    from ..allocator import arrow_memory_returned_when_freed, large_buffers_returned
    from ..device import using_device

    arrow_memory_returned_when_freed()
    large_buffers_returned()

    cfg = config if isinstance(config, EvalConfig) else load_config(config, registry=context.registry)
    if config is cfg:  # given validated: what could have changed since (e.g. attrs.evolve of its rates)
        raise_problems(background_fit_problems(cfg), f"config {cfg.name!r} cannot run")
    raise_problems(device_problems(cfg, device), f"config {cfg.name!r} cannot run here")
    if device:
        cfg = attrs.evolve(cfg, run=attrs.evolve(cfg.run, device=device))
    if jobs is not None:
        if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 0:
            raise ConfigError(f"jobs must be a number of worker processes (0 = every core), got {jobs!r}")
        cfg = attrs.evolve(cfg, run=attrs.evolve(cfg.run, jobs=jobs))
    if keep_going is None:
        keep_going = cfg.run.keep_going
    with using_device(cfg.run.device or None):
        return _evaluate(
            context, cfg, data, out_dir, run_id, cache, executor, scheduler, keep_going, progress, report, started
        )


def _evaluate(
    context: RunContext,
    cfg: Any,
    data: Any,
    out_dir: Any,
    run_id: Any,
    cache: Any,
    executor: Any,
    scheduler: Any,
    keep_going: bool | None,
    progress: bool,
    report: bool,
    started: float,
) -> EvaluationResult:
    from ..allocator import free_memory_returned
    from ..executors import DaskExecutor, LocalExecutor

    cache = cache if isinstance(cache, Cache) else Cache(cache)
    context.cache, context.device = cache, cfg.run.device or ""
    context.memory = task_memory(cfg)
    if out_dir is RUNS_IN_CACHE:
        out_dir = runs_folder(cache)
    # the run folder exists (and is writable) before any work; it says whether the run is going, done or not; a
    # rerun of a config whose latest run did not finish resumes into that run's folder
    data_key = table_fingerprint(data) if data is not None and out_dir is not None else None
    folder = None
    if out_dir is not None:
        folder = RunFolder.open(out_dir, run_id, _run_id(cfg), config_digest=_config_digest(cfg, data_key))
        if folder.resumed:
            log.info("resuming the %s run in %s (same config)", folder.resumed[-1]["state"], folder.path)
    plan: Plan | None = None
    try:
        if executor in (None, "local"):
            executor = LocalExecutor(
                cache,
                keep_going=keep_going,
                progress=progress,
                jobs=cfg.run.jobs or None,
                context=context,
                preload=("pandas",),  # the results tables, imported while the workers run the tasks
            )
            # its workers' fork server imports while this process reads the data, if the plan can be large enough
            executor.start_workers_early(least_tasks(cfg))
        table, dataset_key = import_data(cfg, data, cache)
        free_memory_returned()  # what reading the files left in the allocator's heap
        dataset_key = dataset_key or data_key
        raise_problems(data_problems(cfg, table), f"config {cfg.name!r} does not suit its data")
        data_bytes = int(table.arrow.nbytes)
        check_disk_space(ResourceEstimate(2 * data_bytes, 0, 0), cache)  # room for the data set itself
        attacker_key, attacker_bytes = None, 0
        if cfg.attacker_dataset is not None:
            attacker, attacker_key = prepare_attacker_data(cfg, table, cache)
            attacker_bytes = int(attacker.arrow.nbytes)
        log.info("building the plan (%d samples of %d subjects)", table.num_rows, table.num_subjects)
        plan = build_plan(cfg, cache, table, dataset_key, attacker_key)
        context.fit_uses = dict(Counter(t.affinity for t in plan.tasks if t.affinity))  # a fit used once: not kept
        estimate = estimate_resources(plan, cfg, data_bytes, cache, attacker_bytes, table.num_rows)
        check_disk_space(estimate, cache)
        log.info("plan: %d task(s), %s", len(plan.tasks), estimate)
        devices = _device_record(cfg, plan)
        if devices["methods"]:
            from ..report import device_summary

            log.info("torch-backed methods run on %s", device_summary(devices))
        if executor == "dask":
            client = scheduler if scheduler is not None and not isinstance(scheduler, str) else None
            executor = DaskExecutor(
                cache,
                scheduler=scheduler if client is None else None,
                client=client,
                keep_going=keep_going,
                progress=progress,
                jobs=cfg.run.jobs or None,
                context=context,
            )
        elif isinstance(executor, str):
            raise ConfigError(f"unknown executor {executor!r}; use 'local' or 'dask'")
        exe = executor.run(plan.tasks)
        result = _results(cfg, plan, exe, cache, folder, started, estimate, report)
    except KeyboardInterrupt:
        total = len(plan.tasks) if plan is not None else 0
        saved = sum(cache.has_json(t.key) for t in plan.tasks) if plan is not None else 0
        if folder is not None:
            folder.close("interrupted", tasks_saved=saved, tasks_total=total)
        raise RunInterrupted(saved, total, folder.path if folder is not None else None) from None
    except BaseException as exc:
        if folder is not None:
            try:
                folder.close("failed", error=f"{type(exc).__name__}: {exc}")
            except OSError as status_exc:  # e.g. the disk is still full: report the first error, not this one
                log.warning("could not mark the run folder %s failed: %s", folder.path, status_exc)
        raise
    if folder is not None:
        folder.close(
            "complete" if not result.failures else "complete with failures",
            tasks={"executed": exe.executed, "cached": exe.cached, "failed": len(result.failures)},
        )
    return result


def _results(
    cfg: Any,
    plan: Plan,
    exe: Any,
    cache: Cache,
    folder: RunFolder | None,
    started: float,
    estimate: ResourceEstimate,
    report: bool,
) -> EvaluationResult:
    """Collect the executed plan's tables and, with a run folder, write them and the report there."""
    log.info("collecting the metrics of %d task(s)", len(exe.records))
    metrics = collect_metrics(plan, exe.records)
    utility = collect_utility(plan, exe.records)
    tradeoff, auc = tradeoff_tables(metrics, utility, cfg.deanonymizer is not None)
    protocol_df = collect_protocol(plan, exe.records)
    breakdown = collect_breakdown(plan, exe.records)
    warnings = plan.warnings + learning_warnings(plan, exe.records) + sanity_warnings(metrics)
    labels = {t.key: t.label for t in plan.tasks}
    failures = [{"task": labels.get(k, k), "error": e} for k, e in exe.failed.items()]
    failures += [{"task": labels.get(k, k), "error": e} for k, e in exe.skipped.items()]

    run_dir = None
    report_path = None
    if folder is not None:
        run_dir = folder.path
        log.info("writing the results to %s", run_dir)
        env = _environment(cfg.seed) | {
            "device": _device_record(cfg, plan),
            "jobs": exe.jobs,
            "started": _dt.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
            "finished": _dt.datetime.now().isoformat(timespec="seconds"),
            "duration_s": round(time.time() - started, 3),
            "tasks": {
                "executed": exe.executed,
                "cached": exe.cached,
                "failed": len(exe.failed),
                "by_stage": exe.by_stage,
                "timeline": exe.timeline_since(started),
            },
            "dataset_fingerprint": plan.dataset_key,
            **({"attacker_dataset_fingerprint": plan.attacker_dataset_key} if plan.attacker_dataset_key else {}),
            "estimate": {
                "disk_bytes": estimate.disk_bytes,
                "memory_bytes": estimate.memory_bytes,
                "new_tasks": estimate.new_tasks,
            },
            "cache": str(cache.uri),
            "data": plan.data_info,
        }
        atomic_write_text(run_dir / "config.json", json.dumps(cfg.to_dict(), indent=2, default=str))
        atomic_write_text(run_dir / "environment.json", json.dumps(env, indent=2, default=str))
        atomic_write_text(run_dir / "lineage.json", json.dumps(_lineage(plan, cache), indent=2))
        atomic_write_text(run_dir / "warnings.json", json.dumps(warnings, indent=2))
        atomic_write_text(run_dir / "failures.json", json.dumps(failures, indent=2))
        tables = [("metrics", metrics), ("utility", utility), ("tradeoff", tradeoff), ("auc", auc)]
        if cfg.report.paper_protocol:
            tables.append(("protocol", protocol_df))
        if plan.data_info.get("breakdown"):
            tables.append(("breakdown", breakdown))
        for name, df in tables:
            _write_parquet(df, run_dir / f"{name}.parquet")
        if cfg.report.per_probe_scores:
            _write_scores(plan, exe.records, cache, run_dir)
        if report:
            from ..report import render_report

            log.info("rendering the report")
            report_path = render_report(run_dir)
    return EvaluationResult(
        run_dir,
        metrics,
        utility,
        tradeoff,
        auc,
        warnings,
        failures,
        exe.executed,
        exe.cached,
        report_path,
        exe.by_stage,
        protocol_df,
        breakdown,
        json.loads(json.dumps(cfg.to_dict(), default=str)),  # as config.json holds it
    )


def _device_record(cfg: Any, plan: Plan) -> dict[str, Any]:
    """The run's device as asked for and as resolved (name, memory, versions), and the device each
    torch-backed method of the plan ran on."""
    from ..device import describe_device, resolve_device
    from .tasks import method_dicts

    methods: dict[str, set[str]] = {}
    for task in plan.tasks:
        for m in method_dicts(task.args):
            if "device" in m["params"]:
                methods.setdefault(m["id"], set()).add(str(m["params"]["device"]))
    asked = cfg.run.device or os.environ.get("BIOANON_DEVICE", "") or "auto"
    if not methods:  # nothing ran on torch: do not import it to say so
        return {"requested": asked, "resolved": None, "devices": [], "methods": {}}
    used = sorted({d for ds in methods.values() for d in ds})
    return {
        "requested": asked,
        "resolved": resolve_device(cfg.run.device or ""),
        "devices": [describe_device(d) for d in used],
        "methods": {k: sorted(v) for k, v in sorted(methods.items())},
    }


def _lineage(plan: Plan, cache: Cache) -> list[dict[str, Any]]:
    """The subjects of every split part, so the absence of leakage can be checked on the stored results."""
    out = []
    for st in plan.split_tasks:
        rec = cache.get_json(st["key"])
        if rec is not None:
            out.append({"repeat": st["repeat"], "subjects": rec["subjects"]})
    return out


def _write_scores(plan: Plan, records: Mapping[str, Any], cache: Cache, run_dir: Path) -> None:
    import pyarrow.parquet as pq

    folder = run_dir / "scores"
    folder.mkdir(exist_ok=True)
    for st, rec in scored(plan, records):
        for sel, key in rec.get("scores", {}).items():
            t = cache.get_table(key)
            if t is None:
                continue
            name = (
                "_".join(
                    [
                        st["anonymizer"],
                        str(st["setting_index"]),
                        str(st["repeat"]),
                        st["recognizer"],
                        st["scenario"],
                        sel,
                    ]
                )
                .replace("|", "-")
                .replace("/", "-")
                .replace(":", "-")
            )
            atomic_write(folder / f"{name}.parquet", lambda f, t=t: pq.write_table(t.arrow, f))

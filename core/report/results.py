"""Loading a run's results for the report: the results files (``metrics.parquet`` and the optional others),
checked against their columns, with absolute paths scrubbed from what the report shows.

:func:`_load` reads a run directory, :func:`_from_frames` takes the tables in memory (notebooks); both return a
:class:`_Results` that the tables (:mod:`bioanon.report.tables`), figures (:mod:`bioanon.report.figures`) and
page (:mod:`bioanon.report.page`) read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BioanonError
from ..evaluation.scenarios import display_name, display_names, headline_metric

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class ReportError(BioanonError, ValueError):
    """A results file is malformed (unreadable, or a required column is missing); the message names the file."""


class ResultsNotFoundError(BioanonError, FileNotFoundError):
    """The run directory or its ``metrics.parquet`` does not exist; the message names the path."""


# ------------------------------------------------------------------------------------------------------ constants

METRICS_COLUMNS = (
    "anonymizer", "setting", "setting_index", "repeat", "selector", "n_subjects", "draw", "recognizer", "scenario",
    "metric", "value", "ci_low", "ci_high", "chance", "n_probes",
)  # fmt: skip
UTILITY_COLUMNS = (
    "anonymizer", "setting", "setting_index", "repeat", "measure", "value", "ci_low", "ci_high", "clear_value",
    "floor", "normalized",
)  # fmt: skip
TRADEOFF_COLUMNS = (
    "anonymizer", "setting", "setting_index", "selector", "n_subjects", "measure", "deanon", "accuracy",
    "worst_recognizer", "worst_scenario", "clear_accuracy", "chance", "privacy", "utility",
)  # fmt: skip
AUC_COLUMNS = ("anonymizer", "selector", "n_subjects", "measure", "deanon", "auc", "counted")
PROTOCOL_COLUMNS = ("anonymizer", "setting", "setting_index", "repeat", "metric", "value")
BREAKDOWN_COLUMNS = (
    "anonymizer", "setting", "setting_index", "repeat", "selector", "n_subjects", "draw", "recognizer", "scenario",
    "by", "group", "metric", "value", "chance", "n_probes",
)  # fmt: skip

_SETTING = ["anonymizer", "setting_index", "setting"]  # one anonymizer setting (setting is the label of the index)


# ------------------------------------------------------------------------------------------------------ loading


@dataclass
class _Results:
    run_dir: Path
    config: dict[str, Any]
    environment: dict[str, Any]
    metrics: pd.DataFrame
    utility: pd.DataFrame
    tradeoff: pd.DataFrame
    auc: pd.DataFrame
    warnings: list[str]
    failures: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)  # problems with the inputs, shown in the report
    protocol: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PROTOCOL_COLUMNS)))
    anonymizers: list[str] = field(default_factory=list)  # display order
    selectors: list[str] = field(default_factory=list)  # display order; the first is the headline selector
    recognizers: list[str] = field(default_factory=list)
    label: str = "subject"  # the evaluation's label: "subject" (identity) or an attribute name
    breakdown: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(BREAKDOWN_COLUMNS)))
    scenario_names: dict[str, Any] = field(default_factory=dict)  # scenario id → display name (VoicePrivacy data)

    def scenario(self, s: Any) -> str:
        """A scenario's display name: ``"ignorant (naive)"`` for VoicePrivacy data, else the id itself."""
        return display_name(s, self.scenario_names)

    @property
    def first_selector(self) -> str | None:
        return self.selectors[0] if self.selectors else None

    @property
    def attribute(self) -> bool:
        return self.label != "subject"

    @property
    def headline_metric(self) -> str:
        """top-1 for identity; balanced accuracy (uniform chance) for an attribute label."""
        return headline_metric(self.label)


def _read_json(path: Path, default: Any, notes: list[str]) -> Any:
    if not path.exists():
        notes.append(f"{path.name} not found")
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: cannot read {path.name}: {exc}") from exc


def _read_parquet(path: Path, columns: Sequence[str], *, required: bool) -> pd.DataFrame:
    import pandas as pd

    if not path.exists():
        if required:
            raise ResultsNotFoundError(
                f"{path}: {path.name} not found in the run directory; the evaluation did not finish writing its "
                f"results (re-run `bioanon evaluate`)"
            )
        return pd.DataFrame(columns=list(columns))
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a malformed file
        raise ReportError(f"{path}: cannot read {path.name}: {type(exc).__name__}: {exc}") from exc
    return _frame(df, columns, required=required, where=f"{path}: {path.name}")


def _frame(df: pd.DataFrame | None, columns: Sequence[str], *, required: bool, where: str) -> pd.DataFrame:
    """A results table checked for its columns (``where`` names it in the error) with normalized dtypes."""
    import pandas as pd

    if df is None or (len(df) == 0 and not required):
        return pd.DataFrame(columns=list(columns))
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ReportError(f"{where} lacks the column(s) {', '.join(missing)}")
    df = df.reset_index(drop=True)
    for c in ("setting",):
        if c in df.columns:
            df[c] = df[c].fillna("").astype(str)
    if "deanon" in df.columns:
        df["deanon"] = df["deanon"].astype(bool)
    if "counted" in df.columns:
        df["counted"] = df["counted"].astype(bool)
    return df


def _unique(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    seen: set[Any] = set()
    for v in values:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def _config_names(entries: Any, keys: Sequence[str]) -> list[str]:
    """Names from config list entries (strings or dicts with one of ``keys``)."""
    out: list[str] = []
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, str):
            out.append(e)
        elif isinstance(e, dict):
            out.extend(str(e[k]) for k in keys if k in e and e[k] is not None)
    return out


def _order(present: Iterable[Any], preferred: Sequence[str]) -> list[Any]:
    """The present values, those named in ``preferred`` first in that order, then the rest in order of appearance."""
    present = _unique(present)
    head = [p for p in _unique(preferred) if p in present]
    return head + [p for p in present if p not in head]


def _load(run_dir: str | os.PathLike[str]) -> _Results:
    run = Path(run_dir)
    if not run.is_dir():
        raise ResultsNotFoundError(f"{run}: run directory not found")
    notes: list[str] = []
    metrics = _read_parquet(run / "metrics.parquet", METRICS_COLUMNS, required=True)
    config = _read_json(run / "config.json", {}, notes)
    environment = _read_json(run / "environment.json", {}, notes)
    warns = _read_json(run / "warnings.json", [], [])
    fails = _read_json(run / "failures.json", [], [])
    res = _Results(
        run_dir=run,
        config=config,
        environment=environment,
        metrics=metrics,
        utility=_read_parquet(run / "utility.parquet", UTILITY_COLUMNS, required=False),
        tradeoff=_read_parquet(run / "tradeoff.parquet", TRADEOFF_COLUMNS, required=False),
        auc=_read_parquet(run / "auc.parquet", AUC_COLUMNS, required=False),
        protocol=_read_parquet(run / "protocol.parquet", PROTOCOL_COLUMNS, required=False),
        breakdown=_read_parquet(run / "breakdown.parquet", BREAKDOWN_COLUMNS, required=False),
        warnings=warns,
        failures=fails,
        notes=notes,
    )
    return _prepare(res)


def _from_frames(tables: Mapping[str, Any]) -> _Results:
    """A :class:`_Results` from tables in memory: ``metrics`` (required), ``utility``, ``tradeoff``, ``auc``,
    ``protocol`` (DataFrames with the columns of the files of the same name), ``config``, ``environment``
    (dicts), ``warnings``, ``failures`` (lists) and ``name`` (shown instead of a run folder's name)."""
    unknown = set(tables) - {"metrics", "utility", "tradeoff", "auc", "protocol", "breakdown", "config",
                             "environment", "warnings", "failures", "name"}  # fmt: skip
    if unknown:
        raise ReportError(f"report tables: unknown table(s) {', '.join(sorted(unknown))}")
    if tables.get("metrics") is None:
        raise ReportError("report tables: 'metrics' is required")

    def frame(key: str, cols: Sequence[str], req: bool = False) -> pd.DataFrame:
        return _frame(tables.get(key), cols, required=req, where=f"table {key!r}")

    res = _Results(
        run_dir=Path(str(tables.get("name") or "results")),
        config=dict(tables.get("config") or {}),
        environment=dict(tables.get("environment") or {}),
        metrics=frame("metrics", METRICS_COLUMNS, True).copy(),
        utility=frame("utility", UTILITY_COLUMNS),
        tradeoff=frame("tradeoff", TRADEOFF_COLUMNS),
        auc=frame("auc", AUC_COLUMNS),
        protocol=frame("protocol", PROTOCOL_COLUMNS),
        breakdown=frame("breakdown", BREAKDOWN_COLUMNS),
        warnings=list(tables.get("warnings") or []),
        failures=list(tables.get("failures") or []),
    )
    return _prepare(res)


# an absolute path (POSIX with at least two parts, Windows drive or UNC, file:// URL) not inside a word or URL
_ABS_PATH = re.compile(
    r"""(?<![\w.:/\\~-])(?:file://)?(?:/|[A-Za-z]:[\\/]|\\\\)"""
    r"""(?:[^\s/\\'"<>|,;()\[\]]+[/\\])+[^\s/\\'"<>|,;()\[\]]*"""
)


def _scrub(s: Any) -> str:
    """``s`` as text with every absolute path shortened to ``…/name`` (its last part): a shared report must not
    reveal where the data and results lie on the machine that ran the evaluation."""

    def short(m: re.Match[str]) -> str:
        name = [p for p in re.split(r"[/\\]", m.group(0)) if p]
        return "…/" + (name[-1] if name else "")

    text = str(s)
    if re.fullmatch(r"/[^\s/]+/?", text):  # a whole value that is a one-part absolute path, e.g. "/data"
        return "…/" + text.strip("/")
    return _ABS_PATH.sub(short, text)


def _shareable(obj: Any) -> Any:
    """A copy of a JSON-like object with :func:`_scrub` applied to every string."""
    if isinstance(obj, dict):
        return {_scrub(k): _shareable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_shareable(v) for v in obj]
    return _scrub(obj) if isinstance(obj, str) else obj


def _prepare(res: _Results) -> _Results:
    """Normalize what was read (types, notes column) and fix the display orders from the config."""
    config = res.config if isinstance(res.config, dict) else {}
    res.config = config
    res.environment = res.environment if isinstance(res.environment, dict) else {}
    warns = res.warnings
    res.warnings = [_scrub(w) for w in warns] if isinstance(warns, list) else [_scrub(warns)]
    res.failures = [{k: _scrub(v) for k, v in f.items()} if isinstance(f, dict) else {"task": "", "error": _scrub(f)}
                    for f in (res.failures or [])]  # fmt: skip
    res.notes = [_scrub(n) for n in res.notes]
    metrics = res.metrics
    selection = config.get("selection")
    sel = selection if isinstance(selection, dict) else {}
    if "note" not in metrics.columns:  # results written before undefined metrics carried an explanation
        metrics["note"] = ""
    metrics["note"] = metrics["note"].fillna("").astype(str)
    label = config.get("label")
    if not isinstance(label, str) and "label" in metrics.columns and len(metrics):
        label = str(metrics["label"].iloc[0])
    res.label = label if isinstance(label, str) and label else "subject"
    res.selectors = _order(metrics["selector"], _config_names(sel.get("selectors"), ("name", "id")))
    res.anonymizers = _order(metrics["anonymizer"], _config_names(config.get("anonymizers"), ("name",)))
    res.recognizers = _order(metrics["recognizer"], _config_names(config.get("recognizers"), ("id", "name")))
    res.scenario_names = display_names(_data_info(res).get("protocol"))
    if "note" in res.breakdown.columns:
        res.breakdown["note"] = res.breakdown["note"].fillna("").astype(str)
    return res


def _data_info(res: _Results) -> dict[str, Any]:
    """environment.json's ``data`` block (protocol, enrolment split, breakdown columns); {} when absent."""
    info = res.environment.get("data")
    return info if isinstance(info, dict) else {}

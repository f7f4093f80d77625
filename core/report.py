"""The evaluation report: headline table, plots and a self-contained ``report.html`` from a results directory.

``render_report(RUN_DIR)`` reads what the evaluation pipeline wrote (DESIGN.md §7) and writes ``RUN_DIR/report.html``
— one self-contained file to share: plots inline as SVG, no other file and no absolute path referenced, laid out for
desktops and phones — and the same plots as ``RUN_DIR/plots/*.png`` for slides; :func:`plots` returns the figures
(matplotlib, each with a caption saying how to read it) without writing anything, and :func:`headline` the
headline privacy figure per anonymizer setting. Nothing is recomputed from scores: the tables and plots only
aggregate the stored metrics (means over repeats and draws, the maximum over recognizers × scenarios) and draw the
privacy–utility envelope with :func:`bioanon.metrics.tradeoff_envelope`.

Input files (``metrics.parquet`` is required, everything else is optional)::

    config.json        resolved config          environment.json   versions, seed, times
    metrics.parquet    tidy metric rows         utility.parquet    utility measures per setting × repeat
    tradeoff.parquet   privacy–utility points   auc.parquet        AUC per curve, ``counted`` marks the lower one
    warnings.json      sanity-guard messages    failures.json      [{"task", "error"}] of failed tasks
    breakdown.parquet  EER and min Cllr per group of ``[report] breakdown`` (e.g. per sex and per subset)

``environment.json``'s ``data`` block (:func:`bioanon.evaluation.run.data_description`) says how evaluation
subjects were split into enrolment and test (by the data's ``role`` column or a random share) and the data's
protocol: with ``protocol = "voiceprivacy"`` the attacker scenarios are shown with the VoicePrivacy Challenge's
names (:data:`VOICEPRIVACY_SCENARIOS`; the stored results keep bioanon's ids).

Definitions used throughout (METRICS.md, "Privacy–utility trade-off"; scenarios, their display order and names,
the worst case and the headline metric come from :mod:`bioanon.evaluation.scenarios`):

* the *worst case* of a setting is the highest top-1 accuracy over recognizers × attacker scenarios (every scenario
  except ``clear``, de-anonymization included), where each recognizer × scenario accuracy is first averaged over
  repeats and random-selection draws;
* the *clear level* is the highest top-1 accuracy over recognizers on clear data for the same selection;
* the headline uses the first selector (config order) at its largest subject count.

matplotlib and pandas are imported lazily inside the functions, so ``import bioanon.report`` stays light. Figures
are drawn on the Agg canvas directly (no pyplot, no global backend switch), so rendering is safe in notebooks and
worker threads.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import metrics as _metrics
from .errors import BioanonError
from .evaluation.scenarios import CLEAR, DEANON, NAIVE
from .evaluation.scenarios import VOICEPRIVACY_SCENARIOS  # noqa: F401 -- re-exported
from .evaluation.scenarios import attack_rows, display_key, display_name, display_names, display_order
from .evaluation.scenarios import headline_metric, worst_case
from .fileio import atomic_write, atomic_write_text

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["Plot", "ReportError", "ResultsNotFoundError", "headline", "plots", "render_report"]


class ReportError(BioanonError, ValueError):
    """A results file is malformed (unreadable, or a required column is missing); the message names the file."""


class ResultsNotFoundError(BioanonError, FileNotFoundError):
    """The run directory or its ``metrics.parquet`` does not exist; the message names the path."""


# ------------------------------------------------------------------------------------------------------ constants

DPI = 150
MAX_PANELS = 3  # settings shown per anonymizer in the subject-count and scenario plots (first, middle, last)
MAX_TRADEOFF_FIGURES = 36
MAX_REVERSIBILITY_FIGURES = 6
REVERSIBILITY_THRESHOLDS = (0.1, 0.5)
PLOT_KINDS = ("tradeoff", "subjects", "scenarios", "reversibility")
PLOT_PREFIXES = tuple(f"{k}_" for k in PLOT_KINDS)  # of the PNG files under plots/
SUMMARY_METRICS = ("top1", "eer", "min_cllr", "linkability")

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

METRIC_LABELS = {
    "top1": "top-1",
    "top5": "top-5",
    "cna1": "chance-norm. top-1",
    "balanced_accuracy": "balanced acc.",
    "per_subject_accuracy": "per-subject acc.",
    "eer": "EER",
    "min_cllr": "min Cllr",
    "linkability": "D↔sys",
}


# ------------------------------------------------------------------------------------------------------ loading


@dataclass
class _Results:
    run_dir: Path
    config: dict
    environment: dict
    metrics: pd.DataFrame
    utility: pd.DataFrame
    tradeoff: pd.DataFrame
    auc: pd.DataFrame
    warnings: list[str]
    failures: list[dict]
    notes: list[str] = field(default_factory=list)  # problems with the inputs, shown in the report
    protocol: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PROTOCOL_COLUMNS)))
    anonymizers: list[str] = field(default_factory=list)  # display order
    selectors: list[str] = field(default_factory=list)  # display order; the first is the headline selector
    recognizers: list[str] = field(default_factory=list)
    label: str = "subject"  # the evaluation's label: "subject" (identity) or an attribute name
    breakdown: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(BREAKDOWN_COLUMNS)))
    scenario_names: dict = field(default_factory=dict)  # scenario id → display name (VoicePrivacy data)

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


def _load(run_dir: str | os.PathLike) -> _Results:
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
    frame = lambda key, cols, req=False: _frame(tables.get(key), cols, required=req, where=f"table {key!r}")  # noqa: E731
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
_ABS_PATH = re.compile(r"""(?<![\w.:/\\~-])(?:file://)?(?:/|[A-Za-z]:[\\/]|\\\\)"""
                       r"""(?:[^\s/\\'"<>|,;()\[\]]+[/\\])+[^\s/\\'"<>|,;()\[\]]*""")


def _scrub(s: Any) -> str:
    """``s`` as text with every absolute path shortened to ``…/name`` (its last part): a shared report must not
    reveal where the data and results lie on the machine that ran the evaluation."""
    def short(m: re.Match) -> str:
        name = [p for p in re.split(r"[/\\]", m.group(0)) if p]
        return "…/" + (name[-1] if name else "")

    s = str(s)
    if re.fullmatch(r"/[^\s/]+/?", s):  # a whole value that is a one-part absolute path, e.g. "/data"
        return "…/" + s.strip("/")
    return _ABS_PATH.sub(short, s)


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
    sel = config.get("selection") if isinstance(config.get("selection"), dict) else {}
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


def _data_info(res: _Results) -> dict:
    """environment.json's ``data`` block (protocol, enrolment split, breakdown columns); {} when absent."""
    info = res.environment.get("data")
    return info if isinstance(info, dict) else {}


# ------------------------------------------------------------------------------------------------------ aggregation


def _setting_order(res: _Results, df: pd.DataFrame) -> pd.DataFrame:
    """Sort rows by anonymizer (display order) and setting index."""
    rank = {a: i for i, a in enumerate(res.anonymizers)}
    key = df["anonymizer"].map(lambda a: rank.get(a, len(rank)))
    return df.assign(_a=key).sort_values(["_a", "setting_index"], kind="stable").drop(columns="_a")


def _mean_runs(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean of value / CI bounds / chance over repeats and draws, one row per ``keys``; ``n_runs`` counts rows."""
    cols = [c for c in ("value", "ci_low", "ci_high", "chance") if c in df.columns]
    g = df.groupby(keys, dropna=False, sort=False)
    out = g[cols].mean()
    out["n_runs"] = g.size()
    if "repeat" in df.columns:
        out["n_repeats"] = g["repeat"].nunique()
    return out.reset_index()


def _largest_n(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Rows at the largest subject count within each ``keys`` group."""
    if df.empty:
        return df
    nmax = df.groupby(keys, dropna=False, sort=False)["n_subjects"].transform("max")
    return df[df["n_subjects"] == nmax]


def _first_selector_top(res: _Results, metric: str = "top1") -> pd.DataFrame:
    """Rows of ``metric`` for the first selector at each setting's largest subject count."""
    m = res.metrics
    df = m[(m["metric"] == metric) & (m["selector"] == res.first_selector)]
    return _largest_n(df, _SETTING)


def _cells(res: _Results, agg: pd.DataFrame) -> Iterator[tuple[Any, ...]]:
    """The rows of ``agg`` per table cell in display order: ``(anonymizer, setting_index, setting, n_subjects,
    recognizer, scenario, rows)``, settings in sweep order, recognizers as configured, scenarios in their order."""
    rrank = {r: i for i, r in enumerate(res.recognizers)}
    for (anon, idx, setting, n), g in _setting_order(res, agg).groupby(_SETTING + ["n_subjects"], dropna=False,
                                                                      sort=False):  # fmt: skip
        pairs = sorted(_unique(zip(g["recognizer"], g["scenario"])),
                       key=lambda p: (rrank.get(p[0], len(rrank)), display_key(p[1])))  # fmt: skip
        for rec, scen in pairs:
            yield anon, idx, setting, n, rec, scen, g[(g["recognizer"] == rec) & (g["scenario"] == scen)]


def _worst_case(agg: pd.DataFrame, keys: list[str], res: _Results) -> pd.DataFrame:
    """Per ``keys`` group the attack row (scenario ≠ clear) with the highest mean value; ties → first recognizer in
    display order, then first scenario in display order (:func:`bioanon.evaluation.scenarios.worst_case`)."""
    return worst_case(agg, keys, recognizers=res.recognizers)


def _headline(res: _Results) -> pd.DataFrame:
    import pandas as pd

    cols = [
        "anonymizer", "setting", "setting_index", "selector", "n_subjects", "metric", "value", "ci_low", "ci_high",
        "recognizer", "scenario", "clear", "chance", "privacy", "n_repeats", "top1", "majority",
    ]  # fmt: skip
    hm = res.headline_metric
    top = _first_selector_top(res, hm)
    if top.empty:
        return pd.DataFrame(columns=cols)
    keys = _SETTING + ["selector", "n_subjects"]
    agg = _mean_runs(top, keys + ["recognizer", "scenario"])
    worst = _worst_case(agg, keys, res)
    clear = (
        agg[agg["scenario"] == CLEAR].groupby(keys, dropna=False, sort=False)["value"].max().rename("clear")
    )
    chance = top.groupby(keys, dropna=False, sort=False)["chance"].mean().rename("chance_mean")
    out = worst.drop(columns=["chance"]).merge(clear.reset_index(), on=keys, how="left")
    out = out.merge(chance.reset_index(), on=keys, how="left").rename(columns={"chance_mean": "chance"})
    fallback = 1.0 / out["n_subjects"].astype(float)
    out["chance"] = out["chance"].where(out["chance"].notna(), fallback)
    out["privacy"] = np.atleast_1d(_metrics.privacy_level(out["value"], out["clear"], out["chance"])) if len(out) else []
    out["metric"] = hm
    # plain top-1 accuracy of the same attack and its chance (the majority-class rate for an attribute)
    plain = _mean_runs(_first_selector_top(res, "top1"), keys + ["recognizer", "scenario"])
    plain = plain[keys + ["recognizer", "scenario", "value", "chance"]].rename(
        columns={"value": "top1", "chance": "majority"})
    out = out.merge(plain, on=keys + ["recognizer", "scenario"], how="left") if len(plain) else out.assign(
        top1=np.nan, majority=np.nan)
    out = _setting_order(res, out)
    return out[cols].reset_index(drop=True)


def headline(run_dir: str | os.PathLike) -> pd.DataFrame:
    """The headline privacy figure per anonymizer setting.

    For the first selector (config order) at its largest subject count: each recognizer × attacker-scenario value
    of the headline metric is averaged over repeats and draws, and the worst case is the maximum over them
    (``clear`` excluded, de-anonymization included). The headline metric (column ``metric``) is top-1 accuracy for
    identity and balanced accuracy for an attribute label (its chance is uniform, 1/|classes|; plain accuracy's
    floor, the majority-class rate, would flatter an attacker that only guesses the majority class).

    Columns: ``anonymizer, setting, setting_index, selector, n_subjects, metric, value`` (the worst case),
    ``ci_low, ci_high`` (its CI, bounds averaged over repeats), ``recognizer, scenario`` (who achieved it; ties go
    to the first in config order), ``clear`` (worst-case clear level on the same selection), ``chance`` (of the
    headline metric), ``privacy`` (x = 1 − clip((A − c)/(A_clear − c), 0, 1), :func:`bioanon.metrics.privacy_level`),
    ``n_repeats``, ``top1`` (plain top-1 accuracy of the same attack; equals ``value`` for identity) and
    ``majority`` (top-1's chance: the majority-class rate for an attribute, 1/|G| for identity).
    """
    return _headline(_load(run_dir))


def _subject_curves(res: _Results, t1: pd.DataFrame) -> pd.DataFrame:
    """Worst-case top-1 against subject count for one setting's top-1 rows, one row per selector × n_subjects.

    Columns: ``worst`` (max over attacks of the mean over repeats and draws — the headline quantity) with its
    ``recognizer`` and ``scenario``; ``lo``/``hi`` (min/max over draws of that attack's accuracy, each draw averaged
    over repeats, so ``lo ≤ worst ≤ hi``); ``best`` (the best draw: max over draws and attacks, ≥ ``hi``);
    ``n_draws``, ``clear``, ``chance``.
    """
    import pandas as pd

    keys = ["selector", "n_subjects"]
    attack = keys + ["recognizer", "scenario"]
    agg = _mean_runs(t1, attack)
    worst = _worst_case(agg, keys, res).set_index(keys)[["value", "recognizer", "scenario"]]
    worst = worst.rename(columns={"value": "worst"})
    att = attack_rows(t1)
    per_draw = att.groupby(attack + ["draw"], dropna=False)["value"].mean().reset_index()
    of_worst = per_draw.merge(worst.reset_index()[attack], on=attack, how="inner")
    spread = of_worst.groupby(keys, dropna=False)["value"].agg(["min", "max", "count"])
    spread.columns = ["lo", "hi", "n_draws"]
    best = per_draw.groupby(keys, dropna=False)["value"].max().rename("best")
    clear = agg[agg["scenario"] == CLEAR].groupby(keys, dropna=False)["value"].max().rename("clear")
    chance = t1.groupby(keys, dropna=False)["chance"].mean()
    out = pd.concat([worst, spread, best, clear, chance], axis=1).reset_index()
    out["chance"] = out["chance"].where(out["chance"].notna(), 1.0 / out["n_subjects"].astype(float))
    return out.sort_values(keys).reset_index(drop=True)


def _tradeoff_series(tr: pd.DataFrame, auc: pd.DataFrame, anonymizers: Sequence[str]) -> list[dict]:
    """The curves of one privacy–utility figure (one measure × selector × n_subjects).

    Per anonymizer and de-anonymization variant: the points, their labels, the staircase envelope
    (:func:`bioanon.metrics.tradeoff_envelope`), the stored AUC and whether the variant is the counted one
    (``auc.parquet``'s ``counted``; without an AUC row, the variant with the lower :func:`~bioanon.metrics.tradeoff_auc`).
    Points with undefined privacy or utility (NaN) are dropped and counted in ``dropped``.
    """
    out = []
    for anon in _order(tr["anonymizer"], anonymizers):
        part = tr[tr["anonymizer"] == anon].sort_values("setting_index", kind="stable")
        series = []
        for deanon in sorted(_unique(part["deanon"])):
            p = part[part["deanon"] == deanon]
            ok = p["privacy"].notna() & p["utility"].notna()
            q = p[ok]
            a = auc[(auc["anonymizer"] == anon) & (auc["deanon"] == deanon)] if len(auc) else auc
            s = {
                "anonymizer": anon,
                "deanon": bool(deanon),
                "x": np.clip(q["privacy"].to_numpy(float), 0.0, 1.0),  # as the AUC clips them
                "y": np.clip(q["utility"].to_numpy(float), 0.0, 1.0),
                "labels": [str(v) for v in q["setting"]],
                "dropped": int((~ok).sum()),
                "auc": float(a["auc"].iloc[0]) if len(a) else math.nan,
                "auc_stored": bool(len(a)),
                "counted": bool(a["counted"].iloc[0]) if len(a) else None,
            }
            if len(q):
                s["px"], s["py"] = _metrics.tradeoff_envelope(s["x"], s["y"])
            else:
                s["px"], s["py"] = np.array([]), np.array([])
            series.append(s)
        if not series:
            continue
        if all(s["counted"] is None for s in series):  # no AUC rows: the lower area counts
            for s in series:
                if len(s["x"]):
                    s["auc"] = _metrics.tradeoff_auc(s["x"], s["y"])
            lowest = min(series, key=lambda s: (math.inf if math.isnan(s["auc"]) else s["auc"]))
            for s in series:
                s["counted"] = s is lowest
        elif not any(s["counted"] for s in series):  # AUC rows without a counted flag set: the lower stored one
            lowest = min(series, key=lambda s: (math.inf if math.isnan(s["auc"]) else s["auc"]))
            lowest["counted"] = True
        for s in series:
            s["counted"] = bool(s["counted"])
        out.extend(series)
    return out


def _reversibility(res: _Results, thresholds: tuple[float, float]) -> pd.DataFrame:
    """R per setting (first selector, largest n), from the per-recognizer mean top-1 of deanon, naive and clear."""
    import pandas as pd

    cols = ["anonymizer", "setting", "setting_index", "n_subjects", "R", "category", "n_recognizers"]
    top = _first_selector_top(res, res.headline_metric)
    if top.empty or DEANON not in set(top["scenario"]):
        return pd.DataFrame(columns=cols)
    agg = _mean_runs(top, _SETTING + ["n_subjects", "recognizer", "scenario"])
    rows = []
    for (anon, idx, setting, n), g in agg.groupby(_SETTING + ["n_subjects"], dropna=False, sort=False):
        w = g.pivot_table(index="recognizer", columns="scenario", values="value", aggfunc="mean")
        if not {DEANON, NAIVE, CLEAR} <= set(w.columns):
            continue
        w = w[[DEANON, NAIVE, CLEAR]].dropna()
        if w.empty:
            continue
        r, cat = _metrics.reversibility(w[DEANON], w[NAIVE], w[CLEAR], thresholds)
        rows.append((anon, setting, idx, n, r, cat, len(w)))
    return _setting_order(res, pd.DataFrame(rows, columns=cols)).reset_index(drop=True)


def _reversibility_thresholds(res: _Results) -> tuple[float, float]:
    rep = res.config.get("report") if isinstance(res.config.get("report"), dict) else {}
    t = rep.get("reversibility_thresholds")
    try:
        if t is not None and len(t) == 2:
            return float(t[0]), float(t[1])
    except (TypeError, ValueError):
        pass
    return REVERSIBILITY_THRESHOLDS


def _pick(items: Sequence[Any]) -> list[Any]:
    """All items if at most MAX_PANELS, else the first, middle and last."""
    items = list(items)
    if len(items) <= MAX_PANELS:
        return items
    return [items[0], items[(len(items) - 1) // 2], items[-1]]


# ------------------------------------------------------------------------------------------------------ plotting


def _mpl(s: Any) -> str:
    """A string made safe for matplotlib text: no mathtext from '$', no legend-hiding leading '_'."""
    s = str(s).replace("$", r"\$")
    return " " + s if s.startswith("_") else s


def _wrap(s: str, width: int = 70) -> str:
    return "\n".join(textwrap.wrap(s, width)) or s


def _fit(s: str, width_in: float, fontsize: float) -> str:
    """``s`` wrapped to lines that fit ``width_in`` inches at ``fontsize`` points, so that a title is never clipped
    at the figure's edges (DejaVu Sans averages ~0.55 em per character; 0.62 leaves room for wide ones)."""
    return _wrap(s, max(int(width_in * 72 / (fontsize * 0.62)), 16))


def _slug(*parts: Any) -> str:
    s = "_".join(str(p) for p in parts)
    s = re.sub(r"[^A-Za-z0-9.=-]+", "-", s).strip("-.").lower()
    return s[:60] or "x"


_RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "figure.titlesize": 12,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "savefig.dpi": DPI,
    "svg.fonttype": "path",  # glyphs as paths: the plot looks the same without the fonts on the reader's machine
    "svg.hashsalt": "bioanon-report",  # stable ids: the same results render to the same file
}


def _readable(path: Path) -> None:
    """rw-r--r--: the atomic writer's temp files are created owner-only, a report is meant to be shared."""
    try:
        os.chmod(path, 0o644)
    except OSError:  # pragma: no cover - e.g. filesystems without permissions
        pass


@dataclass
class Plot:
    """One figure of the report: ``kind`` (``tradeoff``, ``subjects``, ``scenarios`` or ``reversibility``), a
    file-name ``slug``, the matplotlib ``figure`` (on the Agg canvas; no pyplot) and its ``caption`` — what the
    figure shows and how to read it."""

    kind: str
    slug: str
    figure: Figure
    caption: str

    def _repr_png_(self) -> bytes:  # notebooks show the figure itself
        import io

        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


def _new_figure(w: float, h: float) -> Figure:
    """A constrained-layout figure on its own Agg canvas (no pyplot, no global backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colors(n: int, cmap: str = "tab10") -> list:
    import matplotlib

    cm = matplotlib.colormaps[cmap]
    return [cm(i % cm.N) for i in range(max(n, 1))]


def _series(ax: Any, x: Any, y: Any, *, single: str, **kw: Any) -> Any:
    """Draw ``y`` against ``x`` as a line, or — when only one point is finite — as that point alone with the
    marker ``single`` (a one-point line draws nothing, yet its legend entry would show a line). Returns the artist
    for the legend, or None when nothing was drawn."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return None
    if ok.sum() == 1:
        kw = {k: v for k, v in kw.items() if k not in ("linestyle", "linewidth", "marker")}
        kw.setdefault("markersize", 8)
        (h,) = ax.plot(x[ok], y[ok], linestyle="none", marker=single, **kw)
        return h
    (h,) = ax.plot(x, y, **kw)
    return h


def _ref_lines_x(ax) -> None:
    for x, label, ha, dx in ((0.0, "clear level", "left", 0.012), (1.0, "chance", "right", -0.012)):
        ax.axvline(x, color="0.35", linestyle=":", linewidth=1.2, zorder=1)
        ax.text(x + dx, 1.085, label, ha=ha, va="center", fontsize=8, color="0.3")


# label offsets (points) and alignments per anonymizer, so that labels of neighbouring curves do not coincide
_LABEL_OFFSETS = (((5, 5), "left", "bottom"), ((5, -6), "left", "top"), ((-5, 5), "right", "bottom"),
                  ((-5, -6), "right", "top"))  # fmt: skip


def _figure_legend(fig: Any, handles: Sequence[Any], labels: Sequence[str], max_cols: int) -> None:
    """A legend below the axes whose columns fit the figure's width (a row wider than the figure is clipped at
    both edges when saved): an entry is about its label's length in characters at ~0.075 in each, plus the key."""
    if not handles:
        return
    width = fig.get_figwidth()
    entry = max((0.075 * len(t) + 0.55 for t in labels), default=1.0)
    ncol = max(1, min(max_cols, len(labels), int(width // entry)))
    fig.legend(list(handles), list(labels), loc="outside lower center", ncol=ncol, frameon=False)


def _point_labels(xs: Sequence[float], ys: Sequence[float], labels: Sequence[str],
                  close: tuple[float, float] | None = None) -> tuple[list[str], list[str]]:
    """The labels to write beside a plot's points (axes from 0 to 1), and a key for the caption.

    When two labelled points lie within ``close`` (x, y) of each other their labels would overlap, so every
    point gets a number instead and the key lists ``number = setting``; otherwise the labels stay. By default
    points closer in x than the longest label is wide (8 pt text on a ~6 in wide axes) count as close."""
    if close is None:
        longest = max((len(str(t)) for t in labels), default=0)
        close = (max(0.12, 0.014 * longest + 0.02), 0.06)
    pts = [(float(x), float(y)) for x, y, t in zip(xs, ys, labels) if t]
    crowded = any(abs(a[0] - b[0]) < close[0] and abs(a[1] - b[1]) < close[1]
                  for i, a in enumerate(pts) for b in pts[i + 1:])
    if not crowded:
        return list(labels), []
    numbered, key, k = [], [], 0
    at: dict[tuple[float, float], int] = {}  # coinciding points share one label "1, 2"
    for x, y, t in zip(xs, ys, labels):
        if not t:
            numbered.append("")
            continue
        k += 1
        key.append(f"{k} = {t}")
        spot = (round(float(x), 2), round(float(y), 2))
        if spot in at:
            numbered[at[spot]] += f", {k}"
            numbered.append("")
        else:
            at[spot] = len(numbered)
            numbered.append(str(k))
    return numbered, key


def _plot_tradeoff(res: _Results) -> tuple[list[Plot], list[str]]:
    """One figure per (measure, selector, n_subjects). Returns the plots and notes."""
    tr = res.tradeoff
    if tr.empty or "utility" not in tr or tr["utility"].isna().all():  # no utility measure: nothing to trade off
        return [], []
    measures = _unique(tr["measure"])
    selectors = _order(tr["selector"], res.selectors)
    groups = []
    for measure in measures:
        for sel in selectors:
            ns = sorted(_unique(tr.loc[(tr["measure"] == measure) & (tr["selector"] == sel), "n_subjects"]),
                        reverse=True)  # fmt: skip
            groups.extend((measure, sel, n) for n in ns)
    notes = []
    if len(groups) > MAX_TRADEOFF_FIGURES:
        notes.append(f"{len(groups)} privacy–utility curves; the first {MAX_TRADEOFF_FIGURES} are plotted "
                     f"(per measure and selector, largest subject counts first); all AUCs are in the table.")  # fmt: skip
        groups = groups[:MAX_TRADEOFF_FIGURES]
    color = dict(zip(res.anonymizers, _colors(len(res.anonymizers))))
    figs = []
    for measure, sel, n in groups:
        part = tr[(tr["measure"] == measure) & (tr["selector"] == sel) & (tr["n_subjects"] == n)]
        a = res.auc
        if len(a):
            a = a[(a["measure"] == measure) & (a["selector"] == sel) & (a["n_subjects"] == n)]
        series = _tradeoff_series(part, a, res.anonymizers)
        fig = _new_figure(7.5, 6.6)
        ax = fig.add_subplot()
        both = {s["anonymizer"] for s in series if not s["counted"]}
        anon_idx = {a: i for i, a in enumerate(_unique(s["anonymizer"] for s in series))}
        dropped, keys, empty, single = 0, [], [], []
        for s in sorted(series, key=lambda s: (anon_idx[s["anonymizer"]], not s["counted"])):
            c = color.get(s["anonymizer"], "0.3")
            dropped += s["dropped"]
            variant = "with de-anon." if s["deanon"] else "without de-anon."
            if not len(s["x"]):  # every point undefined: nothing to draw, so no legend entry either
                empty.append(f"{s['anonymizer']} ({variant})")
                continue
            if len(s["x"]) == 1 and s["counted"]:
                single.append(s["anonymizer"])
            auc_txt = f"  AUC {_fmt(s['auc'])}" if not math.isnan(s["auc"]) else ""
            if s["counted"]:
                label = f"{_mpl(s['anonymizer'])}{auc_txt}" + (f"  ({variant}, counted)" if s["anonymizer"] in both
                                                               else "")  # fmt: skip
                ax.plot(s["px"], s["py"], color=c, linewidth=2.0, label=label, zorder=3)
                ax.plot(s["x"], s["y"], "o", color=c, markersize=6, zorder=4)
                off, ha, va = _LABEL_OFFSETS[anon_idx[s["anonymizer"]] % len(_LABEL_OFFSETS)]
                point_labels, key = _point_labels(s["x"], s["y"], s["labels"])
                if key:
                    keys.append(f"{s['anonymizer']}: " + "; ".join(key))
                for x, y, t in zip(s["x"], s["y"], point_labels):
                    if t:
                        ax.annotate(_mpl(t), (x, y), xytext=off, textcoords="offset points", fontsize=8, color=c,
                                    ha=ha, va=va, zorder=5)  # fmt: skip
            else:
                label = f"{_mpl(s['anonymizer'])}{auc_txt}  ({variant})"
                ax.plot(s["px"], s["py"], color=c, linewidth=1.3, linestyle="--", label=label, zorder=2)
                ax.plot(s["x"], s["y"], "o", color=c, markersize=5, markerfacecolor="white", zorder=3)
        _ref_lines_x(ax)
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.12)
        ax.set_xlabel("privacy  (0 = clear level, 1 = chance)")
        ax.set_ylabel(_wrap(f"utility: {_mpl(measure)}  (0 = floor, 1 = clear)", 50))
        ax.set_title(_fit(f"Privacy–utility: {_mpl(measure)} — selector {_mpl(sel)}, n = {n}", 6.4, 11))
        other = any(not s["counted"] and len(s["x"]) for s in series)
        lines = [h for h in ax.get_lines() if not h.get_label().startswith("_")]
        # below the axes: inside, it would hide the staircase tails and points
        _figure_legend(fig, lines, [h.get_label() for h in lines], 2)
        cap = (f"How to read: each point is one anonymizer setting, placed by its worst-case privacy (right = closer "
               f"to chance) and its utility (up = closer to clear data); further up and right is better, and a "
               f"larger area under a staircase (its AUC) is a better trade-off. Measure {measure}, selector {sel}, "
               f"{n} subjects. Solid: the counted (lower-AUC) variant with its points (labelled by setting)"
               + ("; dashed, hollow points: the other de-anonymization variant" if other else "")
               + ". The staircase is the conservative envelope: the best utility reachable at each privacy level "
               "or more.")  # fmt: skip
        if single:
            cap += (f" {', '.join(single)}: a single setting, so a single point; its staircase is the area that "
                    f"point alone guarantees.")  # fmt: skip
        if keys:
            cap += " Numbered points (their labels would overlap): " + " | ".join(keys) + "."
        if dropped:
            cap += f" {dropped} point(s) with undefined privacy or utility are not drawn."
        if empty:
            cap += f" Not drawn (no defined point): {', '.join(empty)}."
        figs.append(Plot("tradeoff", _slug(measure, sel, f"n{n}"), fig, cap))
    return figs, notes


def _setting_panels(res: _Results, df: pd.DataFrame) -> tuple[dict[str, list[tuple]], list[str]]:
    """Per anonymizer the (setting_index, setting) pairs to draw (first, middle, last) and notes about the cap."""
    panels, notes = {}, []
    for anon in _order(df["anonymizer"], res.anonymizers):
        s = df[df["anonymizer"] == anon][["setting_index", "setting"]].drop_duplicates().sort_values("setting_index")
        all_ = list(s.itertuples(index=False, name=None))
        picked = _pick(all_)
        panels[anon] = picked
        if len(picked) < len(all_):
            names = ", ".join(t or "(default)" for _, t in picked)
            notes.append(f"{anon}: showing {len(picked)} of {len(all_)} settings (first, middle and last: {names}).")
    return panels, notes


def _plot_subjects(res: _Results) -> tuple[list[Plot], list[str]]:
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    m = res.metrics
    t1 = m[m["metric"] == "top1"]
    if t1.empty:
        return [], []
    panels, notes = _setting_panels(res, t1)
    scolor = dict(zip(res.selectors, _colors(len(res.selectors), "Dark2")))
    figs = []
    for anon, picked in panels.items():
        panel_w = 4.6
        fig = _new_figure(panel_w * len(picked) + 0.6, 4.8)
        axes = fig.subplots(1, len(picked), sharey=True, squeeze=False)[0]
        handles: dict[str, Any] = {}
        single_n: set[int] = set()
        for ax, (idx, setting) in zip(axes, picked):
            d = t1[(t1["anonymizer"] == anon) & (t1["setting_index"] == idx)]
            cur = _subject_curves(res, d)
            ns = sorted(_unique(cur["n_subjects"]))
            for sel in _order(cur["selector"], res.selectors):
                c = cur[cur["selector"] == sel]
                col = scolor.get(sel, "0.3")
                if len(c) == 1:
                    single_n.add(int(c["n_subjects"].iloc[0]))
                x = c["n_subjects"].to_numpy(float)
                drawn = {
                    f"sel:{sel}": _series(ax, x, c["worst"], single="o", color=col, linewidth=2, marker="o",
                                          label=_mpl(sel)),
                }  # fmt: skip
                if (c["n_draws"] > 1).any():
                    label = f"{_mpl(sel)}: range over draws"
                    if len(c) > 1:
                        drawn[f"band:{sel}"] = ax.fill_between(x, c["lo"], c["hi"], color=col, alpha=0.18,
                                                               linewidth=0, label=label)  # fmt: skip
                    else:  # one subject count: the range is a bar at that count
                        drawn[f"band:{sel}"] = ax.vlines(x, c["lo"], c["hi"], color=col, alpha=0.3, linewidth=9,
                                                         label=label)  # fmt: skip
                    drawn[f"best:{sel}"] = _series(ax, x, c["best"], single="v", color=col, linewidth=0.9,
                                                   markersize=6, label=f"{_mpl(sel)}: best draw")  # fmt: skip
                if c["clear"].notna().any():
                    drawn[f"clear:{sel}"] = _series(ax, x, c["clear"], single="D", color=col, linestyle="--",
                                                    linewidth=1.2, alpha=0.8, markerfacecolor="none",
                                                    markersize=7, label=f"clear level ({_mpl(sel)})")  # fmt: skip
                for k, h in drawn.items():
                    if h is not None:
                        handles.setdefault(k, h)
            ch = cur.groupby("n_subjects")["chance"].mean()
            h = _series(ax, ch.index, ch.to_numpy(), single="_", color="black", linestyle=":", linewidth=1.4,
                        markersize=18, markeredgewidth=2, label="chance (1/n)")  # fmt: skip
            if h is not None:
                handles.setdefault("chance", h)
            ax.set_xscale("log")
            if ns:
                ax.xaxis.set_major_locator(FixedLocator(ns))
                ax.xaxis.set_major_formatter(ScalarFormatter())
                ax.xaxis.set_minor_locator(NullLocator())
                lo, hi = min(ns), max(ns)
                pad = 1.15 if lo < hi else 1.6
                ax.set_xlim(lo / pad, hi * pad)
            ax.set_ylim(0, 1.03)
            ax.set_xlabel("subjects in the selection (log scale)")
            ax.set_title(_fit(_mpl(setting or "(default)"), panel_w - 0.7, 11))
        axes[0].set_ylabel("worst-case top-1 accuracy")
        fig.suptitle(_fit(f"{_mpl(anon)}: worst-case top-1 against subject count", fig.get_figwidth() - 0.3, 12))
        _figure_legend(fig, list(handles.values()), [h.get_label() for h in handles.values()], 4)
        cap = (f"How to read: lower is more private — a curve near the dotted chance line means the strongest "
               f"attacker does no better than guessing, one near the dashed clear level means the anonymization "
               f"hardly protects; accuracy usually falls as the number of subjects grows. {anon}: worst case over "
               f"recognizers × attack scenarios (mean over repeats and draws) per selector; for selectors with "
               f"several random draws the band is the min–max over draws of that worst-case attack and the thin "
               f"line the best draw (the highest accuracy of any attack on any draw).")  # fmt: skip
        if single_n:
            counts = ", ".join(str(v) for v in sorted(single_n))
            cap += (f" Only one subject count (n = {counts}) was evaluated for some selectors, so their series are "
                    f"single points (▼ best draw, ◇ clear level, — chance, bar: range over draws), not curves.")
        figs.append(Plot("subjects", _slug(anon), fig, cap))
    return figs, notes


def _plot_scenarios(res: _Results) -> tuple[list[Plot], list[str]]:
    top = _first_selector_top(res)
    if top.empty:
        return [], []
    agg = _mean_runs(top, _SETTING + ["n_subjects", "recognizer", "scenario"])
    panels, notes = _setting_panels(res, agg)
    recs = _order(agg["recognizer"], res.recognizers)
    rcolor = dict(zip(recs, _colors(len(recs), "Set2")))
    figs = []
    for anon, picked in panels.items():
        nscen = max(len(_unique(agg.loc[agg["anonymizer"] == anon, "scenario"])), 1)
        panel_w = min(max(4.8, 0.35 * nscen * max(len(recs), 1) + 1.5), 10.0)
        stacked = panel_w * len(picked) > 16  # many bars: one panel per row instead of side by side
        if stacked:
            fig = _new_figure(panel_w + 0.4, 3.6 * len(picked) + 0.8)
            axes = fig.subplots(len(picked), 1, sharey=True, squeeze=False)[:, 0]
        else:
            fig = _new_figure(panel_w * len(picked) + 0.4, 4.8)
            axes = fig.subplots(1, len(picked), sharey=True, squeeze=False)[0]
        handles: dict[str, Any] = {}
        for ax, (idx, setting) in zip(axes, picked):
            d = agg[(agg["anonymizer"] == anon) & (agg["setting_index"] == idx)]
            scen = display_order(d["scenario"])
            width = 0.8 / max(len(recs), 1)
            for j, r in enumerate(recs):
                v = d[d["recognizer"] == r].set_index("scenario").reindex(scen)
                x = np.arange(len(scen)) - 0.4 + width * (j + 0.5)
                val = v["value"].to_numpy(float)
                if not np.isfinite(val).any():  # this recognizer has no value here: no bars, no legend entry
                    continue
                lo = np.nan_to_num(np.clip(val - v["ci_low"].to_numpy(float), 0, None))
                hi = np.nan_to_num(np.clip(v["ci_high"].to_numpy(float) - val, 0, None))
                h = ax.bar(x, np.nan_to_num(val), width * 0.92, color=rcolor[r], label=_mpl(r),
                           yerr=np.vstack([lo, hi]), capsize=2.5, error_kw={"elinewidth": 1, "ecolor": "0.25"})  # fmt: skip
                handles.setdefault(f"rec:{r}", h)
            chance = float(top.loc[(top["anonymizer"] == anon) & (top["setting_index"] == idx), "chance"].mean())
            n = int(d["n_subjects"].iloc[0])
            if math.isnan(chance):
                chance = 1.0 / n
            h = ax.axhline(chance, color="black", linestyle=":", linewidth=1.4, label="chance")
            handles.setdefault("chance", h)
            clear = d.loc[d["scenario"] == CLEAR, "value"].max()
            if not (isinstance(clear, float) and math.isnan(clear)):
                h = ax.axhline(clear, color="0.35", linestyle="--", linewidth=1.2, label="clear level (worst case)")
                handles.setdefault("clear", h)
            ax.set_xticks(np.arange(len(scen)), [_mpl(res.scenario(s)) for s in scen])
            ax.set_xlim(-0.6, len(scen) - 0.4)
            ax.set_ylim(0, 1.05)
            ax.grid(axis="x", visible=False)
            ax.set_xlabel("attacker scenario")
            ax.set_title(_fit(f"{_mpl(setting or '(default)')}  (n = {n})", panel_w - 0.7, 11))
        for ax in axes if stacked else axes[:1]:
            ax.set_ylabel("top-1 accuracy (mean over repeats)")
        fig.suptitle(_fit(f"{_mpl(anon)}: top-1 per scenario and recognizer — selector {_mpl(res.first_selector)}",
                          fig.get_figwidth() - 0.3, 12))  # fmt: skip
        _figure_legend(fig, list(handles.values()), [h.get_label() for h in handles.values()], 6)
        cap = (f"How to read: each bar is one recognizer attacking in one scenario; lower bars are more private — at "
               f"the dotted chance line the attack fails, at the dashed clear level the anonymization does not "
               f"protect. The scenario with the highest bar is the worst case. {anon}: top-1 accuracy per attacker "
               f"scenario (groups) and recognizer (bars) for selector {res.first_selector} at its largest subject "
               f"count; error bars: the stored CIs (bounds averaged over repeats).")  # fmt: skip
        figs.append(Plot("scenarios", _slug(anon), fig, cap))
    return figs, notes


def _plot_reversibility(res: _Results, rev: pd.DataFrame, t: tuple[float, float]) -> list[Plot]:
    u = res.utility
    if rev.empty or u.empty:
        return []
    um = u.groupby(_SETTING + ["measure"], dropna=False, sort=False)["normalized"].mean().reset_index()
    color = dict(zip(res.anonymizers, _colors(len(res.anonymizers))))
    figs = []
    for measure in _unique(um["measure"])[:MAX_REVERSIBILITY_FIGURES]:
        d = rev.merge(um[um["measure"] == measure], on=_SETTING, how="inner")
        d = d[d["R"].notna() & d["normalized"].notna()]
        if d.empty:
            continue
        fig = _new_figure(6.5, 5.0)
        ax = fig.add_subplot()
        single, keys = [], []
        for i, anon in enumerate(_order(d["anonymizer"], res.anonymizers)):
            p = d[d["anonymizer"] == anon].sort_values("setting_index")
            c = color.get(anon, "0.3")
            if len(p) == 1:
                single.append(anon)
            _series(ax, p["normalized"], p["R"], single="o", marker="o", color=c, label=_mpl(anon))
            off, ha, va = _LABEL_OFFSETS[i % len(_LABEL_OFFSETS)]
            point_labels, key = _point_labels(p["normalized"], p["R"], list(p["setting"]))
            if key:
                keys.append(f"{anon}: " + "; ".join(key))
            for x, y, s in zip(p["normalized"], p["R"], point_labels):
                if s:
                    ax.annotate(_mpl(s), (x, y), xytext=off, textcoords="offset points", fontsize=8, color=c,
                                ha=ha, va=va)  # fmt: skip
        for y in t:
            ax.axhline(y, color="0.4", linestyle=":", linewidth=1.1)
        tr = ax.get_yaxis_transform()  # x in axes coordinates: the labels sit in the right margin
        for y, label in ((t[0] / 2, "irreversible"), ((t[0] + t[1]) / 2, "partially\nreversible"),
                         ((t[1] + 1) / 2, "highly\nreversible")):  # fmt: skip
            ax.text(1.015, y, label, transform=tr, ha="left", va="center", fontsize=8, color="0.3")
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel(_wrap(f"utility: {_mpl(measure)}  (0 = floor, 1 = clear)", 60))
        ax.set_ylabel("reversibility R")
        ax.set_title(_fit(f"Reversibility against utility ({_mpl(measure)})", 4.8, 11))
        lines = [h for h in ax.get_lines() if not h.get_label().startswith("_")]
        _figure_legend(fig, lines, [h.get_label() for h in lines], 4)  # below: inside, it may hide points
        cap = (f"How to read: each point is one anonymizer setting; lower is better (a de-anonymizer recovers "
               f"less of what the anonymization removed) and further right keeps more utility, so the lower right "
               f"is best. Reversibility R against normalized utility ({measure}); dotted lines: category "
               f"thresholds {t[0]:g} and {t[1]:g}.")  # fmt: skip
        if single:
            cap += f" {', '.join(single)}: a single setting, drawn as a single point."
        if keys:
            cap += " Numbered points (their labels would overlap): " + " | ".join(keys) + "."
        figs.append(Plot("reversibility", _slug(measure), fig, cap))
    return figs


def _all_plots(res: _Results) -> dict[str, Any]:
    """Every figure of the report with its notes, drawn under the report's rc settings."""
    import matplotlib

    thresholds = _reversibility_thresholds(res)
    rev = _reversibility(res, thresholds)
    with matplotlib.rc_context(_RC):
        tradeoff, tnotes = _plot_tradeoff(res)
        subjects, snotes = _plot_subjects(res)
        scenarios, cnotes = _plot_scenarios(res)
        rev_figs = _plot_reversibility(res, rev, thresholds)
    return {
        "tradeoff": tradeoff, "tradeoff_notes": tnotes,
        "subjects": subjects, "subjects_notes": snotes,
        "scenarios": scenarios, "scenarios_notes": cnotes,
        "reversibility": (rev, thresholds, rev_figs),
    }  # fmt: skip


def plots(source: str | os.PathLike | Mapping[str, Any], kinds: Iterable[str] | None = None) -> list[Plot]:
    """The report's figures as :class:`Plot` objects (a matplotlib ``figure`` with its ``caption``).

    ``source`` is a run directory (what :func:`render_report` reads) or the tables in memory as a mapping:
    ``metrics`` (required), ``utility``, ``tradeoff``, ``auc``, ``protocol`` (DataFrames with the columns of the
    files of the same name), ``config``, ``environment`` (dicts). ``kinds`` picks among ``tradeoff``,
    ``subjects``, ``scenarios`` and ``reversibility`` (default: all). Nothing is written.
    """
    res = _load(source) if isinstance(source, (str, os.PathLike)) else _from_frames(source)
    wanted = set(PLOT_KINDS if kinds is None else kinds)
    unknown = wanted - set(PLOT_KINDS)
    if unknown:
        raise ReportError(f"plots: unknown kind(s) {', '.join(sorted(unknown))}; choose from {', '.join(PLOT_KINDS)}")
    parts = _all_plots(res)
    out = parts["tradeoff"] + parts["subjects"] + parts["scenarios"] + parts["reversibility"][2]
    return [p for p in out if p.kind in wanted]


def _save_png(fig: Figure, path: Path) -> None:
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=DPI))
    _readable(path)


_SVG_ID = re.compile(r'\bid="([^"]+)"')
_SVG_REF = re.compile(r'(href="#|url\(#)([^")]+)')


def _inline_svg(fig: Figure, uid: str, label: str) -> str:
    """The figure as an ``<svg>`` element to put inline in HTML: no XML prolog; sized in CSS pixels (so the page
    reserves its box before drawing) and scaled by its viewBox; ids (clip paths, glyphs, markers) prefixed with
    ``uid`` so that several plots in one page do not share them; matplotlib's style sheet scoped to this plot."""
    import io

    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    s = buf.getvalue().decode("utf-8")
    s = s[s.index("<svg"):]
    s = _SVG_ID.sub(lambda m: f'id="{uid}-{m.group(1)}"', s)
    s = _SVG_REF.sub(lambda m: f"{m.group(1)}{uid}-{m.group(2)}", s)
    s = s.replace("<style type=\"text/css\">*{", f"<style type=\"text/css\">#{uid} *{{", 1)

    def root(m: re.Match) -> str:
        attrs = re.sub(r'\s(width|height)="([0-9.]+)pt"',
                       lambda a: f' {a.group(1)}="{round(float(a.group(2)) * 4 / 3)}"', m.group(1))  # fmt: skip
        return f'<svg id="{uid}" class="plot" role="img" aria-label="{_esc(label)}"{attrs}>'

    return re.sub(r"<svg\b([^>]*)>", root, s, count=1)


# ------------------------------------------------------------------------------------------------------ HTML


class _Raw(str):
    """Already-escaped HTML."""


def _esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _fmt(v: Any) -> str:
    """Numbers with 3 decimals (3 significant digits when very small or large); NaN/None → en dash."""
    if v is None:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isnan(f):
        return "–"
    if math.isinf(f):
        return "∞" if f > 0 else "−∞"
    a = abs(f)
    if a != 0 and (a < 1e-3 or a >= 1e5):
        return f"{f:.3g}"
    return f"{f:.3f}"


def _fmt_ci(v: Any, lo: Any, hi: Any) -> str:
    s = _fmt(v)
    if lo is None or hi is None or _isnan(lo) or _isnan(hi):
        return s
    return f"{s} [{_fmt(lo)}, {_fmt(hi)}]"


def _isnan(v: Any) -> bool:
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def _cell(v: Any) -> str:
    if isinstance(v, _Raw):
        return v
    if isinstance(v, str):
        return _esc(v)
    return _esc(_fmt(v))


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, num_from: int = 0, cls: str = "") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        tds = "".join(
            f'<td class="num">{_cell(v)}</td>' if i >= num_from and num_from else f"<td>{_cell(v)}</td>"
            for i, v in enumerate(row)
        )
        body.append(f"<tr>{tds}</tr>")
    c = f' class="{_esc(cls)}"' if cls else ""
    # wide tables scroll inside their own box instead of widening the page (phones)
    return f'<div class="scroll"><table{c}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _figures(figs: list[dict]) -> str:
    """Figures with their inline SVG (already safe markup) and caption."""
    return "".join(f'<figure><div class="plot">{f["svg"]}</div><figcaption>{_esc(f["caption"])}</figcaption></figure>'
                   for f in figs)


def _notes(notes: list[str]) -> str:
    return "".join(f'<p class="note">{_esc(n)}</p>' for n in notes)


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{_esc(title)}</h2>{body}</section>'


_CSS = """
*,*::before,*::after{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1d232a;
background:#fafbfc;line-height:1.45;overflow-wrap:break-word}
main{max-width:1200px;margin:0 auto;padding:1.5rem 2rem 4rem}
h1{font-size:1.7rem;margin:.2rem 0}h2{font-size:1.3rem;border-bottom:2px solid #d8dee4;padding-bottom:.25rem;
margin-top:2.2rem}
h1,h2,p,li,figcaption,.meta span{overflow-wrap:anywhere}
.meta{color:#57606a;font-size:.92rem}.meta span{margin-right:1.2rem;display:inline-block;max-width:100%}
nav{font-size:.9rem;margin:1rem 0;display:flex;flex-wrap:wrap;gap:.3rem .9rem}
nav a{color:#0969da;text-decoration:none}
.scroll{max-width:100%;overflow-x:auto;margin:.6rem 0;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;font-size:.88rem;background:#fff}
th,td{border:1px solid #d8dee4;padding:.28rem .55rem;text-align:left;vertical-align:top;overflow-wrap:normal}
th{background:#eef1f4;font-weight:600}td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:nth-child(even){background:#f6f8fa}
.counted{font-weight:700;background:#dafbe1}
.warn{background:#fff8c5;border:1px solid #d4a72c;border-left:6px solid #d4a72c;padding:.5rem 1rem;margin:.6rem 0}
.warn li{margin:.2rem 0}
.fail{background:#ffebe9;border:1px solid #cf222e;border-left:6px solid #cf222e;padding:.5rem 1rem}
.ok{color:#1a7f37}.note{color:#57606a;font-size:.9rem}
.big{font-size:1.05rem;font-weight:700}.dim{color:#57606a;font-size:.85em}
figure{margin:1rem 0;background:#fff;border:1px solid #d8dee4;padding:.6rem;max-width:100%}
figure .plot svg{display:block;max-width:100%;height:auto}
figcaption{font-size:.85rem;color:#57606a;margin-top:.3rem}
pre{background:#f6f8fa;border:1px solid #d8dee4;padding:.8rem;overflow:auto;font-size:.8rem;max-width:100%}
code{font-size:.9em}
@media (max-width:640px){main{padding:1rem .75rem 3rem}h1{font-size:1.35rem}h2{font-size:1.15rem}
figure{padding:.3rem;margin:.8rem 0}th,td{padding:.22rem .4rem}}
"""


def _duration(s: Any) -> str:
    try:
        s = float(s)
    except (TypeError, ValueError):
        return "–"
    if math.isnan(s):
        return "–"
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m} min" if h else f"{m} min {sec} s"


def device_summary(record: Any) -> str:
    """Where the torch-backed methods ran: 'cuda:0 (NVIDIA H100, 79.1 GB), asked: auto' or why none did."""
    if not isinstance(record, dict):
        return "–"
    devices = record.get("devices") or []
    if not devices:
        return f"no torch-backed method (asked: {record.get('requested', 'auto')})"
    parts = []
    for d in devices:
        if not isinstance(d, dict):
            continue
        extra = ", ".join(str(x) for x in (d.get("name"), f"{d['memory_gb']} GB" if d.get("memory_gb") else None,
                                             f"torch {d['torch']}" if d.get("torch") else None) if x)
        parts.append(f"{d.get('device', '?')} ({extra})" if extra else str(d.get("device", "?")))
    return "; ".join(parts) + f", asked: {record.get('requested', 'auto')}"


def _data_sets(config: dict) -> list[tuple[str, str]]:
    """The header's data rows: the evaluated data set and, for a cross-database protocol, the attacker's
    (``[attacker_dataset]``: the attacker's training data and database; the evaluated set gives background and
    evaluation subjects)."""
    def name(d: Any) -> str:
        if not isinstance(d, dict) or not d.get("source"):
            return "–"
        return f"{d['source']} ({d['path']})" if d.get("path") else str(d["source"])

    ds, att = config.get("dataset"), config.get("attacker_dataset")
    if not isinstance(att, dict):
        return [("data", name(ds))]
    extra = []
    share = att.get("subjects", 1)
    if isinstance(share, (int, float)) and share < 1:
        extra.append(f"{share:.0%} of its subjects per repeat")
    maps = att.get("attributes") if isinstance(att.get("attributes"), dict) else {}
    for col, m in maps.items():
        to = m.get("to", col) if isinstance(m, dict) else m
        values = m.get("values") if isinstance(m, dict) else None
        extra.append(f"{col} → {to}" + (" (values mapped)" if values else ""))
    return [("data (background, evaluation)", name(ds)),
            ("attacker data (training, database)", name(att) + (f"; {', '.join(extra)}" if extra else ""))]


def _header(res: _Results) -> str:
    env = res.environment
    name = res.config.get("name") or res.run_dir.name
    plugins = env.get("plugins") if isinstance(env.get("plugins"), dict) else {}
    plug = ", ".join(f"{k} {v}" for k, v in sorted(plugins.items())) or "none"
    meta = [
        ("run", name),
        ("started", env.get("started", "–")),
        ("finished", env.get("finished", "–")),
        ("duration", _duration(env.get("duration_s"))),
        ("seed", env.get("seed", res.config.get("seed", "–"))),
        ("repeats", res.config.get("repeats", "–")),
    ]
    vers = [
        ("bioanon", env.get("bioanon", "–")),
        ("plugins", plug),
        ("python", env.get("python", "–")),
        ("platform", env.get("platform", "–")),
        ("device", device_summary(env.get("device"))),
    ]
    row = lambda items: "".join(f"<span><b>{_esc(k)}</b> {_esc(_scrub(v))}</span>" for k, v in items)  # noqa: E731
    return (
        f"<header><h1>bioanon report — {_esc(name)}</h1>"
        f'<p class="meta">{row(meta)}</p><p class="meta">{row(_data_sets(res.config))}</p>'
        f'<p class="meta">{row(vers)}</p>'
        f'<p class="meta"><b>results folder</b> {_esc(res.run_dir.name)}</p>{_notes(res.notes)}</header>'
    )


def _headline_html(res: _Results, hl: pd.DataFrame) -> str:
    if hl.empty:
        return (f'<p class="note">No {METRIC_LABELS.get(res.headline_metric, res.headline_metric)} results for the '
                f"first selector; no headline.</p>")
    attr = res.attribute
    rows = []
    for r in hl.itertuples(index=False):
        big = _Raw(f'<span class="big">{_esc(_fmt(r.value))}</span>'
                   + (f' <span class="dim">[{_esc(_fmt(r.ci_low))}, {_esc(_fmt(r.ci_high))}]</span>'
                      if not (_isnan(r.ci_low) or _isnan(r.ci_high)) else ""))
        extra = (r.top1, r.majority) if attr else ()
        rows.append((r.anonymizer, r.setting or "(default)", big, r.clear, r.chance, *extra, r.privacy,
                     f"{r.recognizer} / {res.scenario(r.scenario)}", r.n_subjects, r.n_repeats))
    common = (
        f"the highest value over every recognizer × attacker scenario (clear excluded, de-anonymization included), "
        f"each averaged over repeats and draws; selector <code>{_esc(res.first_selector)}</code> at its largest "
        f"subject count. Beside it the clear level (worst case on clear data, same selection) and chance; privacy "
        f"x = 1 − clip((A − c)/(A_clear − c), 0, 1) is 0 at the clear level and 1 at chance."
    )
    if attr:
        intro = (
            f"<p>Worst-case <b>balanced accuracy</b> of inferring the attribute <code>{_esc(res.label)}</code> per "
            f"anonymizer setting: {common} Balanced accuracy is the mean over attribute values of their recall; its "
            f"chance level is <b>uniform</b>, 1/(number of values), whatever the class balance. Plain accuracy of "
            f"the same attack is shown beside it with <b>its</b> chance level, the <b>majority-class rate</b> (what "
            f"always guessing the most frequent value scores): compare each number only with its own chance level. "
            f"The headline, privacy x and the privacy–utility trade-off use balanced accuracy. Lower = more "
            f"privacy.</p>"
        )
        heads = ["anonymizer", "setting", "worst-case balanced acc. [CI]", "clear level", "uniform chance",
                 "accuracy (same attack)", "majority-class rate", "privacy x", "achieved by (recognizer / scenario)",
                 "subjects", "repeats"]
    else:
        intro = f"<p>Worst-case top-1 re-identification accuracy per anonymizer setting: {common} Lower accuracy = " \
                f"more privacy.</p>"
        heads = ["anonymizer", "setting", "worst-case top-1 [CI]", "clear level", "chance", "privacy x",
                 "achieved by (recognizer / scenario)", "subjects", "repeats"]
    return intro + _table(heads, rows, num_from=2, cls="headline") + _notes(comparator_notes(res.metrics))


def comparator_notes(metrics: pd.DataFrame) -> list[str]:
    """One line per anonymizer whose protection declared a template comparator that recognizers used (the
    black-box attacker; :class:`bioanon.methods.Comparator`): which comparator, which recognizers and scenarios."""
    if "comparator" not in metrics.columns:
        return []
    used = metrics[metrics["comparator"].fillna("").astype(str) != ""]
    out = []
    for (anon, cmp), g in used.groupby(["anonymizer", "comparator"], sort=False):
        pairs = ", ".join(f"{r} ({', '.join(dict.fromkeys(h.scenario))})"
                          for r, h in g.groupby("recognizer", sort=False))
        out.append(f"Comparator: the templates of {anon} were compared with its declared comparator {cmp!r} by "
                   f"{pairs}; everything else used the recognizer's own comparison.")
    return out


def _warnings_html(res: _Results) -> str:
    if res.warnings:
        items = "".join(f"<li>{_esc(w)}</li>" for w in res.warnings)
        w = f'<div class="warn"><b>{len(res.warnings)} sanity warning(s)</b><ul>{items}</ul></div>'
    else:
        w = '<p class="ok">No sanity warnings.</p>'
    if res.failures:
        rows = [(f.get("task", ""), _Raw(f"<code>{_esc(f.get('error', ''))}</code>")) for f in res.failures]
        w += f'<div class="fail"><b>{len(res.failures)} failed task(s)</b>{_table(["task", "error"], rows)}</div>'
    else:
        w += '<p class="ok">No failed tasks.</p>'
    return w


def _auc_html(res: _Results) -> str:
    a = res.auc
    if a.empty:
        return '<p class="note">No AUC results (no utility measures configured, or auc.parquet missing).</p>'
    keys = ["anonymizer", "selector", "n_subjects", "measure"]
    arank = {x: i for i, x in enumerate(res.anonymizers)}
    srank = {x: i for i, x in enumerate(res.selectors)}
    a = a.assign(
        _a=a["anonymizer"].map(lambda x: arank.get(x, len(arank))),
        _s=a["selector"].map(lambda x: srank.get(x, len(srank))),
    ).sort_values(["_a", "_s", "n_subjects", "measure"], ascending=[True, True, False, True], kind="stable")
    rows = []
    for k, g in a.groupby(keys, dropna=False, sort=False):
        cells = {}
        counted = None
        for r in g.itertuples(index=False):
            txt = _esc(_fmt(r.auc))
            if r.counted:
                counted = r
                txt = f'<span class="counted">{txt} ✔</span>'
            cells[bool(r.deanon)] = _Raw(txt)
        cval = _Raw(
            f'<span class="counted">{_esc(_fmt(counted.auc))}</span> '
            f'<span class="dim">({"with" if counted.deanon else "without"} de-anon.)</span>'
        ) if counted is not None else "–"  # fmt: skip
        rows.append((*k, cells.get(False, "–"), cells.get(True, "–"), cval))
    return (
        "<p>Area under the conservative privacy–utility staircase (1 = ideal). Of the AUCs with and without the "
        "de-anonymization scenario in the worst case, the lower one (✔) counts — compare anonymizations by it, "
        "and always beside its curve below.</p>"
        + _table(["anonymizer", "selector", "subjects", "measure", "AUC without de-anon.", "AUC with de-anon.",
                  "counted AUC"], rows, num_from=4)  # fmt: skip
    )


def _utility_html(res: _Results) -> str:
    u = res.utility
    if u.empty:
        return '<p class="note">No utility measures in this run.</p>'
    g = u.groupby(_SETTING + ["measure"], dropna=False, sort=False)
    t = g[["value", "ci_low", "ci_high", "clear_value", "floor", "normalized"]].mean()
    t["n_repeats"] = g["repeat"].nunique()
    t = _setting_order(res, t.reset_index())
    rows = [
        (r.anonymizer, r.setting or "(default)", r.measure, _fmt_ci(r.value, r.ci_low, r.ci_high), r.clear_value,
         r.floor, r.normalized, r.n_repeats)
        for r in t.itertuples(index=False)
    ]  # fmt: skip
    return (
        "<p>Mean over repeats (CI bounds averaged). Normalized utility y = (U − floor)/(clear − floor), clipped to "
        "[0, 1]: 1 = as useful as clear data, 0 = the floor.</p>"
        + _table(["anonymizer", "setting", "measure", "value [CI]", "clear", "floor", "normalized y", "repeats"],
                 rows, num_from=3)  # fmt: skip
    )


def _protocol_html(res: _Results) -> str:
    p = res.protocol
    keep = ["attribute_accuracy", "attribute_accuracy_clear", "attribute_chance", "mixture", "mixture_clear",
            "top1_mixture", "top5_mixture", "kl_from_uniform", "kl_from_uniform_clear"]
    p = p[p.metric.isin(keep)]
    t = p.groupby(_SETTING + ["metric"], dropna=False, sort=False)["value"].mean().unstack("metric").reset_index()
    t = _setting_order(res, t)
    cols = [c for c in keep if c in t.columns]
    rows = [(r["anonymizer"], r["setting"] or "(default)", *[r[c] for c in cols]) for _, r in t.iterrows()]
    attribute = (res.config.get("report") or {}).get("paper_protocol", "")
    return (
        f"<p>The evaluation protocol of <code>utility-preserving-anonymization.txt</code> §5.1.3 on the evaluation "
        f"set, beside the strong attackers above: accuracy on the attribute of interest "
        f"<code>{_esc(attribute)}</code> of a random forest trained on original data and applied to anonymized "
        f"data, and the mixture level 1 − S(T(D)) (top-k mixture, KL of the posteriors from a uniform guess) of an "
        f"identity classifier trained on original data. Mean over repeats. A high mixture here with a high "
        f"worst-case accuracy above is the false sense of privacy the strong evaluation exposes.</p>"
        + _table(["anonymizer", "setting"] + [c.replace("_", " ") for c in cols], rows, num_from=2)
    )


def _reversibility_html(rev: pd.DataFrame, t: tuple[float, float], figs: list[dict], res: _Results) -> str:
    rows = [(r.anonymizer, r.setting or "(default)", r.R, r.category, r.n_recognizers, r.n_subjects)
            for r in rev.itertuples(index=False)]  # fmt: skip
    return (
        f"<p>R = clip((A_deanon − A_naive)/(A_clear − A_naive), 0, 1), averaged over recognizers (selector "
        f"<code>{_esc(res.first_selector)}</code>, largest subject count). Categories: irreversible (R &lt; "
        f"{_esc(f'{t[0]:g}')}), partially reversible (&lt; {_esc(f'{t[1]:g}')}), highly reversible (otherwise); these "
        f"thresholds are bioanon's own choice and configurable (<code>report.reversibility_thresholds</code>).</p>"
        + _table(["anonymizer", "setting", "R", "category", "recognizers", "subjects"], rows, num_from=2)
        + _figures(figs)
    )


def _metrics_html(res: _Results) -> str:
    m = res.metrics
    summary = (("balanced_accuracy",) if res.attribute else ()) + SUMMARY_METRICS
    df = m[(m["selector"] == res.first_selector) & m["metric"].isin(summary)]
    df = _largest_n(df, _SETTING)
    if df.empty:
        return '<p class="note">No results.</p>'
    keys = _SETTING + ["n_subjects", "recognizer", "scenario", "metric"]
    agg = _mean_runs(df, keys)
    # the distinct notes of each cell (undefined values, missing or approximate CIs), numbered in order of appearance
    cell_notes = df[df["note"] != ""].groupby(keys, dropna=False, sort=False)["note"].agg(_unique)
    numbers: dict[str, int] = {}
    present = [x for x in summary if x in set(agg["metric"])]
    rows = []
    for anon, idx, setting, n, rec, scen, cell in _cells(res, agg):
        h = cell.set_index("metric")
        cells = []
        for x in present:
            if x not in h.index:
                cells.append("–")
                continue
            notes = cell_notes.get((anon, idx, setting, n, rec, scen, x), [])
            marks = "".join(f"<sup>{numbers.setdefault(t, len(numbers) + 1)}</sup>" for t in notes)
            v = h.at[x, "value"]
            txt = "undefined" if _isnan(v) else _fmt_ci(v, h.at[x, "ci_low"], h.at[x, "ci_high"])
            cells.append(_Raw(_esc(txt) + marks) if marks else txt)
        rows.append((anon, setting or "(default)", n, rec, res.scenario(scen), *cells))
    boot = res.config.get("report") if isinstance(res.config.get("report"), dict) else {}
    ci = ""
    if boot:
        ci = (f" CIs: {_esc(_fmt_conf(boot.get('confidence')))} bootstrap over subjects"
              f" ({_esc(boot.get('bootstrap', '–'))} resamples; expanded BCa interval) where available, bounds "
              f"averaged over repeats.")
    chance = (" Balanced accuracy's chance is uniform (1/number of attribute values), plain top-1 accuracy's the "
              "majority-class rate." if res.attribute else "")
    foot = ""
    if numbers:
        items = "".join(f"<li value=\"{k}\">{_esc(t)}</li>" for t, k in numbers.items())
        foot = f'<p class="note">Notes (superscripts in the table):</p><ol class="note">{items}</ol>'
    return (
        f"<p>Selector <code>{_esc(res.first_selector)}</code> at each setting's largest subject count; mean over "
        f"repeats and draws. EER 0.5 and min Cllr 1 bit = chance; linkability D↔sys 0 = unlinkable.{chance}{ci} "
        f"A metric that cannot be computed is shown as <i>undefined</i> with the reason in the notes.</p>"
        + _table(["anonymizer", "setting", "subjects", "recognizer", "scenario",
                  *[METRIC_LABELS.get(x, x) for x in present]], rows, num_from=5)  # fmt: skip
        + foot
        + _cv_html(res)
    )


def _data_notes(res: _Results) -> str:
    """What the report says about the data: a fixed enrolment/test split and the VoicePrivacy scenario names."""
    info = _data_info(res)
    out = []
    if info.get("enrolment") == "role":
        out.append("Enrolment and test follow the data's <code>role</code> column: each evaluation subject is "
                   "enrolled on its <i>enrolment</i> samples (the gallery) and probed with its <i>trial</i> samples "
                   "(e.g. VoicePrivacy's enrolls and trials lists), not split at random by rates.enrolment; "
                   "subjects without both kinds of sample are attacker training data only.")
    if res.scenario_names:
        names = ", ".join(f"{v} = <code>{_esc(k)}</code>" for k, v in res.scenario_names.items())
        out.append(f"The data come from a VoicePrivacy-style directory, so attacker scenarios are named as in the "
                   f"VoicePrivacy Challenge: {names} (bioanon's ids in brackets and in the result files).")
    return "".join(f'<p class="note">{t}</p>' for t in out)


def _breakdown_html(res: _Results) -> str:
    """EER and min Cllr per group (``[report] breakdown``): one row per setting × recognizer × scenario, one
    column per group, each cell ``EER / min Cllr``."""
    b = res.breakdown
    b = b[(b["selector"] == res.first_selector) & b["metric"].isin(["eer", "min_cllr"])]
    b = _largest_n(b, _SETTING)
    if b.empty:
        return '<p class="note">No per-group results.</p>'
    keys = _SETTING + ["n_subjects", "recognizer", "scenario", "by", "group", "metric"]
    agg = b.groupby(keys, dropna=False, sort=False)["value"].mean().reset_index()
    groups = sorted(_unique(zip(agg["by"], agg["group"])),
                    key=lambda g: ([*_unique(agg["by"])].index(g[0]), g[1]))  # fmt: skip
    rows = []
    for anon, idx, setting, n, rec, scen, cell in _cells(res, agg):
        h = cell.set_index(["by", "group", "metric"])["value"]
        cells = [f"{_fmt(h.get((by, grp, 'eer')))} / {_fmt(h.get((by, grp, 'min_cllr')))}" for by, grp in groups]
        rows.append((anon, setting or "(default)", n, rec, res.scenario(scen), *cells))
    notes = _unique(b.loc[b["note"] != "", "note"]) if "note" in b.columns else []
    return (
        f"<p>EER / min Cllr (bits) per group of probes, for selector <code>{_esc(res.first_selector)}</code> at "
        f"each setting's largest subject count, mean over repeats and draws; chance: EER 0.5, min Cllr 1. A group's "
        f"trials are its probes against the enrolled subjects of the same group (for sex: same-sex trials, as in "
        f"VoicePrivacy's per-sex trial lists); every such pair is scored, not only the pairs of a trial list. "
        f"Groups: the values of the attribute columns {', '.join(f'<code>{_esc(c)}</code>' for c in _unique(b['by']))}"
        f" (<code>[report] breakdown</code>).</p>"
        + _table(["anonymizer", "setting", "subjects", "recognizer", "scenario",
                  *[f"{by} = {grp}" for by, grp in groups]], rows, num_from=5)  # fmt: skip
        + _notes([f"– : {t}" for t in notes])
    )


_CV_STATS = ("cv_balanced_accuracy", "cv_balanced_accuracy_std", "cv_balanced_accuracy_min",
             "cv_balanced_accuracy_max")


def _cv_html(res: _Results) -> str:
    """The spread of the per-fold balanced accuracies of cross-validated recognizers (``cv_folds``), first
    selector at the largest subject count, mean over repeats and draws; "" when no recognizer used CV."""
    m = res.metrics
    df = m[(m["selector"] == res.first_selector) & m["metric"].isin(_CV_STATS)]
    if df.empty:
        return ""
    keys = _SETTING + ["n_subjects", "recognizer", "scenario"]
    agg = _mean_runs(_largest_n(df, _SETTING), keys + ["metric"])
    rows = []
    for (anon, idx, setting, n, rec, scen), g in _setting_order(res, agg).groupby(keys, dropna=False, sort=False):
        v = g.set_index("metric")["value"]
        rows.append((anon, setting or "(default)", n, rec, scen, *[v.get(x, float("nan")) for x in _CV_STATS]))
    return ('<p class="note">Cross-validated recognizers (<code>cv_folds</code>, SEBA): balanced accuracy on '
            "each held-out fold of the classifier's training data (the enrolment gallery; the labelled training "
            "set for attribute classifiers); mean, std, min and max over folds.</p>"
            + _table(["anonymizer", "setting", "subjects", "recognizer", "scenario", "CV mean", "CV std",
                      "CV min", "CV max"], rows, num_from=5))


def _fmt_conf(c: Any) -> str:
    try:
        c = float(c)
    except (TypeError, ValueError):
        return "–"
    return f"{c * 100:g} %" if c <= 1 else f"{c:g} %"


def _build_html(res: _Results, hl: pd.DataFrame, parts: dict[str, Any]) -> str:
    rev, rev_t, rev_figs = parts["reversibility"]
    sections = [
        ("headline", "Headline: worst-case privacy", _headline_html(res, hl) + _data_notes(res)),
        ("warnings", "Sanity warnings and failures", _warnings_html(res)),
        ("auc", "Privacy–utility AUC", _auc_html(res)),
        ("utility", "Utility", _utility_html(res)),
        ("tradeoff", "Privacy–utility curves",
         (_notes(parts["tradeoff_notes"]) + _figures(parts["tradeoff"])) if parts["tradeoff"]
         else '<p class="note">No privacy–utility points (no utility measures configured).</p>'),
        ("subjects", "Accuracy against subject count",
         _notes(parts["subjects_notes"]) + (_figures(parts["subjects"]) or '<p class="note">No top-1 results.</p>')),
        ("scenarios", "Accuracy per scenario and recognizer",
         _notes(parts["scenarios_notes"]) + (_figures(parts["scenarios"]) or '<p class="note">No top-1 results.</p>')),
    ]  # fmt: skip
    if not rev.empty:
        sections.append(("reversibility", "Reversibility", _reversibility_html(rev, rev_t, rev_figs, res)))
    if not res.protocol.empty:
        sections.append(("protocol", "The paper's own protocol", _protocol_html(res)))
    sections += [
        ("metrics", "Metrics", _metrics_html(res)),
        *([("breakdown", "EER and min Cllr per group", _breakdown_html(res))] if not res.breakdown.empty else []),
        ("config", "Resolved config",
         '<p class="note">Absolute paths are shortened to their last part (…/name); config.json in the results '
         'folder has them in full.</p>'
         f"<pre>{_esc(json.dumps(_shareable(res.config), indent=2, ensure_ascii=False, default=str))}</pre>"),
    ]  # fmt: skip
    nav = "<nav>" + "".join(f'<a href="#{sid}">{_esc(t)}</a>' for sid, t, _ in sections) + "</nav>"
    name = res.config.get("name") or res.run_dir.name
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>bioanon report — {_esc(name)}</title><style>{_CSS}</style></head><body><main>"
        + _header(res) + nav + "".join(_section(sid, t, body) for sid, t, body in sections)
        + '<footer class="note">Generated by bioanon.report.</footer></main></body></html>\n'
    )


def render_report(run_dir: str | os.PathLike) -> Path:
    """Render ``RUN_DIR/report.html`` and ``RUN_DIR/plots/*.png`` from the stored results; returns the HTML path.

    The HTML is one self-contained file to share: the plots are inline SVG, it names no other file and no
    absolute path (paths in the config, warnings and failures are shortened to their last part). The PNGs are
    the same plots for slides and papers; the HTML does not use them. Only ``metrics.parquet`` is required
    (:class:`ResultsNotFoundError` names it when missing); without utility, trade-off or AUC files those sections
    say so. Every file is written atomically (temp file + ``os.replace``), and PNGs of an earlier rendering that
    this one did not write are removed.
    """
    res = _load(run_dir)
    plot_dir = res.run_dir / "plots"
    plot_dir.mkdir(exist_ok=True)
    hl = _headline(res)
    parts = _all_plots(res)
    written: set[str] = set()
    count = 0

    def embed(figs: list[Plot]) -> list[dict]:
        """Save each figure's PNG, inline its SVG, and let the figure go."""
        nonlocal count
        out = []
        for f in figs:
            count += 1
            name = f"{f.kind}_{count:02d}_{f.slug}.png"
            _save_png(f.figure, plot_dir / name)
            written.add(name)
            out.append({"svg": _inline_svg(f.figure, f"plot{count}", f.caption), "caption": f.caption})
        return out

    for kind in ("tradeoff", "subjects", "scenarios"):
        parts[kind] = embed(parts[kind])
    rev, thresholds, rev_figs = parts["reversibility"]
    parts["reversibility"] = (rev, thresholds, embed(rev_figs))
    out = res.run_dir / "report.html"
    atomic_write_text(out, _build_html(res, hl, parts))
    _readable(out)
    for p in plot_dir.glob("*.png"):
        if p.name.startswith(PLOT_PREFIXES) and p.name not in written:
            p.unlink(missing_ok=True)
    return out

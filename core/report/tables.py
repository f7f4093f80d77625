"""The report's tables: the headline (worst case per anonymizer setting), subject-count curves, trade-off
series with their AUC, reversibility, and the number formatting the tables and figures share.

Nothing is recomputed from scores: these only aggregate the stored metrics (means over repeats and draws, the
maximum over recognizers × scenarios); the definitions come from :mod:`bioanon.evaluation.scenarios`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import metrics as _metrics
from ..evaluation.scenarios import CLEAR, DEANON, NAIVE, NOT_CONVERGED, attack_rows, display_key, worst_case
from .results import _SETTING, _load, _order, _Results, _unique

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


REVERSIBILITY_THRESHOLDS = (0.1, 0.5)
SUMMARY_METRICS = ("top1", "eer", "min_cllr", "linkability")

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
        pairs = sorted(_unique(zip(g["recognizer"], g["scenario"], strict=True)),
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
    clear = agg[agg["scenario"] == CLEAR].groupby(keys, dropna=False, sort=False)["value"].max().rename("clear")
    chance = top.groupby(keys, dropna=False, sort=False)["chance"].mean().rename("chance_mean")
    out = worst.drop(columns=["chance"]).merge(clear.reset_index(), on=keys, how="left")
    out = out.merge(chance.reset_index(), on=keys, how="left").rename(columns={"chance_mean": "chance"})
    fallback = 1.0 / out["n_subjects"].astype(float)
    out["chance"] = out["chance"].where(out["chance"].notna(), fallback)
    out["privacy"] = (
        np.atleast_1d(_metrics.privacy_level(out["value"], out["clear"], out["chance"])) if len(out) else []
    )
    out["metric"] = hm
    # plain top-1 accuracy of the same attack and its chance (the majority-class rate for an attribute)
    plain = _mean_runs(_first_selector_top(res, "top1"), keys + ["recognizer", "scenario"])
    plain = plain[keys + ["recognizer", "scenario", "value", "chance"]].rename(
        columns={"value": "top1", "chance": "majority"}
    )
    out = (
        out.merge(plain, on=keys + ["recognizer", "scenario"], how="left")
        if len(plain)
        else out.assign(top1=np.nan, majority=np.nan)
    )
    out = _setting_order(res, out)
    return out[cols].reset_index(drop=True)


def headline(run_dir: str | os.PathLike[str]) -> pd.DataFrame:
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


def _tradeoff_series(tr: pd.DataFrame, auc: pd.DataFrame, anonymizers: Sequence[str]) -> list[dict[str, Any]]:
    """The curves of one privacy–utility figure (one measure × selector × n_subjects).

    Per anonymizer and de-anonymization variant: the points, their labels, the staircase envelope
    (:func:`bioanon.metrics.tradeoff_envelope`), the stored AUC and whether the variant is the counted one
    (``auc.parquet``'s ``counted``; without an AUC row, the variant with the lower
    :func:`~bioanon.metrics.tradeoff_auc`).
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
            lowest = min(series, key=lambda s: math.inf if math.isnan(s["auc"]) else s["auc"])
            for s in series:
                s["counted"] = s is lowest
        elif not any(s["counted"] for s in series):  # AUC rows without a counted flag set: the lower stored one
            lowest = min(series, key=lambda s: math.inf if math.isnan(s["auc"]) else s["auc"])
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
    # settings whose de-anonymizer did not learn (in some repeat): R would only measure the failed training
    failed = top[(top["scenario"] == DEANON) & top["note"].astype(str).str.startswith(NOT_CONVERGED)]
    unjudged = {
        (a, i, n) for a, i, n in zip(failed["anonymizer"], failed["setting_index"], failed["n_subjects"], strict=True)
    }
    rows = []
    for (anon, idx, setting, n), g in agg.groupby(_SETTING + ["n_subjects"], dropna=False, sort=False):
        w = g.pivot_table(index="recognizer", columns="scenario", values="value", aggfunc="mean")
        if not {DEANON, NAIVE, CLEAR} <= set(w.columns):
            continue
        w = w[[DEANON, NAIVE, CLEAR]].dropna()
        if w.empty:
            continue
        r, cat = _metrics.reversibility(w[DEANON], w[NAIVE], w[CLEAR], thresholds)
        if (anon, idx, n) in unjudged:
            cat = f"not judged: {NOT_CONVERGED}"
        rows.append((anon, setting, idx, n, r, cat, len(w)))
    return _setting_order(res, pd.DataFrame(rows, columns=cols)).reset_index(drop=True)


def _reversibility_thresholds(res: _Results) -> tuple[float, float]:
    report = res.config.get("report")
    rep = report if isinstance(report, dict) else {}
    t = rep.get("reversibility_thresholds")
    try:
        if t is not None and len(t) == 2:
            return float(t[0]), float(t[1])
    except (TypeError, ValueError):
        pass
    return REVERSIBILITY_THRESHOLDS


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


def pair_utility(
    hl: pd.DataFrame, tradeoff: pd.DataFrame | None, *, value: str = "value", clear: str = "clear"
) -> pd.DataFrame:
    """Each setting's worst-case privacy paired with its utility: ``hl`` (one row per anonymizer setting with the
    worst-case accuracy in column ``value``, its clear level in ``clear`` and ``chance``) with ``privacy``
    (:func:`bioanon.metrics.privacy_level`: 0 = clear level, 1 = chance) and one ``utility[MEASURE]`` column per
    utility measure: the normalized utility (0 = floor, 1 = clear) of the trade-off points of the headline
    selection (the first selector of ``tradeoff`` at its largest subject count; utility does not depend on the
    de-anonymization variant). Without trade-off points there are no utility columns. The report's opening
    table and :meth:`bioanon.EvaluationResult.summary` both read this."""
    out = hl.copy()
    if len(out):
        out["privacy"] = np.atleast_1d(
            _metrics.privacy_level(
                out[value].to_numpy(float), out[clear].to_numpy(float), out["chance"].to_numpy(float)
            )
        )
    else:
        out["privacy"] = []
    if tradeoff is None or not len(tradeoff) or not len(out) or tradeoff["utility"].isna().all():
        return out
    sel = out["selector"].iloc[0] if "selector" in out.columns else tradeoff["selector"].iloc[0]
    t = tradeoff[tradeoff["selector"] == sel]
    if t.empty:
        return out
    t = t[(t["n_subjects"] == t["n_subjects"].max()) & ~t["deanon"].astype(bool)]
    keys = ["anonymizer", "setting_index"]
    util = t.pivot_table(index=keys, columns="measure", values="utility", sort=False, dropna=False)
    util.columns = [f"utility[{m}]" for m in util.columns]
    return out.merge(util.reset_index(), on=keys, how="left")


def _pairing(res: _Results) -> pd.DataFrame:
    """The report's opening table: the headline (:func:`headline`) with each setting's utility
    (:func:`pair_utility`)."""
    return pair_utility(_headline(res), res.tradeoff)

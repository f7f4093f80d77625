"""Rich display in notebooks (``_repr_html_`` of tables, methods and results) and the result views
:meth:`EvaluationResult.summary`, :meth:`~EvaluationResult.curves`, :meth:`~EvaluationResult.plot` and
:meth:`~EvaluationResult.plots`.

The figures are the report's own (:func:`bioanon.report.plots`), drawn from the tables in memory, plus the
headline plot; all on :class:`matplotlib.figure.Figure` directly (never pyplot), so nothing shows twice in a
notebook and no global figure state is touched.
"""

from __future__ import annotations

import html
import math
from typing import Any

_STYLE = (
    "<style>.bioanon-repr table{border-collapse:collapse;font-size:12px}"
    ".bioanon-repr td,.bioanon-repr th{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}"
    ".bioanon-repr .muted{color:#666}</style>"
)


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _rows(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "–" if math.isnan(v) else f"{v:.3f}"
    return str(v)


# ------------------------------------------------------------------------------------------------- tables


def table_html(table: Any, preview: int = 5) -> str:
    """A sample table: counts, payloads with their shapes, attributes, lineage and the first rows."""
    import numpy as np

    pays = []
    for name in table.payload_names:
        kind = table.arrow.schema.field(name).type
        shape = getattr(kind, "shape", None)
        pays.append(f"{name} {list(shape)}" if shape is not None else f"{name} (variable length)")
    n = min(preview, len(table))
    head = table.arrow.slice(0, n)
    cols = ["sample_id", "subject"] + [f"attr.{a}" for a in table.attribute_names]
    rows = [[_fmt(head.column(c)[i].as_py()) for c in cols] for i in range(n)]
    steps = [s.get("step", "?") for s in table.lineage]
    subjects = len(np.unique(table.subjects)) if len(table) else 0
    return (
        f'{_STYLE}<div class="bioanon-repr"><b>SampleTable</b>: {len(table)} samples, {subjects} subjects'
        f"<br>payloads: {_esc(', '.join(pays) or '–')}"
        f"<br>attributes: {_esc(', '.join(table.attribute_names) or '–')}"
        f"<br>lineage: {_esc(' → '.join(map(str, steps)) or 'as loaded')}"
        f"{_rows(cols, rows)}"
        f'<span class="muted">first {n} of {len(table)} rows</span></div>'
    )


# ------------------------------------------------------------------------------------------------ methods


def method_html(method: Any) -> str:
    """A method instance: id, kind, summary and every parameter with its value, default and help."""
    rows = []
    for spec in method.param_specs():
        value = getattr(method, spec["name"])
        mark = "" if value == spec["default"] else " (set)"
        rows.append([spec["name"], f"{value!r}{mark}", spec["type"], spec["help"]])
    return (
        f'{_STYLE}<div class="bioanon-repr"><b>{_esc(method.id)}</b> '
        f'<span class="muted">{_esc(method.kind)} · {_esc(method.trait)} · '
        f"{_esc(method.distribution or 'bioanon')}</span><br>{_esc(method.summary())}"
        f"{_rows(['parameter', 'value', 'type', 'help'], rows)}</div>"
    )


# ------------------------------------------------------------------------------------------------ results


def summary(result: Any) -> Any:
    """One row per anonymizer setting: the worst case over recognizers and scenarios (headline metric, CI,
    who achieved it) beside the clear level and chance, its privacy level (0 = clear, 1 = chance) and the
    normalized utility of each measure (1 = clear, 0 = floor)."""
    import pandas as pd

    from .report.tables import pair_utility

    hl = result.headline()
    if hl is None or len(hl) == 0:
        return pd.DataFrame()
    cols = ["anonymizer", "setting", "metric", "worst_accuracy", "ci_low", "ci_high", "worst_recognizer",
            "worst_scenario", "clear_accuracy", "chance"]  # fmt: skip
    out = pair_utility(
        hl[[*cols, "setting_index", "selector"]], result.tradeoff, value="worst_accuracy", clear="clear_accuracy"
    )
    return out.drop(columns=["setting_index", "selector"]).reset_index(drop=True)


def curves(result: Any) -> Any:
    """The privacy–utility curves the AUCs are computed from: for the first selector at its largest subject
    count, one point per anonymizer setting × utility measure × de-anonymization, in sweep order."""
    tr = result.tradeoff
    if tr is None or len(tr) == 0:
        return tr
    sel = tr.selector.iloc[0]
    t = tr[tr.selector == sel]
    t = t[t.n_subjects == t.n_subjects.max()]
    cols = [
        "anonymizer",
        "setting",
        "setting_index",
        "measure",
        "deanon",
        "privacy",
        "utility",
        "accuracy",
        "clear_accuracy",
        "chance",
        "worst_recognizer",
        "worst_scenario",
        "selector",
        "n_subjects",
    ]
    return t.sort_values(["anonymizer", "measure", "deanon", "setting_index"], kind="stable")[cols].reset_index(
        drop=True
    )


def frames(result: Any) -> dict[str, Any]:
    """The result's tables in the form :func:`bioanon.report.plots` reads."""
    out = {"metrics": result.metrics, "utility": result.utility, "tradeoff": result.tradeoff, "auc": result.auc}
    if result.protocol is not None and len(result.protocol):
        out["protocol"] = result.protocol
    return out


def plots(result: Any, kinds: Any = None) -> list[Any]:
    """The report's figures of the result (:class:`bioanon.report.Plot`: a Figure with its caption), drawn
    from the tables in memory; ``kinds`` among ``overview``, ``tradeoff``, ``subjects``, ``scenarios``,
    ``reversibility``."""
    from .report import plots as report_plots

    return report_plots(frames(result), kinds)


def plot(result: Any, kind: str = "tradeoff") -> Any:
    """One matplotlib Figure: ``"headline"`` (the worst-case attack accuracy per setting, with the clear level
    and chance), or the first of the report's figures of that kind (``"tradeoff"``: privacy–utility curves with
    their AUCs; ``"subjects"``, ``"scenarios"``, ``"reversibility"``)."""
    from matplotlib.figure import Figure

    from .errors import BioanonError
    from .report import PLOT_KINDS

    if kind in PLOT_KINDS:
        found = plots(result, [kind])
        if not found:
            hint = (
                " (the evaluation has no utility measure; plot('headline') shows the attacks alone)"
                if kind == "tradeoff"
                else ""
            )
            raise BioanonError(f"no {kind} plot for this result{hint}")
        return found[0].figure
    if kind == "headline":
        hl = result.headline()
        if hl is None or len(hl) == 0:
            raise BioanonError("no attack results to plot")
        fig = Figure(figsize=(6.4, 3.6), layout="constrained")
        ax = fig.subplots()
        labels = [f"{a}\n{s}" for a, s in zip(hl.anonymizer, hl.setting, strict=True)]
        x = range(len(hl))
        ax.errorbar(
            x,
            hl.worst_accuracy,
            yerr=[hl.worst_accuracy - hl.ci_low, hl.ci_high - hl.worst_accuracy],
            fmt="o",
            label="worst case over attackers",
        )
        ax.plot(x, hl.clear_accuracy, "_", markersize=18, color="black", label="clear level")
        ax.plot(x, hl.chance, "_", markersize=18, color="grey", label="chance")
        ax.set_xticks(list(x), labels, fontsize="small")
        ax.set(ylabel=hl.metric.iloc[0], ylim=(0, 1.05), title="worst-case attack per setting")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize="small")
        return fig
    raise BioanonError(f"unknown plot kind {kind!r}; use 'headline' or one of {', '.join(PLOT_KINDS)}")


def result_html(result: Any) -> str:
    """An evaluation result: where it is, what ran, the summary table and the warnings."""
    s = summary(result)
    table = s.to_html(index=False, float_format=lambda v: f"{v:.3f}", border=0) if len(s) else "<i>no results</i>"
    where = _esc(result.run_dir) if result.run_dir is not None else "not written"
    report = (
        f'<br>report: <a href="{_esc(result.report_path.as_uri())}">{_esc(result.report_path.name)}</a>'
        if result.report_path is not None
        else ""
    )
    warn = "".join(f"<li>{_esc(w)}</li>" for w in result.warnings[:10])
    fails = f"<br><b>{len(result.failures)} failed tasks</b>" if result.failures else ""
    return (
        f'{_STYLE}<div class="bioanon-repr"><b>EvaluationResult</b> · {result.executed} tasks computed, '
        f"{result.cached} reused from the cache{fails}<br>results: {where}{report}"
        f"{table}{'<ul>' + warn + '</ul>' if warn else ''}</div>"
    )

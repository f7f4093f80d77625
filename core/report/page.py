"""The report's HTML page: one self-contained ``report.html`` (plots inline as SVG, no other file and no
absolute path referenced, laid out for desktops and phones), written by :func:`render_report` with the same
plots as ``plots/*.png``.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..fileio import atomic_write, atomic_write_text
from .figures import _RC, PLOT_PREFIXES, Plot, _all_plots, _readable, _save_png
from .results import _SETTING, _data_info, _load, _Results, _scrub, _shareable, _unique
from .tables import (
    METRIC_LABELS,
    SUMMARY_METRICS,
    _cells,
    _fmt,
    _fmt_ci,
    _isnan,
    _largest_n,
    _mean_runs,
    _pairing,
    _setting_order,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure


# ------------------------------------------------------------------------------------------------------ HTML


class _Raw(str):
    """Already-escaped HTML."""


def _esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _cell(v: Any) -> str:
    if isinstance(v, _Raw):
        return v
    if isinstance(v, str):
        return _esc(v)
    return _esc(_fmt(v))


def _table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], *, num_from: int = 0, cls: str = "", cards: bool = False
) -> str:
    """An HTML table in a box that scrolls sideways when wider than the page; ``cards``: on a phone each row is
    shown as a card of "header: value" lines instead (no sideways swipe)."""
    # long method ids in headers may break after "." and "_" (e.g. utility: any.cosine_similarity)
    head = "".join("<th>" + re.sub(r"([._])", r"\1<wbr>", _esc(h)) + "</th>" for h in headers)
    labels = [f' data-label="{_esc(h)}"' if cards else "" for h in headers]
    body = []
    for row in rows:
        tds = "".join(
            f'<td class="num"{labels[i]}>{_cell(v)}</td>' if i >= num_from and num_from
            else f"<td{labels[i]}>{_cell(v)}</td>"
            for i, v in enumerate(row)
        )  # fmt: skip
        body.append(f"<tr>{tds}</tr>")
    c = f' class="{_esc(" ".join(x for x in (cls, "cards" if cards else "") if x))}"' if cls or cards else ""
    # wide tables scroll inside their own box instead of widening the page (phones)
    return f'<div class="scroll"><table{c}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _figures(figs: list[dict[str, Any]]) -> str:
    """Figures with their inline SVGs (already safe markup: the desktop one and, shown instead on a phone, the
    narrow one) and caption; a figure of a single point is its sentence instead."""
    out = []
    for f in figs:
        if f.get("single"):
            out.append(f'<p class="single">{_esc(f["single"])}</p>')
            continue
        narrow = f'<div class="plot narrow">{f["svg_narrow"]}</div>' if f.get("svg_narrow") else ""
        wide = "plot wide" if narrow else "plot"
        out.append(f'<figure><div class="{wide}">{f["svg"]}</div>{narrow}'
                   f'<figcaption>{_esc(f["caption"])}</figcaption></figure>')  # fmt: skip
    return "".join(out)


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
table.headline td:nth-child(4){white-space:normal}
.single{background:#fff;border:1px solid #d8dee4;border-left:4px solid #8c959f;padding:.5rem .8rem}
.plot.narrow{display:none}
@media (max-width:640px){main{padding:1rem .75rem 3rem}h1{font-size:1.35rem}h2{font-size:1.15rem}
figure{padding:.3rem;margin:.8rem 0}th,td{padding:.22rem .4rem}
.plot.wide{display:none}.plot.narrow{display:block}
table.cards,table.cards tbody,table.cards tr,table.cards td{display:block;width:100%}
table.cards thead{display:none}table.cards{background:none}
table.cards tr{background:#fff;border:1px solid #d8dee4;border-radius:6px;margin:0 0 .6rem;padding:.3rem .5rem}
table.cards tbody tr:nth-child(even){background:#fff}
table.cards td{overflow:hidden;border:0;border-bottom:1px solid #eef1f4;padding:.12rem 0;white-space:normal;
text-align:right;overflow-wrap:anywhere}
table.cards td:last-child{border-bottom:0}
table.cards td::before{content:attr(data-label);float:left;max-width:55%;margin-right:.6rem;text-align:left;
color:#57606a;font-size:.85em;line-height:1.6}
table.cards td:first-child,table.cards td:nth-child(2){display:inline-block;width:auto;margin-right:.5rem;
font-weight:700;text-align:left;border:0}
table.cards td:first-child::before,table.cards td:nth-child(2)::before{content:none}}
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
        extra = ", ".join(
            str(x)
            for x in (
                d.get("name"),
                f"{d['memory_gb']} GB" if d.get("memory_gb") else None,
                f"torch {d['torch']}" if d.get("torch") else None,
            )
            if x
        )
        parts.append(f"{d.get('device', '?')} ({extra})" if extra else str(d.get("device", "?")))
    return "; ".join(parts) + f", asked: {record.get('requested', 'auto')}"


def _data_sets(config: dict[str, Any]) -> list[tuple[str, str]]:
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
    attributes = att.get("attributes")
    maps = attributes if isinstance(attributes, dict) else {}
    for col, m in maps.items():
        to = m.get("to", col) if isinstance(m, dict) else m
        values = m.get("values") if isinstance(m, dict) else None
        extra.append(f"{col} → {to}" + (" (values mapped)" if values else ""))
    return [
        ("data (background, evaluation)", name(ds)),
        ("attacker data (training, database)", name(att) + (f"; {', '.join(extra)}" if extra else "")),
    ]


def _header(res: _Results) -> str:
    env = res.environment
    name = res.config.get("name") or res.run_dir.name
    plugins_ = env.get("plugins")
    plugins = plugins_ if isinstance(plugins_, dict) else {}
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

    def row(items: Iterable[tuple[str, Any]]) -> str:
        return "".join(f"<span><b>{_esc(k)}</b> {_esc(_scrub(v))}</span>" for k, v in items)

    return (
        f"<header><h1>bioanon report — {_esc(name)}</h1>"
        f'<p class="meta">{row(meta)}</p><p class="meta">{row(_data_sets(res.config))}</p>'
        f'<p class="meta">{row(vers)}</p>'
        f'<p class="meta"><b>results folder</b> {_esc(res.run_dir.name)}</p>{_notes(res.notes)}</header>'
    )


def _headline_html(res: _Results, hl: pd.DataFrame, figs: list[dict[str, Any]]) -> str:
    """The opening table: per anonymizer setting the worst case with its CI and who achieved it, its privacy level
    and its utility (``hl`` is :func:`~bioanon.report.tables._pairing`), and the overview plot ``figs``."""
    if hl.empty:
        return (
            f'<p class="note">No {METRIC_LABELS.get(res.headline_metric, res.headline_metric)} results for the '
            f"first selector; no headline.</p>"
        )
    attr = res.attribute
    ucols = [c for c in hl.columns if str(c).startswith("utility[")]
    uvals = hl[ucols].to_numpy(float) if ucols else np.empty((len(hl), 0))
    rows = []
    for i, r in enumerate(hl.itertuples(index=False)):
        big = _Raw(
            f'<span class="big">{_esc(_fmt(r.value))}</span>'
            + (
                f' <span class="dim">[{_esc(_fmt(r.ci_low))}, {_esc(_fmt(r.ci_high))}]</span>'
                if not (_isnan(r.ci_low) or _isnan(r.ci_high))
                else ""
            )
        )
        extra = (r.top1, r.majority) if attr else ()
        rows.append(
            (
                r.anonymizer,
                r.setting or "(default)",
                big,
                f"{r.recognizer} / {res.scenario(r.scenario)}",
                r.privacy,
                *uvals[i],
                r.clear,
                r.chance,
                *extra,
                r.n_subjects,
                r.n_repeats,
            )
        )
    common = (
        f"the highest value over every recognizer × attacker scenario (clear excluded, de-anonymization included), "
        f"each averaged over repeats and draws; selector <code>{_esc(res.first_selector)}</code> at its largest "
        f"subject count. Beside it the clear level (worst case on clear data, same selection) and chance; privacy "
        f"x = 1 − clip((A − c)/(A_clear − c), 0, 1) is 0 at the clear level and 1 at chance."
    )
    uheads = [f"utility: {str(c)[len('utility[') : -1]}" for c in ucols]
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
        heads = [
            "worst-case balanced acc. [CI]",
            "achieved by (recognizer / scenario)",
            "privacy x",
            *uheads,
            "clear level",
            "uniform chance",
            "accuracy (same attack)",
            "majority-class rate",
        ]
    else:
        intro = (
            f"<p>Worst-case top-1 re-identification accuracy per anonymizer setting: {common} Lower accuracy = "
            f"more privacy.</p>"
        )
        heads = [
            "worst-case top-1 [CI]",
            "achieved by (recognizer / scenario)",
            "privacy x",
            *uheads,
            "clear level",
            "chance",
        ]
    if ucols:
        intro += (
            "<p>Utility: the normalized utility y = (U − floor)/(clear − floor) of each measure, 1 = as useful as "
            'clear data, 0 = the floor (mean over repeats; details in <a href="#utility">Utility</a>).</p>'
        )
    else:
        intro += '<p class="note">No utility measures in this run: the table shows privacy alone.</p>'
    what = "attribute inference" if attr else "re-identification"
    lead = (
        f"<p>Per anonymizer setting: the strongest {what} attack found (its worst case, with CI and who achieved "
        f"it; lower = more private) beside the utility the setting keeps (1 = as useful as clear data).</p>"
        if ucols
        else f"<p>Per anonymizer setting: the strongest {what} attack found (its worst case, with CI and who "
        f"achieved it; lower = more private).</p>"
    )
    return (
        lead
        + _table(
            ["anonymizer", "setting", *heads, "subjects", "repeats"], rows, num_from=2, cls="headline", cards=True
        )  # fmt: skip
        + _figures(figs)
        + intro
        + _notes(comparator_notes(res.metrics))
    )


def comparator_notes(metrics: pd.DataFrame) -> list[str]:
    """One line per anonymizer whose protection declared a template comparator that recognizers used (the
    black-box attacker; :class:`bioanon.methods.Comparator`): which comparator, which recognizers and scenarios."""
    if "comparator" not in metrics.columns:
        return []
    used = metrics[metrics["comparator"].fillna("").astype(str) != ""]
    out = []
    for (anon, cmp), g in used.groupby(["anonymizer", "comparator"], sort=False):
        pairs = ", ".join(
            f"{r} ({', '.join(dict.fromkeys(h.scenario))})" for r, h in g.groupby("recognizer", sort=False)
        )
        out.append(
            f"Comparator: the templates of {anon} were compared with its declared comparator {cmp!r} by "
            f"{pairs}; everything else used the recognizer's own comparison."
        )
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
        + _table(
            [
                "anonymizer",
                "selector",
                "subjects",
                "measure",
                "AUC without de-anon.",
                "AUC with de-anon.",
                "counted AUC",
            ],
            rows,
            num_from=4,
        )  # fmt: skip
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
        + _table(
            ["anonymizer", "setting", "measure", "value [CI]", "clear", "floor", "normalized y", "repeats"],
            rows,
            num_from=3,
        )  # fmt: skip
    )


def _protocol_html(res: _Results) -> str:
    p = res.protocol
    keep = [
        "attribute_accuracy",
        "attribute_accuracy_clear",
        "attribute_chance",
        "mixture",
        "mixture_clear",
        "top1_mixture",
        "top5_mixture",
        "kl_from_uniform",
        "kl_from_uniform_clear",
    ]
    p = p[p.metric.isin(keep)]
    t = p.groupby(_SETTING + ["metric"], dropna=False, sort=False)["value"].mean().unstack("metric").reset_index()
    t = _setting_order(res, t)
    cols = [c for c in keep if c in t.columns]
    rows = [(r["anonymizer"], r["setting"] or "(default)", *[r[c] for c in cols]) for _, r in t.iterrows()]
    attribute = (res.config.get("report") or {}).get("paper_protocol", "")
    return (
        f"<p>The evaluation protocol of Chen et al., <i>Model-Agnostic Utility-Preserving Biometric Information "
        f"Anonymization</i> (2024), §5.1.3, on the evaluation "
        f"set, beside the strong attackers above: accuracy on the attribute of interest "
        f"<code>{_esc(attribute)}</code> of a random forest trained on original data and applied to anonymized "
        f"data, and the mixture level 1 − S(T(D)) (top-k mixture, KL of the posteriors from a uniform guess) of an "
        f"identity classifier trained on original data. Mean over repeats. A high mixture here with a high "
        f"worst-case accuracy above is the false sense of privacy the strong evaluation exposes.</p>"
        + _table(["anonymizer", "setting"] + [c.replace("_", " ") for c in cols], rows, num_from=2)
    )


def _reversibility_html(rev: pd.DataFrame, t: tuple[float, float], figs: list[dict[str, Any]], res: _Results) -> str:
    rows = [(r.anonymizer, r.setting or "(default)", r.R, r.category, r.n_recognizers, r.n_subjects)
            for r in rev.itertuples(index=False)]  # fmt: skip
    return (
        f"<p>R = clip((A_deanon − A_naive)/(A_clear − A_naive), 0, 1), averaged over recognizers (selector "
        f"<code>{_esc(res.first_selector)}</code>, largest subject count). Categories: irreversible (R &lt; "
        f"{_esc(f'{t[0]:g}')}), partially reversible (&lt; {_esc(f'{t[1]:g}')}), highly reversible (otherwise); these "
        f"thresholds are bioanon's own choice and configurable (<code>report.reversibility_thresholds</code>). A "
        f"setting whose de-anonymizer did not learn (its held-out reconstruction no better than the anonymized "
        f"input or the mean) is not judged: a failed training says nothing about reversibility.</p>"
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
        ci = (
            f" CIs: {_esc(_fmt_conf(boot.get('confidence')))} bootstrap over subjects"
            f" ({_esc(boot.get('bootstrap', '–'))} resamples; expanded BCa interval) where available, bounds "
            f"averaged over repeats."
        )
    chance = (
        " Balanced accuracy's chance is uniform (1/number of attribute values), plain top-1 accuracy's the "
        "majority-class rate."
        if res.attribute
        else ""
    )
    foot = ""
    if numbers:
        items = "".join(f'<li value="{k}">{_esc(t)}</li>' for t, k in numbers.items())
        foot = f'<p class="note">Notes (superscripts in the table):</p><ol class="note">{items}</ol>'
    return (
        f"<p>Selector <code>{_esc(res.first_selector)}</code> at each setting's largest subject count; mean over "
        f"repeats and draws. EER 0.5 and min Cllr 1 bit = chance; linkability D↔sys 0 = unlinkable.{chance}{ci} "
        f"A metric that cannot be computed is shown as <i>undefined</i> with the reason in the notes.</p>"
        + _table(
            [
                "anonymizer",
                "setting",
                "subjects",
                "recognizer",
                "scenario",
                *[METRIC_LABELS.get(x, x) for x in present],
            ],
            rows,
            num_from=5,
        )  # fmt: skip
        + foot
        + _cv_html(res)
    )


def _data_notes(res: _Results) -> str:
    """What the report says about the data: a fixed enrolment/test split and the VoicePrivacy scenario names."""
    info = _data_info(res)
    out = []
    if info.get("enrolment") == "role":
        out.append(
            "Enrolment and test follow the data's <code>role</code> column: each evaluation subject is "
            "enrolled on its <i>enrolment</i> samples (the gallery) and probed with its <i>trial</i> samples "
            "(e.g. VoicePrivacy's enrolls and trials lists), not split at random by rates.enrolment; "
            "subjects without both kinds of sample are attacker training data only."
        )
    if res.scenario_names:
        names = ", ".join(f"{v} = <code>{_esc(k)}</code>" for k, v in res.scenario_names.items())
        out.append(
            f"The data come from a VoicePrivacy-style directory, so attacker scenarios are named as in the "
            f"VoicePrivacy Challenge: {names} (bioanon's ids in brackets and in the result files)."
        )
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
    groups = sorted(_unique(zip(agg["by"], agg["group"], strict=True)),
                    key=lambda g: ([*_unique(agg["by"])].index(g[0]), g[1]))  # fmt: skip
    rows = []
    for anon, _idx, setting, n, rec, scen, cell in _cells(res, agg):
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
        + _table(
            ["anonymizer", "setting", "subjects", "recognizer", "scenario", *[f"{by} = {grp}" for by, grp in groups]],
            rows,
            num_from=5,
        )  # fmt: skip
        + _notes([f"– : {t}" for t in notes])
    )


_CV_STATS = ("cv_balanced_accuracy", "cv_balanced_accuracy_std", "cv_balanced_accuracy_min", "cv_balanced_accuracy_max")


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
    for (anon, _idx, setting, n, rec, scen), g in _setting_order(res, agg).groupby(keys, dropna=False, sort=False):
        v = g.set_index("metric")["value"]
        rows.append((anon, setting or "(default)", n, rec, scen, *[v.get(x, float("nan")) for x in _CV_STATS]))
    return (
        '<p class="note">Cross-validated recognizers (<code>cv_folds</code>, SEBA): balanced accuracy on '
        "each held-out fold of the classifier's training data (the enrolment gallery; the labelled training "
        "set for attribute classifiers); mean, std, min and max over folds.</p>"
        + _table(
            ["anonymizer", "setting", "subjects", "recognizer", "scenario", "CV mean", "CV std", "CV min", "CV max"],
            rows,
            num_from=5,
        )
    )


def _fmt_conf(c: Any) -> str:
    try:
        c = float(c)
    except (TypeError, ValueError):
        return "–"
    return f"{c * 100:g} %" if c <= 1 else f"{c:g} %"


def _body(res: _Results, hl: pd.DataFrame, parts: dict[str, Any]) -> str:
    """Everything of the page below its header (navigation, sections, footer): what the results determine, so
    that an unchanged rerun can reuse it (:func:`render_report`)."""
    rev, rev_t, rev_figs = parts["reversibility"]
    sections = [
        ("headline", "Headline: worst-case privacy and utility",
         _headline_html(res, hl, parts["overview"]) + _data_notes(res)),
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
    return (
        nav
        + "".join(_section(sid, t, body) for sid, t, body in sections)
        + '<footer class="note">Generated by bioanon.report.</footer>'
    )


_DIGEST_META = "bioanon-report-inputs"
_END_HEADER, _END_MAIN = "</header>", "</main>"


def _page(res: _Results, body: str, stamp: str) -> str:
    """The whole page: head (with ``stamp``, the digest of what the body was rendered from), header, ``body``."""
    name = res.config.get("name") or res.run_dir.name
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="{_DIGEST_META}" content="{_esc(stamp)}">'
        f"<title>bioanon report — {_esc(name)}</title><style>{_CSS}</style></head><body><main>"
        + _header(res)
        + body
        + f"{_END_MAIN}</body></html>\n"
    )


def _build_html(res: _Results, hl: pd.DataFrame, parts: dict[str, Any], stamp: str = "") -> str:
    return _page(res, _body(res, hl, parts), stamp)


# ------------------------------------------------------------------------------------------- rendering cache

# what the body reads besides environment.json's "data" block (the header, always rendered anew, reads the rest)
_INPUT_FILES = ("metrics.parquet", "utility.parquet", "tradeoff.parquet", "auc.parquet", "protocol.parquet",
                "breakdown.parquet", "config.json", "warnings.json", "failures.json")  # fmt: skip
_SIBLINGS = 50  # run folders beside this one searched for a report of the same inputs (newest first)


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """A digest of the code that renders the body: this package's sources, the scenario definitions, and the
    versions of bioanon and matplotlib."""
    from importlib.metadata import PackageNotFoundError, version

    from .._version import __version__
    from ..evaluation import scenarios

    h = hashlib.sha256(f"bioanon {__version__}".encode())
    try:
        h.update(f" matplotlib {version('matplotlib')}".encode())
    except PackageNotFoundError:  # pragma: no cover - matplotlib is a dependency
        pass
    for src in sorted(Path(__file__).parent.glob("*.py")) + [Path(scenarios.__file__)]:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()


def _inputs_digest(res: _Results) -> str:
    """A digest of everything the report's body is rendered from: the results files, environment.json's
    ``data`` block and the rendering code (:func:`_code_version`). Times, durations and task counts, which
    change with every rerun, are only in the header."""
    h = hashlib.sha256(_code_version().encode())
    for name in _INPUT_FILES:
        h.update(name.encode() + b"\0")
        try:
            with open(res.run_dir / name, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except FileNotFoundError:
            h.update(b"(missing)")
        h.update(b"\0")
    h.update(json.dumps(_data_info(res), sort_keys=True, default=str).encode())
    return h.hexdigest()


def _plot_files(run: Path) -> list[Path]:
    plot_dir = run / "plots"
    if not plot_dir.is_dir():
        return []
    return sorted(p for p in plot_dir.glob("*.png") if p.name.startswith(PLOT_PREFIXES))


def _stamp_of(html_path: Path) -> str:
    """The digest stamp in the head of an earlier report.html; "" when there is none."""
    try:
        with open(html_path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return ""
    m = re.search(rf'<meta name="{_DIGEST_META}" content="([^"]*)">', head)
    return m.group(1) if m else ""


def _reuse(res: _Results, digest: str) -> str | None:
    """The body of an earlier rendering of the same inputs — this folder's report.html, or that of a run folder
    beside it (an unchanged rerun writes a new folder), whose PNGs are then copied here — or None."""
    run = res.run_dir
    candidates = [run]
    try:
        siblings = [p for p in run.parent.iterdir() if p != run and (p / "report.html").is_file()]
    except OSError:
        siblings = []
    siblings.sort(key=lambda p: (p / "report.html").stat().st_mtime, reverse=True)
    for folder in candidates + siblings[:_SIBLINGS]:
        page = folder / "report.html"
        stamp = _stamp_of(page)
        if not stamp.startswith(digest + ";"):
            continue
        pngs = _plot_files(folder)
        if stamp != f"{digest};{len(pngs)}":  # PNGs deleted or added since: render anew
            continue
        try:
            text = page.read_text(encoding="utf-8")
            body = text[text.index(_END_HEADER) + len(_END_HEADER) : text.rindex(_END_MAIN)]
        except (OSError, ValueError):
            continue
        if folder != run:
            plot_dir = run / "plots"
            plot_dir.mkdir(exist_ok=True)
            names = {p.name for p in pngs}
            for p in _plot_files(run):
                if p.name not in names:
                    p.unlink(missing_ok=True)
            for p in pngs:
                data = p.read_bytes()
                atomic_write(plot_dir / p.name, lambda f, data=data: f.write(data))
                _readable(plot_dir / p.name)
        return body
    return None


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
    s = s[s.index("<svg") :]
    s = _SVG_ID.sub(lambda m: f'id="{uid}-{m.group(1)}"', s)
    s = _SVG_REF.sub(lambda m: f"{m.group(1)}{uid}-{m.group(2)}", s)
    s = s.replace('<style type="text/css">*{', f'<style type="text/css">#{uid} *{{', 1)

    def root(m: re.Match[str]) -> str:
        attrs = re.sub(r'\s(width|height)="([0-9.]+)pt"',
                       lambda a: f' {a.group(1)}="{round(float(a.group(2)) * 4 / 3)}"', m.group(1))  # fmt: skip
        return f'<svg id="{uid}" class="plot" role="img" aria-label="{_esc(label)}"{attrs}>'

    return re.sub(r"<svg\b([^>]*)>", root, s, count=1)


def render_report(run_dir: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Render ``RUN_DIR/report.html`` and ``RUN_DIR/plots/*.png`` from the stored results; returns the HTML path.

    The HTML is one self-contained file to share: the plots are inline SVG, it names no other file and no
    absolute path (paths in the config, warnings and failures are shortened to their last part). The PNGs are
    the same plots for slides and papers; the HTML does not use them. Only ``metrics.parquet`` is required
    (:class:`ResultsNotFoundError` names it when missing); without utility, trade-off or AUC files those sections
    say so. Every file is written atomically (temp file + ``os.replace``), and PNGs of an earlier rendering that
    this one did not write are removed.

    Each plot is inline twice: laid out for a desktop and, shown instead on screens up to 640 CSS px, for a phone
    (text at least 10 CSS px); a plot of a single point is a sentence instead. Rendering is cached by content:
    the head of report.html carries a digest of the inputs the body is rendered from (the results files,
    environment.json's ``data`` block and the rendering code); when this folder's report.html, or that of a run
    folder beside it (an unchanged rerun writes a new folder), has the same digest, its body and PNGs are reused
    and only the header (run name, times) is written anew. ``force``: render everything regardless.
    """
    res = _load(run_dir)
    out = res.run_dir / "report.html"
    digest = _inputs_digest(res)
    body = None if force else _reuse(res, digest)
    if body is not None:
        atomic_write_text(out, _page(res, body, f"{digest};{len(_plot_files(res.run_dir))}"))
        _readable(out)
        return out
    plot_dir = res.run_dir / "plots"
    plot_dir.mkdir(exist_ok=True)
    hl = _pairing(res)
    parts = _all_plots(res, pairing=hl)
    narrow = _all_plots(res, narrow=True, pairing=hl)
    written: set[str] = set()
    count = 0

    def embed(figs: list[Plot], phone: list[Plot]) -> list[dict[str, Any]]:
        """Save each figure's PNG, inline its SVGs (desktop and phone), and let the figures go; a figure of a
        single point becomes its sentence."""
        nonlocal count
        out = []
        for f, g in zip(figs, phone, strict=True):
            if f.single:
                out.append({"single": f.single})
                continue
            count += 1
            name = f"{f.kind}_{count:02d}_{f.slug}.png"
            _save_png(f.figure, plot_dir / name)
            written.add(name)
            svg = _inline_svg(f.figure, f"plot{count}", f.caption)
            phone_svg = _inline_svg(g.figure, f"plot{count}n", g.caption)
            out.append({"svg": svg, "svg_narrow": phone_svg, "caption": f.caption})
        return out

    for kind in ("overview", "tradeoff", "subjects", "scenarios"):
        parts[kind] = embed(parts[kind], narrow[kind])
    rev, thresholds, rev_figs = parts["reversibility"]
    parts["reversibility"] = (rev, thresholds, embed(rev_figs, narrow["reversibility"][2]))
    for p in plot_dir.glob("*.png"):
        if p.name.startswith(PLOT_PREFIXES) and p.name not in written:
            p.unlink(missing_ok=True)
    atomic_write_text(out, _build_html(res, hl, parts, f"{digest};{len(written)}"))
    _readable(out)
    return out

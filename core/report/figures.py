"""The report's figures (matplotlib): privacy–utility curves, accuracy against subject count, accuracy per
scenario and recognizer, and reversibility, each a :class:`Plot` with a caption saying how to read it.

matplotlib is imported lazily inside the functions; figures are drawn on the Agg canvas directly (no pyplot, no
global backend switch), so drawing is safe in notebooks and worker threads.
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..evaluation.scenarios import CLEAR, display_order
from ..fileio import atomic_write
from .results import _SETTING, ReportError, _from_frames, _load, _order, _Results, _unique
from .tables import (
    _first_selector_top,
    _fmt,
    _mean_runs,
    _pairing,
    _reversibility,
    _reversibility_thresholds,
    _subject_curves,
    _tradeoff_series,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType


DPI = 150
MAX_PANELS = 3  # settings shown per anonymizer in the subject-count and scenario plots (first, middle, last)
MAX_TRADEOFF_FIGURES = 36
MAX_REVERSIBILITY_FIGURES = 6
NARROW_WIDTH = 3.5  # inches: a phone's layout width (~340 CSS px) at 96 CSS px per inch, so 8 pt text is ~10.7 px
PLOT_KINDS = ("overview", "tradeoff", "subjects", "scenarios", "reversibility")
PLOT_PREFIXES = tuple(f"{k}_" for k in PLOT_KINDS)  # of the PNG files under plots/


def _pick(items: Sequence[Any]) -> list[Any]:
    """All items if at most MAX_PANELS, else the first, middle and last."""
    items = list(items)
    if len(items) <= MAX_PANELS:
        return items
    return [items[0], items[(len(items) - 1) // 2], items[-1]]


# ------------------------------------------------------------------------------------------------------ plotting


def _mpl(s: Any) -> str:
    """A string made safe for matplotlib text: no mathtext from '$', no legend-hiding leading '_'."""
    text = str(s).replace("$", r"\$")
    return " " + text if text.startswith("_") else text


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


_RC: dict[RcKeyType, Any] = {
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
    """One figure of the report: ``kind`` (``overview``, ``tradeoff``, ``subjects``, ``scenarios`` or
    ``reversibility``), a file-name ``slug``, the matplotlib ``figure`` (on the Agg canvas; no pyplot) and its
    ``caption`` — what the figure shows and how to read it. ``single`` is non-empty when the figure would show a
    single point (one setting, one subject count): a sentence with that point's values, which the HTML report
    shows instead of a one-dot plot."""

    kind: str
    slug: str
    figure: Figure
    caption: str
    single: str = ""  # a sentence saying what a plot of a single point shows; the report prints it instead

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


def _colors(n: int, cmap: str = "tab10") -> list[Any]:
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


def _ref_lines_x(ax: Any) -> None:
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


def _point_labels(
    xs: Sequence[float], ys: Sequence[float], labels: Sequence[str], close: tuple[float, float] | None = None
) -> tuple[list[str], list[str]]:
    """The labels to write beside a plot's points (axes from 0 to 1), and a key for the caption.

    When two labelled points lie within ``close`` (x, y) of each other their labels would overlap, so every
    point gets a number instead and the key lists ``number = setting``; otherwise the labels stay. By default
    points closer in x than the longest label is wide (8 pt text on a ~6 in wide axes) count as close."""
    if close is None:
        longest = max((len(str(t)) for t in labels), default=0)
        close = (max(0.12, 0.014 * longest + 0.02), 0.06)
    pts = [(float(x), float(y)) for x, y, t in zip(xs, ys, labels, strict=True) if t]
    crowded = any(
        abs(a[0] - b[0]) < close[0] and abs(a[1] - b[1]) < close[1] for i, a in enumerate(pts) for b in pts[i + 1 :]
    )
    if not crowded:
        return list(labels), []
    numbered, key, k = [], [], 0
    at: dict[tuple[float, float], int] = {}  # coinciding points share one label "1, 2"
    for x, y, t in zip(xs, ys, labels, strict=True):
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


def _plot_tradeoff(res: _Results, narrow: bool = False) -> tuple[list[Plot], list[str]]:
    """One figure per (measure, selector, n_subjects), laid out for a phone when ``narrow``. Returns the plots and
    notes."""
    tr = res.tradeoff
    if tr.empty or "utility" not in tr or tr["utility"].isna().all():  # no utility measure: nothing to trade off
        return [], []
    measures = _unique(tr["measure"])
    selectors = _order(tr["selector"], res.selectors)
    groups: list[tuple[Any, Any, Any]] = []
    for measure in measures:
        for sel in selectors:
            ns = sorted(_unique(tr.loc[(tr["measure"] == measure) & (tr["selector"] == sel), "n_subjects"]),
                        reverse=True)  # fmt: skip
            groups.extend((measure, sel, n) for n in ns)
    notes = []
    if len(groups) > MAX_TRADEOFF_FIGURES:
        notes.append(f"{len(groups)} privacy–utility curves; the first {MAX_TRADEOFF_FIGURES} are plotted "
                     f"(per measure and selector, largest subject counts first); "
                     f"all AUCs are in the table.")  # fmt: skip
        groups = groups[:MAX_TRADEOFF_FIGURES]
    color = dict(zip(res.anonymizers, _colors(len(res.anonymizers)), strict=False))  # at least one colour
    figs = []
    for measure, sel, n in groups:
        part = tr[(tr["measure"] == measure) & (tr["selector"] == sel) & (tr["n_subjects"] == n)]
        a = res.auc
        if len(a):
            a = a[(a["measure"] == measure) & (a["selector"] == sel) & (a["n_subjects"] == n)]
        series = _tradeoff_series(part, a, res.anonymizers)
        fig = _new_figure(NARROW_WIDTH, 4.9) if narrow else _new_figure(7.5, 6.6)
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
                for x, y, t in zip(s["x"], s["y"], point_labels, strict=True):
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
        ax.set_ylabel(_wrap(f"utility: {_mpl(measure)}  (0 = floor, 1 = clear)", 34 if narrow else 50))
        ax.set_title(_fit(f"Privacy–utility: {_mpl(measure)} — selector {_mpl(sel)}, n = {n}",
                          NARROW_WIDTH - 0.3 if narrow else 6.4, 11))  # fmt: skip
        other = any(not s["counted"] and len(s["x"]) for s in series)
        lines = [h for h in ax.get_lines() if not str(h.get_label()).startswith("_")]
        # below the axes: inside, it would hide the staircase tails and points
        _figure_legend(fig, lines, [str(h.get_label()) for h in lines], 1 if narrow else 2)
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
        drawn = [s for s in series if len(s["x"])]
        one = ""
        if drawn and all(len(s["x"]) == 1 for s in drawn):  # one setting per anonymizer: a sentence says it
            one = (f"Privacy–utility ({measure}, selector {sel}, n = {n}): one setting per anonymizer, so no curve — "
                   + "; ".join(f"{s['anonymizer']}"
                               + (f" ({'with' if s['deanon'] else 'without'} de-anon.)" if s["anonymizer"] in both
                                  else "")
                               + f" {s['labels'][0] or '(default)'}: privacy {_fmt(s['x'][0])}, utility "
                                 f"{_fmt(s['y'][0])}" for s in drawn) + ".")  # fmt: skip
        figs.append(Plot("tradeoff", _slug(measure, sel, f"n{n}"), fig, cap, one))
    return figs, notes


def _plot_overview(res: _Results, pairing: pd.DataFrame, narrow: bool = False) -> list[Plot]:
    """The report's opening figure: each anonymizer setting's utility (the first utility measure) against its
    worst-case privacy (the headline's, with its CI as a horizontal bar), one colour per anonymizer, the clear level
    and chance marked, and each anonymizer's conservative staircase (:func:`bioanon.metrics.tradeoff_envelope`).
    None without utility measures."""
    from .. import metrics as _metrics

    ucols = [c for c in pairing.columns if str(c).startswith("utility[")]
    if pairing.empty or not ucols:
        return []
    ucol = ucols[0]
    measure = ucol[len("utility[") : -1]
    color = dict(zip(res.anonymizers, _colors(len(res.anonymizers)), strict=False))
    fig = _new_figure(NARROW_WIDTH, 4.6) if narrow else _new_figure(6.6, 5.4)
    ax = fig.add_subplot()
    keys, shown = [], []
    for i, anon in enumerate(_order(pairing["anonymizer"], res.anonymizers)):
        p = pairing[(pairing["anonymizer"] == anon) & pairing["privacy"].notna() & pairing[ucol].notna()]
        if p.empty:
            continue
        c = color.get(anon, "0.3")
        x = np.clip(p["privacy"].to_numpy(float), 0.0, 1.0)
        y = np.clip(p[ucol].to_numpy(float), 0.0, 1.0)
        # the CI of the worst-case accuracy, as privacy: the upper accuracy bound is the lower privacy bound
        xlo = np.atleast_1d(_metrics.privacy_level(p["ci_high"].to_numpy(float), p["clear"].to_numpy(float),
                                                   p["chance"].to_numpy(float)))  # fmt: skip
        xhi = np.atleast_1d(_metrics.privacy_level(p["ci_low"].to_numpy(float), p["clear"].to_numpy(float),
                                                   p["chance"].to_numpy(float)))  # fmt: skip
        ok = np.isfinite(xlo) & np.isfinite(xhi)
        if ok.any():
            ax.errorbar(x[ok], y[ok], xerr=np.vstack([np.clip(x[ok] - xlo[ok], 0, None),
                                                      np.clip(xhi[ok] - x[ok], 0, None)]),
                        fmt="none", ecolor=c, elinewidth=1.2, alpha=0.6, capsize=3, zorder=3)  # fmt: skip
        if len(x) > 1:
            px, py = _metrics.tradeoff_envelope(x, y)
            ax.plot(px, py, color=c, linewidth=1.2, alpha=0.7, zorder=2)
        ax.plot(x, y, "o", color=c, markersize=7, label=_mpl(anon), zorder=4)
        shown.append(len(x))
        off, ha, va = _LABEL_OFFSETS[i % len(_LABEL_OFFSETS)]
        point_labels, key = _point_labels(x, y, [str(t or "(default)") for t in p["setting"]])
        if key:
            keys.append(f"{anon}: " + "; ".join(key))
        for xx, yy, t in zip(x, y, point_labels, strict=True):
            if t:
                ax.annotate(_mpl(t), (xx, yy), xytext=off, textcoords="offset points", fontsize=8, color=c,
                            ha=ha, va=va, zorder=5)  # fmt: skip
    if not shown:
        return []
    _ref_lines_x(ax)
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.12)
    ax.set_xlabel(_wrap("worst-case privacy  (0 = clear level, 1 = chance)", 34 if narrow else 70))
    ax.set_ylabel(_wrap(f"utility: {_mpl(measure)}  (0 = floor, 1 = clear)", 34 if narrow else 50))
    ax.set_title(_fit(f"Privacy and utility per setting ({_mpl(measure)})", NARROW_WIDTH - 0.3 if narrow else 6.0,
                      11))  # fmt: skip
    lines = [h for h in ax.get_lines() if not str(h.get_label()).startswith("_")]
    _figure_legend(fig, lines, [str(h.get_label()) for h in lines], 2 if narrow else 4)
    sel, n = pairing["selector"].iloc[0], pairing["n_subjects"].max()
    cap = (f"How to read: each point is one anonymizer setting — right is more private (its worst case over every "
           f"recognizer × attacker scenario closer to chance), up keeps more utility ({measure}); up and right is "
           f"best. Horizontal bars: the worst case's CI; lines: each anonymizer's conservative staircase (the best "
           f"utility reachable at each privacy level or more). Selector {sel} at its largest subject count "
           f"({n}), as in the table above.")  # fmt: skip
    if len(ucols) > 1:
        cap += " The other utility measures are in the table and in the privacy–utility curves below."
    if keys:
        cap += " Numbered points (their labels would overlap): " + " | ".join(keys) + "."
    one = ""
    if sum(shown) == 1:
        r = pairing[pairing["privacy"].notna() & pairing[ucol].notna()].iloc[0]
        one = (f"One setting ({r['anonymizer']} {r['setting'] or '(default)'}): worst-case privacy "
               f"{_fmt(r['privacy'])}, utility ({measure}) {_fmt(r[ucol])} — see the table.")  # fmt: skip
    return [Plot("overview", _slug("overview", measure), fig, cap, one)]


def _setting_panels(res: _Results, df: pd.DataFrame) -> tuple[dict[str, list[tuple[Any, ...]]], list[str]]:
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


def _plot_subjects(res: _Results, narrow: bool = False) -> tuple[list[Plot], list[str]]:
    """One figure per anonymizer: worst-case top-1 against subject count, one panel per setting (side by side, or
    stacked when ``narrow``). Returns the plots and notes."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    m = res.metrics
    t1 = m[m["metric"] == "top1"]
    if t1.empty:
        return [], []
    panels, notes = _setting_panels(res, t1)
    scolor = dict(zip(res.selectors, _colors(len(res.selectors), "Dark2"), strict=False))
    figs = []
    for anon, picked in panels.items():
        if narrow:
            panel_w = NARROW_WIDTH
            fig = _new_figure(NARROW_WIDTH, 2.9 * len(picked) + 1.6)
            axes = fig.subplots(len(picked), 1, sharey=True, squeeze=False)[:, 0]
        else:
            panel_w = 4.6
            fig = _new_figure(panel_w * len(picked) + 0.6, 4.8)
            axes = fig.subplots(1, len(picked), sharey=True, squeeze=False)[0]
        handles: dict[str, Any] = {}
        single_n: set[int] = set()
        points: list[str] = []  # "setting: value" of each one-point series, for the sentence of a one-point plot
        curves_drawn = 0
        for ax, (idx, setting) in zip(axes, picked, strict=True):
            d = t1[(t1["anonymizer"] == anon) & (t1["setting_index"] == idx)]
            cur = _subject_curves(res, d)
            ns = sorted(_unique(cur["n_subjects"]))
            for sel in _order(cur["selector"], res.selectors):
                c = cur[cur["selector"] == sel]
                col = scolor.get(sel, "0.3")
                if len(c) == 1:
                    single_n.add(int(c["n_subjects"].iloc[0]))
                    w = c.iloc[0]
                    points.append(f"{setting or '(default)'}, selector {sel}: {_fmt(w['worst'])} ({w['recognizer']} / "
                                  f"{res.scenario(w['scenario'])}; clear level {_fmt(w['clear'])}, chance "
                                  f"{_fmt(w['chance'])})")  # fmt: skip
                else:
                    curves_drawn += 1
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
        for ax in axes if narrow else axes[:1]:
            ax.set_ylabel("worst-case top-1" if narrow else "worst-case top-1 accuracy")
        fig.suptitle(_fit(f"{_mpl(anon)}: worst-case top-1 against subject count", fig.get_figwidth() - 0.3, 12))
        _figure_legend(fig, list(handles.values()), [h.get_label() for h in handles.values()], 1 if narrow else 4)
        cap = (f"How to read: lower is more private — a curve near the dotted chance line means the strongest "
               f"attacker does no better than guessing, one near the dashed clear level means the anonymization "
               f"hardly protects; accuracy usually falls as the number of subjects grows. {anon}: worst case over "
               f"recognizers × attack scenarios (mean over repeats and draws) per selector; for selectors with "
               f"several random draws the band is the min–max over draws of that worst-case attack and the thin "
               f"line the best draw (the highest accuracy of any attack on any draw).")  # fmt: skip
        if single_n:
            counts = ", ".join(str(v) for v in sorted(single_n))
            cap += (
                f" Only one subject count (n = {counts}) was evaluated for some selectors, so their series are "
                f"single points (▼ best draw, ◇ clear level, — chance, bar: range over draws), not curves."
            )
        one = ""
        if points and not curves_drawn:  # one subject count everywhere: no curve to draw
            counts = ", ".join(str(v) for v in sorted(single_n))
            one = (f"{anon}: only one subject count (n = {counts}) was evaluated, so there is no curve against subject "
                   f"count; worst-case top-1 (mean over repeats and draws) — " + "; ".join(points) + ".")  # fmt: skip
        figs.append(Plot("subjects", _slug(anon), fig, cap, one))
    return figs, notes


def _plot_scenarios(res: _Results, narrow: bool = False) -> tuple[list[Plot], list[str]]:
    """One bar chart per anonymizer: top-1 per scenario and recognizer, one panel per setting (stacked when wide
    or ``narrow``). Returns the plots and notes."""
    top = _first_selector_top(res)
    if top.empty:
        return [], []
    agg = _mean_runs(top, _SETTING + ["n_subjects", "recognizer", "scenario"])
    panels, notes = _setting_panels(res, agg)
    recs = _order(agg["recognizer"], res.recognizers)
    rcolor = dict(zip(recs, _colors(len(recs), "Set2"), strict=False))
    figs = []
    for anon, picked in panels.items():
        nscen = max(len(_unique(agg.loc[agg["anonymizer"] == anon, "scenario"])), 1)
        panel_w = NARROW_WIDTH if narrow else min(max(4.8, 0.35 * nscen * max(len(recs), 1) + 1.5), 10.0)
        stacked = narrow or panel_w * len(picked) > 16  # many bars: one panel per row instead of side by side
        if stacked:
            fig = _new_figure(panel_w + (0 if narrow else 0.4), 3.6 * len(picked) + (1.6 if narrow else 0.8))
            axes = fig.subplots(len(picked), 1, sharey=True, squeeze=False)[:, 0]
        else:
            fig = _new_figure(panel_w * len(picked) + 0.4, 4.8)
            axes = fig.subplots(1, len(picked), sharey=True, squeeze=False)[0]
        handles: dict[str, Any] = {}
        for ax, (idx, setting) in zip(axes, picked, strict=True):
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
                           yerr=np.vstack([lo, hi]), capsize=2.5,
                           error_kw={"elinewidth": 1, "ecolor": "0.25"})  # fmt: skip
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
            if narrow and len(scen) > 3:
                ax.tick_params(axis="x", labelrotation=30)
            ax.set_xlim(-0.6, len(scen) - 0.4)
            ax.set_ylim(0, 1.05)
            ax.grid(axis="x", visible=False)
            ax.set_xlabel("attacker scenario")
            ax.set_title(_fit(f"{_mpl(setting or '(default)')}  (n = {n})", panel_w - 0.7, 11))
        for ax in axes if stacked else axes[:1]:
            ax.set_ylabel("top-1 (mean)" if narrow else "top-1 accuracy (mean over repeats)")
        fig.suptitle(_fit(f"{_mpl(anon)}: top-1 per scenario and recognizer — selector {_mpl(res.first_selector)}",
                          fig.get_figwidth() - 0.3, 12))  # fmt: skip
        _figure_legend(fig, list(handles.values()), [h.get_label() for h in handles.values()], 2 if narrow else 6)
        cap = (f"How to read: each bar is one recognizer attacking in one scenario; lower bars are more private — at "
               f"the dotted chance line the attack fails, at the dashed clear level the anonymization does not "
               f"protect. The scenario with the highest bar is the worst case. {anon}: top-1 accuracy per attacker "
               f"scenario (groups) and recognizer (bars) for selector {res.first_selector} at its largest subject "
               f"count; error bars: the stored CIs (bounds averaged over repeats).")  # fmt: skip
        figs.append(Plot("scenarios", _slug(anon), fig, cap))
    return figs, notes


def _plot_reversibility(res: _Results, rev: pd.DataFrame, t: tuple[float, float], narrow: bool = False) -> list[Plot]:
    """One figure per utility measure: reversibility R against normalized utility (``narrow``: for a phone)."""
    u = res.utility
    if rev.empty or u.empty:
        return []
    um = u.groupby(_SETTING + ["measure"], dropna=False, sort=False)["normalized"].mean().reset_index()
    color = dict(zip(res.anonymizers, _colors(len(res.anonymizers)), strict=False))
    figs = []
    for measure in _unique(um["measure"])[:MAX_REVERSIBILITY_FIGURES]:
        d = rev.merge(um[um["measure"] == measure], on=_SETTING, how="inner")
        d = d[d["R"].notna() & d["normalized"].notna()]
        if d.empty:
            continue
        fig = _new_figure(NARROW_WIDTH, 4.2) if narrow else _new_figure(6.5, 5.0)
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
            for x, y, s in zip(p["normalized"], p["R"], point_labels, strict=True):
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
        ax.set_xlabel(_wrap(f"utility: {_mpl(measure)}  (0 = floor, 1 = clear)", 34 if narrow else 60))
        ax.set_ylabel("reversibility R")
        ax.set_title(_fit(f"Reversibility against utility ({_mpl(measure)})", 2.4 if narrow else 4.8, 11))
        lines = [h for h in ax.get_lines() if not str(h.get_label()).startswith("_")]
        _figure_legend(fig, lines, [str(h.get_label()) for h in lines], 2 if narrow else 4)  # inside: may hide points
        cap = (f"How to read: each point is one anonymizer setting; lower is better (a de-anonymizer recovers "
               f"less of what the anonymization removed) and further right keeps more utility, so the lower right "
               f"is best. Reversibility R against normalized utility ({measure}); dotted lines: category "
               f"thresholds {t[0]:g} and {t[1]:g}.")  # fmt: skip
        if single:
            cap += f" {', '.join(single)}: a single setting, drawn as a single point."
        if keys:
            cap += " Numbered points (their labels would overlap): " + " | ".join(keys) + "."
        one = ""
        if len(d) == 1:  # one setting: a sentence says it
            r = d.iloc[0]
            one = (f"Reversibility ({measure}): one setting, {r['anonymizer']} {r['setting'] or '(default)'}: R = "
                   f"{_fmt(r['R'])} ({r['category']}) at utility {_fmt(r['normalized'])}.")  # fmt: skip
        figs.append(Plot("reversibility", _slug(measure), fig, cap, one))
    return figs


def _all_plots(res: _Results, narrow: bool = False, pairing: pd.DataFrame | None = None) -> dict[str, Any]:
    """Every figure of the report with its notes, drawn under the report's rc settings; ``narrow``: laid out for
    a phone (:data:`NARROW_WIDTH` wide, panels stacked), in the same order. ``pairing``: the opening table
    (:func:`~bioanon.report.tables._pairing`) when already computed."""
    import matplotlib

    thresholds = _reversibility_thresholds(res)
    rev = _reversibility(res, thresholds)
    with matplotlib.rc_context(_RC):
        overview = _plot_overview(res, _pairing(res) if pairing is None else pairing, narrow)
        tradeoff, tnotes = _plot_tradeoff(res, narrow)
        subjects, snotes = _plot_subjects(res, narrow)
        scenarios, cnotes = _plot_scenarios(res, narrow)
        rev_figs = _plot_reversibility(res, rev, thresholds, narrow)
    return {
        "overview": overview,
        "tradeoff": tradeoff, "tradeoff_notes": tnotes,
        "subjects": subjects, "subjects_notes": snotes,
        "scenarios": scenarios, "scenarios_notes": cnotes,
        "reversibility": (rev, thresholds, rev_figs),
    }  # fmt: skip


def plots(source: str | os.PathLike[str] | Mapping[str, Any], kinds: Iterable[str] | None = None) -> list[Plot]:
    """The report's figures as :class:`Plot` objects (a matplotlib ``figure`` with its ``caption``).

    ``source`` is a run directory (what :func:`render_report` reads) or the tables in memory as a mapping:
    ``metrics`` (required), ``utility``, ``tradeoff``, ``auc``, ``protocol`` (DataFrames with the columns of the
    files of the same name), ``config``, ``environment`` (dicts). ``kinds`` picks among ``overview`` (utility
    against worst-case privacy per setting), ``tradeoff``, ``subjects``, ``scenarios`` and ``reversibility``
    (default: all). Nothing is written.
    """
    res = _load(source) if isinstance(source, (str, os.PathLike)) else _from_frames(source)
    wanted = set(PLOT_KINDS if kinds is None else kinds)
    unknown = wanted - set(PLOT_KINDS)
    if unknown:
        raise ReportError(f"plots: unknown kind(s) {', '.join(sorted(unknown))}; choose from {', '.join(PLOT_KINDS)}")
    parts = _all_plots(res)
    out = parts["overview"] + parts["tradeoff"] + parts["subjects"] + parts["scenarios"] + parts["reversibility"][2]
    return [p for p in out if p.kind in wanted]


def _save_png(fig: Figure, path: Path) -> None:
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=DPI))
    _readable(path)


def timeline_summary(timeline: Sequence[Mapping[str, Any]], jobs: int | None = None) -> dict[str, Any]:
    """What a task timeline (:attr:`bioanon.executors.ExecutionReport.timeline`, or ``tasks.timeline`` of a run
    folder's ``environment.json``) says about a run: ``first`` (the first task's start), ``end`` (the last task's end),
    ``busy`` (the tasks' seconds), ``lanes`` (the processes: 0 the caller, 1 .. N workers), ``workers`` (the lanes
    counted for idle time: the worker processes, or the caller when no worker ran a task) and ``idle`` (the
    seconds those lanes ran no task between ``first`` and ``end``). ``jobs``: the run's worker processes (its
    ``environment.json``'s ``jobs``), so that a worker that ran no task counts too, idle throughout; None: the
    workers that ran a task. Empty timeline: {}."""
    if not timeline:
        return {}
    ran = {int(r["worker"]) for r in timeline}
    if jobs and any(w > 0 for w in ran):
        ran |= set(range(1, int(jobs) + 1))
    lanes = sorted(ran)
    workers = [w for w in lanes if w > 0] or lanes
    first = min(float(r["start"]) for r in timeline)
    end = max(float(r["start"]) + float(r["seconds"]) for r in timeline)
    on_workers = sum(float(r["seconds"]) for r in timeline if int(r["worker"]) in workers)
    return {
        "first": first,
        "end": end,
        "busy": sum(float(r["seconds"]) for r in timeline),
        "lanes": lanes,
        "workers": workers,
        "idle": max(0.0, len(workers) * (end - first) - on_workers),
    }


def task_timeline(source: str | os.PathLike[str] | Mapping[str, Any]) -> Plot:
    """Where a run's time went: each task it executed as a bar on the process that ran it, coloured by stage.

    ``source`` is a run directory or its ``environment.json`` as a dict; the bars are its ``tasks.timeline``
    (seconds since the run started; lane 0 is the process that ran ``bioanon evaluate``, lanes 1 .. N its
    worker processes). The caption says how long the first task waited for the data and the plan, and how
    much of the workers' time went idle: what a parallel run (``--jobs N``) could still gain. Tasks found in
    the cache ran no time and are not drawn; a Dask run records no timeline (:class:`ReportError`). Not part of
    ``report.html`` (a rerun's times differ, its results do not)."""
    import json

    import matplotlib

    if isinstance(source, Mapping):
        env: Any = source
    else:
        path = Path(source) / "environment.json"
        try:
            env = json.loads(path.read_text())
        except FileNotFoundError:
            raise ReportError(f"task_timeline: {path} does not exist (not a run folder?)") from None
    tasks = env.get("tasks") if isinstance(env, Mapping) else None
    rows = tasks.get("timeline") if isinstance(tasks, Mapping) else None
    if not rows:
        raise ReportError(
            "task_timeline: the run recorded no task timeline (every task came from the cache, the Dask executor "
            "ran it, or an older bioanon wrote it)"
        )
    stages = list(dict.fromkeys(r["stage"] for r in rows))
    colour = dict(zip(stages, _colors(len(stages)), strict=True))
    jobs = env.get("jobs") if isinstance(env.get("jobs"), int) else None
    summary = timeline_summary(rows, jobs)
    first, end, busy, idle = summary["first"], summary["end"], summary["busy"], summary["idle"]
    lanes, workers = summary["lanes"], summary["workers"]
    with matplotlib.rc_context(_RC):
        fig = _new_figure(7.0, 1.2 + 0.35 * len(lanes))
        ax = fig.add_subplot()
        for stage in stages:
            mine = [r for r in rows if r["stage"] == stage]
            ax.barh(
                [lanes.index(int(r["worker"])) for r in mine],
                [r["seconds"] for r in mine],
                left=[r["start"] for r in mine],
                height=0.7,
                color=colour[stage],
                edgecolor="white",
                linewidth=0.5,
                label=stage,
            )
        ax.set_yticks(range(len(lanes)), ["main" if w == 0 else f"worker {w}" for w in lanes])
        ax.invert_yaxis()
        ax.set_xlabel("seconds since the run started")
        ax.set_xlim(0, end * 1.02)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    caption = (
        f"{len(rows)} tasks, {busy:.1f} s of work in {end:.1f} s on {len(lanes)} process(es). The first task "
        f"started {first:.1f} s after the run (starting up, importing the data, planning). "
        + (
            f"The {len(workers)} workers were idle {idle:.1f} s between the first task and the last "
            f"({idle / max(len(workers) * (end - first), 1e-9):.0%} of their time): tasks waiting for others."
            if len(workers) > 1
            else "The tasks ran one after the other."
        )
    )
    return Plot("timeline", "timeline", fig, caption)

"""Gait and motion anonymizations, and the DTW / Fréchet utility measures, against per-sequence loops.

    python -m benchmarks.sequences [--sequences 10000 --frames 60 --window 128 --repeats 3] [--quick] [--json F]

Issue 10: over 10,000 sequences — gait walks of 60 frames × 18 joints × 3 (``gait.synthetic``) and IMU
windows of 128 samples × 6 channels (``motion.synthetic``) — every gait and motion anonymization
(``bioanon.get_method(id)`` with its default parameters, table in → table out) and the DTW / Fréchet utility
measures (``gait.dtw``, ``gait.frechet``, ``motion.dtw``: ``measure(clear, anonymized)``) must be at least as
fast as a per-sequence loop doing the same operation with numpy/SciPy (target ≥ 1×).

The per-sequence references are written here, independently of the methods, as one would loop over a data
set: per-table constants (index tables, masks, filter coefficients, channel statistics) computed once, then one
sequence at a time; the random ones draw from the same generators in the same order. Each reference is
checked against the method's output on every sequence before it is timed (so the ratio compares the same
computation). The distances' reference is the strongest per-sequence numpy form — the dynamic programme along
anti-diagonals, vectorized over the joints (or channels' frames) of that one sequence; for context, the
textbook double loop in pure Python is timed on ``--python-sequences`` sequences and extrapolated. Methods and
references are timed interleaved, ``--repeats`` rounds, best of each; ratio = reference / method (> 1: the
method is faster); peak extra resident memory of each is reported beside the times. The random-set mean
(``gait.random_set_mean``, ``motion.random_set_mean``) is measured by ``benchmarks.random_set_mean``.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.common import emit, figure, print_figures, run_cases, side_by_side

TARGET_LOOP = 1.0
FULL = {"sequences": 10_000, "frames": 60, "window": 128, "python_sequences": 3, "repeats": 3}
QUICK = {"sequences": 60, "frames": 24, "window": 32, "python_sequences": 1, "repeats": 1}


# --------------------------------------------------------------------------------------------------- gait references
# ``fn(method, table, x) -> out``: x the (N, T, J, 3) float32 poses, out float32 of the same shape.


def _per_sequence(x: np.ndarray, fn: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    out = np.empty(x.shape, np.float32)
    for i in range(len(x)):
        out[i] = fn(x[i].astype(np.float64), i)
    return out


def gait_noise(m, table, x):
    from bioanon_gait.anonymizers import sample_seed

    assert m.noise == "normal" and m.mode == "direct"
    ids = table.sample_ids
    return _per_sequence(
        x,
        lambda s, i: (
            s + m.scale * s.std(axis=0) * np.random.default_rng(sample_seed(m.seed, ids[i])).standard_normal(s.shape)
        ),
    )


def _coarsen_index(T: int, f: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.arange(T)
    k0 = (t // f) * f
    k1 = np.minimum(k0 + f, ((T - 1) // f) * f)
    w = np.where(k1 > k0, (t - k0) / f, 0.0)[:, None, None]
    return k0, k1, w


def gait_coarsen_time(m, table, x):
    assert m.interpolation == "linear"
    k0, k1, w = _coarsen_index(x.shape[1], m.factor)
    return _per_sequence(x, lambda s, i: s[k0] * (1.0 - w) + s[k1] * w)


def gait_coarsen_precision(m, table, x):
    from bioanon_gait.skeleton import unit_scale

    step = m.step * unit_scale(table)
    return _per_sequence(x, lambda s, i: np.round(s / step) * step)


def _lerp_index(t: int, frames: int) -> tuple[np.ndarray, np.ndarray]:
    pos = np.linspace(0.0, t - 1.0, frames)
    i0 = np.minimum(np.floor(pos).astype(np.int64), t - 2)
    return i0, (pos - i0)[:, None, None]


def gait_resample(m, table, x):
    T = x.shape[1]
    r = m.reduced_frames(table)
    d0, dw = _lerp_index(T, r)
    u0, uw = _lerp_index(r, T)

    def one(s, i):
        low = (s[d0] * (1.0 - dw) + s[d0 + 1] * dw).astype(np.float32)  # the reduced sequence is stored as float32
        return low[u0] * (1.0 - uw) + low[u0 + 1] * uw

    return _per_sequence(x, one)


def _window_mean(s, lo, hi):
    c = np.concatenate([np.zeros_like(s[:1]), np.cumsum(s, axis=0)])
    return (c[hi] - c[lo]) / (hi - lo)[:, None, None]


def gait_rolling_average(m, table, x):
    T = x.shape[1]
    t = np.arange(T)
    lo = t - (m.window - 1) if m.alignment == "trailing" else t - m.window // 2
    lo, hi = np.clip(lo, 0, T), np.clip(lo + m.window, 0, T)
    return _per_sequence(x, lambda s, i: _window_mean(s, lo, hi))


def gait_motion_extraction(m, table, x):
    lag = m.lag

    def one(s, i):
        out = np.zeros_like(s)
        out[: len(s) - lag] = s[lag:] - s[:-lag]
        return out

    return _per_sequence(x, one)


def gait_trajectory_features(m, table, x):
    assert m.baseline == "all" and m.output == "residual"
    T, w = x.shape[1], m.window
    t = np.arange(w, T - w)

    def one(s, i):
        out = np.zeros_like(s)
        out[w : T - w] = s[t] - _window_mean(s, t - w, t + w + 1)
        return out

    return _per_sequence(x, one)


def gait_parts(m, table, x):
    mask = m.selected(table)
    keep = (mask if m.keep else ~mask).astype(np.float64)[:, None]
    return _per_sequence(x, lambda s, i: s * keep)


def gait_sum_of_parts(m, table, x):
    off = m.offsets(table)
    return _per_sequence(x, lambda s, i: s + off)


def gait_size_normalization(m, table, x):
    from bioanon_gait.skeleton import unit_scale, up_axis

    assert m.by == "skeleton" and m.axis == "all"
    up, target = up_axis(table), m.target * unit_scale(table)

    def one(s, i):
        v = s[..., up]
        size = np.median(v.max(axis=1) - v.min(axis=1))
        factor = target / size if size > 0 else 1.0
        centre = s.mean(axis=(0, 1))
        return centre + (s - centre) * factor

    return _per_sequence(x, one)


def gait_normalize(m, table, x):
    assert m.method == "minmax" and m.per == "axis"

    def one(s, i):
        lo, hi = s.min(axis=(0, 1)), s.max(axis=(0, 1))
        span = hi - lo
        return np.where(span > 0, (s - lo) / np.where(span > 0, span, 1.0), 0.0)

    return _per_sequence(x, one)


def gait_average_pose(m, table, x):
    return _per_sequence(x, lambda s, i: np.broadcast_to(s.mean(axis=0), s.shape))


def gait_first_pose(m, table, x):
    return _per_sequence(x, lambda s, i: np.broadcast_to(s[0], s.shape))


def gait_chain(m, table, x):
    """The default chain, coarsening in time (factor 4) then noise (scale 0.5, seed + 1), per sequence."""
    from bioanon_gait.anonymizers import sample_seed

    coarse, noise = m.methods_
    assert (coarse.id, noise.id, noise.noise, noise.mode) == ("gait.coarsen_time", "gait.noise", "normal", "direct")
    k0, k1, w = _coarsen_index(x.shape[1], coarse.factor)
    ids = table.sample_ids

    def one(s, i):
        c = (s[k0] * (1.0 - w) + s[k1] * w).astype(np.float32).astype(np.float64)  # each step stores float32
        z = np.random.default_rng(sample_seed(noise.seed, ids[i])).standard_normal(c.shape)
        return c + noise.scale * c.std(axis=0) * z

    return _per_sequence(x, one)


# --------------------------------------------------------------------------------------------------- motion references
# ``fn(method, table, x) -> out``: x the (N, T, C) float32 windows.


def _channel_std(x: np.ndarray) -> np.ndarray:
    std = x.reshape(-1, x.shape[2]).std(axis=0, dtype=np.float64)
    return np.where(std > 1e-12, std, 1.0).astype(np.float32)


def _per_window(x: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    out = np.empty(x.shape, np.float32)
    for i in range(len(x)):
        out[i] = fn(x[i])
    return out


def motion_noise(m, table, x):
    from bioanon_motion.signals import table_rng

    rng = table_rng(m.seed, table)
    scale = np.float32(m.sigma) * _channel_std(x)
    if m.id == "motion.laplace_noise":
        return _per_window(
            x, lambda w: w + rng.laplace(0.0, 1.0 / np.sqrt(2.0), size=w.shape).astype(np.float32) * scale
        )
    return _per_window(x, lambda w: w + rng.standard_normal(w.shape, dtype=np.float32) * scale)


def motion_lowpass(m, table, x):
    from scipy.signal import butter, sosfiltfilt

    from bioanon_motion.signals import sample_rate_of

    fs = sample_rate_of(table, m.sample_rate)
    sos = butter(m.order, m.cutoff_hz, btype="low", fs=fs, output="sos")
    padlen = min(max(3 * (2 * len(sos) + 1), int(np.ceil(3 * fs / m.cutoff_hz))), x.shape[1] - 1)
    return _per_window(x, lambda w: sosfiltfilt(sos, w.astype(np.float64), axis=0, padtype="even", padlen=padlen))


def motion_resample(m, table, x):
    from scipy.signal import resample_poly

    assert m.antialias and m.interpolation == "linear"
    t, f = x.shape[1], m.factor
    low_len = resample_poly(np.zeros((t, 1)), 1, f, axis=0).shape[0]
    pos = np.arange(t) / f
    i0 = np.minimum(np.floor(pos).astype(np.int64), low_len - 1)
    i1 = np.minimum(i0 + 1, low_len - 1)
    wt = (pos - i0)[:, None]

    def one(w):
        low = resample_poly(w.astype(np.float64), 1, f, axis=0)
        return (1.0 - wt) * low[i0] + wt * low[i1]

    return _per_window(x, one)


def motion_quantize(m, table, x):
    assert m.relative
    step = (m.step * _channel_std(x)).astype(np.float64)
    return _per_window(x, lambda w: np.round(w / step) * step)


def motion_channel_removal(m, table, x):
    from bioanon_motion.signals import channel_names_of

    assert m.mode == "zero"
    mask = m.removed(channel_names_of(table, x.shape[2]))

    def one(w):
        y = w.copy()
        y[:, mask] = 0.0
        return y

    return _per_window(x, one)


def motion_normalize(m, table, x):
    assert m.mode == "zscore"

    def one(w):
        y = w.astype(np.float64)
        y = y - y.mean(axis=0)
        std = y.std(axis=0)
        return np.where(std > 1e-12, y / np.where(std > 1e-12, std, 1.0), 0.0)

    return _per_window(x, one)


# --------------------------------------------------------------------------------------------------- distances


def wavefront(a: np.ndarray, b: np.ndarray, kind: str, band: int) -> np.ndarray:
    """DTW (symmetric steps: diagonal ×2, normalized by T + U; or, for ``motion``, steps of weight 1 normalized by
    2T) or discrete Fréchet between ``a[j]`` and ``b[j]`` ((J, T, D)), along the anti-diagonals of one
    sequence's grids: a per-sequence numpy implementation."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    J, T, _ = a.shape
    U = b.shape[1]
    cost = np.sqrt(((a[:, :, None, :] - b[:, None, :, :]) ** 2).sum(-1))  # (J, T, U)
    i, j = np.indices((T, U))
    cost[:, np.abs(i - j) > band] = np.inf
    acc = np.full((J, T + 1, U + 1), np.inf)
    acc[:, 0, 0] = 0.0
    for k in range(2, T + U + 1):
        ii = np.arange(max(1, k - U), min(T, k - 1) + 1)
        jj = k - ii
        c = cost[:, ii - 1, jj - 1]
        up, left, diag = acc[:, ii - 1, jj], acc[:, ii, jj - 1], acc[:, ii - 1, jj - 1]
        if kind == "dtw":
            acc[:, ii, jj] = np.minimum(np.minimum(up, left) + c, diag + 2.0 * c)
        elif kind == "motion_dtw":
            acc[:, ii, jj] = c + np.minimum(np.minimum(up, left), diag)
        else:
            acc[:, ii, jj] = np.maximum(c, np.minimum(np.minimum(up, left), diag))
    end = acc[:, T, U]
    return end / (T + U) if kind == "dtw" else end / (2.0 * T) if kind == "motion_dtw" else end


def textbook(a: np.ndarray, b: np.ndarray, kind: str, band: int) -> float:
    """The same distance for one pair of point sequences, as a double loop in pure Python."""
    pa, pb = a.tolist(), b.tolist()
    T, U = len(pa), len(pb)
    inf = float("inf")
    D = [[inf] * (U + 1) for _ in range(T + 1)]
    D[0][0] = 0.0
    for i in range(1, T + 1):
        p = pa[i - 1]
        for j in range(1, U + 1):
            if abs(i - j) > band:
                continue
            q = pb[j - 1]
            c = sum((u - v) * (u - v) for u, v in zip(p, q, strict=True)) ** 0.5
            if kind == "dtw":
                D[i][j] = min(D[i - 1][j - 1] + 2 * c, D[i - 1][j] + c, D[i][j - 1] + c)
            elif kind == "motion_dtw":
                D[i][j] = c + min(D[i - 1][j - 1], D[i - 1][j], D[i][j - 1])
            else:
                D[i][j] = max(c, min(D[i - 1][j - 1], D[i - 1][j], D[i][j - 1]))
    return D[T][U] / (T + U) if kind == "dtw" else D[T][U] / (2.0 * T) if kind == "motion_dtw" else D[T][U]


def _gait_pairs(m, a: np.ndarray, b: np.ndarray):
    assert m.per == "joint"
    kind = m.distance
    band = max(m._window() or max(a.shape[1], b.shape[1]), abs(a.shape[1] - b.shape[1]))
    return kind, band


def gait_distance_loop(m, a, b):
    kind, band = _gait_pairs(m, a, b)
    out = np.empty(len(a))
    for i in range(len(a)):
        out[i] = wavefront(
            a[i].transpose(1, 0, 2).astype(np.float64), b[i].transpose(1, 0, 2).astype(np.float64), kind, band
        ).mean()
    return out


def gait_distance_python(m, a, b):
    kind, band = _gait_pairs(m, a, b)
    return np.array(
        [np.mean([textbook(a[i, :, j], b[i, :, j], kind, band) for j in range(a.shape[2])]) for i in range(len(a))]
    )


def _motion_std(m, a):
    return m.std_ if m.standardize else np.ones(a.shape[2])


def motion_dtw_loop(m, a, b):
    std, band = _motion_std(m, a), max(int(np.ceil(m.band * a.shape[1])), 1)
    out = np.empty(len(a))
    for i in range(len(a)):
        out[i] = wavefront((a[i] / std)[None], (b[i] / std)[None], "motion_dtw", band)[0]
    return out


def motion_dtw_python(m, a, b):
    std, band = _motion_std(m, a), max(int(np.ceil(m.band * a.shape[1])), 1)
    return np.array([textbook(a[i] / std, b[i] / std, "motion_dtw", band) for i in range(len(a))])


# --------------------------------------------------------------------------------------------------- cases


@dataclass
class Case:
    """An anonymization (``loop(method, table, x)``) or a paired distance (``loop(method, clear, anonymized)``
    on payload arrays, and ``python`` the textbook loop); ``rtol``/``atol`` bound the difference to the method."""

    method_id: str
    trait: str
    loop: Callable
    loop_how: str
    python: Callable | None = None
    python_how: str = ""
    measure: bool = False  # a utility measure: measure(clear, anonymized) against the anonymization below
    anonymization: str = ""
    rtol: float = 1e-6
    atol: float = 1e-6


_PER_SEQ = "numpy per sequence"
CASES = [
    Case("gait.noise", "gait", gait_noise, _PER_SEQ + ": a generator per sample id, temporal σ, add"),
    Case("gait.coarsen_time", "gait", gait_coarsen_time, _PER_SEQ + ": kept-frame indices once, linear blend"),
    Case("gait.coarsen_precision", "gait", gait_coarsen_precision, _PER_SEQ + ": round to the grid"),
    Case("gait.resample", "gait", gait_resample, _PER_SEQ + ": linear resampling down and back up"),
    Case("gait.rolling_average", "gait", gait_rolling_average, _PER_SEQ + ": cumulative-sum window means"),
    Case("gait.motion_extraction", "gait", gait_motion_extraction, _PER_SEQ + ": frame differences"),
    Case("gait.trajectory_features", "gait", gait_trajectory_features, _PER_SEQ + ": frame minus window mean"),
    Case("gait.keep_parts", "gait", gait_parts, _PER_SEQ + ": joint mask (once) times the poses"),
    Case("gait.remove_parts", "gait", gait_parts, _PER_SEQ + ": joint mask (once) times the poses"),
    Case("gait.sum_of_parts", "gait", gait_sum_of_parts, _PER_SEQ + ": per-joint offsets (once) added"),
    Case(
        "gait.size_normalization", "gait", gait_size_normalization, _PER_SEQ + ": median height, scale about the centre"
    ),
    Case("gait.normalize", "gait", gait_normalize, _PER_SEQ + ": per-axis min-max"),
    Case("gait.average_pose", "gait", gait_average_pose, _PER_SEQ + ": mean pose repeated"),
    Case("gait.first_pose", "gait", gait_first_pose, _PER_SEQ + ": first pose repeated"),
    Case("gait.chain", "gait", gait_chain, _PER_SEQ + ": coarsen in time, then noise"),
    Case(
        "motion.gaussian_noise",
        "motion",
        motion_noise,
        "numpy per window: channel σ once, float32 normal draws from the same generator",
    ),
    Case(
        "motion.laplace_noise",
        "motion",
        motion_noise,
        "numpy per window: channel σ once, Laplace draws from the same generator",
    ),
    Case("motion.lowpass", "motion", motion_lowpass, "scipy.signal.sosfiltfilt per window (coefficients once)"),
    Case("motion.resample", "motion", motion_resample, "scipy.signal.resample_poly per window, linear back up"),
    Case("motion.quantize", "motion", motion_quantize, "numpy per window: channel σ once, round"),
    Case("motion.channel_removal", "motion", motion_channel_removal, "numpy per window: zero the matched channels"),
    Case("motion.normalize", "motion", motion_normalize, "numpy per window: z-score"),
    Case(
        "gait.dtw",
        "gait",
        gait_distance_loop,
        "numpy per sequence: anti-diagonal DTW over its 18 joints",
        python=gait_distance_python,
        python_how="textbook double loop in pure Python per joint trajectory",
        measure=True,
        anonymization="gait.noise",
        rtol=1e-9,
        atol=1e-12,
    ),
    Case(
        "gait.frechet",
        "gait",
        gait_distance_loop,
        "numpy per sequence: anti-diagonal Fréchet over its 18 joints",
        python=gait_distance_python,
        python_how="textbook double loop in pure Python per joint trajectory",
        measure=True,
        anonymization="gait.noise",
        rtol=1e-9,
        atol=1e-12,
    ),
    Case(
        "motion.dtw",
        "motion",
        motion_dtw_loop,
        "numpy per window: cost matrix, anti-diagonal DTW in the band",
        python=motion_dtw_python,
        python_how="textbook double loop in pure Python per window",
        measure=True,
        anonymization="motion.gaussian_noise",
        rtol=1e-9,
        atol=1e-12,
    ),
]


# --------------------------------------------------------------------------------------------------- run


def make_tables(n: int, frames: int, window: int) -> dict[str, Any]:
    """``n`` synthetic walks and ``n`` synthetic IMU windows (20 per subject)."""
    import bioanon

    per = 20 if n >= 40 else 2
    subjects = max(2, -(-n // per))
    gait = bioanon.load_dataset("gait.synthetic", n_subjects=subjects, sequences_per_subject=per, frames=frames)
    motion = bioanon.load_dataset("motion.synthetic", n_subjects=subjects, windows_per_subject=per, window=window)
    return {
        "gait": gait.take(np.arange(n)) if gait.num_rows > n else gait,
        "motion": motion.take(np.arange(n)) if motion.num_rows > n else motion,
    }


def _payload(table) -> np.ndarray:
    return table.payload(table.payload_names[0])


def _check(case: Case, which: str, got: np.ndarray, want: np.ndarray) -> float:
    if got.shape != want.shape:
        raise AssertionError(f"{case.method_id}: the {which} reference has shape {got.shape}, the method {want.shape}")
    want64, got64 = want.astype(np.float64), got.astype(np.float64)
    if not np.allclose(got64, want64, rtol=case.rtol, atol=case.atol):
        bad = float(np.max(np.abs(got64 - want64)))
        raise AssertionError(
            f"{case.method_id}: the {which} reference differs from the method by up to {bad:.3g}; "
            "the ratio would not compare like with like"
        )
    return float(np.max(np.abs(got64 - want64))) if got.size else 0.0


def bench_case(case: Case, table, *, python_sequences: int, repeats: int) -> tuple[list[dict[str, Any]], dict]:
    import bioanon

    m = bioanon.get_method(case.method_id)
    n = table.num_rows
    if case.measure:
        anon = bioanon.get_method(case.anonymization).transform(table)
        m.fit(table)
        a, b = _payload(table), _payload(anon)
        ours = m.measure(table, anon)
        run_method = functools.partial(m.measure, table, anon)
        run_loop = functools.partial(case.loop, m, a, b)
    else:
        x = _payload(table)
        ours = _payload(m.transform(table))
        run_method = functools.partial(m.transform, table)
        run_loop = functools.partial(case.loop, m, table, x)
    info: dict[str, Any] = {"method": case.method_id, "sequences": n, "shape": list(_payload(table).shape[1:])}
    info["loop_max_abs_diff"] = _check(case, "per-sequence loop", run_loop(), ours)
    times = side_by_side({"method": run_method, "loop": run_loop}, repeats)
    t_m, t_l = times["method"]["seconds"], times["loop"]["seconds"]
    what = "measure" if case.measure else "transform"
    figs = [
        figure(
            f"sequences: {case.method_id} vs per-sequence loop",
            value=t_l / t_m,
            unit="×",
            target=f">= {TARGET_LOOP:g}",
            passed=t_l / t_m >= TARGET_LOOP,
            sequences=n,
            method_s=round(t_m, 4),
            loop_s=round(t_l, 4),
            method_peak_mib=times["method"]["peak_mib"],
            loop_peak_mib=times["loop"]["peak_mib"],
            reference=case.loop_how,
            timed=what,
        )
    ]
    info.update(
        method_seconds=t_m,
        method_seconds_all=times["method"]["all"],
        loop_seconds=t_l,
        loop_seconds_all=times["loop"]["all"],
        method_peak_mib=times["method"]["peak_mib"],
        loop_peak_mib=times["loop"]["peak_mib"],
        loop_reference=case.loop_how,
    )
    if case.python is not None:
        k = max(1, min(python_sequences, n))
        t0 = time.perf_counter()
        py = case.python(m, a[:k], b[:k])
        t_sub = time.perf_counter() - t0
        info["python_max_abs_diff"] = _check(case, "pure-Python", py, ours[:k])
        t_py = t_sub * n / k
        figs.append(
            figure(
                f"sequences: {case.method_id} vs pure-Python loop",
                value=t_py / t_m,
                unit="×",
                target="(context)",
                passed=True,
                sequences=n,
                method_s=round(t_m, 4),
                python_s_extrapolated=round(t_py, 2),
                python_sequences_timed=k,
                reference=case.python_how + f"; timed on {k} sequence(s), extrapolated to {n}",
            )
        )
        info.update(python_seconds_extrapolated=t_py, python_sequences_timed=k, python_reference=case.python_how)
    return figs, info


def run(
    quick: bool = False,
    *,
    sequences: int | None = None,
    frames: int | None = None,
    window: int | None = None,
    python_sequences: int | None = None,
    repeats: int | None = None,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Every case on ``sequences`` synthetic walks / IMU windows (``quick``: tiny sizes, for the smoke test)."""
    cfg = dict(QUICK if quick else FULL)
    cfg.update(
        {
            k: v
            for k, v in (
                ("sequences", sequences),
                ("frames", frames),
                ("window", window),
                ("python_sequences", python_sequences),
                ("repeats", repeats),
            )
            if v is not None
        }
    )
    t0 = time.perf_counter()
    tables = make_tables(cfg["sequences"], cfg["frames"], cfg["window"])
    t_data = time.perf_counter() - t0
    figures, details, notes = run_cases(
        "sequences",
        CASES,
        lambda case: bench_case(
            case, tables[case.trait], python_sequences=cfg["python_sequences"], repeats=cfg["repeats"]
        ),
        only,
    )
    return {
        "benchmark": "sequences",
        "quick": quick,
        **cfg,
        "data_seconds": round(t_data, 2),
        "notes": notes,
        "cases": details,
        "figures": figures,
        "targets_met": all(f["passed"] for f in figures),
    }


def _print(res: dict[str, Any]) -> None:
    print_figures(
        f"sequences benchmark: {res['sequences']} walks of {res['frames']} frames × 18 joints and IMU "
        f"windows of {res['window']} × 6, best of {res['repeats']}",
        res["figures"],
        res["quick"],
        58,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sequences", description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, help=f"walks and IMU windows (default {FULL['sequences']})")
    ap.add_argument("--frames", type=int, help=f"frames per walk (default {FULL['frames']})")
    ap.add_argument("--window", type=int, help=f"samples per IMU window (default {FULL['window']})")
    ap.add_argument("--python-sequences", type=int, help="sequences the pure-Python distance loops are timed on")
    ap.add_argument("--repeats", type=int, help="interleaved timing rounds (default 3)")
    ap.add_argument("--only", nargs="*", help="method ids to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args(argv)
    res = run(
        a.quick,
        sequences=a.sequences,
        frames=a.frames,
        window=a.window,
        python_sequences=a.python_sequences,
        repeats=a.repeats,
        only=a.only,
    )
    return emit(res, _print, a.json)


if __name__ == "__main__":
    raise SystemExit(main())

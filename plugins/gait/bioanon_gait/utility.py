"""Gait utility measures (the SEBA paper App. B.4): attribute classification, and dynamic time warping,
discrete Fréchet and Euclidean distances between each clear sequence and its anonymized version.

The distances compare trajectories: by default each joint's 3-D trajectory separately (``per='joint'``, the
value is the mean over joints, in the data's units), or whole poses as points in ``joints · 3`` dimensions
(``per='pose'``). With the lock-step point distances ``c[t] = ‖a[t] − b[t]‖``:

* ``euclidean`` — the mean of ``c[t]`` over frames;
* ``dtw`` — dynamic time warping with the symmetric step pattern (a diagonal step costs twice), normalized by
  ``len(a) + len(b)``: every warping path has weight ``len(a) + len(b)``, so the value is a weighted mean
  point distance along the best path, in the data's units and ≤ the Euclidean value (the diagonal path).
  ``window`` > 0 restricts the path to a Sakoe–Chiba band;
* ``frechet`` — the discrete Fréchet distance: the smallest, over monotone couplings, of the largest coupled
  point distance.

Both dynamic programs run along anti-diagonals of the frame-pair grid, vectorized over blocks of sequences
(and joints) with the batch as the contiguous inner axis: T + U − 1 numpy steps per block, no per-pair Python
loop, about 10× a per-sequence numpy loop (``benchmarks/sequences.py``). Lower is better; the
floor (no utility) is the distance of each sequence to the table's mean sequence — the output of an
anonymization that keeps nothing individual. Rows are matched by sample id.
"""

from __future__ import annotations

from typing import ClassVar, Literal, cast

import attrs
import numpy as np

from bioanon.api import AttributeAccuracy, UtilityMeasure, align, fitted, param, require_fitted

from .features import CENTERING_HELP, FEATURES_HELP, Centering, Features, GaitFeatures
from .skeleton import per_walk, poses

_BLOCK_VALUES = 1 << 19  # sequences × frames × dims per block of the dynamic programmes (diagonals fit the cache)


def _trajectories(x: np.ndarray, per: str) -> np.ndarray:
    """``(N, T, J, 3)`` → batch of point sequences: ``(N·J, T, 3)`` per joint, ``(N, T, J·3)`` per pose."""
    n, t, j, _ = x.shape
    if per == "joint":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(n * j, t, 3), dtype=np.float64)
    return np.ascontiguousarray(x.reshape(n, t, j * 3), dtype=np.float64)


def _dp(a: np.ndarray, b: np.ndarray, kind: str, window: int) -> np.ndarray:
    """DTW (symmetric2, normalized) or discrete Fréchet between ``a[i]`` and ``b[i]`` (``(B, T, D)``, ``(B, U, D)``),
    computed along anti-diagonals.

    The batch is the innermost (contiguous) axis: ``a`` as ``(T, D, B)``, ``b`` reversed in time as ``(U, D, B)``,
    so the cells i = lo…hi of anti-diagonal k = i + j pair the frames ``a[lo−1 … hi−1]`` with the reversed
    frames ``b[U−k+lo … U−k+hi]`` — two contiguous slices, no gather. ``prev``/``prev2`` hold the two previous
    diagonals indexed by row i, ``(T + 1, B)``; all arithmetic writes into preallocated buffers."""
    B, T, D = a.shape
    U = b.shape[1]
    inf = np.inf
    at = np.ascontiguousarray(a.transpose(1, 2, 0), dtype=np.float64)  # (T, D, B)
    br = np.ascontiguousarray(b[:, ::-1].transpose(1, 2, 0), dtype=np.float64)  # (U, D, B), time reversed
    prev2 = np.full((T + 1, B), inf)  # diagonal k-2 (cells i + j = k - 2)
    prev = np.full((T + 1, B), inf)  # diagonal k-1
    cur = np.empty((T + 1, B))
    prev2[0] = 0.0  # cell (0, 0) is the start; the rest of row 0 / column 0 is the boundary (inf)
    cost, tmp = np.empty((T, B)), np.empty((T, B))
    wide = np.empty((T, D, B)) if D > 4 else None
    band = window if window > 0 else max(T, U)
    band = max(band, abs(T - U))  # the end cell must stay reachable
    for k in range(2, T + U + 1):
        lo, hi = max(1, k - U), min(T, k - 1)
        # restrict to the Sakoe-Chiba band |i - j| <= band, i.e. |2i - k| <= band
        lo, hi = max(lo, (k - band + 1) // 2), min(hi, (k + band) // 2)
        cur.fill(inf)
        if lo <= hi:
            n = hi - lo + 1
            pa, pb = at[lo - 1 : hi], br[U - k + lo : U - k + hi + 1]  # (n, D, B) each
            c, t = cost[:n], tmp[:n]
            if wide is None:  # few dimensions (per joint: 3): accumulate them one by one
                np.subtract(pa[:, 0], pb[:, 0], out=c)
                np.multiply(c, c, out=c)
                for d in range(1, D):
                    np.subtract(pa[:, d], pb[:, d], out=t)
                    np.multiply(t, t, out=t)
                    c += t
            else:
                w = wide[:n]
                np.subtract(pa, pb, out=w)
                np.multiply(w, w, out=w)
                np.sum(w, axis=1, out=c)
            np.sqrt(c, out=c)
            dest = cur[lo : hi + 1]
            np.minimum(prev[lo - 1 : hi], prev[lo : hi + 1], out=dest)  # min(up, left)
            if kind == "dtw":
                dest += c
                np.multiply(c, 2.0, out=t)
                t += prev2[lo - 1 : hi]  # diagonal step, weighing twice
                np.minimum(dest, t, out=dest)
            else:
                np.minimum(dest, prev2[lo - 1 : hi], out=dest)
                np.maximum(dest, c, out=dest)
        prev2, prev, cur = prev, cur, prev2
    end = prev[T].copy()
    return end / (T + U) if kind == "dtw" else end


def sequence_distance(a: np.ndarray, b: np.ndarray, kind: str, window: int = 0) -> np.ndarray:
    """Distances between point sequences ``a[i]`` and ``b[i]`` (``(B, T, D)``), in blocks of the batch small
    enough for the CPU cache (the dynamic programme makes ~T + U passes over a block)."""
    if kind == "euclidean":
        return np.linalg.norm(a - b, axis=2).mean(axis=1)
    step = max(1, _BLOCK_VALUES // max(1, max(a.shape[1], b.shape[1]) * a.shape[2]))
    return (
        np.concatenate([_dp(a[s : s + step], b[s : s + step], kind, window) for s in range(0, len(a), step)])
        if len(a)
        else np.zeros(0)
    )


def pose_distance(x: np.ndarray, y: np.ndarray, kind: str, per: str = "joint", window: int = 0) -> np.ndarray:
    """Per-sample distance between pose sequences ``x[n]`` and ``y[n]`` (``(N, T, J, 3)``)."""
    n, j = x.shape[0], x.shape[2]
    d = sequence_distance(_trajectories(x, per), _trajectories(y, per), kind, window)
    return d.reshape(n, j).mean(axis=1) if per == "joint" else d


@attrs.define(kw_only=True)
class _SequenceDistance(UtilityMeasure):
    """Paired distance between each clear sequence and its anonymized version (lower is better)."""

    trait: ClassVar[str] = "gait"
    payloads: ClassVar[tuple[str, ...]] = ("pose",)
    higher_is_better: ClassVar[bool] = False
    paired: ClassVar[bool] = True
    reference: ClassVar[str] = "seba App. B.4 (gait time-series distances)"
    distance: ClassVar[str] = ""  # "euclidean", "dtw" or "frechet"

    per: Literal["joint", "pose"] = param("joint", help="compare each joint's trajectory, or whole poses")

    def _window(self) -> int:
        return 0

    def measure(self, original, anonymized) -> np.ndarray:
        anonymized = align(original, anonymized)
        return pose_distance(poses(original), poses(anonymized), self.distance, self.per, self._window())

    def floor(self, table) -> float:
        x = poses(table)
        if not len(x):
            return 0.0
        mean = np.broadcast_to(x.mean(axis=0, dtype=np.float64), x.shape)
        return float(np.mean(pose_distance(x, mean, self.distance, self.per, self._window())))


@attrs.define(kw_only=True)
class EuclideanDistance(_SequenceDistance):
    """Euclidean distance: mean lock-step distance between clear and anonymized joint positions (data units)."""

    id: ClassVar[str] = "gait.euclidean"
    distance: ClassVar[str] = "euclidean"


@attrs.define(kw_only=True)
class DtwDistance(_SequenceDistance):
    """Dynamic time warping distance between clear and anonymized trajectories (symmetric steps, normalized by
    the summed lengths; optional Sakoe–Chiba ``window``), vectorized over the batch."""

    id: ClassVar[str] = "gait.dtw"
    distance: ClassVar[str] = "dtw"

    window: int = param(0, help="Sakoe-Chiba band half-width in frames (0 = unrestricted)", low=0)

    def _window(self) -> int:
        return self.window


@attrs.define(kw_only=True)
class FrechetDistance(_SequenceDistance):
    """Discrete Fréchet distance between clear and anonymized trajectories (the largest coupled point distance
    of the best monotone coupling), vectorized over the batch."""

    id: ClassVar[str] = "gait.frechet"
    distance: ClassVar[str] = "frechet"


@attrs.define(kw_only=True)
class GaitAttributeAccuracy(UtilityMeasure):
    """Attribute classification utility (sex, gait type, …): ``any.attribute_accuracy`` on gait features.

    ``fit(clear)`` learns the features (translation-invariant ``simple`` or ``flatten``) and trains the
    attribute classifier on clear data; ``measure`` is 1 where it predicts an anonymized sample's original
    attribute, 0 where not. Floor: the majority-class rate."""

    id: ClassVar[str] = "gait.attribute_accuracy"
    attribute_params: ClassVar[tuple[str, ...]] = ("attribute",)
    trait: ClassVar[str] = "gait"
    payloads: ClassVar[tuple[str, ...]] = ("pose",)
    paired: ClassVar[bool] = False
    example_params: ClassVar[dict] = {"attribute": "group"}

    attribute: str = param("sex", help="attribute to predict")
    features: Features = param("simple", help=FEATURES_HELP)
    centering: Centering = param("frame", help=CENTERING_HELP)
    classifier: Literal["random_forest", "logistic_regression", "knn"] = param(
        "random_forest", help="the attribute classifier"
    )
    seed: int = param(0, help="random seed (random forest)")
    n_jobs: int = param(1, help="parallel jobs of the random forest (-1 = all cores)", affects_output=False)

    extractor_: GaitFeatures | None = fitted()
    inner_: AttributeAccuracy | None = fitted()

    def _features(self, table):
        return table.with_payload("features", per_walk(table, self.extractor_.transform), drop="pose")

    def fit(self, clear):
        self.extractor_ = GaitFeatures(kind=self.features, centering=self.centering).fit(poses(clear))
        self.inner_ = AttributeAccuracy(
            attribute=self.attribute, classifier=self.classifier, seed=self.seed, n_jobs=self.n_jobs
        ).fit(self._features(clear))
        return self

    def measure(self, original, anonymized) -> np.ndarray:
        require_fitted(self, "inner_", call="fit(clear)", before="measure()")
        anonymized = align(original, anonymized)
        inner = cast(AttributeAccuracy, self.inner_)
        return inner.measure(self._features(original), self._features(anonymized))

    def floor(self, table) -> float:
        return AttributeAccuracy(attribute=self.attribute).floor(table)

"""Gait utility measures (``seba.txt`` App. B.4): attribute classification, and dynamic time warping,
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

Both dynamic programs run along anti-diagonals of the frame-pair grid, vectorized over all sequences (and
joints) of a batch at once: 2T − 1 numpy steps per chunk, no per-pair Python loop. Lower is better; the
floor (no utility) is the distance of each sequence to the table's mean sequence — the output of an
anonymization that keeps nothing individual. Rows are matched by sample id.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import attrs
import numpy as np

from bioanon import UtilityMeasure, param
from bioanon.builtin.utility import AttributeAccuracy, align
from bioanon.methods import fitted

from .features import CENTERING_HELP, FEATURES_HELP, Centering, Features, GaitFeatures
from .skeleton import poses

_CHUNK_VALUES = 1 << 22  # sequences × frames × dims per chunk of the dynamic programs (bounds temporaries)


def _trajectories(x: np.ndarray, per: str) -> np.ndarray:
    """``(N, T, J, 3)`` → batch of point sequences: ``(N·J, T, 3)`` per joint, ``(N, T, J·3)`` per pose."""
    n, t, j, _ = x.shape
    if per == "joint":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(n * j, t, 3), dtype=np.float64)
    return np.ascontiguousarray(x.reshape(n, t, j * 3), dtype=np.float64)


def _dp(a: np.ndarray, b: np.ndarray, kind: str, window: int) -> np.ndarray:
    """DTW (symmetric2, normalized) or discrete Fréchet between ``a[i]`` and ``b[i]`` (``(B, T, D)``, ``(B, U, D)``),
    computed along anti-diagonals: ``prev``/``prev2`` hold the two previous diagonals indexed by row i."""
    B, T, _ = a.shape
    U = b.shape[1]
    inf = np.inf
    prev2 = np.full((B, T + 1), inf)  # diagonal k-2 (cells i + j = k - 2)
    prev = np.full((B, T + 1), inf)  # diagonal k-1
    prev2[:, 0] = 0.0  # cell (0, 0) is the start; the rest of row 0 / column 0 is the boundary (inf)
    band = window if window > 0 else max(T, U)
    band = max(band, abs(T - U))  # the end cell must stay reachable
    for k in range(2, T + U + 1):
        lo, hi = max(1, k - U), min(T, k - 1)
        cur = np.full((B, T + 1), inf)
        # restrict to the Sakoe-Chiba band |i - j| <= band, i.e. |2i - k| <= band
        lo, hi = max(lo, (k - band + 1) // 2), min(hi, (k + band) // 2)
        if lo <= hi:
            ii = np.arange(lo, hi + 1)
            c = np.linalg.norm(a[:, ii - 1] - b[:, k - ii - 1], axis=2)  # (B, L) point distances
            up, left, diag = prev[:, lo - 1: hi], prev[:, lo: hi + 1], prev2[:, lo - 1: hi]
            if kind == "dtw":
                cur[:, lo: hi + 1] = np.minimum(np.minimum(up, left) + c, diag + 2.0 * c)
            else:
                cur[:, lo: hi + 1] = np.maximum(c, np.minimum(np.minimum(up, left), diag))
        prev2, prev = prev, cur
    end = prev[:, T]
    return end / (T + U) if kind == "dtw" else end


def sequence_distance(a: np.ndarray, b: np.ndarray, kind: str, window: int = 0) -> np.ndarray:
    """Distances between point sequences ``a[i]`` and ``b[i]`` (``(B, T, D)``), chunked over the batch."""
    if kind == "euclidean":
        return np.linalg.norm(a - b, axis=2).mean(axis=1)
    step = max(1, _CHUNK_VALUES // max(1, a.shape[1] * a.shape[2]))
    return np.concatenate([_dp(a[s:s + step], b[s:s + step], kind, window) for s in range(0, len(a), step)]) \
        if len(a) else np.zeros(0)


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
    reference: ClassVar[str] = "SEBA's gait time-series distances (seba.txt App. B.4)"
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
    trait: ClassVar[str] = "gait"
    payloads: ClassVar[tuple[str, ...]] = ("pose",)
    paired: ClassVar[bool] = False
    example_params: ClassVar[dict] = {"attribute": "group"}

    attribute: str = param("sex", help="attribute to predict")
    features: Features = param("simple", help=FEATURES_HELP)
    centering: Centering = param("frame", help=CENTERING_HELP)
    classifier: Literal["random_forest", "logistic_regression", "knn"] = param("random_forest",
                                                                               help="the attribute classifier")
    seed: int = param(0, help="random seed (random forest)")
    n_jobs: int = param(1, help="parallel jobs of the random forest (-1 = all cores)", affects_output=False)

    extractor_: GaitFeatures | None = fitted()
    inner_: AttributeAccuracy | None = fitted()

    def _features(self, table):
        return table.with_payload("features", self.extractor_.transform(poses(table)), drop="pose")

    def fit(self, clear):
        self.extractor_ = GaitFeatures(kind=self.features, centering=self.centering).fit(poses(clear))
        self.inner_ = AttributeAccuracy(attribute=self.attribute, classifier=self.classifier, seed=self.seed,
                                        n_jobs=self.n_jobs).fit(self._features(clear))
        return self

    def measure(self, original, anonymized) -> np.ndarray:
        if self.inner_ is None:
            raise RuntimeError(f"{self.id}: fit(clear) before measure()")
        anonymized = align(original, anonymized)
        return self.inner_.measure(self._features(original), self._features(anonymized))

    def floor(self, table) -> float:
        return AttributeAccuracy(attribute=self.attribute).floor(table)

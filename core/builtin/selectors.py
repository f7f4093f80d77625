"""Subject selection strategies (the False Sense of Privacy paper §4.3.3).

Each selector picks ``n`` subjects of the anonymized evaluation set that make identification easy, so the
anonymization faces a hard problem: random (the baseline), classification (highest identification accuracy),
metadata (most diverse attributes), distinctive (low intra-, high inter-class distance) and center (feature
vectors far apart). The learned ones fit their recognizer on the anonymized attacker set (``attacker=``),
which has subjects disjoint from the evaluation set.

``select(table, n, *, attacker=None)`` returns ``n`` distinct subject names in selection order; every subject
is indexed by its position in ``table.subject_names`` (sorted), so results do not depend on row order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

import attrs
import numpy as np
from numpy.typing import NDArray

from ..errors import DataError, TableError
from ..methods import Recognizer, Selector, feature_matrix, param

if TYPE_CHECKING:  # types only
    from ..table import SampleTable

_CHUNK_ELEMS = 1 << 22  # distance-matrix elements computed at once


def _check_n(method: Selector, table: SampleTable, n: int) -> list[str]:
    """The table's sorted subject names, after checking 1 <= n <= their number."""
    names = table.subject_names
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise TableError(f"{method.id}: n must be a positive integer, got {n!r}")
    if n > len(names):
        raise TableError(f"{method.id}: cannot select n={n} subjects from a table with only {len(names)} subjects")
    return names


def _subject_codes(table: SampleTable, names: list[str]) -> np.ndarray:
    return np.searchsorted(np.asarray(names, dtype=object), table.subjects).astype(np.intp)


def _group_means(x: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Per-group mean rows of ``x`` (vectorized via sorting + reduceat)."""
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=n_groups)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    sums = np.add.reduceat(x[order].astype(np.float64), starts, axis=0)
    return sums / counts[:, None]


def _pair_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d2: NDArray[np.float64] = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.sqrt(np.maximum(d2, 0.0))


def _farthest_pair(points: np.ndarray) -> tuple[int, int]:
    """Indices of the two points at the largest Euclidean distance (first maximum in row-major order)."""
    best, pair = -1.0, (0, 0)
    step = max(1, _CHUNK_ELEMS // max(len(points), 1))
    for lo in range(0, len(points), step):  # row chunks bound the memory of the S × S distances
        d = _pair_dist(points[lo : lo + step], points)
        i, j = np.unravel_index(int(np.argmax(d)), d.shape)
        if d[i, j] > best:
            best, pair = float(d[i, j]), (lo + int(i), int(j))
    return pair


def spread_greedy(points: np.ndarray, n: int, seed: int = 0) -> list[int]:
    """Greedy max-spread selection of ``n`` rows of ``points`` (the paper's metadata and center strategies).

    Start with the two points at the largest pairwise distance (the one farther from the mean of all points
    first), then repeatedly add the point farthest from the mean of the points chosen so far. Ties go to the
    earlier point in a ``seed``-permuted order. ``n = 1`` returns the first point of the pair, so a smaller
    selection is always a prefix of a larger one."""
    perm = np.random.default_rng(seed).permutation(len(points))
    p = np.asarray(points, dtype=np.float64)[perm]
    if len(p) == 1:
        return [int(perm[0])]
    i, j = _farthest_pair(p)
    centre = p.mean(axis=0)
    if np.linalg.norm(p[j] - centre) > np.linalg.norm(p[i] - centre):
        i, j = j, i
    chosen = [i, j][:n]
    free = np.ones(len(p), bool)
    free[chosen] = False
    total = p[chosen].sum(axis=0)
    while len(chosen) < n:
        d = np.linalg.norm(p - total / len(chosen), axis=1)
        d[~free] = -np.inf
        k = int(np.argmax(d))
        chosen.append(k)
        free[k] = False
        total += p[k]
    return [int(perm[c]) for c in chosen]


def _recognizer(recognizer_id: str) -> Recognizer:
    from ..context import current_context

    return cast(Recognizer, current_context().create(recognizer_id, "recognizer"))  # of kind "recognizer"


def _require_attacker(method: Selector, attacker: SampleTable | None) -> None:
    if attacker is None:
        raise TableError(
            f"{method.id} trains its recognizer on the anonymized attacker set: pass select(..., attacker=table)"
        )


# --------------------------------------------------------------------------------------------------- selectors


@attrs.define(kw_only=True)
class RandomSelection(Selector):
    """Random subjects (the baseline strategy): a seeded permutation of the sorted subject names."""

    id: ClassVar[str] = "any.select_random"
    payloads: ClassVar[tuple[str, ...]] = ("*",)
    reads_payloads: ClassVar[bool] = False
    subjects_only: ClassVar[bool] = True  # the same subjects for every anonymizer setting

    seed: int = param(0, help="random seed")

    def select(self, table: SampleTable, n: int, *, attacker: SampleTable | None = None) -> list[str]:
        names = _check_n(self, table, n)
        return [names[i] for i in np.random.default_rng(self.seed).permutation(len(names))[:n]]


@attrs.define(kw_only=True)
class ClassificationSelection(Selector):
    """Subjects with the highest identification accuracy under a recognizer trained on anonymized data.

    The recognizer is fitted on the anonymized attacker set; each evaluation subject's samples are split
    (seeded, ``repeats`` times) into enrolment and probes, and subjects are ranked by their mean top-1
    accuracy, ties broken by the mean margin of the true class's score over the best other class.

    With ``by`` (SEBA's ``classification`` selector and its ``key``, ``peers/seba.md`` §5) the subjects are
    instead ranked by a stored per-subject numeric attribute column, e.g. a precomputed hit rate, and no
    recognizer or attacker set is used: ``order = "descending"`` keeps the ``n`` subjects with the highest
    values (SEBA sorts ascending and keeps the last ``ids``, i.e. the highest), ``"ascending"`` the lowest; ties
    go to the subject whose name sorts first. The column must hold one number per subject (DataError naming
    the column otherwise)."""

    id: ClassVar[str] = "any.select_classification"
    attribute_params: ClassVar[tuple[str, ...]] = ("by",)
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")

    recognizer: str = param("any.lda_cosine", help="id of the recognizer that ranks the subjects")
    enrolment: float = param(
        0.5,
        help="share of each subject's samples enrolled",
        low=0.0,
        high=1.0,
        low_inclusive=False,
        high_inclusive=False,
    )
    repeats: int = param(3, help="enrolment/probe splits averaged", low=1)
    seed: int = param(0, help="random seed of the splits")
    by: str = param(
        "",
        help="rank by this stored per-subject numeric attribute instead ('' = by the accuracy "
        "of recognizer; SEBA's key, e.g. a precomputed hit rate)",
    )
    order: str = param(
        "descending",
        help="with by: 'descending' keeps the subjects with the highest values (SEBA), 'ascending' the lowest",
        choices=("descending", "ascending"),
    )

    def subject_values(self, table: SampleTable) -> np.ndarray:
        """The ``by`` column's value per subject, in ``table.subject_names`` order (DataError when the column
        is missing, not numeric, missing for a subject or not constant within a subject)."""
        names = table.subject_names
        if self.by not in table.attribute_names:
            raise DataError(
                f"{self.id}: by = {self.by!r}: the table has no attribute column {self.by!r}; "
                f"available: {table.attribute_names}"
            )
        raw = table.attribute(self.by)
        if raw.dtype.kind not in "biuf":
            raise DataError(
                f"{self.id}: by = {self.by!r}: the column is not numeric (values like "
                f"{raw[:3].tolist()}); rank by a column of numbers"
            )
        v = raw.astype(np.float64)
        codes = _subject_codes(table, names)
        if np.isnan(v).any():
            bad = sorted({names[c] for c in codes[np.isnan(v)]})
            raise DataError(
                f"{self.id}: by = {self.by!r}: no value for subjects {bad[:5]}"
                + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            )
        n_subj = len(names)
        lo = np.full(n_subj, np.inf)
        hi = np.full(n_subj, -np.inf)
        np.minimum.at(lo, codes, v)
        np.maximum.at(hi, codes, v)
        differ = np.flatnonzero(lo != hi)
        if differ.size:
            s = names[differ[0]]
            raise DataError(
                f"{self.id}: by = {self.by!r}: the column's values differ within subjects (subject "
                f"{s!r} has values from {lo[differ[0]]:g} to {hi[differ[0]]:g}; {differ.size} "
                f"subjects in all): rank by a per-subject attribute"
            )
        return lo

    def select(self, table: SampleTable, n: int, *, attacker: SampleTable | None = None) -> list[str]:
        from ..metrics import label_indices, per_subject_accuracy

        names = _check_n(self, table, n)
        if self.by:
            v = self.subject_values(table)
            order = np.lexsort((np.arange(len(names)), -v if self.order == "descending" else v))
            return [names[i] for i in order[:n]]
        _require_attacker(self, attacker)
        rec = _recognizer(self.recognizer).fit(attacker, "subject")
        acc = np.zeros(len(names))
        margin = np.zeros(len(names))
        for r in range(self.repeats):
            gallery, probes = table.split_within_subjects([self.enrolment, 1.0 - self.enrolment], self.seed + r)
            s = rec.enroll(gallery, "subject").score(probes)
            true = label_indices(probes.subjects, s.classes)
            col = label_indices(np.asarray(s.classes, dtype=object), np.asarray(names, dtype=object))
            acc[col] += per_subject_accuracy(s.scores, true)
            rows = np.arange(len(true))
            other = s.scores.copy()
            other[rows, true] = -np.inf
            m = s.scores[rows, true] - other.max(axis=1) if other.shape[1] > 1 else np.zeros(len(true))
            margin[col] += np.bincount(true, weights=m, minlength=len(col)) / np.bincount(true, minlength=len(col))
        order = np.lexsort((np.arange(len(names)), -margin, -acc))
        return [names[i] for i in order[:n]]


@attrs.define(kw_only=True)
class MetadataSelection(Selector):
    """Subjects with the most diverse attributes (greedy max-spread over normalized metadata).

    Per subject, numeric attributes are averaged and min-max normalized to [0, 1]; categorical ones are
    one-hot encoded (a subject's share of each value). Selection: the two subjects farthest apart, then
    repeatedly the subject farthest from the mean of those chosen (see :func:`spread_greedy`)."""

    id: ClassVar[str] = "any.select_metadata"
    attribute_params: ClassVar[tuple[str, ...]] = ("attributes",)
    payloads: ClassVar[tuple[str, ...]] = ("*",)
    reads_payloads: ClassVar[bool] = False

    attributes: tuple[str, ...] = param((), help="attribute names to use (empty = all)")
    seed: int = param(0, help="random seed breaking ties between subjects with equal metadata")

    def metadata_matrix(self, table: SampleTable) -> np.ndarray:
        """(subjects × features) normalized metadata, rows in ``table.subject_names`` order."""
        names = table.subject_names
        attrs_ = list(self.attributes) or table.attribute_names
        if not attrs_:
            raise TableError(f"{self.id}: the table has no attributes to select by")
        codes = _subject_codes(table, names)
        n_subj = len(names)
        counts = np.bincount(codes, minlength=n_subj).astype(np.float64)
        cols = []
        for a in attrs_:
            v = table.attribute(a)
            if v.dtype.kind in "biuf":
                v = v.astype(np.float64)
                ok = ~np.isnan(v)
                num = np.bincount(codes[ok], weights=v[ok], minlength=n_subj)
                den = np.bincount(codes[ok], minlength=n_subj)
                m = np.divide(num, den, out=np.full(n_subj, np.nan), where=den > 0)
                m[np.isnan(m)] = np.nanmean(m) if np.isfinite(m).any() else 0.0
                span = m.max() - m.min()
                cols.append(((m - m.min()) / span if span > 0 else np.zeros(n_subj))[:, None])
            else:
                _, cat = np.unique(v.astype(str), return_inverse=True)
                k = int(cat.max()) + 1
                onehot = np.bincount(codes * k + cat, minlength=n_subj * k).reshape(n_subj, k)
                cols.append(onehot / counts[:, None])
        return np.hstack(cols)

    def select(self, table: SampleTable, n: int, *, attacker: SampleTable | None = None) -> list[str]:
        names = _check_n(self, table, n)
        return [names[i] for i in spread_greedy(self.metadata_matrix(table), n, self.seed)]


@attrs.define(kw_only=True)
class _EmbeddingSelector(Selector):
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")

    recognizer: str = param(
        "any.lda_cosine", help="id of a recognizer with an embedding ('' = the standardized payload)"
    )
    payload: str = param("", help="payload column when recognizer is '' (default: the first one present)")

    def embedding(self, table: SampleTable, attacker: SampleTable | None) -> np.ndarray:
        """The evaluation samples in the recognizer's feature space, fitted on ``attacker`` (else on
        ``table``), or the payload standardized over ``table`` when no recognizer is set."""
        if not self.recognizer:
            # the first payload of the table, flattened, or a trait plugin's feature view of it (e.g. audio)
            x = feature_matrix(table, self.payload or None, candidates=table.payload_names, who=self.id).astype(
                np.float64
            )
            sd = x.std(axis=0)
            standardized: NDArray[np.float64] = (x - x.mean(axis=0)) / np.where(sd > 1e-12, sd, 1.0)
            return standardized
        from ..cache import table_fingerprint
        from ..context import current_context

        if not _recognizer(self.recognizer).has_embedding:
            raise TableError(
                f"{self.id}: recognizer {self.recognizer!r} has no embedding; use one with an "
                f"embedding (e.g. any.lda_cosine) or '' for the payload space"
            )
        train = attacker if attacker is not None else table
        # the same fit serves every subject count of a selection sweep (keyed by the training data's content)
        # (the run's store of fits: the select task activates the run's context)
        ctx = current_context()
        rec = ctx.fit({"id": self.recognizer}, ["table", table_fingerprint(train)], "subject", lambda: train)
        return np.asarray(rec.embed(table), dtype=np.float64)


@attrs.define(kw_only=True)
class DistinctiveSelection(_EmbeddingSelector):
    """Subjects least likely to be confused: small intra-class and large inter-class distances.

    In a recognizer's embedding fitted on the anonymized attacker set, a subject's genuine score is the
    largest distance of its samples to its mean, its imposter score the smallest distance of its mean to
    another subject's sample (the Biometric Menagerie scores). Subjects are ranked by imposter − genuine
    (high inter-, low intra-class distance first)."""

    id: ClassVar[str] = "any.select_distinctive"

    def scores(self, table: SampleTable, attacker: SampleTable | None) -> tuple[np.ndarray, np.ndarray]:
        """(genuine, imposter) per subject in ``table.subject_names`` order. ``attacker`` is required when a
        recognizer is set (its embedding is fitted there)."""
        if self.recognizer:
            _require_attacker(self, attacker)
        names = table.subject_names
        e = self.embedding(table, attacker)
        codes = _subject_codes(table, names)
        means = _group_means(e, codes, len(names))
        genuine, imposter = np.empty(len(names)), np.empty(len(names))
        step = max(1, _CHUNK_ELEMS // max(len(e), 1))
        for lo in range(0, len(names), step):  # subject chunks bound the memory of the S × N distances
            d = _pair_dist(means[lo : lo + step], e)
            own = codes[None, :] == np.arange(lo, lo + len(d))[:, None]
            genuine[lo : lo + step] = np.where(own, d, -np.inf).max(axis=1)
            imposter[lo : lo + step] = np.where(own, np.inf, d).min(axis=1)
        return genuine, imposter

    def select(self, table: SampleTable, n: int, *, attacker: SampleTable | None = None) -> list[str]:
        names = _check_n(self, table, n)
        genuine, imposter = self.scores(table, attacker)
        if len(names) == 1:
            return names
        order = np.argsort(-(imposter - genuine), kind="stable")
        return [names[i] for i in order[:n]]


@attrs.define(kw_only=True)
class CenterSelection(_EmbeddingSelector):
    """Subjects whose mean feature vectors lie farthest apart (greedy max-spread in a learned embedding).

    Per-subject mean vectors in a recognizer's embedding (fitted on the anonymized attacker set when given,
    else on the table itself) or in the standardized payload space; then the two means farthest apart, and
    repeatedly the subject farthest from the mean of those chosen (see :func:`spread_greedy`)."""

    id: ClassVar[str] = "any.select_center"

    seed: int = param(0, help="random seed breaking ties between equidistant subjects")

    def select(self, table: SampleTable, n: int, *, attacker: SampleTable | None = None) -> list[str]:
        names = _check_n(self, table, n)
        means = _group_means(self.embedding(table, attacker), _subject_codes(table, names), len(names))
        return [names[i] for i in spread_greedy(means, n, self.seed)]

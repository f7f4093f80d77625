"""Feature-level soft-biometric privacy enhancement of templates (the soft-biometric attack paper §II, Table I).

These protections work on *templates*: fixed-length vectors (the ``features`` payload), typically the
embeddings a recognizer's network computes (see the ``[templates]`` stage of an evaluation config).

* ``any.pe_miu``: PE-MIU (Terhörst et al. 2020): the template is cut into blocks ("minimum information units",
  MIUs) whose positions are shuffled at random for every template; the comparator aligns the blocks of probe and
  reference before comparing. The protection declares that comparator (:meth:`PeMiu.comparator`), so recognizers
  that compare templates use it (the black-box attacker of the soft-biometric attack paper).
* ``any.ive``: incremental variable elimination (Terhörst et al. 2019): the features a decision-tree ensemble
  finds most telling of the attribute are removed step by step.
* ``any.pfrnet`` (:mod:`bioanon.builtin.pfrnet`, torch): PFRNet (Bortolato et al. 2020): the identity part of
  the code of an autoencoder trained to keep identity in it and hide the attribute from it.

:func:`verification_eer` gives the verification equal error rate of a template table (all mated and non-mated
pairs, compared with the table's declared comparator or cosine), as the paper's Table III reports before and
after protection.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from ..errors import ParameterError, TableError, TooFewValuesError, require_fitted
from ..methods import (
    Anonymizer,
    Comparator,
    UtilityMeasure,
    feature_matrix,
    fitted,
    param,
    table_comparator,
    with_comparator,
)

__all__ = ["Ive", "PeMiu", "VerificationError", "block_alignment_scores", "cosine_scores", "verification_eer"]

_BLOCK_ELEMENTS = 1 << 22  # probe × reference × block × block similarities computed per chunk


def _l2(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return out


def cosine_scores(probes: np.ndarray, references: np.ndarray) -> np.ndarray:
    """``(P, R)`` cosine similarities."""
    s: np.ndarray = _l2(np.asarray(probes, np.float64)) @ _l2(np.asarray(references, np.float64)).T
    return s


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer on uint64 arrays (wrapping arithmetic): a fast stateless hash."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    hashed: np.ndarray = x ^ (x >> np.uint64(31))
    return hashed


def _sample_keys(sample_ids: np.ndarray, seed: int) -> np.ndarray:
    """One 64-bit key per sample id (blake2b of the seed and the id): the same sample always gets the same
    key, whatever table it is in."""
    import hashlib

    out = np.empty(len(sample_ids), dtype=np.uint64)
    prefix = f"{int(seed)}:".encode()
    for i, sid in enumerate(sample_ids):
        out[i] = int.from_bytes(hashlib.blake2b(prefix + str(sid).encode(), digest_size=8).digest(), "little")
    return out


def per_sample_permutations(sample_ids: np.ndarray, n_blocks: int, seed: int) -> np.ndarray:
    """``(N, n_blocks)`` block permutations, one per sample, drawn from the seed and the sample id (vectorized:
    argsort of hashed keys)."""
    keys = _sample_keys(np.asarray(sample_ids), seed)
    with np.errstate(over="ignore"):
        u = _splitmix64(keys[:, None] ^ _splitmix64(np.arange(n_blocks, dtype=np.uint64))[None, :])
    return np.argsort(u, axis=1, kind="stable")


def _greedy_assignment(g: np.ndarray) -> np.ndarray:
    """Greedy maximum-weight block matching of every ``(B, B)`` matrix in ``g`` (shape ``(K, B, B)``),
    vectorized over K: B rounds, each taking the largest remaining entry and closing its row and column."""
    k, b, _ = g.shape
    g = g.copy()
    total = np.zeros(k)
    rows = np.arange(k)
    for _ in range(b):
        idx = g.reshape(k, b * b).argmax(axis=1)
        i, j = np.divmod(idx, b)
        total += g[rows, i, j]
        g[rows, i, :] = -np.inf
        g[rows, :, j] = -np.inf
    return total


def _optimal_assignment(g: np.ndarray) -> np.ndarray:
    """Maximum-weight perfect block matching of every ``(B, B)`` matrix in ``g`` (Hungarian method, SciPy's
    ``linear_sum_assignment``; one call per pair, the block similarities themselves are computed vectorized)."""
    from scipy.optimize import linear_sum_assignment

    out = np.empty(len(g))
    for n, m in enumerate(g):
        i, j = linear_sum_assignment(m, maximize=True)
        out[n] = m[i, j].sum()
    return out


def block_alignment_scores(
    probes: np.ndarray, references: np.ndarray, block_size: int, assignment: str = "optimal"
) -> np.ndarray:
    """PE-MIU comparison: the cosine similarity of probe and reference after aligning their blocks.

    Both templates are L2-normalized and cut into ``D // block_size`` blocks (a trailing partial block stays in
    place and is compared directly). The block dot products of every probe–reference pair are computed at once
    (batched matrix products, in chunks); the alignment is the block assignment that maximizes their sum, which
    is exactly the assignment that maximizes the cosine of the aligned templates (and minimizes their squared
    Euclidean distance, as norms do not change under block permutations). ``assignment``: ``optimal`` (Hungarian
    method, exact) or ``greedy`` (vectorized over all pairs, a lower bound of the optimum)."""
    p = _l2(np.asarray(probes, np.float64))
    r = _l2(np.asarray(references, np.float64))
    d = p.shape[1]
    nb = d // block_size
    cut = nb * block_size
    out: np.ndarray = p[:, cut:] @ r[:, cut:].T  # the trailing partial block (zero when D divides)
    if nb == 0:
        return out
    pb = p[:, :cut].reshape(len(p), nb, block_size)
    rt = r[:, :cut].reshape(len(r), nb, block_size).transpose(0, 2, 1)  # (R, bs, B)
    solve = _optimal_assignment if assignment == "optimal" else _greedy_assignment
    step = max(1, _BLOCK_ELEMENTS // max(1, len(r) * nb * nb))
    for start in range(0, len(p), step):
        g = pb[start : start + step, None] @ rt[None]  # (c, R, B, B): probe block i · reference block j
        out[start : start + step] += solve(g.reshape(-1, nb, nb)).reshape(len(g), len(r))
    return out


@attrs.define(kw_only=True)
class PeMiu(Anonymizer):
    """PE-MIU: per-template random shuffling of blocks ("minimum information units") with an aligning comparator.

    Terhörst, Riehl, Damer, Rot, Bortolato, Kirchbuchner, Štruc, Kuijper: "PE-MIU: a training-free
    privacy-enhancing face recognition approach based on minimum information units", IEEE Access 8 (2020);
    attacked in the soft-biometric attack paper (§II, Tables II–IX). The flattened template is cut into
    consecutive blocks of ``block_size`` values; the blocks of *every template* are permuted with its own
    random permutation (drawn from ``seed`` and the sample id, so reproducible and independent of the table the
    sample is in); a trailing partial block stays in place. A classifier trained on such templates sees values
    at random positions, which is what made classifiers fail on PE-MIU templates (Table IV).

    The comparator (:meth:`comparator`) aligns the blocks of probe and reference before comparing:
    The soft-biometric attack paper says only that "the comparison procedure incorporates an alignment step of the
    MIUs between the transformed probe and references"; here the alignment is the block assignment that
    maximizes the cosine of the aligned templates, found by the Hungarian method (``assignment = "optimal"``,
    the exact optimum; recalled from the PE-MIU paper, which assigns MIUs with the Hungarian algorithm) or
    greedily (``"greedy"``, vectorized over all pairs and faster for many blocks, a lower bound). Identity
    comparisons therefore keep the similarity of the clear templates up to the alignment, and the attack of
    the soft-biometric attack paper (``any.similarity_attribute_attack`` with this comparator) applies."""

    id: ClassVar[str] = "any.pe_miu"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    reference: ClassVar[str] = "pe-miu; soft-biometric §II, Tables II-IX"
    example_params: ClassVar[dict[str, Any]] = {"block_size": 2}

    block_size: int = param(16, help="values per block (minimum information unit)", low=1)
    assignment: str = param(
        "optimal",
        help="block alignment of the comparator: optimal (Hungarian) or greedy",
        choices=("optimal", "greedy"),
    )
    seed: int = param(0, help="random seed of the per-template permutations")
    payload: str = param("", help="template payload column (default: features)")

    def transform(self, table: Any) -> Any:
        column = self.payload_column(table, self.payload or None)
        x = np.asarray(table.payload(column))
        flat = x.reshape(len(x), -1)
        nb = flat.shape[1] // self.block_size
        if nb < 2:
            raise ParameterError(
                self.id,
                "block_size",
                self.block_size,
                f"at most half the template length ({flat.shape[1]} values) so that there are blocks to shuffle",
            )
        cut = nb * self.block_size
        perm = per_sample_permutations(table.sample_ids, nb, self.seed)  # (N, B)
        blocks = flat[:, :cut].reshape(len(flat), nb, self.block_size)
        shuffled = np.take_along_axis(blocks, perm[:, :, None], axis=1).reshape(len(flat), cut)
        out = np.concatenate([shuffled, flat[:, cut:]], axis=1).reshape(x.shape).astype(x.dtype, copy=False)
        return with_comparator(table.with_payload(column, out), self)

    def comparator(self) -> Comparator:
        """Block-aligned cosine similarity (:func:`block_alignment_scores`)."""
        bs, how = self.block_size, self.assignment

        def compare(probes: np.ndarray, references: np.ndarray) -> np.ndarray:
            return block_alignment_scores(probes, references, bs, how)

        return Comparator(f"PE-MIU block alignment (block_size={bs}, {how})", compare)


def attribute_fitting_data(method: Any, table: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fitting data of a protection that suppresses ``method.attribute``: the templates (its ``payload``),
    the attribute values as text and the mask of samples that have one. Errors name the method and the
    attribute: none given, no such column, fewer than two values."""
    from .utility import _valid

    if not method.attribute:
        raise ParameterError(method.id, "attribute", method.attribute, "the name of an attribute column to suppress")
    if method.attribute not in table.attribute_names:
        raise TableError(
            f"{method.id}: the fitting data have no attribute {method.attribute!r}; they have {table.attribute_names}"
        )
    x = feature_matrix(table, method.payload or None, candidates=method.payloads, who=method.id)
    raw = table.attribute(method.attribute)
    known = _valid(raw)
    values = np.full(len(raw), "", dtype=object)
    values[known] = raw[known].astype(str)
    if len(set(values[known].tolist())) < 2:
        raise TooFewValuesError(
            f"{method.id}: fit() needs at least two values of {method.attribute!r} in the fitting "
            f"data, got {sorted(set(values[known].tolist()))}"
        )
    return x, values, known


@attrs.define(kw_only=True)
class Ive(Anonymizer):
    """IVE: incremental variable elimination of the template features most telling of an attribute.

    Terhörst, Damer, Kirchbuchner, Kuijper: "Suppressing gender and age in face templates using incremental
    variable elimination", ICB 2019 (the soft-biometric attack paper §II, Table I). ``fit`` trains a
    decision-tree ensemble (a random forest of ``n_estimators`` trees) to predict ``attribute`` from the
    templates of the data it is fitted on (the background set in an evaluation, else the set it anonymizes),
    removes the ``per_step`` features with the highest importance, and repeats on the remaining features
    ``steps`` times; ``transform`` drops the removed features from every template (a template of
    ``D - steps · per_step`` values, compared as before, with cosine). Samples without an attribute value are
    ignored by ``fit``."""

    id: ClassVar[str] = "any.ive"
    attribute_params: ClassVar[tuple[str, ...]] = ("attribute",)
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    needs_fit: ClassVar[bool] = True
    fit_defines_columns: ClassVar[bool] = True  # the features kept are the fit's choice
    reference: ClassVar[str] = "ive; soft-biometric §II, Table I"
    example_params: ClassVar[dict[str, Any]] = {"attribute": "group", "per_step": 1, "steps": 2, "n_estimators": 10}

    attribute: str = param("", help="the attribute to suppress (an attribute column of the fitting data)")
    per_step: int = param(2, help="features removed per elimination step", low=1)
    steps: int = param(10, help="elimination steps", low=1)
    n_estimators: int = param(100, help="trees of the ensemble trained at every step", low=1)
    seed: int = param(0, help="random seed of the ensemble")
    payload: str = param("", help="template payload column (default: features)")
    n_jobs: int = param(1, help="parallel jobs of the ensemble (-1 = all cores)", affects_output=False)

    keep_: np.ndarray | None = fitted()
    dim_: int | None = fitted()

    def fit(self, background: Any) -> Ive:
        from sklearn.ensemble import RandomForestClassifier

        x, y, ok = attribute_fitting_data(self, background)
        x, y = x[ok], y[ok]
        d = x.shape[1]
        if self.steps * self.per_step >= d:
            raise ParameterError(
                self.id, "steps", self.steps, f"steps * per_step < {d} (the template length) so that features remain"
            )
        keep = np.arange(d)
        for step in range(self.steps):
            forest = RandomForestClassifier(
                n_estimators=self.n_estimators, random_state=self.seed + step, n_jobs=self.n_jobs
            ).fit(x[:, keep], y)
            order = np.argsort(-forest.feature_importances_, kind="stable")
            keep = np.delete(keep, order[: self.per_step])
        self.keep_, self.dim_ = np.sort(keep), d
        return self

    def transform(self, table: Any) -> Any:
        require_fitted(self, "keep_", call="fit()", before="transform()")
        column = self.payload_column(table, self.payload or None)
        x = feature_matrix(table, column, who=self.id)
        if x.shape[1] != self.dim_:
            raise TableError(f"{self.id}: templates have {x.shape[1]} values, fitted on {self.dim_}")
        return table.with_payload(column, np.ascontiguousarray(x[:, self.keep_]))


def _pair_scores(
    table: Any, comparator: Comparator | None, payload: str | None, registry: Any, who: str
) -> tuple[np.ndarray, Any]:
    """All-pairs similarity matrix of a template table and the comparator used (None: cosine)."""
    cmp = comparator if comparator is not None else table_comparator(table, registry)
    x = feature_matrix(table, payload, who=who, registry=registry)
    return (cmp(x, x) if cmp is not None else cosine_scores(x, x)), cmp


def verification_eer(
    table: Any, *, comparator: Comparator | None = None, payload: str | None = None, registry: Any = None
) -> dict[str, float]:
    """Verification performance of a template table, as the soft-biometric attack paper Table III reports it
    before and after protection: every pair of samples is compared once (mated: same subject), with
    ``comparator``, else the comparator the table's protection declares (:func:`bioanon.methods.table_comparator`),
    else cosine. Returns :func:`bioanon.metrics.verification_metrics` (``eer`` from the ROC convex hull,
    ``min_cllr``, ...) and ``comparator`` (its name)."""
    from ..metrics import verification_metrics

    s, cmp = _pair_scores(table, comparator, payload, registry, "verification_eer")
    iu = np.triu_indices(len(s), k=1)
    subjects = np.asarray(table.subjects)
    mated = subjects[iu[0]] == subjects[iu[1]]
    out: dict[str, Any] = dict(verification_metrics(s[iu][mated], s[iu][~mated]))
    out["comparator"] = cmp.name if cmp is not None else "cosine"
    return out


@attrs.define(kw_only=True)
class VerificationError(UtilityMeasure):
    """Verification error of the (protected) templates at their equal-error threshold, per sample (Table III).

    The soft-biometric attack paper Table III reports the verification EER of the original and the privacy-enhanced
    system. Every pair of anonymized samples is compared (with the comparator their protection declares, else
    cosine); the threshold is where the false match and false non-match rates over all pairs meet (the EER
    threshold); each sample's value is the mean of its own false non-match rate (over its mated comparisons) and
    false match rate (over its non-mated ones) at that threshold. The mean over samples is thus a per-sample
    average of the half total error rate at the EER threshold: close to the EER, with a subject bootstrap CI.
    The clear level is the same on the clear templates; the floor is 0.5 (chance). Samples without a mated
    comparison (a subject with one sample) have no value. The exact EER of a table:
    :func:`bioanon.builtin.templates.verification_eer`."""

    id: ClassVar[str] = "any.verification_error"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    higher_is_better: ClassVar[bool] = False
    paired: ClassVar[bool] = False
    reference: ClassVar[str] = "soft-biometric Table III (verification EER before and after protection)"

    payload: str = param("", help="template payload column (default: the first supported one present)")
    declared_comparator: bool = param(True, help="compare with the comparator the protection declares (else cosine)")

    def measure(self, original: Any, anonymized: Any) -> np.ndarray:
        cmp = None if self.declared_comparator else Comparator("cosine", cosine_scores)
        s, _ = _pair_scores(anonymized, cmp, self.payload or None, None, self.id)
        subjects = np.asarray(anonymized.subjects)
        same = subjects[:, None] == subjects[None, :]
        np.fill_diagonal(same, False)
        other = subjects[:, None] != subjects[None, :]
        iu = np.triu_indices(len(s), k=1)
        mated, nonmated = np.sort(s[iu][same[iu]]), np.sort(s[iu][other[iu]])
        if not len(mated) or not len(nonmated):
            return np.full(len(s), np.nan)
        t = np.unique(np.concatenate([mated, nonmated]))
        fnmr = np.searchsorted(mated, t, "left") / len(mated)
        fmr = 1.0 - np.searchsorted(nonmated, t, "left") / len(nonmated)
        thr = t[np.argmin(np.abs(fnmr - fmr))]
        with np.errstate(invalid="ignore"):
            fn = ((s < thr) & same).sum(1) / same.sum(1)
            fm = ((s >= thr) & other).sum(1) / np.maximum(other.sum(1), 1)
        return np.where(same.any(1), 0.5 * (fn + fm), np.nan)

    def floor(self, table: Any) -> float:
        return 0.5

"""Trait-agnostic de-anonymizers: learned inversions trained on (clear, anonymized) attacker pairs."""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from ..errors import TableError, require_fitted
from ..methods import Deanonymizer, fitted, param
from ..payloads import flatten_payload, restore_dtype


def _pairing(clear: Any, anonymized: Any) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(sample ids of the pairs, their rows in ``clear``, in ``anonymized``); rows None: the tables' own order."""
    ids_c, ids_a = clear.sample_ids, anonymized.sample_ids
    if len(ids_c) == len(ids_a) and np.array_equal(ids_c, ids_a):
        return np.asarray(ids_c), None, None
    common, ic, ia = np.intersect1d(ids_c, ids_a, return_indices=True)
    if len(common) == 0:
        raise TableError("the clear and anonymized tables share no sample ids: cannot pair them")
    return common, ic, ia


def paired_ids(clear: Any, anonymized: Any) -> np.ndarray:
    """The sample ids of the pairs :func:`paired_payloads` gives, in its order (a de-anonymizer that holds out
    some pairs names them by these ids: :meth:`~bioanon.methods.Deanonymizer.held_out_ids`)."""
    return _pairing(clear, anonymized)[0]


def held_out_pairs(ids: Any, share: float, seed: int, minimum: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """(held-out, training) positions in ``ids`` (the sample ids of a de-anonymizer's pairs, e.g.
    :func:`paired_ids`), in a seeded random order: a share ``share`` of the sources held out (none when fewer than
    ``minimum`` sources). An augmented copy (:mod:`bioanon.augment`, ``<id>#flip``) shares its source's status:
    the held-out positions are real pairs only, and the copies of a held-out source are in neither part, so no
    flipped or shifted twin of a validation image is trained on. Without copies this is
    ``perm[:n_val], perm[n_val:]`` of ``default_rng(seed).permutation(len(ids))`` (API 1.7)."""
    from ..augment import augmented_source, is_augmented

    arr = np.asarray(ids)
    copies = is_augmented(arr) if len(arr) else np.zeros(0, dtype=bool)
    if not copies.any():
        n = len(arr)
        n_val = int(round(share * n)) if n >= minimum and share > 0 else 0
        perm = np.random.default_rng(seed).permutation(n)
        return perm[:n_val], perm[n_val:]
    sources = augmented_source(arr)
    names, first, group = np.unique(sources, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # groups in the order their first pair comes
    rank_of_name = np.empty(len(names), dtype=np.int64)
    rank_of_name[order] = np.arange(len(names))
    n_groups = len(names)
    n_val = int(round(share * n_groups)) if n_groups >= minimum and share > 0 else 0
    perm = np.random.default_rng(seed).permutation(n_groups)
    position = np.empty(n_groups, dtype=np.int64)
    position[perm] = np.arange(n_groups)  # where each group (by first appearance) comes in the permutation
    pair_rank = position[rank_of_name[group]]
    ordered = np.argsort(pair_rank, kind="stable")
    held = pair_rank[ordered] < n_val
    return ordered[held & ~copies[ordered]], ordered[~held]


def paired_payloads(clear: Any, anonymized: Any, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Flattened payloads of the samples present in both tables, matched by sample id."""
    _, ic, ia = _pairing(clear, anonymized)
    y, x = flatten_payload(clear.payload(column)), flatten_payload(anonymized.payload(column))
    return (y, x) if ic is None or ia is None else (y[ic], x[ia])


@attrs.define(kw_only=True)
class RidgeInversion(Deanonymizer):
    """Linear (ridge) regression from anonymized to clear payloads, learned on the attacker's pairs.

    Undoes linear and permutation-like anonymizations exactly when it sees enough pairs, and partly undoes
    noise (the Wiener-like linear estimate). Payloads are flattened; the output keeps the payload's shape and
    dtype (integers clipped to their range). The Fantômas paper §4–5: reversal is the strongest test."""

    id: ClassVar[str] = "any.ridge_inversion"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    reference: ClassVar[str] = "fantomas §4-5 (de-anonymization before recognition)"

    alpha: float = param(1e-3, help="ridge penalty (relative to the mean feature variance)", low=0.0)
    payload: str = param("", help="payload column (default: the first supported one present)")

    weights_: np.ndarray | None = fitted()
    column_: str | None = fitted()

    def fit(self, clear: Any, anonymized: Any) -> RidgeInversion:
        column = self.payload_column(anonymized, self.payload or None)
        y, x = paired_payloads(clear, anonymized, column)
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        mx, my = x64.mean(0), y64.mean(0)
        xc, yc = x64 - mx, y64 - my
        gram = xc.T @ xc
        penalty = self.alpha * max(float(np.trace(gram)) / max(gram.shape[0], 1), 1e-12)
        w = np.linalg.solve(gram + penalty * np.eye(gram.shape[0]), xc.T @ yc)
        self.weights_ = np.vstack([w, (my - mx @ w)[None, :]]).astype(np.float32)  # last row: intercept
        self.column_ = column
        return self

    def transform(self, table: Any) -> Any:
        require_fitted(self, "weights_", call="fit()", before="transform()")
        weights = cast(np.ndarray, self.weights_)
        x = table.payload(self.column_)
        flat = flatten_payload(x)
        out = flat @ weights[:-1] + weights[-1]
        return table.with_payload(self.column_, restore_dtype(out.reshape(x.shape), x.dtype))

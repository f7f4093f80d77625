"""Metric rows from one score matrix: identification, verification and per-subject figures with CIs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import metrics as M


def score_metrics(
    scores: Any,
    true_labels: np.ndarray,
    groups: np.ndarray,
    *,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    attribute: bool = False,
) -> list[dict[str, Any]]:
    """Rows ``{metric, value, ci_low, ci_high, chance, n_probes}`` for one recognizer run.

    Identification (top-1, top-5 when there are more than 5 classes, chance-normalized top-1, balanced
    accuracy, mean per-subject accuracy) gets bootstrap CIs over subjects (``groups``); the verification
    metrics computed from the same matrix (EER, min Cllr, linkability D↔sys) are reported without CI. The mixture
    level 1 − top-1 and, when the scores are posteriors (non-negative rows summing to 1), the KL divergence of
    the attacker's posteriors from uniform are added. For an ``attribute`` attack the top-1 chance level is
    the majority-class rate (METRICS.md)."""
    S = np.asarray(scores.scores, dtype=np.float64)
    classes = np.asarray(scores.classes).astype(str)
    true_idx = M.label_indices(np.asarray(true_labels).astype(str), classes)
    n_probes, n_classes = S.shape
    alpha = 1.0 - confidence
    rows: list[dict[str, Any]] = []

    def ci(values: np.ndarray, statistic: str = "pooled") -> tuple[float, float]:
        if bootstrap <= 0 or len(np.unique(groups)) < 2:
            return math.nan, math.nan
        return M.bootstrap_ci(values, groups, n_resamples=bootstrap, seed=seed, alpha=alpha, statistic=statistic)

    def add(metric: str, value: float, lo: float = math.nan, hi: float = math.nan, chance: float = math.nan) -> None:
        rows.append({"metric": metric, "value": float(value), "ci_low": float(lo), "ci_high": float(hi),
                     "chance": float(chance), "n_probes": int(n_probes)})

    hits1 = M.top_k_hits(S, true_idx, 1)
    c1 = M.majority_chance(true_idx) if attribute else M.chance_level(n_classes, 1)
    lo, hi = ci(hits1)
    add("top1", hits1.mean(), lo, hi, c1)
    add("mixture", 1.0 - hits1.mean(), 1.0 - hi, 1.0 - lo, 1.0 - c1)
    for k in (5, 10):
        if n_classes > k and not attribute:
            hits = M.top_k_hits(S, true_idx, k)
            add(f"top{k}", hits.mean(), *ci(hits), chance=M.chance_level(n_classes, k))
    if np.all(S >= 0) and np.allclose(S.sum(axis=1), 1.0, atol=1e-6):
        add("kl_uniform", M.kl_from_uniform(S), chance=0.0)
    if c1 < 1:
        cna = lambda a: (a - c1) / (1 - c1)  # noqa: E731 - monotone map of the top-1 CI
        add("cna1", cna(hits1.mean()), cna(lo), cna(hi), 0.0)
    add("balanced_accuracy", M.balanced_top_k_accuracy(S, true_idx, 1), chance=1.0 / n_classes)
    add("per_subject_accuracy", hits1.mean() if n_probes == 0 else _mean_per_class(hits1, true_idx),
        *ci(hits1, "subject"), chance=c1)
    mated, nonmated = M.mated_nonmated(S, true_idx)
    if mated.size and nonmated.size:
        v = M.verification_metrics(mated, nonmated)
        add("eer", v["eer"], chance=0.5)
        add("min_cllr", v["min_cllr"], chance=1.0)
        if v["linkability_bins"] >= 2:
            add("linkability", v["linkability"], chance=0.0)
    return rows


def _mean_per_class(hits: np.ndarray, true_idx: np.ndarray) -> float:
    sums = np.bincount(true_idx, weights=hits)
    counts = np.bincount(true_idx)
    present = counts > 0
    return float(np.mean(sums[present] / counts[present]))

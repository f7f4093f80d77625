"""Metric rows from one score matrix: identification, verification and per-subject figures with CIs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import metrics as M
from ..builtin.utility import _valid

#: Fewer subjects than this: the CI over subjects is approximate (simulated coverage of the expanded BCa interval
#: ≈ 92–94 % at 6 subjects for accuracies far from 0.5, 93–97 % from 10 on); such rows say so in their note.
FEW_SUBJECTS = 10


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
    """Rows ``{metric, value, ci_low, ci_high, chance, n_probes, note}`` for one recognizer run.

    Identification (top-1, top-5 when there are more than 5 classes, chance-normalized top-1, balanced
    accuracy, mean per-subject accuracy) gets bootstrap CIs over subjects (``groups``; the expanded BCa interval
    of :func:`bioanon.metrics.bootstrap_ci`); the verification metrics computed from the same matrix (EER, min Cllr,
    linkability D↔sys) are reported without CI. The mixture level 1 − top-1 and, when the scores are posteriors
    (non-negative rows summing to 1), the KL divergence of the attacker's posteriors from uniform are added.

    Chance levels: for an ``attribute`` attack the top-1 (plain accuracy) chance is the majority-class rate
    (METRICS.md) and balanced accuracy's chance is uniform, 1/|classes|; balanced accuracy is the attribute
    headline (a majority-class guesser scores the majority rate in accuracy but exactly 1/|classes| in balanced
    accuracy). For identity both are 1/|G|.

    A metric that is undefined for this matrix is still a row: value NaN and ``note`` saying why (linkability
    with fewer than 20 mated scores, EER and min Cllr without non-mated scores, chance-normalized accuracy when
    chance is 1). ``note`` also flags CIs that are missing or approximate (fewer than 2 or :data:`FEW_SUBJECTS`
    subjects, or no variation between subjects)."""
    S = np.asarray(scores.scores, dtype=np.float64)
    classes = np.asarray(scores.classes).astype(str)
    true_idx = M.label_indices(np.asarray(true_labels).astype(str), classes)
    n_probes, n_classes = S.shape
    alpha = 1.0 - confidence
    n_subjects = len(np.unique(groups))
    rows: list[dict[str, Any]] = []

    def ci(values: np.ndarray, statistic: str = "pooled", **kw: Any) -> tuple[float, float]:
        if bootstrap <= 0 or n_subjects < 2:
            return math.nan, math.nan
        return M.bootstrap_ci(values, groups, n_resamples=bootstrap, seed=seed, alpha=alpha, statistic=statistic, **kw)

    def ci_note(lo: float, hi: float) -> str:
        if bootstrap <= 0:
            return ""
        if n_subjects < 2:
            return "no CI: an interval over subjects needs at least 2 subjects"
        if lo == hi:
            return "CI degenerate: every bootstrap resample gives the same value (no variation between subjects)"
        if n_subjects < FEW_SUBJECTS:
            return (
                f"CI approximate: only {n_subjects} subjects (coverage may fall below the nominal level, "
                f"to about 92 % for values far from 0.5)"
            )
        return ""

    def add(
        metric: str,
        value: float,
        lo: float = math.nan,
        hi: float = math.nan,
        chance: float = math.nan,
        note: str | None = None,
    ) -> None:
        if note is None:
            note = ci_note(lo, hi)
        rows.append(
            {
                "metric": metric,
                "value": float(value),
                "ci_low": float(lo),
                "ci_high": float(hi),
                "chance": float(chance),
                "n_probes": int(n_probes),
                "note": note,
            }
        )

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
        add("kl_uniform", M.kl_from_uniform(S), chance=0.0, note="")
    if c1 < 1:
        cna: Callable[[float], float] = lambda a: (a - c1) / (1 - c1)  # noqa: E731 - monotone map of the top-1 CI
        add("cna1", cna(hits1.mean()), cna(lo), cna(hi), 0.0)
    else:
        add(
            "cna1",
            math.nan,
            chance=0.0,
            note="undefined: the chance level is 1 (a single class), so (A − c)/(1 − c) has no denominator",
        )
    add(
        "balanced_accuracy",
        M.balanced_top_k_accuracy(S, true_idx, 1),
        *ci(hits1, "balanced", classes=true_idx),
        chance=1.0 / n_classes,
    )
    add(
        "per_subject_accuracy",
        hits1.mean() if n_probes == 0 else _mean_per_class(hits1, true_idx),
        *ci(hits1, "subject"),
        chance=c1,
    )
    mated, nonmated = M.mated_nonmated(S, true_idx)
    if mated.size and nonmated.size:
        v = M.verification_metrics(mated, nonmated)
        add("eer", v["eer"], chance=0.5, note="")
        add("min_cllr", v["min_cllr"], chance=1.0, note="")
        if v["linkability_bins"] >= 2:
            add("linkability", v["linkability"], chance=0.0, note=f"{v['linkability_bins']} histogram bins")
        else:
            add(
                "linkability",
                math.nan,
                chance=0.0,
                note=f"undefined: {mated.size} mated scores, fewer than the 20 needed for 2 histogram bins "
                f"(n_bins = min(⌊|M|/10⌋, 100)); with 1 bin D↔sys would be 0 by construction",
            )
    else:
        why = (
            "undefined: no non-mated scores (the gallery has a single class)"
            if not nonmated.size
            else "undefined: no mated scores"
        )
        for metric, chance in (("eer", 0.5), ("min_cllr", 1.0), ("linkability", 0.0)):
            add(metric, math.nan, chance=chance, note=why)
    return rows


def _mean_per_class(hits: np.ndarray, true_idx: np.ndarray) -> float:
    sums = np.bincount(true_idx, weights=hits)
    counts = np.bincount(true_idx)
    present = counts > 0
    return float(np.mean(sums[present] / counts[present]))


#: The score metrics broken down by group (``[report] breakdown``): the verification metrics, which need no CI
#: machinery and read the same from any subset of trials.
BREAKDOWN_METRICS = (("eer", 0.5), ("min_cllr", 1.0))


def breakdown_metrics(
    scores: Any,
    true_labels: np.ndarray,
    attributes: dict[str, np.ndarray],
    *,
    within: bool = True,
) -> list[dict[str, Any]]:
    """EER and min Cllr per group of probes: rows ``{by, group, metric, value, chance, n_probes, n_subjects,
    n_mated, n_nonmated, note}`` for every attribute ``by`` in ``attributes`` (one value per probe) and every
    value ``group`` it takes (probes whose value is missing belong to no group).

    A group's trials are its probes against, with ``within`` (identity), only the enrolled classes that are
    the true class of one of the group's probes — for a per-subject attribute such as sex: same-sex trials,
    as in VoicePrivacy's per-sex trial lists; without ``within`` (an attribute label), against every class.
    Mated scores: a probe against its own class; non-mated: against the other classes kept. No CI (as for the
    overall EER and min Cllr); a group without mated or non-mated scores gives NaN with a note."""
    S = np.asarray(scores.scores, dtype=np.float64)
    classes = np.asarray(scores.classes).astype(str)
    true = np.asarray(true_labels).astype(str)
    rows: list[dict[str, Any]] = []
    for by, values in attributes.items():
        values = np.asarray(values)
        known = _valid(values)  # probes whose value is missing (None, NaN) belong to no group
        groups, codes = np.unique(values[known].astype(str), return_inverse=True)
        group_of = np.full(len(values), -1)
        group_of[known] = codes
        for g, group in enumerate(groups.tolist()):
            mask = group_of == g
            t = true[mask]
            keep = np.isin(classes, t) if within else np.ones(len(classes), dtype=bool)
            mated, nonmated = M.mated_nonmated(S[mask][:, keep], M.label_indices(t, classes[keep]))
            base = {
                "by": by,
                "group": group,
                "n_probes": int(mask.sum()),
                "n_subjects": int(len(np.unique(t))),
                "n_mated": int(mated.size),
                "n_nonmated": int(nonmated.size),
            }
            if mated.size and nonmated.size:
                v = M.verification_metrics(mated, nonmated)
                for metric, chance in BREAKDOWN_METRICS:
                    rows.append({**base, "metric": metric, "value": float(v[metric]), "chance": chance, "note": ""})
            else:
                why = (
                    f"undefined: the group's probes meet a single {'enrolled subject' if within else 'class'}, "
                    "so there are no non-mated scores"
                )
                for metric, chance in BREAKDOWN_METRICS:
                    rows.append({**base, "metric": metric, "value": math.nan, "chance": chance, "note": why})
    return rows

"""The evaluation protocol of the utility-preserving anonymization paper (§5.1.3, §5.2) as reusable functions.

The paper judges an anonymized data set by two numbers and two refinements:

* **attribute-of-interest accuracy**: a classifier (random forest) trained on *original* data, applied to the
  anonymized data (utility; :class:`bioanon.builtin.utility.AttributeAccuracy` does the work);
* **level of mixture** M = 1 − S(T(D)): a classifier of the *sensitive* label (identity, or e.g. age or gender)
  trained on original data, applied to the anonymized data; M is one minus its accuracy (privacy; higher is
  more private, 1 − 1/|G| is a random guess);
* **top-k mixture**: a re-identification counts if the true identity is among the classifier's k best;
* **KL from random guess**: the mean over samples of KL(posterior ‖ uniform over |G|) (0 = nothing learnt).

For data without identities (FER-2013) every record is its own identity and the attack is the nearest original
by cosine similarity: :func:`nearest_original_reid`.

Why functions and not a ``UtilityMeasure``: mixture is a *privacy* figure, and everything a utility measure
returns enters the privacy–utility trade-off as utility. In the evaluation pipeline the same figure is already
produced by the recognizers: under the ``naive`` scenario a recognizer is trained and enrolled on clear samples
of the evaluation subjects and probed with anonymized held-out samples of the same subjects, and every score row
carries ``mixture`` (1 − top-1), ``top5`` and ``kl_uniform`` (for posterior scores, e.g. ``any.random_forest``).
:func:`paper_protocol` computes the paper's figures for one (original, anonymized) pair outside the pipeline,
for reports and for users reproducing the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ParameterError, TableError
from ..methods import align, feature_matrix, labels_of
from ..metrics import (
    chance_level,
    kl_from_uniform,
    label_indices,
    majority_chance,
    mixture,
    top_k_accuracy,
    top_k_hits,
    top_k_mixture,
)
from .utility import AttributeAccuracy, _valid

__all__ = ["IDENTITY_CLASSIFIERS", "nearest_original_reid", "paper_protocol"]

IDENTITY_CLASSIFIERS = ("random_forest", "mlp", "logistic_regression", "knn")
_BLOCK_ELEMENTS = 1 << 24


def _x(table: Any, payload: str | None, what: str = "", dim: int | None = None) -> np.ndarray:
    """Samples as vectors: the first fixed-shape payload (``features``, ``imu``, ``pose``, ``image``) flattened,
    else a trait plugin's default feature view of the table's payload (e.g. ``audio``; see
    :func:`bioanon.methods.feature_matrix`). ``dim``: the length the classifier was trained on (checked)."""
    x = feature_matrix(table, payload or None, who=f"paper protocol{what}")
    if dim is not None and x.shape[1] != dim:
        raise TableError(
            f"paper protocol{what}: samples have {x.shape[1]} values each, but the classifiers were "
            f"trained on original samples of {dim}: the original and anonymized tables must share a "
            f"payload layout (payloads {table.payload_names})"
        )
    return x


def _identity_classifier(name: str, seed: int, n_jobs: int) -> Any:
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if name not in IDENTITY_CLASSIFIERS:
        raise ParameterError(
            "paper_protocol",
            "identity_classifier",
            name,
            f"one of {', '.join(IDENTITY_CLASSIFIERS)} (unknown classifier)",
        )
    clf = {
        "random_forest": lambda: RandomForestClassifier(n_estimators=200, random_state=seed, n_jobs=n_jobs),
        "mlp": lambda: MLPClassifier(hidden_layer_sizes=(256,), max_iter=500, early_stopping=False, random_state=seed),
        "logistic_regression": lambda: LogisticRegression(max_iter=2000),
        "knn": lambda: KNeighborsClassifier(n_neighbors=5),
    }[name]()
    return make_pipeline(StandardScaler(), clf)


def _rows_with_ids(table: Any, ids: np.ndarray) -> Any:
    keep = np.isin(table.sample_ids, ids)
    return table.filter(keep)


def paper_protocol(
    original: Any,
    anonymized: Any,
    attribute: str | None,
    *,
    sensitive: str = "subject",
    k: Sequence[int] = (1, 5),
    holdout: float = 0.5,
    train: Any = None,
    attribute_classifier: str = "random_forest",
    identity_classifier: str = "random_forest",
    payload: str = "",
    seed: int = 0,
    n_jobs: int = 1,
) -> dict[str, Any]:
    """The paper's figures (§5.1.3, §5.2.4) for one data set and its anonymized version.

    Classifiers are trained on **original** records and applied to the **anonymized** versions of the test
    records (rows matched by ``sample_id``):

    * ``train`` given (e.g. the paper's original training split): train on it, test on all of
      ``original``/``anonymized``;
    * else ``holdout`` in (0, 1): a seeded split of every subject's samples (``split_within_subjects``);
      train on the original records of the ``1 − holdout`` part, test on the anonymized versions of the
      ``holdout`` part (the paper's training/testing splits, §5.1.1: the sensitive classes, e.g. speakers, occur
      in both);
    * ``holdout = 0``: train on all original records and test on the anonymized versions of *the same*
      records (a linkage test: with an identity transform it measures the classifier's training accuracy).

    Test samples whose sensitive label the classifier never saw (a subject with one sample) are dropped from
    the mixture figures (``n_test_sensitive`` says how many remain).

    Parameters
    ----------
    original, anonymized : SampleTable
        The same sample ids (any row order).
    attribute : str or None
        Attribute of interest (utility); None skips it.
    sensitive : str
        ``"subject"`` (identity) or a sensitive attribute (e.g. ``"age"``): the label whose mixture is measured.
    k : the k of the top-k mixture (1 included or not; ``mixture`` is always top-1).
    attribute_classifier : random_forest | logistic_regression | knn (:class:`AttributeAccuracy`).
    identity_classifier : random_forest (default, the paper's MotionSense choice) | mlp (AudioMNIST) |
        logistic_regression | knn; always after per-feature standardization fitted on the training records.
    payload : the payload column; default: each table's first fixed-shape payload (``features``, ``imu``,
        ``pose``, ``image``) flattened, else a trait plugin's default feature view of its payload (e.g. utterance
        MFCC statistics of ``audio`` with bioanon-voice; :func:`bioanon.methods.feature_matrix`).

    Returns
    -------
    dict
        ``attribute_accuracy`` (on anonymized data), ``attribute_accuracy_clear`` (same classifier on the
        original test records), ``attribute_chance`` (majority rate); ``mixture`` and ``mixture_clear``
        (1 − top-1 of the sensitive classifier on anonymized / original test records), ``top_k_mixture``
        ``{k: value}``, ``random_top_k_mixture`` ``{k: 1 − min(k/|G|, 1)}`` (the random-guess lines of Fig. 7),
        ``sensitive_majority_chance``, ``kl_from_uniform`` and ``kl_from_uniform_clear`` (nats), ``n_classes``
        (|G|), ``n_train``, ``n_test``, ``n_test_sensitive``, and the settings used.
    """
    if not 0.0 <= holdout < 1.0:
        raise ParameterError("paper_protocol", "holdout", holdout, "a share in [0, 1) (holdout must be < 1)")
    ks = sorted({int(v) for v in k})
    if not ks or ks[0] < 1:
        raise ParameterError("paper_protocol", "k", list(k), "integers >= 1 (k must be at least 1)")
    anonymized = align(original, anonymized)
    if train is not None:
        train_clear, test_clear = train, original
    elif holdout == 0.0:
        train_clear, test_clear = original, original
    else:
        train_clear, test_clear = original.split_within_subjects([1.0 - holdout, holdout], seed, min_per_part=0)
    test_anon = align(test_clear, _rows_with_ids(anonymized, test_clear.sample_ids))
    out: dict[str, Any] = {
        "attribute": attribute,
        "sensitive": sensitive,
        "holdout": holdout if train is None else None,
        "attribute_classifier": attribute_classifier,
        "identity_classifier": identity_classifier,
        "n_train": len(train_clear),
        "n_test": len(test_clear),
    }

    if attribute is not None:
        m = AttributeAccuracy(
            attribute=attribute, classifier=attribute_classifier, payload=payload, seed=seed, n_jobs=n_jobs
        ).fit(train_clear)
        out["attribute_accuracy"] = float(np.nanmean(m.measure(test_clear, test_anon)))
        out["attribute_accuracy_clear"] = float(np.nanmean(m.measure(test_clear, test_clear)))
        out["attribute_chance"] = float(m.floor(test_clear))

    y_train = labels_of(train_clear, sensitive)
    ok = _valid(y_train)
    x_train = _x(train_clear, payload)
    clf = _identity_classifier(identity_classifier, seed, n_jobs).fit(x_train[ok], y_train[ok])
    classes = clf.classes_
    y_test = labels_of(test_clear, sensitive)
    known = _valid(y_test) & np.isin(y_test, classes)
    if not known.any():
        raise TableError(f"no test sample has a {sensitive!r} value the classifier was trained on")
    true_idx = label_indices(y_test[known], classes)
    dim = x_train.shape[1]
    post_anon = clf.predict_proba(_x(test_anon, payload, " (anonymized records)", dim)[known])
    post_clear = clf.predict_proba(_x(test_clear, payload, "", dim)[known])
    out.update(
        {
            "mixture": float(mixture(top_k_accuracy(post_anon, true_idx, 1))),
            "mixture_clear": float(mixture(top_k_accuracy(post_clear, true_idx, 1))),
            "top_k_mixture": {kk: float(top_k_mixture(post_anon, true_idx, kk)) for kk in ks},
            "random_top_k_mixture": {kk: 1.0 - chance_level(len(classes), kk) for kk in ks},
            "sensitive_majority_chance": majority_chance(true_idx),
            "kl_from_uniform": kl_from_uniform(post_anon),
            "kl_from_uniform_clear": kl_from_uniform(post_clear),
            "n_classes": int(len(classes)),
            "n_test_sensitive": int(known.sum()),
        }
    )
    return out


def nearest_original_reid(
    original: Any, anonymized: Any, k: int = 5, *, payload: str = "", center: bool = False
) -> tuple[float, float]:
    """Re-identification of each anonymized record as its nearest original (FER-2013 protocol, §5.1.3).

    Every record is its own identity: an anonymized record is compared by cosine similarity with *all*
    original records, and the attack succeeds when its own original (same ``sample_id``) is the most similar
    one (top-1) or among the ``k`` most similar (top-k). Ties count in expectation, so a constant
    anonymization scores chance (1/N, k/N). The mixture is ``1 − top1``.

    Parameters
    ----------
    original, anonymized : SampleTable with the same sample ids (any row order).
    k : int, >= 1.
    center : subtract the originals' mean from both before the cosine (the paper does not).

    Returns
    -------
    (top1, topk) : tuple of float
    """
    if k < 1:
        raise ParameterError("nearest_original_reid", "k", k, "an integer >= 1 (k must be at least 1)")
    anonymized = align(original, anonymized)
    xo = _x(original, payload).astype(np.float64)
    xa = _x(anonymized, payload, " (anonymized records)").astype(np.float64)
    if xo.shape[1] != xa.shape[1]:
        raise TableError(f"original and anonymized payloads differ in size ({xo.shape[1]} vs {xa.shape[1]})")
    if center:
        mean = xo.mean(axis=0)
        xo, xa = xo - mean, xa - mean
    xo /= np.maximum(np.linalg.norm(xo, axis=1, keepdims=True), 1e-12)
    xa /= np.maximum(np.linalg.norm(xa, axis=1, keepdims=True), 1e-12)
    n = len(xo)
    hits1 = np.empty(n)
    hitsk = np.empty(n)
    block = max(1, _BLOCK_ELEMENTS // max(n, 1))
    for start in range(0, n, block):  # memory-bounded: one block of anonymized rows × all originals
        stop = min(start + block, n)
        s = xa[start:stop] @ xo.T
        idx = np.arange(start, stop)
        hits1[start:stop] = top_k_hits(s, idx, 1)
        hitsk[start:stop] = top_k_hits(s, idx, k)
    return float(hits1.mean()), float(hitsk.mean())

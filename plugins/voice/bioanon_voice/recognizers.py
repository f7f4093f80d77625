"""Voice recognizers (attackers) on utterance statistics: MFCC or log-mel filter-bank mean and standard
deviation (and of their deltas), then a core recognizer (``any.pca_svm``, ``any.logistic_regression``,
``any.lda_cosine``). As in the core, ``fit`` learns the feature space (standardization, PCA, LDA) on the
attacker's training set and ``enroll`` the classifier on the gallery, so a parrot attacker trained on
anonymized speech learns the feature space of anonymized speech. A table without audio whose ``features``
payload already holds these statistics (``voice.random_set_mean``'s output) is used directly. The x-vector
network is in :mod:`bioanon_voice.xvector`, the pretrained Resemblyzer encoder in
:mod:`bioanon_voice.resemblyzer_encoder`."""

from __future__ import annotations

from typing import ClassVar, Literal

import attrs
import numpy as np

from bioanon.api import (
    ClassifierOptions,
    FeatureRecognizer,
    LdaCosine,
    LogisticRegression,
    PcaSvm,
    n_components_ok,
    param,
    reuse_computed,
    scores_param,
)

from .dsp import audio_of, feature_stats

FeatureKind = Literal["mfcc", "fbank"]


#: Metadata key under which a ``features`` table made from audio records how its statistics were computed.
FEATURES_KEY = "voice_features"


def feature_config(
    kind: str = "mfcc", n_coeffs: int = 20, n_mels: int = 40, deltas: bool = True, energy_quantile: float = 0.3
) -> dict:
    """The settings of :func:`~bioanon_voice.dsp.feature_stats` as a JSON-able dict (stored in the metadata)."""
    return {
        "kind": str(kind),
        "n_coeffs": int(n_coeffs),
        "n_mels": int(n_mels),
        "deltas": bool(deltas),
        "energy_quantile": float(energy_quantile),
    }


def feature_dim(kind: str = "mfcc", n_coeffs: int = 20, n_mels: int = 40, deltas: bool = True, **_) -> int:
    """Values per utterance of :func:`~bioanon_voice.dsp.feature_stats` with these settings."""
    per_frame = min(n_coeffs, n_mels) if kind == "mfcc" else n_mels + 1
    return per_frame * (4 if deltas else 2)


def stats_table(
    table,
    kind: str = "mfcc",
    n_coeffs: int = 20,
    n_mels: int = 40,
    deltas: bool = True,
    energy_quantile: float = 0.3,
    *,
    who: str = "voice",
):
    """The table with its audio replaced by utterance statistics (``features`` payload; ``audio`` dropped).

    A table without ``audio`` but with ``features`` (e.g. the output of ``voice.random_set_mean``) is used as
    it is, after checking that its statistics were computed with the same settings (metadata
    ``voice_features``, else the number of values per utterance); a mismatch raises :class:`TableError`
    naming both settings, since the attacker's feature space would not fit them."""
    from bioanon.api import TableError

    cfg = feature_config(kind, n_coeffs, n_mels, deltas, energy_quantile)
    names = table.payload_names
    if "audio" not in names and "features" in names:
        got = table.metadata.get(FEATURES_KEY)
        if got is not None and got != cfg:
            raise TableError(
                f"{who}: the table's 'features' payload holds utterance statistics computed with "
                f"{got}, but this method is set to {cfg}; set its parameters (features, n_coeffs, "
                f"n_mels, deltas, energy_quantile) to match"
            )
        x = table.payload("features")
        want = feature_dim(**cfg)
        if not isinstance(x, np.ndarray) or x.ndim != 2 or x.shape[1] != want:
            shape = x.shape[1:] if isinstance(x, np.ndarray) else "variable-length"
            raise TableError(
                f"{who}: the table has no 'audio' and its 'features' payload has shape {shape} per "
                f"utterance, not the ({want},) utterance statistics of {cfg}"
            )
        return table
    audio, sr = audio_of(table)
    # the same utterances come back for every scenario and setting: computed once per process
    x = reuse_computed(
        "voice.feature_stats",
        {**cfg, "sample_rate": sr},
        audio,
        lambda: feature_stats(audio, sr, kind, n_coeffs, n_mels, deltas, energy_quantile),
        # per utterance: kept per sample in the cache, so another split or other rates reuse it
        rows=lambda idx: feature_stats([audio[i] for i in idx], sr, kind, n_coeffs, n_mels, deltas, energy_quantile),
    )
    return table.with_payload("features", x, drop="audio").with_metadata(**{FEATURES_KEY: cfg})


@attrs.define(kw_only=True)
class _StatsRecognizer(FeatureRecognizer, ClassifierOptions):
    """Utterance statistics, then a core recognizer (built by ``inner_recognizer()``) on a ``features`` table;
    SEBA's options (``cv_folds``, ``keep``, ``scores``) are passed to it (:class:`bioanon.api.ClassifierOptions`)."""

    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio", "features")
    has_embedding: ClassVar[bool] = True

    features: FeatureKind = param("mfcc", help="frame features: MFCCs or log mel filter-bank energies")
    n_coeffs: int = param(20, help="MFCCs per frame (features = 'mfcc')", low=2, high=80)
    n_mels: int = param(40, help="mel bands", low=8, high=128)
    deltas: bool = param(True, help="also the mean and std of the frame-to-frame differences")
    energy_quantile: float = param(
        0.3, help="drop frames below this quantile of the frame energy (silence)", low=0.0, high=0.9
    )
    n_components: int | float = param(
        0.99,
        help="PCA of the back-end: share of variance in (0, 1] or a count",
        check=n_components_ok,
        check_text="a float in (0, 1] or an int >= 1",
    )

    def feature_table(self, table):
        return stats_table(
            table, self.features, self.n_coeffs, self.n_mels, self.deltas, self.energy_quantile, who=self.id
        )


@attrs.define(kw_only=True)
class MfccSvm(_StatsRecognizer):
    """MFCC (or filter-bank) statistics, standardization + PCA, then a linear/RBF SVM (core ``any.pca_svm``)."""

    id: ClassVar[str] = "voice.svm"

    kernel: str = param("linear", help="SVM kernel", choices=("linear", "rbf"))
    c: float = param(1.0, help="SVM regularization C", low=0.0, low_inclusive=False)
    scores: str = scores_param()

    def inner_recognizer(self):
        return PcaSvm(n_components=self.n_components, kernel=self.kernel, c=self.c, **self.classifier_options())


@attrs.define(kw_only=True)
class MfccLogReg(_StatsRecognizer):
    """MFCC (or filter-bank) statistics, standardization + PCA, then multinomial logistic regression (core
    ``any.logistic_regression``)."""

    id: ClassVar[str] = "voice.logistic_regression"

    c: float = param(1.0, help="inverse L2 regularization strength C", low=0.0, low_inclusive=False)
    scores: str = scores_param()

    def inner_recognizer(self):
        return LogisticRegression(n_components=self.n_components, c=self.c, **self.classifier_options())


@attrs.define(kw_only=True)
class MfccLda(_StatsRecognizer):
    """MFCC (or filter-bank) statistics, PCA + LDA learned on the attacker's training speakers, cosine to the
    enrolled speakers' mean embeddings (core ``any.lda_cosine``; the classic i-vector/x-vector back-end without
    PLDA). ``fit`` needs at least two training speakers."""

    id: ClassVar[str] = "voice.lda"

    shrinkage: float = param(0.05, help="shrink the within-class scatter towards a scaled identity", low=0.0, high=1.0)

    def inner_recognizer(self):
        return LdaCosine(n_components=self.n_components, shrinkage=self.shrinkage, **self.classifier_options())

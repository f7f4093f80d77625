"""``voice.random_set_mean``: the core random-set selective weighted mean on utterance features.

A subclass of the core engine (``bioanon.builtin.random_set_mean``, id ``any.random_set_mean``) with this
trait's payload and the paper's defaults.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, cast

import attrs

from bioanon.api import RandomSetMean, param

from .recognizers import FeatureKind, stats_table

__all__ = ["VoiceRandomSetMean"]


@attrs.define(kw_only=True)
class VoiceRandomSetMean(RandomSetMean):
    """Random-set selective weighted mean of utterance features (Algorithm 1 of the utility-preserving
    paper, its AudioMNIST experiment).

    Each utterance is first summarized by fixed-length statistics over time, as the paper averaged its
    HuBERT token embeddings over time (§5.1.2): the mean and standard deviation of its MFCCs (or log mel
    energies) and of their deltas, silent frames dropped (:func:`bioanon_voice.dsp.feature_stats`, the same
    statistics as ``voice.svm``, ``voice.logistic_regression`` and ``voice.lda``). Then every utterance
    becomes the weighted mean of a random set of ``set_size`` utterances of the table, ``purity`` of them
    sharing its value of ``attribute`` (the spoken digit); on the ``retention`` share of statistics most
    relevant to that attribute the utterance itself weighs ``weight``. Defaults are the paper's AudioMNIST
    setting: t = 0.8, g = 128, r_p = 1 %, w = 10, attribute ``digit`` (§5.1.5). ``any.random_set_mean``
    documents every other parameter.

    The output has a ``features`` payload (float32, its settings in the metadata ``voice_features``) and no
    ``audio``: the mean of utterance statistics is not a signal. The statistics recognizers (``voice.svm``,
    ``voice.lda``, ...), ``voice.content_accuracy`` (``segments = 0``) and ``voice.voice_distinctiveness``
    score such tables directly when their statistics settings match; audio-only methods (``voice.xvector``,
    ``voice.resemblyzer``, ρF0, SDR) cannot. A table that already has no audio but ``features`` is
    anonymized as it is."""

    id: ClassVar[str] = "voice.random_set_mean"
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio", "features")
    reference: ClassVar[str] = "utility-preserving Algorithm 1, §5.1 (AudioMNIST)"
    example_params: ClassVar[dict[str, Any]] = {"attribute": "activity", "set_size": 4, "purity": 0.5}

    attribute: str = RandomSetMean.default_for("attribute", "digit")
    set_size: int = RandomSetMean.default_for("set_size", 128)
    purity: float | Literal["population"] = RandomSetMean.default_for("purity", 0.8)
    weight: float = RandomSetMean.default_for("weight", 10.0)
    retention: float = RandomSetMean.default_for("retention", 0.01)
    features: FeatureKind = param(
        "mfcc", help="frame features summarized per utterance: MFCCs or log mel filter-bank energies"
    )
    n_coeffs: int = param(20, help="MFCCs per frame (features = 'mfcc')", low=2, high=80)
    n_mels: int = param(40, help="mel bands", low=8, high=128)
    deltas: bool = param(True, help="also the mean and std of the frame-to-frame differences")
    energy_quantile: float = param(
        0.3, help="drop frames below this quantile of the frame energy (silence)", low=0.0, high=0.9
    )

    def feature_table(self, table: Any) -> Any:
        """``table`` with its audio replaced by the utterance statistics (``features``, audio dropped)."""
        return stats_table(
            table, self.features, self.n_coeffs, self.n_mels, self.deltas, self.energy_quantile, who=self.id
        )

    def fit(self, background: Any) -> VoiceRandomSetMean:
        """Estimate feature relevance on the clear background's utterance statistics (see
        ``any.random_set_mean``)."""
        if background is not None and {"audio", "features"} & set(background.payload_names):
            background = self.feature_table(background)
        return cast("VoiceRandomSetMean", super().fit(background))

    def transform(self, table: Any) -> Any:
        """Utterance statistics of ``table``, each replaced by the line-9 weighted mean of its random set."""
        return super().transform(self.feature_table(table))

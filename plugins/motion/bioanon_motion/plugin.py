"""Entry point of bioanon-motion: registers its methods through bioanon's hooks.

Only light modules are imported here (numpy, attrs); torch is imported inside ``motion.cnn`` when it trains.
"""

from __future__ import annotations

from bioanon.api import hookimpl

BIOANON_API = ">=1.5,<2"  # 1.1: require_fitted (NotFittedError); 1.2: register(deprecated_aliases=); 1.3: blas_threads
# 1.5: cuda_graphs_param
"""The range of bioanon.api versions this plugin works with (PEP 440)."""


@hookimpl
def register_datasets(register):
    """MotionSense, phone gait, generic CSV and synthetic sources."""
    from .sources import CsvRecordings, MotionSense, PhoneGait
    from .synthetic import SyntheticMotion

    for cls in (MotionSense, PhoneGait, CsvRecordings, SyntheticMotion):
        register(cls)


@hookimpl
def register_anonymizers(register):
    """Noise, filtering, resampling, quantization, channel removal, normalization, random-set mean."""
    from .anonymizers import ChannelRemoval, GaussianNoise, LaplaceNoise, LowPass, Normalize, Quantize, Resample
    from .random_set_mean import MotionRandomSetMean

    for cls in (
        GaussianNoise,
        LaplaceNoise,
        LowPass,
        Resample,
        Quantize,
        ChannelRemoval,
        Normalize,
        MotionRandomSetMean,
    ):
        register(cls)


@hookimpl
def register_recognizers(register):
    """Window-feature recognizers and the 1-D CNN."""
    from .cnn import ImuCnn
    from .recognizers import FeaturesKnn, FeaturesLda, FeaturesRf, FeaturesSvm

    # the old ids (motion.features_<classifier>) keep working with a deprecation warning (issue 19 naming rule)
    for cls, old in (
        (FeaturesRf, "motion.features_rf"),
        (FeaturesSvm, "motion.features_svm"),
        (FeaturesLda, "motion.features_lda"),
        (FeaturesKnn, "motion.features_knn"),
    ):
        register(cls, deprecated_aliases=(old,))
    register(ImuCnn)


@hookimpl
def register_utility_measures(register):
    """Attribute accuracy, correlation and DTW."""
    from .utility import AttributeAccuracy, Correlation, Dtw

    for cls in (AttributeAccuracy, Correlation, Dtw):
        register(cls)

"""Entry point of bioanon-gait: registers its methods through bioanon's hooks.

Only light modules are imported here (numpy, attrs, bioanon); torch is imported inside ``gait.cnn`` when it
runs, the ``c3d`` reader and PyYAML inside the sources that need them.
"""

from __future__ import annotations

from bioanon.api import hookimpl

BIOANON_API = ">=1.11,<2"  # 1.1: require_fitted (NotFittedError); 1.2: warn_deprecated; 1.3: blas_threads
# 1.5: cuda_graphs_param; 1.7: seba_set, seba_sample_attributes; 1.11: SampleTable.map_payload
"""The range of bioanon.api versions this plugin works with (PEP 440)."""


@hookimpl
def register_datasets(register):
    """The gait data sources."""
    from .sources import C3dGait, CsvGait, SebaGait, UCalgaryGait
    from .synthetic import SyntheticGait

    for cls in (UCalgaryGait, C3dGait, CsvGait, SebaGait, SyntheticGait):
        register(cls)


@hookimpl
def register_anonymizers(register):
    """The gait anonymizations, with the random-set mean on poses."""
    from . import anonymizers as a

    for cls in (
        a.NoiseInjection,
        a.CoarsenTime,
        a.CoarsenPrecision,
        a.Resample,
        a.RollingAverage,
        a.MotionExtraction,
        a.TrajectoryFeatures,
        a.KeepParts,
        a.RemoveParts,
        a.SumOfParts,
        a.SizeNormalization,
        a.AxisNormalization,
        a.AveragePose,
        a.FirstPose,
        a.GaitRandomSetMean,
    ):
        register(cls)
    import warnings

    with warnings.catch_warnings():  # registering constructs it: its deprecation warning is for users' chains
        warnings.simplefilter("ignore", DeprecationWarning)
        register(a.GaitChain)  # gait.chain: the deprecated alias of any.chain that reads the old step strings


@hookimpl
def register_recognizers(register):
    """The gait attackers."""
    from .cnn import TemporalCnn
    from .recognizers import GaitKnn, GaitRandomForest, GaitSvm

    for cls in (GaitSvm, GaitRandomForest, GaitKnn, TemporalCnn):
        register(cls)


@hookimpl
def register_utility_measures(register):
    """The gait utility measures."""
    from .utility import DtwDistance, EuclideanDistance, FrechetDistance, GaitAttributeAccuracy

    for cls in (GaitAttributeAccuracy, DtwDistance, FrechetDistance, EuclideanDistance):
        register(cls)

"""Deprecated module path: the motion data sources moved to :mod:`bioanon_motion.sources` and the synthetic
generator to :mod:`bioanon_motion.synthetic` (one plugin layout). Import from there; this module
re-exports ``CsvRecordings``, ``MotionSense``, ``PhoneGait`` and ``SyntheticMotion`` and will be removed in a
future version."""

import warnings

from .sources import CsvRecordings, MotionSense, PhoneGait
from .synthetic import SyntheticMotion

__all__ = ["CsvRecordings", "MotionSense", "PhoneGait", "SyntheticMotion"]

warnings.warn(
    "bioanon_motion.datasets is deprecated: import from bioanon_motion.sources (the synthetic generator: "
    "bioanon_motion.synthetic)",
    DeprecationWarning,
    stacklevel=2,
)

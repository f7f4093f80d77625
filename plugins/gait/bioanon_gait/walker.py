"""Deprecated module path: the synthetic walkers (``gait.synthetic``) moved to :mod:`bioanon_gait.synthetic`
(one plugin layout). Import from there; this module re-exports ``PACES`` and ``SyntheticGait`` and will
be removed in a future version."""

import warnings

from .synthetic import PACES, SyntheticGait

__all__ = ["PACES", "SyntheticGait"]

warnings.warn("bioanon_gait.walker is deprecated: import from bioanon_gait.synthetic", DeprecationWarning, stacklevel=2)

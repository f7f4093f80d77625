"""Deprecated module path: the speech synthesizer (``voice.synthetic``) moved to :mod:`bioanon_voice.synthetic`
(one plugin layout). Import from there; this module re-exports ``SyntheticVoice``, ``resonator`` and
``synth_vowels`` and will be removed in a future version."""

import warnings

from .synthetic import SyntheticVoice, resonator, synth_vowels

__all__ = ["SyntheticVoice", "resonator", "synth_vowels"]

warnings.warn(
    "bioanon_voice.synth is deprecated: import from bioanon_voice.synthetic", DeprecationWarning, stacklevel=2
)

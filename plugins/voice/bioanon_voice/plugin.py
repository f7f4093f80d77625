"""Entry point of bioanon-voice: registers its methods through bioanon's hooks.

Only light modules are imported here (numpy, attrs, bioanon); soundfile and librosa are imported inside the
methods that read or process audio, torch inside ``voice.xvector`` when it runs.
"""

from __future__ import annotations

import bioanon


@bioanon.hookimpl
def register_datasets(register):
    """The voice data sources."""
    from .sources import AudioMnist, Fsdd, LibriSpeech, SpeakerFolder
    from .synth import SyntheticVoice

    for cls in (Fsdd, AudioMnist, LibriSpeech, SpeakerFolder, SyntheticVoice):
        register(cls)


@bioanon.hookimpl
def register_anonymizers(register):
    """The signal-level voice anonymizations."""
    from . import anonymizers as a

    for cls in (a.McAdams, a.PitchShift, a.FrequencyWarp, a.SpeedChange, a.AdditiveNoise):
        register(cls)


@bioanon.hookimpl
def register_recognizers(register):
    """The voice attackers."""
    from .recognizers import MfccLda, MfccLogReg, MfccSvm
    from .xvector import XVector

    for cls in (MfccSvm, MfccLogReg, MfccLda, XVector):
        register(cls)


@bioanon.hookimpl
def register_utility_measures(register):
    """The voice utility measures."""
    from .utility import ContentAccuracy, PitchCorrelation, SignalToDistortion

    for cls in (ContentAccuracy, PitchCorrelation, SignalToDistortion):
        register(cls)

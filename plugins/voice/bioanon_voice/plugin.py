"""Entry point of bioanon-voice: registers its methods through bioanon's hooks.

Only light modules are imported here (numpy, attrs, bioanon); soundfile and librosa are imported inside the
methods that read or process audio, torch inside ``voice.xvector`` and ``voice.resemblyzer`` when they run.
``voice.resemblyzer`` is registered only when resemblyzer, webrtcvad and torch are installed.
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

    from .random_set_mean import VoiceRandomSetMean

    for cls in (a.McAdams, a.PitchShift, a.FrequencyWarp, a.SpeedChange, a.AdditiveNoise, VoiceRandomSetMean):
        register(cls)


@bioanon.hookimpl
def register_recognizers(register):
    """The voice attackers."""
    from .recognizers import MfccLda, MfccLogReg, MfccSvm
    from .xvector import XVector

    from .resemblyzer_encoder import Resemblyzer, resemblyzer_available

    for cls in (MfccSvm, MfccLogReg, MfccLda, XVector):
        register(cls)
    if resemblyzer_available():
        register(Resemblyzer)


@bioanon.hookimpl
def register_utility_measures(register):
    """The voice utility measures."""
    from .utility import ContentAccuracy, PitchCorrelation, SignalToDistortion, VoiceDistinctiveness

    for cls in (ContentAccuracy, PitchCorrelation, SignalToDistortion, VoiceDistinctiveness):
        register(cls)

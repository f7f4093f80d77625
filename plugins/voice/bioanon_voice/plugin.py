"""Entry point of bioanon-voice: registers its methods through bioanon's hooks.

Only light modules are imported here (numpy, attrs, bioanon); soundfile and librosa are imported inside the
methods that read or process audio, torch inside ``voice.xvector`` and ``voice.resemblyzer`` when they run.
``voice.resemblyzer`` is registered only when resemblyzer, webrtcvad and torch are installed.
"""

from __future__ import annotations

from bioanon.api import hookimpl

BIOANON_API = (
    ">=1.3,<2"  # 1.1: two-stage utility measures (extracts), progress_bar; 1.2: current_context; 1.3: per-sample reuse
)
"""The range of bioanon.api versions this plugin works with (PEP 440)."""


@hookimpl
def register_datasets(register):
    """The voice data sources."""
    from .sources import AudioMnist, Fsdd, KaldiDir, LibriSpeech, SpeakerFolder
    from .synthetic import SyntheticVoice

    for cls in (Fsdd, AudioMnist, LibriSpeech, KaldiDir, SpeakerFolder, SyntheticVoice):
        register(cls)


@hookimpl
def register_anonymizers(register):
    """The signal-level voice anonymizations."""
    from . import anonymizers as a
    from .random_set_mean import VoiceRandomSetMean

    for cls in (a.McAdams, a.PitchShift, a.FrequencyWarp, a.SpeedChange, a.AdditiveNoise, VoiceRandomSetMean):
        register(cls)


@hookimpl
def register_recognizers(register):
    """The voice attackers."""
    from .recognizers import MfccLda, MfccLogReg, MfccSvm
    from .resemblyzer_encoder import Resemblyzer, resemblyzer_available
    from .xvector import XVector

    # the old ids (voice.mfcc_<classifier>) keep working with a deprecation warning: the features are a parameter
    for cls, old in ((MfccSvm, "voice.mfcc_svm"), (MfccLogReg, "voice.mfcc_logreg"), (MfccLda, "voice.mfcc_lda")):
        register(cls, deprecated_aliases=(old,))
    register(XVector)
    if resemblyzer_available():
        register(Resemblyzer)


@hookimpl
def register_utility_measures(register):
    """The voice utility measures."""
    from .utility import AsrWordErrorRate, ContentAccuracy, PitchCorrelation, SignalToDistortion, VoiceDistinctiveness

    for cls in (ContentAccuracy, PitchCorrelation, SignalToDistortion, VoiceDistinctiveness, AsrWordErrorRate):
        register(cls)


def utterance_features(table):
    """The default feature view of ``audio`` for trait-agnostic methods (``any.*`` recognizers, the paper
    protocol, ...): per utterance, the mean and standard deviation of 20 MFCCs and of their deltas over the
    non-silent frames — the statistics of ``voice.svm`` (``voice.lda``, ...) and ``voice.random_set_mean`` with
    their default settings (:func:`bioanon_voice.recognizers.stats_table`), so clear audio and those methods'
    ``features`` outputs land in one space. Returns (N, 80) float32."""
    import numpy as np

    from .dsp import audio_of, feature_stats
    from .recognizers import feature_config, feature_dim

    cfg = feature_config()
    audio, sr = audio_of(table)
    if not audio:
        return np.zeros((0, feature_dim(**cfg)), dtype=np.float32)
    return feature_stats(
        audio, sr, **{k: cfg[k] for k in ("n_coeffs", "n_mels", "deltas", "energy_quantile")}, kind=cfg["kind"]
    )


@hookimpl
def register_payload_features(register):
    """``audio`` → utterance MFCC statistics, for the trait-agnostic methods."""
    register(
        "audio",
        utterance_features,
        description="utterance MFCC statistics (mean and std of 20 MFCCs and "
        "their deltas, silent frames dropped; 80 values)",
    )

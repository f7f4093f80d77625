"""Offline speech recognition with PocketSphinx (its US-English acoustic model, language model and dictionary
ship inside the ``pocketsphinx`` wheel: nothing is downloaded) and word error rates."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np

from bioanon.api import MissingDependencyError, ParameterError

ASR_RATE = 16000
"""The sample rate of PocketSphinx's bundled acoustic model (Hz)."""

ASR_INSTALL = "pip install 'bioanon-voice[asr]'"

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def normalize_words(text: str, spell_digits: bool = True) -> list[str]:
    """Lower-case words of ``text`` without punctuation (apostrophes kept); with ``spell_digits`` every digit
    is spelled out ("7" → "seven", "42" → "four two"), so numeric labels compare with recognized words."""
    text = str(text).lower()
    if spell_digits:
        text = re.sub(r"\d", lambda m: f" {DIGIT_WORDS[int(m.group())]} ", text)
    return re.findall(r"[a-z']+", text)


def word_errors(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Substitutions + deletions + insertions of the best word alignment (Levenshtein distance on words),
    one numpy row update per reference word."""
    ref, hyp = list(reference), list(hypothesis)
    if not ref:
        return len(hyp)
    if not hyp:
        return len(ref)
    vocab: dict[str, int] = {}
    h = np.array([vocab.setdefault(w, len(vocab)) for w in hyp])
    prev = np.arange(len(hyp) + 1)
    for i, w in enumerate(ref, start=1):
        sub = prev[:-1] + (h != vocab.get(w, -1))
        cur = np.empty_like(prev)
        cur[0] = i
        cur[1:] = np.minimum(sub, prev[1:] + 1)  # substitution/match, deletion
        np.minimum.accumulate(cur - np.arange(len(cur)), out=cur)  # insertions: cur[j] = min(cur[j], cur[j-1]+1)
        cur += np.arange(len(cur))
        prev = cur
    return int(prev[-1])


def _grammar(vocabulary: Sequence[str], words: str) -> str:
    """A JSGF grammar accepting one word (``words = "one"``) or any sequence (``"any"``) of ``vocabulary``."""
    bad = [w for w in vocabulary if not re.fullmatch(r"[a-z']+", w)]
    if bad:
        raise ParameterError("voice.asr_wer", "vocabulary", bad[:5], "lower-case words (letters, apostrophes)")
    alt = " | ".join(vocabulary)
    body = f"( {alt} )" if words == "one" else f"( {alt} )+"
    return f"#JSGF V1.0;\ngrammar vocabulary;\npublic <utterance> = {body} ;\n"


class Recognizer:
    """A PocketSphinx decoder: the bundled US-English model with its language model, or a closed-vocabulary
    grammar (``vocabulary``; ``words`` "one" or "any" of them per utterance) or a JSGF file (``grammar``).
    ``transcribe`` takes float audio at any rate (resampled to 16 kHz)."""

    def __init__(self, vocabulary: Sequence[str] = (), words: str = "one", grammar: str = ""):
        try:
            from pocketsphinx import Config, Decoder, get_model_path
        except ImportError:
            raise MissingDependencyError("voice.asr_wer", {"pocketsphinx": ASR_INSTALL}) from None
        model = get_model_path()
        cfg = Config(
            hmm=os.path.join(model, "en-us", "en-us"),
            dict=os.path.join(model, "en-us", "cmudict-en-us.dict"),
            loglevel="FATAL",
            lm=None if (vocabulary or grammar) else os.path.join(model, "en-us", "en-us.lm.bin"),
        )
        self._decoder = Decoder(cfg)
        if grammar:
            if not os.path.isfile(grammar):
                raise ParameterError("voice.asr_wer", "grammar", grammar, "an existing JSGF grammar file")
            self._decoder.add_jsgf_file("user", grammar)
            self._decoder.activate_search("user")
        elif vocabulary:
            unknown = [w for w in vocabulary if self._decoder.lookup_word(w) is None]
            if unknown:
                raise ParameterError("voice.asr_wer", "vocabulary", unknown[:5], "words of PocketSphinx's dictionary")
            self._decoder.add_jsgf_string("vocabulary", _grammar(vocabulary, words))
            self._decoder.activate_search("vocabulary")

    def transcribe(self, audio: np.ndarray, sr: int) -> str:
        x = np.asarray(audio, dtype=np.float32)
        if sr != ASR_RATE:
            import librosa

            x = librosa.resample(x, orig_sr=sr, target_sr=ASR_RATE)
        pcm = (np.clip(x, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        d = self._decoder
        d.start_utt()
        d.process_raw(pcm, full_utt=True)
        d.end_utt()
        hyp = d.hyp()
        return hyp.hypstr if hyp is not None else ""

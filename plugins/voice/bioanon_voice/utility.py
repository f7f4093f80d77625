"""Voice utility measures: spoken-content accuracy, pitch correlation ρF0 and voice distinctiveness G_VD
(VoicePrivacy), and signal-to-distortion ratio."""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import AttributeAccuracy, ParameterError, UtilityMeasure, align, fitted, param, require_fitted

from .dsp import audio_of, feature_stats, segment_features


@attrs.define(kw_only=True)
class ContentAccuracy(AttributeAccuracy):
    """Spoken-content accuracy: a classifier of ``attribute`` (default ``digit``) trained on clear speech's
    MFCC features, scored on anonymized speech (1 = the original content is recognized).

    Features: MFCC means over ``segments`` equal stretches of the speech (temporal order) plus the utterance
    mean and std; ``segments = 0`` uses the utterance statistics of the voice recognizers instead (MFCC mean/std
    and deltas, :func:`~bioanon_voice.dsp.feature_stats`), which is what a table without audio holds: the
    ``features`` output of ``voice.random_set_mean`` is scored directly (its statistics settings must match:
    ``n_coeffs``, 40 mel bands, deltas, silence quantile 0.3), the paper's AudioMNIST experiment (digit kept,
    speaker suppressed; the utility-preserving anonymization paper §5). Floor: the majority-class rate. (Core
    ``any.attribute_accuracy`` on MFCC features.)"""

    id: ClassVar[str] = "voice.content_accuracy"
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio", "features")
    example_params: ClassVar[dict] = {"attribute": "group"}

    attribute: str = param("digit", help="the content attribute to predict (e.g. 'digit')")
    classifier: str = param(
        "logistic_regression", help="the content classifier", choices=("random_forest", "logistic_regression", "knn")
    )
    n_coeffs: int = param(20, help="MFCCs per frame", low=2, high=80)
    segments: int = param(
        5,
        help="MFCC means over this many equal stretches of the speech (temporal order); "
        "0 = utterance mean+std statistics only (needed for tables of features "
        "without audio)",
        low=0,
        high=50,
    )

    def _x(self, table) -> np.ndarray:
        from bioanon.api import TableError

        from .recognizers import stats_table

        if "audio" not in table.payload_names and "features" in table.payload_names:
            if self.segments:
                raise TableError(
                    f"{self.id}: the table has utterance statistics ('features', e.g. from "
                    f"voice.random_set_mean) and no audio, so segment features cannot be computed; "
                    f"set segments = 0 to train and score on the same utterance statistics"
                )
            return stats_table(table, "mfcc", self.n_coeffs, who=self.id).payload("features")
        audio, sr = audio_of(table)
        if self.segments:
            return segment_features(audio, sr, self.n_coeffs, self.segments)
        return feature_stats(audio, sr, "mfcc", self.n_coeffs)


def f0_track(x: np.ndarray, sr: int, hop_ms: float, fmin: float = 75.0, fmax: float = 500.0) -> np.ndarray:
    """F0 in Hz every ``hop_ms`` (pYIN); unvoiced frames and values outside [fmin, fmax] are 0."""
    import librosa

    hop = max(1, int(round(sr * hop_ms / 1000.0)))
    frame = 1 << int(np.ceil(np.log2(max(sr * 0.064, 3 * sr / fmin))))
    x = np.asarray(x, dtype=np.float32)
    if len(x) < frame:
        x = np.pad(x, (0, frame - len(x)))
    f0, voiced, _ = librosa.pyin(x, fmin=fmin, fmax=fmax, sr=sr, frame_length=frame, hop_length=hop, center=True)
    f0 = np.where(voiced & np.isfinite(f0), f0, 0.0)
    return np.where((f0 >= fmin) & (f0 <= fmax), f0, 0.0)


def pitch_correlation(a: np.ndarray, b: np.ndarray, max_lag: int = 10) -> float:
    """ρF0 of two F0 tracks: the shorter interpolated to the longer length, aligned by the lag
    (within ±``max_lag`` frames) maximizing the cross-correlation, Pearson correlation with unvoiced = 0.
    Two flat tracks: 1 if equal, else 0; one flat track: 0."""
    if len(a) != len(b):
        short, long_ = (a, b) if len(a) < len(b) else (b, a)
        s = np.interp(np.linspace(0, 1, len(long_)), np.linspace(0, 1, max(len(short), 1)), short)
        a, b = (s, long_) if len(a) < len(b) else (long_, s)
    n = len(a)
    best, best_c = 0, -np.inf
    for lag in range(-min(max_lag, n - 2), min(max_lag, n - 2) + 1):
        x, y = (a[lag:], b[: n - lag]) if lag >= 0 else (a[: n + lag], b[-lag:])
        c = float(np.dot(x - x.mean(), y - y.mean()))
        if c > best_c:
            best, best_c = lag, c
    x, y = (a[best:], b[: n - best]) if best >= 0 else (a[: n + best], b[-best:])
    sx, sy = x.std(), y.std()
    if sx == 0 or sy == 0:
        return 1.0 if (sx == 0 and sy == 0 and np.allclose(x, y)) else 0.0
    return float(np.clip(np.corrcoef(x, y)[0, 1], -1.0, 1.0))


@attrs.define(kw_only=True)
class PitchCorrelation(UtilityMeasure):
    """Pitch correlation ρF0 (VoicePrivacy) between each clear utterance and its anonymized
    version: pYIN F0 tracks in [75, 500] Hz every ``hop_ms`` ms, aligned by the best lag, Pearson correlation
    with unvoiced frames as 0. pYIN is slow: a larger hop is faster. Floor 0 (unrelated intonation)."""

    id: ClassVar[str] = "voice.pitch_correlation"
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)

    hop_ms: float = param(10.0, help="F0 frame hop in ms (Definition: 10)", low=1.0, high=100.0)
    max_lag: int = param(10, help="largest alignment lag in frames", low=0)
    fmin: float = param(75.0, help="lowest F0 in Hz", low=20.0)
    fmax: float = param(500.0, help="highest F0 in Hz", low=50.0)

    def measure(self, original, anonymized) -> np.ndarray:
        anonymized = align(original, anonymized)
        (xa, sr), (xb, sr_b) = audio_of(original), audio_of(anonymized)
        return np.array(
            [
                pitch_correlation(
                    f0_track(a, sr, self.hop_ms, self.fmin, self.fmax),
                    f0_track(b, sr_b, self.hop_ms, self.fmin, self.fmax),
                    self.max_lag,
                )
                for a, b in zip(xa, xb, strict=True)
            ],
            dtype=np.float64,
        )


@attrs.define(kw_only=True)
class SignalToDistortion(UtilityMeasure):
    """Signal-to-distortion ratio in dB of each anonymized utterance against its clear original, over their
    common length: scale-invariant (SI-SDR: the clear signal is first scaled to best fit the anonymized one)
    or plain ``10 log10(Σx² / Σ(x − y)²)``; clipped to ±``max_db``. Floor 0 dB."""

    id: ClassVar[str] = "voice.sdr"
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)

    scale_invariant: bool = param(True, help="SI-SDR (optimal scaling of the reference) instead of plain SDR")
    max_db: float = param(100.0, help="cap in dB (identical signals)", low=0.0, low_inclusive=False)

    def measure(self, original, anonymized) -> np.ndarray:
        anonymized = align(original, anonymized)
        (xa, _), (xb, _) = audio_of(original), audio_of(anonymized)
        out = np.empty(len(xa))
        for i, (a, b) in enumerate(zip(xa, xb, strict=True)):
            n = min(len(a), len(b))
            a, b = a[:n].astype(np.float64), b[:n].astype(np.float64)
            if self.scale_invariant:
                den = float(a @ a)
                a = a * ((a @ b) / den) if den > 0 else a
            sig, err = float(a @ a), float((a - b) @ (a - b))
            if err == 0:
                out[i] = self.max_db
            elif sig == 0:
                out[i] = -self.max_db
            else:
                out[i] = np.clip(10 * np.log10(sig / err), -self.max_db, self.max_db)
        return out


def similarity_matrix(
    x: np.ndarray, y: np.ndarray, codes: np.ndarray, n_speakers: int, slope: float, intercept: float
) -> np.ndarray:
    """S(i, j) = σ(mean calibrated LLR over the utterance pairs of speakers i (rows of ``x``) and j (rows of
    ``y``)), for L2-normalized embeddings of the same utterances in two conditions. The LLR is linear in the
    cosine score, so its mean is ``slope · mean cosine + intercept``; the sums over pairs are products of
    per-speaker embedding sums (vectorized). Pairs of an utterance with itself (in either condition) are left
    out of the diagonal, which therefore needs two utterances per speaker."""
    from bioanon.api import class_sums

    sx, sy = class_sums(x, codes, n_speakers), class_sums(y, codes, n_speakers)
    total = sx @ sy.T
    counts = np.bincount(codes, minlength=n_speakers).astype(np.float64)
    self_pairs = np.bincount(
        codes, weights=np.einsum("ij,ij->i", x.astype(np.float64), y.astype(np.float64)), minlength=n_speakers
    )
    pairs = np.outer(counts, counts)
    total[np.diag_indices(n_speakers)] -= self_pairs
    pairs[np.diag_indices(n_speakers)] -= counts
    mean_llr = slope * total / pairs + intercept
    return 1.0 / (1.0 + np.exp(-mean_llr))


def diagonal_dominance(s: np.ndarray) -> float:
    """D_diag(S) = |mean of the diagonal − mean off the diagonal| (voice distinctiveness)."""
    n = len(s)
    off = ~np.eye(n, dtype=bool)
    return float(abs(np.mean(np.diag(s)) - np.mean(s[off])))


@attrs.define(kw_only=True)
class VoiceDistinctiveness(UtilityMeasure):
    """Voice distinctiveness gain G_VD in dB (VoicePrivacy): how distinguishable the speakers stay
    after anonymization (0 = as distinguishable as in clear speech, negative = less).

    ``fit(clear)`` trains the speaker-verification model ``verifier`` (a registered voice recognizer with an
    embedding) on clear speech and calibrates its cosine trial scores to
    log-likelihood ratios (logistic regression on same-/different-speaker pairs of the clear training set,
    classes balanced: the LLR at equal priors). ``measure(original, anonymized)`` embeds both tables' speakers
    (disjoint from the training speakers in an evaluation, as in the challenge) and builds the voice similarity
    matrices S(i, j) = σ(mean LLR over the utterance pairs of speakers i and j), pairs of an utterance with
    itself left out: S_oo on original speech and S_aa on anonymized speech (``condition = "aa"``,
    and VoicePrivacy 2022) or S_oa between original and anonymized utterances (``"oa"``, VoicePrivacy 2020).
    G_VD = 10·log10(D_diag(S_xx)/D_diag(S_oo)) with D_diag(S) = |mean diagonal − mean off-diagonal|
    (a zero D_diag(S_xx) counts as 1e-10, i.e. −100 dB or less).

    G_VD is a value of the whole set, not of an utterance, while bioanon's utility measures return one value
    per sample: every sample gets the set's G_VD, so the reported mean is exactly G_VD and its bootstrap
    interval (over subjects, of a constant) has zero width — it carries no uncertainty estimate. Speakers with
    fewer than two utterances are left out of the matrices (they have no diagonal pair). The clear level is
    0 dB by construction; the floor is ``floor_db`` (a convention: −10 dB = a tenfold loss of diagonal
    dominance).

    The default verifier, ``voice.svm``, embeds utterances by the standardized PCA of their MFCC
    statistics, which works with the few training speakers of a small evaluation; ``voice.lda`` (an LDA
    needs many training speakers: C − 1 dimensions) or the pretrained ``voice.resemblyzer`` are stronger
    verifiers where they apply."""

    id: ClassVar[str] = "voice.voice_distinctiveness"
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio", "features")
    paired: ClassVar[bool] = True
    reference: ClassVar[str] = (
        "Noé et al., Speech pseudonymisation assessment using voice similarity "
        "matrices, Interspeech 2020; VoicePrivacy 2020/2022 evaluation plans"
    )

    verifier: str = param(
        "voice.svm",
        help="id of the speaker-verification recognizer (needs an "
        "embedding; trained on the clear data given to fit, default parameters)",
    )
    condition: str = param(
        "aa",
        help="'aa': anonymized-anonymized similarities (VPC 2022); 'oa': original-anonymized (VPC 2020)",
        choices=("aa", "oa"),
    )
    floor_db: float = param(
        -10.0, help="the floor used to normalize utility (dB below the clear level)", high=0.0, high_inclusive=False
    )
    calibration_pairs: int = param(
        200_000, help="at most this many training trials calibrate the scores (drawn at random)", low=10
    )
    seed: int = param(0, help="random seed (calibration trials)")

    verifier_: Any = fitted()
    slope_: float | None = fitted()
    intercept_: float | None = fitted()

    def _embed(self, table) -> np.ndarray:
        e = np.asarray(self.verifier_.embed(table), dtype=np.float64)
        e = e.reshape(len(e), -1)
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)

    def fit(self, clear):
        from sklearn.linear_model import LogisticRegression

        from bioanon.api import ParameterError, TableError, current_context

        cls = current_context().registry.get(self.verifier)  # the run's registry (a fresh default outside one)
        if getattr(cls, "kind", "") != "recognizer" or not getattr(cls, "has_embedding", False):
            raise ParameterError(self.id, "verifier", self.verifier, "a registered recognizer with an embedding")
        subjects = np.asarray(clear.subjects).astype(str)
        _, codes = np.unique(subjects, return_inverse=True)
        if codes.max(initial=-1) < 1:
            raise TableError(
                f"{self.id}: calibrating the verifier needs at least 2 speakers in the clear "
                f"training table, it has {len(np.unique(subjects))}"
            )
        self.verifier_ = cls().fit(clear, "subject")
        e = self._embed(clear)
        n = len(e)
        rng = np.random.default_rng([self.seed, 0x6BD])
        total = n * (n - 1) // 2
        if total <= self.calibration_pairs:
            i, j = np.triu_indices(n, k=1)
        else:
            i = rng.integers(0, n, self.calibration_pairs)
            j = (i + rng.integers(1, n, self.calibration_pairs)) % n  # j != i
        same = codes[i] == codes[j]
        if same.all() or not same.any():
            raise TableError(
                f"{self.id}: the clear training table gives no "
                f"{'different' if same.all() else 'same'}-speaker trials to calibrate on"
            )
        s = np.einsum("ij,ij->i", e[i], e[j])
        lr = LogisticRegression(class_weight="balanced").fit(s[:, None], same)
        self.slope_, self.intercept_ = float(lr.coef_[0, 0]), float(lr.intercept_[0])
        return self

    def matrices(self, original, anonymized) -> tuple[np.ndarray, np.ndarray]:
        """(S_oo, S_aa or S_oa) over the speakers with at least two utterances."""
        from bioanon.api import TableError

        require_fitted(self, "verifier_", call="fit(clear)", before="measure()")
        anonymized = align(original, anonymized)
        names, codes, counts = np.unique(
            np.asarray(original.subjects).astype(str), return_inverse=True, return_counts=True
        )
        keep = counts[codes] >= 2
        if (counts >= 2).sum() < 2:
            raise TableError(
                f"{self.id}: G_VD needs at least 2 speakers with 2 or more utterances; the table has "
                f"{int((counts >= 2).sum())} of its {len(names)} speakers"
            )
        _, codes = np.unique(codes[keep], return_inverse=True)
        k = int(codes.max()) + 1
        eo = self._embed(original)[keep]
        ea = self._embed(anonymized)[keep]
        slope, intercept = cast(float, self.slope_), cast(float, self.intercept_)  # fitted with verifier_
        s_oo = similarity_matrix(eo, eo, codes, k, slope, intercept)
        other = (ea, ea) if self.condition == "aa" else (eo, ea)
        return s_oo, similarity_matrix(*other, codes, k, slope, intercept)

    def gain(self, original, anonymized) -> float:
        """G_VD in dB of ``anonymized`` against ``original``."""
        from bioanon.api import TableError

        s_oo, s_xx = self.matrices(original, anonymized)
        d_oo, d_xx = diagonal_dominance(s_oo), diagonal_dominance(s_xx)
        if d_oo <= 0:
            raise TableError(
                f"{self.id}: the verifier does not tell the original speakers apart at all "
                f"(D_diag(S_oo) = 0), so G_VD is undefined"
            )
        return float(10.0 * np.log10(max(d_xx, 1e-10) / d_oo))

    def measure(self, original, anonymized) -> np.ndarray:
        return np.full(len(original), self.gain(original, anonymized), dtype=np.float64)

    def floor(self, table) -> float:
        return self.floor_db


@attrs.define(kw_only=True)
class AsrWordErrorRate(UtilityMeasure):
    """Word error rate (WER) of offline speech recognition, VoicePrivacy's main utility measure: each clear
    and anonymized utterance is transcribed by PocketSphinx (US-English model bundled in its wheel; nothing is
    downloaded) and compared with the reference text of the attribute column ``transcript`` (LibriSpeech
    transcripts and Kaldi ``text`` files load as ``text``; a label such as FSDD's ``digit`` works with
    ``spell_digits``). Errors = substitutions + deletions + insertions of the best word alignment.

    ``average = "corpus"`` (VoicePrivacy): the reported value is Σ errors / Σ reference words; each sample's
    value is its errors scaled by N / Σ reference words, so that their mean is the corpus WER. ``"utterance"``:
    the mean of per-utterance WERs. A closed vocabulary (``vocabulary``, e.g. the ten digit words for a
    spoken-digit set, or a JSGF file ``grammar``) constrains the decoder: on 40 random FSDD recordings the
    digit grammar recognizes 26 words (chance: 4), the open language model 13. Lower is better; floor 1.0 (every
    reference word lost). Decoding is slow (about 0.4 s per utterance with the language model, 10 ms with a
    grammar): in an evaluation each table is transcribed once, as its own cached task (``extracts``)."""

    id: ClassVar[str] = "voice.asr_wer"
    attribute_params: ClassVar[tuple[str, ...]] = ("transcript",)
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)
    higher_is_better: ClassVar[bool] = False
    extracts: ClassVar[bool] = True
    requires: ClassVar[dict[str, str]] = {"pocketsphinx": "pip install 'bioanon-voice[asr]'"}
    example_params: ClassVar[dict] = {"transcript": "group", "vocabulary": ["zero", "one", "two"]}

    transcript: str = param("text", help="attribute column with the reference transcript (or label) of each sample")
    vocabulary: tuple[str, ...] = param(
        (), help="closed vocabulary of lower-case words for a grammar decoder (empty: the bundled open language model)"
    )
    words: str = param(
        "one", help="with a vocabulary: 'one' word per utterance or 'any' sequence of them", choices=("one", "any")
    )
    grammar: str = param("", help="a JSGF grammar file for the decoder (instead of vocabulary)")
    spell_digits: bool = param(True, help="spell digits out as words in references and transcripts ('7' = 'seven')")
    average: str = param(
        "corpus",
        help="'corpus': Σ errors / Σ reference words; 'utterance': mean per-utterance WER",
        choices=("corpus", "utterance"),
    )

    def extract(self, table) -> list:
        from bioanon.api import progress_bar

        from .asr import Recognizer

        if self.grammar and self.vocabulary:
            raise ParameterError(
                self.id, "grammar", self.grammar, "empty when a vocabulary is given (one or the other)"
            )
        asr = Recognizer(self.vocabulary, self.words, self.grammar)
        audio, sr = audio_of(table)
        return [
            asr.transcribe(a, sr) for a in progress_bar(audio, desc=f"{self.id}: transcribing", unit="utt", leave=False)
        ]

    def compare(self, original, original_values, anonymized_values) -> np.ndarray:
        from .asr import normalize_words, word_errors

        refs = [
            normalize_words(r, self.spell_digits) if r is not None and r == r else None
            for r in original.attribute(self.transcript)
        ]
        errors = np.array(
            [
                np.nan if r is None else word_errors(r, normalize_words(h, self.spell_digits))
                for r, h in zip(refs, anonymized_values, strict=True)
            ],
            dtype=np.float64,
        )
        n_ref = np.array([np.nan if r is None else len(r) for r in refs], dtype=np.float64)
        known = np.isfinite(n_ref) & (n_ref > 0)
        out = np.full(len(refs), np.nan)
        if self.average == "utterance":
            out[known] = errors[known] / n_ref[known]
        elif known.any():
            out[known] = errors[known] * known.sum() / n_ref[known].sum()
        return out

    def floor(self, table) -> float:
        return 1.0

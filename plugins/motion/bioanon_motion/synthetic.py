"""``motion.synthetic``: seeded synthetic IMU windows with subject gait signatures and activity patterns."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon.api import DatasetSource, jsonable, param

__all__ = ["SyntheticMotion"]

_ACTIVITIES = ("walk", "jog", "upstairs", "downstairs")
_CADENCE = np.array([1.8, 2.7, 1.5, 2.1])  # steps per second of each activity
_INTENSITY = np.array([1.0, 2.2, 0.8, 1.3])


@attrs.define(kw_only=True)
class SyntheticMotion(DatasetSource):
    """Seeded synthetic IMU windows (acc x/y/z, gyro x/y/z at 50 Hz) with subject gait signatures and
    activity-specific patterns — for the demo and tests.

    Each window is a sum of gait harmonics: the activity sets the cadence and the intensity (and how they are
    spread over channels); the subject sets a cadence factor, per-channel harmonic amplitudes and phases (the
    gait signature, scaled by ``identity_strength``) and a sensor orientation offset. Every window starts at a
    random gait phase and gets white noise. Attributes: ``activity`` (per window), ``gender`` (per subject,
    which shifts cadence slightly) and ``age``. The defaults (60 subjects × 12 windows of 64 × 6) are what
    ``bioanon demo --trait motion`` uses: generated in milliseconds, and enough evaluation subjects (24) for the
    demo's selections of 24, 12 and 6."""

    id: ClassVar[str] = "motion.synthetic"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("activity", "gender", "age")
    trait: ClassVar[str] = "motion"
    needs_path: ClassVar[bool] = False
    demo: ClassVar[dict[str, Any] | None] = {
        # `bioanon demo --trait motion`: this plugin's own methods (no torch)
        "anonymizers": [
            {"id": "motion.gaussian_noise", "name": "noise", "grid": {"sigma": [0.5, 2.0]}},
            {"id": "motion.lowpass", "grid": {"cutoff_hz": [5.0, 2.0]}},
        ],
        "recognizers": [{"id": "motion.svm"}, {"id": "motion.lda"}],
        "utility": [
            {"id": "motion.attribute_accuracy", "params": {"attribute": "activity"}},
            {"id": "motion.correlation"},
        ],
    }

    window: int = param(64, help="window length in samples", low=8)
    n_subjects: int = param(60, help="number of subjects", low=2)
    windows_per_subject: int = param(12, help="windows per subject", low=1)
    n_activities: int = param(4, help="number of activities (walk, jog, upstairs, downstairs)", low=2, high=4)
    identity_strength: float = param(1.0, help="spread of the subjects' gait signatures", low=0.0)
    noise: float = param(0.4, help="white-noise standard deviation", low=0.0)
    sample_rate: float = param(50.0, help="sampling rate in Hz", low=0.0, low_inclusive=False)
    seed: int = param(0, help="random seed")

    def load(self, path=None):
        """Generate the windows (``path`` is not used)."""
        from bioanon.api import SampleTable

        rng = np.random.default_rng(self.seed)
        S, K, T, C, H = self.n_subjects, self.windows_per_subject, self.window, 6, 3
        n = S * K
        subj = np.repeat(np.arange(S), K)
        gender = rng.integers(0, 2, size=S)
        age = rng.integers(18, 70, size=S)
        # subject signature: cadence factor, harmonic amplitudes (C, H), phases (C, H), orientation offsets (C)
        cad = 1.0 + 0.06 * rng.standard_normal(S) * self.identity_strength - 0.04 * gender
        amp = np.abs(1.0 + 0.5 * self.identity_strength * rng.standard_normal((S, C, H))) / np.arange(1, H + 1)
        phase = rng.uniform(0, 2 * np.pi, size=(S, C, H)) * min(self.identity_strength, 1.0)
        offset = 0.3 * self.identity_strength * rng.standard_normal((S, C))
        # activity pattern: cadence, intensity and channel emphasis
        act = rng.integers(0, self.n_activities, size=n)
        emphasis = 0.6 + 0.8 * rng.random((self.n_activities, C))
        # windows: x[n, t, c] = sum_h I_a e_a[c] amp_s[c,h] sin(2π h f t + φ_s[c,h] + h φ0) + offset_s[c] + noise
        f = _CADENCE[act] * cad[subj] * (1.0 + 0.02 * rng.standard_normal(n))  # (n,)
        t = np.arange(T) / self.sample_rate
        h = np.arange(1, H + 1)
        phi0 = rng.uniform(0, 2 * np.pi, size=n)
        arg = (
            2 * np.pi * f[:, None, None] * t[None, :, None] * h[None, None, :] + phi0[:, None, None] * h[None, None, :]
        )  # (n, T, H)
        waves = np.sin(arg[:, :, None, :] + phase[subj][:, None, :, :])  # (n, T, C, H)
        x = np.einsum("ntch,nch->ntc", waves, amp[subj])
        x *= (_INTENSITY[act][:, None] * emphasis[act])[:, None, :]
        x += offset[subj][:, None, :]
        x += self.noise * rng.standard_normal(x.shape)
        width = len(str(S - 1))
        names = np.array([f"s{i:0{width}d}" for i in range(S)])
        index = np.tile(np.arange(K), S)
        return SampleTable.from_arrays(
            subject=names[subj],
            sample_id=np.char.add(np.char.add(names[subj], "/"), np.char.zfill(index.astype(str), 4)),
            payloads={"imu": x.astype(np.float32)},
            attributes={
                "activity": np.array(_ACTIVITIES)[act],
                "gender": np.array(["female", "male"])[gender[subj]],
                "age": age[subj].astype(np.int64),
            },
            metadata={
                "trait": "motion",
                "source": self.id,
                "sample_rate": float(self.sample_rate),
                "channels": ["acc_x", "acc_y", "acc_z", "gyro_x", "gyro_y", "gyro_z"],
                "window": T,
                "params": jsonable(self.get_params()),
            },
        )

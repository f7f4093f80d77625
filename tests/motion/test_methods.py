"""Motion anonymizers, signal helpers, recognizers and utility measures on synthetic windows."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.errors import ParameterError
from bioanon.table import SampleTable
from bioanon.testing import check_method
from bioanon_motion.signals import dtw_distance, feature_names, pearson_per_channel, window_features

RATE = 50.0


def sines(freqs_hz, n=8, t=128, rate=RATE, seed=0) -> SampleTable:
    """n windows of t samples; channel c is a sine of freqs_hz[c] with a random phase per window."""
    rng = np.random.default_rng(seed)
    time = np.arange(t) / rate
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, len(freqs_hz)))
    x = np.sin(2 * np.pi * np.asarray(freqs_hz)[None, None, :] * time[None, :, None] + phase)
    return SampleTable.from_arrays(
        subject=[f"s{i % 2}" for i in range(n)],
        payloads={"imu": x.astype(np.float32)},
        attributes={"activity": np.array(["walk", "jog"])[np.arange(n) % 2]},
        metadata={
            "sample_rate": rate,
            "channels": [f"acc_{a}" for a in "xyz"][: len(freqs_hz)]
            + [f"gyro_{a}" for a in "xyz"][: max(0, len(freqs_hz) - 3)],
        },
    )


def amplitude(x: np.ndarray) -> np.ndarray:
    """RMS per channel over all windows."""
    return np.sqrt((x.astype(np.float64) ** 2).mean(axis=(0, 1)))


# --------------------------------------------------------------------------------------------------- signals


def _dtw_reference(a: np.ndarray, b: np.ndarray) -> float:
    t = len(a)
    acc = np.full((t + 1, t + 1), np.inf)
    acc[0, 0] = 0
    for i in range(1, t + 1):
        for j in range(1, t + 1):
            acc[i, j] = np.linalg.norm(a[i - 1] - b[j - 1]) + min(acc[i - 1, j], acc[i, j - 1], acc[i - 1, j - 1])
    return acc[t, t]


def test_dtw_matches_the_textbook_recursion():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 12, 3)), rng.standard_normal((5, 12, 3))
    got = dtw_distance(a, b, band=1.0, normalize=False)
    np.testing.assert_allclose(got, [_dtw_reference(x, y) for x, y in zip(a, b, strict=True)], rtol=1e-10)
    assert np.all(dtw_distance(a, a) == 0)
    # a time shift costs DTW much less than a pointwise comparison
    t = np.linspace(0, 4 * np.pi, 64)
    x = np.sin(t)[None, :, None]
    y = np.sin(t - 0.4)[None, :, None]
    assert dtw_distance(x, y, band=0.2, normalize=False)[0] < 0.5 * np.abs(x - y).sum()
    # a narrower band can only cost more
    assert np.all(dtw_distance(a, b, band=0.1) >= dtw_distance(a, b, band=1.0) - 1e-12)


def test_window_features_shape_names_and_frequency():
    t = sines([2.0, 8.0, 16.0], n=4)
    x = t.payload("imu")
    f = window_features(x, RATE, n_bands=8)
    names = feature_names(["a", "b", "c"], 8)
    assert f.shape == (4, len(names)) and f.dtype == np.float32 and np.isfinite(f).all()
    dom = f[:, [names.index(f"{c}:dominant_hz") for c in "abc"]]
    np.testing.assert_allclose(dom, np.tile([2.0, 8.0, 16.0], (4, 1)), atol=0.4)
    # a constant channel gives finite (zero) statistics
    assert np.isfinite(window_features(np.ones((2, 32, 2), np.float32))).all()


def test_pearson_per_channel():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 50, 2))
    np.testing.assert_allclose(pearson_per_channel(a, 2 * a + 1), 1.0)
    np.testing.assert_allclose(pearson_per_channel(a, -a), -1.0)
    flat = np.zeros((1, 50, 1))
    assert pearson_per_channel(flat, flat)[0, 0] == 1.0 and pearson_per_channel(flat, a[:1, :, :1])[0, 0] == 0.0


# --------------------------------------------------------------------------------------------------- anonymizers


def test_noise_is_scaled_per_channel_and_seeded():
    t = sines([1.0, 2.0, 3.0], n=64)
    x = t.payload("imu").copy()
    x[:, :, 2] *= 100.0  # a channel in larger units
    t = t.with_payload("imu", x)
    for mid in ("motion.gaussian_noise", "motion.laplace_noise"):
        m = bioanon.get_method(mid, sigma=0.5, seed=3).fit(t)
        d = m.transform(t).payload("imu") - x
        ratio = d.std(axis=(0, 1)) / x.std(axis=(0, 1))
        np.testing.assert_allclose(ratio, 0.5, rtol=0.05)
        assert np.array_equal(
            m.transform(t).payload("imu"), bioanon.get_method(mid, sigma=0.5, seed=3).fit(t).transform(t).payload("imu")
        )
        other = bioanon.get_method(mid, sigma=0.5, seed=4).fit(t).transform(t).payload("imu")
        assert not np.array_equal(other, x + d)
    g = bioanon.get_method("motion.gaussian_noise", sigma=1.0).transform(t).payload("imu") - x
    lap = bioanon.get_method("motion.laplace_noise", sigma=1.0).transform(t).payload("imu") - x
    kurt = lambda v: ((v - v.mean()) ** 4).mean() / v.var() ** 2  # noqa: E731
    assert kurt(lap[:, :, 0]) > kurt(g[:, :, 0]) + 1.5  # Laplace: kurtosis 6, Gaussian: 3
    # independent tables (other sample ids) get independent noise
    t2 = SampleTable.from_arrays(
        subject=t.subjects, sample_id=[f"x{i}" for i in range(len(t))], payloads={"imu": x}, metadata=t.metadata
    )
    d2 = bioanon.get_method("motion.gaussian_noise").transform(t2).payload("imu") - x
    d1 = bioanon.get_method("motion.gaussian_noise").transform(t).payload("imu") - x
    assert not np.allclose(d1, d2)


def test_lowpass_keeps_slow_and_removes_fast_components_without_delay():
    slow, fast = sines([1.0], n=4), sines([15.0], n=4)
    m = bioanon.get_method("motion.lowpass", cutoff_hz=4.0)
    out_slow, out_fast = m.transform(slow).payload("imu"), m.transform(fast).payload("imu")
    assert out_slow.shape == slow.payload("imu").shape
    assert amplitude(out_fast)[0] < 0.1 * amplitude(fast.payload("imu"))[0]  # edges included
    mid = slice(20, 108)  # away from the edges: fully attenuated, and zero phase (no lag)
    assert np.abs(out_fast[:, mid]).max() < 0.02
    np.testing.assert_allclose(out_slow[:, mid], slow.payload("imu")[:, mid], atol=0.05)
    with pytest.raises(bioanon.BioanonError, match="below the Nyquist frequency 25"):
        bioanon.get_method("motion.lowpass", cutoff_hz=30.0).transform(slow)


@pytest.mark.parametrize("interpolation", ["linear", "hold"])
def test_resample_keeps_shape_and_removes_detail_above_the_new_nyquist(interpolation):
    slow, fast = sines([0.5], n=4), sines([10.0], n=4)
    m = bioanon.get_method("motion.resample", factor=4, interpolation=interpolation)  # new rate 12.5 Hz
    out_slow, out_fast = m.transform(slow).payload("imu"), m.transform(fast).payload("imu")
    assert out_slow.shape == slow.payload("imu").shape
    np.testing.assert_allclose(
        out_slow[:, 16:112], slow.payload("imu")[:, 16:112], atol=0.08 if interpolation == "linear" else 0.3
    )
    assert amplitude(out_fast)[0] < 0.2 * amplitude(fast.payload("imu"))[0]
    if interpolation == "hold":  # a staircase: runs of 4 equal values
        assert np.all(out_slow[:, 0:4] == out_slow[:, :1])
    aliased = bioanon.get_method("motion.resample", factor=4, antialias=False).transform(fast).payload("imu")
    assert amplitude(aliased)[0] > 0.5  # without the anti-aliasing filter 10 Hz folds back to 2.5 Hz


def test_quantize_snaps_to_the_grid():
    t = sines([1.0, 2.0], n=4)
    out = bioanon.get_method("motion.quantize", step=0.25, relative=False).transform(t).payload("imu")
    np.testing.assert_allclose(out / 0.25, np.round(out / 0.25), atol=1e-5)
    assert np.abs(out - t.payload("imu")).max() <= 0.125 + 1e-6
    rel = bioanon.get_method("motion.quantize", step=1.0).transform(t).payload("imu")
    assert len(np.unique(rel[:, :, 0])) <= 5  # a sine of std 0.71 on a 0.71-wide grid: few levels


def test_channel_removal_modes():
    t = sines([1.0, 2.0, 3.0, 4.0, 5.0], n=4)  # acc_x, acc_y, acc_z, gyro_x, gyro_y
    x = t.payload("imu")
    zero = bioanon.get_method("motion.channel_removal", channels=("gyro_*",)).transform(t).payload("imu")
    assert zero.shape == x.shape and np.all(zero[:, :, 3:] == 0) and np.array_equal(zero[:, :, :3], x[:, :, :3])
    m = bioanon.get_method("motion.channel_removal", channels=("acc_y",), mode="mean").fit(t)
    np.testing.assert_allclose(m.transform(t).payload("imu")[:, :, 1], x[:, :, 1].mean(), atol=1e-6)
    dropped = bioanon.get_method("motion.channel_removal", channels=("acc_x", "gyro_y"), mode="drop").transform(t)
    assert dropped.payload_shape("imu") == (128, 3)
    assert dropped.metadata["channels"] == ["acc_y", "acc_z", "gyro_x"]
    with pytest.raises(ParameterError, match=r"'channels' = 'mag_\*' is invalid; allowed: patterns that match some"):
        bioanon.get_method("motion.channel_removal", channels=("mag_*",)).transform(t)


def test_normalize_modes():
    t = sines([1.0, 3.0], n=4)
    x = t.payload("imu") * np.array([3.0, 0.1], np.float32) + np.array([9.8, -1.0], np.float32)
    t = t.with_payload("imu", x)
    z = bioanon.get_method("motion.normalize").transform(t).payload("imu")
    np.testing.assert_allclose(z.mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(z.std(axis=1), 1, atol=1e-4)
    c = bioanon.get_method("motion.normalize", mode="center").transform(t).payload("imu")
    np.testing.assert_allclose(c.mean(axis=1), 0, atol=1e-4)
    np.testing.assert_allclose(c.std(axis=1), x.std(axis=1), rtol=1e-4)
    mm = bioanon.get_method("motion.normalize", mode="minmax").transform(t).payload("imu")
    np.testing.assert_allclose(mm.min(axis=1), -1, atol=1e-6)
    np.testing.assert_allclose(mm.max(axis=1), 1, atol=1e-6)


def test_anonymizers_are_vectorized_over_large_batches():
    """Smoke test of speed: 20 000 windows of 64 × 6 per anonymizer, well under a second each (no Python loop
    per window)."""
    import time

    rng = np.random.default_rng(0)
    t = SampleTable.from_arrays(
        subject=np.repeat(np.arange(100), 200).astype(str),
        payloads={"imu": rng.standard_normal((20000, 64, 6)).astype(np.float32)},
        metadata={"sample_rate": 50.0},
    )
    for mid in (
        "motion.gaussian_noise",
        "motion.laplace_noise",
        "motion.lowpass",
        "motion.resample",
        "motion.quantize",
        "motion.channel_removal",
        "motion.normalize",
    ):
        params = {"channels": ("ch0",)} if mid == "motion.channel_removal" else {}
        start = time.perf_counter()
        out = bioanon.get_method(mid, **params).transform(t)
        assert out.payload_shape("imu") == (64, 6)
        assert time.perf_counter() - start < 5.0, mid  # generous: a loaded CI machine


# --------------------------------------------------------------------------------------------------- utility


def test_paired_utility_measures():
    t = sines([1.0, 2.0, 3.0], n=16)
    noisy = bioanon.get_method("motion.gaussian_noise", sigma=1.0).transform(t)
    corr = bioanon.get_method("motion.correlation")
    np.testing.assert_allclose(corr.measure(t, t), 1.0)
    c = corr.measure(t, noisy)
    assert c.shape == (16,) and np.all((c > 0.3) & (c < 0.95))
    # rows are matched by sample id, whatever their order
    np.testing.assert_allclose(corr.measure(t, noisy.take(np.arange(16)[::-1])), c)
    dtw = bioanon.get_method("motion.dtw").fit(t)
    assert np.all(dtw.measure(t, t) == 0)
    d = dtw.measure(t, noisy)
    light = dtw.measure(t, bioanon.get_method("motion.gaussian_noise", sigma=0.2).transform(t))
    assert np.all(light > 0) and light.mean() < 0.5 * d.mean() and light.mean() < 0.5 * dtw.floor(t)
    smooth = bioanon.get_method("motion.lowpass", cutoff_hz=5.0).transform(t)
    assert dtw.measure(t, smooth).mean() < light.mean()
    dropped = bioanon.get_method("motion.channel_removal", channels=("acc_x",), mode="drop").transform(t)
    with pytest.raises(ValueError, match="differ in shape"):
        corr.measure(t, dropped)


def test_attribute_accuracy_on_window_features():
    t = bioanon.load_dataset("motion.synthetic", n_subjects=24, windows_per_subject=10)
    train, test = t.split_subjects([0.5, 0.5], seed=0)
    u = bioanon.get_method("motion.attribute_accuracy", attribute="activity", n_jobs=2).fit(train)
    clear = u.measure(test, test).mean()
    assert clear > 0.9 and u.floor(test) < 0.5
    noisy = bioanon.get_method("motion.gaussian_noise", sigma=3.0).transform(test)
    assert u.measure(test, noisy).mean() < clear - 0.2


# --------------------------------------------------------------------------------------------------- recognizers


def _identification(mid: str, table, **params) -> float:
    train, evaluation = table.split_subjects([0.5, 0.5], seed=0)
    enrol, probes = evaluation.split_within_subjects([0.5, 0.5], seed=0)
    rec = bioanon.get_method(mid, **params).fit(train)
    rec.enroll(enrol)
    s = rec.score(probes)
    assert s.scores.shape == (len(probes), evaluation.num_subjects)
    return float((s.predict() == probes.subjects).mean())


@pytest.mark.parametrize("mid", ["motion.random_forest", "motion.svm", "motion.knn", "motion.lda"])
def test_feature_recognizers_identify_synthetic_subjects(mid):
    t = bioanon.load_dataset("motion.synthetic", n_subjects=30, windows_per_subject=12)
    params = {"n_estimators": 100} if mid == "motion.random_forest" else {}
    assert _identification(mid, t, **params) > 0.6  # chance 1/15


@pytest.mark.slow
def test_cnn_identifies_unseen_subjects_and_is_deterministic():
    t = bioanon.load_dataset("motion.synthetic", n_subjects=30, windows_per_subject=12)
    acc = _identification("motion.cnn", t, epochs=12, threads=1)
    assert acc > 0.4  # chance 1/15; the embedding was trained on the other 15 subjects only
    train, evaluation = t.split_subjects([0.5, 0.5], seed=0)
    a = bioanon.get_method("motion.cnn", epochs=2, threads=1).fit(train)
    b = bioanon.get_method("motion.cnn", epochs=2, threads=1).fit(train)
    assert np.array_equal(a.embed(evaluation), b.embed(evaluation))
    c = bioanon.get_method("motion.cnn", epochs=2, threads=1, seed=1).fit(train)
    assert not np.array_equal(a.embed(evaluation), c.embed(evaluation))
    e = a.embed(evaluation)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=1e-6)
    # attribute inference with the same contract
    a.fit(train, "activity")
    a.enroll(evaluation, "activity")
    assert a.score(evaluation).scores.shape == (len(evaluation), 4)


def test_cnn_does_not_import_torch_before_training():
    import subprocess
    import sys

    code = (
        "import sys, bioanon; bioanon.list_methods('motion.*'); bioanon.get_method('motion.cnn'); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("method_id", bioanon.list_methods("motion.*"))
def test_every_motion_method_conforms(method_id):
    report = check_method(bioanon.get_registry().get(method_id))
    report.raise_for_failures()
    assert report.checks_run >= 8, str(report)


def test_the_plugin_registers_what_the_issue_asks_for():
    ids = set(bioanon.list_methods("motion.*"))
    assert {"motion.motionsense", "motion.phone_gait", "motion.csv", "motion.synthetic"} <= ids
    assert {
        "motion.gaussian_noise",
        "motion.laplace_noise",
        "motion.lowpass",
        "motion.resample",
        "motion.quantize",
        "motion.channel_removal",
        "motion.normalize",
    } <= ids
    assert {"motion.random_forest", "motion.svm", "motion.cnn"} <= ids
    assert {"motion.attribute_accuracy", "motion.correlation", "motion.dtw"} <= ids
    cls = bioanon.get_registry().get("motion.random_set_mean")
    m = cls()
    assert (m.purity, m.set_size, m.retention, m.weight) == (0.9, 32, 0.1, 100.0)  # the paper's MotionSense
    assert cls.payloads == ("imu",)


def test_motion_random_set_mean_is_the_core_engine_with_the_papers_defaults():
    from bioanon.builtin.random_set_mean import RandomSetMean
    from bioanon_motion.random_set_mean import MotionRandomSetMean as cls

    t = bioanon.load_dataset("motion.synthetic", n_subjects=8, windows_per_subject=10)
    ours = cls(set_size=8).fit(t).transform(t)
    core = (
        RandomSetMean(attribute="activity", set_size=8, purity=0.9, retention=0.1, weight=100.0, payload="imu")
        .fit(t)
        .transform(t)
    )
    assert np.array_equal(ours.payload("imu"), core.payload("imu"))
    assert ours.payload_shape("imu") == (64, 6) and np.array_equal(ours.sample_ids, t.sample_ids)
    assert not np.allclose(ours.payload("imu"), t.payload("imu"))

"""Gait anonymizations: each against a direct (loop) reference computation on a tiny sequence, plus
conformance of every gait method."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.errors import ParameterError, TableError
from bioanon.testing import check_method
from bioanon_gait.anonymizers import SUM_OF_PARTS_OFFSETS, parse_step, unit_draws

GAIT_METHODS = bioanon.list_methods("gait.*")


def _run(method_id, table, **params):
    m = bioanon.get_method(method_id, **params)
    out = m.fit(table).transform(table)
    assert out.payload_shape("pose") == table.payload_shape("pose")  # every method keeps the shape
    assert list(out.sample_ids) == list(table.sample_ids)
    return out.payload("pose").astype(np.float64), m


def _x(table):
    return table.payload("pose").astype(np.float64)


# --------------------------------------------------------------------------------------------------- noise


@pytest.mark.parametrize("noise", ["normal", "laplace", "uniform"])
def test_noise_direct_matches_reference(tiny_gait, noise):
    t = tiny_gait()
    out, m = _run("gait.noise", t, noise=noise, scale=3.0, seed=5)
    x, z = _x(t), m.draws(t)
    ref = np.empty_like(x)
    N, T, J, _ = x.shape
    for n in range(N):
        for j in range(J):
            for a in range(3):
                s = x[n, :, j, a].std()
                ref[n, :, j, a] = x[n, :, j, a] + 3.0 * s * z[n, :, j, a]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert not np.allclose(out, x)


def test_noise_indirect_adds_noise_to_differences(tiny_gait):
    t = tiny_gait()
    out, m = _run("gait.noise", t, mode="indirect", scale=0.5, seed=2)
    x, z = _x(t), m.draws(t)
    ref = np.empty_like(x)
    for n in range(len(x)):
        d = np.diff(x[n], axis=0)
        sd = d.std(axis=0)
        ref[n, 0] = x[n, 0]
        for k in range(1, x.shape[1]):
            ref[n, k] = ref[n, k - 1] + d[k - 1] + 0.5 * sd * z[n, k]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert np.abs(out - x).max() > 0.1  # SEBA's indirect noise added nothing


@pytest.mark.parametrize("noise", ["normal", "laplace", "uniform"])
def test_noise_draws_are_zero_mean_unit_variance_and_per_sample(noise):
    ids = [f"id{i}" for i in range(200)]
    z = unit_draws(ids, (50, 10, 3), noise, seed=1)
    assert abs(z.mean()) < 0.01 and abs(z.var() - 1.0) < 0.02
    if noise == "uniform":
        assert z.min() >= -np.sqrt(3) and z.max() <= np.sqrt(3)
    again = unit_draws(ids[::-1][:3], (50, 10, 3), noise, seed=1)  # other rows, other batch: same noise
    np.testing.assert_array_equal(again[0], z[-1])
    assert not np.allclose(unit_draws(ids[:1], (50, 10, 3), noise, seed=2), z[:1])


def test_noise_is_seeded(tiny_gait):
    t = tiny_gait()
    a, _ = _run("gait.noise", t, seed=3)
    b, _ = _run("gait.noise", t, seed=3)
    c, _ = _run("gait.noise", t, seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


# --------------------------------------------------------------------------------------------------- time


@pytest.mark.parametrize("interpolation", ["linear", "hold"])
def test_coarsen_time_matches_reference(tiny_gait, interpolation):
    t = tiny_gait(frames=11)
    out, _ = _run("gait.coarsen_time", t, factor=3, interpolation=interpolation)
    x = _x(t)
    kept = list(range(0, 11, 3))  # 0, 3, 6, 9
    ref = np.empty_like(x)
    for k in range(11):
        p = max(q for q in kept if q <= k)
        nxt = [q for q in kept if q > k]
        if k == p or not nxt or interpolation == "hold":
            ref[:, k] = x[:, p]
        else:
            q = nxt[0]
            ref[:, k] = x[:, p] + (k - p) / (q - p) * (x[:, q] - x[:, p])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_coarsen_precision_matches_reference(tiny_gait):
    t = tiny_gait()
    out, _ = _run("gait.coarsen_precision", t, step=0.25)
    np.testing.assert_allclose(out, np.round(_x(t) / 0.25) * 0.25, atol=1e-6)
    mm = tiny_gait(units="mm")
    out_mm, _ = _run("gait.coarsen_precision", mm, step=0.25)  # 0.25 m = 250 mm
    np.testing.assert_allclose(out_mm, np.round(_x(mm) / 250.0) * 250.0, atol=1e-3)


def test_resample_matches_reference(tiny_gait):
    t = tiny_gait(frames=12)
    out, m = _run("gait.resample", t, factor=0.4)
    x = _x(t)
    M = round(12 * 0.4)
    assert m.reduced_frames(t) == M == 5
    low_t = np.linspace(0, 11, M)
    ref = np.empty_like(x)
    for n in range(len(x)):
        for j in range(x.shape[2]):
            for a in range(3):
                low = np.interp(low_t, np.arange(12), x[n, :, j, a])
                ref[n, :, j, a] = np.interp(np.linspace(0, M - 1, 12), np.arange(M), low)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    by_fps, m2 = _run("gait.resample", t, fps=4.0)  # frame rate 10 Hz -> factor 0.4
    assert m2.reduced_frames(t) == 5
    np.testing.assert_allclose(by_fps, out)


@pytest.mark.parametrize("alignment", ["trailing", "centered"])
def test_rolling_average_matches_reference(tiny_gait, alignment):
    t = tiny_gait(frames=9)
    out, _ = _run("gait.rolling_average", t, window=4, alignment=alignment)
    x = _x(t)
    ref = np.empty_like(x)
    for k in range(9):
        lo = k - 3 if alignment == "trailing" else k - 2
        frames = [i for i in range(lo, lo + 4) if 0 <= i < 9]
        ref[:, k] = x[:, frames].mean(axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_motion_extraction_matches_reference(tiny_gait):
    t = tiny_gait()
    out, _ = _run("gait.motion_extraction", t, lag=2)
    x = _x(t)
    ref = np.zeros_like(x)
    for k in range(x.shape[1] - 2):
        ref[:, k] = x[:, k + 2] - x[:, k]
    np.testing.assert_allclose(out, ref, atol=1e-6)


@pytest.mark.parametrize("baseline", ["all", "edges"])
@pytest.mark.parametrize("output", ["residual", "average"])
def test_trajectory_features_match_reference(tiny_gait, baseline, output):
    t = tiny_gait(frames=9)
    out, _ = _run("gait.trajectory_features", t, window=2, baseline=baseline, output=output)
    x = _x(t)
    ref = np.zeros_like(x)
    for k in range(2, 7):
        base = x[:, k - 2 : k + 3].mean(axis=1) if baseline == "all" else (x[:, k - 2] + x[:, k + 2]) / 2
        ref[:, k] = x[:, k] - base if output == "residual" else base
    np.testing.assert_allclose(out, ref, atol=1e-6)


# --------------------------------------------------------------------------------------------------- parts


def test_keep_and_remove_parts_match_reference(tiny_gait):
    t = tiny_gait()  # joints: knee_left, knee_right, head, spine_base
    x = _x(t)
    legs, _ = _run("gait.keep_parts", t)  # default: both legs
    ref = np.zeros_like(x)
    ref[:, :, :2] = x[:, :, :2]
    np.testing.assert_array_equal(legs, ref)
    head, _ = _run("gait.keep_parts", t, parts=["head"], joints=["spine_base"])
    ref = np.zeros_like(x)
    ref[:, :, 2:] = x[:, :, 2:]
    np.testing.assert_array_equal(head, ref)
    no_head, _ = _run("gait.remove_parts", t)  # default: the head
    ref = x.copy()
    ref[:, :, 2] = 0
    np.testing.assert_array_equal(no_head, ref)
    with pytest.raises(TableError, match=r"no body parts \['torso'\]"):
        bioanon.get_method("gait.keep_parts", parts=["torso"]).transform(t)
    with pytest.raises(ParameterError, match="parts"):
        bioanon.get_method("gait.keep_parts", parts=["legs"])
    with pytest.raises(ParameterError, match="at least one body part"):
        bioanon.get_method("gait.keep_parts", parts=[])
    generic = bioanon.testing.make_table(payload="pose")  # no body parts in its metadata
    with pytest.raises(TableError, match="no body-part groups"):
        bioanon.get_method("gait.keep_parts").transform(generic)
    custom = bioanon.get_method("gait.keep_parts", body_parts='{"head": ["j4"]}', parts=["head"]).transform(generic)
    assert np.count_nonzero(custom.payload("pose")[:, :, :4]) == 0


def test_sum_of_parts_matches_reference(tiny_gait):
    t = tiny_gait(units="mm")
    out, _ = _run("gait.sum_of_parts", t, distance=0.5)
    x = _x(t)
    ref = x.copy()
    for j, part in enumerate(["left_leg", "right_leg", "head", "hip"]):
        ref[:, :, j] += np.array(SUM_OF_PARTS_OFFSETS[part]) * 500.0  # 0.5 m in mm, as SEBA's offsets
    np.testing.assert_allclose(out, ref, atol=1e-3)
    assert SUM_OF_PARTS_OFFSETS["right_leg"] == (0.0, 1.0, 2.0)  # SEBA: [0, 500, 1000] mm


# --------------------------------------------------------------------------------------------------- normalization


def test_size_normalization_matches_reference(tiny_gait):
    t = tiny_gait()
    x = _x(t)
    out, _ = _run("gait.size_normalization", t, target=1.8)
    for n in range(len(x)):
        size = np.median([x[n, k, :, 1].max() - x[n, k, :, 1].min() for k in range(x.shape[1])])
        c = x[n].mean(axis=(0, 1))
        np.testing.assert_allclose(out[n], c + (x[n] - c) * 1.8 / size, rtol=1e-5, atol=1e-5)
    by_height, _ = _run("gait.size_normalization", t, by="height", target=1.8, axis="y")
    h = t.attribute("height")
    for n in range(len(x)):
        c = x[n].mean(axis=(0, 1))
        ref = x[n].copy()
        ref[..., 1] = c[1] + (x[n, ..., 1] - c[1]) * 1.8 / h[n]
        np.testing.assert_allclose(by_height[n], ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(TableError, match="'stature'"):
        bioanon.get_method("gait.size_normalization", by="height", height_attribute="stature").transform(t)


@pytest.mark.parametrize("method", ["minmax", "zscore", "l2"])
@pytest.mark.parametrize("per", ["axis", "joint_axis"])
def test_axis_normalization_matches_reference(tiny_gait, method, per):
    t = tiny_gait()
    out, _ = _run("gait.normalize", t, method=method, per=per)
    x = _x(t)
    ref = np.empty_like(x)
    for n in range(len(x)):
        for a in range(3):
            groups = [slice(None)] if per == "axis" else [j for j in range(x.shape[2])]
            for g in groups:
                v = x[n, :, g, a]
                if method == "minmax":
                    r = (v - v.min()) / (v.max() - v.min())
                elif method == "zscore":
                    r = (v - v.mean()) / v.std()
                else:
                    r = v / np.sqrt((v**2).sum())
                ref[n, :, g, a] = r
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_average_and_first_pose_match_reference(tiny_gait):
    t = tiny_gait()
    x = _x(t)
    avg, _ = _run("gait.average_pose", t)
    first, _ = _run("gait.first_pose", t)
    for k in range(x.shape[1]):
        np.testing.assert_allclose(avg[:, k], x.mean(axis=1), atol=1e-6)
        np.testing.assert_array_equal(first[:, k], x[:, 0])


# --------------------------------------------------------------------------------------------------- chain


def test_chain_equals_its_steps_applied_in_order(tiny_gait):
    t = tiny_gait(frames=12)
    steps = [
        "rolling_average:window=3",
        'gait.keep_parts:parts=["left_leg", "right_leg"]',
        '{"id": "gait.noise", "params": {"scale": 0.5, "noise": "laplace"}}',
    ]
    out, chain = _run("gait.chain", t, steps=steps, seed=7)
    ref = t
    for m in (
        bioanon.get_method("gait.rolling_average", window=3),
        bioanon.get_method("gait.keep_parts"),
        bioanon.get_method("gait.noise", scale=0.5, noise="laplace", seed=7 + 2),
    ):
        ref = m.transform(ref)
    np.testing.assert_array_equal(out, ref.payload("pose"))
    assert [m.id for m in chain.methods_] == ["gait.rolling_average", "gait.keep_parts", "gait.noise"]


def test_chain_parses_validates_and_loads_from_toml(tmp_path):
    assert parse_step('keep_parts:parts=["head"],joints=["neck"]') == (
        "gait.keep_parts",
        {"parts": ["head"], "joints": ["neck"]},
    )
    assert parse_step("any.gaussian_noise:sigma=0.2") == ("any.gaussian_noise", {"sigma": 0.2})
    with pytest.raises(ParameterError, match=r"unknown anonymizer 'gait.nosie'; did you mean 'gait.noise'"):
        bioanon.get_method("gait.chain", steps=["nosie:scale=1"])
    with pytest.raises(ParameterError, match=r"steps\[0\].*gait.noise: parameter 'scale'"):
        bioanon.get_method("gait.chain", steps=["noise:scale=-1"])
    with pytest.raises(ParameterError, match="steps"):
        bioanon.get_method("gait.chain", steps=["noise:scale"])
    with pytest.raises(ParameterError, match="gait.svm is a recognizer, not an anonymizer"):
        bioanon.get_method("gait.chain", steps=["gait.svm"])
    toml = tmp_path / "chain.toml"
    toml.write_text("""
name = "chain"
[dataset]
source = "gait.synthetic"
params = { n_subjects = 10, sequences_per_subject = 4, frames = 20 }
[[anonymizers]]
id = "gait.chain"
params = { steps = ["coarsen_time:factor=4", 'keep_parts:parts=["left_leg","right_leg"]', "noise:scale=0.2"] }
[[recognizers]]
id = "gait.svm"
""")
    from bioanon.evaluation.config import load_config

    cfg = load_config(toml)
    chain = cfg.anonymizers[0].create()
    assert [m.id for m in chain.methods_] == ["gait.coarsen_time", "gait.keep_parts", "gait.noise"]
    assert load_config(cfg.to_dict()) == cfg
    bad = toml.read_text().replace("noise:scale=0.2", "noise:scal=0.2")
    toml.write_text(bad)
    with pytest.raises(bioanon.ConfigError, match=r"anonymizers\[0\]\.params\.steps.*did you mean 'scale'"):
        load_config(toml)


def test_random_set_mean_on_poses_matches_the_core_method():
    if "gait.random_set_mean" not in bioanon.list_methods():
        pytest.skip("bioanon has no any.random_set_mean yet")
    t = bioanon.testing.make_table(payload="pose")
    params = {"attribute": "activity", "set_size": 4, "purity": 0.5, "seed": 3}
    out = bioanon.get_method("gait.random_set_mean", **params).transform(t)
    from bioanon.builtin.random_set_mean import RandomSetMean

    ref = RandomSetMean(**params, payload="pose").transform(t)
    np.testing.assert_array_equal(out.payload("pose"), ref.payload("pose"))


# --------------------------------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("method_id", GAIT_METHODS)
def test_every_gait_method_conforms(method_id):
    report = check_method(bioanon.get_registry().get(method_id))
    report.raise_for_failures()
    assert report.checks_run >= 8, str(report)


@pytest.fixture(scope="module")
def walker_table():
    return bioanon.load_dataset("gait.synthetic", n_subjects=6, sequences_per_subject=4, frames=16)


@pytest.mark.parametrize(
    "method_id",
    [m for m in GAIT_METHODS if bioanon.get_registry().get(m).kind in ("anonymizer", "recognizer", "utility")],
)
def test_every_gait_method_conforms_on_gait_data(method_id, walker_table):
    cls = bioanon.get_registry().get(method_id)
    params = dict(cls.example_params) if method_id in ("gait.cnn", "gait.random_set_mean") else {}
    report = check_method(cls, table=walker_table, params=params)
    report.raise_for_failures()

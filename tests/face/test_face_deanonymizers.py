"""The face de-anonymizers on tiny synthetic faces: each classic one beats the identity (lower MSE to the clear
images than the anonymized input) on the anonymization it targets, on subjects it was not fitted on; the learned
permutation is exact; the fitted parameters match the anonymization's; the Fantômas model's SSIM, determinism,
checkpoints and its advantage over the convolution-only ablation on a permutation."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.errors import ParameterError, TableError
from bioanon.table import SampleTable
from bioanon_face import deanonymizers as d
from bioanon_face.fantomas import Fantomas, FantomasConv, ssim


def _faces(channels=3, size=(32, 32), n_subjects=16, seed=1):
    data = bioanon.load_dataset(
        "face.synthetic", n_subjects=n_subjects, samples_per_subject=5, size=size, channels=channels, seed=seed
    )
    return data.split_subjects([0.5, 0.5], seed=0)


def _mse(a, b) -> float:
    return float(np.mean((a.payload("image").astype(float) - b.payload("image").astype(float)) ** 2))


def _attack(anonymizer, params, deanonymizer, channels=3, **dparams):
    attacker, evaluation = _faces(channels)
    anon = bioanon.get_method(anonymizer, **params)
    m = bioanon.get_method(deanonymizer, **dparams).fit(attacker, anon.transform(attacker))
    anon_eval = anon.transform(evaluation)
    out = m.transform(anon_eval)
    assert np.array_equal(out.sample_ids, anon_eval.sample_ids)
    assert out.payload("image").dtype == np.uint8 and out.payload("image").shape == anon_eval.payload("image").shape
    return m, _mse(anon_eval, evaluation), _mse(out, evaluation)


@pytest.mark.parametrize(
    "anonymizer, params, deanonymizer, ratio",
    [  # measured MSE ratios (grey / RGB):
        ("face.pixelation", {"size": 8}, "face.resample_inversion", 0.92),  # 0.84 / 0.84
        ("face.gaussian_blur", {"kernel": 7}, "face.wiener", 0.6),  # 0.47 / 0.47
        ("face.gaussian_blur", {"kernel": 7}, "face.richardson_lucy", 0.8),  # 0.69 / 0.69
        ("face.gaussian_noise", {"sigma": 40.0}, "face.wavelet_denoise", 0.5),  # 0.36 / 0.37
        ("face.gaussian_noise", {"sigma": 40.0}, "face.resample_inversion", 0.55),  # 0.39 / 0.41
        ("face.dp_snow", {"d": 0.3}, "face.neighbour_interpolation", 0.3),  # 0.19 / 0.18
        ("face.pixel_relocation", {"steps": 5}, "face.learned_permutation", 0.0),  # exact
    ],
)
@pytest.mark.parametrize("channels", [1, 3])
def test_classic_deanonymizer_beats_identity(anonymizer, params, deanonymizer, ratio, channels):
    m, anon, deanon = _attack(anonymizer, params, deanonymizer, channels)
    assert deanon <= ratio * anon, (deanon, anon, deanon / anon)
    assert m.train_mse_ <= m.identity_mse_


@pytest.mark.parametrize("channels", [1, 3])
def test_learned_permutation_restores_block_permutation_exactly(channels):
    attacker, evaluation = _faces(channels)
    perm = bioanon.get_method("face.block_permutation", block_size=4, key=5)
    anon = perm.transform(attacker)
    shuffled = anon.take(np.random.default_rng(0).permutation(len(anon)))  # pairs matched by sample id
    m = d.LearnedPermutation(max_pairs=20).fit(attacker, shuffled)
    assert m.coverage_ == 1.0 and m.match_error_ == 0.0
    out = m.transform(perm.transform(evaluation))
    assert np.array_equal(out.payload("image"), evaluation.payload("image"))
    corr = d.LearnedPermutation(criterion="correlation").fit(attacker, anon).transform(perm.transform(evaluation))
    assert np.array_equal(corr.payload("image"), evaluation.payload("image"))
    with pytest.raises(TableError, match="shape"):
        m.transform(_faces(channels, size=(16, 16))[1])


def test_fitted_parameters_match_the_anonymization():
    m, _, _ = _attack("face.pixelation", {"size": 8}, "face.resample_inversion")
    assert m.size_ == (8, 8)
    m, _, _ = _attack("face.gaussian_blur", {"kernel": 11, "sigma": 1.5}, "face.wiener")
    assert 1.2 < m.sigma_ < 1.8, m.sigma_
    m, _, _ = _attack("face.gaussian_blur", {"kernel": 11, "sigma": 1.5}, "face.richardson_lucy")
    assert 1.1 < m.sigma_ < 1.9 and m.iterations_ > 3, (m.sigma_, m.iterations_)
    m, _, _ = _attack("face.dp_snow", {"d": 0.3, "grey": 60}, "face.neighbour_interpolation")
    assert m.value_ == 60 and m.snow_share_ > 0.9


def test_identity_pairs_learn_the_identity():
    attacker, evaluation = _faces()
    for cls in (d.ResampleInversion, d.WaveletDenoise, d.NeighbourInterpolation, d.LearnedPermutation):
        m = cls().fit(attacker, attacker)
        out = m.transform(evaluation)
        assert np.array_equal(out.payload("image"), evaluation.payload("image")), cls.id


def test_neighbour_interpolation_fills_isolated_and_clustered_snow():
    x = np.full((1, 8, 8, 1), 50, np.uint8)
    x[0, :, 4:] = 200  # an edge
    snow = x.copy()
    snow[0, 1, 1] = 127  # isolated
    snow[0, 3:6, 5:8] = 127  # a 3×3 cluster: its centre has no known neighbour in the first round
    clear_t = SampleTable.from_arrays(subject=np.array(["a"]), payloads={"image": x})
    anon_t = SampleTable.from_arrays(subject=np.array(["a"]), payloads={"image": snow})
    m = d.NeighbourInterpolation().fit(clear_t, anon_t)
    assert m.value_ == 127
    out = m.transform(anon_t).payload("image")
    assert out[0, 1, 1, 0] == 50 and np.all(out[0, 3:6, 5:8] == 200)


def test_resize_batch_matches_per_image_opencv():
    import cv2

    x = np.random.default_rng(0).integers(0, 256, (7, 20, 18, 3)).astype(np.float32)
    for interp, flag in (("linear", cv2.INTER_LINEAR), ("cubic", cv2.INTER_CUBIC), ("area", cv2.INTER_AREA)):
        for size in ((10, 9), (40, 36), (5, 5)):
            out = d.resize_batch(x, size, interp)
            ref = np.stack([cv2.resize(im, size[::-1], interpolation=flag) for im in x])
            assert np.allclose(out, ref, atol=1e-3), (interp, size)


def test_mismatched_pair_shapes_are_rejected():
    attacker, _ = _faces()
    small = _faces(size=(16, 16))[0]
    with pytest.raises(TableError, match="shape"):
        d.Wiener().fit(attacker, small)


# --------------------------------------------------------------------------------------------------- Fantômas


def test_torch_ssim_matches_the_reference_formula():
    torch = pytest.importorskip("torch")
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(0)
    a = rng.random((3, 2, 24, 20))
    b = np.clip(a + 0.2 * rng.standard_normal(a.shape), 0, 1)
    sig = (0, 0, 1.5, 1.5)

    def f(t):
        return gaussian_filter(t, sig, mode="reflect", truncate=3.5)[:, :, 5:-5, 5:-5]  # valid 11×11 windows

    mx, my = f(a), f(b)
    s = ((2 * mx * my + 1e-4) * (2 * (f(a * b) - mx * my) + 9e-4)) / (
        (mx**2 + my**2 + 1e-4) * (f(a * a) - mx**2 + f(b * b) - my**2 + 9e-4)
    )
    got = ssim(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    assert np.allclose(got, s.reshape(3, -1).mean(1), atol=1e-6)
    assert np.allclose(ssim(torch.from_numpy(a), torch.from_numpy(a)).numpy(), 1.0)


def test_fantomas_is_deterministic_and_checkpoints(tmp_path):
    pytest.importorskip("torch")
    attacker, evaluation = _faces(channels=1)
    anon = bioanon.get_method("face.gaussian_blur", kernel=5)
    params = dict(features=4, resolution=(16, 16), epochs=3, batch_size=8, threads=1)
    a = Fantomas(**params).fit(attacker, anon.transform(attacker))
    b = Fantomas(**params).fit(attacker, anon.transform(attacker))
    probe = anon.transform(evaluation)
    out = a.transform(probe).payload("image")
    assert out.shape == probe.payload("image").shape  # back at 32×32 from the 16×16 network
    assert np.array_equal(out, b.transform(probe).payload("image"))
    assert len(a.history_) == 3 and "val_loss" in a.history_[0]  # 4 of the 40 pairs held out
    held = a.held_out_ids()  # named for the evaluation's learning check
    assert len(held) == 4 and set(held) <= set(attacker.sample_ids) and np.array_equal(held, b.held_out_ids())
    few = Fantomas(**params).fit(attacker.take(np.arange(8)), anon.transform(attacker.take(np.arange(8))))
    assert "val_loss" not in few.history_[0] and few.held_out_ids() is None  # fewer than 10 pairs: none held out
    path = tmp_path / "fantomas.pt"
    a.save_checkpoint(path)
    loaded = Fantomas.load_checkpoint(path)
    assert np.array_equal(loaded.transform(probe).payload("image"), out)
    with pytest.raises(ValueError, match="not a face.fantomas_conv"):
        FantomasConv.load_checkpoint(path)


def test_fantomas_refuses_an_oversized_linear_layer():
    pytest.importorskip("torch")
    attacker, _ = _faces(channels=1)
    with pytest.raises(ParameterError, match="features"):
        Fantomas(features=64, resolution=(512, 512), epochs=1).fit(attacker, attacker)


@pytest.mark.slow
def test_fantomas_inverts_a_permutation_the_conv_only_model_cannot():
    """E2.2 in miniature: 32×32 grey synthetic faces, block permutation with 8-pixel blocks."""
    pytest.importorskip("torch")
    attacker, evaluation = _faces(channels=1, n_subjects=60)
    perm = bioanon.get_method("face.block_permutation", block_size=8, key=2)
    pairs, probe = perm.transform(attacker), perm.transform(evaluation)
    params = dict(features=8, resolution=(32, 32), epochs=40, lr=3e-3, batch_size=16, threads=1)
    lin = _mse(Fantomas(**params).fit(attacker, pairs).transform(probe), evaluation)
    conv = _mse(FantomasConv(**params).fit(attacker, pairs).transform(probe), evaluation)
    anon = _mse(probe, evaluation)
    print(f"MSE anonymized {anon:.0f}, fantomas {lin:.0f}, conv-only {conv:.0f}")
    assert lin < 0.3 * anon and lin < 0.6 * conv, (anon, lin, conv)  # measured 0.18·anon, 0.37·conv

"""Each face anonymization against a direct reference on tiny images; SSIM/PSNR against direct formulas."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.table import SampleTable


def _table(n=4, h=12, w=10, c=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    return SampleTable.from_arrays(subject=np.array([f"s{i % 2}" for i in range(n)]), payloads={"image": x})


def _run(method_id, table, **params):
    return bioanon.get_registry().create(method_id, **params).fit_transform(table).payload("image")


def test_blur_equals_opencv():
    import cv2

    t = _table()
    out = _run("face.gaussian_blur", t, kernel=5)
    for i, img in enumerate(t.payload("image")):
        assert np.array_equal(out[i], cv2.GaussianBlur(img, (5, 5), 0))
    grey = _table(c=1, n=3)
    out = _run("face.gaussian_blur", grey, kernel=7, sigma=2.0)
    for i, img in enumerate(grey.payload("image")):
        assert np.array_equal(out[i, :, :, 0], cv2.GaussianBlur(img[:, :, 0], (7, 7), 2.0))


def test_pixelation_block_means_non_square():
    t = _table(h=12, w=10)
    x = t.payload("image").astype(float)
    out = _run("face.pixelation", t, size=4)
    re_, ce = np.round(np.linspace(0, 12, 5)).astype(int), np.round(np.linspace(0, 10, 5)).astype(int)
    for a in range(4):
        for b in range(4):
            cell = x[:, re_[a] : re_[a + 1], ce[b] : ce[b + 1]]
            mean = np.rint(cell.mean(axis=(1, 2)))
            assert np.array_equal(
                out[:, re_[a] : re_[a + 1], ce[b] : ce[b + 1]],
                np.broadcast_to(mean[:, None, None], cell.shape).astype(np.uint8),
            )


def test_noise_zero_mean_and_clipped():
    t = SampleTable.from_arrays(subject=np.array(["a"] * 8), payloads={"image": np.full((8, 32, 32, 1), 128, np.uint8)})
    out = _run("face.gaussian_noise", t, sigma=10.0).astype(float)
    assert abs(out.mean() - 128) < 0.3 and 9.5 < out.std() < 10.5
    big = _run("face.gaussian_noise", t, sigma=200.0)
    assert big.min() == 0 and big.max() == 255


def test_block_permutation_is_spatial_bijection():
    t = _table(n=2, h=12, w=10, c=1)
    x = t.payload("image")
    out = _run("face.block_permutation", t, block_size=4, key=3)
    # the trailing 2 columns (10 = 2 * 4 + 2) stay in place
    assert np.array_equal(out[:, :, 8:], x[:, :, 8:])
    blocks_in = {x[0, r : r + 4, c : c + 4].tobytes() for r in (0, 4, 8) for c in (0, 4)}
    blocks_out = [out[0, r : r + 4, c : c + 4].tobytes() for r in (0, 4, 8) for c in (0, 4)]
    assert set(blocks_out) == blocks_in and len(set(blocks_out)) == 6  # blocks moved whole, each once
    m = bioanon.get_registry().create("face.block_permutation", block_size=4, key=3)
    perm = m.permutation(6)
    for i, src in enumerate(perm):
        r, c = divmod(i, 2)
        sr, sc = divmod(src, 2)
        assert np.array_equal(
            out[1, 4 * r : 4 * r + 4, 4 * c : 4 * c + 4], x[1, 4 * sr : 4 * sr + 4, 4 * sc : 4 * sc + 4]
        )


def test_pixel_relocation_is_a_fixed_permutation():
    t = _table(n=3)
    x = t.payload("image")
    m = bioanon.get_registry().create("face.pixel_relocation", steps=5, key=1)
    idx = m.index_map(12, 10)
    assert np.array_equal(np.sort(idx), np.arange(120))
    out = m.transform(t).payload("image")
    assert np.array_equal(out.reshape(3, 120, 3), x.reshape(3, 120, 3)[:, idx])
    inv = np.argsort(idx)
    assert np.array_equal(out.reshape(3, 120, 3)[:, inv], x.reshape(3, 120, 3))


def test_dp_snow_replaces_the_stated_share():
    t = SampleTable.from_arrays(subject=np.array(["a"] * 5), payloads={"image": np.zeros((5, 10, 11, 3), np.uint8)})
    out = _run("face.dp_snow", t, d=0.3)
    grey = (out == 127).all(axis=-1)
    assert np.array_equal(grey.sum(axis=(1, 2)), np.full(5, round(0.3 * 110)))
    assert ((out == 0) | (out == 127)).all()
    assert not np.array_equal(grey[0], grey[1])  # independent per image


def test_dp_pix_is_pixelation_plus_laplace():
    t = _table(n=200, h=8, w=6, c=1)
    x = t.payload("image").astype(float)
    clean = _run("face.dp_pix", t, b=4, epsilon=1e9)
    ref = np.zeros_like(x)
    for r0, r1 in ((0, 4), (4, 8)):
        for c0, c1 in ((0, 4), (4, 6)):  # the edge column block is 4×2
            ref[:, r0:r1, c0:c1] = x[:, r0:r1, c0:c1].mean(axis=(1, 2), keepdims=True)
    assert np.abs(clean - np.rint(ref)).max() <= 1
    noisy = _run("face.dp_pix", t, b=4, m=1, epsilon=1.0).astype(float)
    d = (noisy - np.rint(ref))[:, 0, 0, 0]
    d = d[(noisy[:, 0, 0, 0] > 0) & (noisy[:, 0, 0, 0] < 255)]
    scale = 255.0 / 16.0
    assert abs(np.median(np.abs(d)) - scale * np.log(2)) < 0.35 * scale  # Laplace(b): median |X| = b ln 2


def test_eye_mask_band():
    t = _table(h=20, w=10)
    out = _run("face.eye_mask", t, top=0.3, bottom=0.5, left=0.1, right=0.9)
    x = t.payload("image")
    assert (out[:, 6:10, 1:9] == 0).all()
    keep = np.ones((20, 10), bool)
    keep[6:10, 1:9] = False
    assert np.array_equal(out[:, keep], x[:, keep])
    with pytest.raises(bioanon.errors.ParameterError):
        bioanon.get_registry().create("face.eye_mask", top=0.5, bottom=0.4)


def test_k_same_pixel_averages_k_background_identities():
    rng = np.random.default_rng(0)
    bg = SampleTable.from_arrays(
        subject=np.repeat([f"b{i}" for i in range(5)], 2),
        payloads={"image": rng.integers(0, 256, (10, 6, 6, 1), dtype=np.uint8)},
    )
    t = _table(n=2, h=6, w=6, c=1)
    m = bioanon.get_registry().create("face.k_same_pixel", k=3, n_components=50)
    out = m.fit(bg).transform(t).payload("image").astype(float)
    xb = bg.payload("image").reshape(10, -1).astype(float)
    for i, img in enumerate(t.payload("image").reshape(2, -1).astype(float)):
        d = ((xb - img) ** 2).sum(1)  # all components kept: PCA distances equal pixel distances
        best = {}
        for j, s in enumerate(bg.subjects):
            if s not in best or d[j] < d[best[s]]:
                best[s] = j
        picks = sorted(best.values(), key=lambda j: d[j])[:2]
        ref = (img + xb[picks].sum(0)) / 3
        assert np.abs(out[i].ravel() - np.rint(ref)).max() <= 1


def test_ssim_and_psnr_reference():
    from bioanon_face.utility import psnr_batch, ssim_batch

    t = _table(n=3, h=16, w=16, c=1)
    x = t.payload("image")
    assert np.allclose(ssim_batch(x, x), 1.0)
    y = np.clip(x.astype(int) + 10, 0, 255).astype(np.uint8)
    mse = ((x.astype(float) - y) ** 2).reshape(3, -1).mean(1)
    assert np.allclose(psnr_batch(x, y), 10 * np.log10(255**2 / mse))
    # SSIM against a direct per-image computation with OpenCV's Gaussian filter (11×11, σ 1.5, reflect)
    import cv2

    noisy = _run("face.gaussian_noise", t, sigma=30.0)
    got = ssim_batch(x, noisy)
    for i in range(3):
        a, b = x[i, :, :, 0].astype(np.float64), noisy[i, :, :, 0].astype(np.float64)

        def f(z):
            return cv2.GaussianBlur(z, (11, 11), 1.5, borderType=cv2.BORDER_REFLECT)

        ma, mb = f(a), f(b)
        va, vb, cab = f(a * a) - ma**2, f(b * b) - mb**2, f(a * b) - ma * mb
        c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
        ref = (((2 * ma * mb + c1) * (2 * cab + c2)) / ((ma**2 + mb**2 + c1) * (va + vb + c2))).mean()
        assert got[i] == pytest.approx(ref, abs=2e-3)
    assert got.max() < 0.99
    u = bioanon.get_registry().create("face.ssim")
    shuffled = t.take(np.array([2, 0, 1]))
    assert np.allclose(u.measure(t, shuffled), 1.0)  # matched by sample id

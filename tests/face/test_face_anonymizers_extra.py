"""DP Samp, k-RTIO, k-Same-Eigen and the eigen random-set mean against direct references on tiny images."""

from __future__ import annotations

import math

import numpy as np
import pytest

import bioanon
from bioanon.table import SampleTable


def _table(n=4, h=6, w=8, c=3, seed=0, prefix="s", subjects=None, attrs=None):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    subj = np.array([f"{prefix}{i % 2}" for i in range(n)]) if subjects is None else np.asarray(subjects)
    return SampleTable.from_arrays(
        subject=subj,
        sample_id=np.array([f"{prefix}id{i}" for i in range(n)]),
        payloads={"image": x},
        attributes=attrs or {},
    )


def _create(method_id, **params):
    return bioanon.get_registry().create(method_id, **params)


# ------------------------------------------------------------------------------------------------------ k-RTIO


def test_k_rtio_alpha_one_returns_the_input_and_alpha_zero_only_overlay_blocks():
    bg, t = _table(n=5, seed=1, prefix="b"), _table(n=3, seed=2)
    assert np.array_equal(
        _create("face.k_rtio", alpha=1.0, block_size=2, k=2).fit(bg).transform(t).payload("image"), t.payload("image")
    )
    m = _create("face.k_rtio", alpha=0.0, block_size=2, k=1, key=7).fit(bg)
    out = m.transform(t).payload("image")
    choice, _ = m.plan(t.sample_ids, 5, 12)
    for i in range(3):  # 6×8 = 3×4 blocks of 2×2: the output's blocks are exactly the chosen overlay's blocks
        src = bg.payload("image")[choice[i, 0]]
        blocks_out = sorted(out[i, r : r + 2, q : q + 2].tobytes() for r in (0, 2, 4) for q in (0, 2, 4, 6))
        blocks_src = sorted(src[r : r + 2, q : q + 2].tobytes() for r in (0, 2, 4) for q in (0, 2, 4, 6))
        assert blocks_out == blocks_src
        assert not np.array_equal(out[i], t.payload("image")[i])


def test_k_rtio_plan_is_keyed_by_key_and_sample_id():
    t = _table(n=6)
    m = _create("face.k_rtio", k=3, key=11)
    choice, perms = m.plan(t.sample_ids, 10, 20)
    assert choice.shape == (6, 3) and perms.shape == (6, 3, 20)
    assert all(len(set(row)) == 3 for row in choice) and choice.min() >= 0 and choice.max() < 10
    assert all(np.array_equal(np.sort(p), np.arange(20)) for p in perms.reshape(-1, 20))
    c2, p2 = _create("face.k_rtio", k=3, key=11).plan(t.sample_ids, 10, 20)
    assert np.array_equal(choice, c2) and np.array_equal(perms, p2)  # deterministic for a key
    c3, p3 = _create("face.k_rtio", k=3, key=12).plan(t.sample_ids, 10, 20)
    assert not np.array_equal(perms, p3) and not np.array_equal(choice, c3)  # another key, another plan
    c4, p4 = m.plan(t.sample_ids[::-1], 10, 20)  # keyed by the id, not the row
    assert np.array_equal(choice[::-1], c4) and np.array_equal(perms[::-1], p4)
    assert len({p.tobytes() for p in perms.reshape(-1, 20)}) == 18  # different per image and overlay


def test_k_rtio_equals_a_per_pixel_reference():
    bg, t = _table(n=4, seed=3, prefix="b"), _table(n=3, seed=4)  # 6×8 images, 3×3 blocks: 2×2 + 2 columns left
    alpha, b, k = 0.3, 3, 2
    m = _create("face.k_rtio", alpha=alpha, block_size=b, k=k, key=5).fit(bg)
    out = m.transform(t).payload("image")
    choice, perms = m.plan(t.sample_ids, 4, 4)
    x, ov = t.payload("image").astype(float), bg.payload("image").astype(float)
    for i in range(3):
        for y in range(6):
            for q in range(8):
                for ch in range(3):
                    total = 0.0
                    for j in range(k):
                        if q < 6:  # inside the whole blocks: output block (y//b, q//b) takes block perms[...]
                            sr, sc = divmod(perms[i, j, (y // b) * 2 + q // b], 2)
                            total += ov[choice[i, j], sr * b + y % b, sc * b + q % b, ch]
                        else:
                            total += ov[choice[i, j], y, q, ch]
                    ref = alpha * x[i, y, q, ch] + (1 - alpha) * total / k
                    assert abs(float(out[i, y, q, ch]) - ref) <= 0.5 + 1e-6


def test_k_rtio_errors_name_the_problem():
    t = _table(n=3)
    with pytest.raises(bioanon.errors.TableError, match="overlay"):
        _create("face.k_rtio", k=1, block_size=2).fit(_table(n=3, h=8, w=8)).transform(t)
    with pytest.raises(bioanon.errors.ParameterError, match="k"):
        _create("face.k_rtio", k=4, block_size=2).fit(t).transform(t)


# ------------------------------------------------------------------------------------------------------ DP Samp


def test_dp_sample_counts_match_the_binomial_rule():
    from bioanon_face.anonymizers import dp_sample_counts

    f = np.array([0, 3, 5, 12, 13, 20, 50, 200, 200, 1000, 37])
    eps = np.array([1.0, 2.0, 0.5, 5.0, 0.1, 1.0, 0.7, 2.5, 25.0, 0.3, 100.0])
    m = 5
    got = dp_sample_counts(f, m, eps)
    for fi, ei, gi in zip(f, eps, got, strict=True):
        ok = [x for x in range(fi - m + 1) if math.comb(fi, x) / math.comb(fi - m, x) <= math.exp(ei)]
        assert gi == (max(ok) if fi > m else 0), (fi, ei)
    assert got[0] == 0 and got[1] == 0 and got[-1] == 37 - 5 and got[5] > 0


def test_dp_samp_plan_follows_the_algorithm():
    from bioanon_face.anonymizers import dp_sample_counts

    t = _table(n=3, h=10, w=14, c=3, seed=5)
    x = t.payload("image").reshape(3, -1, 3).astype(float)
    m = _create("face.dp_samp", epsilon=8.0, k=5, m=2, threshold=120.0)
    plan = m.plan(t.payload("image"), np.random.default_rng(0))
    cent, lab = plan["centres"].astype(float), plan["labels"]
    d = ((x[:, :, None, :] - cent[:, None, :, :]) ** 2).sum(-1)
    assert np.all(d[np.arange(3)[:, None], np.arange(140)[None, :], lab] <= d.min(axis=2) + 1e-3)  # nearest centre
    elig = np.abs(x - cent[np.arange(3)[:, None], lab]).sum(-1) <= 120.0
    assert np.array_equal(elig, plan["eligible"])
    for i in range(3):
        freq = np.array([(elig[i] & (lab[i] == j)).sum() for j in range(5)])
        assert np.array_equal(freq, plan["frequencies"][i])
        counts = dp_sample_counts(freq, 2, 8.0 * freq / freq.sum())
        assert np.array_equal(counts, plan["counts"][i]) and counts.sum() > 0
        got = np.array([(plan["sampled"][i] & (lab[i] == j)).sum() for j in range(5)])
        assert np.array_equal(got, counts)
    assert not (plan["sampled"] & ~plan["eligible"]).any()


def test_dp_samp_samples_uniformly():
    flat = np.zeros((400, 4, 5, 1), np.uint8)
    flat[:, :, 3:] = 200  # two colours: 12 and 8 pixels
    m = _create("face.dp_samp", epsilon=3.0, k=2, m=2, threshold=0.0)
    plan = m.plan(flat, np.random.default_rng(1))
    rows = np.arange(400)
    dark, light = plan["counts"][rows, plan["labels"][:, 0]], plan["counts"][rows, plan["labels"][:, 4]]
    assert (dark == dark[0]).all() and (light == light[0]).all() and dark[0] > 0 and light[0] > 0
    assert plan["sampled"].sum(axis=1).tolist() == [dark[0] + light[0]] * 400
    rate = plan["sampled"].mean(axis=0).reshape(4, 5)
    dark_share = dark[0] / 12
    assert np.abs(rate[:, :3] - dark_share).max() < 4 * np.sqrt(dark_share * (1 - dark_share) / 400)
    light_share = light[0] / 8
    assert np.abs(rate[:, 3:] - light_share).max() < 4 * np.sqrt(light_share * (1 - light_share) / 400) + 1e-9


def test_dp_samp_interpolation_equals_griddata_and_nearest_fill():
    from scipy.interpolate import griddata

    from bioanon_face.anonymizers import DpSamp

    rng = np.random.default_rng(2)
    h, w = 9, 13
    sampled = rng.random((3, h * w)) < 0.15
    sampled[2] = False
    sampled[2, [5, 30]] = True  # two samples: no triangle, nearest fill only
    colours = rng.random((3, h * w, 2)) * 255
    out = DpSamp.interpolate(sampled, colours, h, w).reshape(3, h * w, 2)
    grid = np.stack(np.divmod(np.arange(h * w), w), axis=1).astype(float)
    for i in range(3):
        idx = np.flatnonzero(sampled[i])
        pts = grid[idx]
        lin = griddata(pts, colours[i, idx], grid, method="linear") if i < 2 else np.full((h * w, 2), np.nan)
        inside = ~np.isnan(lin[:, 0])
        inside[idx] = True
        lin[idx] = colours[i, idx]
        assert np.allclose(out[i, inside], lin[inside], atol=1e-6)
        for q in np.flatnonzero(~inside):  # the value of a nearest inside pixel
            dist = ((grid[inside] - grid[q]) ** 2).sum(1)
            near = lin[inside][dist == dist.min()]
            assert np.any(np.all(np.isclose(near, out[i, q]), axis=1))
    none = DpSamp.interpolate(np.zeros((1, h * w), bool), colours[:1], h, w)
    assert np.all(none == 127.0)


def test_dp_samp_non_square_output():
    x = np.full((2, 10, 16, 3), 30, np.uint8)
    x[:, :, 8:] = 220  # left and right halves of a 10×16 image
    t = SampleTable.from_arrays(subject=np.array(["a", "b"]), payloads={"image": x})
    out = _create("face.dp_samp", epsilon=1e4, k=2, m=1, threshold=10.0).fit_transform(t).payload("image")
    assert out.shape == x.shape and out.dtype == np.uint8
    assert (out == x).mean() > 0.95  # nearly every pixel sampled: the halves stay where they are
    coarse = _create("face.dp_samp", epsilon=5.0, k=2, m=4).fit_transform(t).payload("image")
    assert (
        np.abs(coarse[:, :, :3].astype(int) - 30).mean() < 40
        and np.abs(coarse[:, :, -3:].astype(int) - 220).mean() < 40
    )
    assert not np.array_equal(coarse, x)
    again = _create("face.dp_samp", epsilon=5.0, k=2, m=4).fit_transform(t).payload("image")
    assert np.array_equal(coarse, again)


# -------------------------------------------------------------------------------------------------- k-Same-Eigen


def _pca(flat, n):  # eigenfaces with non-zero variance (M background images give at most M - 1)
    mean = flat.mean(0)
    _, sv, vt = np.linalg.svd(flat - mean, full_matrices=False)
    return mean, vt[: min(n, int((sv > 1e-6 * sv[0]).sum()))].T


def _eigen_reference(bg, t, k, include_self):
    xb = bg.payload("image").reshape(len(bg), -1).astype(float)
    xt = t.payload("image").reshape(len(t), -1).astype(float)
    mean, basis = _pca(xb, 100)
    zb, zt = (xb - mean) @ basis, (xt - mean) @ basis
    out, used = [], []
    for i in range(len(t)):
        best = {}
        for j, s in enumerate(bg.subjects):
            if s == t.subjects[i]:
                continue
            dj = ((zb[j] - zt[i]) ** 2).sum()
            if s not in best or dj < best[s][0]:
                best[s] = (dj, j)
        picks = [j for _, j in sorted(best.values())][: (k - 1 if include_self else k)]
        z = [zt[i]] * include_self + [zb[j] for j in picks]
        out.append(mean + np.mean(z, axis=0) @ basis.T)
        used.append(picks)
    return np.array(out), used


def _background(n_ids=6, per=2, seed=7, h=6, w=5):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n_ids * per, h, w, 1), dtype=np.uint8)
    return SampleTable.from_arrays(
        subject=np.repeat([f"b{i}" for i in range(n_ids)], per),
        sample_id=np.array([f"bg{i}" for i in range(n_ids * per)]),
        payloads={"image": x},
    )


def test_k_same_eigen_k1_reproduces_the_nearest_face_or_the_projection():
    bg, t = _background(), _table(n=3, h=6, w=5, c=1, seed=8)
    m = _create("face.k_same_eigen", k=1, n_components=100, include_self=False).fit(bg)
    out = m.transform(t).payload("image").reshape(3, -1).astype(float)
    ref, used = _eigen_reference(bg, t, 1, include_self=False)
    assert np.abs(out - np.rint(np.clip(ref, 0, 255))).max() <= 1
    xb = bg.payload("image").reshape(12, -1).astype(float)
    for i in range(3):  # all components: the nearest background face itself
        assert np.abs(out[i] - xb[used[i][0]]).max() <= 1
    own = _create("face.k_same_eigen", k=1, n_components=100).fit(bg).transform(t).payload("image")
    ref_self, _ = _eigen_reference(bg, t, 1, include_self=True)  # k=1 with the image: its own projection
    assert np.abs(own.reshape(3, -1).astype(float) - np.rint(np.clip(ref_self, 0, 255))).max() <= 1


@pytest.mark.parametrize("include_self", [True, False])
def test_k_same_eigen_averages_k_faces_of_distinct_identities(include_self):
    bg, t = _background(), _table(n=4, h=6, w=5, c=1, seed=9, subjects=["b0", "x", "b3", "y"])
    m = _create("face.k_same_eigen", k=3, n_components=100, include_self=include_self).fit(bg)
    out = m.transform(t).payload("image").reshape(4, -1).astype(float)
    ref, used = _eigen_reference(bg, t, 3, include_self)
    assert np.abs(out - np.rint(np.clip(ref, 0, 255))).max() <= 1
    for i, picks in enumerate(used):
        ids = bg.subjects[picks]
        assert len(set(ids)) == len(picks) == (2 if include_self else 3)  # ≥ k faces, distinct identities
        assert t.subjects[i] not in ids
    few = _create("face.k_same_eigen", k=3, n_components=3).fit(bg).transform(t).payload("image")
    assert few.shape == t.payload("image").shape and few.dtype == np.uint8
    assert not np.array_equal(few, m.transform(t).payload("image"))  # fewer eigenfaces, another image


# ------------------------------------------------------------------------------------------- eigen random-set mean


def test_random_set_mean_eigen_equals_the_mean_on_coefficients():
    if "face.random_set_mean_eigen" not in bioanon.list_methods("face.*"):
        pytest.skip("bioanon without any.random_set_mean")
    rng = np.random.default_rng(10)
    attrs = {"mood": np.array(["a", "b"])[rng.integers(0, 2, 24)]}
    bg = _table(
        n=20,
        h=6,
        w=5,
        c=1,
        seed=11,
        prefix="b",
        subjects=[f"b{i % 5}" for i in range(20)],
        attrs={"mood": attrs["mood"][:20]},
    )
    t = _table(n=24, h=6, w=5, c=1, seed=12, subjects=[f"t{i % 6}" for i in range(24)], attrs=attrs)
    params = dict(attribute="mood", set_size=4, purity=0.5, weight=10.0, retention=0.3, seed=3, backend="numpy")
    m = _create("face.random_set_mean_eigen", n_components=8, **params).fit(bg)
    out = m.transform(t).payload("image")
    assert out.shape == t.payload("image").shape and out.dtype == np.uint8
    from bioanon_face.anonymizers import pca_basis

    mean, basis = pca_basis(bg.payload("image").reshape(20, -1).astype(np.float32), 8)
    assert np.allclose(np.abs(mean - m.mean_), 0) and np.allclose(np.abs(basis), np.abs(m.basis_), atol=1e-5)

    def coeffs(table):
        z = ((table.payload("image").reshape(len(table), -1).astype(np.float32) - mean) @ basis).astype(np.float32)
        return SampleTable.from_arrays(
            subject=table.subjects,
            sample_id=table.sample_ids,
            payloads={"features": z},
            attributes={"mood": table.attribute("mood")},
        )

    core = _create("any.random_set_mean", **params).fit(coeffs(bg))
    z = core.transform(coeffs(t)).payload("features").astype(np.float64)
    ref = np.clip(np.rint(mean + z @ basis.T), 0, 255).reshape(out.shape)
    assert np.abs(out.astype(int) - ref).max() <= 1
    assert not np.array_equal(out, t.payload("image"))

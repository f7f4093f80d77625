"""Haar-cascade face detection and eye-level alignment (bioanon_face.detect) on the real ORL images.

The Haar cascade hardly fires on face.synthetic's drawn faces (about 2 of 50 at 32×32, a third at 64×64), so
alignment is tested on ORL images rotated by known angles."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import bioanon
from bioanon.errors import TableError
from bioanon_face.detect import align_faces, crop_maps, detect_faces


@functools.lru_cache(maxsize=1)
def _orl(root: str):
    return bioanon.get_registry().create("face.orl").load(root)


@pytest.fixture
def orl(shared_data):
    return _orl(str(shared_data / "att_faces"))


def _rotate(images: np.ndarray, degrees: np.ndarray) -> np.ndarray:
    """Rotate each grey image about its centre so that lines turn by ``degrees`` clockwise on screen."""
    import cv2

    h, w = images.shape[1:3]
    return np.stack(
        [
            cv2.warpAffine(
                im,
                cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), -a, 1.0),
                (w, h),
                borderMode=cv2.BORDER_REPLICATE,
            )
            for im, a in zip(images, degrees, strict=True)
        ]
    )


def test_orl_faces_are_found(orl):
    x = orl.payload("image")[::2]  # 200 of the 400 images: 5 per subject
    det = detect_faces(x, eyes=True)
    rate, eye_rate = det.found.mean(), det.eyes_found.mean()
    print(f"ORL: face found in {rate:.1%} of {len(x)} images, eye pair in {eye_rate:.1%}")
    assert rate >= 0.85  # measured 0.91 on all 400 images
    assert eye_rate >= 0.75
    assert np.all(det.confidence >= 0) and np.all(det.confidence[~det.found] == 0)
    assert np.median(det.confidence[det.found]) > 3.0
    b = det.boxes[det.found]
    assert 0.6 < np.median(b[:, 2]) / x.shape[2] < 0.95  # ORL faces fill most of the 92-pixel width
    assert np.all(b[:, :2] >= 0) and np.all(b[:, 0] + b[:, 2] <= x.shape[2] + 1)
    # eyes sit in the upper half of the box, the image-left one left of the other
    e = det.eyes[det.eyes_found]
    assert np.all(e[:, 0, 0] < e[:, 1, 0])
    assert np.all(e[:, :, 1] < (det.boxes[det.eyes_found, 1] + 0.6 * det.boxes[det.eyes_found, 3])[:, None])


def test_no_face_in_blank_or_noise_images():
    rng = np.random.default_rng(0)
    x = np.concatenate([np.full((4, 96, 96), 128, np.uint8), rng.integers(0, 256, (4, 96, 96), dtype=np.uint8)])
    det = detect_faces(x, eyes=True)
    assert not det.found.any() and np.all(det.confidence == 0) and not det.eyes_found.any()
    crops = align_faces(x, (32, 32))
    assert not crops.found.any() and crops.images.shape == (8, 32, 32, 1)


def test_rotation_is_estimated_and_aligned_away(orl):
    x = orl.payload("image")[::4, ..., 0]
    base = detect_faces(x, eyes=True)
    idx = np.flatnonzero(base.eyes_found)
    rng = np.random.default_rng(0)
    theta = rng.choice([-1.0, 1.0], len(idx)) * rng.uniform(8.0, 20.0, len(idx))
    rotated = _rotate(x[idx], theta)
    det = detect_faces(rotated, eyes=True)
    ok = det.eyes_found
    err = np.abs(det.angle[ok] - base.angle[idx][ok] - theta[ok])
    print(
        f"rotated by 8-20°: eyes found in {ok.sum()}/{len(idx)}, angle error median {np.median(err):.2f}° "
        f"p90 {np.percentile(err, 90):.2f}°"
    )
    assert ok.mean() >= 0.7 and np.median(err) < 2.0 and np.percentile(err, 90) < 4.0

    crops = align_faces(rotated, (64, 64), margin=0.2)
    assert crops.images.shape == (len(idx), 64, 64, 1) and crops.images.dtype == np.uint8
    assert np.allclose(crops.angle[crops.eyes_found], det.angle[crops.eyes_found])
    after = detect_faces(crops.images, eyes=True)
    both = after.eyes_found & crops.eyes_found
    before = np.median(np.abs(det.angle[ok]))
    tilt = np.abs(after.angle[both])
    print(
        f"eye line tilt: median {before:.1f}° before, {np.median(tilt):.2f}° after alignment "
        f"(p90 {np.percentile(tilt, 90):.2f}°, {both.sum()} crops)"
    )
    assert both.mean() >= 0.7
    assert before > 8.0 and np.median(tilt) < 2.5 and np.percentile(tilt, 90) < 5.0
    # the crop is centred on the face: the re-detected face box is centred and fills a similar share
    box = after.boxes[after.found]
    centre = box[:, :2] + box[:, 2:] / 2
    assert np.median(np.abs(centre - 32), axis=0).max() < 4.0


def test_crop_maps_geometry():
    # a 40×40 box at (10, 20), no rotation, margin 0.25 → a 60×60 window centred on the box
    maps, f = crop_maps(np.array([[10.0, 20.0, 40.0, 40.0]]), np.array([0.0]), (30, 30), 0.25)
    assert f[0] == 2  # 2 source pixels per output pixel: rendered at 60×60, then block-averaged
    m = maps[0]
    corner = m @ np.array([0.0, 0.0, 1.0])
    far = m @ np.array([59.0, 59.0, 1.0])
    assert np.allclose(corner, [0.0, 10.0]) and np.allclose(far, [59.0, 69.0])
    # 90° turns the window's x axis into the source's y axis
    maps, _ = crop_maps(np.array([[0.0, 0.0, 10.0, 10.0]]), np.array([90.0]), (10, 10), 0.0)
    assert np.allclose(maps[0][:, :2], [[0.0, -1.0], [1.0, 0.0]], atol=1e-12)


def test_align_table_input_and_sizes(orl):
    t = orl.take(np.arange(0, 400, 40))
    crops = align_faces(t, (48, 40), channels=3)
    assert crops.images.shape == (10, 48, 40, 3)
    assert np.array_equal(crops.images[..., 0], crops.images[..., 2])
    native = align_faces(t)  # (0, 0): the common native size
    assert native.images.shape == (10, 112, 92, 1)
    with pytest.raises(TableError, match="different sizes"):
        align_faces([np.zeros((20, 20), np.uint8), np.zeros((30, 20), np.uint8)])


def test_images_without_a_face_are_listed_in_the_run_warnings(shared_data, tmp_path):
    cfg = {
        "name": "align",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive"],
        "dataset": {
            "source": "face.orl",
            "path": str(shared_data / "att_faces"),
            "params": {"size": [32, 32], "align": True, "no_face": "keep"},
        },
        "rates": {"background": 0.1, "attacker": 0.3, "evaluation": 0.6, "enrolment": 0.5},
        "anonymizers": [{"id": "face.gaussian_blur", "params": {"kernel": 5}}],
        "recognizers": [{"id": "face.eigenfaces"}],
        "selection": {"selectors": ["random"]},
        "report": {"bootstrap": 20},
    }
    with pytest.warns(Warning, match="no face found"):
        res = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "cache", progress=False, report=False)
    msg = [w for w in res.warnings if "no face found" in w]
    assert len(msg) == 1 and "kept uncropped" in msg[0] and ".pgm" in msg[0]

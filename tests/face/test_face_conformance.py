"""Every face.* method passes bioanon's conformance check."""

from __future__ import annotations

import pytest

import bioanon
from bioanon.testing import check_method

FACE_METHODS = sorted(bioanon.list_methods("face.*"))


def test_all_face_methods_are_registered():
    ids = set(FACE_METHODS)
    for expected in (
        "face.orl",
        "face.mat",
        "face.folder",
        "face.celeba",
        "face.synthetic",
        "face.eye_mask",
        "face.gaussian_blur",
        "face.pixelation",
        "face.gaussian_noise",
        "face.block_permutation",
        "face.pixel_relocation",
        "face.dp_pix",
        "face.dp_snow",
        "face.k_same_pixel",
        "face.eigenfaces",
        "face.ssim",
        "face.psnr",
        # the second half: more anonymizations, de-anonymizers, attackers, utility
        "face.dp_samp",
        "face.k_same_eigen",
        "face.k_rtio",
        "face.random_set_mean",
        "face.random_set_mean_eigen",
        "face.fantomas",
        "face.fantomas_conv",
        "face.resample_inversion",
        "face.wiener",
        "face.richardson_lucy",
        "face.wavelet_denoise",
        "face.neighbour_interpolation",
        "face.learned_permutation",
        "face.arcface",
        "face.lbph",
        "face.detection_rate",
        "face.detection_confidence",
        "face.attribute_accuracy",
        "face.perceptual_similarity",
    ):
        assert expected in ids, expected


def test_fr_knn_is_registered_with_or_without_dlib():
    assert "face.dlib_knn" in FACE_METHODS  # listed as unavailable without bioanon-face[dlib] (test_face_discovery)


@pytest.mark.parametrize("method_id", FACE_METHODS)
def test_conformance(method_id):
    report = check_method(bioanon.get_registry().get(method_id))
    assert report.ok, str(report)

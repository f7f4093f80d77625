"""Every face.* method passes bioanon's conformance check."""

from __future__ import annotations

import pytest

import bioanon
from bioanon.testing import check_method

FACE_METHODS = sorted(bioanon.list_methods("face.*"))


def test_all_face_methods_are_registered():
    ids = set(FACE_METHODS)
    for expected in ("face.orl", "face.mat", "face.folder", "face.celeba", "face.synthetic", "face.eye_mask",
                     "face.gaussian_blur", "face.pixelation", "face.gaussian_noise", "face.block_permutation",
                     "face.pixel_relocation", "face.dp_pix", "face.dp_snow", "face.k_same_pixel",
                     "face.eigenfaces", "face.ssim", "face.psnr"):
        assert expected in ids, expected


@pytest.mark.parametrize("method_id", FACE_METHODS)
def test_conformance(method_id):
    report = check_method(bioanon.get_registry().get(method_id))
    assert report.ok, str(report)

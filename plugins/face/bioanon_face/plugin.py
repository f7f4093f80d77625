"""Entry point of bioanon-face: registers its methods through bioanon's hooks.

Only light modules are imported here; OpenCV, SciPy and Pillow are imported inside the methods that use them.
"""

from __future__ import annotations

from bioanon.api import hookimpl

BIOANON_API = ">=1.7,<2"  # 1.1: require_fitted; 1.4: paired_ids, Deanonymizer.held_out_ids; 1.7: held_out_pairs
"""The range of bioanon.api versions this plugin works with (PEP 440)."""


@hookimpl
def register_datasets(register):
    """The face data sources."""
    from .sources import CelebAFaces, FolderFaces, MatFaces, OrlFaces, SebaFaces
    from .synthetic import SyntheticFaces

    for cls in (OrlFaces, MatFaces, FolderFaces, SebaFaces, CelebAFaces, SyntheticFaces):
        register(cls)


@hookimpl
def register_anonymizers(register):
    """The face anonymizations, with the random-set means on images and on eigenface coefficients."""
    from . import anonymizers as a
    from . import kanon

    for cls in (
        a.EyeMask,
        a.GaussianBlur,
        a.Pixelation,
        a.GaussianNoise,
        a.BlockPermutation,
        a.PixelRelocation,
        a.DpPix,
        a.DpSnow,
        a.DpSamp,
        a.KRtio,
        a.KSamePixel,
        kanon.KSameEigen,
        a.FaceRandomSetMean,
        kanon.FaceRandomSetMeanEigen,
    ):
        register(cls)


@hookimpl
def register_recognizers(register):
    """The face attackers. Always registered: LBPH needs opencv-contrib, FR-KNN bioanon-face[dlib], ArcFace torch
    and timm; each imports them when it runs, and is listed as unavailable, with its install command, without
    them (``requires``)."""
    from .arcface import ArcFace
    from .recognizers import DlibKnn, Eigenfaces, Lbph

    for cls in (Eigenfaces, ArcFace, Lbph, DlibKnn):
        register(cls)


@hookimpl
def register_utility_measures(register):
    """Image similarity to the clear image (the perceptual one imports torch when it runs)."""
    from .perceptual import PerceptualSimilarity
    from .utility import DetectionConfidence, DetectionRate, FaceAttributeAccuracy, Psnr, Ssim

    for cls in (Ssim, Psnr, DetectionRate, DetectionConfidence, FaceAttributeAccuracy, PerceptualSimilarity):
        register(cls)


@hookimpl
def register_deanonymizers(register):
    """The face de-anonymizers: the Fantômas model, its convolution-only ablation and the classic inversions."""
    from . import deanonymizers as d
    from .fantomas import Fantomas, FantomasConv

    for cls in (
        Fantomas,
        FantomasConv,
        d.ResampleInversion,
        d.Wiener,
        d.RichardsonLucy,
        d.WaveletDenoise,
        d.NeighbourInterpolation,
        d.LearnedPermutation,
    ):
        register(cls)

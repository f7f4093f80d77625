"""Entry point of bioanon-face: registers its methods through bioanon's hooks.

Only light modules are imported here; OpenCV, SciPy and Pillow are imported inside the methods that use them.
"""

from __future__ import annotations

import bioanon


@bioanon.hookimpl
def register_datasets(register):
    """The face data sources."""
    from .sources import CelebAFaces, FolderFaces, MatFaces, OrlFaces
    from .synthetic import SyntheticFaces

    for cls in (OrlFaces, MatFaces, FolderFaces, CelebAFaces, SyntheticFaces):
        register(cls)


@bioanon.hookimpl
def register_anonymizers(register):
    """The face anonymizations (and the random-set mean on images when bioanon has it)."""
    from . import anonymizers as a

    for cls in (a.EyeMask, a.GaussianBlur, a.Pixelation, a.GaussianNoise, a.BlockPermutation, a.PixelRelocation,
                a.DpPix, a.DpSnow, a.KSamePixel):
        register(cls)
    rsm = a.random_set_mean_class()
    if rsm is not None:
        register(rsm)


@bioanon.hookimpl
def register_recognizers(register):
    """The face attackers (LBPH only with opencv-contrib)."""
    from .recognizers import Eigenfaces, Lbph, _has_lbph

    register(Eigenfaces)
    if _has_lbph():
        register(Lbph)


@bioanon.hookimpl
def register_utility_measures(register):
    """Image similarity to the clear image."""
    from .utility import Psnr, Ssim

    register(Ssim)
    register(Psnr)

"""Face detection, eye-level alignment and cropping with OpenCV's bundled Haar cascades.

:func:`detect_faces` runs ``haarcascade_frontalface_default`` on every image (grey; images whose shorter side
is below ``min_side`` are enlarged first, the cascade's window being 24 px) and keeps the detection with the
highest level weight (``detectMultiScale3(..., outputRejectLevels=True)``: the sum of the last stage's weak
classifiers — SEBA's detector confidence, the SEBA paper §9 and [11] there). With ``eyes=True`` it then runs
``haarcascade_eye`` on the upper band of that face box, enlarged to a fixed width, and keeps the strongest
eye in each half of the box; a pair that is too close, too far apart or tilted by more than ``max_angle``
counts as not found.

:func:`align_faces` (a SampleTable, an (N, H, W[, C]) batch or a list of images in) rotates each face about
its box centre so that the line through the eye centres is horizontal, crops a window of the output's aspect
ratio (square for a square ``size``) around the box with ``margin`` on each side and resizes every crop to
``size`` — one inverse affine map per image (``cv2.warpAffine``) onto an integer multiple of ``size``, then
OpenCV's INTER_AREA batch resize (:func:`~bioanon_face.imageio.to_batch`). Faces without an eye pair are
cropped unrotated; images without a face are returned whole (resized) and flagged ``found = False``.

The cascades run one image per OpenCV call (OpenCV parallelizes inside a call); everything else — grey
conversion, the affine maps, the resize — is vectorized over the batch.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import attrs
import numpy as np

from bioanon.api import TableError

FACE_CASCADE = "haarcascade_frontalface_default.xml"
EYE_CASCADE = "haarcascade_eye.xml"
_CASCADE_WINDOW = 24  # the frontal-face cascade's training window (px)
_EYE_ROI_WIDTH = 120  # the face box's eye band is enlarged to this width before the eye cascade
_EYE_BAND = (0.15, 0.6)  # rows of the face box searched for eyes (shares of its height)
_EYE_SPACING = (0.2, 0.75)  # plausible horizontal eye distance (shares of the face box width)


class NoFaceWarning(UserWarning):
    """Some images of a data set hold no face the detector finds."""


@functools.cache
def cascade(name: str) -> Any:
    """One of OpenCV's bundled Haar cascades (``cv2.data.haarcascades``), loaded once per process."""
    import cv2

    path = cv2.data.haarcascades + name  # type: ignore[attr-defined]  # cv2.data is not in OpenCV's stubs
    c = cv2.CascadeClassifier(path)
    if c.empty():
        raise TableError(
            f"{path}: OpenCV could not load the Haar cascade (is opencv-contrib-python-headless "
            f"installed with its data files?)"
        )
    return c


def image_list(data: Any, payload: str | None = None) -> list[np.ndarray] | np.ndarray:
    """A SampleTable's image payload, an (N, H, W[, C]) uint8 batch or a list of H×W[×C] images → the images
    as an (N, H, W[, 3]) array (single channels squeezed) or the list as given."""
    if hasattr(data, "payload_names"):
        col = payload or "image"
        if col not in data.payload_names:
            raise TableError(f"the table has no payload column {col!r}; it has {data.payload_names}")
        data = data.payload(col)
    if isinstance(data, np.ndarray):
        if data.ndim == 4 and data.shape[-1] == 1:
            data = data[..., 0]
        if data.ndim not in (3, 4) or data.dtype != np.uint8:
            raise TableError(f"expected a uint8 (N, H, W[, C]) image batch, got {data.dtype} {data.shape}")
        return data
    return [np.asarray(im)[..., 0] if np.ndim(im) == 3 and np.shape(im)[-1] == 1 else np.asarray(im) for im in data]


def grey(images: list[np.ndarray] | np.ndarray) -> list[np.ndarray] | np.ndarray:
    """uint8 grey images (ITU-R BT.601 luma), one matrix product for a batch."""
    if isinstance(images, np.ndarray):
        if images.ndim == 3:
            return images
        luma = images[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
        return np.clip(np.rint(luma), 0, 255).astype(np.uint8)
    return [im if im.ndim == 2 else grey(im[None])[0] for im in images]


@attrs.frozen(eq=False)
class Detections:
    """Per image: the best face and its eyes (image coordinates, pixel centres at integers)."""

    found: np.ndarray  # (N,) bool: a face was detected
    confidence: np.ndarray  # (N,) float64: level weight of the best detection, 0 where none
    boxes: np.ndarray  # (N, 4) float64: x, y, width, height of the best face; NaN where none
    eyes: np.ndarray  # (N, 2, 2) float64: (x, y) of the image-left and image-right eye; NaN where not found

    @property
    def eyes_found(self) -> np.ndarray:
        return ~np.isnan(self.eyes).any(axis=(1, 2))

    @property
    def angle(self) -> np.ndarray:
        """(N,) degrees the eye line is tilted (clockwise on screen, y pointing down); 0 where no eye pair."""
        d = self.eyes[:, 1] - self.eyes[:, 0]
        a = np.degrees(np.arctan2(d[:, 1], d[:, 0]))
        return np.where(self.eyes_found, a, 0.0)


def detect_faces(
    images: Any,
    *,
    scale_factor: float = 1.1,
    min_neighbors: int = 3,
    min_face: float = 0.3,
    min_side: int = 80,
    eyes: bool = False,
    max_angle: float = 30.0,
) -> Detections:
    """Run the frontal-face Haar cascade (and with ``eyes`` the eye cascade) on every image.

    ``images``: a SampleTable, an (N, H, W[, C]) uint8 batch or a list of images. ``min_face``: the smallest
    face searched, as a share of the image's shorter side. ``min_side``: shorter image sides below it are
    enlarged to it before detection (coordinates are reported in the original image)."""
    import cv2

    g = grey(image_list(images))
    n = len(g)
    found = np.zeros(n, bool)
    conf = np.zeros(n)
    boxes = np.full((n, 4), np.nan)
    eye_xy = np.full((n, 2, 2), np.nan)
    faces, eye_c = cascade(FACE_CASCADE), cascade(EYE_CASCADE)
    for i in range(n):  # one cascade call per image
        img = g[i]
        s = max(1.0, min_side / max(1, min(img.shape)))
        if s > 1.0:
            img = cv2.resize(img, (round(img.shape[1] * s), round(img.shape[0] * s)), interpolation=cv2.INTER_LINEAR)
        side = max(_CASCADE_WINDOW, int(min_face * min(img.shape)))
        if side > min(img.shape):
            continue
        rects, _, weights = faces.detectMultiScale3(
            img, scaleFactor=scale_factor, minNeighbors=min_neighbors, minSize=(side, side), outputRejectLevels=True
        )
        weights = np.asarray(weights, dtype=np.float64).ravel()
        if len(rects) == 0 or len(weights) != len(rects):
            continue
        j = int(np.argmax(weights))
        found[i], conf[i] = True, max(float(weights[j]), 0.0)
        box = np.asarray(rects[j], dtype=np.float64)
        boxes[i] = box / s
        if eyes:
            pair = _eye_pair(img, box, eye_c, max_angle)
            if pair is not None:
                eye_xy[i] = pair / s
    return Detections(found, conf, boxes, eye_xy)


def _eye_pair(img: np.ndarray, box: np.ndarray, eye_c: Any, max_angle: float) -> np.ndarray | None:
    """The strongest eye detection in each half of the face box's eye band, or None when no plausible pair."""
    import cv2

    x, y, w, h = (int(v) for v in box)
    y0, y1 = y + int(_EYE_BAND[0] * h), y + int(_EYE_BAND[1] * h)
    roi = img[y0:y1, x : x + w]
    if roi.size == 0:
        return None
    z = _EYE_ROI_WIDTH / max(1, roi.shape[1])
    roi = cv2.resize(roi, (round(roi.shape[1] * z), max(1, round(roi.shape[0] * z))), interpolation=cv2.INTER_LINEAR)
    rects, _, weights = eye_c.detectMultiScale3(roi, scaleFactor=1.05, minNeighbors=3, outputRejectLevels=True)
    weights = np.asarray(weights, dtype=np.float64).ravel()
    if len(rects) < 2 or len(weights) != len(rects):
        return None
    r = np.asarray(rects, dtype=np.float64)
    centres = np.c_[r[:, 0] + (r[:, 2] - 1) / 2, r[:, 1] + (r[:, 3] - 1) / 2] / z + [x, y0]
    left = centres[:, 0] < x + (w - 1) / 2
    if left.all() or not left.any():
        return None
    a = centres[left][np.argmax(weights[left])]
    b = centres[~left][np.argmax(weights[~left])]
    dx, dy = b - a
    if not (_EYE_SPACING[0] * w <= dx <= _EYE_SPACING[1] * w) or abs(math.degrees(math.atan2(dy, dx))) > max_angle:
        return None
    return np.stack([a, b])


@attrs.frozen(eq=False)
class FaceCrops:
    """Aligned face crops and what the detector found per image."""

    images: np.ndarray  # (N, h, w, C) uint8: aligned crops; whole images (resized) where no face was found
    found: np.ndarray  # (N,) bool
    confidence: np.ndarray  # (N,) float64: the detector's level weight, 0 where no face
    angle: np.ndarray  # (N,) degrees each face was rotated by (0 where no eye pair)
    eyes_found: np.ndarray  # (N,) bool
    boxes: np.ndarray  # (N, 4) face boxes in the input images (NaN where none)


def crop_maps(
    boxes: np.ndarray, angle_deg: np.ndarray, size: tuple[int, int], margin: float
) -> tuple[np.ndarray, np.ndarray]:
    """Inverse affine maps (output pixel → source pixel) of the aligned crops, vectorized over the batch.

    Returns (maps (N, 2, 3), oversampling factors (N,) int): map i renders an (h·f_i, w·f_i) image (f_i = the
    integer ≥ 1 at or above the crop's source-pixels-per-output-pixel), so the final INTER_AREA resize to
    (h, w) averages f_i × f_i blocks instead of aliasing. The crop window is centred on the face box, rotated
    by ``angle_deg``, and has the output's aspect ratio with ``margin`` × the box's larger side added on each
    side of its narrower dimension."""
    oh, ow = size
    aspect = oh / ow
    side = np.maximum(boxes[:, 2], boxes[:, 3]) * (1.0 + 2.0 * margin)
    crop_w = np.where(aspect >= 1.0, side, side / aspect)
    k = crop_w / ow  # source pixels per output pixel
    f = np.maximum(1, np.ceil(k - 1e-9)).astype(np.int64)
    step = k / f
    cx = boxes[:, 0] + (boxes[:, 2] - 1) / 2
    cy = boxes[:, 1] + (boxes[:, 3] - 1) / 2
    t = np.radians(angle_deg)
    cos, sin = np.cos(t) * step, np.sin(t) * step
    u0, v0 = (ow * f - 1) / 2, (oh * f - 1) / 2
    maps = np.empty((len(boxes), 2, 3))
    maps[:, 0, 0], maps[:, 0, 1], maps[:, 0, 2] = cos, -sin, cx - (cos * u0 - sin * v0)
    maps[:, 1, 0], maps[:, 1, 1], maps[:, 1, 2] = sin, cos, cy - (sin * u0 + cos * v0)
    return maps, f


def align_faces(
    data: Any,
    size: tuple[int, int] = (0, 0),
    *,
    margin: float = 0.2,
    channels: int = 0,
    rotate: bool = True,
    payload: str | None = None,
    **detector: Any,
) -> FaceCrops:
    """Detect, align (eye line horizontal) and crop every face, resized to ``size`` = (height, width).

    ``data``: a SampleTable (payload ``image``), an (N, H, W[, C]) uint8 batch or a list of images of any
    sizes. ``size`` (0, 0) keeps the images' common native size. ``channels`` as in
    :func:`~bioanon_face.imageio.to_batch` (0 keeps them). ``rotate=False`` crops without rotating.
    Further keyword arguments go to :func:`detect_faces`. Images without a face are returned whole (resized)
    with ``found = False`` — the caller decides whether to keep or drop them."""
    import cv2

    from .imageio import to_batch

    images = image_list(data, payload)
    if tuple(size) == (0, 0):
        shapes = {im.shape[:2] for im in images}
        if len(shapes) != 1:
            raise TableError(
                f"images have different sizes {sorted(shapes)[:5]}; give size = [height, width] for the aligned crops"
            )
        size = next(iter(shapes))
    oh, ow = int(size[0]), int(size[1])
    det = detect_faces(images, eyes=rotate, **detector)
    angle = det.angle if rotate else np.zeros(len(images))
    maps, f = crop_maps(np.nan_to_num(det.boxes, nan=1.0), angle, (oh, ow), margin)
    out = list(images)
    for i in np.flatnonzero(det.found):  # one warp per image: rotation, crop and scale in one map
        out[i] = cv2.warpAffine(
            np.ascontiguousarray(images[i]),
            maps[i],
            (int(ow * f[i]), int(oh * f[i])),
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_REPLICATE,
        )
    batch = to_batch(out, (oh, ow), channels)
    return FaceCrops(batch, det.found, det.confidence, angle, det.eyes_found & det.found, det.boxes)

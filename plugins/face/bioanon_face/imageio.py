"""Image reading and batch resizing shared by the face data sources (OpenCV; Pillow as a fallback reader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bioanon.api import DataError, TableError

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm", ".pnm", ".tif", ".tiff", ".webp", ".gif")
_CV_MAX_CHANNELS = 4  # cv2.resize handles up to 4 channels with every interpolation; images are stacked as channels


def read_image(path: str | Path) -> np.ndarray:
    """One image file as uint8 H×W (grey) or H×W×3 (RGB). Raises ``ValueError`` when it cannot be decoded."""
    import cv2

    path = Path(path)
    data = np.fromfile(str(path), dtype=np.uint8)
    img: np.ndarray | None = cv2.imdecode(data, cv2.IMREAD_UNCHANGED) if data.size else None
    if img is None:
        try:  # formats OpenCV lacks (e.g. GIF)
            from PIL import Image

            with Image.open(path) as im:
                im.load()
                img = np.asarray(im.convert("L" if im.mode in ("L", "1", "I", "I;16") else "RGB"))
        except Exception as e:  # noqa: BLE001
            raise DataError(f"{path}: cannot decode image: {e}") from None
        return img
    if img.dtype != np.uint8:  # 16-bit PNG/TIFF
        img = (
            (img.astype(np.float64) / np.iinfo(img.dtype).max * 255).round().astype(np.uint8)
            if img.dtype.kind == "u"
            else np.clip(img, 0, 255).astype(np.uint8)
        )
    if img.ndim == 3:
        if img.shape[2] == 4:
            img = cv2.cvtColor(img, cv2.COLOR_BGRA2RGB)
        elif img.shape[2] == 3:
            img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        elif img.shape[2] == 1:
            img = img[:, :, 0]
    return img


def read_images(paths: list[Path], skip_bad_files: bool) -> tuple[list[np.ndarray], list[int], list[str]]:
    """Read every file. Returns (images, indices of the files read, the unreadable files).

    A file that cannot be decoded raises :class:`TableError` naming it, unless ``skip_bad_files``."""
    images, kept, bad = [], [], []
    for i, p in enumerate(paths):
        try:
            img = read_image(p)
        except (ValueError, OSError) as e:
            if not skip_bad_files:
                raise TableError(
                    f"{p}: not a readable image ({e}); fix or remove it, or pass "
                    f"skip_bad_files=true to skip and list such files"
                ) from None
            bad.append(str(p))
            continue
        images.append(img)
        kept.append(i)
    return images, kept, bad


def _resize_stack(stack: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(N, H, W) uint8 → (N, h, w), resizing 4 images per OpenCV call (images stacked as channels)."""
    import cv2

    h, w = size
    n, H, W = stack.shape
    if (H, W) == (h, w):
        return stack
    interp = cv2.INTER_AREA if (h <= H and w <= W) else cv2.INTER_LINEAR
    out = np.empty((n, h, w), dtype=np.uint8)
    for s in range(0, n, _CV_MAX_CHANNELS):
        chunk = np.ascontiguousarray(stack[s : s + _CV_MAX_CHANNELS].transpose(1, 2, 0))
        r = cv2.resize(chunk, (w, h), interpolation=interp)
        out[s : s + _CV_MAX_CHANNELS] = r.reshape(h, w, -1).transpose(2, 0, 1)
    return out


def to_batch(
    images: list[np.ndarray] | np.ndarray, size: tuple[int, int], channels: int, names: list[str] | None = None
) -> np.ndarray:
    """Images of any sizes → one uint8 (N, h, w, C) batch.

    ``size`` is (height, width); (0, 0) keeps the native size (then every image must have the same size).
    ``channels``: 0 keeps the data set's own (1 if every image is grey, else 3; grey images of a mixed set are
    expanded), 1 converts colour to grey (ITU-R BT.601 luma), 3 expands grey to three equal channels.
    Images of the same shape are resized together (stacked as channels of one OpenCV call)."""
    if isinstance(images, np.ndarray):
        images = list(images)
    if not images:
        raise TableError("no images to load")
    grey_all = all(im.ndim == 2 for im in images)
    out_c = channels or (1 if grey_all else 3)
    if tuple(size) == (0, 0):
        shapes = {im.shape[:2] for im in images}
        if len(shapes) > 1:
            raise TableError(
                f"images have different sizes {sorted(shapes)[:5]}; give size = [height, width] "
                f"to resize them to one size"
            )
        size = next(iter(shapes))
    h, w = int(size[0]), int(size[1])
    out = np.empty((len(images), h, w, out_c), dtype=np.uint8)
    groups: dict[tuple, list[int]] = {}
    for i, im in enumerate(images):
        groups.setdefault(im.shape, []).append(i)
    for idx in groups.values():
        stack = np.stack([images[i] for i in idx])  # (n, H, W) or (n, H, W, 3)
        if stack.ndim == 3:
            r = _resize_stack(stack, (h, w))[..., None]
        else:
            r = np.stack([_resize_stack(stack[..., c], (h, w)) for c in range(stack.shape[-1])], axis=-1)
        if r.shape[-1] == 1 and out_c == 3:
            r = np.repeat(r, 3, axis=-1)
        elif r.shape[-1] == 3 and out_c == 1:
            luma = r.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
            r = np.clip(np.rint(luma), 0, 255).astype(np.uint8)[..., None]
        out[idx] = r
    return out


def check_size(value: Any) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and (value == (0, 0) or all(isinstance(v, int) and v > 0 for v in value))
    )

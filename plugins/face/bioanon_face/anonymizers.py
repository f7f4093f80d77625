"""Face anonymizations on the ``image`` payload (uint8 N×H×W×C), vectorized over the batch.

Parameters and their meaning follow ``fantomas.txt`` §6.1 and Table IV (block permutation: block size 32;
pixel relocation: 50 steps; Gaussian noise: σ 200; Gaussian blur: kernel 29; pixelation: 16; DP Pix: ε 5,
b 12, m 16; DP Snow: 0.5). Defaults are the paper's values, chosen for 224×224 images; on small images (e.g.
ORL resized to 56×46) scale the spatial ones down. Random methods are seeded and draw independent noise per
table (``bioanon.payloads.table_rng``); keyed ones (block permutation, pixel relocation) use the same key-derived
permutation for every image, as in the paper.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon import Anonymizer, fitted, param
from bioanon.errors import TableError
from bioanon.payloads import restore_dtype, table_rng


def _images(method: Anonymizer, table: Any) -> tuple[str, np.ndarray]:
    column = method.payload_column(table, getattr(method, "payload", "") or None)
    x = table.payload(column)
    if not isinstance(x, np.ndarray) or x.ndim != 4:
        raise TableError(f"{method.id}: payload {column!r} must be N×H×W×C images, got "
                         f"{getattr(x, 'shape', 'variable-length records')}")
    return column, x


def _stack_channels(x: np.ndarray) -> np.ndarray:
    """(N, H, W, C) → (H, W, N·C) so one OpenCV call filters the whole batch."""
    n, h, w, c = x.shape
    return np.ascontiguousarray(x.transpose(1, 2, 0, 3).reshape(h, w, n * c))


def _unstack_channels(y: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, h, w, c = shape
    return y.reshape(h, w, n, c).transpose(2, 0, 1, 3)


def _cv_batch(fn, x: np.ndarray, chunk: int = 512) -> np.ndarray:
    """Apply a per-image OpenCV filter to the batch, up to 512 channels (images × channels) per call."""
    n, h, w, c = x.shape
    per = max(1, chunk // c)
    out = np.empty_like(x)
    for s in range(0, n, per):
        part = x[s:s + per]
        y = fn(_stack_channels(part))
        out[s:s + per] = _unstack_channels(y.reshape(h, w, -1), part.shape)
    return out


def _block_edges(length: int, blocks: int) -> np.ndarray:
    """``blocks`` near-equal integer intervals covering 0..length (start offsets and the end)."""
    blocks = min(blocks, length)
    return np.round(np.linspace(0, length, blocks + 1)).astype(np.int64)


def block_means(x: np.ndarray, row_edges: np.ndarray, col_edges: np.ndarray) -> np.ndarray:
    """Mean of every (row interval × column interval) cell: (N, H, W, C) → (N, R, Cc, C) float64."""
    s = np.add.reduceat(x.astype(np.float64), row_edges[:-1], axis=1)
    s = np.add.reduceat(s, col_edges[:-1], axis=2)
    area = np.diff(row_edges)[:, None] * np.diff(col_edges)[None, :]
    return s / area[None, :, :, None]


def expand_blocks(cells: np.ndarray, row_edges: np.ndarray, col_edges: np.ndarray) -> np.ndarray:
    """Inverse of :func:`block_means`' layout: repeat each cell over its pixels."""
    return np.repeat(np.repeat(cells, np.diff(row_edges), axis=1), np.diff(col_edges), axis=2)


_PAYLOAD = dict(help="payload column to anonymize (default: image)")


@attrs.define(kw_only=True)
class _FaceAnonymizer(Anonymizer):
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "fantomas.txt §6.1, Table IV"

    payload: str = param("", **_PAYLOAD)


@attrs.define(kw_only=True)
class EyeMask(_FaceAnonymizer):
    """Eye masking: a black (``value``) bar over the eye region.

    For aligned faces the eyes lie in a fixed band: rows ``top``..``bottom`` and columns ``left``..``right``
    as fractions of the image height/width (defaults fit ORL-like and CelebA-aligned crops, where the eyes sit
    at about 35–50 % of the height). No detection is run: align the faces first."""

    id: ClassVar[str] = "face.eye_mask"

    top: float = param(0.3, help="top of the bar (fraction of the height)", low=0.0, high=1.0)
    bottom: float = param(0.5, help="bottom of the bar (fraction of the height)", low=0.0, high=1.0)
    left: float = param(0.1, help="left end of the bar (fraction of the width)", low=0.0, high=1.0)
    right: float = param(0.9, help="right end of the bar (fraction of the width)", low=0.0, high=1.0)
    value: int = param(0, help="grey level of the bar", low=0, high=255)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        from bioanon.errors import ParameterError

        if self.bottom <= self.top:
            raise ParameterError(self.id, "bottom", self.bottom, f"greater than top ({self.top})")
        if self.right <= self.left:
            raise ParameterError(self.id, "right", self.right, f"greater than left ({self.left})")

    def box(self, h: int, w: int) -> tuple[int, int, int, int]:
        """(row0, row1, col0, col1) of the bar on an h×w image."""
        return (int(round(self.top * h)), max(int(round(self.bottom * h)), int(round(self.top * h)) + 1),
                int(round(self.left * w)), max(int(round(self.right * w)), int(round(self.left * w)) + 1))

    def transform(self, table):
        column, x = _images(self, table)
        r0, r1, c0, c1 = self.box(x.shape[1], x.shape[2])
        out = x.copy()
        out[:, r0:r1, c0:c1, :] = self.value
        return table.with_payload(column, out)


@attrs.define(kw_only=True)
class GaussianBlur(_FaceAnonymizer):
    """Gaussian blur with a ``kernel``×``kernel`` window (OpenCV ``GaussianBlur``, reflect-101 border).

    ``sigma`` 0 derives it from the kernel as OpenCV does (0.3·((k−1)/2 − 1) + 0.8). Table IV: kernel 29."""

    id: ClassVar[str] = "face.gaussian_blur"
    example_params: ClassVar[dict[str, Any]] = {"kernel": 5}

    kernel: int = param(29, help="kernel size in pixels (odd)", low=1, check=lambda k: k % 2 == 1,
                        check_text="odd")
    sigma: float = param(0.0, help="standard deviation in pixels (0: from the kernel size)", low=0.0)

    def transform(self, table):
        import cv2

        column, x = _images(self, table)
        k = self.kernel
        out = _cv_batch(lambda im: cv2.GaussianBlur(im, (k, k), self.sigma, borderType=cv2.BORDER_REFLECT_101), x)
        return table.with_payload(column, out)


@attrs.define(kw_only=True)
class Pixelation(_FaceAnonymizer):
    """Pixelation: the image is cut into ``size``×``size`` cells and each cell is replaced by its mean.

    ``size`` is the number of remaining pixels along either axis (``fantomas.txt``: 16). Non-square or
    non-divisible images get near-equal cells (cell edges at round(i·H/size)), so the cells of a 112×92 image
    are about 7×5.75 pixels."""

    id: ClassVar[str] = "face.pixelation"
    example_params: ClassVar[dict[str, Any]] = {"size": 4}

    size: int = param(16, help="cells (remaining pixels) along each axis", low=1)

    def transform(self, table):
        column, x = _images(self, table)
        re_, ce = _block_edges(x.shape[1], self.size), _block_edges(x.shape[2], self.size)
        out = expand_blocks(block_means(x, re_, ce), re_, ce)
        return table.with_payload(column, restore_dtype(out, x.dtype))


@attrs.define(kw_only=True)
class GaussianNoise(_FaceAnonymizer):
    """Zero-mean Gaussian noise of standard deviation ``sigma`` grey levels added to every pixel and channel,
    clipped to 0..255 (Table IV: σ 200)."""

    id: ClassVar[str] = "face.gaussian_noise"

    sigma: float = param(200.0, help="noise standard deviation in grey levels", low=0.0)
    seed: int = param(0, help="random seed")

    def transform(self, table):
        column, x = _images(self, table)
        rng = table_rng(table, self.seed)
        noisy = x.astype(np.float32) + rng.standard_normal(x.shape, dtype=np.float32) * np.float32(self.sigma)
        return table.with_payload(column, restore_dtype(noisy, x.dtype))


@attrs.define(kw_only=True)
class BlockPermutation(_FaceAnonymizer):
    """Spatial block permutation: the image is cut into ``block_size``×``block_size`` pixel blocks, which are
    permuted with one key-derived permutation for every image (Table IV: block size 32).

    Rows/columns beyond the last whole block stay in place. A trivially reversible anonymization."""

    id: ClassVar[str] = "face.block_permutation"
    example_params: ClassVar[dict[str, Any]] = {"block_size": 4}

    block_size: int = param(32, help="block side in pixels", low=1)
    key: int = param(0, help="permutation key (the secret)")

    def permutation(self, n_blocks: int) -> np.ndarray:
        """Output block i takes input block ``permutation[i]`` (row-major block order)."""
        return np.random.default_rng(self.key).permutation(n_blocks)

    def transform(self, table):
        column, x = _images(self, table)
        n, h, w, c = x.shape
        b = self.block_size
        nh, nw = h // b, w // b
        out = x.copy()
        if nh * nw > 1:
            core = x[:, : nh * b, : nw * b].reshape(n, nh, b, nw, b, c).transpose(0, 1, 3, 2, 4, 5)
            core = core.reshape(n, nh * nw, b, b, c)[:, self.permutation(nh * nw)]
            out[:, : nh * b, : nw * b] = core.reshape(n, nh, nw, b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(
                n, nh * b, nw * b, c)
        return table.with_payload(column, out)


@attrs.define(kw_only=True)
class PixelRelocation(_FaceAnonymizer):
    """Pixel relocation (after Cichowski & Czyżewski): a keyed, reversible relocation of pixels in ``steps``
    rounds (Table IV: 50).

    Each round shifts every row cyclically by a key-derived offset in −``max_shift``..``max_shift``, then every
    column likewise. The composition is one fixed permutation of pixel positions (the same for every image,
    derived from ``key``), applied to all channels at once; it is exactly invertible with the key. This is our
    reading of the method (its paper describes relocation by a keyed pseudo-random generator)."""

    id: ClassVar[str] = "face.pixel_relocation"
    reference: ClassVar[str] = ("Cichowski & Czyżewski, Reversible video stream anonymization for video "
                                "surveillance systems based on pixels relocation and watermarking, 2011")
    example_params: ClassVar[dict[str, Any]] = {"steps": 3}

    steps: int = param(50, help="relocation rounds", low=0)
    max_shift: int = param(4, help="largest cyclic shift of a row/column per round, in pixels", low=1)
    key: int = param(0, help="relocation key (the secret)")

    def index_map(self, h: int, w: int) -> np.ndarray:
        """Flat source index of every output pixel (an (h·w,) permutation)."""
        rng = np.random.default_rng(self.key)
        idx = np.arange(h * w).reshape(h, w)
        rows, cols = np.arange(h)[:, None], np.arange(w)[None, :]
        for _ in range(self.steps):
            sr = rng.integers(-self.max_shift, self.max_shift + 1, size=h)
            idx = idx[rows, (cols - sr[:, None]) % w]
            sc = rng.integers(-self.max_shift, self.max_shift + 1, size=w)
            idx = idx[(rows - sc[None, :]) % h, cols]
        return idx.ravel()

    def transform(self, table):
        column, x = _images(self, table)
        n, h, w, c = x.shape
        out = x.reshape(n, h * w, c)[:, self.index_map(h, w)].reshape(x.shape)
        return table.with_payload(column, out)


@attrs.define(kw_only=True)
class DpPix(_FaceAnonymizer):
    """DP Pix (Fan 2018): pixelate with ``b``×``b`` blocks, then add Laplace noise of scale
    255·``m``/(``b``²·``epsilon``) to every block mean — ε-differential privacy for images differing in at most
    ``m`` pixels. Channels are processed separately (as ``fantomas.txt`` adapts it to RGB). Table IV: ε 5, b 12,
    m 16. Edge blocks of non-divisible images are smaller and averaged over their own pixels."""

    id: ClassVar[str] = "face.dp_pix"
    reference: ClassVar[str] = "Fan, Image pixelization with differential privacy, DBSec 2018"
    example_params: ClassVar[dict[str, Any]] = {"b": 4}

    epsilon: float = param(5.0, help="privacy budget ε", low=0.0, low_inclusive=False)
    b: int = param(12, help="block side in pixels", low=1)
    m: int = param(16, help="pixels that may differ between neighbouring images", low=1)
    seed: int = param(0, help="random seed")

    def transform(self, table):
        column, x = _images(self, table)
        h, w = x.shape[1:3]
        re_ = np.append(np.arange(0, h, self.b), h)
        ce = np.append(np.arange(0, w, self.b), w)
        cells = block_means(x, re_, ce)
        scale = 255.0 * self.m / (self.b * self.b * self.epsilon)
        cells = cells + table_rng(table, self.seed).laplace(0.0, scale, cells.shape)
        return table.with_payload(column, restore_dtype(expand_blocks(cells, re_, ce), x.dtype))


@attrs.define(kw_only=True)
class DpSnow(_FaceAnonymizer):
    """DP Snow (John et al. 2020): a share ``d`` of the pixels of each image (all channels of a pixel
    together), chosen uniformly at random, is replaced by grey (``grey``). Table IV: d 0.5.

    Exactly round(d·H·W) pixels are replaced per image."""

    id: ClassVar[str] = "face.dp_snow"
    reference: ClassVar[str] = "John et al., Let it snow: adding pixel noise to protect the user's identity, 2020"

    d: float = param(0.5, help="share of pixels replaced", low=0.0, high=1.0)
    grey: int = param(127, help="grey level of replaced pixels", low=0, high=255)
    seed: int = param(0, help="random seed")

    def transform(self, table):
        column, x = _images(self, table)
        n, h, w, c = x.shape
        k = int(round(self.d * h * w))
        out = x.copy()
        if k:
            keys = table_rng(table, self.seed).random((n, h * w))
            chosen = np.argpartition(keys, k - 1, axis=1)[:, :k] if k < h * w else np.tile(np.arange(h * w), (n, 1))
            flat = out.reshape(n, h * w, c)
            flat[np.arange(n)[:, None], chosen] = self.grey
        return table.with_payload(column, out)


@attrs.define(kw_only=True)
class KSamePixel(_FaceAnonymizer):
    """k-Same-Pixel (variant of ``fantomas.txt`` §6.1.5): every image is replaced by the pixel mean of itself
    and its ``k`` − 1 nearest background images (in a PCA space fitted on the background), at most one image per
    background identity. ``fit(background)`` gives the background set (identities used nowhere else); without a
    background the table itself is used, excluding the image's own subject. Table IV: k 10."""

    id: ClassVar[str] = "face.k_same_pixel"
    reference: ClassVar[str] = "Newton, Sweeney & Malin 2005; fantomas.txt §6.1.5"
    needs_fit: ClassVar[bool] = True
    example_params: ClassVar[dict[str, Any]] = {"k": 3}

    k: int = param(10, help="images averaged (the image itself and k − 1 background identities)", low=1)
    n_components: int = param(50, help="PCA components of the matching space", low=1)

    background_: np.ndarray | None = fitted()
    subjects_: np.ndarray | None = fitted()
    mean_: np.ndarray | None = fitted()
    basis_: np.ndarray | None = fitted()

    def fit(self, background):
        column, x = _images(self, background)
        flat = x.reshape(len(x), -1).astype(np.float32)
        self.background_, self.subjects_ = flat, np.asarray(background.subjects)
        self.mean_ = flat.mean(axis=0)
        _, _, vt = np.linalg.svd(flat - self.mean_, full_matrices=False)
        self.basis_ = vt[: self.n_components].T
        return self

    def transform(self, table):
        if self.background_ is None:
            self.fit(table)
        column, x = _images(self, table)
        flat = x.reshape(len(x), -1).astype(np.float32)
        if flat.shape[1] != self.background_.shape[1]:
            raise TableError(f"{self.id}: images of shape {x.shape[1:]} do not match the background's")
        zb = (self.background_ - self.mean_) @ self.basis_
        zt = (flat - self.mean_) @ self.basis_
        d = (zt ** 2).sum(1)[:, None] + (zb ** 2).sum(1)[None, :] - 2.0 * zt @ zb.T  # (n, m)
        d[np.asarray(table.subjects)[:, None] == self.subjects_[None, :]] = np.inf  # never one's own subject
        # the nearest image of every background identity (a loop over identities, vectorized over images)
        ids, inv = np.unique(self.subjects_, return_inverse=True)
        per_id = np.empty((len(flat), len(ids)), dtype=np.float64)
        best = np.empty((len(flat), len(ids)), dtype=np.int64)
        for j in range(len(ids)):
            members = np.flatnonzero(inv == j)
            arg = np.argmin(d[:, members], axis=1)
            best[:, j] = members[arg]
            per_id[:, j] = d[np.arange(len(flat)), best[:, j]]
        m = min(self.k - 1, len(ids))
        out = flat.astype(np.float64)
        if m > 0:
            nearest = np.argsort(per_id, axis=1, kind="stable")[:, :m]
            picks = np.take_along_axis(best, nearest, axis=1)
            valid = np.take_along_axis(per_id, nearest, axis=1) < np.inf
            total = out + (self.background_[np.where(valid, picks, 0)] * valid[..., None]).sum(axis=1)
            out = total / (1 + valid.sum(axis=1))[:, None]
        return table.with_payload(column, restore_dtype(out.reshape(x.shape), x.dtype))


try:
    from bioanon.builtin.random_set_mean import RandomSetMean as _RandomSetMean
except ImportError:  # pragma: no cover - older bioanon
    _RandomSetMean = None

if _RandomSetMean is not None:

    @attrs.define(kw_only=True)
    class FaceRandomSetMean(_RandomSetMean):
        """Random-set mean on face images: ``any.random_set_mean`` on the ``image`` payload (pixels as features,
        rounded back to uint8)."""

        id: ClassVar[str] = "face.random_set_mean"
        trait: ClassVar[str] = "face"
        payloads: ClassVar[tuple[str, ...]] = ("image",)


def random_set_mean_class() -> type | None:
    """``face.random_set_mean`` when the installed bioanon has ``any.random_set_mean``, else None."""
    return globals().get("FaceRandomSetMean")

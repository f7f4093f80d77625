"""Face anonymizations on the ``image`` payload (uint8 N×H×W×C), vectorized over the batch.

Parameters and their meaning follow the Fantômas paper §6.1 and Table IV (block permutation: block size 32;
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

from bioanon.api import Anonymizer, RandomSetMean, TableError, fitted, param, restore_dtype, table_rng


def _images(method: Anonymizer, table: Any) -> tuple[str, np.ndarray]:
    column = method.payload_column(table, getattr(method, "payload", "") or None)
    x = table.payload(column)
    if not isinstance(x, np.ndarray) or x.ndim != 4:
        raise TableError(
            f"{method.id}: payload {column!r} must be N×H×W×C images, got "
            f"{getattr(x, 'shape', 'variable-length records')}"
        )
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
        part = x[s : s + per]
        y = fn(_stack_channels(part))
        out[s : s + per] = _unstack_channels(y.reshape(h, w, -1), part.shape)
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


#: pixel values (H·W·C) per block of images the anonymizations process at once (about 256 KiB of uint8 input,
#: 1 MiB as float32): a block and its temporaries stay in the CPU cache. Whole-batch float64 temporaries
#: (600 MB for 2,000 images of 112×112×3) made most methods slower than a per-image loop (benchmarks/images.py).
_BLOCK_VALUES = 1 << 18

#: most channels the OpenCV fast paths handle (stacked images keep their channels); more use numpy.
_CV_CHANNELS = 4


def _image_blocks(n: int, values_per_image: int, budget: int = _BLOCK_VALUES) -> list[slice]:
    """Consecutive row slices covering 0..n, each of at most ``budget`` values (at least one image)."""
    per = max(1, budget // max(1, values_per_image))
    return [slice(s, min(s + per, n)) for s in range(0, n, per)]


def _map_blocks(x: np.ndarray, fn, budget: int = _BLOCK_VALUES, dtype: Any = None, draw=None) -> np.ndarray:
    """One preallocated output of ``x``'s shape (and ``dtype``, default ``x``'s), written block by block:
    ``fn(x[rows], rows, out[rows])`` for consecutive blocks of images (see :func:`_image_blocks`), in row order.

    With ``draw``, ``fn`` gets a fourth argument, ``draw(rows)``: the block's random numbers, drawn one block
    ahead in a worker thread (numpy's generators release the GIL while they draw) so that ``fn``'s arithmetic
    on a block overlaps the draws for the next. The draws are made one after the other in row order, from one
    generator, so they are the numbers one draw for the whole batch gives."""
    out = np.empty(x.shape, dtype=x.dtype if dtype is None else dtype)
    blocks = _image_blocks(len(x), int(np.prod(x.shape[1:])), budget)
    if draw is None:
        for rows in blocks:
            fn(x[rows], rows, out[rows])
    elif blocks:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:  # one worker: the draws run in submission (= row) order
            ahead = pool.submit(draw, blocks[0])
            for i, rows in enumerate(blocks):
                drawn = ahead.result()
                if i + 1 < len(blocks):
                    ahead = pool.submit(draw, blocks[i + 1])
                fn(x[rows], rows, out[rows], drawn)
    return out


def _cv_ok(x: np.ndarray) -> bool:
    return x.dtype == np.uint8 and x.ndim == 4 and 1 <= x.shape[3] <= _CV_CHANNELS


def _cell_index(edges: np.ndarray) -> np.ndarray:
    """The cell of every pixel along an axis cut at ``edges``."""
    return np.repeat(np.arange(len(edges) - 1), np.diff(edges))


def _cell_means(x: np.ndarray, row_edges: np.ndarray, col_edges: np.ndarray) -> np.ndarray:
    """:func:`block_means` of a block of images, equal to it bit for bit: for uint8 images the cell sums are
    exact integers from one OpenCV integral image of the block stacked vertically (no float64 copy of the
    pixels), and the float64 mean of an integer sum is the mean :func:`block_means` computes."""
    if not _cv_ok(x):
        return block_means(x, row_edges, col_edges)
    import cv2

    n, h, w, c = x.shape
    depth = cv2.CV_32S if n * h * w * 255 < 2**31 - 1 else cv2.CV_64F
    integral = cv2.integral(x.reshape(n * h, w, c), sdepth=depth).reshape(n * h + 1, w + 1, c)
    rows = (np.arange(n)[:, None] * h + row_edges[None, :]).ravel()  # cell-edge rows of the stacked image
    corner = np.take(np.take(integral, rows, axis=0), col_edges, axis=1)  # prefix sums at the cell corners
    corner = corner.reshape(n, len(row_edges), len(col_edges), c)
    sums = np.diff(np.diff(corner, axis=1), axis=2)  # exact: the block's total fits the integral's type
    area = np.diff(row_edges)[:, None] * np.diff(col_edges)[None, :]
    return sums / area[:, :, None]


def _expand_into(cells: np.ndarray, row_index: np.ndarray, col_index: np.ndarray, out: np.ndarray) -> None:
    """:func:`expand_blocks` of a block of cells into ``out``, by index gathers (``row_index``/``col_index``:
    the cell of every pixel row/column): along the columns on the small cell array, then whole rows."""
    wide = np.take(cells, col_index, axis=2)
    np.take(wide, row_index, axis=1, out=out, mode="clip")


_PAYLOAD: dict[str, Any] = dict(help="payload column to anonymize (default: image)")


@attrs.define(kw_only=True)
class _FaceAnonymizer(Anonymizer):
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "fantomas §6.1, Table IV"

    payload: str = param("", **_PAYLOAD)


@attrs.define(kw_only=True)
class EyeMask(_FaceAnonymizer):
    """Eye masking: a black (``value``) bar over the eye region.

    For aligned faces the eyes lie in a fixed band: rows ``top``..``bottom`` and columns ``left``..``right``
    as fractions of the image height/width (defaults fit ORL-like and CelebA-aligned crops, where the eyes sit
    at about 35–50 % of the height). No detection is run: align the faces first."""

    id: ClassVar[str] = "face.eye_mask"
    per_sample: ClassVar[bool] = True  # the same fixed bar on every image

    top: float = param(0.3, help="top of the bar (fraction of the height)", low=0.0, high=1.0)
    bottom: float = param(0.5, help="bottom of the bar (fraction of the height)", low=0.0, high=1.0)
    left: float = param(0.1, help="left end of the bar (fraction of the width)", low=0.0, high=1.0)
    right: float = param(0.9, help="right end of the bar (fraction of the width)", low=0.0, high=1.0)
    value: int = param(0, help="grey level of the bar", low=0, high=255)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        from bioanon.api import ParameterError

        if self.bottom <= self.top:
            raise ParameterError(self.id, "bottom", self.bottom, f"greater than top ({self.top})")
        if self.right <= self.left:
            raise ParameterError(self.id, "right", self.right, f"greater than left ({self.left})")

    def box(self, h: int, w: int) -> tuple[int, int, int, int]:
        """(row0, row1, col0, col1) of the bar on an h×w image."""
        return (
            int(round(self.top * h)),
            max(int(round(self.bottom * h)), int(round(self.top * h)) + 1),
            int(round(self.left * w)),
            max(int(round(self.right * w)), int(round(self.left * w)) + 1),
        )

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
    per_sample: ClassVar[bool] = True  # each image filtered on its own (OpenCV's uint8 blur is bit-exact)
    example_params: ClassVar[dict[str, Any]] = {"kernel": 5}

    kernel: int = param(29, help="kernel size in pixels (odd)", low=1, check=lambda k: k % 2 == 1, check_text="odd")
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

    ``size`` is the number of remaining pixels along either axis (the Fantômas paper: 16). Non-square or
    non-divisible images get near-equal cells (cell edges at round(i·H/size)), so the cells of a 112×92 image
    are about 7×5.75 pixels."""

    id: ClassVar[str] = "face.pixelation"
    per_sample: ClassVar[bool] = True  # cell means of each image alone (exact integer sums)
    example_params: ClassVar[dict[str, Any]] = {"size": 4}

    size: int = param(16, help="cells (remaining pixels) along each axis", low=1)

    def transform(self, table):
        column, x = _images(self, table)
        re_, ce = _block_edges(x.shape[1], self.size), _block_edges(x.shape[2], self.size)
        ri, ci = _cell_index(re_), _cell_index(ce)

        def block(xb, rows, ob):
            _expand_into(restore_dtype(_cell_means(xb, re_, ce), x.dtype), ri, ci, ob)

        return table.with_payload(column, _map_blocks(x, block, budget=1 << 19))


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
        sigma = np.float32(self.sigma)
        # small integers convert to float32 exactly and add to float32 in float32: add in place
        in_place = x.dtype in (np.uint8, np.int8, np.uint16, np.int16)
        info = np.iinfo(x.dtype) if in_place else None

        def draw(rows):
            return rng.standard_normal((rows.stop - rows.start, *x.shape[1:]), dtype=np.float32)

        def block(xb, rows, ob, noise):
            noise *= sigma
            if not in_place:
                ob[...] = restore_dtype(xb.astype(np.float32) + noise, x.dtype)
                return
            noise += xb
            np.rint(noise, out=noise)
            np.clip(noise, info.min, info.max, out=noise)
            ob[...] = noise

        return table.with_payload(column, _map_blocks(x, block, budget=1 << 20, draw=draw))


@attrs.define(kw_only=True)
class BlockPermutation(_FaceAnonymizer):
    """Spatial block permutation: the image is cut into ``block_size``×``block_size`` pixel blocks, which are
    permuted with one key-derived permutation for every image (Table IV: block size 32).

    Rows/columns beyond the last whole block stay in place. A trivially reversible anonymization."""

    id: ClassVar[str] = "face.block_permutation"
    per_sample: ClassVar[bool] = True  # one key-derived permutation for every image
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
        if nh * nw <= 1:
            return table.with_payload(column, x.copy())
        # a row of the permuted core is nw runs of b pixels; output run (y, j) copies the source run
        # (src_row[y, j], src_col[y, j]) of the core viewed as (rows, nw, b·c)
        y, j = np.arange(nh * b)[:, None], np.arange(nw)[None, :]
        s = self.permutation(nh * nw)[(y // b) * nw + j]
        src_row, src_col = (s // nw) * b + y % b, s % nw

        def block(xb, rows, ob):
            k = len(xb)
            core = xb[:, : nh * b, : nw * b].reshape(k, nh * b, nw, b * c)
            ob[:, : nh * b, : nw * b] = core[:, src_row, src_col].reshape(k, nh * b, nw * b, c)
            ob[:, nh * b :] = xb[:, nh * b :]
            ob[:, : nh * b, nw * b :] = xb[:, : nh * b, nw * b :]

        return table.with_payload(column, _map_blocks(x, block, budget=1 << 20))


@attrs.define(kw_only=True)
class PixelRelocation(_FaceAnonymizer):
    """Pixel relocation (after Cichowski & Czyżewski): a keyed, reversible relocation of pixels in ``steps``
    rounds (Table IV: 50).

    Each round shifts every row cyclically by a key-derived offset in −``max_shift``..``max_shift``, then every
    column likewise. The composition is one fixed permutation of pixel positions (the same for every image,
    derived from ``key``), applied to all channels at once; it is exactly invertible with the key. This is our
    reading of the method (its paper describes relocation by a keyed pseudo-random generator)."""

    id: ClassVar[str] = "face.pixel_relocation"
    reference: ClassVar[str] = (
        "Cichowski & Czyżewski, Reversible video stream anonymization for video "
        "surveillance systems based on pixels relocation and watermarking, 2011"
    )
    per_sample: ClassVar[bool] = True  # one key-derived relocation for every image
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
        idx = self.index_map(h, w)
        blocks = _image_blocks(n, h * w * c, 1 << 20)
        per = blocks[0].stop - blocks[0].start if blocks else 0
        if _cv_ok(x) and per * h < 2**15 and w < 2**15:
            import cv2

            # one OpenCV nearest-neighbour remap of the block stacked vertically: the map gives every output
            # pixel its source (column, row of the stacked block), as int16 pairs
            src = np.empty((per, h, w, 2), dtype=np.int16)
            src[..., 0] = (idx % w).reshape(h, w)
            src[..., 1] = (idx // w).reshape(h, w) + (np.arange(per) * h)[:, None, None]
            src = src.reshape(per * h, w, 2)
            out = np.empty_like(x)
            for rows in blocks:
                k = rows.stop - rows.start
                dst = out[rows].reshape(k * h, w, c)
                res = cv2.remap(x[rows].reshape(k * h, w, c), src[: k * h], None, cv2.INTER_NEAREST, dst=dst)
                if not np.shares_memory(res, dst):  # pragma: no cover - OpenCV wrote elsewhere
                    dst[...] = res.reshape(dst.shape)
            return table.with_payload(column, out)
        flat = (idx[:, None] * c + np.arange(c)[None, :]).ravel()

        def block(xb, rows, ob):
            np.take(xb.reshape(len(xb), h * w * c), flat, axis=1, out=ob.reshape(len(xb), h * w * c), mode="clip")

        return table.with_payload(column, _map_blocks(x, block, budget=1 << 20))


@attrs.define(kw_only=True)
class DpPix(_FaceAnonymizer):
    """DP Pix (Fan 2018): pixelate with ``b``×``b`` blocks, then add Laplace noise of scale
    255·``m``/(``b``²·``epsilon``) to every block mean — ε-differential privacy for images differing in at most
    ``m`` pixels. Channels are processed separately (as the Fantômas paper adapts it to RGB). Table IV: ε 5, b 12,
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
        ri, ci = _cell_index(re_), _cell_index(ce)
        scale = 255.0 * self.m / (self.b * self.b * self.epsilon)
        rng = table_rng(table, self.seed)

        def block(xb, rows, ob):
            cells = _cell_means(xb, re_, ce)
            cells = cells + rng.laplace(0.0, scale, cells.shape)
            _expand_into(restore_dtype(cells, x.dtype), ri, ci, ob)

        return table.with_payload(column, _map_blocks(x, block, budget=1 << 19))


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
        if not k or not n:
            return table.with_payload(column, x.copy())
        rng = table_rng(table, self.seed)
        budget = _BLOCK_VALUES
        per = _image_blocks(n, h * w * c, budget)[0].stop  # images in a block
        use_cv = _cv_ok(x)
        grey = np.full((per * h, w, c), self.grey, dtype=x.dtype) if use_cv else None

        def draw(rows):
            return rng.random((rows.stop - rows.start, h * w)) if k < h * w else None

        def block(xb, rows, ob, keys):
            m = len(xb)
            if k < h * w:
                # the k smallest keys of each row: those at most the k-th smallest (argpartition's choice too,
                # as long as no key ties with the k-th; ties fall back to argpartition itself)
                mask = keys <= np.partition(keys, k - 1, axis=1)[:, k - 1 : k]
                if (np.count_nonzero(mask, axis=1) != k).any():  # pragma: no cover - equal float64 keys
                    chosen = np.argpartition(keys, k - 1, axis=1)[:, :k]
                    mask[...] = False
                    np.put_along_axis(mask, chosen, True, axis=1)
            else:
                mask = np.ones((m, h * w), dtype=bool)
            ob[...] = xb
            if use_cv:
                import cv2

                dst = ob.reshape(m * h, w, c)
                res = cv2.copyTo(grey[: m * h], mask.view(np.uint8).reshape(m * h, w), dst=dst)
                if not np.shares_memory(res, dst):  # pragma: no cover - OpenCV wrote elsewhere
                    dst[...] = res.reshape(dst.shape)
            else:
                ob.reshape(m, h * w, c)[mask] = self.grey

        return table.with_payload(column, _map_blocks(x, block, budget=budget, draw=draw))


@attrs.define(kw_only=True)
class KSamePixel(_FaceAnonymizer):
    """k-Same-Pixel (variant of the Fantômas paper §6.1.5): every image is replaced by the pixel mean of itself
    and its ``k`` − 1 nearest background images (in a PCA space fitted on the background), at most one image per
    background identity. ``fit(background)`` gives the background set (identities used nowhere else); without a
    background the table itself is used, excluding the image's own subject. Table IV: k 10."""

    id: ClassVar[str] = "face.k_same_pixel"
    reference: ClassVar[str] = "k-same; fantomas §6.1.5"
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
        self.mean_, self.basis_ = pca_basis(flat, self.n_components)
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
        picks, valid = nearest_identities(zt, zb, np.asarray(table.subjects), self.subjects_, self.k - 1)
        out = flat.astype(np.float64)
        if picks.shape[1]:
            total = out + (self.background_[np.where(valid, picks, 0)] * valid[..., None]).sum(axis=1)
            out = total / (1 + valid.sum(axis=1))[:, None]
        return table.with_payload(column, restore_dtype(out.reshape(x.shape), x.dtype))


def batched_kmeans(x: np.ndarray, k: int, iterations: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """K-means of the pixels of every image at once: ``x`` (n, P, C) → centres (n, k, C), labels (n, P).

    k-means++ seeding (vectorized over the images), then up to ``iterations`` Lloyd rounds (all images together,
    until no label changes). The returned labels are the nearest centre of every pixel; an empty cluster keeps
    its centre."""
    x = np.asarray(x, dtype=np.float32)
    n, p, c = x.shape
    rows = np.arange(n)
    cent = np.empty((n, k, c), dtype=np.float32)
    cent[:, 0] = x[rows, rng.integers(0, p, n)]
    d2 = ((x - cent[:, :1]) ** 2).sum(-1, dtype=np.float64)
    for j in range(1, k):  # k-means++: the next centre with probability ∝ squared distance to the nearest one
        cum = np.cumsum(d2, axis=1)
        u = rng.random(n) * cum[:, -1]
        idx = np.minimum((cum <= u[:, None]).sum(axis=1), p - 1)
        cent[:, j] = x[rows, idx]
        d2 = np.minimum(d2, ((x - cent[:, j : j + 1]) ** 2).sum(-1, dtype=np.float64))
    x64 = x.astype(np.float64)

    def assign(cent: np.ndarray) -> np.ndarray:  # argmin of |x - c|² = |x|² - 2 x·c + |c|², |x|² dropped
        c64 = cent.astype(np.float64)
        d = (c64**2).sum(-1)[:, None, :] - 2.0 * np.matmul(x64, c64.transpose(0, 2, 1))
        return np.argmin(d, axis=2)

    def update(labels: np.ndarray, cent: np.ndarray) -> np.ndarray:
        flat = (labels + rows[:, None] * k).ravel()
        counts = np.bincount(flat, minlength=n * k).reshape(n, k)
        sums = np.stack([np.bincount(flat, weights=x[:, :, ch].ravel(), minlength=n * k) for ch in range(c)], -1)
        means = sums.reshape(n, k, c) / np.maximum(counts, 1)[..., None]
        return np.where(counts[..., None] > 0, means, cent).astype(np.float32)

    labels = assign(cent)
    for _ in range(iterations):
        cent = update(labels, cent)
        new = assign(cent)
        if np.array_equal(new, labels):
            break
        labels = new
    return cent, labels


def dp_sample_counts(frequencies: np.ndarray, m: int, budgets: np.ndarray) -> np.ndarray:
    """Pixels DP Samp may sample from a cluster of ``frequencies`` pixels with privacy budget ``budgets``.

    The largest x in 0..f − m with C(f, x) / C(f − m, x) ≤ exp(ε_i) (Reilly & Fan 2021, after VideoDP): the
    privacy loss of sampling x of f pixels without replacement when neighbouring images differ in m pixels.
    A cluster of at most m pixels gives 0. Vectorized (binary search on log-binomials over all clusters)."""
    from scipy.special import gammaln

    f = np.asarray(frequencies, dtype=np.int64)
    eps = np.asarray(budgets, dtype=np.float64)
    lo = np.zeros(f.shape, dtype=np.int64)
    hi = np.maximum(f - m, 0)
    base = gammaln(f + 1.0) - gammaln(np.maximum(f - m, 0) + 1.0)

    def log_ratio(xv: np.ndarray) -> np.ndarray:  # ln C(f, x) - ln C(f - m, x), increasing in x
        return base - gammaln(f - xv + 1.0) + gammaln(np.maximum(f - m - xv, 0) + 1.0)

    while np.any(lo < hi):
        mid = (lo + hi + 1) // 2
        ok = log_ratio(mid) <= eps + 1e-9
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid - 1)
    return lo


@attrs.define(kw_only=True)
class DpSamp(_FaceAnonymizer):
    """DP Samp (Reilly & Fan 2021, after VideoDP): k-means colour clusters, DP sampling of pixels per cluster,
    and linear interpolation between the sampled pixels (the Fantômas paper §6.1.4; Table IV: ε 25, k 24, m 12).

    Per image (the Fantômas paper's variant for RGB, which SEBA implements): the pixels are clustered into ``k``
    colours by k-means; the frequency f_i of cluster i counts its pixels within ``threshold`` (L1 distance over
    the channels, grey levels) of the cluster colour; cluster i gets the budget ε_i = ε·f_i / Σ f and samples
    x_i of those pixels uniformly without replacement, x_i the largest value with C(f_i, x_i)/C(f_i − m, x_i) ≤
    exp(ε_i) (:func:`dp_sample_counts`). Sampled pixels take their cluster colour; every other pixel is linearly
    interpolated (Delaunay triangulation of the sampled positions, as SciPy's ``griddata``); pixels outside the
    samples' convex hull take the nearest sampled pixel's colour, and an image without any sample becomes grey
    127. Positions are (row, column) on the true H×W grid, so non-square images are handled (SEBA's
    implementation mixed up rows and columns on them). The paper gives no threshold; 30 is our default.

    K-means, counting, budgets and sampling run on the whole batch at once; only the triangulation is one SciPy
    call per image."""

    id: ClassVar[str] = "face.dp_samp"
    reference: ClassVar[str] = (
        "Reilly & Fan, A comparative evaluation of differentially private image "
        "obfuscation, TPS-ISA 2021; Wang, Xie & Hong, VideoDP, PETS 2020; "
        "fantomas §6.1.4, Table IV"
    )
    example_params: ClassVar[dict[str, Any]] = {"k": 4, "kmeans_iterations": 5}

    epsilon: float = param(25.0, help="privacy budget ε of an image", low=0.0, low_inclusive=False)
    k: int = param(24, help="k-means colour clusters per image", low=1)
    m: int = param(12, help="pixels that may differ between neighbouring images", low=1)
    threshold: float = param(
        30.0,
        help="L1 distance (grey levels, summed over channels) within which a pixel "
        "counts for its cluster's frequency and may be sampled",
        low=0.0,
    )
    kmeans_iterations: int = param(20, help="largest number of Lloyd iterations of the k-means", low=0)
    seed: int = param(0, help="random seed")

    def plan(self, x: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Clusters and sampled pixels of a batch ``x`` (n, H, W, C): ``centres`` (n, k, C), ``labels`` (n, P),
        ``frequencies`` and ``counts`` (n, k), ``eligible`` and ``sampled`` (n, P) masks (P = H·W, row-major)."""
        n, h, w, c = x.shape
        pix = x.reshape(n, h * w, c).astype(np.float32)
        k = min(self.k, h * w)
        centres, labels = batched_kmeans(pix, k, self.kmeans_iterations, rng)
        rows = np.arange(n)[:, None]
        eligible = np.abs(pix - centres[rows, labels]).sum(-1) <= self.threshold
        group = (labels + np.arange(n)[:, None] * k).ravel()
        freq = np.bincount(group, weights=eligible.ravel(), minlength=n * k).reshape(n, k).astype(np.int64)
        total = freq.sum(axis=1, keepdims=True)
        budgets = self.epsilon * freq / np.maximum(total, 1)
        counts = dp_sample_counts(freq, self.m, budgets)
        # uniform sampling without replacement within each (image, cluster): rank eligible pixels by a random key
        keys = np.where(eligible, rng.random(eligible.shape), 2.0)
        order = np.lexsort((keys, labels), axis=-1)
        sizes = np.bincount(group, minlength=n * k).reshape(n, k)
        starts = np.cumsum(sizes, axis=1) - sizes
        sorted_labels = np.take_along_axis(labels, order, axis=1)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(h * w)[None, :] - starts[rows, sorted_labels], axis=1)
        sampled = eligible & (rank < counts[rows, labels])
        return dict(centres=centres, labels=labels, frequencies=freq, counts=counts, eligible=eligible, sampled=sampled)

    @staticmethod
    def interpolate(sampled: np.ndarray, colours: np.ndarray, h: int, w: int) -> np.ndarray:
        """Images (b, H, W, C) from sampled pixels ``sampled`` (b, P) bool and their ``colours`` (b, P, C).

        Linear interpolation on the Delaunay triangulation of each image's sampled (row, column) positions, as
        SciPy's ``griddata(method="linear")``; every other pixel takes the value of the nearest interpolated
        pixel (SEBA's nearest-neighbour fill); an image without samples is grey 127. The triangulation is one
        SciPy call per image; rasterizing the triangles and the fill run on the whole batch."""
        from scipy.ndimage import distance_transform_edt
        from scipy.spatial import Delaunay, QhullError

        b, p, c = colours.shape
        out = np.zeros((b, p, c), dtype=np.float64)
        covered = sampled.copy()
        out[sampled] = colours[sampled]
        tris, owner = [], []
        for i in range(b):  # one triangulation per image
            idx = np.flatnonzero(sampled[i])
            if idx.size < 3:
                continue
            try:
                simplices = Delaunay(np.stack(np.divmod(idx, w), axis=1).astype(np.float64)).simplices
            except QhullError:  # all samples on a line: no triangle
                continue
            tris.append(idx[simplices])
            owner.append(np.full(len(simplices), i))
        if tris:
            tri = np.concatenate(tris)  # (T, 3) flat pixel indices of the vertices
            img = np.concatenate(owner)
            vr, vc = np.divmod(tri, w)
            vr, vc = vr.astype(np.float64), vc.astype(np.float64)
            det = (vr[:, 1] - vr[:, 0]) * (vc[:, 2] - vc[:, 0]) - (vr[:, 2] - vr[:, 0]) * (vc[:, 1] - vc[:, 0])
            keep = det != 0
            tri, img, vr, vc, det = tri[keep], img[keep], vr[keep], vc[keep], det[keep]
            r0, c0 = vr.min(1).astype(np.int64), vc.min(1).astype(np.int64)
            bh, bw = vr.max(1).astype(np.int64) - r0 + 1, vc.max(1).astype(np.int64) - c0 + 1
            sizes = bh * bw
            t = np.repeat(np.arange(len(tri)), sizes)  # (triangle, pixel of its bounding box) pairs
            local = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            pr, pc = r0[t] + local // bw[t], c0[t] + local % bw[t]
            dr, dc = pr - vr[t, 0], pc - vc[t, 0]
            l1 = (dr * (vc[t, 2] - vc[t, 0]) - (vr[t, 2] - vr[t, 0]) * dc) / det[t]
            l2 = ((vr[t, 1] - vr[t, 0]) * dc - dr * (vc[t, 1] - vc[t, 0])) / det[t]
            l0 = 1.0 - l1 - l2
            inside = (l0 >= -1e-9) & (l1 >= -1e-9) & (l2 >= -1e-9)
            t, pix = t[inside], (pr * w + pc)[inside]
            lam = np.stack([l0[inside], l1[inside], l2[inside]], axis=1)  # (Q, 3)
            vals = np.einsum("qv,qvc->qc", lam, colours[img[t][:, None], tri[t]])
            out[img[t], pix] = vals
            covered[img[t], pix] = True
        has = covered.any(axis=1)
        out[~has] = 127.0
        todo = has & ~covered.all(axis=1)
        if todo.any():  # nearest covered pixel of the same image (the image axis is made very long)
            miss = ~covered[todo].reshape(-1, h, w)
            near = distance_transform_edt(
                miss, sampling=(4.0 * (h + w) ** 2, 1.0, 1.0), return_distances=False, return_indices=True
            )
            src = (near[1] * w + near[2]).reshape(len(miss), p)
            sub = out[todo]
            out[todo] = np.take_along_axis(sub, src[..., None], axis=1)
        return out.reshape(b, h, w, c)

    def transform(self, table):
        column, x = _images(self, table)
        n, h, w, _ = x.shape
        rng = table_rng(table, self.seed)
        out = np.empty(x.shape, dtype=x.dtype)
        per = max(1, 4_000_000 // (h * w * max(1, min(self.k, h * w))))  # images per batch
        for s in range(0, n, per):
            part = x[s : s + per]
            plan = self.plan(part, rng)
            colours = np.take_along_axis(plan["centres"], plan["labels"][..., None], axis=1)  # (b, P, C)
            out[s : s + per] = restore_dtype(self.interpolate(plan["sampled"], colours, h, w), x.dtype)
        return table.with_payload(column, out)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """The SplitMix64 finalizer, elementwise on uint64 (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def keyed_prf(key_hash: np.ndarray, *parts: Any) -> np.ndarray:
    """A keyed pseudo-random function: uint64 of ``key_hash`` and integer ``parts`` (broadcast together)."""
    z = np.asarray(key_hash, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for p in parts:
            z = _splitmix64(z ^ _splitmix64((np.asarray(p, dtype=np.uint64) + np.uint64(1)) * _GOLDEN))
    return z


def keyed_ids(sample_ids: Any, key: int) -> np.ndarray:
    """A secret-keyed 64-bit hash of every sample id (SipHash-2-4 via pandas, keyed by ``key``): (n,) uint64.

    Depends only on the id and the key, not on the table the sample is in nor on its row."""
    from pandas.util import hash_array

    return hash_array(np.asarray(sample_ids, dtype=object), hash_key=f"{int(key) % (1 << 64):016x}", categorize=False)


@attrs.define(kw_only=True)
class KRtio(_FaceAnonymizer):
    """k-RTIO (Rajabi et al. 2021): α·image + (1 − α)·the mean of ``k`` key-selected, key-block-permuted overlay
    images (the Fantômas paper §6.1.3).

    ``fit(background)`` gives the overlay set (without one, the table itself). Per image, a pseudo-random
    function keyed by the secret ``key`` and the image's sample id picks ``k`` distinct overlays and, for each,
    a permutation of its ``block_size``×``block_size`` blocks (row-major; rows/columns beyond the last whole
    block stay in place, as in SEBA); the output is ``alpha``·image + (1 − ``alpha``)·(1/k)·Σ permuted overlays,
    so ``alpha`` weights the face (SEBA's defaults: α 0.5, block 60, k 3; Table IV lists none). Reversible with
    the key and the overlay set. Overlays must have the images' H×W×C. The PRF is SipHash of the sample id
    keyed by ``key``, expanded with SplitMix64 (SEBA uses AES; any keyed PRF fits the method)."""

    id: ClassVar[str] = "face.k_rtio"
    reference: ClassVar[str] = (
        "Rajabi et al., On the (im)practicality of adversarial perturbation for image "
        "privacy, PETS 2021; fantomas §6.1.3"
    )
    needs_fit: ClassVar[bool] = True
    example_params: ClassVar[dict[str, Any]] = {"block_size": 4, "k": 2}

    alpha: float = param(0.5, help="weight of the image (1 − α: weight of the overlay)", low=0.0, high=1.0)
    block_size: int = param(60, help="side of the permuted overlay blocks in pixels", low=1)
    k: int = param(3, help="overlay images combined per image", low=1)
    key: int = param(0, help="secret key of the pseudo-random function")

    overlays_: np.ndarray | None = fitted()

    def fit(self, background):
        self.overlays_ = _images(self, background)[1]
        return self

    def plan(self, sample_ids: Any, n_overlays: int, n_blocks: int) -> tuple[np.ndarray, np.ndarray]:
        """Overlay indices (n, k), distinct per image, and block permutations (n, k, n_blocks) of the images
        ``sample_ids``: output block b of overlay j takes block ``perms[i, j, b]`` of overlay ``choice[i, j]``."""
        h = keyed_ids(sample_ids, self.key)
        n = len(h)
        choice = np.empty((n, self.k), dtype=np.int64)
        per = max(1, 4_000_000 // max(n_overlays, 1))
        for s in range(0, n, per):  # chunks bound the (images × overlays) scores
            scores = keyed_prf(h[s : s + per, None], 0, np.arange(n_overlays)[None, :])
            choice[s : s + per] = np.argsort(scores, axis=1, kind="stable")[:, : self.k]
        perms = np.argsort(
            keyed_prf(h[:, None, None], 1, np.arange(self.k)[None, :, None], np.arange(n_blocks)[None, None, :]),
            axis=2,
            kind="stable",
        )
        return choice, perms

    def transform(self, table):
        if self.overlays_ is None:
            self.fit(table)
        column, x = _images(self, table)
        n, h, w, c = x.shape
        ov = self.overlays_
        if ov.shape[1:] != x.shape[1:]:
            raise TableError(
                f"{self.id}: overlay images of shape {ov.shape[1:]} (the fitted background) do not "
                f"match the images of payload {column!r}, {x.shape[1:]}"
            )
        if len(ov) < self.k:
            from bioanon.api import ParameterError

            raise ParameterError(self.id, "k", self.k, f"at most the {len(ov)} overlay images of the background")
        b = self.block_size
        nh, nw = h // b, w // b
        nb = nh * nw
        ids = table.sample_ids
        out = np.empty(x.shape, dtype=x.dtype)
        uint8 = x.dtype == np.uint8 and ov.dtype == np.uint8
        lut = self._mix_table() if uint8 else None
        edges = (
            (np.ascontiguousarray(ov[:, nh * b :]), np.ascontiguousarray(ov[:, : nh * b, nw * b :]))
            if uint8 and nb > 1
            else None
        )
        # the plan of every image depends only on its sample id: plan chunks of images, mix blocks of them
        plan_rows = max(1, (1 << 16) // (self.k * max(nb, 1)))
        for p0 in range(0, n, plan_rows):
            chunk = slice(p0, min(p0 + plan_rows, n))
            choice, perms = self.plan(ids[chunk], len(ov), nb)
            for rows in _image_blocks(chunk.stop - chunk.start, h * w * c):
                xb, ob = x[chunk][rows], out[chunk][rows]
                if uint8:
                    self._mix_uint8(xb, ov, choice[rows], perms[rows], ob, lut, edges)
                else:
                    self._mix(xb, ov, choice[rows], perms[rows], ob)
        return table.with_payload(column, out)

    def _mix_table(self) -> np.ndarray | None:
        """uint8 result of the α-mix of a pixel p and an overlay sum s (the float64 operations of :meth:`_mix`),
        at ``p·(255k + 1) + s``; None when that table would be large (k > 32)."""
        levels = 255 * self.k + 1
        if 256 * levels > 1 << 21:
            return None
        mixed = self.alpha * np.arange(256, dtype=np.float64)[:, None] + (1.0 - self.alpha) * (
            np.arange(levels, dtype=np.float64)[None, :] / self.k
        )
        return restore_dtype(mixed, np.dtype(np.uint8)).ravel()

    def _mix(self, x: np.ndarray, ov: np.ndarray, choice: np.ndarray, perms: np.ndarray, out: np.ndarray) -> None:
        """The k-RTIO images of the block ``x`` into ``out`` (any dtypes), in float64."""
        _, h, w, c = x.shape
        b = self.block_size
        nh, nw = h // b, w // b
        acc = np.zeros(x.shape, dtype=np.float64)
        for j in range(self.k):  # a loop over the k overlays, vectorized over images and blocks
            o = ov[choice[:, j]].astype(np.float64)
            if nh * nw > 1:
                core = o[:, : nh * b, : nw * b].reshape(-1, nh, b, nw, b, c).transpose(0, 1, 3, 2, 4, 5)
                core = core.reshape(-1, nh * nw, b, b, c)
                core = np.take_along_axis(core, perms[:, j][:, :, None, None, None], axis=1)
                o[:, : nh * b, : nw * b] = (
                    core.reshape(-1, nh, nw, b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(-1, nh * b, nw * b, c)
                )
            acc += o
        mixed = self.alpha * x.astype(np.float64) + (1.0 - self.alpha) * (acc / self.k)
        out[...] = restore_dtype(mixed, x.dtype)

    def _mix_uint8(
        self,
        x: np.ndarray,
        ov: np.ndarray,
        choice: np.ndarray,
        perms: np.ndarray,
        out: np.ndarray,
        lut: np.ndarray | None,
        edges: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """:meth:`_mix` for uint8 images and overlays, with the same result: the sum of the k permuted overlays
        is an exact integer sum (uint16 for k ≤ 257; the float64 sum of :meth:`_mix` is the same integer), the
        permuted blocks are gathered straight from the overlays and summed in block order, and the α-mix of
        (pixel, sum) — the same float64 operations — is read from ``lut`` (:meth:`_mix_table`) when there is
        one. ``edges``: the overlays' rows below and columns right of the last whole block, contiguous."""
        r, h, w, c = x.shape
        k, b = self.k, self.block_size
        nh, nw = h // b, w // b
        kind = np.uint16 if 255 * k < 1 << 16 else np.int64
        if nh * nw > 1:
            acc = np.empty(x.shape, dtype=kind)
            # (overlay, block row, y, block column, x, channel): a view of the overlays' whole blocks
            ov6 = ov[:, : nh * b, : nw * b].reshape(len(ov), nh, b, nw, b, c)
            total = np.zeros((r, nh * nw, b, b, c), dtype=kind)
            for j in range(k):
                src = perms[:, j]  # (r, nb): output block i of overlay j is its block src[:, i] (row-major)
                total += ov6[choice[:, j][:, None], src // nw, :, src % nw]  # (r, nb, b, b, c)
            acc[:, : nh * b, : nw * b].reshape(r, nh, b, nw, b, c)[...] = total.reshape(r, nh, nw, b, b, c).transpose(
                0, 1, 3, 2, 4, 5
            )
            bottom, right = edges if edges is not None else (ov[:, nh * b :], ov[:, : nh * b, nw * b :])
            for part, strip in ((acc[:, nh * b :], bottom), (acc[:, : nh * b, nw * b :], right)):
                if part.size:  # rows and columns beyond the last whole block stay in place
                    part[...] = strip[choice[:, 0]]
                    for j in range(1, k):
                        part += strip[choice[:, j]]
        else:
            acc = np.zeros(x.shape, dtype=kind)
            for j in range(k):
                acc += ov[choice[:, j]]
        if lut is None:
            out[...] = restore_dtype(
                self.alpha * x.astype(np.float64) + (1.0 - self.alpha) * (acc / k), np.dtype(np.uint8)
            )
            return
        idx = x.astype(np.int32)
        idx *= 255 * k + 1
        idx += acc
        np.take(lut, idx, out=out, mode="clip")


def pca_basis(flat: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean (D,) and the first ``n_components`` principal axes (D, K) of the rows of ``flat`` (eigenfaces).

    Axes of (numerically) zero variance are left out: with M rows at most M − 1 axes carry variance, and an
    arbitrary null-space direction is no eigenface."""
    mean = flat.mean(axis=0)
    _, sv, vt = np.linalg.svd(flat - mean, full_matrices=False)
    rank = int((sv > sv[:1].max(initial=0.0) * 1e-4).sum()) if sv.size else 0
    return mean, np.ascontiguousarray(vt[: max(1, min(n_components, rank))].T)


def nearest_identities(
    zt: np.ndarray, zb: np.ndarray, table_subjects: np.ndarray, background_subjects: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """The nearest background image of each of the ``m`` nearest background identities, per table image.

    Distances are Euclidean between the rows of ``zt`` (n, K) and ``zb`` (M, K); at most one image per background
    identity, never the image's own subject. Returns ``picks`` (n, m') background row indices, nearest first, and
    ``valid`` (n, m') — False where fewer than m' other identities exist (m' = min(m, identities))."""
    d = (zt**2).sum(1)[:, None] + (zb**2).sum(1)[None, :] - 2.0 * zt @ zb.T  # (n, M)
    d[table_subjects[:, None] == background_subjects[None, :]] = np.inf  # never one's own subject
    # the nearest image of every background identity (a loop over identities, vectorized over images)
    ids, inv = np.unique(background_subjects, return_inverse=True)
    per_id = np.empty((len(zt), len(ids)), dtype=np.float64)
    best = np.empty((len(zt), len(ids)), dtype=np.int64)
    rows = np.arange(len(zt))
    for j in range(len(ids)):
        members = np.flatnonzero(inv == j)
        best[:, j] = members[np.argmin(d[:, members], axis=1)]
        per_id[:, j] = d[rows, best[:, j]]
    m = max(0, min(m, len(ids)))
    nearest = np.argsort(per_id, axis=1, kind="stable")[:, :m]
    picks = np.take_along_axis(best, nearest, axis=1)
    valid = np.take_along_axis(per_id, nearest, axis=1) < np.inf
    return picks, valid


@attrs.define(kw_only=True)
class FaceRandomSetMean(RandomSetMean):
    """Random-set mean on face images: ``any.random_set_mean`` on the ``image`` payload (pixels as features,
    rounded back to uint8)."""

    id: ClassVar[str] = "face.random_set_mean"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)

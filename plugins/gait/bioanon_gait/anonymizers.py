"""Gait anonymizations: SEBA's gait list (the SEBA paper App. B.1, from Hanisch et al., "Understanding person
identification through gait", PoPETs 2023), vectorized over the batch, with SEBA's defects fixed.

Every method maps a ``pose`` payload ``(N, frames, joints, 3)`` to one of **the same shape**, so any of them can
follow any other in an ``any.chain`` (``gait.chain``, its deprecated alias, reads the old step strings).
Methods whose natural output is shorter or smaller keep the shape as follows:

* motion extraction — the ``T - lag`` differences come first, the last ``lag`` frames are zero;
* trajectory features — values stay aligned with their frame; the ``window`` frames at each end, which have
  no full window, are zero;
* rolling average — each frame averages the frames of its window that exist (shorter windows at the edges);
* resampling / coarsening in time — the reduced sequence is interpolated back to the original frame count;
* average pose / first pose — that pose repeated over all frames.

Fixed relative to SEBA: noise is seeded, zero-mean for every distribution (uniform on [-√3, √3]) and the
"indirect" mode really adds noise (to the frame differences, then integrated); the chain loads from TOML and
validates its steps; the trajectory window is symmetric; sizes are normalized about the sequence's centre.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from bioanon.api import Anonymizer, Chain, Method, ParameterError, RandomSetMean, TableError, param, warn_deprecated

from .skeleton import (
    BODY_PARTS,
    BODY_PARTS_CHECK,
    BODY_PARTS_HELP,
    body_part_indices,
    joint_names,
    poses,
    resample,
    unit_scale,
    up_axis,
    valid_body_parts_json,
)

_SEBA = "seba App. B.1; gait-identification"


#: float64 values per block of sequences the anonymizations process at once (512 KiB): the block and its
#: temporaries stay in the CPU cache. Whole-batch float64 temporaries (260 MB for 10,000 walks) made every
#: method slower than a per-sequence loop (benchmarks/sequences.py); blocks make it 2-10x faster than that loop.
_BLOCK_VALUES = 1 << 16


@attrs.define(kw_only=True)
class _PoseAnonymizer(Anonymizer):
    """Shared machinery: ``transform`` reads the poses, computes the per-table constants once
    (``_plan(table)``), then calls ``_apply(x, table, rows, plan)`` on blocks of sequences — ``x`` the poses of
    the table rows ``rows`` (a slice) in the class's ``layout`` — and stores the float32 results, returned in
    the same layout, in one output array.

    Layouts: ``"frames"`` — float64 ``(n, T, J, 3)``; ``"axes"`` — float64 ``(n, 3, T, J)``, C-contiguous, for
    statistics per coordinate axis (numpy broadcasts over a long contiguous inner axis instead of the 3
    coordinates, several times faster); ``"float32"`` — the stored float32 ``(n, T, J, 3)``, read-only, for
    methods whose result is exact in float32 (selection, copies, one subtraction)."""

    trait: ClassVar[str] = "gait"
    payloads: ClassVar[tuple[str, ...]] = ("pose",)
    reference: ClassVar[str] = _SEBA
    layout: ClassVar[str] = "frames"
    per_sample: ClassVar[bool] = True  # each sequence on its own (a subclass with table-wide state sets False)

    def transform(self, table):
        x = poses(table)
        out = np.empty(x.shape, dtype=np.float32)
        if len(x):
            plan = self._plan(table)
            per = max(1, _BLOCK_VALUES // max(1, int(np.prod(x.shape[1:]))))
            for start in range(0, len(x), per):
                rows = slice(start, min(start + per, len(x)))
                block = x[rows]
                if self.layout == "axes":
                    y = self._apply(
                        np.ascontiguousarray(block.transpose(0, 3, 1, 2), dtype=np.float64), table, rows, plan
                    ).transpose(0, 2, 3, 1)
                else:
                    y = self._apply(block if self.layout == "float32" else block.astype(np.float64), table, rows, plan)
                if y.shape != block.shape:  # pragma: no cover - a bug in a subclass
                    raise AssertionError(f"{self.id} changed the pose shape {block.shape} -> {y.shape}")
                out[rows] = y
        return table.with_payload("pose", out)

    def _plan(self, table: Any) -> Any:
        """What ``_apply`` needs from the whole table (masks, offsets, indices), computed once per transform."""
        return None

    def _apply(self, x: np.ndarray, table: Any, rows: slice, plan: Any) -> np.ndarray:
        raise NotImplementedError


# --------------------------------------------------------------------------------------------------- noise

_DISTRIBUTIONS = ("normal", "laplace", "uniform")


def sample_seed(seed: int, sample_id: str) -> list[int]:
    """Entropy for one sample's generator: the method seed and a hash of the sample id, so a sample's noise
    depends only on (seed, sample id), not on its row, its batch or the other samples of the table."""
    digest = hashlib.sha256(str(sample_id).encode("utf-8")).digest()
    return [int(seed)] + [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]


def unit_draws(sample_ids: Sequence[str], shape: tuple[int, ...], distribution: str, seed: int) -> np.ndarray:
    """Zero-mean, unit-variance draws ``(N, *shape)``: normal(0, 1), Laplace(0, 1/√2) or uniform(−√3, √3).

    One generator per sample (seeded from (seed, sample id), see :func:`sample_seed`); the draws are then used
    in vectorized arithmetic over the batch."""
    out = np.empty((len(sample_ids),) + tuple(shape))
    for i, sid in enumerate(sample_ids):  # one generator per sample; the draws themselves are vectorized
        rng = np.random.default_rng(sample_seed(seed, sid))
        if distribution == "normal":
            out[i] = rng.standard_normal(shape)
        elif distribution == "laplace":
            out[i] = rng.laplace(0.0, 1.0 / np.sqrt(2.0), shape)
        else:
            out[i] = rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), shape)
    return out


@attrs.define(kw_only=True)
class NoiseInjection(_PoseAnonymizer):
    """Noise injection: add seeded zero-mean noise scaled by each joint's temporal standard deviation.

    ``direct`` (the paper's Noise(x)): ``x[t] + scale · σ · z[t]``, where σ is the standard deviation over time
    of that sequence's joint coordinate and ``z`` has zero mean and unit variance (``normal``; ``laplace`` with
    b = 1/√2; ``uniform`` on [−√3, √3]; parameter ``noise``). ``indirect``: the noise is added to the frame
    differences
    (``d[t] = x[t+1] − x[t]``, scaled by their own σ) and the sequence is re-integrated from its first frame,
    so the error accumulates like a random walk. Noise depends only on (seed, sample id)."""

    id: ClassVar[str] = "gait.noise"

    # (named ``noise``, not ``distribution``: Method.distribution is the registering package's name)
    noise: Literal["normal", "laplace", "uniform"] = param(
        "normal", help="noise distribution (zero mean, unit variance)"
    )
    scale: float = param(1.0, help="noise level in multiples of the per-joint temporal standard deviation", low=0.0)
    mode: Literal["direct", "indirect"] = param(
        "direct", help="add noise to the positions or to the frame differences (re-integrated)"
    )
    seed: int = param(0, help="random seed")

    def draws(self, table, rows: slice = slice(None)) -> np.ndarray:
        """The unit-variance draws this method adds (before scaling) to the sequences ``rows``, ``(n, T, J, 3)``."""
        return unit_draws(table.sample_ids[rows], table.payload_shape("pose"), self.noise, self.seed)

    def _plan(self, table):
        return table.sample_ids

    def _apply(self, x, table, rows, plan):
        z = unit_draws(plan[rows], x.shape[1:], self.noise, self.seed)
        if self.mode == "direct":
            return x + self.scale * x.std(axis=1, keepdims=True) * z
        d = np.diff(x, axis=1)
        d = d + self.scale * d.std(axis=1, keepdims=True) * z[:, 1:]
        return np.concatenate([x[:, :1], x[:, :1] + np.cumsum(d, axis=1)], axis=1)


# --------------------------------------------------------------------------------------------------- coarsening


@attrs.define(kw_only=True)
class CoarsenTime(_PoseAnonymizer):
    """Coarsening in time: keep every ``factor``-th frame (0, f, 2f, …) and rebuild the frames in between.

    ``linear`` interpolates between kept frames (SEBA's coarsening), ``hold`` repeats the last kept frame.
    Frames after the last kept frame repeat it."""

    id: ClassVar[str] = "gait.coarsen_time"

    factor: int = param(10, help="keep every factor-th frame", low=1)
    interpolation: Literal["linear", "hold"] = param("linear", help="how frames between kept ones are rebuilt")

    def _plan(self, table):
        T, f = table.payload_shape("pose")[0], self.factor
        t = np.arange(T)
        k0 = (t // f) * f
        last = ((T - 1) // f) * f
        k1 = np.minimum(k0 + f, last)
        w = np.where(k1 > k0, (t - k0) / f, 0.0) if self.interpolation == "linear" else np.zeros(T)
        return k0, k1, w[None, :, None, None]

    def _apply(self, x, table, rows, plan):
        k0, k1, w = plan
        return x[:, k0] * (1.0 - w) + x[:, k1] * w


@attrs.define(kw_only=True)
class CoarsenPrecision(_PoseAnonymizer):
    """Coarsening in precision: round every coordinate to a grid of ``step`` metres (converted to the table's
    units, e.g. 0.05 m = 50 mm)."""

    id: ClassVar[str] = "gait.coarsen_precision"

    step: float = param(0.05, help="grid width in metres", low=0.0, low_inclusive=False)

    def _plan(self, table):
        return self.step * unit_scale(table)

    def _apply(self, x, table, rows, plan):
        return np.round(x / plan) * plan


@attrs.define(kw_only=True)
class Resample(_PoseAnonymizer):
    """Resampling: resample each sequence to a lower frame rate, then back to its frame count (linear
    interpolation both ways), removing the fast components of the motion.

    The reduced sequence has ``max(2, round(T · factor))`` frames spanning the whole walk; with ``fps`` > 0 the
    factor is ``fps / frame_rate`` from the table's metadata."""

    id: ClassVar[str] = "gait.resample"

    factor: float = param(
        0.25, help="new frame rate as a share of the current one", low=0.0, high=1.0, low_inclusive=False
    )
    fps: float = param(0.0, help="target frame rate in Hz (0 = use factor)", low=0.0)

    def reduced_frames(self, table) -> int:
        """Frame count of the reduced sequence."""
        T = table.payload_shape("pose")[0]
        factor = self.factor
        if self.fps > 0:
            rate = table.metadata.get("frame_rate")
            if not rate:
                raise TableError(
                    f"{self.id}: fps={self.fps} needs the table's frame rate (metadata 'frame_rate'); "
                    f"give factor instead"
                )
            factor = min(1.0, self.fps / float(rate))
        return int(max(2, min(T, round(T * factor))))

    def _plan(self, table):
        return self.reduced_frames(table)

    def _apply(self, x, table, rows, plan):
        return resample(resample(x, plan), x.shape[1]).astype(np.float64)


# --------------------------------------------------------------------------------------------------- filters


def window_mean(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Mean of ``x[:, lo[t]:hi[t]]`` for every t (cumulative sums along axis 1, vectorized)."""
    flat = x.reshape(*x.shape[:2], -1)  # (N, T, D): a long inner axis for numpy
    c = np.empty((flat.shape[0], flat.shape[1] + 1, flat.shape[2]), dtype=np.result_type(flat, np.float64))
    c[:, 0] = 0.0
    np.cumsum(flat, axis=1, out=c[:, 1:])
    out = c[:, hi] - c[:, lo]
    out /= (hi - lo)[None, :, None]
    return out.reshape(len(x), len(hi), *x.shape[2:])


def sliding_mean(x: np.ndarray, start: int, width: int) -> np.ndarray:
    """For every frame t, the mean of the frames ``t + start … t + start + width − 1`` of ``x`` that exist
    (``(N, T, …)`` → same shape; a window with no frame gives NaN).

    Short windows (≤ 16 frames) add ``width`` shifted slices of the zero-padded block (contiguous, in place: a few
    fast passes); longer ones take differences of cumulative sums (:func:`window_mean`)."""
    n, T = x.shape[:2]
    t = np.arange(T)
    lo, hi = np.clip(t + start, 0, T), np.clip(t + start + width, 0, T)
    if width > 16:
        return window_mean(x, lo, hi)
    flat = x.reshape(n, T, -1)
    before, after = max(0, -start), max(0, start + width - 1)
    padded = np.zeros((n, before + T + after, flat.shape[2]), dtype=np.result_type(flat, np.float64))
    padded[:, before : before + T] = flat
    first = start + before
    out = padded[:, first : first + T].copy()
    for d in range(1, width):
        out += padded[:, first + d : first + d + T]
    with np.errstate(invalid="ignore", divide="ignore"):
        out /= (hi - lo)[None, :, None]
    return out.reshape(x.shape)


@attrs.define(kw_only=True)
class RollingAverage(_PoseAnonymizer):
    """Rolling average over ``window`` frames (a low-pass filter of the trajectories).

    ``trailing`` averages frame t with the ``window − 1`` frames before it (SEBA's valid convolution, kept
    aligned), ``centered`` the window around t; at the edges only the frames that exist are averaged."""

    id: ClassVar[str] = "gait.rolling_average"

    window: int = param(5, help="frames per average", low=1)
    alignment: Literal["trailing", "centered"] = param("trailing", help="window position relative to the frame")

    def _apply(self, x, table, rows, plan):
        start = -(self.window - 1) if self.alignment == "trailing" else -(self.window // 2)
        return sliding_mean(x, start, self.window)


@attrs.define(kw_only=True)
class MotionExtraction(_PoseAnonymizer):
    """Motion extraction: the differences ``x[t + lag] − x[t]`` between poses, keeping only the dynamics (the
    structure of the walker is removed). The last ``lag`` frames, which have no successor, are zero."""

    id: ClassVar[str] = "gait.motion_extraction"
    layout: ClassVar[str] = "float32"  # one subtraction: exact in float32

    lag: int = param(1, help="frame distance of the subtracted poses", low=1)

    def _apply(self, x, table, rows, plan):
        out = np.zeros_like(x)
        if self.lag < x.shape[1]:
            out[:, : x.shape[1] - self.lag] = x[:, self.lag :] - x[:, : -self.lag]
        return out


@attrs.define(kw_only=True)
class TrajectoryFeatures(_PoseAnonymizer):
    """Trajectory feature extraction: compare each frame with its neighbourhood of ``window`` frames each side.

    The local baseline is the mean of the frames ``t − window … t + window`` (``all``) or the linear
    interpolation between the window's edges, ``(x[t − w] + x[t + w]) / 2`` (``edges``). ``output`` is the
    ``residual`` ``x[t] − baseline`` (the feature: what the local trend does not explain) or the ``average``
    (the baseline itself). Values stay aligned with their frame; the ``window`` frames at each end are zero."""

    id: ClassVar[str] = "gait.trajectory_features"

    window: int = param(1, help="frames on each side of the current one", low=1)
    baseline: Literal["all", "edges"] = param("all", help="window mean, or interpolation between the window's edges")
    output: Literal["residual", "average"] = param("residual", help="frame minus baseline, or the baseline")

    def _apply(self, x, table, rows, plan):
        T, w = x.shape[1], self.window
        out = np.zeros_like(x)
        if T <= 2 * w:
            return out
        t = np.arange(w, T - w)
        if self.baseline == "all":
            ref = sliding_mean(x, -w, 2 * w + 1)[:, w : T - w]
        else:
            ref = (x[:, t - w] + x[:, t + w]) / 2.0
        out[:, w : T - w] = x[:, t] - ref if self.output == "residual" else ref
        return out


# --------------------------------------------------------------------------------------------------- body parts


def _parts_ok(parts: tuple) -> bool:
    """Validator: every name is a known body part."""
    return all(p in BODY_PARTS for p in parts)


@attrs.define(kw_only=True)
class _PartSelection(_PoseAnonymizer):
    """Select joints by body part and/or joint name."""

    keep: ClassVar[bool] = True
    layout: ClassVar[str] = "float32"  # a selection: exact in float32

    parts: tuple[str, ...] = param(
        ("left_leg", "right_leg"),
        help="body parts: " + ", ".join(BODY_PARTS),
        check=_parts_ok,
        check_text="names among " + ", ".join(BODY_PARTS),
    )
    joints: tuple[str, ...] = param(
        (), help="further joints by name (the table's joint names; j0, j1, … when it has none)"
    )
    body_parts: str = param("", help=BODY_PARTS_HELP, check=valid_body_parts_json, check_text=BODY_PARTS_CHECK)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if not self.parts and not self.joints:
            raise ParameterError(self.id, "parts", self.parts, "at least one body part or joint (parts or joints)")

    def selected(self, table) -> np.ndarray:
        """Boolean mask over joints: True for the joints of the given parts and names."""
        names = joint_names(table)
        mask = np.zeros(len(names), bool)
        if self.parts:
            groups = body_part_indices(table, self.body_parts, method_id=self.id)
            missing = [p for p in self.parts if p not in groups]
            if missing:
                raise TableError(f"{self.id}: the table has no body parts {missing}; it has {sorted(groups)}")
            for p in self.parts:
                mask[groups[p]] = True
        unknown = [j for j in self.joints if j not in names]
        if unknown:
            raise TableError(f"{self.id}: unknown joints {unknown}; the table's joints are {names}")
        mask[[names.index(j) for j in self.joints]] = True
        return mask

    def _plan(self, table):
        mask = self.selected(table)
        return np.repeat(mask if self.keep else ~mask, 3)  # True for the coordinates kept, (J·3,)

    def _apply(self, x, table, rows, plan):  # over (n, T, J·3): a long inner axis for numpy
        return np.where(plan, x.reshape(*x.shape[:2], -1), np.float32(0.0)).reshape(x.shape)


@attrs.define(kw_only=True)
class KeepParts(_PartSelection):
    """Keep body parts: only the joints of the given parts (and joint names) are kept, all others are set to
    zero (the paper's Keep(legs) and Keep(head); SEBA's remove parts with ``invert``)."""

    id: ClassVar[str] = "gait.keep_parts"
    keep: ClassVar[bool] = True
    example_params: ClassVar[dict] = {"parts": (), "joints": ("j0", "j1")}


@attrs.define(kw_only=True)
class RemoveParts(_PartSelection):
    """Remove body parts: the joints of the given parts (and joint names) are set to zero."""

    id: ClassVar[str] = "gait.remove_parts"
    keep: ClassVar[bool] = False
    example_params: ClassVar[dict] = {"parts": (), "joints": ("j0",)}

    parts: tuple[str, ...] = param(
        ("head",),
        help="body parts: " + ", ".join(BODY_PARTS),
        check=_parts_ok,
        check_text="names among " + ", ".join(BODY_PARTS),
    )


#: SEBA's fixed per-part translations (mm, for its 0.5 m default), as multiples of ``distance``.
SUM_OF_PARTS_OFFSETS = {
    "right_leg": (0.0, 1.0, 2.0),
    "left_leg": (0.0, -1.0, 0.0),
    "torso": (0.0, -1.0, -1.0),
    "head": (0.0, 1.0, -2.0),
    "left_arm": (0.0, -1.0, 1.0),
    "right_arm": (0.0, 1.0, -1.0),
    "hip": (0.0, 0.0, 0.0),
}


@attrs.define(kw_only=True)
class SumOfParts(_PoseAnonymizer):
    """Sum of parts: translate each body part by a fixed offset, so the walker falls apart into its parts while
    every part keeps its own motion (SEBA's offsets: right leg (0, 1, 2)·d, left leg (0, −1, 0)·d, torso
    (0, −1, −1)·d, head (0, 1, −2)·d, left arm (0, −1, 1)·d, right arm (0, 1, −1)·d, hip unmoved; d =
    ``distance`` metres in the table's units). Joints in no part stay in place."""

    id: ClassVar[str] = "gait.sum_of_parts"
    example_params: ClassVar[dict] = {"body_parts": '{"left_leg": ["j0"], "right_leg": ["j1"], "torso": ["j2"]}'}

    distance: float = param(0.5, help="offset unit d in metres", low=0.0)
    body_parts: str = param("", help=BODY_PARTS_HELP, check=valid_body_parts_json, check_text=BODY_PARTS_CHECK)

    def offsets(self, table) -> np.ndarray:
        """Per-joint offsets ``(J, 3)`` in the table's units."""
        groups = body_part_indices(table, self.body_parts, method_id=self.id)
        off = np.zeros((len(joint_names(table)), 3))
        for part, idx in groups.items():
            off[idx] = np.array(SUM_OF_PARTS_OFFSETS[part]) * self.distance * unit_scale(table)
        return off

    def _plan(self, table):
        return self.offsets(table)

    def _apply(self, x, table, rows, plan):
        return x + plan


# --------------------------------------------------------------------------------------------------- normalization


@attrs.define(kw_only=True)
class SizeNormalization(_PoseAnonymizer):
    """Size normalization: scale every walker to the same size, about its sequence centre (mean position).

    The size is the subject's height attribute (``by='height'``, attribute ``height_attribute`` in metres, as
    SEBA's simple size normalization) or the skeleton's own size (``by='skeleton'``: the median over frames of
    the vertical extent of the joints, so no attribute is needed). Each sequence is scaled by
    ``target / size`` on all axes or only on ``axis``."""

    id: ClassVar[str] = "gait.size_normalization"

    by: Literal["skeleton", "height"] = param("skeleton", help="what defines a walker's size")
    target: float = param(1.8, help="the size every walker gets, in metres", low=0.0, low_inclusive=False)
    height_attribute: str = param("height", help="attribute with the subject height in metres (by='height')")
    axis: Literal["all", "x", "y", "z"] = param("all", help="scale all axes or only one")

    def sizes(self, x: np.ndarray | None, table) -> np.ndarray:
        """Each sequence's size in the table's units, ``(N,)``: of the poses ``x`` (by skeleton) or of all the
        table's rows (by height)."""
        if self.by == "height":
            if self.height_attribute not in table.attribute_names:
                raise TableError(
                    f"{self.id}: by='height' needs the attribute {self.height_attribute!r} "
                    f"(height_attribute); the table has {table.attribute_names}; use by='skeleton'"
                )
            h = np.asarray(table.attribute(self.height_attribute), dtype=np.float64)
            bad = ~(np.isfinite(h) & (h > 0))
            if bad.any():
                raise TableError(
                    f"{self.id}: attribute {self.height_attribute!r} is missing or not positive for "
                    f"samples {list(table.sample_ids[bad][:5])}"
                )
            return h * unit_scale(table)
        assert x is not None, "by='skeleton' measures the poses x"
        vertical = x[..., up_axis(table)]  # (N, T, J)
        return np.median(vertical.max(axis=2) - vertical.min(axis=2), axis=1)

    def _plan(self, table):
        return self.sizes(None, table) if self.by == "height" else None

    layout: ClassVar[str] = "axes"

    def _apply(self, x, table, rows, plan):  # x: (n, 3, T, J)
        if plan is not None:
            size = plan[rows]
        else:
            vertical = x[:, up_axis(table)]  # (n, T, J)
            size = np.median(vertical.max(axis=2) - vertical.min(axis=2), axis=1)
        factor = np.where(size > 0, self.target * unit_scale(table) / np.where(size > 0, size, 1.0), 1.0)
        centre = x.mean(axis=(2, 3), keepdims=True)
        scale = np.ones((len(x), 3, 1, 1))
        if self.axis == "all":
            scale[:] = factor[:, None, None, None]
        else:
            scale[:, "xyz".index(self.axis)] = factor[:, None, None]
        return centre + (x - centre) * scale


@attrs.define(kw_only=True)
class AxisNormalization(_PoseAnonymizer):
    """Per-axis normalization of each sequence: ``minmax`` to [0, 1], ``zscore`` (zero mean, unit standard
    deviation) or ``l2`` (unit norm, SEBA's normalize), computed per axis over all joints and frames
    (``per='axis'``: keeps the walker's proportions within an axis) or per joint axis over frames
    (``per='joint_axis'``, SEBA's). Constant groups map to 0."""

    id: ClassVar[str] = "gait.normalize"

    method: Literal["minmax", "zscore", "l2"] = param("minmax", help="normalization")
    per: Literal["axis", "joint_axis"] = param("axis", help="statistics per axis or per joint axis")

    layout: ClassVar[str] = "axes"

    def _apply(self, x, table, rows, plan):  # x: (n, 3, T, J)
        over = (2, 3) if self.per == "axis" else (2,)
        if self.method == "minmax":
            lo, hi = x.min(axis=over, keepdims=True), x.max(axis=over, keepdims=True)
            span = hi - lo
            return np.where(span > 0, (x - lo) / np.where(span > 0, span, 1.0), 0.0)
        if self.method == "zscore":
            mu, sd = x.mean(axis=over, keepdims=True), x.std(axis=over, keepdims=True)
            return np.where(sd > 0, (x - mu) / np.where(sd > 0, sd, 1.0), 0.0)
        norm = np.sqrt(np.square(x).sum(axis=over, keepdims=True))
        return np.where(norm > 0, x / np.where(norm > 0, norm, 1.0), 0.0)


@attrs.define(kw_only=True)
class AveragePose(_PoseAnonymizer):
    """Average pose: every frame becomes the sequence's mean pose (all motion removed, body shape kept)."""

    id: ClassVar[str] = "gait.average_pose"

    def _apply(self, x, table, rows, plan):
        return np.broadcast_to(x.mean(axis=1, keepdims=True), x.shape)


@attrs.define(kw_only=True)
class FirstPose(_PoseAnonymizer):
    """First pose: every frame becomes the sequence's first pose."""

    id: ClassVar[str] = "gait.first_pose"
    layout: ClassVar[str] = "float32"  # a copy

    def _apply(self, x, table, rows, plan):
        return np.broadcast_to(x[:, :1], x.shape)


# --------------------------------------------------------------------------------------------------- chain


def _split_top_level(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside brackets, braces and quotes."""
    out: list[str] = []
    cur: list[str] = []
    depth, quote = 0, None
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _value(text: str) -> Any:
    """A step parameter value: JSON when it parses, else the bare (or single-quoted) word."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        if len(text) >= 2 and text[0] == text[-1] == "'":
            return text[1:-1]
        return text


def parse_step(text: str) -> tuple[str, dict[str, Any]]:
    """Parse one chain step: ``"id"``, ``"id:name=value,name=value"`` (values are JSON when they parse, e.g.
    ``parts=["left_leg","right_leg"]`` or ``scale=3``; bare words are strings) or a JSON object
    ``{"id": ..., "params": {...}}``. A step id without a trait prefix gets ``gait.``."""
    text = text.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise ParameterError("gait.chain", "steps", text, f"a JSON object {{id, params}} ({e})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            raise ParameterError("gait.chain", "steps", text, "a JSON step with an 'id' string")
        params = obj.get("params", {})
        if not isinstance(params, dict):
            raise ParameterError("gait.chain", "steps", text, "a JSON step whose 'params' is an object")
        method_id = obj["id"]
    else:
        method_id, _, rest = text.partition(":")
        params = {}
        if rest.strip():
            for item in _split_top_level(rest, ","):
                name, eq, value = item.partition("=")
                if not eq or not name.strip():
                    raise ParameterError("gait.chain", "steps", text, f"'id:name=value,…'; got {item.strip()!r}")
                params[name.strip()] = _value(value)
    method_id = method_id.strip()
    if not method_id:
        raise ParameterError("gait.chain", "steps", text, "a step with a method id")
    if "." not in method_id:
        method_id = "gait." + method_id
    return method_id, params


def _local_anonymizers() -> dict[str, type]:
    """This module's anonymizers by id (found without the registry, which may still be being built)."""
    return {c.id: c for c in globals().values() if isinstance(c, type) and issubclass(c, _PoseAnonymizer) and c.id}


def _steps_syntax_ok(steps: tuple) -> bool:
    """Validator of ``steps``: a non-empty list of parseable steps (ids are checked when building)."""
    try:
        return len(steps) > 0 and all(isinstance(s, str) and parse_step(s) for s in steps)
    except (ValueError, TypeError):
        return False


def chain_steps(steps: Sequence[str], seed: int = 0) -> tuple[dict[str, Any], ...]:
    """``gait.chain``'s ``steps`` strings as ``any.chain`` steps: each ``{"id", "params"}``; a step with a
    ``seed`` parameter that it does not set gets ``seed + its position`` (as ``gait.chain`` did)."""
    out = []
    for i, text in enumerate(steps):
        method_id, params = parse_step(text)
        cls: type[Method] | None
        try:
            cls = GaitChain.step_class(method_id)
        except Exception:  # noqa: BLE001 - an unknown id is reported by any.chain, naming steps[i]
            cls = None
        if cls is not None and "seed" in {f.name for f in cls.param_fields()} and "seed" not in params:
            params["seed"] = seed + i
        out.append({"id": method_id, "params": params})
    return tuple(out)


@attrs.define(kw_only=True)
class GaitChain(Chain):
    """Deprecated alias of ``any.chain`` that keeps ``gait.chain`` configs working (SEBA's chain).

    ``steps`` is the old list of strings: ``"gait.coarsen_time:factor=4"``,
    ``'gait.keep_parts:parts=["left_leg","right_leg"]'``, ``"noise:scale=0.5,noise=laplace"`` (an id
    without prefix means ``gait.<id>``; values are JSON, bare words strings), or JSON objects
    ``'{"id": "gait.noise", "params": {"scale": 0.5}}'``; they are converted to ``any.chain`` steps
    (:func:`chain_steps`) and the chain runs as ``any.chain`` does. Every step must read ``pose`` data. A step
    with a ``seed`` parameter that the step does not set gets ``seed + its position``. Constructing one emits a
    DeprecationWarning (shown once): write ``any.chain`` with ``steps = [{id = ..., params = {...}}, ...]``."""

    id: ClassVar[str] = "gait.chain"
    trait: ClassVar[str] = "gait"
    payloads: ClassVar[tuple[str, ...]] = ("pose",)
    example_params: ClassVar[dict[str, Any]] = {}

    steps: tuple[str, ...] = param(
        ("gait.coarsen_time:factor=4", "gait.noise:scale=0.5"),  # type: ignore[assignment]
        help="the steps, each 'id:name=value,…' or a JSON object {id, params}",
        check=_steps_syntax_ok,
        check_text='a non-empty list of \'id:name=value,…\' or JSON {"id", "params"}',
    )
    seed: int = param(0, help="base seed of the steps that take a seed and do not set it")

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        warn_deprecated(
            'gait.chain is deprecated: use any.chain with steps = [{id = "...", params = {...}}, ...] '
            "(bioanon_gait.anonymizers.chain_steps converts the old steps)"
        )

    @classmethod
    def local_step_classes(cls) -> dict[str, type]:
        return {**super().local_step_classes(), **_local_anonymizers()}

    def step_specs(self) -> list[tuple[str, dict[str, Any]]]:
        return [(s["id"], s["params"]) for s in chain_steps(self.steps, self.seed)]

    def build_steps(self) -> list[Anonymizer]:
        out = super().build_steps()
        for i, m in enumerate(out):
            if not ({"pose", "*"} & set(m.payloads)):
                raise ParameterError(self.id, f"steps[{i}]", self.steps[i], f"{m.id} is not an anonymizer of pose data")
        return out

    def as_any_chain(self) -> Chain:
        """The equivalent ``any.chain``."""
        return Chain(steps=chain_steps(self.steps, self.seed))


# --------------------------------------------------------------------------------------------------- random-set mean


@attrs.define(kw_only=True)
class GaitRandomSetMean(RandomSetMean):
    """Random-set mean on gait poses: ``any.random_set_mean`` restricted to the ``pose`` payload."""

    id: ClassVar[str] = "gait.random_set_mean"
    trait: ClassVar[str] = "gait"
    payloads: ClassVar[tuple[str, ...]] = ("pose",)

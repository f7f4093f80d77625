"""Image anonymizations against per-image loops: blur, pixelation, noise, block permutation, pixel relocation,
DP Pix, DP Snow, k-RTIO, and the neighbour interpolation that reverses DP Snow.

    python -m benchmarks.images [--images 2000 --size 112 --python-images 4 --repeats 3] [--quick] [--json out.json]

Issue 10: on 2,000 face images of 112×112×3 (``face.synthetic``), every method — ``bioanon.get_method(id)``
with the paper's parameters (``fantomas.txt`` Table IV, the methods' defaults), table in → table out — must be

* at least as fast as **(a)** a per-image loop doing the same operation with OpenCV/numpy (target ≥ 1×), and
* for the per-pixel methods (SEBA's k-RTIO, DP Pix, pixel relocation and neighbour interpolation loop over
  pixels in Python) at least 20× **(b)** a pure-Python per-pixel loop. (b) is timed on the first
  ``--python-images`` images and extrapolated linearly to all of them (every image costs the same); work a
  loop does once per batch (pixel relocation's key-derived map) is timed once and added.

Every reference is checked against the method's own output before it is timed (all images for (a), the timed
subset for (b); the random ones draw from the same generator in the same order, so they are the same
operation, not merely a similar one). The implementations are timed interleaved, ``--repeats`` rounds, best
of each; the ratio is reference time / method time (> 1: the method is faster). Peak extra resident memory of
each (VmHWM reset before the call) is reported beside the times. Methods not installed (k-RTIO and neighbour
interpolation are optional) are skipped with a note.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.common import emit, figure, print_figures, run_cases, side_by_side

TARGET_LOOP = 1.0
TARGET_PYTHON = 20.0
FULL = {"images": 2000, "size": 112, "python_images": 4, "repeats": 3}
QUICK = {"images": 12, "size": 64, "python_images": 1, "repeats": 1}


# --------------------------------------------------------------------------------------------------- references
# Each (a) reference is ``fn(method, table, x) -> out`` over all images ``x`` (N, H, W, C) uint8, one image at
# a time; each (b) reference is ``fn(method, table, x) -> out`` on the subset it is given, one pixel at a time.


def _u8(v: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(v), 0, 255).astype(np.uint8)


def blur_loop(m, table, x):
    import cv2

    out = np.empty_like(x)
    for i, img in enumerate(x):
        out[i] = cv2.GaussianBlur(img, (m.kernel, m.kernel), m.sigma, borderType=cv2.BORDER_REFLECT_101)
    return out


def pixelation_loop(m, table, x):
    """OpenCV area resize down to size×size (each output pixel the mean of its cell) and nearest back up."""
    import cv2

    h, w = x.shape[1:3]
    out = np.empty_like(x)
    for i, img in enumerate(x):
        small = cv2.resize(img, (m.size, m.size), interpolation=cv2.INTER_AREA)
        out[i] = cv2.resize(small, (w, h), interpolation=cv2.INTER_NEAREST)
    return out


def noise_loop(m, table, x):
    from bioanon.payloads import table_rng

    rng = table_rng(table, m.seed)
    sigma = np.float32(m.sigma)
    out = np.empty_like(x)
    for i, img in enumerate(x):
        out[i] = _u8(img.astype(np.float32) + rng.standard_normal(img.shape, dtype=np.float32) * sigma)
    return out


def block_permutation_loop(m, table, x):
    _, h, w, c = x.shape
    b = m.block_size
    nh, nw = h // b, w // b
    perm = m.permutation(nh * nw)
    out = x.copy()
    for i, img in enumerate(x):
        blocks = img[: nh * b, : nw * b].reshape(nh, b, nw, b, c).swapaxes(1, 2).reshape(nh * nw, b, b, c)[perm]
        out[i, : nh * b, : nw * b] = blocks.reshape(nh, nw, b, b, c).swapaxes(1, 2).reshape(nh * b, nw * b, c)
    return out


def relocation_loop(m, table, x):
    """The key's map once (as the method computes it), then one numpy gather per image."""
    _, h, w, c = x.shape
    idx = m.index_map(h, w)
    out = np.empty_like(x)
    for i, img in enumerate(x):
        out[i] = img.reshape(h * w, c)[idx].reshape(h, w, c)
    return out


def relocation_map_python(h: int, w: int, steps: int, max_shift: int, key: int) -> list[int]:
    """The relocation map pixel by pixel: ``steps`` rounds of keyed cyclic row then column shifts."""
    rng = np.random.default_rng(key)
    idx = [[r * w + c for c in range(w)] for r in range(h)]
    for _ in range(steps):
        sr = rng.integers(-max_shift, max_shift + 1, size=h).tolist()
        idx = [[idx[r][(c - sr[r]) % w] for c in range(w)] for r in range(h)]
        sc = rng.integers(-max_shift, max_shift + 1, size=w).tolist()
        idx = [[idx[(r - sc[c]) % h][c] for c in range(w)] for r in range(h)]
    return [v for row in idx for v in row]


def relocation_python(m, table, x, flat_map=None):
    _, h, w, c = x.shape
    flat_map = flat_map if flat_map is not None else relocation_map_python(h, w, m.steps, m.max_shift, m.key)
    out = np.empty_like(x)
    for i, img in enumerate(x):
        src = img.reshape(h * w, c).tolist()
        out[i] = np.array([src[j] for j in flat_map], dtype=x.dtype).reshape(h, w, c)
    return out


def _dp_pix_edges(m, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    return np.append(np.arange(0, h, m.b), h), np.append(np.arange(0, w, m.b), w)


def dp_pix_loop(m, table, x):
    from bioanon.payloads import table_rng

    h, w = x.shape[1:3]
    re_, ce = _dp_pix_edges(m, h, w)
    area = (np.diff(re_)[:, None] * np.diff(ce)[None, :])[:, :, None]
    scale = 255.0 * m.m / (m.b * m.b * m.epsilon)
    rng = table_rng(table, m.seed)
    out = np.empty_like(x)
    for i, img in enumerate(x):
        cells = np.add.reduceat(np.add.reduceat(img.astype(np.float64), re_[:-1], axis=0), ce[:-1], axis=1) / area
        cells += rng.laplace(0.0, scale, cells.shape)
        out[i] = _u8(np.repeat(np.repeat(cells, np.diff(re_), axis=0), np.diff(ce), axis=1))
    return out


def dp_pix_python(m, table, x):
    """Block by block, pixel by pixel: the block sum, the noisy mean, written back to every pixel."""
    from bioanon.payloads import table_rng

    _, h, w, c = x.shape
    scale = 255.0 * m.m / (m.b * m.b * m.epsilon)
    rng = table_rng(table, m.seed)
    out = np.empty_like(x)
    for i, img in enumerate(x):
        px = img.tolist()
        res = [[[0] * c for _ in range(w)] for _ in range(h)]
        for r0 in range(0, h, m.b):
            r1 = min(r0 + m.b, h)
            for c0 in range(0, w, m.b):
                c1 = min(c0 + m.b, w)
                area = (r1 - r0) * (c1 - c0)
                for ch in range(c):
                    s = 0
                    for r in range(r0, r1):
                        row = px[r]
                        for cc in range(c0, c1):
                            s += row[cc][ch]
                    v = min(255, max(0, round(s / area + rng.laplace(0.0, scale))))
                    for r in range(r0, r1):
                        row = res[r]
                        for cc in range(c0, c1):
                            row[cc][ch] = v
        out[i] = np.array(res, dtype=x.dtype)
    return out


def dp_snow_loop(m, table, x):
    from bioanon.payloads import table_rng

    _, h, w, c = x.shape
    k = round(m.d * h * w)
    rng = table_rng(table, m.seed)
    out = x.copy()
    for i in range(len(x)):
        if k:
            keys = rng.random(h * w)
            chosen = np.argpartition(keys, k - 1)[:k] if k < h * w else np.arange(h * w)
            out[i].reshape(h * w, c)[chosen] = m.grey
    return out


def neighbour_loop(m, table, x):
    """Normalized convolution per image: OpenCV 3×3 sums over the known neighbours, in rounds."""
    import cv2

    kernel = np.ones((3, 3), np.float32)
    kernel[1, 1] = 0.0
    out = np.empty(x.shape, np.float32)
    for i, img in enumerate(x):
        im = img.astype(np.float32)
        missing = np.all(im == np.float32(m.value_), axis=-1)
        for _ in range(m.max_rounds):
            if not missing.any():
                break
            known = (~missing).astype(np.float32)
            num = cv2.filter2D(im * known[..., None], -1, kernel, borderType=cv2.BORDER_CONSTANT)
            den = cv2.filter2D(known, -1, kernel, borderType=cv2.BORDER_CONSTANT)
            fill = missing & (den > 0)
            im[fill] = num[fill] / den[fill][:, None]
            missing &= ~fill
        out[i] = im
    return _u8(out)


def neighbour_python(m, table, x):
    """Pixel by pixel: every snow pixel gets the mean of its known 8 neighbours, in rounds."""
    _, h, w, c = x.shape
    value = m.value_
    out = np.empty_like(x)
    for i, img in enumerate(x):
        px = [[[float(v) for v in p] for p in row] for row in img.tolist()]
        missing = [[all(v == value for v in p) for p in row] for row in px]
        for _ in range(m.max_rounds):
            fills = []
            for r in range(h):
                for cc in range(w):
                    if not missing[r][cc]:
                        continue
                    s, k = [0.0] * c, 0
                    for rr in (r - 1, r, r + 1):
                        if 0 <= rr < h:
                            for c2 in (cc - 1, cc, cc + 1):
                                if 0 <= c2 < w and not missing[rr][c2] and (rr != r or c2 != cc):
                                    k += 1
                                    p = px[rr][c2]
                                    for ch in range(c):
                                        s[ch] += p[ch]
                    if k:
                        fills.append((r, cc, [v / k for v in s]))
            if not fills:
                break
            for r, cc, v in fills:
                px[r][cc] = v
                missing[r][cc] = False
        out[i] = _u8(np.array(px))
    return out


# --------------------------------------------------------------------------------------------------- cases


@dataclass
class Case:
    """One method: its id and parameters, the per-image reference (a), the pure-Python reference (b, per-pixel
    methods) and the largest difference (grey levels) allowed between a reference and the method."""

    method_id: str
    loop: Callable | None
    loop_how: str
    python: Callable | None = None
    python_how: str = ""
    params: dict[str, Any] | None = None
    tolerance: int = 0
    prepare: Callable | None = None  # (method, table) -> the table to transform, after fitting the method
    python_once: Callable | None = None  # work (b) does once per batch: returns a keyword for ``python``


def snow_and_fit(m, table):
    """DP Snow the images; fit the reversal on 200 (clear, snowed) pairs; return the snowed table."""
    import bioanon

    anon = bioanon.get_method("face.dp_snow").transform(table)
    pairs = np.arange(min(200, table.num_rows))
    m.fit(table.take(pairs), anon.take(pairs))
    return anon


def overlays_fit(m, table):
    """Fit k-RTIO's overlay set: 100 other synthetic faces (another seed) of the images' size."""
    m.fit(make_images(100, table.payload("image").shape[1], seed=1))
    return table


def _block_grid(h: int, w: int, b: int) -> tuple[int, int]:
    return h // b, w // b


def _k_rtio_plans(m, table, x):
    """(h, w, c, b, nh, nw, overlays) and, per image, (index, image, overlay choice, block permutations) from
    the method's keyed plan, as both k-RTIO references use them."""
    _, h, w, c = x.shape
    b = m.block_size
    nh, nw = _block_grid(h, w, b)
    ov = m.overlays_
    ids = table.sample_ids
    plans = ((i, img, *m.plan(ids[i : i + 1], len(ov), nh * nw)) for i, img in enumerate(x))
    return (h, w, c, b, nh, nw, ov), plans


def k_rtio_loop(m, table, x):
    """Per image: its overlays and block permutations from the keyed PRF, then per overlay a numpy block
    permutation (reshape, index, reshape back), the mean, the α-mix."""
    (h, w, c, b, nh, nw, ov), plans = _k_rtio_plans(m, table, x)
    out = np.empty_like(x)
    for i, img, choice, perms in plans:
        acc = np.zeros((h, w, c))
        for j in range(m.k):
            o = ov[choice[0, j]].astype(np.float64)
            if nh * nw > 1:
                blocks = o[: nh * b, : nw * b].reshape(nh, b, nw, b, c).swapaxes(1, 2).reshape(nh * nw, b, b, c)
                o[: nh * b, : nw * b] = (
                    blocks[perms[0, j]].reshape(nh, nw, b, b, c).swapaxes(1, 2).reshape(nh * b, nw * b, c)
                )
            acc += o
        out[i] = _u8(m.alpha * img.astype(np.float64) + (1.0 - m.alpha) * (acc / m.k))
    return out


def k_rtio_python(m, table, x):
    """Per image (overlays and permutations from the keyed PRF), pixel by pixel: the source pixel of every
    overlay through its block permutation, the sum over the overlays, the α-mix."""
    (h, w, c, b, nh, nw, ov), plans = _k_rtio_plans(m, table, x)
    out = np.empty_like(x)
    for i, img, choice, perms in plans:
        layers = [ov[choice[0, j]].tolist() for j in range(m.k)]
        perm = [perms[0, j].tolist() for j in range(m.k)]
        px = img.tolist()
        res = [[[0] * c for _ in range(w)] for _ in range(h)]
        for r in range(h):
            for cc in range(w):
                inside = nh * nw > 1 and r < nh * b and cc < nw * b
                if inside:
                    blk = (r // b) * nw + cc // b
                srcs = []
                for j in range(m.k):
                    if inside:
                        s = perm[j][blk]
                        srcs.append(layers[j][(s // nw) * b + r % b][(s % nw) * b + cc % b])
                    else:
                        srcs.append(layers[j][r][cc])
                for ch in range(c):
                    acc = 0.0
                    for p in srcs:
                        acc += p[ch]
                    res[r][cc][ch] = min(255, max(0, round(m.alpha * px[r][cc][ch] + (1.0 - m.alpha) * (acc / m.k))))
        out[i] = np.array(res, dtype=x.dtype)
    return out


def k_rtio_case() -> Case:
    """k-RTIO with ``false-sense-of-privacy.txt`` §5.6.1's parameters (α 0.4, block size 18, k 3)."""
    return Case(
        "face.k_rtio",
        k_rtio_loop,
        "per image: keyed plan, numpy block permutation of its k overlays, α-mix",
        python=k_rtio_python,
        python_how="per pixel: its source pixel in each of the k permuted overlays, sum and α-mix in Python",
        params={"alpha": 0.4, "block_size": 18, "k": 3},
        tolerance=1,
        prepare=overlays_fit,
    )


CASES = [
    Case(
        "face.gaussian_blur", blur_loop, "cv2.GaussianBlur per image (same kernel, σ, reflect-101 border)", tolerance=0
    ),
    Case(
        "face.pixelation",
        pixelation_loop,
        "cv2.resize INTER_AREA to size×size, INTER_NEAREST back, per image",
        tolerance=1,
    ),
    Case(
        "face.gaussian_noise",
        noise_loop,
        "numpy per image: float32 normal draws from the same generator, rint, clip",
        tolerance=0,
    ),
    Case(
        "face.block_permutation",
        block_permutation_loop,
        "numpy per image: reshape into blocks, permute, back",
        tolerance=0,
    ),
    Case(
        "face.pixel_relocation",
        relocation_loop,
        "the key's map once, then a numpy gather per image",
        python=relocation_python,
        python_how="map by per-pixel cyclic shifts in Python lists (once per batch), then a per-pixel gather per image",
        tolerance=0,
        python_once=lambda m, h, w: {"flat_map": relocation_map_python(h, w, m.steps, m.max_shift, m.key)},
    ),
    Case(
        "face.dp_pix",
        dp_pix_loop,
        "numpy per image: reduceat block means, Laplace draws, repeat",
        python=dp_pix_python,
        python_how="per block and channel: Python sum over its pixels, noisy mean written back pixel by pixel",
        tolerance=1,
    ),
    Case("face.dp_snow", dp_snow_loop, "numpy per image: uniform keys, argpartition, assign grey", tolerance=0),
    k_rtio_case(),
    Case(
        "face.neighbour_interpolation",
        neighbour_loop,
        "cv2.filter2D 3×3 neighbour sums per image, in rounds",
        python=neighbour_python,
        python_how="per snow pixel: mean of its known 8 neighbours in Python, in rounds",
        tolerance=1,
        prepare=lambda m, table: snow_and_fit(m, table),
    ),
]


# --------------------------------------------------------------------------------------------------- run


def make_images(n: int, size: int, seed: int = 0):
    """``n`` synthetic faces of size×size×3 (``face.synthetic``: 10 images per subject)."""
    import bioanon

    per = 10 if n >= 20 else 2
    subjects = max(2, -(-n // per))
    table = bioanon.load_dataset(
        "face.synthetic", n_subjects=subjects, samples_per_subject=per, size=(size, size), seed=seed
    )
    return table.take(np.arange(n)) if table.num_rows > n else table


def _max_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()) if a.size else 0


def _check(case: Case, which: str, got: np.ndarray, want: np.ndarray) -> int:
    diff = _max_diff(got, want)
    if got.shape != want.shape or diff > case.tolerance:
        raise AssertionError(
            f"{case.method_id}: the {which} reference differs from the method by {diff} grey "
            f"levels (allowed {case.tolerance}); the ratio would not compare like with like"
        )
    return diff


def bench_case(case: Case, table, *, python_images: int, repeats: int) -> tuple[list[dict[str, Any]], dict]:
    import bioanon

    params = dict(case.params or {})
    m = bioanon.get_method(case.method_id, **params)
    if case.prepare is not None:
        table = case.prepare(m, table)
    x = table.payload("image")
    n = len(x)
    ours = m.transform(table).payload("image")
    info: dict[str, Any] = {"method": case.method_id, "images": n, "shape": list(x.shape[1:])}
    info["loop_max_diff"] = _check(case, "per-image loop", case.loop(m, table, x), ours)
    times = side_by_side({"method": lambda: m.transform(table), "loop": lambda: case.loop(m, table, x)}, repeats)
    t_m, t_l = times["method"]["seconds"], times["loop"]["seconds"]
    figs = [
        figure(
            f"images: {case.method_id} vs per-image loop",
            value=t_l / t_m,
            unit="×",
            target=f">= {TARGET_LOOP:g}",
            passed=t_l / t_m >= TARGET_LOOP,
            images=n,
            method_s=round(t_m, 4),
            loop_s=round(t_l, 4),
            method_peak_mib=times["method"]["peak_mib"],
            loop_peak_mib=times["loop"]["peak_mib"],
            reference=case.loop_how,
            max_diff=info["loop_max_diff"],
        )
    ]
    info.update(
        method_seconds=t_m,
        method_seconds_all=times["method"]["all"],
        loop_seconds=t_l,
        loop_seconds_all=times["loop"]["all"],
        method_peak_mib=times["method"]["peak_mib"],
        loop_peak_mib=times["loop"]["peak_mib"],
        loop_reference=case.loop_how,
    )
    if case.python is not None:
        k = max(1, min(python_images, n))
        sub = x[:k]
        t0 = time.perf_counter()
        extra = case.python_once(m, *x.shape[1:3]) if case.python_once else {}
        t_once = time.perf_counter() - t0
        t0 = time.perf_counter()
        py = case.python(m, table, sub, **extra)
        t_sub = time.perf_counter() - t0
        info["python_max_diff"] = _check(case, "pure-Python", py, ours[:k])
        t_py = t_once + t_sub * n / k
        figs.append(
            figure(
                f"images: {case.method_id} vs pure-Python per-pixel loop",
                value=t_py / t_m,
                unit="×",
                target=f">= {TARGET_PYTHON:g}",
                passed=t_py / t_m >= TARGET_PYTHON,
                images=n,
                method_s=round(t_m, 4),
                python_s_extrapolated=round(t_py, 2),
                python_images_timed=k,
                python_s_subsample=round(t_sub, 3),
                python_once_s=round(t_once, 3),
                reference=case.python_how + f"; timed on {k} image(s), extrapolated to {n}",
                max_diff=info["python_max_diff"],
            )
        )
        info.update(
            python_seconds_extrapolated=t_py,
            python_images_timed=k,
            python_seconds_subsample=t_sub,
            python_once_seconds=t_once,
            python_reference=case.python_how,
        )
    return figs, info


def run(
    quick: bool = False,
    *,
    images: int | None = None,
    size: int | None = None,
    python_images: int | None = None,
    repeats: int | None = None,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Every case on ``images`` synthetic faces (``quick``: tiny sizes, for the smoke test)."""
    cfg = dict(QUICK if quick else FULL)
    cfg.update(
        {
            k: v
            for k, v in (("images", images), ("size", size), ("python_images", python_images), ("repeats", repeats))
            if v is not None
        }
    )
    t0 = time.perf_counter()
    table = make_images(cfg["images"], cfg["size"])
    t_data = time.perf_counter() - t0
    figures, details, notes = run_cases(
        "images",
        CASES,
        lambda case: bench_case(case, table, python_images=cfg["python_images"], repeats=cfg["repeats"]),
        only,
    )
    return {
        "benchmark": "images",
        "quick": quick,
        **cfg,
        "data_seconds": round(t_data, 2),
        "notes": notes,
        "cases": details,
        "figures": figures,
        "targets_met": all(f["passed"] for f in figures),
    }


def _print(res: dict[str, Any]) -> None:
    print_figures(
        f"images benchmark: {res['images']} images of {res['size']}×{res['size']}×3, best of {res['repeats']}",
        res["figures"],
        res["quick"],
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.images", description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, help=f"images (default {FULL['images']}; quick {QUICK['images']})")
    ap.add_argument("--size", type=int, help=f"image side in pixels (default {FULL['size']})")
    ap.add_argument("--python-images", type=int, help="images the pure-Python loops are timed on (default 4)")
    ap.add_argument("--repeats", type=int, help="interleaved timing rounds (default 3)")
    ap.add_argument("--only", nargs="*", help="method ids to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args(argv)
    res = run(a.quick, images=a.images, size=a.size, python_images=a.python_images, repeats=a.repeats, only=a.only)
    return emit(res, _print, a.json)


if __name__ == "__main__":
    raise SystemExit(main())

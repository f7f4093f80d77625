"""``face.synthetic``: seeded procedural faces, vectorized over the batch with numpy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from bioanon.api import DatasetSource, param

from .imageio import check_size

if TYPE_CHECKING:  # imported in load(): bioanon.table imports pyarrow, too slow for start-up
    from bioanon.api import SampleTable


@attrs.define(kw_only=True)
class SyntheticFaces(DatasetSource):
    """Seeded procedural faces: an elliptical face with eyes, brows, nose and mouth on a background.

    Per subject: face width/height, eye spacing and height, brow thickness, nose length, mouth width, skin tone
    and hair colour (the identity). Per sample: a small shift, brightness change and pixel noise, and two
    attributes — ``expression`` (``neutral``/``smile``: the mouth's curvature) and ``glasses`` (bool: dark rings
    around the eyes). Subject attribute ``skin`` (``light``/``dark``). Small defaults so ``bioanon demo
    --trait face`` is quick."""

    id: ClassVar[str] = "face.synthetic"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("expression", "glasses", "skin")
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    needs_path: ClassVar[bool] = False
    demo: ClassVar[dict[str, Any] | None] = {
        # `bioanon demo --trait face`: this plugin's own methods, none needing torch or dlib
        "anonymizers": [
            {"id": "face.pixelation", "grid": {"size": [8, 4, 2]}},
            {"id": "face.gaussian_blur", "name": "blur", "grid": {"kernel": [3, 7, 15]}},
        ],
        # face.lbph is weak on these small noisy images: eigenfaces with a linear and an RBF kernel
        "recognizers": [
            {"id": "face.eigenfaces"},
            {"id": "face.eigenfaces", "name": "eigenfaces-rbf", "params": {"kernel": "rbf"}},
        ],
        "utility": [{"id": "face.attribute_accuracy", "params": {"attribute": "expression"}}, {"id": "face.ssim"}],
    }

    n_subjects: int = param(60, help="number of subjects", low=2)
    samples_per_subject: int = param(10, help="images per subject", low=1)
    size: tuple[int, int] = param(
        (32, 32), help="(height, width) of the images", check=check_size, check_text="two positive integers"
    )
    channels: int = param(3, help="1 (grey) or 3 (RGB)", choices=(1, 3))
    glasses_rate: float = param(0.3, help="share of images with glasses", low=0.0, high=1.0)
    noise: float = param(6.0, help="pixel noise standard deviation (grey levels)", low=0.0)
    seed: int = param(0, help="random seed")

    def load(self, path=None) -> SampleTable:
        rng = np.random.default_rng(self.seed)
        S, K = self.n_subjects, self.samples_per_subject
        n = S * K
        h, w = self.size if self.size != (0, 0) else (32, 32)
        subj = np.repeat(np.arange(S), K)
        # subject geometry (fractions of the image) and colours
        g = {
            "fw": rng.uniform(0.30, 0.42, S),
            "fh": rng.uniform(0.38, 0.48, S),
            "ey": rng.uniform(0.36, 0.46, S),
            "ex": rng.uniform(0.12, 0.20, S),
            "er": rng.uniform(0.035, 0.06, S),
            "bt": rng.uniform(0.015, 0.04, S),
            "nl": rng.uniform(0.08, 0.16, S),
            "mw": rng.uniform(0.10, 0.20, S),
            "my": rng.uniform(0.68, 0.76, S),
        }
        skin_dark = rng.random(S) < 0.5
        skin = np.where(
            skin_dark[:, None],
            rng.uniform([90, 60, 40], [140, 100, 80], (S, 3)),
            rng.uniform([200, 160, 130], [240, 200, 180], (S, 3)),
        )
        hair = rng.uniform(10, 120, (S, 3))
        bg = rng.uniform(150, 220, (S, 3))
        # per-sample variation
        smile = rng.random(n) < 0.5
        glasses = rng.random(n) < self.glasses_rate
        dx, dy = rng.normal(0, 0.02, n), rng.normal(0, 0.02, n)
        bright = rng.normal(1.0, 0.05, n)

        yy = (np.arange(h) + 0.5)[None, :, None] / h - dy[:, None, None]  # (n, h, 1)
        xx = (np.arange(w) + 0.5)[None, None, :] / w - dx[:, None, None]  # (n, 1, w)
        G = {k: v[subj][:, None, None] for k, v in g.items()}
        cx, cy = 0.5, 0.52
        face = ((xx - cx) / G["fw"]) ** 2 + ((yy - cy) / G["fh"]) ** 2 <= 1.0
        hair_m = (((xx - cx) / (G["fw"] * 1.1)) ** 2 + ((yy - cy + 0.06) / (G["fh"] * 1.05)) ** 2 <= 1.0) & (
            yy < cy - G["fh"] * 0.55
        ) | (face & (yy < cy - G["fh"] * 0.75))
        eye_l = (xx - (cx - G["ex"])) ** 2 + (yy - G["ey"]) ** 2 <= G["er"] ** 2
        eye_r = (xx - (cx + G["ex"])) ** 2 + (yy - G["ey"]) ** 2 <= G["er"] ** 2
        eyes = eye_l | eye_r
        ring_l = np.abs(np.sqrt((xx - (cx - G["ex"])) ** 2 + (yy - G["ey"]) ** 2) - G["er"] * 1.9) < 0.018
        ring_r = np.abs(np.sqrt((xx - (cx + G["ex"])) ** 2 + (yy - G["ey"]) ** 2) - G["er"] * 1.9) < 0.018
        bridge = (np.abs(yy - G["ey"]) < 0.012) & (np.abs(xx - cx) < G["ex"] - G["er"] * 1.9)
        glass_m = (ring_l | ring_r | bridge) & glasses[:, None, None]
        brows = (np.abs(yy - (G["ey"] - G["er"] - 0.04)) < G["bt"]) & (
            np.abs(np.abs(xx - cx) - G["ex"]) < G["er"] * 1.6
        )
        nose = (np.abs(xx - cx) < 0.02) & (yy > G["ey"]) & (yy < G["ey"] + G["nl"] + 0.08)
        curve = np.where(smile, -0.9, 0.0)[:, None, None] * ((xx - cx) / G["mw"]) ** 2 * 0.06
        mouth = (np.abs(xx - cx) < G["mw"]) & (np.abs(yy - (G["my"] - curve)) < 0.022)

        img = np.broadcast_to(bg[subj][:, None, None, :], (n, h, w, 3)).astype(np.float32).copy()
        for mask, colour in (
            (face, skin[subj]),
            (hair_m, hair[subj]),
            (brows & face, hair[subj] * 0.8),
            (nose & face, skin[subj] * 0.75),
            (mouth & face, np.tile([[150.0, 40.0, 50.0]], (n, 1))),
            (eyes & face, np.tile([[30.0, 25.0, 20.0]], (n, 1))),
            (glass_m, np.tile([[15.0, 15.0, 15.0]], (n, 1))),
        ):
            img = np.where(mask[..., None], colour[:, None, None, :].astype(np.float32), img)
        img = img * bright[:, None, None, None].astype(np.float32)
        img += rng.normal(0.0, self.noise, img.shape).astype(np.float32)
        if self.channels == 1:
            img = img @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
            img = img[..., None]
        x = np.clip(np.rint(img), 0, 255).astype(np.uint8)
        names = np.array([f"p{i:03d}" for i in range(S)])
        from bioanon.api import SampleTable

        return SampleTable.from_arrays(
            sample_id=np.array([f"p{s:03d}_{k}" for s in range(S) for k in range(K)]),
            subject=names[subj],
            payloads={"image": x},
            attributes={
                "expression": np.where(smile, "smile", "neutral"),
                "glasses": glasses,
                "skin": np.where(skin_dark, "dark", "light")[subj],
            },
            metadata={"trait": "face", "source": self.id, "image_size": [h, w], "channels": int(x.shape[3])},
        )

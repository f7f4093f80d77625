"""Built-in dataset sources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from ..methods import DatasetSource, param

if TYPE_CHECKING:
    from ..table import SampleTable


@attrs.define(kw_only=True)
class SyntheticFeatures(DatasetSource):
    """Seeded synthetic feature vectors: subjects as clusters, with attributes.

    Each sample is ``identity[subject] + attribute effects + noise`` in separate blocks of dimensions:
    identity (``identity_dims``), a per-subject binary ``attr.group`` and a per-sample categorical
    ``attr.activity`` (``n_activities`` values), so anonymizations that keep an attribute while hiding identity
    can be measured. Columns: ``features`` (float32, D), ``attr.group``, ``attr.activity``, ``attr.age``."""

    id: ClassVar[str] = "any.synthetic"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    attribute_names: ClassVar[tuple[str, ...] | None] = ("group", "activity", "age")
    needs_path: ClassVar[bool] = False

    n_subjects: int = param(30, help="number of subjects", low=2)
    samples_per_subject: int = param(12, help="samples per subject", low=1)
    dim: int = param(32, help="feature dimension D", low=4)
    identity_dims: float = param(0.5, help="share of dimensions that carry identity", low=0.0, high=1.0)
    identity_scale: float = param(1.0, help="spread of subject centres (signal strength)", low=0.0)
    attribute_scale: float = param(1.5, help="strength of the attribute effects", low=0.0)
    noise: float = param(0.5, help="per-sample noise standard deviation", low=0.0)
    noise_heterogeneity: float = param(
        0.0, help="spread of per-subject noise levels: each subject's noise is scaled by exp(N(0, h))", low=0.0
    )
    n_activities: int = param(3, help="number of values of attr.activity", low=2)
    seed: int = param(0, help="random seed")

    def load(self, path: Any = None) -> SampleTable:
        from ..table import SampleTable

        rng = np.random.default_rng(self.seed)
        S, K, D = self.n_subjects, self.samples_per_subject, self.dim
        d_id = max(1, int(round(self.identity_dims * D)))
        d_attr = max(1, (D - d_id) // 2)
        subject = np.repeat(np.arange(S), K)
        group = rng.integers(0, 2, size=S)
        activity = rng.integers(0, self.n_activities, size=S * K)
        centres = np.zeros((S, D), np.float32)
        centres[:, :d_id] = rng.standard_normal((S, d_id)) * self.identity_scale
        group_effect = rng.standard_normal((2, D)).astype(np.float32)
        group_effect[:, :d_id] = 0
        group_effect[:, d_id + d_attr :] = 0
        activity_effect = rng.standard_normal((self.n_activities, D)).astype(np.float32)
        activity_effect[:, : d_id + d_attr] = 0
        # in blocks of rows, into reused buffers (the same values as whole-array expressions; the noise is drawn
        # in the same order), so that a large set needs no float64 or temporary copies of its size. The identity,
        # group and activity effects live in disjoint columns: each block of columns is one gather.
        n_rows = S * K
        x = np.empty((n_rows, D), np.float32)
        rows = max(1, 2**22 // max(D, 1))
        a = np.float32(self.attribute_scale)
        g0, a0 = d_id, d_id + d_attr  # first group and first activity column
        for start in range(0, n_rows, rows):
            stop = min(start + rows, n_rows)
            i = subject[start:stop]
            x[start:stop, :g0] = centres[i, :g0]
            x[start:stop, g0:a0] = group_effect[group[i], g0:a0] * a
            x[start:stop, a0:] = activity_effect[activity[start:stop], a0:] * a
        level = np.full(S, self.noise)
        if self.noise_heterogeneity:
            level *= np.exp(rng.standard_normal(S) * self.noise_heterogeneity)
        scale = level.astype(np.float32)
        draw = np.empty((min(rows, n_rows), D))
        noise = np.empty((min(rows, n_rows), D), np.float32)
        for start in range(0, n_rows, rows):
            n = min(rows, n_rows - start)
            rng.standard_normal(out=draw[:n])
            noise[:n] = draw[:n]  # rounded to float32, as the draw's astype did
            noise[:n] *= scale[subject[start : start + n], None]
            x[start : start + n] += noise[:n]
        width = len(str(S - 1))
        subjects = np.array([f"s{i:0{width}d}" for i in range(S)])[subject]
        return SampleTable.from_arrays(
            subject=subjects,
            payloads={"features": x},
            attributes={
                "group": np.array(["a", "b"])[group[subject]],
                "activity": activity.astype(np.int64),
                "age": (20 + 3 * group[subject] + rng.integers(0, 40, size=S)[subject]).astype(np.int64),
            },
            metadata={"trait": "any", "source": self.id, "params": self.get_params()},
        )

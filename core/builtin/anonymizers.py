"""Trait-agnostic anonymizers that work on any fixed-shape payload."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from ..methods import Anonymizer, param
from ..payloads import restore_dtype


@attrs.define(kw_only=True)
class Identity(Anonymizer):
    """No anonymization: returns the table unchanged (the clear reference in a sweep)."""

    id: ClassVar[str] = "any.identity"
    payloads: ClassVar[tuple[str, ...]] = ("*",)

    def transform(self, table):
        return table


@attrs.define(kw_only=True)
class GaussianNoise(Anonymizer):
    """Add zero-mean Gaussian noise to every value of a payload.

    ``sigma`` is in units of the payload's own standard deviation over the table when ``relative`` is true
    (the default), else in payload units. Integer payloads (e.g. uint8 images) are rounded and clipped to
    their dtype's range."""

    id: ClassVar[str] = "any.gaussian_noise"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")

    sigma: float = param(0.5, help="noise standard deviation", low=0.0)
    relative: bool = param(True, help="sigma is relative to the payload's standard deviation")
    payload: str = param("", help="payload column to anonymize (default: the first supported one present)")
    seed: int = param(0, help="random seed")

    def transform(self, table):
        column = self.payload_column(table, self.payload or None)
        x = table.payload(column)
        scale = self.sigma * (float(np.std(x, dtype=np.float64)) if self.relative else 1.0)
        rng = np.random.default_rng(self.seed)
        noisy = x.astype(np.float32, copy=True)
        noisy += rng.standard_normal(x.shape, dtype=np.float32) * np.float32(scale)
        return table.with_payload(column, restore_dtype(noisy, x.dtype))

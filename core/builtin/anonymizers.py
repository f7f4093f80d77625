"""Trait-agnostic anonymizers that work on any fixed-shape payload."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from ..methods import Anonymizer, param
from ..payloads import restore_dtype, table_rng


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
        rng = table_rng(table, self.seed)  # independent noise for every table, reproducible per table
        noisy = x.astype(np.float32, copy=True)
        noisy += rng.standard_normal(x.shape, dtype=np.float32) * np.float32(scale)
        return table.with_payload(column, restore_dtype(noisy, x.dtype))


@attrs.define(kw_only=True)
class BlockPermutation(Anonymizer):
    """Keyed permutation of blocks of the flattened payload (a deterministic, invertible scrambling).

    The flattened values are cut into consecutive blocks of ``block_size`` values; the blocks are permuted
    with a permutation drawn from ``key`` (the same for every sample), and with ``shuffle_within`` the values
    inside each block are permuted too. Every sample is scrambled identically, so an attacker who trains or
    enrols on scrambled data (parrot) recognizes as well as on clear data, while a naive attacker fails — the
    paper's H1 in its purest form (``false-sense-of-privacy.txt``; face block permutation in ``fantomas.txt``).
    A trailing partial block stays in place."""

    id: ClassVar[str] = "any.block_permutation"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")

    block_size: int = param(1, help="values per block", low=1)
    shuffle_within: bool = param(False, help="also permute the values inside each block")
    key: int = param(0, help="permutation key (the secret)")
    payload: str = param("", help="payload column to anonymize (default: the first supported one present)")

    def permutation(self, n_values: int) -> np.ndarray:
        """The index permutation applied to ``n_values`` flattened values."""
        rng = np.random.default_rng(self.key)
        n_blocks = n_values // self.block_size
        blocks = rng.permutation(n_blocks)
        inner = rng.permutation(self.block_size) if self.shuffle_within else np.arange(self.block_size)
        idx = (blocks[:, None] * self.block_size + inner[None, :]).ravel()
        return np.concatenate([idx, np.arange(n_blocks * self.block_size, n_values)])

    def transform(self, table):
        column = self.payload_column(table, self.payload or None)
        x = table.payload(column)
        flat = x.reshape(len(x), -1)
        out = flat[:, self.permutation(flat.shape[1])].reshape(x.shape)
        return table.with_payload(column, out)

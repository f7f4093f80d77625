"""Face anonymizations in an eigenface (PCA) space: k-Same-Eigen and the random-set mean on eigen-coefficients.

Both fit PCA eigenfaces on the anonymization background set (identities used nowhere else, the Fantômas paper
§6.1.5) and return images (uint8, rounded and clipped) reconstructed from averaged coefficients.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import RandomSetMean, TableError, fitted, param, restore_dtype

from .anonymizers import (
    _FaceAnonymizer,
    _images,
    nearest_identities,
    pca_basis,
)


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1).astype(np.float32)


@attrs.define(kw_only=True)
class KSameEigen(_FaceAnonymizer):
    """k-Same-Eigen (variant of the Fantômas paper §6.1.5): every image becomes the eigenface reconstruction of the
    mean PCA coefficients of itself and its ``k`` − 1 nearest background images (Table IV: k 10).

    As ``face.k_same_pixel`` but averaged in the PCA space: PCA (``n_components`` eigenfaces) is fitted on the
    background of ``fit(background)`` (without one, the table itself, never matching an image's own subject);
    the neighbours are the nearest images in that space, at most one per background identity. The anonymized
    image is the inverse transform of the mean coefficients (the Fantômas paper: "the inverse transform of the
    average of the images' PCA representations"). ``include_self=False`` averages the ``k`` nearest background
    identities without the image itself, as Newton et al.'s original k-Same-Eigen, which replaces a face by the
    mean of k faces of the set."""

    id: ClassVar[str] = "face.k_same_eigen"
    reference: ClassVar[str] = "k-same; fantomas §6.1.5, Table IV"
    needs_fit: ClassVar[bool] = True
    example_params: ClassVar[dict[str, Any]] = {"k": 3, "n_components": 10}

    k: int = param(10, help="faces averaged (the image itself and k − 1 background identities)", low=1)
    n_components: int = param(50, help="eigenfaces (PCA components) of the averaging space", low=1)
    include_self: bool = param(
        True,
        help="average the image with its k − 1 nearest background identities "
        "(the Fantômas paper); False: the k nearest background identities only (Newton et al.)",
    )

    mean_: np.ndarray | None = fitted()
    basis_: np.ndarray | None = fitted()
    coefficients_: np.ndarray | None = fitted()
    subjects_: np.ndarray | None = fitted()

    def fit(self, background):
        _, x = _images(self, background)
        flat = _flat(x)
        self.mean_, self.basis_ = pca_basis(flat, self.n_components)
        self.coefficients_ = (flat - self.mean_) @ self.basis_
        self.subjects_ = np.asarray(background.subjects)
        return self

    def project(self, x: np.ndarray) -> np.ndarray:
        """PCA coefficients (n, K) of images (n, H, W, C)."""
        flat = _flat(x)
        n_values = cast(np.ndarray, self.mean_).shape[0]
        if flat.shape[1] != n_values:
            raise TableError(
                f"{self.id}: images of shape {x.shape[1:]} do not match the background's ({n_values} values per image)"
            )
        return (flat - self.mean_) @ self.basis_

    def reconstruct(self, z: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Images (float) of the given per-image ``shape`` from coefficients ``z`` (n, K)."""
        return (self.mean_ + z @ cast(np.ndarray, self.basis_).T).reshape(len(z), *shape)

    def transform(self, table):
        if self.mean_ is None:
            self.fit(table)
        column, x = _images(self, table)
        zt = self.project(x)
        others = self.k - 1 if self.include_self else self.k
        picks, valid = nearest_identities(zt, self.coefficients_, np.asarray(table.subjects), self.subjects_, others)
        total = (self.coefficients_[np.where(valid, picks, 0)] * valid[..., None]).sum(axis=1)
        count = valid.sum(axis=1)
        if self.include_self:
            total, count = total + zt, count + 1
        elif (count == 0).any():
            raise TableError(
                f"{self.id}: the background has no identity other than the subject of sample "
                f"{table.sample_ids[np.flatnonzero(count == 0)[0]]!r} (include_self=False needs one)"
            )
        out = self.reconstruct(total / count[:, None], x.shape[1:])
        return table.with_payload(column, restore_dtype(out, x.dtype))


@attrs.define(kw_only=True)
class FaceRandomSetMeanEigen(RandomSetMean):
    """Random-set mean on eigenface coefficients: ``any.random_set_mean`` applied to the PCA coefficients of
    the images, reconstructed to images (uint8, rounded and clipped).

    The eigenfaces (``n_components``) are fitted on the background of ``fit(background)`` (without one, on
    the table being transformed); Algorithm 1 of the utility-preserving anonymization paper then runs on the
    coefficients exactly as ``any.random_set_mean`` (same parameters) on a ``features`` payload: relevance,
    selected features and sets are those of the coefficients. The results are mapped back through the
    eigenfaces."""

    id: ClassVar[str] = "face.random_set_mean_eigen"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "utility-preserving Algorithm 1 (on eigenfaces)"

    n_components: int = param(50, help="eigenfaces (PCA components) the mean is taken on", low=1)

    mean_: np.ndarray | None = fitted()
    basis_: np.ndarray | None = fitted()
    engine_: Any = fitted()

    def _engine(self) -> Any:
        """``any.random_set_mean`` with this method's parameters, on the ``features`` payload."""
        names = [f.name for f in RandomSetMean.param_fields() if f.name != "payload"]
        return RandomSetMean(**{name: getattr(self, name) for name in names}, payload="features")

    def coefficients(self, table: Any) -> tuple[str, np.ndarray, Any]:
        """(column, images, the table with their PCA coefficients (n, K) float32 as payload ``features``)."""
        column, x = _images(self, table)
        flat = _flat(x)
        n_values = cast(np.ndarray, self.mean_).shape[0]
        if flat.shape[1] != n_values:
            raise TableError(
                f"{self.id}: images of shape {x.shape[1:]} do not match the eigenfaces' ({n_values} values per image)"
            )
        z = ((flat - self.mean_) @ self.basis_).astype(np.float32)
        return column, x, table.with_payload("features", z)

    def fit(self, background):
        self.mean_ = self.basis_ = self.engine_ = None
        self.selected_, self.relevance_scores_ = None, None
        if background is None:
            return self
        _, x = _images(self, background)
        self.mean_, self.basis_ = pca_basis(_flat(x), self.n_components)
        self.engine_ = self._engine().fit(self.coefficients(background)[2])
        self.selected_, self.relevance_scores_ = self.engine_.selected_, self.engine_.relevance_scores_
        return self

    def transform(self, table):
        if self.mean_ is None:
            _, x = _images(self, table)
            self.mean_, self.basis_ = pca_basis(_flat(x), self.n_components)
        engine = self.engine_ if self.engine_ is not None else self._engine()
        column, x, coeffs = self.coefficients(table)
        z = engine.transform(coeffs).payload("features").astype(np.float64)
        out = (self.mean_ + z @ self.basis_.T).reshape(x.shape)
        return table.with_payload(column, restore_dtype(out, x.dtype))

"""The built-in plugin: the core's trait-agnostic methods, registered through the same hooks as any plugin."""

from __future__ import annotations

from ..hookspecs import hookimpl


@hookimpl
def register_anonymizers(register):
    from .anonymizers import GaussianNoise, Identity

    register(Identity)
    register(GaussianNoise)


@hookimpl
def register_recognizers(register):
    from .recognizers import CosineNearestCentroid

    register(CosineNearestCentroid)


@hookimpl
def register_datasets(register):
    from .datasets import SyntheticFeatures

    register(SyntheticFeatures)

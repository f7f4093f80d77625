"""Registers the plugin's methods. Keep this module light: import heavy libraries inside methods."""

from __future__ import annotations

from bioanon.api import hookimpl

BIOANON_API = ">=1.1,<2"  # 1.1: require_fitted (NotFittedError)
"""The bioanon.api versions this plugin works with (PEP 440): from the minor version whose names it uses, up to
the next major version. Outside this range bioanon does not load the plugin and `bioanon plugins` lists it as
incompatible."""


@hookimpl
def register_anonymizers(register):
    from .anonymizers import Quantize

    register(Quantize)


@hookimpl
def register_recognizers(register):
    from .recognizers import NearestNeighbour

    register(NearestNeighbour)

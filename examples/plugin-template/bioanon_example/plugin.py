"""Registers the plugin's methods. Keep this module light: import heavy libraries inside methods."""

from __future__ import annotations

from bioanon.api import hookimpl


@hookimpl
def register_anonymizers(register):
    from .methods import Quantize

    register(Quantize)


@hookimpl
def register_recognizers(register):
    from .methods import NearestNeighbour

    register(NearestNeighbour)

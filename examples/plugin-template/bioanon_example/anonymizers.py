"""The plugin's anonymizers: ordinary attrs classes deriving from bioanon's ``Anonymizer``."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from bioanon.api import Anonymizer, param


@attrs.define(kw_only=True)
class Quantize(Anonymizer):
    """Round every feature to a grid of width ``step`` (coarsening).

    A small step keeps the data almost unchanged; a step larger than the spread of the data maps every sample
    to the same point and removes all information."""

    id: ClassVar[str] = "example.quantize"
    trait: ClassVar[str] = "example"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    # each sample rounded on its own (API 1.9): an evaluation anonymizes each data set once, in shards
    per_sample: ClassVar[bool] = True

    step: float = param(0.5, help="grid width in feature units", low=0.0, low_inclusive=False)

    def transform(self, table):
        x = table.payload("features")
        return table.with_payload("features", (np.round(x / self.step) * self.step).astype(np.float32))

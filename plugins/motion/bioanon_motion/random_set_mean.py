"""``motion.random_set_mean``: the core random-set selective weighted mean with the paper's MotionSense settings.

A subclass of the core engine (``bioanon.builtin.random_set_mean``, id ``any.random_set_mean``) with this
trait's payload and the paper's defaults.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from bioanon.api import RandomSetMean

__all__ = ["MotionRandomSetMean"]


@attrs.define(kw_only=True)
class MotionRandomSetMean(RandomSetMean):
    """Random-set selective weighted mean of IMU windows (Algorithm 1 of the utility-preserving paper).

    Every window (flattened to its time × channel values) becomes the weighted mean of a random set of
    ``set_size`` windows of the table, ``purity`` of them sharing its value of ``attribute`` (e.g. activity or
    walking speed); on the ``retention`` share of values most relevant to that attribute (random-forest
    importance) the window itself weighs ``weight``. Defaults are the paper's MotionSense setting:
    t = 0.9, g = 32, r_p = 10 %, w = 100, attribute ``activity`` (§5.1.5). ``any.random_set_mean`` documents
    every parameter."""

    id: ClassVar[str] = "motion.random_set_mean"
    trait: ClassVar[str] = "motion"
    payloads: ClassVar[tuple[str, ...]] = ("imu",)
    reference: ClassVar[str] = "utility-preserving Algorithm 1, §5.1.5 (MotionSense)"
    example_params: ClassVar[dict[str, Any]] = {"attribute": "activity", "set_size": 4, "purity": 0.5}

    attribute: str = RandomSetMean.default_for("attribute", "activity")
    set_size: int = RandomSetMean.default_for("set_size", 32)
    purity: float | Literal["population"] = RandomSetMean.default_for("purity", 0.9)
    weight: float = RandomSetMean.default_for("weight", 100.0)
    retention: float = RandomSetMean.default_for("retention", 0.1)

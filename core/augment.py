"""Augmented copies of the attacker's clear images (flips, small shifts) for a de-anonymizer's training pairs.

An attacker who knows the anonymization can make more (clear, anonymized) pairs than its data set holds: it
flips and shifts its clear images, then anonymizes the copies with the same anonymizer
(``[deanonymizer] augment``, docs/evaluation.md). A copy's sample id is its source's id followed by
:data:`AUGMENT_SEP` and the augmentation (``<id>#flip``, ``<id>#shift+2+0``: ``dy``, ``dx`` in pixels), its
subject is the source's; :func:`augmented_source` reads the source back, so a de-anonymizer holds a source out
together with its copies (:func:`bioanon.builtin.deanonymizers.held_out_pairs`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .errors import DataError
from .table import SampleTable

AUGMENT_SEP = "#"
"""Separates a copy's source sample id from its augmentation in the copy's sample id."""

AUGMENTABLE_PAYLOADS = ("image",)
"""The payloads whose samples are H×W×C pictures (of the well-known payloads of
:data:`bioanon.table_schema.PAYLOAD_SPECS`): flips and shifts keep them meaningful."""

_SUFFIX = re.compile(re.escape(AUGMENT_SEP) + r"(?:flip|shift[+-]\d+[+-]\d+)$")


def augmentations(flip: bool, shift: int) -> list[tuple[str, bool, int, int]]:
    """The copies made of each image: (suffix, flipped, dy, dx) — one horizontal flip when ``flip``, and the
    four shifts by ``shift`` pixels up, down, left and right when ``shift`` > 0 (not combined with the flip)."""
    out: list[tuple[str, bool, int, int]] = [("flip", True, 0, 0)] if flip else []
    if shift > 0:
        out += [
            (f"shift{dy:+d}{dx:+d}", False, dy, dx) for dy, dx in ((shift, 0), (-shift, 0), (0, shift), (0, -shift))
        ]
    return out


def shifted(images: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """N×H×W×C ``images`` moved ``dy`` pixels down and ``dx`` right (negative: up, left), the uncovered border
    filled by repeating the edge pixels (the whole batch at once)."""
    h, w = images.shape[1:3]
    padded = np.pad(images, ((0, 0), (max(dy, 0), max(-dy, 0)), (max(dx, 0), max(-dx, 0)), (0, 0)), mode="edge")
    top, left = max(-dy, 0), max(-dx, 0)
    return np.ascontiguousarray(padded[:, top : top + h, left : left + w])


def augment_table(table: SampleTable, column: str, flip: bool, shift: int) -> SampleTable:
    """The augmented copies of ``table``'s samples (:func:`augmentations`, in that order, each over every
    sample): payload ``column`` (N×H×W×C) flipped or shifted, sample ids ``<id>#<augmentation>``, subjects,
    attributes and other columns kept. An empty table when there is nothing to make.

    Raises
    ------
    DataError : ``column`` is not a fixed-shape N×H×W×C payload, or the shift is a quarter of the image or more.
    """
    import pyarrow as pa

    shape = table.payload_shape(column)
    if len(shape) != 3 or None in shape:
        raise DataError(
            f"[deanonymizer] augment: payload {column!r} has samples of shape {shape}; flips and shifts need "
            f"fixed-size H×W×C images (remove augment for this data)"
        )
    h, w = int(shape[0] or 0), int(shape[1] or 0)
    if 4 * shift >= min(h, w):
        raise DataError(
            f"[deanonymizer] augment.shift = {shift}: the images of payload {column!r} are {h}×{w}; a shift must "
            f"be less than a quarter of the image ({(min(h, w) - 1) // 4} at most)"
        )
    kinds = augmentations(flip, shift)
    if not kinds or not len(table):
        return table.filter(np.zeros(len(table), dtype=bool))
    images = np.asarray(table.payload(column))
    ids = table.sample_ids.astype(str)
    copies: list[SampleTable] = []
    for suffix, flipped, dy, dx in kinds:  # a handful of whole-batch operations
        moved = np.flip(images, axis=2) if flipped else shifted(images, dy, dx)
        new_ids = np.char.add(ids, AUGMENT_SEP + suffix)
        index = table.arrow.schema.get_field_index("sample_id")
        field = table.arrow.schema.field(index)
        arrow = table.arrow.set_column(index, field, pa.array(new_ids.tolist(), field.type))
        copies.append(SampleTable(arrow, validate=False).with_payload(column, moved))
    return SampleTable.concat(copies)


def augmented_source(ids: Any) -> np.ndarray:
    """The source sample id of each id (its own for an id that is no augmented copy)."""
    arr = np.asarray(ids).astype(str)
    return np.array([_SUFFIX.sub("", s) for s in arr.tolist()], dtype=object) if len(arr) else arr.astype(object)


def is_augmented(ids: Any) -> np.ndarray:
    """Whether each sample id names an augmented copy."""
    arr = np.asarray(ids).astype(str)
    return np.array([_SUFFIX.search(s) is not None for s in arr.tolist()], dtype=bool)

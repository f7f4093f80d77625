"""Gait paths that work in blocks of sequences (to avoid a second copy of the whole data set) give exactly what
the whole-set computation gives."""

from __future__ import annotations

import numpy as np
import pytest

from bioanon.api import TableError
from bioanon_gait import features as feat
from bioanon_gait import skeleton


def test_resample_ragged_in_blocks_equals_one_sequence_at_a_time(monkeypatch):
    monkeypatch.setattr(skeleton, "_RESAMPLE_BLOCK", 3)
    rng = np.random.default_rng(0)
    seqs = [rng.normal(size=(t, 4, 3)) * 100 for t in [20] * 8 + [33] * 5 + [20, 7]]
    out = skeleton.resample_ragged(seqs, 25)
    assert out.shape == (len(seqs), 25, 4, 3) and out.dtype == np.float32
    for s, o in zip(seqs, out, strict=True):
        np.testing.assert_array_equal(o, skeleton.resample(s[None], 25)[0])


def test_resample_stream_reads_one_block_at_a_time_and_equals_resample_ragged(monkeypatch):
    monkeypatch.setattr(skeleton, "_RESAMPLE_BLOCK", 3)
    rng = np.random.default_rng(2)
    seqs = [rng.normal(size=(t, 4, 3)) * 100 for t in [20, 33, 20, 7, 20, 33, 12]]
    held = []

    def read():
        for i, s in enumerate(seqs):
            held.append(i)
            yield s

    out, lengths = skeleton.resample_stream(read(), len(seqs), 25)
    np.testing.assert_array_equal(out, skeleton.resample_ragged(seqs, 25))
    assert lengths.tolist() == [len(s) for s in seqs] and held == list(range(len(seqs)))
    with pytest.raises(TableError, match="3 sequences, 4 announced"):
        skeleton.resample_stream(iter(seqs[:3]), 4, 25)


def test_flatten_features_in_blocks_equal_the_whole_set(monkeypatch):
    monkeypatch.setattr(feat, "_BLOCK_BYTES", 4 * 9 * 5 * 3 * 8)  # 4 sequences a block
    x = (np.random.default_rng(1).normal(size=(11, 9, 5, 3)) * 300 + 1000).astype(np.float32)
    for centering in ("frame", "sequence", "none"):
        whole = np.asarray(x, np.float64)
        whole = whole - (
            whole.mean(axis=2, keepdims=True)
            if centering == "frame"
            else whole.mean(axis=(1, 2), keepdims=True)
            if centering == "sequence"
            else 0.0
        )
        got = feat.GaitFeatures(kind="flatten", centering=centering).fit(x).transform(x)
        np.testing.assert_array_equal(got, whole.reshape(len(x), -1).astype(np.float32))

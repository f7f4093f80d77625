"""Property tests of SampleTable.split_subjects / split_within_subjects.

The expected part sizes are computed independently with exact rational arithmetic (rates are generated as
integer weights over their sum), following the documented largest-remainder (Hamilton) rule.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bioanon.errors import TableError
from bioanon.table import SampleTable

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def hamilton(weights: list[int], count: int) -> list[int]:
    """Largest-remainder sizes for rates weights/sum(weights), exactly; ties -> lower index."""
    total = sum(weights)
    q = [Fraction(w * count, total) for w in weights]
    n = [math.floor(x) for x in q]
    left = count - sum(n)
    order = sorted(range(len(weights)), key=lambda i: (-(q[i] - n[i]), i))
    for i in order[:left]:
        n[i] += 1
    return n


def rates_of(weights: list[int]) -> list[float]:
    total = sum(weights)
    return [w / total for w in weights]


def build(counts: list[int], order_seed: int) -> SampleTable:
    """A table with subject j having counts[j] samples, rows in a random order."""
    subjects = np.repeat([f"subj{j:03d}" for j in range(len(counts))], counts)
    ids = np.array([f"id{i:05d}" for i in range(subjects.size)])
    perm = np.random.default_rng(order_seed).permutation(subjects.size)
    return SampleTable.from_arrays(
        subject=subjects[perm],
        sample_id=ids[perm],
        payloads={"features": np.arange(subjects.size, dtype=np.float32)[perm, None]},
    )


weights_st = st.lists(st.integers(1, 10), min_size=1, max_size=5)
counts_st = st.lists(st.integers(1, 5), min_size=1, max_size=60)


def id_positions(t: SampleTable) -> dict[str, int]:
    return {sid: i for i, sid in enumerate(t.sample_ids)}


@SETTINGS
@given(weights=weights_st, counts=counts_st, seed=st.integers(0, 2**32 - 1), order_seed=st.integers(0, 1000))
def test_split_subjects_properties(weights, counts, seed, order_seed):
    t = build(counts, order_seed)
    s = len(counts)
    expected = hamilton(weights, s)
    if min(expected) == 0:
        empty = expected.index(0)
        with pytest.raises(TableError, match=f"over {s} subjects leave part {empty} empty"):
            t.split_subjects(rates_of(weights), seed)
        return
    parts = t.split_subjects(rates_of(weights), seed)
    assert len(parts) == len(weights)
    # part subject counts follow the rule exactly
    assert [p.num_subjects for p in parts] == expected
    # subjects never leak across parts
    seen: set[str] = set()
    for p in parts:
        names = set(p.subject_names)
        assert not names & seen
        seen |= names
    # every sample lands in exactly one part, with all of its subject's samples
    all_ids = [sid for p in parts for sid in p.sample_ids]
    assert sorted(all_ids) == sorted(t.sample_ids)
    per_subject = Counter(t.subjects)
    for p in parts:
        assert Counter(p.subjects) == {name: per_subject[name] for name in p.subject_names}
    # rows keep their relative order; payload rows travel with their ids
    pos = id_positions(t)
    feats = t.payload("features")
    for p in parts:
        idx = [pos[sid] for sid in p.sample_ids]
        assert idx == sorted(idx)
        np.testing.assert_array_equal(p.payload("features"), feats[idx])
        assert p.metadata == t.metadata


@SETTINGS
@given(weights=weights_st, counts=counts_st, seed=st.integers(0, 2**32 - 1), order_seed=st.integers(0, 1000))
def test_split_subjects_deterministic_and_row_order_independent(weights, counts, seed, order_seed):
    assume(min(hamilton(weights, len(counts))) > 0)
    rates = rates_of(weights)
    a = build(counts, order_seed)
    b = build(counts, order_seed + 1)  # same samples, other row order
    pa_, pa2, pb = a.split_subjects(rates, seed), a.split_subjects(rates, seed), b.split_subjects(rates, seed)
    for x, y, z in zip(pa_, pa2, pb, strict=True):
        assert x.arrow.equals(y.arrow)
        assert x.subject_names == z.subject_names
        assert sorted(x.sample_ids) == sorted(z.sample_ids)


def _log_multinomial(sizes: list[int]) -> float:
    return math.lgamma(sum(sizes) + 1) - sum(math.lgamma(n + 1) for n in sizes)


@SETTINGS
@given(
    weights=st.lists(st.integers(1, 10), min_size=2, max_size=4),
    n_subjects=st.integers(20, 80),
    seeds=st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2, unique=True),
)
def test_split_subjects_different_seeds_differ(weights, n_subjects, seeds):
    sizes = hamilton(weights, n_subjects)
    assume(min(sizes) > 0 and _log_multinomial(sizes) > math.log(1e9))  # a collision is negligible
    t = build([1] * n_subjects, 0)
    a = t.split_subjects(rates_of(weights), seeds[0])
    b = t.split_subjects(rates_of(weights), seeds[1])
    assert [p.subject_names for p in a] != [p.subject_names for p in b]


@SETTINGS
@given(
    weights=weights_st,
    counts=st.lists(st.integers(1, 12), min_size=1, max_size=25),
    seed=st.integers(0, 2**32 - 1),
    order_seed=st.integers(0, 1000),
)
def test_split_within_subjects_properties(weights, counts, seed, order_seed):
    t = build(counts, order_seed)
    rates = rates_of(weights)
    names = [f"subj{j:03d}" for j in range(len(counts))]
    expected = {name: hamilton(weights, c) for name, c in zip(names, counts, strict=True)}
    parts = t.split_within_subjects(rates, seed, min_per_part=0)
    assert len(parts) == len(weights)
    # sample counts per subject per part follow the rule exactly
    for i, p in enumerate(parts):
        got = Counter(p.subjects)
        assert {name: got.get(name, 0) for name in names} == {name: expected[name][i] for name in names}
    # every sample in exactly one part, relative order kept
    assert sorted(sid for p in parts for sid in p.sample_ids) == sorted(t.sample_ids)
    pos = id_positions(t)
    for p in parts:
        idx = [pos[sid] for sid in p.sample_ids]
        assert idx == sorted(idx)
    # with min_per_part=1: every subject in every part when counts allow, else an error naming subjects
    too_few = [name for name in names if min(expected[name]) < 1]
    if too_few:
        with pytest.raises(
            TableError,
            match=f"{len(too_few)} subjects have too few samples: '{too_few[0]}' "
            f"\\({counts[names.index(too_few[0])]} samples\\)",
        ):
            t.split_within_subjects(rates, seed)
    else:
        strict = t.split_within_subjects(rates, seed)
        for p, q in zip(strict, parts, strict=True):
            assert p.subject_names == names
            assert p.arrow.equals(q.arrow)


@SETTINGS
@given(
    weights=weights_st,
    counts=st.lists(st.integers(1, 12), min_size=1, max_size=25),
    seed=st.integers(0, 2**32 - 1),
    order_seed=st.integers(0, 1000),
)
def test_split_within_subjects_deterministic_and_row_order_independent(weights, counts, seed, order_seed):
    rates = rates_of(weights)
    a = build(counts, order_seed)
    b = build(counts, order_seed + 1)
    pa_ = a.split_within_subjects(rates, seed, min_per_part=0)
    pa2 = a.split_within_subjects(rates, seed, min_per_part=0)
    pb = b.split_within_subjects(rates, seed, min_per_part=0)
    for x, y, z in zip(pa_, pa2, pb, strict=True):
        assert x.arrow.equals(y.arrow)
        assert sorted(x.sample_ids) == sorted(z.sample_ids)


@SETTINGS
@given(
    counts=st.lists(st.integers(6, 12), min_size=20, max_size=30),
    seeds=st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2, unique=True),
)
def test_split_within_subjects_different_seeds_differ(counts, seeds):
    t = build(counts, 0)
    a = t.split_within_subjects([0.5, 0.5], seeds[0])
    b = t.split_within_subjects([0.5, 0.5], seeds[1])
    assert sorted(a[0].sample_ids) != sorted(b[0].sample_ids)


def test_split_rule_examples():
    """Hand-checked examples of the documented rounding (ties go to the lower part index)."""
    t = build([1] * 10, 0)
    assert [p.num_subjects for p in t.split_subjects([0.7, 0.2, 0.1], 0)] == [7, 2, 1]
    assert [p.num_subjects for p in t.split_subjects([0.25, 0.25, 0.25, 0.25], 0)] == [3, 3, 2, 2]
    assert [p.num_subjects for p in t.split_subjects([0.34, 0.33, 0.33], 0)] == [4, 3, 3]
    assert [p.num_subjects for p in t.split_subjects([0.15, 0.85], 0)] == [2, 8]  # 1.5/8.5: tie -> part 0
    u = build([3, 5, 7], 0)
    sizes = [Counter(p.subjects) for p in u.split_within_subjects([0.5, 0.5], 1)]
    assert [s["subj000"] for s in sizes] == [2, 1] and [s["subj002"] for s in sizes] == [4, 3]

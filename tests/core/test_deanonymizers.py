"""Learned inversion de-anonymizers."""

from __future__ import annotations

import numpy as np

import bioanon
from bioanon.builtin.deanonymizers import RidgeInversion


def _top1(table_gallery, table_probes):
    rec = bioanon.get_method("any.cosine_centroid").fit(table_gallery)
    return float(np.mean(rec.enroll(table_gallery).score(table_probes).predict() == table_probes.subjects))


def test_ridge_inversion_restores_a_fixed_permutation():
    data = bioanon.load_dataset("any.synthetic", n_subjects=40, samples_per_subject=10, dim=24, seed=2)
    attacker, evaluation = data.split_subjects([0.5, 0.5], seed=0)
    perm = bioanon.get_method("any.block_permutation", block_size=2, shuffle_within=True, key=9)
    anon_attacker, anon_eval = perm.transform(attacker), perm.transform(evaluation)
    inv = RidgeInversion(alpha=1e-6).fit(attacker, anon_attacker)
    restored = inv.transform(anon_eval)
    err = np.abs(restored.payload("features") - evaluation.payload("features")).max()
    assert err < 1e-3, err
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=1)
    ids = set(probes.sample_ids)
    mask = np.array([s in ids for s in restored.sample_ids])
    clear = _top1(gallery, probes)
    naive = _top1(gallery, anon_eval.filter(mask))
    deanon = _top1(gallery, restored.filter(mask))
    assert naive < 0.3 and deanon >= clear - 0.02, (naive, deanon, clear)


def test_pairs_are_matched_by_sample_id():
    data = bioanon.load_dataset("any.synthetic", n_subjects=10, samples_per_subject=6, dim=8)
    anon = bioanon.get_method("any.block_permutation", key=3).transform(data)
    shuffled = anon.take(np.random.default_rng(0).permutation(len(anon)))
    a = RidgeInversion().fit(data, anon).transform(anon).payload("features")
    b = RidgeInversion().fit(data, shuffled).transform(anon).payload("features")
    assert np.allclose(a, b, atol=1e-4)

"""fantomas.txt E1.1/E2.2/E1.2 on real ORL faces, with eigenfaces (PCA + SVM, enrolled on clear images) as the
attacker and the de-anonymizers trained on a disjoint attacker set of subjects:

- block permutation (fixed key): the Fantômas model restores near clear-level identification, its convolution-only
  ablation does not (the linear layer is what inverts global permutations); the learned permutation is exact;
- k-Same-Pixel: identification after Fantômas stays far below clear level.

Deviations from the paper's training, to stay within about a minute per model on two CPU cores: the ``fast``
preset's training (16 features, learning rate 1e-3 with 5 epochs of warm-up — paper 1e-4 —, batch 16 — paper 64
—, at most 60 epochs — paper 200 —; early stopping and the plateau schedule as in the paper), at 48×40 (the preset
works at 64×64; the paper at 224×224). With the paper's 1e-4 and batch 64, 60 epochs left the
model far from converged (measured 0.23 top-1 on block permutation). Run with ``-s`` to see the measurements.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import bioanon
from bioanon_face.fantomas import Fantomas, FantomasConv

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

SIZE = (48, 40)
# one torch thread: on a shared 2-core machine two OpenMP threads slowed training up to 7x (busy-waiting)
TRAIN = dict(features=16, resolution=SIZE, epochs=60, lr=1e-3, batch_size=16, seed=0, threads=1)
_CACHE: dict = {}


@pytest.fixture
def orl(shared_data):
    if "orl" not in _CACHE:
        _CACHE["orl"] = bioanon.load_dataset("face.orl", str(shared_data / "att_faces"), size=list(SIZE))
    return _CACHE["orl"]


def _top1(gallery, probes) -> float:
    rec = bioanon.get_method("face.eigenfaces").fit(gallery)
    rec.enroll(gallery)
    return float(np.mean(rec.score(probes).predict() == probes.subjects))


def _fit(cls, clear, anonymized):
    t = time.perf_counter()
    m = cls(**TRAIN).fit(clear, anonymized)
    return m, time.perf_counter() - t


@pytest.mark.parametrize("repeat", [0, 1])
def test_fantomas_reverses_block_permutation_in_every_repeat_and_conv_only_does_not(orl, repeat):
    """The ``fast`` preset's training (60 epochs, rate 1e-3 with 5 epochs of warm-up, batch 16; here at 48×40)
    on two repeats — other subjects, permutation key and seed each: Fantômas restores near clear-level
    identification every time (≥ 0.8 of clear), the convolution-only ablation never does and is flagged as a
    model that did not learn (no better than the anonymized input or the mean face on its held-out pairs)."""
    from bioanon.evaluation.tasks import learning_check

    attacker, evaluation = orl.split_subjects([0.6, 0.4], seed=repeat)  # 24 / 16 subjects
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=1 + repeat)
    perm = bioanon.get_method("face.block_permutation", block_size=8, key=1 + repeat)
    anon_attacker, anon_probes = perm.transform(attacker), perm.transform(probes)
    chance = 1 / evaluation.num_subjects
    clear = _top1(gallery, probes)
    naive = _top1(gallery, anon_probes)

    exact = bioanon.get_method("face.learned_permutation").fit(attacker, anon_attacker).transform(anon_probes)
    assert np.array_equal(exact.payload("image"), probes.payload("image"))

    fast = dict(preset="fast", resolution=SIZE, seed=repeat, threads=1)
    t = time.perf_counter()
    fantomas = Fantomas(**fast).fit(attacker, anon_attacker)
    t_lin = time.perf_counter() - t
    conv = FantomasConv(**fast, restarts=0).fit(attacker, anon_attacker)  # (it cannot learn: no restarts)
    with_linear = _top1(gallery, fantomas.transform(anon_probes))
    conv_only = _top1(gallery, conv.transform(anon_probes))
    print(
        f"repeat {repeat}, block permutation: chance {chance:.3f} clear {clear:.3f} naive {naive:.3f} fantomas "
        f"{with_linear:.3f} ({t_lin:.0f}s, {len(fantomas.history_)} epochs, seed {fantomas.seed_used_}) conv-only "
        f"{conv_only:.3f}"
    )
    assert clear > 0.9
    assert naive < 0.4
    assert with_linear >= 0.8 * clear, (with_linear, clear)  # E1.1: near clear level, in every repeat
    assert conv_only < 0.4 and conv_only < with_linear - 0.4, (conv_only, with_linear)  # E2.2
    # the learning check, on errors with margins (not on its verdict): Fantômas far below the trivial answers,
    # conv-only no better than them
    good, flat = learning_check(fantomas, attacker, anon_attacker), learning_check(conv, attacker, anon_attacker)
    print(f"learning check: fantomas {good}, conv-only {flat}")
    assert good["error"] < 0.5 * min(good["identity_error"], good["mean_error"]), good
    assert flat["error"] > 0.8 * min(flat["identity_error"], flat["mean_error"]), flat


def test_k_same_pixel_stays_far_below_clear_after_fantomas(orl):
    background, attacker, evaluation = orl.split_subjects([0.4, 0.3, 0.3], seed=0)  # 16 / 12 / 12 subjects
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=1)
    ksame = bioanon.get_method("face.k_same_pixel", k=10).fit(background)
    anon_attacker, anon_probes = ksame.transform(attacker), ksame.transform(probes)
    chance = 1 / evaluation.num_subjects
    clear = _top1(gallery, probes)
    naive = _top1(gallery, anon_probes)
    fantomas, t_lin = _fit(Fantomas, attacker, anon_attacker)
    deanon = _top1(gallery, fantomas.transform(anon_probes))
    print(
        f"k-Same-Pixel: chance {chance:.3f} clear {clear:.3f} naive {naive:.3f} fantomas {deanon:.3f} "
        f"({t_lin:.0f}s, {len(fantomas.history_)} epochs)"
    )
    assert clear > 0.9
    assert deanon < clear - 0.3, (deanon, clear)  # E1.2: not reversible to anything near clear level

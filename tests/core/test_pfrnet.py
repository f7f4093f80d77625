"""any.pfrnet (Bortolato et al., FG 2020): a disentangling autoencoder on templates that hides an attribute from
the identity code while keeping identity (soft-biometric-attack.txt, Table I)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from bioanon.builtin.attacks import AttributeKnn, AttributeSvm  # noqa: E402
from bioanon.builtin.pfrnet import Pfrnet  # noqa: E402
from bioanon.builtin.templates import verification_eer  # noqa: E402
from bioanon.errors import ParameterError, TableError  # noqa: E402
from bioanon.metrics import balanced_accuracy  # noqa: E402
from bioanon.table import SampleTable  # noqa: E402

FAST = {
    "attribute": "sex",
    "identity_dim": 16,
    "attribute_dim": 4,
    "hidden": 64,
    "epochs": 40,
    "batch_size": 32,
    "lr": 3e-3,
    "adversarial_weight": 3.0,
    "threads": 1,
    "device": "cpu",
}


def _templates(n_subjects: int, per: int, seed: int, *, offset: int = 0, dim: int = 24) -> SampleTable:
    """Templates with identity clusters (unit-variance centres, noise 0.5) and a planted binary attribute ``sex``:
    a shift of ±3 along one fixed direction, the same for every data set."""
    rng = np.random.default_rng(seed)
    direction = np.random.default_rng(7).standard_normal(dim)
    direction /= np.linalg.norm(direction)
    sex = rng.integers(0, 2, n_subjects)
    centres = rng.standard_normal((n_subjects, dim)) + 3.0 * np.outer(2 * sex - 1, direction)
    x = np.repeat(centres, per, axis=0) + 0.5 * rng.standard_normal((n_subjects * per, dim))
    return SampleTable.from_arrays(
        subject=np.repeat([f"s{offset + i}" for i in range(n_subjects)], per),
        payloads={"features": x.astype(np.float32)},
        attributes={"sex": np.repeat(np.where(sex == 1, "F", "M"), per)},
    )


@pytest.fixture(scope="module")
def fitted():
    background = _templates(50, 5, 0)
    return Pfrnet(**FAST).fit(background)


def _attribute_accuracies(train: SampleTable, test: SampleTable) -> list[float]:
    true = test.attribute("sex")
    out = []
    for rec in (AttributeSvm(kernel="rbf"), AttributeSvm(kernel="poly"), AttributeKnn()):
        r = rec.fit(train, "sex").enroll(test, "sex")
        out.append(balanced_accuracy(r.score(test).predict(), true))
    return out


def test_pfrnet_hides_the_attribute_and_keeps_identity(fitted):
    attacker, target = _templates(40, 3, 1, offset=1000), _templates(30, 3, 2, offset=2000)
    clear = _attribute_accuracies(attacker, target)
    protected_attacker, protected_target = fitted.transform(attacker), fitted.transform(target)
    assert protected_target.payload("features").shape == (len(target), FAST["identity_dim"])
    protected = _attribute_accuracies(protected_attacker, protected_target)
    assert min(clear) > 0.9, clear  # the attribute is in the clear templates
    assert max(protected) < 0.8 and np.mean(protected) < min(clear) - 0.2, (clear, protected)
    before, after = verification_eer(target)["eer"], verification_eer(protected_target)["eer"]
    assert before < 0.05 and after < 0.15, (before, after)  # identity kept (chance: 0.5), on unseen subjects
    assert fitted.adversary_accuracy_ < 0.8  # the fitted adversary also fails on the training codes


def test_pfrnet_loss_falls_and_the_terms_are_reported(fitted):
    losses = [h["train_loss"] for h in fitted.history_]
    assert len(losses) == FAST["epochs"] and losses[-1] < 0.6 * losses[0], losses
    terms = fitted.losses_
    assert set(terms) == {"reconstruction", "identity", "attribute", "confusion"}
    assert terms["reconstruction"] < 0.5 and terms["attribute"] < 0.1 and terms["identity"] < np.log(50)
    assert terms["confusion"] < 1.0  # log 2 = 0.69 is the uniform posterior of two values


def test_pfrnet_seeded_runs_are_reproducible():
    background, target = _templates(20, 4, 3), _templates(10, 3, 4, offset=500)
    params = {**FAST, "epochs": 5}
    a = Pfrnet(**params).fit(background).transform(target).payload("features")
    b = Pfrnet(**params).fit(background).transform(target).payload("features")
    c = Pfrnet(**{**params, "seed": 1}).fit(background).transform(target).payload("features")
    assert np.allclose(a, b, rtol=1e-5, atol=1e-5)
    assert not np.allclose(a, c, rtol=1e-2, atol=1e-2)


def test_pfrnet_checks_its_inputs():
    t = _templates(6, 3, 5)
    with pytest.raises(ParameterError, match="attribute"):
        Pfrnet(**{**FAST, "attribute": ""}).fit(t)
    with pytest.raises(TableError, match="no attribute 'age'"):
        Pfrnet(**{**FAST, "attribute": "age"}).fit(t)
    one_value = SampleTable.from_arrays(
        subject=t.subjects, payloads={"features": t.payload("features")}, attributes={"sex": np.array(["F"] * len(t))}
    )
    with pytest.raises(TableError, match="two values"):
        Pfrnet(**FAST).fit(one_value)
    with pytest.raises(RuntimeError, match="fit"):
        Pfrnet(**FAST).transform(t)
    m = Pfrnet(**{**FAST, "epochs": 1}).fit(t)
    narrow = SampleTable.from_arrays(subject=t.subjects, payloads={"features": t.payload("features")[:, :10]})
    with pytest.raises(TableError, match="10 values, fitted on 24"):
        m.transform(narrow)


def test_pfrnet_trains_on_cuda():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (none on this machine)")
    background, target = _templates(20, 4, 3), _templates(10, 3, 4, offset=500)
    params = {**FAST, "epochs": 5, "device": "cuda", "precision": "fp32"}
    m = Pfrnet(**params).fit(background)
    assert m.device_.startswith("cuda")
    gpu = m.transform(target).payload("features")
    cpu = Pfrnet(**{**params, "device": "cpu"}).fit(background).transform(target).payload("features")
    assert gpu.shape == cpu.shape and np.isfinite(gpu).all()
    assert np.corrcoef(gpu.ravel(), cpu.ravel())[0, 1] > 0.99  # same seed: close, not bitwise

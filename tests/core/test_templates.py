"""Template protections (PE-MIU, IVE), comparators that travel with the protection, the [templates] stage of an
evaluation, and the soft-biometric attack's finding on PE-MIU templates (soft-biometric-attack.txt)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bioanon.builtin.attacks import AttributeKnn, AttributeSvm, SimilarityAttributeAttack
from bioanon.builtin.recognizers import CosineNearestCentroid, NearestNeighbors
from bioanon.builtin.templates import Ive, PeMiu, block_alignment_scores, cosine_scores, verification_eer
from bioanon.errors import ConfigError, ParameterError, TableError
from bioanon.evaluation.config import load_config
from bioanon.methods import Anonymizer, Comparator, comparator_stamp, table_comparator, with_comparator
from bioanon.metrics import balanced_accuracy
from bioanon.table import SampleTable

ROOT = Path(__file__).resolve().parents[2]


def _templates(
    n_subjects: int, per: int, seed: int, *, offset: int = 0, attribute: float = 1.0, dim: int = 64, block: int = 8
) -> SampleTable:
    """Templates with identity clusters and a planted binary attribute ``sex``: a shift per attribute value whose
    blocks sum to zero (so that shuffling blocks hides it from what a classifier sees of a template)."""
    rng = np.random.default_rng(seed)
    nb = dim // block
    effect = np.zeros((2, dim))
    shift = np.random.default_rng(99).standard_normal((2, nb, block))
    effect[:, : nb * block] = (shift - shift.mean(axis=1, keepdims=True)).reshape(2, nb * block)
    sex = rng.integers(0, 2, n_subjects)
    centres = rng.standard_normal((n_subjects, dim)) + attribute * effect[sex]
    x = np.repeat(centres, per, axis=0) + 0.5 * rng.standard_normal((n_subjects * per, dim))
    return SampleTable.from_arrays(
        subject=np.repeat([f"s{offset + i}" for i in range(n_subjects)], per),
        payloads={"features": x.astype(np.float32)},
        attributes={"sex": np.repeat(np.where(sex == 1, "F", "M"), per)},
    )


# ------------------------------------------------------------------------------------------------------ PE-MIU


def test_pe_miu_shuffles_each_template_on_its_own_and_reproducibly():
    t = _templates(10, 3, 0)
    a = PeMiu(block_size=8).transform(t)
    x, y = t.payload("features"), a.payload("features")
    blocks_x, blocks_y = x.reshape(len(x), 8, 8), y.reshape(len(y), 8, 8)
    perms = []
    for bx, by in zip(blocks_x, blocks_y, strict=True):  # every template's blocks are its own blocks, moved
        match = np.abs(by[:, None] - bx[None]).sum(-1) < 1e-6
        assert match.sum(1).tolist() == [1] * 8
        perms.append(tuple(match.argmax(1)))
    assert len(set(perms)) > 5  # not one permutation for all (unlike any.block_permutation)
    assert np.array_equal(PeMiu(block_size=8).transform(t.take(np.arange(5))).payload("features"), y[:5])
    assert not np.array_equal(PeMiu(block_size=8, seed=1).transform(t).payload("features"), y)
    with pytest.raises(ParameterError, match="block_size"):
        PeMiu(block_size=40).transform(t)


def test_pe_miu_comparator_aligns_blocks():
    t = _templates(8, 2, 1, dim=36)  # 36 = 4 blocks of 8 and a trailing partial block of 4, left in place
    m = PeMiu(block_size=8)
    x, y = t.payload("features"), m.transform(t).payload("features")
    assert np.allclose(y[:, 32:], x[:, 32:])
    cmp = m.comparator()
    s = cmp(y, y)
    assert np.allclose(np.diag(s), 1.0, atol=1e-6)
    clear = cosine_scores(x, x)
    assert (s >= clear - 1e-6).all()  # undoing both permutations is one of the alignments
    greedy = block_alignment_scores(y, y, 8, "greedy")
    assert (greedy <= s + 1e-9).all() and np.allclose(np.diag(greedy), 1.0, atol=1e-6)


def test_the_comparator_travels_with_the_table():
    t = _templates(6, 2, 2)
    assert comparator_stamp(t) is None and table_comparator(t) is None
    a = PeMiu(block_size=8, assignment="greedy").transform(t)
    stamp = comparator_stamp(a)
    assert stamp["id"] == "any.pe_miu" and stamp["params"]["assignment"] == "greedy"
    cmp = table_comparator(a)
    assert isinstance(cmp, Comparator) and "greedy" in cmp.name
    assert comparator_stamp(a.take(np.arange(3))) == stamp  # rows taken keep it
    assert with_comparator(t, Ive(attribute="sex")) is t  # a protection without one leaves no record

    class Bad(Anonymizer):
        id = "test.bad"

        def comparator(self):
            return Comparator("bad", lambda p, r: np.zeros((1, 1)))

    with pytest.raises(ValueError, match="returned shape"):
        Bad().comparator()(np.zeros((2, 3)), np.zeros((4, 3)))


def test_verification_eer_before_and_after_pe_miu():
    t = _templates(20, 4, 3)
    before = verification_eer(t)
    after = verification_eer(PeMiu(block_size=8).transform(t))
    assert before["comparator"] == "cosine" and after["comparator"].startswith("PE-MIU")
    assert before["eer"] < 0.1 and after["eer"] < 0.15  # identity kept by the aligning comparator
    plain = verification_eer(PeMiu(block_size=8).transform(t), comparator=Comparator("cosine", cosine_scores))
    assert plain["eer"] > after["eer"] + 0.1  # ... and lost without it


def test_verification_error_measure_is_near_the_eer():
    from bioanon.builtin.templates import VerificationError

    t = _templates(20, 4, 3, attribute=0.0)
    p = PeMiu(block_size=8).transform(t)
    for table in (t, p):
        per_sample = VerificationError().measure(t, table)
        assert per_sample.shape == (len(t),) and np.isfinite(per_sample).all()
        assert abs(per_sample.mean() - verification_eer(table)["eer"]) < 0.05
    off = VerificationError(declared_comparator=False).measure(t, p).mean()
    assert off > VerificationError().measure(t, p).mean() + 0.1
    single = t.take(np.arange(0, len(t), 4))  # one sample per subject: no mated comparison
    assert np.isnan(VerificationError().measure(single, single)).all()


# ------------------------------------------------------------------------------------------------------ IVE


def test_ive_removes_the_features_that_tell_the_attribute():
    rng = np.random.default_rng(0)
    n = 200
    sex = rng.integers(0, 2, n)
    x = rng.standard_normal((n, 20)).astype(np.float32)
    x[:, [3, 11]] += 2.5 * sex[:, None]  # the attribute lives in features 3 and 11
    t = SampleTable.from_arrays(
        subject=[f"s{i // 2}" for i in range(n)],
        payloads={"features": x},
        attributes={"sex": np.where(sex == 1, "F", "M")},
    )
    m = Ive(attribute="sex", per_step=1, steps=2, n_estimators=30).fit(t)
    assert 3 not in m.keep_ and 11 not in m.keep_ and len(m.keep_) == 18
    out = m.transform(t).payload("features")
    assert out.shape == (n, 18) and np.array_equal(out, x[:, m.keep_])
    with pytest.raises(ParameterError, match="attribute"):
        Ive().fit(t)
    with pytest.raises(TableError, match="no attribute 'age'"):
        Ive(attribute="age").fit(t)
    with pytest.raises(ParameterError, match="steps"):
        Ive(attribute="sex", per_step=10, steps=2).fit(t)


# ------------------------------------------------------------------------------------------- recognizers


def test_template_recognizers_use_the_declared_comparator():
    gallery, probes = _templates(10, 4, 4).take(np.arange(0, 40, 2)), _templates(10, 4, 4).take(np.arange(1, 40, 2))
    m = PeMiu(block_size=8)
    pg, pp = m.transform(gallery), m.transform(probes)
    for rec in (NearestNeighbors(), CosineNearestCentroid()):
        r = rec.enroll(pg, "subject")
        assert r.comparator_used().startswith("PE-MIU")
        assert np.mean(r.score(pp).predict() == probes.subjects) > 0.9  # identity kept under the comparator
        off = rec.with_params(declared_comparator=False).enroll(pg, "subject")
        assert off.comparator_used() == ""
        assert np.mean(off.score(pp).predict() == probes.subjects) < 0.6
        assert rec.with_params().enroll(gallery, "subject").comparator_used() == ""  # clear gallery: own comparison


def test_classifiers_fall_to_chance_while_the_similarity_attack_keeps_the_attribute():
    """The finding of soft-biometric-attack.txt (Tables IV-IX) on synthetic templates with a planted attribute:
    on PE-MIU templates the attacker's classifiers, trained on the attacker's own protected templates, lose most
    of the attribute, while the similarity attack with the protection's comparator keeps it."""
    attacker, target = _templates(60, 3, 1), _templates(40, 3, 2, offset=1000)
    m = PeMiu(block_size=8)
    p_attacker, p_target = m.transform(attacker), m.transform(target)
    true = target.attribute("sex")

    def acc(rec, train, probes):
        r = rec.fit(train, "sex").enroll(probes, "sex")
        return balanced_accuracy(r.score(probes).predict(), true), r

    classifiers = [
        AttributeSvm(kernel="rbf"),
        AttributeSvm(kernel="poly"),
        AttributeSvm(kernel="sigmoid"),
        AttributeKnn(),
    ]
    for rec in classifiers:
        assert acc(rec.with_params(), attacker, target)[0] > 0.85  # the attribute is in the clear templates
    protected = [acc(rec, p_attacker, p_target)[0] for rec in classifiers]
    attack, fitted = acc(SimilarityAttributeAttack(n=5), p_attacker, p_target)
    assert fitted.comparator_used().startswith("PE-MIU")
    assert max(protected) < 0.8, protected
    assert attack > 0.85 and attack > max(protected) + 0.15, (attack, protected)


# ------------------------------------------------------------------------------------------- the [templates] stage


def _config(**over):
    cfg = {
        "name": "tpl",
        "label": "group",
        "scenarios": ["parrot"],
        "dataset": {"source": "any.synthetic", "params": {"n_subjects": 30, "samples_per_subject": 4}},
        "rates": {"background": 0.3, "attacker": 0.4, "evaluation": 0.3},
        "templates": {"recognizer": "any.lda_cosine", "params": {"n_components": 0.99}},
        "anonymizers": [{"id": "any.identity"}, {"id": "any.pe_miu", "params": {"block_size": 4}}],
        "recognizers": [{"id": "any.similarity_attribute_attack", "params": {"n": 3}}, {"id": "any.attribute_svm"}],
        "report": {"bootstrap": 0},
    }
    cfg.update(over)
    return cfg


def test_templates_config_validates_and_round_trips():
    import tomllib

    cfg = load_config(_config())
    assert cfg.templates.recognizer.id == "any.lda_cosine" and cfg.templates.fit == "background"
    assert load_config(cfg.to_dict()) == cfg
    assert load_config(tomllib.loads(cfg.to_toml())) == cfg
    assert load_config(_config(label="subject")).templates.label == "subject"
    with pytest.raises(ConfigError) as err:
        load_config(_config(templates={"recognizer": "any.random_forest", "fit": "nowhere", "epochs": 3}))
    text = str(err.value)
    assert "templates.fit: expected one of background, attacker" in text
    assert "templates.epochs: unknown key" in text
    with pytest.raises(ConfigError, match="templates.fit: 'background' needs a background part"):
        load_config(_config(rates={"background": 0, "attacker": 0.5, "evaluation": 0.5}))
    with pytest.raises(ConfigError, match="templates: unknown recognizer"):
        load_config(_config(templates={"recognizer": "any.lda_cosin"}))
    with pytest.raises(ConfigError, match="templates.recognizer: any.similarity_attribute_attack has no embedding"):
        load_config(_config(templates={"recognizer": "any.similarity_attribute_attack"}))


def test_evaluation_runs_on_templates_and_names_the_comparator(tmp_path):
    from bioanon.evaluation.run import evaluate

    cfg = _config(label="group")
    res = evaluate(cfg, out_dir=tmp_path / "runs", cache=tmp_path / "cache", progress=False, jobs=1)
    assert not res.failures
    m = res.metrics
    used = m[(m.anonymizer == "any.pe_miu") & (m.scenario == "parrot")]
    attack = used[used.recognizer == "any.similarity_attribute_attack"].comparator.unique().tolist()
    assert len(attack) == 1 and attack[0].startswith("PE-MIU block alignment")
    assert set(used[used.recognizer == "any.attribute_svm"].comparator) == {""}
    assert set(m[m.anonymizer == "any.identity"].comparator) == {""}
    assert res.stages["templates"]["executed"] == 1
    assert "declared comparator" in res.report_path.read_text()


def test_the_example_config_validates():
    cfg = load_config(ROOT / "examples" / "soft-biometric-pemiu.toml", check_paths=False)
    assert cfg.templates.recognizer.id == "gait.cnn" and cfg.label == "sex"
    assert {a.id for a in cfg.anonymizers} == {"any.identity", "any.pe_miu", "any.pfrnet"}
    strategies = {r.params["strategy"] for r in cfg.recognizers if r.id == "any.similarity_attribute_attack"}
    assert strategies == {"vote", "average", "linear", "log"}
    kernels = {r.params["kernel"] for r in cfg.recognizers if r.id == "any.attribute_svm"}
    assert kernels == {"rbf", "poly", "sigmoid"}


def test_templates_fitted_on_the_attacker_without_background(tmp_path):
    from bioanon.evaluation.run import evaluate

    cfg = _config(
        label="group",
        rates={"background": 0, "attacker": 0.5, "evaluation": 0.5},
        templates={"recognizer": "any.lda_cosine", "fit": "attacker"},
        anonymizers=[{"id": "any.pe_miu", "params": {"block_size": 2}}],
        recognizers=[{"id": "any.knn"}],
        utility=[{"id": "any.verification_error"}],
    )
    res = evaluate(cfg, out_dir=None, cache=tmp_path / "cache", progress=False, jobs=1)
    assert not res.failures
    knn = res.metrics[res.metrics.scenario == "parrot"]
    assert knn.comparator.str.startswith("PE-MIU").all()
    assert res.utility.value.notna().all() and (res.utility.value < 0.5).all()

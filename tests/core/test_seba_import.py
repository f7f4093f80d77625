"""``bioanon import seba``: SEBA run configs and experiment configs become bioanon configs.

The SEBA files are reconstructed here from the shapes the SEBA digest (``shared/peers/seba.md`` §3–§12)
describes — ``sample.runconfig.yaml``-style anon and deanon runs and ``sample.config.yaml``-style experiment
configs with sweeps, for motion and for faces — no SEBA file is copied.

The SEBA fidelity options (recognizer ``cv_folds``/``keep``/``scores``, ``attacker_fit``, selector
``by``/``order``) are checked in the emitted dict and TOML text only; the configs run through
``bioanon validate`` are imported with ``fidelity=False`` (or need none of those options).
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("yaml")

from bioanon.cli import main  # noqa: E402
from bioanon.errors import ConfigError  # noqa: E402
from bioanon.evaluation.config import load_config  # noqa: E402
from bioanon.seba_import import import_seba, to_toml  # noqa: E402

# -------------------------------------------------------------------------------------------- SEBA fixtures

MOTION_RUN = """\
# sample.runconfig.yaml: three rounds of a noise sweep on a motion set, privacy and utility
- repeat: 3
  config:
    exp: anon
    dataset: walkers
    cleanup: true
    seed: "$ROUND"
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: noise_injection, params: {distribution: normal, scaling: 1.0, type: direct}}
    privacy: {name: sklearn, params: {feature_rep: simple, classifier: svm, number_of_splits: 10}}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
- repeat: 3
  config:
    exp: anon
    dataset: walkers
    cleanup: true
    seed: "$ROUND"
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: noise_injection, params: {distribution: normal, scaling: 3.0, type: direct}}
    privacy: {name: sklearn, params: {feature_rep: simple, classifier: svm, number_of_splits: 10}}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
- repeat: 3
  config:
    exp: anon
    dataset: walkers
    cleanup: true
    seed: "$ROUND"
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: noise_injection, params: {distribution: normal, scaling: 3.0, type: direct}}
    utility: {name: time_series_distance, params: {distance: dtw}}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 1.0}
"""

MOTION_MIXED = """\
- repeat: 1
  config:
    exp: anon
    dataset: walkers
    seed: 7
    selector: {name: classification, params: {ids: 10}}
    anonymization: {name: noise_injection, params: {scaling: 2.0}}
    privacy: {name: sklearn, params: {classifier: randomForest, number_of_splits: 5}}
    rates: {anonbg: 0.1, attacker: 0.5, enroll: 0.5}
- repeat: 1
  config:
    exp: anon
    dataset: walkers
    seed: 7
    selector: {name: classification, params: {ids: 10}}
    anonymization: {name: remove_parts, params: {body_parts: [head, torso], invert: true}}
    privacy: {name: sklearn, params: {classifier: randomForest, number_of_splits: 5}}
    rates: {anonbg: 0.1, attacker: 0.5, enroll: 0.5}
- repeat: 2
  config:
    exp: anon
    dataset: walkers
    seed: 7
    selector: {name: random, params: {ids: 10}}
    anonymization: {name: coarsening, params: {coarsening_type: precision, coarsening_decimals: 1}}
    privacy: {name: sklearn, params: {feature_rep: segment}}
    rates: {anonbg: 0.1, attacker: 0.5, enroll: 0.5}
"""

MOTION_EXPERIMENT = """\
# sample.config.yaml-style experiment: one sweep parameter per anonymization
exp: anon
dataset: walkers
seed: "run$ROUND"
repeat: 2
selector: {name: random, params: {ids: 16}}
rates: {anonbg: 0.05, attacker: 0.6, enroll: 0.75}
privacy: {name: sklearn, params: {feature_rep: flatten, classifier: svm}}
anonymizations:
  - name: noise_injection
    params: {distribution: laplace, scaling: [0.5, 1.0, 2.0]}
  - name: coarsening
    params: {coarsening_type: time, coarsening_factor: [2, 5, 10]}
  - name: remove_parts
    params: {body_parts: [left_leg, right_leg]}
  - name: rolling_average
    params: {window_size: [2, 4]}
"""

FACE_RUN = """\
- repeat: 1
  config:
    exp: anon
    dataset: faces
    cleanup: true
    seed: 1
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: gaussianblur, params: {kernel: 9}}
    privacy: {name: pcasvm, params: {pca__n_components: 0.9, svm__kernel: linear}}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
- repeat: 1
  config:
    exp: anon
    dataset: faces
    cleanup: true
    seed: 1
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: pixelate, params: {size: 8}}
    privacy: {name: arcface, params: {opt: {num_gpus: 1}}}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
- repeat: 1
  config:
    exp: anon
    dataset: faces
    seed: 1
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: pixelate, params: {size: 8}}
    utility: {name: ssim}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 1.0}
- repeat: 1
  config:
    exp: anon
    dataset: faces
    seed: 1
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: deepprivacy, params: {model: fdf128_retinanet256, opt: {bin: bin/deepprivacy}}}
    privacy: {name: arcface, params: {}}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
"""

FACE_DEANON = """\
- repeat: 1
  config:
    exp: deanon
    dataset: faces
    seed: 1
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: dpsnow, params: {d: 0.7, seed: 3}}
    deanonymization:
      name: convlinae
      params: {epochs: 100, learning_rate: 0.0001, train_rate: 0.85, loss: ssim}
    privacy: {name: arcface, params: {opt: {num_gpus: 1}}}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
- repeat: 1
  config:
    exp: deanon
    dataset: faces
    seed: 1
    selector: {name: random, params: {ids: 20}}
    anonymization: {name: dpsnow, params: {d: 0.7, seed: 3}}
    deanonymization: {name: noop, params: {}}
    privacy: {name: arcface, params: {opt: {num_gpus: 1}}}
    rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
"""

FACE_EXPERIMENT = """\
# sample.config.yaml: anonymizations with one sweep each; privacy arcface and detection utility are implied
exp: anon
dataset: faces
seed: 1
selector: {name: random, params: {ids: 20}}
rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
anonymizations:
  - name: gaussianblur
    params: {kernel: [1, 5, 9, 15]}
  - name: pixelate
    params: {size: [4, 8, 16]}
  - name: eyemask
    params: {center: [70, 85]}
  - name: blockpermutate
    params: {seed: 42, blocksize: [8, 16]}
  - name: noop
"""

FACE_DEANON_EXPERIMENT = """\
exp: deanon
dataset: faces
seed: 1
selector: {name: random, params: {ids: 20}}
rates: {anonbg: 0.02, attacker: 0.88, enroll: 0.75}
deanonymization: {name: convlinae, params: {epochs: 100, learning_rate: 0.0001, train_rate: 0.85, loss: ssim}}
anonymizations:
  - name: dpsnow
    params: {d: [0.3, 0.6, 0.9]}
"""


@pytest.fixture
def seba(tmp_path):
    """A SEBA checkout: data/walkers (motion), data/faces (face, flat 200×48 images) and a helper writing a
    YAML file there."""
    data = tmp_path / "data"
    (data / "walkers").mkdir(parents=True)
    (data / "walkers.meta.yaml").write_text("---\nname: walkers\noriginal: true\ntrait: motion\nfps: 100\n")
    (data / "faces").mkdir()
    (data / "faces.meta.yaml").write_text("---\nname: faces\noriginal: true\ntrait: face\n")
    from PIL import Image

    Image.new("RGB", (48, 200)).save(data / "faces" / "a.0.jpg")  # width 48, height 200

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


def _validate(cfg: dict, tmp_path: Path) -> None:
    """``bioanon validate`` on the written TOML: exit 0."""
    path = tmp_path / f"{cfg['name']}.toml"
    path.write_text(to_toml(cfg))
    load_config(path)  # raises ConfigError listing the problems
    assert main(["-q", "validate", str(path)]) == 0


def _notes(result) -> list[tuple[str, str, str]]:
    return [(n.seba, n.status, n.where) for _, n in result.notes()]


# -------------------------------------------------------------------------------------------- motion


def test_motion_run_config_merges_entries_into_one_config_with_a_grid(seba, tmp_path):
    path = seba("sample.runconfig.yaml", MOTION_RUN)
    result = import_seba(path, fidelity=False, out_dir=tmp_path)
    assert len(result.configs) == 1
    cfg = result.configs[0].config
    assert cfg["name"] == "sample" and cfg["seed"] == 0 and cfg["repeats"] == 3  # $ROUND seed → repeats
    assert cfg["scenarios"] == ["parrot"]
    assert cfg["dataset"] == {"source": "gait.seba", "path": "data", "params": {"set": "walkers"}}
    assert cfg["rates"] == {
        "background": 0.02,
        "attacker": 0.88,
        "evaluation": 0.1,
        "enrolment": 0.75,
        "rounding": "seba",
    }
    [anon] = cfg["anonymizers"]
    assert anon["id"] == "gait.noise" and anon["grid"] == {"scale": [1.0, 3.0]}
    assert anon["params"] == {"noise": "normal", "mode": "direct", "seed": 0}
    assert cfg["recognizers"] == [
        {
            "id": "gait.svm",
            "name": "sklearn",
            "params": {"features": "simple", "centering": "none", "kernel": "rbf", "c": 1.0},
        }
    ]
    assert cfg["utility"] == [{"id": "gait.dtw", "name": "time_series_distance", "params": {"per": "joint"}}]
    assert cfg["selection"] == {"selectors": [{"id": "any.select_random"}], "subject_counts": [20], "random_draws": 1}
    assert "attacker_fit" not in cfg
    statuses = {(s, st) for s, st, _ in _notes(result)}
    assert ("cv_folds = 10", "fidelity") in statuses and ("attacker_fit = 'enrolment'", "fidelity") in statuses
    _validate(cfg, tmp_path)


def test_motion_fidelity_options_are_emitted(seba, tmp_path):
    path = seba("sample.runconfig.yaml", MOTION_RUN)
    imported = import_seba(path, out_dir=tmp_path).configs[0]
    cfg = imported.config
    assert cfg["attacker_fit"] == "enrolment"
    assert list(cfg).index("attacker_fit") < list(cfg).index("dataset")  # a top-level key, before the tables
    assert cfg["recognizers"][0]["params"] == {
        "features": "simple",
        "centering": "none",
        "kernel": "rbf",
        "c": 1.0,
        "cv_folds": 10,
        "keep": "best",
        "scores": "proba",
        "signs": "svd",  # SEBA's per-walk PCA signs
    }
    text = imported.to_toml("sample.runconfig.yaml")
    assert tomllib.loads(text) == cfg  # the written TOML reads back to the same dict
    assert 'attacker_fit = "enrolment"' in text and "cv_folds = 10" in text and 'scores = "proba"' in text
    assert not [n for n in imported.notes if n.status == "fidelity"]


def test_motion_separate_configs_selector_fidelity_and_unmapped_entries(seba, tmp_path):
    path = seba("mixed.yaml", MOTION_MIXED)
    result = import_seba(path, out_dir=tmp_path)
    # entries 0 and 1 share data, rates, seed and selector; entry 2 has another selector and repeat count
    assert [c.entries for c in result.configs] == [["entries[0]", "entries[1]"]]
    cfg = result.configs[0].config
    assert cfg["seed"] == 7 and cfg["repeats"] == 1
    assert [a["id"] for a in cfg["anonymizers"]] == ["gait.noise", "gait.keep_parts"]  # invert: keep the parts
    noise = cfg["anonymizers"][0]["params"]
    assert noise["noise"] == "uniform" and math.isclose(noise["scale"], 2.0 / math.sqrt(12))  # U(0,1) → SD
    assert cfg["anonymizers"][1]["params"] == {"parts": ["head", "torso"]}
    assert cfg["recognizers"][0]["id"] == "gait.random_forest"
    assert cfg["recognizers"][0]["params"]["cv_folds"] == 5
    assert cfg["selection"]["selectors"] == [
        {"id": "any.select_classification", "params": {"by": "classification_hitrate", "order": "descending"}}
    ]
    notes = _notes(result)
    # the uniform default, its bias and SEBA's cache behaviour are named
    assert any(s == "noise_injection.distribution" and st == "approximate" for s, st, _ in notes)
    # entry 2: the segment features have no counterpart, so the entry gives no config
    dropped = [n for _, n in result.notes() if n.status == "dropped"]
    assert any(n.seba == "sklearn" and "segment" in n.why and n.where == "entries[2].privacy" for n in dropped)
    assert "entries[2].privacy" in result.table()


def test_motion_experiment_config_sweeps_become_grids(seba, tmp_path):
    path = seba("motion.config.yaml", MOTION_EXPERIMENT)
    result = import_seba(path, fidelity=False, out_dir=tmp_path)
    [imported] = result.configs
    cfg = imported.config
    assert cfg["repeats"] == 2
    assert cfg["seed"] == __import__("zlib").crc32(b"run0")  # a text seed: CRC-32 of round 0's seed
    grids = {a["name"]: a.get("grid") for a in cfg["anonymizers"]}
    assert [round(v, 9) for v in grids["noise_injection"]["scale"]] == [
        round(s * math.sqrt(2), 9) for s in (0.5, 1.0, 2.0)
    ]  # Laplace(0,1) has SD √2
    assert grids["coarsening"] == {"factor": [2, 5, 10]}
    assert grids["remove_parts"] is None  # a list-valued parameter, not a sweep
    assert grids["rolling_average"] == {"window": [2, 4]}
    assert cfg["recognizers"][0]["params"]["features"] == "flatten"
    assert "utility" not in cfg  # SEBA's implied detection utility is a face method
    assert "anonymizations[0][0-2]" in imported.to_toml()
    _validate(cfg, tmp_path)


def test_round_outside_the_seed_crosses_values_with_repeats(seba, tmp_path):
    text = MOTION_RUN.split("- repeat: 3", 2)[1]
    text = "- repeat: 3" + text.replace("scaling: 1.0", 'scaling: "$ROUND"')
    result = import_seba(seba("round.yaml", text), fidelity=False, out_dir=tmp_path)
    cfg = result.configs[0].config
    assert cfg["anonymizers"][0]["grid"] == {"scale": [0.0, 1.0, 2.0]}
    assert any(n.seba == "$ROUND" for _, n in result.notes())


# -------------------------------------------------------------------------------------------- faces


def test_face_run_config_maps_and_names_what_it_cannot(seba, tmp_path):
    path = seba("faces.runconfig.yaml", FACE_RUN)
    result = import_seba(path, out_dir=tmp_path)
    [imported] = result.configs
    cfg = imported.config
    assert cfg["dataset"] == {"source": "face.seba", "path": "data", "params": {"set": "faces"}}
    anon = {a["name"]: a for a in cfg["anonymizers"]}
    assert anon["gaussianblur"]["params"] == {"kernel": 2 * math.floor(48 * 9 / 200) + 1, "sigma": 0.0}
    assert anon["pixelate"]["params"] == {"size": 8}
    assert "deepprivacy" not in anon
    assert cfg["recognizers"] == [
        {
            "id": "any.pca_svm",
            "name": "pcasvm",
            "params": {"standardize": True, "n_components": 0.9, "kernel": "linear", "c": 1.0},
        },
        {"id": "face.arcface", "name": "arcface", "params": {"preset": "paper", "epochs": 40, "batch_size": 128}},
    ]
    assert cfg["utility"] == [{"id": "face.ssim", "name": "ssim"}]
    notes = {(n.seba, n.status): n for _, n in result.notes()}
    assert ("deepprivacy", "dropped") in notes and "entries[3]" in notes[("deepprivacy", "dropped")].where
    assert ("arcface.opt", "ignored") in notes
    assert not [n for n in notes if n[1] == "todo"]  # face.seba reads SEBA's flat layout as it is
    text = imported.to_toml()
    assert "# " in text and "[dropped]" in text and "deepprivacy" in text
    _validate(cfg, tmp_path)


def test_face_deanon_runs_become_deanon_and_naive_configs(seba, tmp_path):
    path = seba("deanon.yaml", FACE_DEANON)
    result = import_seba(path, out_dir=tmp_path)
    fantomas, naive = (c.config for c in result.configs)
    assert fantomas["scenarios"] == ["deanon"]
    assert fantomas["deanonymizer"] == {
        "id": "face.fantomas",
        "name": "convlinae",
        "params": {
            "resolution": [224, 224],
            "features": 9,
            "loss": "ssim",
            "epochs": 100,
            "lr": 0.0001,
            "validation": 0.15,
            "batch_size": 64,
            "patience": 20,
        },
    }
    assert fantomas["anonymizers"][0]["params"]["d"] == pytest.approx(0.3)  # SEBA keeps d, replaces 1 − d
    assert fantomas["anonymizers"][0]["params"]["seed"] == 3
    assert naive["scenarios"] == ["naive"] and "deanonymizer" not in naive  # noop de-anonymization
    for cfg in (fantomas, naive):
        _validate(cfg, tmp_path)


def test_face_experiment_config_expands_like_generate_run_configs(seba, tmp_path):
    path = seba("sample.config.yaml", FACE_EXPERIMENT)
    result = import_seba(path, out_dir=tmp_path)
    [imported] = result.configs
    cfg = imported.config
    anon = {a["name"]: a for a in cfg["anonymizers"]}
    assert anon["gaussianblur"]["grid"] == {"kernel": [2 * math.floor(48 * k / 200) + 1 for k in (1, 5, 9, 15)]}
    assert anon["pixelate"]["grid"] == {"size": [4, 8, 16]}
    assert anon["blockpermutate"]["params"] == {"key": 42} and anon["blockpermutate"]["grid"] == {"block_size": [8, 16]}
    # eyemask: one SEBA sweep moves two bioanon parameters (top and bottom): separate settings, not a grid
    masks = [a for a in cfg["anonymizers"] if a["id"] == "face.eye_mask"]
    assert [(m["name"], m["params"]["top"], m["params"]["bottom"]) for m in masks] == [
        ("eyemask", 0.0, 0.7),
        ("eyemask-2", 0.075, 0.775),
    ]
    assert anon["noop"]["id"] == "any.identity"
    assert [r["id"] for r in cfg["recognizers"]] == ["face.arcface"]  # hard-wired by SEBA's generator
    assert [u["id"] for u in cfg["utility"]] == ["face.detection_confidence"]  # its detection run
    assert cfg["rates"]["enrolment"] == 0.75  # not the utility run's 1.0
    _validate(cfg, tmp_path)


def test_face_deanon_experiment(seba, tmp_path):
    result = import_seba(seba("deanon.config.yaml", FACE_DEANON_EXPERIMENT), out_dir=tmp_path)
    [imported] = result.configs
    cfg = imported.config
    assert cfg["scenarios"] == ["deanon"] and cfg["deanonymizer"]["id"] == "face.fantomas"
    assert [round(d, 9) for d in cfg["anonymizers"][0]["grid"]["d"]] == [0.7, 0.4, 0.1]
    assert "utility" not in cfg  # SEBA's generator adds the detection run to anon experiments only
    _validate(cfg, tmp_path)


def test_trait_from_names_when_the_meta_file_is_missing(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(FACE_RUN.replace("faces", "elsewhere"))
    result = import_seba(path, data_dir=tmp_path / "nodata", out_dir=tmp_path)
    assert result.configs[0].config["dataset"]["source"] == "face.seba"
    notes = {(n.seba, n.status) for _, n in result.notes()}
    assert ("gaussianblur", "approximate") in notes  # pixel sizes for SEBA's 224 × 224 faces
    path.write_text(
        FACE_RUN.replace("faces", "elsewhere")
        .replace("gaussianblur, params: {kernel: 9}", "noop")
        .replace("pcasvm, params: {pca__n_components: 0.9, svm__kernel: linear}", "arcface")
    )
    import_seba(path, data_dir=tmp_path / "nodata")  # arcface and pixelate are face methods
    path.write_text(
        "- repeat: 1\n  config: {exp: anon, dataset: x, seed: 1, selector: {name: random},\n"
        "    anonymization: {name: noop}, utility: {name: ssim_typo}, rates: {anonbg: 0, attacker: 0.5,"
        " enroll: 0.5}}\n"
    )
    with pytest.raises(ConfigError, match="trait"):
        import_seba(path, data_dir=tmp_path / "nodata")


# -------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "text, match",
    [
        ("- repeat: 1\n  config: {exp: anon\n", r"run\.yaml:\d+: invalid YAML"),
        ("exp: anon\ndataset: walkers\n", "YAML list of {repeat, config}"),
        ("- repeat: 1\n", r"entries\[0\]: missing required key 'config'"),
        ("- {repeat: 1, config: {exp: anon}}\n", r"entries\[0\]: missing required key config.dataset"),
        ("- {repeat: x, config: {}}\n", r"entries\[0\].repeat"),
    ],
)
def test_malformed_files_and_missing_keys_name_the_entry(tmp_path, text, match):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        import_seba(path)


def test_unknown_names_and_parameters_name_the_entry(seba):
    bad_anon = MOTION_RUN.replace("name: noise_injection", "name: noise_injecton", 1)
    with pytest.raises(
        ConfigError,
        match=r"entries\[0\]\.anonymization: unknown SEBA motion anonymization "
        r"'noise_injecton'; did you mean 'noise_injection'\?",
    ):
        import_seba(seba("a.yaml", bad_anon))
    bad_param = MOTION_RUN.replace("scaling: 3.0", "scale: 3.0", 1)
    with pytest.raises(
        ConfigError,
        match=r"entries\[1\]\.anonymization: unknown parameter 'scale' of SEBA "
        r"motion anonymization 'noise_injection'; did you mean 'scaling'\?",
    ):
        import_seba(seba("b.yaml", bad_param))
    bad_privacy = MOTION_RUN.replace("name: sklearn", "name: sklern", 1)
    with pytest.raises(ConfigError, match=r"entries\[0\]\.privacy: unknown SEBA motion privacy method 'sklern'"):
        import_seba(seba("c.yaml", bad_privacy))
    bad_exp = MOTION_RUN.replace("exp: anon", "exp: anonymous", 1)
    with pytest.raises(ConfigError, match=r"entries\[0\]: config.exp: expected anon or deanon"):
        import_seba(seba("d.yaml", bad_exp))
    two_sweeps = MOTION_EXPERIMENT.replace("scaling: [0.5, 1.0, 2.0]", "scaling: [1, 2], type: [direct, indirect]")
    with pytest.raises(ConfigError, match=r"anonymizations\[0\] \(noise_injection\): SEBA sweeps one"):
        import_seba(seba("e.yaml", two_sweeps))


# -------------------------------------------------------------------------------------------- command


def test_cli_writes_validatable_configs_and_prints_the_table(seba, tmp_path, capsys):
    path = seba("faces.runconfig.yaml", FACE_RUN + FACE_DEANON)
    out = tmp_path / "out" / "study.toml"
    assert main(["-q", "import", "seba", str(path), "-o", str(out), "--no-fidelity"]) == 0
    printed = capsys.readouterr().out
    assert "[dropped] " in printed and "deepprivacy" in printed
    written = sorted(p.name for p in out.parent.glob("*.toml"))
    assert written == ["study-1.toml", "study-2.toml", "study-3.toml"]
    for name in written:
        text = (out.parent / name).read_text()
        assert text.startswith("# bioanon evaluation config made by `bioanon import seba`")
        assert tomllib.loads(text)["dataset"]["path"] == "../data"  # relative to the config
        assert main(["-q", "validate", str(out.parent / name)]) == 0
    assert main(["-q", "import", "seba", str(path), "-o", str(out)]) == 2  # exists: --force
    assert "--force" in capsys.readouterr().err
    assert main(["-q", "import", "seba", str(path), "-o", "-"]) == 2  # several configs, stdout
    single = seba("one.yaml", FACE_RUN)
    assert main(["-q", "import", "seba", str(single), "-o", "-", "--data", str(tmp_path / "data")]) == 0
    assert tomllib.loads(capsys.readouterr().out)["name"] == "one"


# -------------------------------------------------------------------------------------------- end to end


def test_converted_motion_study_evaluates_on_seba_data(tmp_path):
    """A SEBA motion set (written from the synthetic walkers in SEBA's layout, millimetres) and a run config
    become a config that bioanon evaluates: both noise levels are attacked (clear and parrot) and measured."""
    pytest.importorskip("bioanon_gait")
    import json

    import numpy as np
    import yaml

    import bioanon

    walkers = bioanon.load_dataset("gait.synthetic", n_subjects=14, sequences_per_subject=6, frames=24, seed=3)
    data = tmp_path / "data"
    (data / "walkers").mkdir(parents=True)
    (data / "walkers.meta.yaml").write_text(
        yaml.safe_dump({"name": "walkers", "original": True, "trait": "motion", "fps": 30})
    )
    for k, (subject, x) in enumerate(zip(walkers.subjects, walkers.payload("pose"), strict=True)):
        frames = np.asarray(x, dtype=float).reshape(len(x), -1) * 1000.0  # marker-major x, y, z in mm
        (data / "walkers" / f"s{subject}.p{k}.mocap").write_text(json.dumps(frames.tolist()))
    path = tmp_path / "study.runconfig.yaml"
    path.write_text(
        MOTION_RUN.replace("scaling: 1.0", "scaling: 5.0")
        .replace("repeat: 3", "repeat: 1")
        .replace("ids: 20", "ids: 4")
        .replace("anonbg: 0.02, attacker: 0.88", "anonbg: 0.0, attacker: 0.5")
        .replace("enroll: 0.75", "enroll: 0.5")
    )
    [imported] = import_seba(path, fidelity=False, out_dir=tmp_path).configs
    cfg = imported.config
    cfg["dataset"]["params"]["frames"] = 24
    cfg["report"] = {"bootstrap": 0}
    toml_path = tmp_path / "study.toml"
    toml_path.write_text(to_toml(cfg))
    result = bioanon.evaluate(
        toml_path, out_dir=tmp_path / "runs", cache=tmp_path / "cache", progress=False, report=False, jobs=1
    )
    assert not result.failures
    top1 = result.metrics[(result.metrics.metric == "top1") & (result.metrics.scenario.isin(["clear", "parrot"]))]
    assert set(top1.scenario) == {"clear", "parrot"} and len(result.utility) > 0
    assert set(top1.setting) == {"scale=5.0", "scale=3.0"} and top1.value.between(0, 1).all()
    dtw = result.utility.set_index("setting").value
    assert dtw["scale=5.0"] > dtw["scale=3.0"] > 0  # the same seeded draws, scaled: farther from the clear walk


def _fidelity_options_installed() -> bool:
    import bioanon
    from bioanon.evaluation import config as config_module

    registry = bioanon.get_registry()

    def params(method_id: str) -> set[str]:
        return {f.name for f in registry.get(method_id).param_fields()} if method_id in registry else set()

    return (
        {"cv_folds", "keep", "scores"} <= params("gait.svm")
        and {"by", "order"} <= params("any.select_classification")
        and "attacker_fit" in config_module._TOP_KEYS
    )


def test_configs_with_fidelity_options_validate_once_bioanon_has_them(seba, tmp_path):
    """Runs once the SEBA fidelity options are part of bioanon (skipped before)."""
    if not _fidelity_options_installed():
        pytest.skip(
            "the SEBA fidelity options (cv_folds, keep, scores, attacker_fit, by, order) are not in this bioanon yet"
        )
    for text in (MOTION_RUN, MOTION_MIXED, MOTION_EXPERIMENT):
        for imported in import_seba(seba("f.yaml", text), out_dir=tmp_path).configs:
            _validate(imported.config, tmp_path)


def test_seba_chain_becomes_any_chain(seba, tmp_path):
    text = MOTION_RUN.split("- repeat: 3", 2)[1]  # the first entry
    text = "- repeat: 3" + text.replace(
        "anonymization: {name: noise_injection, params: {distribution: normal, scaling: 1.0, type: direct}}",
        "anonymization: {name: chain, params: {anonymizations: [{name: noise_injection, params: "
        "{distribution: normal, scaling: 1.0}}, {name: remove_parts, params: {body_parts: [head]}}]}}",
    )
    result = import_seba(seba("chain.yaml", text), fidelity=False, out_dir=tmp_path)
    [anon] = result.configs[0].config["anonymizers"]
    assert anon["id"] == "any.chain"
    assert [s["id"] for s in anon["params"]["steps"]] == ["gait.noise", "gait.remove_parts"]
    _validate(result.configs[0].config, tmp_path)


# -------------------------------------------------------------------------------------------- split sizes


def test_imported_rates_reproduce_sebas_truncated_subject_counts(seba, tmp_path):
    """SEBA's interid1to3 takes int(N · anonbg) and int(N · attacker) identities (seba.md §4): 100 identities
    with 0.02 / 0.58 give 2 / 57 / 41 (the float 100 × 0.58 is 57.99…), where bioanon's largest remainder
    gives 2 / 58 / 40. The imported config says rounding = "seba" and the split follows it."""
    import numpy as np

    from bioanon.table import SampleTable

    path = seba("r.runconfig.yaml", MOTION_RUN.replace("attacker: 0.88", "attacker: 0.58"))
    cfg = import_seba(path, fidelity=False, out_dir=tmp_path).configs[0].config
    assert cfg["rates"]["rounding"] == "seba"
    synthetic = {"source": "any.synthetic", "params": {"n_subjects": 100}}  # SEBA's 100 identities
    rates = load_config({**cfg, "dataset": synthetic}).rates
    assert rates.rounding == "seba"
    subjects = np.repeat([f"id{j:03d}" for j in range(100)], 2)
    table = SampleTable.from_arrays(
        subject=subjects,
        sample_id=[f"p{i}" for i in range(200)],
        payloads={"features": np.zeros((200, 1), np.float32)},
    )
    shares = [rates.background, rates.attacker, rates.evaluation]
    sizes = [p.num_subjects for p in table.split_subjects(shares, seed=1, rounding=rates.rounding)]
    assert sizes == [2, 57, 41]
    assert [p.num_subjects for p in table.split_subjects(shares, seed=1)] == [2, 58, 40]  # bioanon's default
    assert [p.num_subjects for p in table.split_subjects([0.57, 0.43], seed=1, rounding="seba")] == [56, 44]
    with pytest.raises(ConfigError, match="rates.rounding"):
        load_config({**cfg, "rates": {**cfg["rates"], "rounding": "nearest"}, "dataset": synthetic})


# -------------------------------------------------------------------------------------------- SEBA's face layout

_FACE_GENERATOR = (
    Path(os.environ.get("BIOANON_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data")).parent
    / "peers"
    / "seba-side-by-side"
    / "make_synthetic_faces.py"
)


def _seba_faces(data: Path, name: str, ids: int, imgs: int, size: int = 24) -> None:
    """A SEBA face set under ``data``: written by the side-by-side generator (make_synthetic_faces.py) where the
    shared peers folder is at hand, else the same layout written here (``<id>.yaml`` with ``sex``,
    ``<id>.<point>.jpg`` and ``<id>.<point>.yaml`` with a ``bbox``)."""
    import subprocess
    import sys

    if _FACE_GENERATOR.is_file():
        args = ["--data-dir", str(data), "--name", name, "--ids", str(ids), "--imgs", str(imgs), "--size", str(size)]
        subprocess.run([sys.executable, str(_FACE_GENERATOR), *args], check=True, capture_output=True)
        return
    import cv2
    import numpy as np

    folder = data / name
    folder.mkdir(parents=True)
    (data / f"{name}.meta.yaml").write_text(f"---\nname: {name}\noriginal: true\ntrait: face\n")
    rng = np.random.default_rng(0)
    for n in range(ids):
        ident = f"f{n:03d}"
        (folder / f"{ident}.yaml").write_text(f"---\nsex: {'female' if n % 2 else 'male'}\n")
        base = rng.integers(0, 256, (size, size, 3))
        for m in range(imgs):
            img = np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)
            assert cv2.imwrite(str(folder / f"{ident}.i{m:02d}.jpg"), img)
            (folder / f"{ident}.i{m:02d}.yaml").write_text("---\nbbox: {bottom: 20, left: 2, right: 21, top: 3}\n")


def test_face_seba_source_reads_sebas_flat_layout(tmp_path):
    """face.seba reads data/<set>/<id>.<point>.jpg with the identity and image YAML attributes; sample ids are
    SEBA's datapoint keys; the data folder with ``set``, the set folder and the meta file all name the set."""
    pytest.importorskip("bioanon_face")
    import bioanon
    from bioanon.errors import TableError

    data = tmp_path / "data"
    _seba_faces(data, "synthface", ids=4, imgs=3)
    table = bioanon.load_dataset("face.seba", path=data, set="synthface")
    assert len(table) == 12 and table.num_subjects == 4
    assert list(table.sample_ids[:2]) == ["f000.i00", "f000.i01"] and table.subjects[0] == "f000"
    assert table.payload("image").shape == (12, 24, 24, 3)
    assert set(table.attribute("sex")) <= {"female", "male"}
    assert '"top"' in table.attribute("bbox")[0]  # a mapping kept as JSON text
    for other in (data / "synthface", data / "synthface.meta.yaml", data):  # data: the only face set
        assert list(bioanon.load_dataset("face.seba", path=other).sample_ids) == list(table.sample_ids)
    (data / "synthface" / "f000.bad.name.jpg").write_bytes(b"")
    with pytest.raises(TableError, match=r"f000\.bad\.name\.jpg: expected SEBA's <id>\.<point>\.jpg"):
        bioanon.load_dataset("face.seba", path=data, set="synthface")
    (data / "gait.meta.yaml").write_text("---\nname: gait\ntrait: motion\n")
    with pytest.raises(TableError, match="trait is 'motion', expected 'face'"):
        bioanon.load_dataset("face.seba", path=data, set="gait")


def test_imported_face_config_validates_with_the_data(tmp_path, capsys):
    """The importer maps a SEBA face set to face.seba: `bioanon validate --data` passes on a generated set."""
    pytest.importorskip("bioanon_face")
    data = tmp_path / "data"
    _seba_faces(data, "faces", ids=10, imgs=4)
    run = tmp_path / "faces.runconfig.yaml"
    run.write_text(
        FACE_RUN.split("- repeat: 1")[1]
        .join(["- repeat: 1", ""])
        .replace("ids: 20", "ids: 3")
        .replace("anonbg: 0.02, attacker: 0.88", "anonbg: 0.2, attacker: 0.4")
    )
    out = tmp_path / "out" / "faces.toml"
    assert main(["-q", "import", "seba", str(run), "-o", str(out), "--no-fidelity", "--data", str(data)]) == 0
    config = tomllib.loads(out.read_text())
    assert config["dataset"] == {"source": "face.seba", "path": "../data", "params": {"set": "faces"}}
    capsys.readouterr()
    assert main(["-q", "validate", str(out), "--data", "--out", str(tmp_path / "runs")]) == 0, capsys.readouterr()


#: SEBA v1.0's top-1 (sklearn SVM on simple features, 20 random identities, 2/57/41 split) on the side-by-side
#: generator's gait set (make_synthetic_gait.py --ids 100 --seqs 16 --frames 150 --fps 50 --seed 0 --treadmill
#: --hitrate), measured with ../shared/peers/seba-side-by-side/run_seba.py: noise injection N(0, 1)·σ, eight runs
#: (its noise and Platt scaling are unseeded): 0.975 0.975 0.938 0.95 0.912 0.887 0.938 0.963, mean 0.942.
SEBA_NOISE_TOP1 = 0.942


@pytest.mark.slow
def test_fidelity_mode_gives_sebas_numbers_on_sebas_gait_data(tmp_path):
    """The imported noise config, with the SEBA fidelity options (best of 10 folds, predict_proba, fitted on the
    enrolment part, principal-direction signs as scikit-learn gives them), comes within 3 points of SEBA's
    mean top-1 on the same generated data; bioanon's own sign alignment attacks more strongly."""
    pytest.importorskip("bioanon_gait")
    import subprocess
    import sys

    import bioanon

    generator = _FACE_GENERATOR.with_name("make_synthetic_gait.py")
    if not generator.is_file():
        pytest.skip(f"{generator}: the side-by-side generator is not here (../shared/peers)")
    data = tmp_path / "data"
    args = "--ids 100 --seqs 16 --frames 150 --fps 50 --seed 0 --treadmill --hitrate"
    cmd = [sys.executable, str(generator), "--data-dir", str(data), "--name", "synthgait_tm", *args.split()]
    subprocess.run(cmd, check=True, capture_output=True)
    run = tmp_path / "noise.runconfig.yaml"
    run.write_text(
        MOTION_RUN.split("- repeat: 3")[1]
        .join(["- repeat: 3", ""])
        .replace("dataset: walkers", "dataset: synthgait_tm")
        .replace("attacker: 0.88", "attacker: 0.58")
    )
    [imported] = import_seba(run, data_dir=data, out_dir=tmp_path).configs
    cfg = imported.config
    assert cfg["recognizers"][0]["params"]["signs"] == "svd" and cfg["attacker_fit"] == "enrolment"
    cfg["dataset"]["params"]["frames"] = 150  # SEBA keeps the recordings' frames
    cfg["report"] = {"bootstrap": 0}
    top1 = {}
    for mode in ("seba", "bioanon"):
        if mode == "bioanon":
            cfg["recognizers"][0]["params"].pop("signs")
        path = tmp_path / f"{mode}.toml"
        path.write_text(to_toml(cfg))
        result = bioanon.evaluate(
            path, out_dir=tmp_path / "runs", cache=tmp_path / "cache", progress=False, report=False
        )
        m = result.metrics
        top1[mode] = m[(m.metric == "top1") & (m.scenario == "parrot")].value.mean()  # over the 3 repeats
    assert abs(top1["seba"] - SEBA_NOISE_TOP1) <= 0.03, top1
    assert top1["bioanon"] > top1["seba"], top1

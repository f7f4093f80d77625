"""Fuzzing the file loaders: random bytes, truncations and byte flips of valid files must give a table or one
of our errors (BioanonError, naming the file) — never another exception, a crash or a hang."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bioanon
from bioanon.errors import BioanonError

FUZZ = settings(max_examples=40, deadline=10_000, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _mutations():
    """(kind, position share, random bytes): truncate, flip bytes, or replace the file."""
    return st.tuples(st.sampled_from(["truncate", "flip", "replace"]), st.floats(0, 1), st.binary(max_size=256))


def _mutate(valid: bytes, mutation) -> bytes:
    kind, share, noise = mutation
    cut = int(share * len(valid))
    if kind == "truncate":
        return valid[:cut]
    if kind == "flip":
        return valid[:cut] + noise + valid[cut + len(noise) :]
    return noise


def _check(load) -> None:
    try:
        table = load()
    except BioanonError:
        return
    table.validate()  # a table that loads must be a valid table


def _motion_csv(root: Path) -> tuple[Path, str]:
    (root / "rec").mkdir()
    rng = np.random.default_rng(0)
    for s in ("a", "b"):
        x = rng.normal(size=(60, 3))
        lines = ["ax,ay,az"] + [",".join(f"{v:.4f}" for v in row) for row in x]
        (root / "rec" / f"{s}.csv").write_text("\n".join(lines) + "\n")
    (root / "manifest.csv").write_text("file,subject\nrec/a.csv,a\nrec/b.csv,b\n")
    return root / "rec" / "a.csv", "motion.csv"


def _gait_c3d(root: Path) -> tuple[Path, str]:
    import c3d

    w = c3d.Writer(point_rate=100.0, point_units="mm  ")
    w.set_point_labels(["LKNE", "RKNE", "C7"])
    frames = [
        (
            np.c_[np.random.default_rng(t).normal(size=(3, 3)) * 100, np.zeros((3, 2))].astype(np.float32),
            np.zeros((0, 0), np.float32),
        )
        for t in range(20)
    ]
    w.add_frames(frames)
    with open(root / "t.c3d", "wb") as fh:
        w.write(fh)
    (root / "manifest.csv").write_text("path,subject\nt.c3d,s1\n")
    return root / "t.c3d", "gait.c3d"


def _face_folder(root: Path) -> tuple[Path, str]:
    import cv2

    for s in ("p1", "p2"):
        (root / s).mkdir()
        for i in range(2):
            cv2.imwrite(str(root / s / f"{i}.png"), np.random.default_rng(i).integers(0, 255, (12, 10), np.uint8))
    return root / "p1" / "0.png", "face.folder"


def _voice_folder(root: Path) -> tuple[Path, str]:
    import soundfile as sf

    rng = np.random.default_rng(0)
    for s in ("spk1", "spk2"):
        (root / s).mkdir()
        for i in range(2):
            sf.write(root / s / f"{i}.wav", (0.1 * rng.standard_normal(800)).astype(np.float32), 8000, subtype="PCM_16")
    return root / "spk1" / "0.wav", "voice.folder"


BUILDERS = {
    "motion.csv": _motion_csv,
    "gait.c3d": _gait_c3d,
    "face.folder": _face_folder,
    "voice.folder": _voice_folder,
}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # c3d parsing corrupt bytes
@pytest.mark.parametrize("source", sorted(BUILDERS))
def test_loader_survives_corrupt_files(source):
    _fuzz_one_file(source, BUILDERS[source], {}, _check)  # the valid fixture loads or errors cleanly


def _fuzz_one_file(source, build, params, check_valid):
    """Build the fixture in a template folder, check it with ``check_valid(load)``, then load copies whose one
    fixture file is mutated: each must give a table or a BioanonError (``_check``)."""
    if source not in bioanon.get_registry():
        pytest.skip(f"{source} is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template"
        template.mkdir()
        target, _ = build(template)
        valid = target.read_bytes()
        rel = target.relative_to(template)
        check_valid(lambda: bioanon.load_dataset(source, template, **params))

        @FUZZ
        @given(mutation=_mutations())
        def fuzz(mutation):
            with tempfile.TemporaryDirectory() as case:
                root = Path(case) / "data"
                shutil.copytree(template, root)
                (root / rel).write_bytes(_mutate(valid, mutation))
                _check(lambda: bioanon.load_dataset(source, root, **params))

        fuzz()


def _voice_metadata(root: Path) -> tuple[Path, str]:
    _voice_folder(root)
    (root / "metadata.csv").write_text(
        "path,speaker,emotion,age\nspk1/0.wav,spk1,happy,30\nspk1/1.wav,spk1,sad,30\n"
        "spk2/0.wav,spk2,calm,41\nspk2/1.wav,spk2,angry,41\n"
    )
    return root / "metadata.csv", "voice.folder"


def _face_metadata(root: Path) -> tuple[Path, str]:
    _face_folder(root)
    (root / "attributes.csv").write_text("subject,age,smile\np1,30,yes\np2,41,no\np1,30,yes\n")
    return root / "attributes.csv", "face.folder"


def _motion_manifest(root: Path) -> tuple[Path, str]:
    _motion_csv(root)
    return root / "manifest.csv", "motion.csv"


METADATA_BUILDERS = {
    "voice.folder": (_voice_metadata, {}),
    "face.folder": (_face_metadata, {}),
    "motion.csv": (_motion_manifest, {"window": 20, "stride": 20}),
}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("source", sorted(METADATA_BUILDERS))
def test_loader_survives_corrupt_metadata_files(source):
    """Mutated metadata / manifest CSVs: a table or a BioanonError, never a silent crash of another kind."""
    build, params = METADATA_BUILDERS[source]
    _fuzz_one_file(source, build, params, lambda load: load().validate())  # the valid fixture loads

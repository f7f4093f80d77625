"""Hostile inputs and a full disk give one clear error naming the file (or key), exit 2, never a traceback.

Issue 33, point 8: a config nested 5000 deep, a config with a UTF-8 byte-order mark, a binary file where a data
set's text file belongs, data file names that are not UTF-8, and "no space left on device" while a run writes
its results or plots and while ``bioanon anonymize`` writes its table (what was written before stays readable).
A full disk is simulated by making the writes of the atomic writer's temp file fail with ``ENOSPC``.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from bioanon.cli import main
from bioanon.errors import BioanonError, ConfigError, TableError, WriteError
from bioanon.evaluation.config import load_config

#: Bytes that are not UTF-8 text (0x80..0xff alone are invalid start bytes).
BINARY = bytes(range(256)) * 8

#: A file name's bytes that are not UTF-8, as Python sees them (``os.fsdecode``: surrogate escapes).
NOT_UTF8 = os.fsdecode(b"caf\xe9")


def run(capsys, *args: str) -> tuple[int, str]:
    """The exit code and stderr of ``bioanon ARGS``, asserting that no traceback was printed."""
    code = main(list(args))
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return code, err


def tiny_config(**overrides) -> dict:
    """An evaluation that runs in about a second: one noise setting, one recognizer, one scenario."""
    c = {
        "name": "tiny",
        "seed": 0,
        "repeats": 1,
        "dataset": {"source": "any.synthetic", "params": {"n_subjects": 24, "samples_per_subject": 6, "dim": 8}},
        "anonymizers": [{"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [1.0]}}],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "scenarios": ["naive"],
        "selection": {"selectors": ["random"], "subject_counts": [6], "random_draws": 1},
        "report": {"bootstrap": 0},
    }
    return c | overrides


def write_config(path: Path, prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + load_config(tiny_config()).to_toml().encode("utf-8"))
    return path


# --------------------------------------------------------------------------------------------------- configs


@pytest.mark.parametrize(
    "value",
    ["[" * 5000 + "]" * 5000, "{ a = " * 5000 + "1" + " }" * 5000],
    ids=["arrays", "inline-tables"],
)
def test_a_config_nested_5000_deep_is_an_error_naming_the_file_line_and_key(tmp_path, capsys, value):
    path = tmp_path / "deep.toml"
    path.write_text(f'name = "x"\nseed = 0\nweights = {value}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    [problem] = info.value.problems
    assert problem.startswith(f"{path}:3: invalid TOML: the value of 'weights' is nested too deeply"), problem
    for extra in ([], ["--skip-bad-files"]):  # the CLI reads the file itself for --skip-bad-files
        code, err = run(capsys, "validate", str(path), *extra)
        assert code == 2 and f"{path}:3" in err and "nested too deeply" in err, (extra, err)


def test_a_utf8_byte_order_mark_at_the_start_of_a_config_is_accepted(tmp_path, capsys):
    plain = write_config(tmp_path / "plain.toml")
    bom = write_config(tmp_path / "bom.toml", prefix=b"\xef\xbb\xbf")  # what Notepad writes for "UTF-8 with BOM"
    assert load_config(bom) == load_config(plain)
    code, err = run(capsys, "validate", str(bom))
    assert code == 0, err
    utf16 = tmp_path / "utf16.toml"
    utf16.write_bytes(plain.read_text(encoding="utf-8").encode("utf-16"))
    code, err = run(capsys, "validate", str(utf16))
    assert code == 2 and f"{utf16}: is UTF-16 text; save it as UTF-8" in err


def test_a_seba_config_that_is_binary_or_nested_5000_deep_is_named(tmp_path, capsys):
    binary, deep = tmp_path / "binary.yaml", tmp_path / "deep.yaml"
    binary.write_bytes(BINARY)
    deep.write_text("runs: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    for path, why in ((binary, "not UTF-8 text"), (deep, "nested too deeply")):
        code, err = run(capsys, "import", "seba", str(path), "-o", str(tmp_path / "out.toml"))
        assert code == 2 and f"{path}: " in err and why in err, err


# --------------------------------------------------------------------------------------------------- binary data


def _ucalgary(root: Path) -> Path:
    f = root / "sub1/Run1/subject1_Seq_1_Gen_F_GeometricPositions_N.csv"
    f.parent.mkdir(parents=True)
    f.write_bytes(BINARY)
    return f


def _gait_csv(root: Path) -> Path:
    (root / "manifest.csv").write_text("path,subject\nwalk.csv,s1\n")
    (root / "walk.csv").write_bytes(b"knee_x,knee_y,knee_z\n" + BINARY)
    return root / "walk.csv"


def _gait_seba(root: Path) -> Path:
    (root / "walkers").mkdir()
    (root / "walkers.meta.yaml").write_bytes(BINARY)
    return root / "walkers.meta.yaml"


def _seba_mocap(root: Path) -> Path:
    (root / "walkers").mkdir()
    (root / "walkers.meta.yaml").write_text("trait: motion\nfps: 100\nbody_parts_to_marker: {a: [0]}\n")
    (root / "walkers" / "id0.p0.mocap").write_text("[" * 5000 + "]" * 5000)  # not binary: JSON nested 5000 deep
    return root / "walkers" / "id0.p0.mocap"


def _celeba(root: Path) -> Path:
    (root / "img_align_celeba").mkdir()
    (root / "identity_CelebA.txt").write_bytes(BINARY)
    return root / "identity_CelebA.txt"


def _audiomnist(root: Path) -> Path:
    (root / "data" / "01").mkdir(parents=True)
    (root / "data" / "audioMNIST_meta.txt").write_bytes(BINARY)
    return root / "data" / "audioMNIST_meta.txt"


@pytest.mark.parametrize(
    "source, make",
    [
        ("gait.ucalgary", _ucalgary),
        ("gait.csv", _gait_csv),
        ("gait.seba", _gait_seba),
        ("gait.seba", _seba_mocap),
        ("face.celeba", _celeba),
        ("voice.audiomnist", _audiomnist),
    ],
)
def test_a_binary_file_where_a_text_file_belongs_is_named(tmp_path, capsys, source, make):
    import bioanon

    bad = make(tmp_path)
    why = "nested too deeply" if bad.suffix == ".mocap" else "not UTF-8 text"
    with pytest.raises(BioanonError, match=why) as info:
        bioanon.load_dataset(source, tmp_path)
    assert str(bad) in str(info.value)
    code, err = run(
        capsys, "anonymize", source, str(tmp_path), "-m", "any.identity", "--out", str(tmp_path / "o.arrow")
    )
    assert code == 2 and f"{bad}: " in err and why in err, err


# --------------------------------------------------------------------------------------------------- file names


def test_file_names_that_are_not_utf8_are_named(tmp_path, capsys):
    from PIL import Image
    from scipy.io import wavfile

    import bioanon

    faces = tmp_path / "faces"
    for subject in ("p1", "p2"):
        (faces / subject).mkdir(parents=True)
        for i in range(2):
            Image.fromarray(np.full((6, 5), 40 * i, np.uint8)).save(faces / subject / f"{i}.png", format="PNG")
    Image.fromarray(np.zeros((6, 5), np.uint8)).save(faces / "p1" / f"{NOT_UTF8}.png", format="PNG")
    with pytest.raises(TableError, match=r"faces/p1/caf\\xe9\.png: the file or folder name is not valid UTF-8 text"):
        bioanon.load_dataset("face.folder", faces)
    code, err = run(
        capsys, "anonymize", "face.folder", str(faces), "-m", "any.identity", "--out", str(tmp_path / "o.arrow")
    )
    assert code == 2 and r"p1/caf\xe9.png: the file or folder name is not valid UTF-8" in err, err

    voices = tmp_path / "voices"
    for subject in ("a", "b"):
        (voices / subject).mkdir(parents=True)
        wavfile.write(voices / subject / "0.wav", 8000, np.zeros(800, np.float32))
    wavfile.write(voices / "a" / f"{NOT_UTF8}.wav", 8000, np.zeros(800, np.float32))
    with pytest.raises(BioanonError, match=r"a/caf\\xe9\.wav: the file name is not valid UTF-8"):
        bioanon.load_dataset("voice.folder", voices)
    kept = bioanon.load_dataset("voice.folder", voices, skip_bad_files=True)  # skipped and listed
    assert [s["file"] for s in kept.metadata["skipped_files"]] == [str(voices / "a" / f"{NOT_UTF8}.wav")]


# --------------------------------------------------------------------------------------------------- disk full


class _FullDiskFile:
    """A binary file on a disk that fills up: the first ``room`` bytes are written, then ENOSPC."""

    def __init__(self, inner, room: int = 64):
        self._inner, self._room = inner, room

    def write(self, data) -> int:
        data = bytes(data)
        if len(data) > self._room:
            self._inner.write(data[: self._room])
            self._room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._inner.write(data)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._inner.close()


@pytest.fixture
def full_disk(monkeypatch):
    """``full_disk(*names)``: from now on, atomic writes of a file whose name contains one of ``names`` fail
    like writes to a full disk (the temp file's write raises ENOSPC); every other write works."""
    real_mkstemp, real_fdopen = tempfile.mkstemp, os.fdopen
    doomed: set[int] = set()
    names: list[str] = []

    def mkstemp(*args, **kwargs):
        fd, tmp = real_mkstemp(*args, **kwargs)
        if any(n in os.path.basename(tmp) for n in names):
            doomed.add(fd)
        return fd, tmp

    def fdopen(fd, *args, **kwargs):
        f = real_fdopen(fd, *args, **kwargs)
        if fd in doomed:
            doomed.discard(fd)
            return _FullDiskFile(f)
        return f

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(os, "fdopen", fdopen)
    return lambda *more: names.extend(more)


def _no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.rglob(".*") if p.name != ".lock"]


def test_disk_full_while_a_run_writes_results_or_plots(tmp_path, capsys, full_disk):
    toml = write_config(tmp_path / "eval.toml")
    out, cache = tmp_path / "out", tmp_path / "cache"
    common = ["--out", str(out), "--cache-dir", str(cache), "--run-id", "r"]
    code, err = run(capsys, "evaluate", str(toml), *common)
    assert code == 0, err
    run_dir = out / "r"
    metrics, plots = (run_dir / "metrics.parquet").read_bytes(), sorted((run_dir / "plots").glob("*.png"))
    assert plots
    before = {p: p.read_bytes() for p in plots}

    full_disk("metrics.parquet", ".png")
    code, err = run(capsys, "evaluate", str(toml), *common)  # every task is cached: only the writes are left
    assert code == 2, err
    assert f"{run_dir / 'metrics.parquet'}: cannot write the file: disk full" in err, err
    assert (run_dir / "metrics.parquet").read_bytes() == metrics  # the earlier results stay whole
    code, err = run(capsys, "report", str(run_dir), "--force")  # unchanged results: only --force draws again
    assert code == 2 and f"{run_dir / 'plots'}" in err and ".png: cannot write the file: disk full" in err, err
    assert {p: p.read_bytes() for p in plots} == before
    assert _no_temp_files(run_dir)


def test_disk_full_while_anonymize_writes_a_table(tmp_path, capsys, full_disk):
    from bioanon.table import SampleTable

    out = tmp_path / "anon.arrow"
    args = ["anonymize", "any.synthetic", "-d", "n_subjects=4", "-m", "any.gaussian_noise", "--out", str(out)]
    code, err = run(capsys, *args)
    assert code == 0, err
    written, before = SampleTable.load(out), out.read_bytes()
    full_disk("anon.arrow")
    code, err = run(capsys, *args, "-o", "sigma=3")
    assert code == 2 and f"{out}: cannot write the file: disk full" in err, err
    assert out.read_bytes() == before and len(SampleTable.load(out)) == len(written)  # the earlier table stays
    assert _no_temp_files(tmp_path)
    with pytest.raises(WriteError, match="disk full") as info:
        written.save(out)
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC


def test_disk_full_while_anonymize_writes_a_folder_of_images(tmp_path, capsys, monkeypatch):
    from PIL import Image

    def save(self, fp, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Image.Image, "save", save)
    out = tmp_path / "blurred"
    code, err = run(capsys, "anonymize", "face.synthetic", "-m", "any.identity", "--out", str(out))
    assert code == 2 and f"{out}: cannot write the file: disk full" in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no partial folder, no temp folder

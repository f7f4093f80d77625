"""The set-up's disk-space check (tools/free_space.py, run by `make setup` and `make setup-demo` before pip): it
refuses with a message naming the folder and the figures where the disk lacks room, counts what the venv already
takes, and checks pip's temporary-files folder on its own where that is another filesystem."""

from __future__ import annotations

import importlib.util
from collections import namedtuple
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3
Usage = namedtuple("Usage", "total used free")


@pytest.fixture(scope="module")
def free_space():
    spec = importlib.util.spec_from_file_location("free_space_under_test", ROOT / "tools" / "free_space.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free(monkeypatch, free_space, gib_by_folder):
    """Make ``shutil.disk_usage`` report ``gib_by_folder[folder]`` GiB free (the first folder that is a parent)."""

    def usage(path):
        path = Path(path).resolve()
        for folder, gib in gib_by_folder.items():
            if path == folder.resolve() or folder.resolve() in path.parents:
                return Usage(10_000 * GIB, 0, int(gib * GIB))
        raise AssertionError(f"disk_usage asked about {path}, outside the test's folders")

    monkeypatch.setattr(free_space.shutil, "disk_usage", usage)


def test_refuses_naming_the_venv_and_the_figures(free_space, tmp_path, monkeypatch, capsys):
    _free(monkeypatch, free_space, {tmp_path: 3.0})
    venv = tmp_path / "not-yet" / ".venv"
    assert free_space.main(["--need-gib", "7.5", "--what", "the full set-up", str(venv), "--temp-dir",
                            str(tmp_path)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "the full set-up" in err and str(venv) in err
    assert "9.00 GiB" in err and "3.00 GiB is free" in err  # 7.5 for the venv + 1.5 for pip's temporary files
    assert "SPACE_CHECK=no" in err and "VENV=" in err
    assert not venv.exists()  # the check creates nothing


def test_room_enough_passes_and_zero_checks_nothing(free_space, tmp_path, monkeypatch):
    _free(monkeypatch, free_space, {tmp_path: 9.5})
    assert free_space.shortfalls(tmp_path / ".venv", 7.5, temp_dir=tmp_path) == []
    _free(monkeypatch, free_space, {tmp_path: 0.0})
    assert free_space.shortfalls(tmp_path / ".venv", 0, temp_dir=tmp_path) == []
    assert free_space.main(["--need-gib", "0", str(tmp_path / ".venv")]) == 0


def test_what_the_venv_already_takes_counts(free_space, tmp_path, monkeypatch):
    venv = tmp_path / ".venv"
    (venv / "lib").mkdir(parents=True)
    need, mib = 0.02, 1024**2  # GiB: 20.5 MiB for the venv and as much for pip's temporary files (the lesser)
    _free(monkeypatch, free_space, {tmp_path: 0.03})  # 30.7 MiB free
    assert free_space.shortfalls(venv, need, temp_dir=tmp_path)  # 41 MiB needed
    (venv / "lib" / "lib.so").write_bytes(b"\0" * (16 * mib))
    assert free_space.folder_bytes(venv) == 16 * mib
    assert free_space.shortfalls(venv, need, temp_dir=tmp_path) == []  # 41 - 16 = 25 MiB needed


def test_a_separate_temporary_filesystem_is_checked_on_its_own(free_space, tmp_path, monkeypatch):
    venv_disk, temp_disk = tmp_path / "venv-disk", tmp_path / "temp-disk"
    venv_disk.mkdir()
    temp_disk.mkdir()
    monkeypatch.setattr(free_space, "_device", lambda path: 1 if venv_disk in [path, *path.parents] else 2)
    _free(monkeypatch, free_space, {venv_disk: 8.0, temp_disk: 0.5})
    missing = free_space.shortfalls(venv_disk / ".venv", 7.5, temp_dir=temp_disk)
    assert len(missing) == 1 and str(temp_disk) in missing[0] and "TMPDIR" in missing[0]
    _free(monkeypatch, free_space, {venv_disk: 7.0, temp_disk: 2.0})
    missing = free_space.shortfalls(venv_disk / ".venv", 7.5, temp_dir=temp_disk)
    assert len(missing) == 1 and str(venv_disk / ".venv") in missing[0]


def test_the_makefile_checks_before_each_set_up_installs(free_space):
    """Both set-ups run the check before their first pip install, and SPACE_CHECK=no skips it."""
    makefile = (ROOT / "Makefile").read_text()
    for stamp in ("$(STAMP):", "$(LEAN_STAMP):"):
        recipe = makefile.split(stamp, 1)[1].split("\n\n", 1)[0]
        assert recipe.index("$(FREE_SPACE)") < recipe.index("$(PIP) install")
    assert '[ "$(SPACE_CHECK)" = no ] ||' in makefile

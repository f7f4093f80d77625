"""The distributions stand alone: `make dist`'s sdists and wheels pass `twine check`, and core + one plugin
install from those files into a clean virtual environment where the CLI, a tiny evaluation and a plugin made by
`bioanon new-plugin` all work (slow: builds six projects and a venv)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = {
    "bioanon": ROOT,
    "bioanon-face": ROOT / "plugins/face",
    "bioanon-gait": ROOT / "plugins/gait",
    "bioanon-voice": ROOT / "plugins/voice",
    "bioanon-motion": ROOT / "plugins/motion",
    "bioanon-example": ROOT / "examples/plugin-template",
}

TINY = """
name = "tiny"
seed = 0
repeats = 1
scenarios = ["naive", "parrot"]
[dataset]
source = "motion.synthetic"
params = { n_subjects = 8, windows_per_subject = 6 }
[rates]
background = 0.25
attacker = 0.375
evaluation = 0.375
enrolment = 0.5
[[anonymizers]]
id = "motion.gaussian_noise"
grid = { sigma = [0.5] }
[[recognizers]]
id = "motion.lda"
[report]
bootstrap = 0
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """What `make dist` builds: an sdist and a wheel of every project (the wheel built from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    for name, project in PROJECTS.items():
        build = subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(project)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert build.returncode == 0, f"building {name} failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    return out


def test_every_project_builds_an_sdist_and_a_wheel_that_pass_twine(dist):
    files = sorted(p.name for p in dist.iterdir())
    for name in PROJECTS:
        norm = name.replace("-", "_")
        assert f"{norm}-0.1.0.tar.gz" in files and f"{norm}-0.1.0-py3-none-any.whl" in files, (name, files)
    check = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("name", list(PROJECTS))
def test_wheel_metadata(dist, name):
    norm = name.replace("-", "_")
    with zipfile.ZipFile(dist / f"{norm}-0.1.0-py3-none-any.whl") as whl:
        members = whl.namelist()
        meta = whl.read(f"{norm}-0.1.0.dist-info/METADATA").decode()
    assert f"{norm}-0.1.0.dist-info/licenses/LICENSE" in members
    package = "bioanon" if name == "bioanon" else norm
    assert f"{package}/py.typed" in members
    assert "License-Expression: MIT" in meta
    assert "Classifier: Typing :: Typed" in meta
    assert "Description-Content-Type: text/markdown" in meta
    assert meta.split("\n\n", 1)[1].lstrip().startswith(f"# {name}")  # the README is the long description
    if name != "bioanon-example":
        assert "Project-URL: Source, " in meta
    pyproject = tomllib.loads((PROJECTS[name] / "pyproject.toml").read_text())["project"]
    extras = pyproject.get("optional-dependencies", {})
    if name == "bioanon":
        assert {"face", "gait", "voice", "motion", "all", "torch"} <= set(extras)
        assert extras["face"] == ["bioanon-face"]
    elif name != "bioanon-example":  # every trait plugin has torch-backed methods, under one extra name
        assert any(dep.startswith("torch") for dep in extras["torch"])
        assert not set(extras) - {"torch", "dlib", "asr"}, extras  # face: dlib; voice: asr (pocketsphinx)


def test_licence_copies_are_the_root_licence():
    text = (ROOT / "LICENSE").read_text()
    assert "MIT License" in text
    for project in PROJECTS.values():
        assert (project / "LICENSE").read_text() == text, project


@pytest.fixture(scope="module")
def clean_venv(dist, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A new virtual environment with the core and bioanon-motion installed from the built files, the way a
    user would: ``pip install 'bioanon[motion]' --find-links dist``."""
    home = tmp_path_factory.mktemp("venv")
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "BIOANON", "VIRTUAL_ENV"))}
    env |= {
        "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "BIOANON_CACHE": str(home / "cache"),
        "BIOANON_JOBS": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    _run(
        [
            str(venv / "bin/python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--find-links",
            str(dist),
            "bioanon[motion]",
            "pytest>=8",
            "hypothesis>=6.100",
        ],
        home,
        env,
        timeout=900,
    )
    return venv, env


def test_core_and_plugin_work_from_the_wheels_in_a_clean_venv(clean_venv, tmp_path):
    venv, env = clean_venv
    py = str(venv / "bin/python")
    where = _run(
        [py, "-c", "import bioanon, bioanon_motion; print(bioanon.__file__); print(bioanon_motion.__file__)"],
        tmp_path,
        env,
    )
    assert all(line.startswith(str(venv)) for line in where.split()), where  # not the clone's editable code
    plugins = _run([str(venv / "bin/bioanon"), "plugins"], tmp_path, env)
    assert "bioanon-motion" in plugins and "loaded" in plugins
    assert "bioanon-face" not in plugins
    methods = _run([str(venv / "bin/bioanon"), "methods"], tmp_path, env)
    assert "motion.random_set_mean" in methods and "any.random_set_mean" in methods
    # the examples travel with the wheel: listed, copied, and found by path from any directory
    assert "quickstart" in _run([str(venv / "bin/bioanon"), "init"], tmp_path, env)
    _run([str(venv / "bin/bioanon"), "init", "quickstart", "cfg"], tmp_path, env)
    assert (tmp_path / "cfg/quickstart.toml").is_file()
    path = _run([py, "-c", "import bioanon; print(bioanon.example('quickstart'))"], tmp_path, env).strip()
    assert path.startswith(str(venv)) and Path(path).is_file()
    # a tiny evaluation, end to end
    (tmp_path / "tiny.toml").write_text(TINY)
    _run([str(venv / "bin/bioanon"), "evaluate", "tiny.toml", "--out", "results"], tmp_path, env)
    reports = list((tmp_path / "results").glob("tiny-*/report.html"))
    assert len(reports) == 1


def test_new_plugin_installs_beside_the_core_wheel_and_passes_conformance(clean_venv, dist, tmp_path):
    venv, env = clean_venv
    bioanon = str(venv / "bin/bioanon")
    _run([bioanon, "new-plugin", "acme"], tmp_path, env)
    project = tmp_path / "bioanon-acme"
    assert (project / "bioanon_acme/plugin.py").is_file() and (project / "README.md").is_file()
    _run(
        [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--find-links", str(dist), str(project)],
        tmp_path,
        env,
        timeout=900,
    )
    listed = _run([bioanon, "methods", "acme.*"], tmp_path, env)
    assert "acme.quantize" in listed and "acme.nearest_neighbour" in listed
    assert "bioanon-acme" in _run([bioanon, "plugins"], tmp_path, env)
    tests = _run(
        [str(venv / "bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests")],
        tmp_path,
        env,
    )
    assert re.search(r"\b\d+ passed\b", tests) and "conformance: " in tests, tests  # _run checked the exit status

"""bioanon's pytest plugin loads only where a project asks for it (``pytest_plugins`` or ``-p``)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _stale_entry_point(cwd: Path) -> list[str]:
    """``-p no:bioanon`` while the installed metadata, as a pytest started in ``cwd`` sees it, still has the old
    ``pytest11`` entry point (an editable install made before it was removed; ``pip install -e .`` refreshes
    it): it blocks what a fresh install no longer has, so the runs below see what users get."""
    code = (
        "import importlib.metadata as md; "
        "print(any(ep.value == 'bioanon.testing' for ep in md.entry_points(group='pytest11')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120)
    return ["-p", "no:bioanon"] if out.stdout.strip() == "True" else []


def test_the_distribution_declares_no_pytest_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "pytest11" not in project.get("entry-points", {})


def _pytest_plugins(conftest: Path) -> list[str]:
    for node in ast.parse(conftest.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytest_plugins" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def _addopts(project: Path) -> str:
    return tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"][
        "addopts"
    ]


def test_bioanon_tests_and_the_plugin_template_opt_in():
    assert "bioanon.testing" in _pytest_plugins(ROOT / "tests" / "conftest.py")
    assert "-p bioanon.testing" in _addopts(ROOT / "examples" / "plugin-template")


def test_a_generated_plugin_opts_in_and_its_tests_get_the_fixtures(tmp_path):
    from bioanon.scaffold import new_plugin

    project = new_plugin("acme", tmp_path / "bioanon-acme")
    assert "-p bioanon.testing" in _addopts(project)
    (project / "tests" / "test_fixture.py").write_text(
        "def test_uses_a_bioanon_fixture(tiny_table):\n    assert len(tiny_table) > 0\n"
    )
    for where, args in ((project, ["tests/test_fixture.py"]), (tmp_path, ["bioanon-acme/tests/test_fixture.py"])):
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_stale_entry_point(where), *args]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=where, timeout=300)
        assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr


def test_other_projects_do_not_get_the_plugin_unless_they_ask(tmp_path):
    """A fresh pytest in a project outside bioanon: no bioanon fixtures or summary line by default; with
    ``-p bioanon.testing`` they are there."""
    (tmp_path / "test_other.py").write_text(
        textwrap.dedent("""
        def test_uses_a_bioanon_fixture(tiny_table):
            assert len(tiny_table) > 0
    """)
    )
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tmp_path),
        *_stale_entry_point(tmp_path),
        str(tmp_path),
    ]
    plain = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert plain.returncode == 1 and "fixture 'tiny_table' not found" in plain.stdout, plain.stdout
    assert "bioanon conformance" not in plain.stdout
    asked = subprocess.run(cmd + ["-p", "bioanon.testing"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert asked.returncode == 0, asked.stdout + asked.stderr

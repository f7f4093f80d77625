"""`bioanon init` (the example configs travel with the package) and `bioanon new-plugin` (a project made from
the plugin template)."""

from __future__ import annotations

import ast
import importlib
import re
import sys
import tomllib
from pathlib import Path

import pytest

import bioanon
from bioanon import scaffold
from bioanon.cli import main
from bioanon.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_every_example_config_is_listed_with_a_summary_and_parses():
    found = {e.name: e for e in scaffold.examples()}
    assert set(found) == {p.stem for p in (ROOT / "examples").glob("*.toml")}
    for e in found.values():
        assert e.summary and not e.summary.endswith((".", ":")), e
        assert "." in e.source, e
        tomllib.loads(e.path.read_text())
    assert found["quickstart"].data_path is None and found["quickstart"].plugin == "bioanon"
    assert found["face-orl"].data_path and found["face-orl"].plugin == "bioanon-face"


def test_example_path_and_unknown_name():
    assert bioanon.example("quickstart") == bioanon.example("quickstart.toml")
    assert bioanon.example("quickstart").is_file()
    with pytest.raises(ConfigError, match="unknown example 'nope'.*quickstart"):
        bioanon.example("nope")


def test_init_writes_a_copy_and_never_overwrites(tmp_path):
    target, hint = scaffold.write_example("quickstart", tmp_path / "cfg")
    assert hint is None and target == tmp_path / "cfg/quickstart.toml"
    original = bioanon.example("quickstart").read_text()
    assert tomllib.loads(target.read_text()) == tomllib.loads(original)
    assert f"bioanon evaluate {target}" in target.read_text()
    with pytest.raises(ConfigError, match="exists; pass --force"):
        scaffold.write_example("quickstart", tmp_path / "cfg")
    target.write_text("changed")
    scaffold.write_example("quickstart", tmp_path / "cfg", force=True)
    assert target.read_text() != "changed"


def test_init_points_a_recorded_data_example_at_the_given_folder(tmp_path):
    data = tmp_path / "my faces"
    data.mkdir()
    target, hint = scaffold.write_example("face-orl", tmp_path, data=data)
    assert hint is None
    config = tomllib.loads(target.read_text())
    original = tomllib.loads(bioanon.example("face-orl").read_text())
    assert config["dataset"]["path"] == str(data.resolve())
    config["dataset"].pop("path"), original["dataset"].pop("path")
    assert config == original  # nothing else changed


def test_init_says_when_the_data_folder_still_needs_setting(tmp_path, monkeypatch):
    fake = tmp_path / "examples"
    fake.mkdir()
    (fake / "mine.toml").write_text(
        '# Mine: a test\nname = "mine"\n[dataset]\nsource = "face.orl"\npath = "../nowhere"   # relative to this file\n'
    )
    monkeypatch.setattr(scaffold, "examples_dir", lambda: fake)
    target, hint = scaffold.write_example("mine", tmp_path / "out")
    assert hint and "set [dataset] path" in hint and "face.orl" in hint
    assert tomllib.loads(target.read_text())["dataset"]["path"] == "../nowhere"


def test_init_cli(tmp_path, capsys):
    assert main(["init"]) == 0
    listing = capsys.readouterr().out
    assert "quickstart" in listing and "built-in data" in listing and "bioanon-face" in listing
    assert main(["init", "quickstart", str(tmp_path)]) == 0
    assert f"wrote {tmp_path / 'quickstart.toml'}" in capsys.readouterr().out
    assert main(["init", "quickstart", str(tmp_path)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["init", "no-such-example"]) == 2


def test_new_plugin_is_the_template_renamed(tmp_path):
    project = scaffold.new_plugin("acme_lab", tmp_path / "proj")
    files = sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file())
    template = sorted(
        p.relative_to(scaffold.template_dir()).as_posix().replace("bioanon_example", "bioanon_acme_lab")
        for p in scaffold.template_dir().rglob("*")
        if p.is_file()
        and not any(
            part in scaffold._SKIP or part.endswith(".egg-info")
            for part in p.relative_to(scaffold.template_dir()).parts
        )
        and p.suffix != ".pyc"
    )
    assert files == template and "bioanon_acme_lab/plugin.py" in files and "README.md" in files
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "bioanon-acme-lab"
    assert meta["entry-points"]["bioanon.plugins"] == {"bioanon_acme_lab": "bioanon_acme_lab.plugin"}
    for path in project.rglob("*.py"):
        text = path.read_text()
        ast.parse(text)
        assert "bioanon_example" not in text and '"example.' not in text, path
    assert "acme_lab.quantize" in (project / "README.md").read_text()


def test_new_plugin_methods_pass_the_conformance_suite(tmp_path, monkeypatch):
    from bioanon.testing import check_method

    scaffold.new_plugin("acme", tmp_path / "bioanon-acme")
    monkeypatch.syspath_prepend(str(tmp_path / "bioanon-acme"))
    try:
        anonymizers = importlib.import_module("bioanon_acme.anonymizers")
        recognizers = importlib.import_module("bioanon_acme.recognizers")
        assert anonymizers.Quantize.id == "acme.quantize" and anonymizers.Quantize.trait == "acme"
        for cls in (anonymizers.Quantize, recognizers.NearestNeighbour):
            check_method(cls).raise_for_failures()
    finally:
        for name in [m for m in sys.modules if m.startswith("bioanon_acme")]:
            del sys.modules[name]


@pytest.mark.parametrize("name", ["Acme", "1acme", "ac-me", "", "any", "example", "x" * 41])
def test_new_plugin_rejects_bad_names(tmp_path, name):
    with pytest.raises(ConfigError, match="plugin name"):
        scaffold.new_plugin(name, tmp_path / "p")


def test_new_plugin_never_writes_into_a_non_empty_folder(tmp_path, capsys):
    (tmp_path / "p").mkdir()
    (tmp_path / "p/keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty"):
        scaffold.new_plugin("acme", tmp_path / "p")
    assert (tmp_path / "p/keep.txt").read_text() == "mine"
    assert main(["new-plugin", "acme", str(tmp_path / "q")]) == 0
    assert "created" in capsys.readouterr().out and (tmp_path / "q/pyproject.toml").is_file()


def test_new_plugin_gets_its_author_description_and_own_ids(tmp_path):
    import datetime

    description = 'Anonymizers of ECG "features" \\ beats'
    project = scaffold.new_plugin("ecg", tmp_path / "p", author="Ada Lovelace", description=description)
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["authors"] == [{"name": "Ada Lovelace"}] and meta["description"] == description
    assert any(d.startswith("pytest") for d in meta["optional-dependencies"]["test"])
    year = datetime.date.today().year
    assert f"Copyright (c) {year} Ada Lovelace\n" in (project / "LICENSE").read_text()
    readme = (project / "README.md").read_text()
    assert readme.startswith(f"# bioanon-ecg\n\n{description} (by Ada Lovelace)\n")
    assert "bioanon describe ecg.quantize" in readme and "pip install -e '.[test]'" in readme
    package = ast.parse((project / "bioanon_ecg/__init__.py").read_text())
    assert ast.get_docstring(package) == f"bioanon-ecg: {description}."
    for path in project.rglob("*"):
        if path.is_file() and path.suffix != ".typed":
            text = path.read_text()
            assert "The bioanon developers" not in text, path
            assert not re.search(r"(?<![\w-])example\.", text), (path, re.findall(r".*example\..*", text))
    with pytest.raises(ConfigError, match=r"--author \(author=\) is empty"):
        scaffold.new_plugin("ecg", tmp_path / "q", author="  ")


def test_the_default_author_is_gits_user_name_else_a_placeholder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside any repository
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    (tmp_path / "gitconfig").write_text("")
    assert scaffold.default_author() == scaffold.PLACEHOLDER_AUTHOR
    (tmp_path / "gitconfig").write_text("[user]\n\tname = Grace Hopper\n")
    assert scaffold.default_author() == "Grace Hopper"
    project = scaffold.new_plugin("acme", tmp_path / "p")
    assert tomllib.loads((project / "pyproject.toml").read_text())["project"]["authors"] == [{"name": "Grace Hopper"}]


def test_new_plugin_command_says_how_to_install_its_test_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(scaffold, "default_author", lambda: scaffold.PLACEHOLDER_AUTHOR)
    assert main(["new-plugin", "acme", str(tmp_path / "a b"), "--description", "Acme methods"]) == 0
    out = capsys.readouterr().out
    assert (
        f"next: cd '{tmp_path / 'a b'}' && pip install -e '.[test]' && bioanon methods 'acme.*' && pytest tests" in out
    )
    assert "note: the author is 'Your Name'" in out and "--author" in out
    assert main(["new-plugin", "acme", str(tmp_path / "b"), "--author", "Ada"]) == 0
    assert "note:" not in capsys.readouterr().out


def test_a_generated_projects_own_tests_pass(tmp_path):
    """The generated project's tests, run as its README says (pytest in the project), with this interpreter: the
    project is made importable and its entry point visible through a dist-info folder (no install, no network)."""
    import os
    import subprocess

    project = scaffold.new_plugin("acme", tmp_path / "bioanon-acme", author="Ada", description="Acme methods")
    site = tmp_path / "site"
    info = site / "bioanon_acme-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bioanon-acme\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[bioanon.plugins]\nbioanon_acme = bioanon_acme.plugin\n")
    path = os.pathsep.join([str(project), str(site), *sys.path])
    env = os.environ | {"PYTHONPATH": path}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=project, env=env, timeout=300)
    assert out.returncode == 0 and re.search(r"\b5 passed\b", out.stdout), out.stdout + out.stderr

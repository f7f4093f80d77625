"""`bioanon demo --trait T`: each trait plugin's synthetic source declares its own demo (``DatasetSource.demo``),
which runs that plugin's methods, needs no optional package (no torch) and warns about nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any, ClassVar

import pytest

import bioanon
from bioanon.api import DatasetSource, hookimpl
from bioanon.cli import main
from bioanon.errors import ConfigError
from bioanon.evaluation.config import load_config
from bioanon.evaluation.demo import demo_config

TRAITS = ("face", "gait", "voice", "motion")
OPTIONAL = ("torch", "timm", "torchvision", "dlib", "face_recognition_models", "pocketsphinx", "resemblyzer")


def _trait_config(trait: str) -> dict[str, Any]:
    registry = bioanon.get_registry()
    if f"{trait}.synthetic" not in registry:
        pytest.skip(f"bioanon-{trait} is not installed")
    return demo_config(trait, registry)


def _methods(cfg: dict[str, Any]) -> list[str]:
    return [m["id"] for section in ("anonymizers", "recognizers", "utility") for m in cfg[section]]


@pytest.mark.parametrize("trait", TRAITS)
def test_a_trait_demo_runs_its_plugins_own_methods_without_optional_packages(trait):
    cfg = _trait_config(trait)
    registry = bioanon.get_registry()
    assert cfg["dataset"]["source"] == f"{trait}.synthetic" and cfg["name"] == f"demo-{trait}"
    for section in ("anonymizers", "recognizers", "utility"):
        assert cfg[section], section
    for method_id in _methods(cfg):
        assert method_id.startswith(f"{trait}."), (trait, method_id)
        entry = registry[method_id]
        assert entry.distribution == f"bioanon-{trait}", (method_id, entry.distribution)
        assert not entry.cls.requires, f"{method_id} needs {entry.cls.requires}: the lean `make demo` lacks them"
    # the config is valid as it stands (ids, parameters, attribute names), without loading the data
    load_config(cfg, registry=registry)


def test_the_default_demo_is_the_cores():
    cfg = demo_config("any", bioanon.get_registry())
    assert cfg["dataset"]["source"] == "any.synthetic"
    assert all(m.startswith("any.") for m in _methods(cfg))


def test_plugins_says_which_torch_to_install_where_torch_is_missing(capsys, monkeypatch):
    """What `make demo` shows first, in its environment without torch: the methods that need it, and which torch
    build to install (the CPU one on a machine without an NVIDIA GPU)."""
    monkeypatch.setitem(sys.modules, "torch", None)  # not importable, as in the demo's lean set-up
    assert main(["plugins"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # wrapped lines joined
    assert "any.mlp_inversion needs torch, which is not installed" in out
    assert "Every other method runs without them (so does `bioanon demo`)" in out
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in out


class _NoDemo(DatasetSource):
    """A synthetic source of a plugin written before API 1.8: no demo declared."""

    id: ClassVar[str] = "olddemo.synthetic"
    needs_path: ClassVar[bool] = False
    attribute_names: ClassVar[tuple[str, ...] | None] = ("group", "activity")

    def load(self, path=None):
        from bioanon.testing import make_table

        return make_table(n_subjects=30, samples_per_subject=6)


class _BadDemo(_NoDemo):
    """A demo declaration with a misspelt section and without recognizers."""

    id: ClassVar[str] = "baddemo.synthetic"
    demo: ClassVar[dict[str, Any] | None] = {"anonymizers": [], "utility": [], "recognisers": []}


class _Plugin:
    @hookimpl
    def register_datasets(self, register):
        register(_NoDemo)
        register(_BadDemo)


def test_a_source_without_a_demo_gets_the_cores_methods_and_a_bad_one_is_named(register_bioanon_plugin):
    registry = register_bioanon_plugin(_Plugin(), "demos")
    cfg = demo_config("olddemo", registry)
    assert cfg["dataset"] == {"source": "olddemo.synthetic", "params": {}}
    assert all(m.startswith("any.") for m in _methods(cfg))
    with pytest.raises(ConfigError, match=r"baddemo\.synthetic .*unknown sections \['recognisers'\].*'recognizers'"):
        demo_config("baddemo", registry)


_RUN = textwrap.dedent("""
    import json, logging, sys, warnings
    import bioanon
    from bioanon.evaluation.demo import demo_config

    logged = []
    class Keep(logging.Handler):
        def emit(self, record):
            logged.append(record.getMessage())
    logging.getLogger("bioanon").addHandler(Keep(logging.WARNING))
    found = {}
    for trait in sys.argv[1].split(","):
        cfg = demo_config(trait, bioanon.get_registry())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = bioanon.evaluate(cfg, out_dir=None, cache=sys.argv[2], progress=False)
        found[trait] = {
            "warnings": result.warnings,
            "python_warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
            "logged": logged[:],
            "failures": [f["error"] for f in result.failures],
        }
        logged.clear()
    found["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[3].split(","))
    print(json.dumps(found))
""")


@pytest.mark.slow
def test_every_trait_demo_warns_about_nothing_and_imports_no_optional_package(tmp_path):
    """Each trait's whole demo as `bioanon demo --trait T` runs it (in one fresh interpreter, on one process so
    that every method runs in it): no warning about its config (subject counts the evaluation set reaches,
    attackers strong on the clear data), none from Python, and none of torch, timm, dlib or pocketsphinx
    imported (the lean `make demo` installs none of them)."""
    traits = [t for t in TRAITS if f"{t}.synthetic" in bioanon.get_registry()]
    if not traits:
        pytest.skip("no trait plugin is installed")
    out = subprocess.run(
        [sys.executable, "-c", _RUN, ",".join(traits), str(tmp_path / "cache"), ",".join(OPTIONAL)],
        capture_output=True,
        text=True,
        env={**os.environ, "BIOANON_JOBS": "1"},
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.splitlines()[-1])
    clean = {"warnings": [], "python_warnings": [], "logged": [], "failures": []}
    assert {t: found[t] for t in traits} == dict.fromkeys(traits, clean)
    assert found["modules"] == []

"""The core imports without torch, and the distributions are laid out as documented."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys

CODE = """
import sys
sys.modules['torch'] = None  # any 'import torch' now raises ImportError
import bioanon, bioanon.cli, bioanon.table, bioanon.cache, bioanon.metrics, bioanon.testing
from bioanon.plugins import PluginManager
registry = PluginManager(strict=True).registry
assert len(registry) > 0
t = bioanon.load_dataset('any.synthetic')
bioanon.get_method('any.gaussian_noise').transform(t)
print('ok', len(registry))
"""


def test_core_imports_and_loads_plugins_without_torch():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_distributions_and_entry_points():
    eps = {ep.name: ep for ep in md.entry_points(group="bioanon.plugins")}
    for trait in ("face", "gait", "voice", "motion"):
        ep = eps[f"bioanon_{trait}"]
        assert ep.value == f"bioanon_{trait}.plugin"
        assert ep.dist.name == f"bioanon-{trait}"
    assert md.distribution("bioanon").version
    import bioanon

    assert bioanon.__file__.replace("\\", "/").endswith("core/__init__.py")


def test_every_core_subpackage_is_packaged():
    """A subpackage missing from [tool.setuptools] packages would be absent from a wheel."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    setup = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    found = {
        "bioanon" + ("." + ".".join(p.parent.relative_to(root / "core").parts) if p.parent != root / "core" else "")
        for p in (root / "core").rglob("__init__.py")
    }
    mapped = {name for name, folder in setup["package-dir"].items() if folder != "core"}  # e.g. bioanon.examples
    assert all((root / setup["package-dir"][name] / "__init__.py").is_file() for name in mapped)
    assert found | mapped == listed

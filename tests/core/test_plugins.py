"""Plugin discovery through real entry points, guarded loading and the switches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bioanon
from bioanon.errors import PluginError
from bioanon.plugins import PluginLoadWarning, PluginManager

GOOD_PLUGIN = '''
import attrs
from typing import ClassVar
import bioanon
from bioanon import Anonymizer, param

@attrs.define(kw_only=True)
class Invert(Anonymizer):
    """Negate every feature (a toy third-party anonymizer)."""
    id: ClassVar[str] = "{trait}.invert"
    trait: ClassVar[str] = "{trait}"
    payloads: ClassVar[tuple] = ("features",)
    scale: float = param(1.0, help="multiplier", low=0.0)

    def transform(self, table):
        return table.with_payload("features", -self.scale * table.payload("features"))

@bioanon.hookimpl
def register_anonymizers(register):
    register(Invert, aliases=("{trait}.negate",))
'''


def make_dist(site: Path, dist: str, module: str, code: str, version: str = "0.3.1") -> None:
    """Write an importable module and a real .dist-info with a bioanon.plugins entry point."""
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text("")
    (site / module / "plugin.py").write_text(textwrap.dedent(code))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    ep_name = dist.replace("-", "_")
    (info / "entry_points.txt").write_text(f"[bioanon.plugins]\n{ep_name} = {module}.plugin\n")
    (info / "RECORD").write_text("")


def run_cli(args: list[str], site: Path, **env: str) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(site) + os.pathsep + e.get("PYTHONPATH", "")
    for k in ("BIOANON_STRICT_PLUGINS", "BIOANON_DISABLE_PLUGINS", "BIOANON_DISABLE_PLUGIN_AUTOLOAD"):
        e.pop(k, None)
    e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "bioanon.cli", *args], capture_output=True, text=True, env=e, timeout=120
    )


@pytest.fixture
def site(tmp_path, monkeypatch):
    s = tmp_path / "site"
    s.mkdir()
    monkeypatch.syspath_prepend(str(s))
    for k in ("BIOANON_STRICT_PLUGINS", "BIOANON_DISABLE_PLUGINS", "BIOANON_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(k, raising=False)
    _forget_modules()
    yield s
    _forget_modules()


def _forget_modules() -> None:
    """Each test writes its own modules under the same names: drop the previous test's imports."""
    import importlib

    for name in [m for m in sys.modules if m.split(".")[0] in ("bioanon_toy", "bioanon_broken")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def test_third_party_plugin_is_discovered(site):
    make_dist(site, "bioanon-toy", "bioanon_toy", GOOD_PLUGIN.format(trait="toy"))
    pm = PluginManager()
    assert "toy.invert" in pm.registry and "toy.negate" in pm.registry
    status = {s.name: s for s in pm.statuses}["bioanon_toy"]
    assert status.status == "loaded" and status.version == "0.3.1" and status.methods == {"anonymizer": 1}
    assert pm.registry["toy.invert"].distribution == "bioanon-toy"

    out = run_cli(["plugins", "--json"], site)
    assert out.returncode == 0, out.stderr
    rows = {r["distribution"]: r for r in json.loads(out.stdout)}
    assert rows["bioanon-toy"]["status"] == "loaded" and rows["bioanon-toy"]["n_methods"] == 1
    out = run_cli(["methods", "toy.*"], site)
    assert out.returncode == 0 and "toy.invert" in out.stdout
    out = run_cli(["describe", "toy.invert"], site)
    assert "multiplier" in out.stdout and "bioanon-toy" in out.stdout


def test_the_four_trait_plugins_load():
    pm = PluginManager(autoload=True, disabled=(), strict=True)
    names = {s.distribution: s.status for s in pm.statuses}
    for trait in ("face", "gait", "voice", "motion"):
        assert names.get(f"bioanon-{trait}") == "loaded", names


BROKEN = {
    "import_error": "import no_such_module_anywhere\n",
    "duplicate_id": GOOD_PLUGIN.format(trait="any").replace('"any.invert"', '"any.gaussian_noise"'),
    "bad_signature": "import bioanon\n@bioanon.hookimpl\ndef register_anonymizers(register, nonsense):\n    pass\n",
    "unknown_hook": "import bioanon\n@bioanon.hookimpl\ndef register_anonymisers(register):\n    pass\n",
    "not_a_class": "import bioanon\n@bioanon.hookimpl\ndef register_anonymizers(register):\n    register(object())\n",
    "raises": "import bioanon\n@bioanon.hookimpl\ndef register_recognizers(register):\n    raise RuntimeError('boom')\n",
}
EXPECTED = {
    "import_error": "ModuleNotFoundError: No module named 'no_such_module_anywhere'",
    "duplicate_id": "duplicate method id 'any.gaussian_noise': registered by both bioanon and bioanon-broken",
    "bad_signature": "nonsense",
    "unknown_hook": "register_anonymisers",
    "not_a_class": "register() takes a class",
    "raises": "RuntimeError: boom",
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_plugin_is_reported_and_skipped(site, case):
    make_dist(site, "bioanon-broken", "bioanon_broken", BROKEN[case])
    make_dist(site, "bioanon-toy", "bioanon_toy", GOOD_PLUGIN.format(trait="toy"))
    with pytest.warns(PluginLoadWarning) as rec:
        pm = PluginManager()
        registry = pm.registry
    assert "toy.invert" in registry, "a broken plugin must not stop the others"
    status = {s.name: s for s in pm.statuses}["bioanon_broken"]
    assert status.status == "failed"
    assert EXPECTED[case] in status.error
    line = status.report_line()
    assert "bioanon-broken" in line and "0.3.1" in line and "BIOANON_DISABLE_PLUGINS=bioanon_broken" in line
    assert "\n" not in line
    assert any("bioanon-broken" in str(w.message) for w in rec)
    if case == "duplicate_id":
        assert registry["any.gaussian_noise"].distribution == "bioanon"

    with pytest.raises(PluginError, match="BIOANON_STRICT_PLUGINS"):
        PluginManager(strict=True).registry

    out = run_cli(["plugins"], site)
    assert out.returncode == 0
    assert "bioanon-broken" in out.stderr and "failed" in out.stdout
    out = run_cli(["plugins"], site, BIOANON_STRICT_PLUGINS="1")
    assert out.returncode != 0 and "bioanon-broken" in out.stderr


def test_switches(site, monkeypatch):
    make_dist(site, "bioanon-toy", "bioanon_toy", GOOD_PLUGIN.format(trait="toy"))
    monkeypatch.setenv("BIOANON_DISABLE_PLUGINS", "bioanon-toy, something_else")
    pm = PluginManager()
    assert "toy.invert" not in pm.registry
    assert {s.name: s.status for s in pm.statuses}["bioanon_toy"] == "disabled"
    monkeypatch.delenv("BIOANON_DISABLE_PLUGINS")
    monkeypatch.setenv("BIOANON_DISABLE_PLUGIN_AUTOLOAD", "1")
    pm = PluginManager()
    assert "toy.invert" not in pm.registry and "any.gaussian_noise" in pm.registry
    assert [s.name for s in pm.statuses] == ["bioanon"]
    out = run_cli(["plugins", "--all", "--json"], site, BIOANON_DISABLE_PLUGINS="bioanon_toy")
    assert {r["name"]: r["status"] for r in json.loads(out.stdout)}["bioanon_toy"] == "disabled"


def test_register_plugin_in_code(register_bioanon_plugin, monkeypatch):
    import types

    mod = types.ModuleType("inline_plugin")
    monkeypatch.setitem(sys.modules, "inline_plugin", mod)
    exec(GOOD_PLUGIN.format(trait="inline"), mod.__dict__)
    registry = register_bioanon_plugin(mod, "inline")
    assert registry.get("inline.invert").id == "inline.invert"
    assert bioanon.list_methods("inline.*") == ["inline.invert"]
    m = bioanon.get_method("inline.negate", scale=2)
    assert m.scale == 2.0


def test_builtin_methods_register_through_hooks(bioanon_plugin_manager):
    impls = bioanon_plugin_manager.pluggy_manager.hook.register_anonymizers.get_hookimpls()
    assert [i.plugin_name for i in impls] == ["bioanon"]
    assert {"any.identity", "any.gaussian_noise"} <= set(bioanon.list_methods(kind="anonymizer"))


def test_parameter_named_like_a_class_attribute_is_rejected(register_bioanon_plugin):
    import types

    code = GOOD_PLUGIN.format(trait="clash").replace(
        'scale: float = param(1.0, help="multiplier", low=0.0)',
        'scale: float = param(1.0, help="multiplier", low=0.0)\n    distribution: str = param("normal", help="x")')
    mod = types.ModuleType("clash_plugin")
    sys.modules["clash_plugin"] = mod
    try:
        exec(code, mod.__dict__)
        with pytest.warns(PluginLoadWarning, match="clash with attributes of Anonymizer"):
            registry = register_bioanon_plugin(mod, "clash")
        assert "clash.invert" not in registry
    finally:
        del sys.modules["clash_plugin"]

"""Plugin discovery through real entry points, guarded loading and the switches."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bioanon
from bioanon._version import API_VERSION
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
    "raises": "import bioanon\n@bioanon.hookimpl\ndef register_recognizers(register):\n"
    "    raise RuntimeError('boom')\n",
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
        _ = PluginManager(strict=True).registry

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
        'scale: float = param(1.0, help="multiplier", low=0.0)\n    distribution: str = param("normal", help="x")',
    )
    mod = types.ModuleType("clash_plugin")
    sys.modules["clash_plugin"] = mod
    try:
        exec(code, mod.__dict__)
        with pytest.warns(PluginLoadWarning, match="clash with attributes of Anonymizer"):
            registry = register_bioanon_plugin(mod, "clash")
        assert "clash.invert" not in registry
    finally:
        del sys.modules["clash_plugin"]


# --------------------------------------------------------------------------------------------- API compatibility

INCOMPATIBLE_NOTE = f"needs bioanon API >=2.0,<3; this bioanon provides {API_VERSION}"


def _status(pm, name="bioanon_toy"):
    return {s.name: s for s in pm.statuses}[name]


def test_a_plugin_declaring_a_compatible_range_loads_and_shows_it(site):
    make_dist(site, "bioanon-toy", "bioanon_toy", 'BIOANON_API = ">=1.0,<2"\n' + GOOD_PLUGIN.format(trait="toy"))
    pm = PluginManager()
    status = _status(pm)
    assert status.status == "loaded" and status.api == ">=1.0,<2" and "toy.invert" in pm.registry
    out = run_cli(["plugins"], site)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("bioanon-toy "))
    assert ">=1.0,<2" in row and "declares no API range" not in row
    assert out.stdout.splitlines()[0].split() == ["distribution", "version", "status", "methods", "API", "note"]


def test_a_plugin_without_a_range_loads_as_before(site):
    make_dist(site, "bioanon-toy", "bioanon_toy", GOOD_PLUGIN.format(trait="toy"))
    pm = PluginManager(strict=True)
    assert _status(pm).status == "loaded" and _status(pm).api is None and "toy.invert" in pm.registry
    out = run_cli(["plugins"], site)
    row = next(line for line in out.stdout.splitlines() if line.startswith("bioanon-toy "))
    assert "loaded" in row and "declares no API range" in row


@pytest.mark.parametrize("fails_to_import", [False, True], ids=["imports", "import_fails"])
def test_an_incompatible_plugin_is_listed_not_loaded(site, fails_to_import):
    code = 'BIOANON_API = ">=2.0,<3"\n' + GOOD_PLUGIN.format(trait="toy")
    if fails_to_import:  # it needs a name this API lacks
        code = "from bioanon.api import NameOfApiTwo\n" + code
    make_dist(site, "bioanon-toy", "bioanon_toy", code)
    with pytest.warns(PluginLoadWarning, match="bioanon-toy 0.3.1 .* is incompatible: " + INCOMPATIBLE_NOTE):
        pm = PluginManager()
        registry = pm.registry
    status = _status(pm)
    assert (status.status, status.error, status.api) == ("incompatible", INCOMPATIBLE_NOTE, ">=2.0,<3")
    assert "toy.invert" not in registry and "any.gaussian_noise" in registry
    assert pm.pluggy_manager.get_plugin("bioanon_toy") is None, "its hooks must not be registered"
    assert status in pm.failures and "BIOANON_DISABLE_PLUGINS=bioanon_toy" in status.report_line()
    with pytest.raises(PluginError, match="is incompatible: .*BIOANON_STRICT_PLUGINS"):
        _ = PluginManager(strict=True).registry

    out = run_cli(["plugins"], site)
    assert out.returncode == 0 and "Traceback" not in out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("bioanon-toy "))
    assert "incompatible" in row and ">=2.0,<3" in row and "needs bioanon API" in row
    assert "is incompatible: " + INCOMPATIBLE_NOTE in " ".join(out.stderr.split())
    rows = {r["name"]: r for r in json.loads(run_cli(["plugins", "--json"], site).stdout)}
    assert rows["bioanon_toy"]["status"] == "incompatible" and rows["bioanon_toy"]["error"] == INCOMPATIBLE_NOTE
    out = run_cli(["methods", "toy.*"], site)  # other commands work, with the one-line report
    assert out.returncode == 0 and "is incompatible" in out.stderr and "Traceback" not in out.stderr
    out = run_cli(["plugins"], site, BIOANON_STRICT_PLUGINS="1")
    assert out.returncode == 2 and "bioanon-toy" in out.stderr and "incompatible" in out.stderr
    assert "Traceback" not in out.stderr


def test_an_incompatible_plugin_whose_package_fails_to_import_is_read_without_running_it(site):
    """The range is read from the source: neither the package nor the module is executed again."""
    make_dist(site, "bioanon-toy", "bioanon_toy", 'BIOANON_API = "~=2.1"\nraise SystemExit("executed")\n')
    (site / "bioanon_toy" / "__init__.py").write_text("from bioanon.api import NameOfApiTwo\n")
    with pytest.warns(PluginLoadWarning):
        pm = PluginManager()
        _ = pm.registry
    assert _status(pm).status == "incompatible"
    assert _status(pm).error == f"needs bioanon API ~=2.1; this bioanon provides {API_VERSION}"


def test_an_import_failure_of_a_compatible_plugin_is_reported_as_before(site):
    make_dist(site, "bioanon-toy", "bioanon_toy", 'BIOANON_API = ">=1.0"\nimport no_such_module_anywhere\n')
    with pytest.warns(PluginLoadWarning):
        pm = PluginManager()
        _ = pm.registry
    status = _status(pm)
    assert status.status == "failed" and "No module named 'no_such_module_anywhere'" in status.error
    assert status.api == ">=1.0"


@pytest.mark.parametrize(
    ("declared", "note"),
    [
        ('">=one"', "BIOANON_API = '>=one' is not a PEP 440 version range such as '>=1.0,<2'"),
        ('""', "BIOANON_API = '' is not a PEP 440 version range"),
        ("1.0", "BIOANON_API = 1.0 is not a PEP 440 version range"),
    ],
)
def test_a_malformed_range_is_a_broken_plugin(site, declared, note):
    make_dist(site, "bioanon-toy", "bioanon_toy", f"BIOANON_API = {declared}\n" + GOOD_PLUGIN.format(trait="toy"))
    with pytest.warns(PluginLoadWarning, match="failed to load"):
        pm = PluginManager()
        registry = pm.registry
    assert _status(pm).status == "failed" and note in _status(pm).error and "toy.invert" not in registry
    with pytest.raises(PluginError, match="BIOANON_STRICT_PLUGINS"):
        _ = PluginManager(strict=True).registry


def test_a_plugin_object_registered_in_code_is_checked_too(bioanon_plugin_manager):
    class Plugin:
        BIOANON_API = ">=1.99,<2"

        @bioanon.hookimpl
        def register_anonymizers(self, register):
            raise AssertionError("an incompatible plugin's hooks must not run")

    with pytest.warns(PluginLoadWarning, match=f"needs bioanon API >=1.99,<2; this bioanon provides {API_VERSION}"):
        bioanon_plugin_manager.register_plugin(Plugin(), "future")
        _ = bioanon_plugin_manager.registry
    assert _status(bioanon_plugin_manager, "future").status == "incompatible"


def test_when_the_api_moves_on_the_builtin_plugins_are_listed_incompatible(monkeypatch):
    """The trait plugins' declared ranges are real: under a bioanon API 2.0 they are skipped, never a crash."""
    import bioanon.plugins as plugins_module

    monkeypatch.setattr(plugins_module, "API_VERSION", "2.0")
    with pytest.warns(PluginLoadWarning):
        pm = PluginManager(autoload=True, disabled=(), strict=False)
        registry = pm.registry
    statuses = {s.distribution: s for s in pm.statuses}
    for trait in ("face", "gait", "voice", "motion"):
        s = statuses[f"bioanon-{trait}"]
        assert s.status == "incompatible" and s.error.startswith("needs bioanon API >=1.")
        assert s.error.endswith(",<2; this bioanon provides 2.0")
        assert not registry.find([f"{trait}.*"])
    assert statuses["bioanon"].status == "loaded" and "any.gaussian_noise" in registry


def test_source_api_reads_literals_without_importing(tmp_path, monkeypatch):
    from bioanon.plugins import source_api

    pkg = tmp_path / "bioanon_srcapi"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('the package must not run')\n")
    (pkg / "annotated.py").write_text('BIOANON_API: str = ">=1.0,<2"\n')
    (pkg / "computed.py").write_text('BIOANON_API = ">=" + "1.0"\n')
    (pkg / "none.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert source_api("bioanon_srcapi.annotated") == ">=1.0,<2"
    assert source_api("bioanon_srcapi.annotated:plugin_object") == ">=1.0,<2"
    assert source_api("bioanon_srcapi.computed") is None
    assert source_api("bioanon_srcapi.none") is None
    assert source_api("bioanon_srcapi.missing") is None and source_api("no_such_package_anywhere.x") is None
    assert "bioanon_srcapi" not in sys.modules


def test_the_builtin_plugins_declare_the_current_api():
    from importlib.metadata import entry_points

    from bioanon.api import API_VERSION
    from bioanon.plugins import api_compatibility, source_api

    eps = {ep.name: ep for ep in entry_points(group="bioanon.plugins")}
    for name in ("bioanon_face", "bioanon_gait", "bioanon_voice", "bioanon_motion", "bioanon_example"):
        declared = source_api(eps[name].value)
        newest = int(API_VERSION.split(".")[1])
        assert declared in tuple(f">=1.{minor},<2" for minor in range(newest + 1)), name  # the minor each needs
        assert api_compatibility(declared) == (None, True), (name, API_VERSION)


# ------------------------------------------------------------------------------------------ register_commands

COMMAND_PLUGIN = """
from bioanon.api import BioanonError, hookimpl

BIOANON_API = ">=1.0,<2"

def hello(args):
    if args.name == "error":
        raise BioanonError("hello: no greeting for 'error'")
    print(f"hello {args.name}")
    return 3

@hookimpl
def register_commands(subparsers):
    p = subparsers.add_parser("{command}", help="say hello from a plugin")
    p.add_argument("--name", default="world")
    p.set_defaults(func=hello)
    {more}
"""


def _command_plugin(name: str, command: str = "hello", more: str = "") -> object:
    import types

    mod = types.ModuleType(name)
    exec(COMMAND_PLUGIN.replace("{command}", command).replace("{more}", more), mod.__dict__)
    return mod


def _cli(capsys, *args):
    from bioanon.cli import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_plugin_command_runs_through_the_cli(register_bioanon_plugin, capsys):
    register_bioanon_plugin(_command_plugin("hello_plugin"), "hello_plugin", distribution="bioanon-hello")
    code, out, err = _cli(capsys, "hello", "--name", "plugin")
    assert (code, out, err) == (3, "hello plugin\n", "")
    code, out, err = _cli(capsys, "hello", "--name", "error")
    assert code == 2 and err == "bioanon: error: hello: no greeting for 'error'\n"
    with pytest.raises(SystemExit) as exit_:
        _cli(capsys, "--help")
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and re.search(r"^ +hello +say hello from a plugin$", out, re.M), out
    code, out, _ = _cli(capsys, "plugins", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["hello_plugin"]["commands"] == ["hello"] and rows["hello_plugin"]["error"] is None


@pytest.mark.parametrize("command", ["plugins", "describe"])
def test_a_command_clashing_with_a_core_command_is_not_added(register_bioanon_plugin, capsys, command):
    # it adds a good command first: all or nothing, so that one is rolled back too
    more = f'q = subparsers.add_parser("extra", help="x")\n    subparsers.add_parser("{command}", help="clash")'
    register_bioanon_plugin(_command_plugin("clash_plugin", more=more), "clash_plugin", distribution="bioanon-clash")
    note = f"command {command!r} is already a bioanon command; none of its commands were added"
    code, out, err = _cli(capsys, "plugins")
    assert code == 0 and "Traceback" not in err
    row = next(line for line in out.splitlines() if line.startswith("bioanon-clash "))
    assert "loaded" in row and f"command {command!r}" in row  # listed loaded: its methods stay available
    rows = {r["name"]: r for r in json.loads(_cli(capsys, "plugins", "--json")[1])}
    assert rows["clash_plugin"]["error"] == note and rows["clash_plugin"]["commands"] == []
    assert f"bioanon-clash 0 (clash_plugin) could not add its commands: {note}" in " ".join(err.split())
    code, out, err = _cli(capsys, "describe", "any.identity")  # the core command is the core's
    assert code == 0 and "any.identity" in out and "could not add its commands" in " ".join(err.split())
    for gone in ("hello", "extra"):
        with pytest.raises(SystemExit) as exit_:
            _cli(capsys, gone)
        assert exit_.value.code == 2 and "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _cli(capsys, "--help")
    help_text = capsys.readouterr().out
    assert "say hello from a plugin" not in help_text and "clash" not in help_text


def test_a_command_clashing_with_an_earlier_plugin_names_it(register_bioanon_plugin, capsys):
    register_bioanon_plugin(_command_plugin("first_plugin"), "first_plugin", distribution="bioanon-first")
    register_bioanon_plugin(_command_plugin("second_plugin"), "second_plugin", distribution="bioanon-second")
    code, out, err = _cli(capsys, "hello")
    assert code == 3 and out == "hello world\n"
    assert (
        "bioanon-second 0 (second_plugin) could not add its commands: command 'hello' is already a command of "
        "bioanon-first" in " ".join(err.split())
    )


def test_a_command_clash_is_fatal_when_strict(capsys):
    from bioanon.plugins import reset_plugin_manager

    pm = PluginManager(autoload=False, disabled=(), strict=True)
    pm.register_plugin(_command_plugin("clash_plugin", command="methods"), "clash_plugin")
    old = reset_plugin_manager(pm)
    try:
        code, out, err = _cli(capsys, "datasets")
    finally:
        reset_plugin_manager(old)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith(
        "bioanon: error: bioanon: plugin clash_plugin 0 (clash_plugin) could not add its commands: "
        "command 'methods' is already a bioanon command"
    )
    assert "BIOANON_STRICT_PLUGINS" in err


def test_a_plugin_command_from_an_installed_distribution(site):
    code = COMMAND_PLUGIN.replace("{command}", "toy-hello").replace("{more}", "")
    make_dist(site, "bioanon-toy", "bioanon_toy", code)
    out = run_cli(["toy-hello", "--name", "dist"], site, BIOANON_STRICT_PLUGINS="1")
    assert (out.returncode, out.stdout, out.stderr) == (3, "hello dist\n", "")
    out = run_cli(["--help"], site)
    assert "toy-hello" in out.stdout and "say hello from a plugin" in out.stdout

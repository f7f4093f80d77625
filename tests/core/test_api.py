"""bioanon.api: the plugin authors' surface is complete, light to import, and the only bioanon module that the
built-in plugins and the plugin template import."""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from pathlib import Path

import pytest
from freshimports import modules_after

import bioanon
import bioanon.api as api
from bioanon import hookspecs

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_FILES = sorted(
    [p for p in ROOT.glob("plugins/*/bioanon_*/**/*.py")]
    + list(ROOT.glob("examples/plugin-template/bioanon_example/**/*.py"))
    + list(ROOT.glob("examples/plugin-template/tests/**/*.py"))
)
HEAVY = ("torch", "sklearn", "scipy", "matplotlib")


def internal_imports(source: str) -> list[tuple[int, str]]:
    """(line, statement) of every import of a bioanon module other than bioanon.api."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "bioanon":  # `from bioanon import api` is the API module too
                names = [f"bioanon.{a.name}" for a in node.names]
        else:
            continue
        bad = [n for n in names if (n == "bioanon" or n.startswith("bioanon.")) and n != "bioanon.api"]
        if bad:
            out.append((node.lineno, ast.unparse(node)))
    return out


@pytest.mark.parametrize(
    ("code", "bad"),
    [
        ("import bioanon\n", True),
        ("import numpy, bioanon.table\n", True),
        ("from bioanon import param\n", True),
        ("def f():\n    from bioanon.nettrain import infer\n", True),
        ("from bioanon.builtin.recognizers import PcaSvm\n", True),
        ("from bioanon.api import param, hookimpl\n", False),
        ("import bioanon.api\n", False),
        ("from bioanon import api\n", False),
        ("import bioanon_face.sources\nfrom . import anonymizers\n", False),
    ],
)
def test_the_import_scan_finds_internal_imports(code, bad):
    assert bool(internal_imports(code)) is bad


def test_plugins_and_template_import_only_bioanon_api():
    assert len(PLUGIN_FILES) > 40 and any("plugin-template/tests" in str(p) for p in PLUGIN_FILES)
    offenders = [
        f"{p.relative_to(ROOT)}:{line}: {stmt}"
        for p in PLUGIN_FILES
        for line, stmt in internal_imports(p.read_text(encoding="utf-8"))
    ]
    assert not offenders, "import these names from bioanon.api instead:\n" + "\n".join(offenders)


def test_every_name_of_the_api_resolves():
    assert len(api.__all__) == len(set(api.__all__))
    assert set(api._LAZY) <= set(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert set(api.__all__) <= set(dir(api))
    with pytest.raises(AttributeError, match="bioanon.api.*'no_such_name'"):
        api.no_such_name  # noqa: B018
    # the same objects as the internal modules: nothing wrapped or copied
    for name, (module, attr) in api._LAZY.items():
        target = importlib.import_module(module)
        assert getattr(api, name) is (target if attr is None else getattr(target, attr)), name
    assert api.Anonymizer is bioanon.Anonymizer and api.hookimpl is bioanon.hookimpl
    assert api.testing.check_method is api.check_method
    assert api.API_VERSION.count(".") == 1 and all(p.isdigit() for p in api.API_VERSION.split("."))


def test_the_template_and_the_builtin_plugins_find_what_they_import():
    """Everything the plugins import from bioanon.api exists (the scan above finds no other source)."""
    wanted = {
        a.name
        for p in PLUGIN_FILES
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == "bioanon.api"
        for a in node.names
    }
    assert wanted and wanted <= set(api.__all__), wanted - set(api.__all__)


def test_importing_the_api_is_light():
    loaded = modules_after("import bioanon.api")
    heavy = sorted(m for m in loaded if m.split(".")[0] in (*HEAVY, "pytest", "pyarrow"))
    assert not heavy, f"import bioanon.api imported {heavy}"
    assert not {"bioanon.table", "bioanon.nettrain", "bioanon.testing"} & loaded
    # a plugin's entry-point module imports hookimpl only: no more than `import bioanon`
    extra = modules_after("from bioanon.api import hookimpl, Anonymizer, param") - modules_after("import bioanon")
    assert extra == {"bioanon.api"}, f"bioanon.api imports more than `import bioanon` does: make {extra} lazy"
    # the conformance suite does not need a heavy library either
    loaded = modules_after("from bioanon.api import check_method, make_table, SampleTable")
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]


def test_hooks_are_documented_like_pytest_hooks():
    for name in [*hookspecs.REGISTER_HOOKS, *hookspecs.OTHER_HOOKS]:
        fn = getattr(hookspecs, name)
        doc = inspect.getdoc(fn)
        for part in (":param ", ":returns:", "Called ", "Conflicts:"):
            assert part in doc, f"{name}: no {part!r} in its docstring"
        hints = typing.get_type_hints(fn)
        assert hints.pop("return") is type(None) and hints, f"{name}: parameters without types"


def test_register_protocol_matches_the_real_callback(register_bioanon_plugin):
    """The typed Register / RegisterFeatures describe the callbacks the loader really passes."""
    import types

    plugin = types.ModuleType("capture_register")
    plugin.seen = seen = {}
    exec(
        "from bioanon.api import hookimpl\n"
        "@hookimpl\ndef register_anonymizers(register):\n    seen['register'] = register\n"
        "@hookimpl\ndef register_payload_features(register):\n    seen['features'] = register\n",
        plugin.__dict__,
    )
    register_bioanon_plugin(plugin, "capture")
    for protocol, real in ((api.Register, seen["register"]), (api.RegisterFeatures, seen["features"])):
        want = list(inspect.signature(protocol.__call__).parameters.values())[1:]
        got = [p for p in inspect.signature(real).parameters.values() if not p.name.startswith("_")]
        assert [(p.name, p.kind, p.default) for p in want] == [(p.name, p.kind, p.default) for p in got]
        assert issubclass(protocol, typing.Protocol)


def test_a_string_of_aliases_is_rejected(register_bioanon_plugin):
    import types

    from bioanon.plugins import PluginLoadWarning

    plugin = types.ModuleType("string_aliases")
    exec(
        "import attrs\nfrom typing import ClassVar\nfrom bioanon.api import Anonymizer, hookimpl\n"
        "@attrs.define(kw_only=True)\nclass Same(Anonymizer):\n    id: ClassVar[str] = 'alias.same'\n"
        "    payloads: ClassVar[tuple] = ('features',)\n    def transform(self, table):\n        return table\n"
        "@hookimpl\ndef register_anonymizers(register):\n    register(Same, aliases='alias.other')\n",
        plugin.__dict__,
    )
    with pytest.warns(PluginLoadWarning, match="aliases must be a tuple of ids such as \\('alias.other',\\)"):
        registry = register_bioanon_plugin(plugin, "aliases")
    assert "alias.same" not in registry and "a" not in registry

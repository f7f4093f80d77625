"""Light and honest discovery (issue 17): registering every plugin imports no heavy optional library, and a method
whose optional packages are missing is still listed, as unavailable with the command that installs them; creating
or running it says the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from typing import ClassVar

import attrs
import pytest

import bioanon
from bioanon import Anonymizer, param
from bioanon.cli import main
from bioanon.errors import MissingDependencyError
from bioanon.methods import _importable, _resolve
from bioanon.plugins import PluginLoadWarning

# optional or heavy libraries some method imports when it runs: registration must import none of them
HEAVY = (
    "dlib",
    "face_recognition_models",
    "pkg_resources",
    "torch",
    "timm",
    "sklearn",
    "scipy",
    "cv2",
    "pywt",
    "librosa",
    "soundfile",
    "pandas",
    "matplotlib",
    "pyarrow",
    "PIL",
    "resemblyzer",
    "webrtcvad",
)


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), err  # wrapped lines joined


def test_registering_every_plugin_imports_no_heavy_library():
    # packaging: the plugins' plain API ranges (">=1.0,<2") are checked without it (~10 ms to import)
    code = (
        "import json, sys, bioanon; from bioanon.cli import main; r = bioanon.get_registry(); "
        "main(['plugins']); "
        f"print(json.dumps([len(r), [m for m in {HEAVY + ('packaging',)!r} if m in sys.modules]]))"
    )
    disabling = ("BIOANON_DISABLE_PLUGINS", "BIOANON_DISABLE_PLUGIN_AUTOLOAD")
    env = {k: v for k, v in os.environ.items() if k not in disabling}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120)
    n_methods, imported = json.loads(out.stdout.splitlines()[-1])
    assert imported == [] and n_methods > 100
    for trait in ("face", "gait", "voice", "motion"):
        assert f"bioanon-{trait}" in out.stdout


@attrs.define(kw_only=True)
class NeedsMissingPackage(Anonymizer):
    """An anonymizer that imports a package which is not installed."""

    id: ClassVar[str] = "test.needs_missing"
    trait: ClassVar[str] = "test"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    requires: ClassVar[dict[str, str]] = {"bioanon_no_such_package": "pip install no-such-package"}
    scale: float = param(1.0, help="multiplier", low=0.0)

    def transform(self, table):
        import bioanon_no_such_package  # noqa: F401

        return table


class MissingPlugin:
    @bioanon.hookimpl
    def register_anonymizers(self, register):
        register(NeedsMissingPackage)


def test_an_unavailable_plugin_method_registers_and_fails_clearly_on_use(register_bioanon_plugin, capsys, tmp_path):
    from bioanon.testing import check_method

    registry = register_bioanon_plugin(MissingPlugin(), "missing")
    assert "test.needs_missing" in registry
    assert registry.unavailable() == {"test.needs_missing": {"bioanon_no_such_package": "pip install no-such-package"}}
    msg = "test.needs_missing needs bioanon_no_such_package, which is not installed: pip install no-such-package"
    with pytest.raises(MissingDependencyError, match=msg):
        bioanon.get_method("test.needs_missing")
    code, out, err = run(
        capsys, "anonymize", "any.synthetic", "-m", "test.needs_missing", "--out", str(tmp_path / "x.arrow")
    )
    assert code == 2 and msg in " ".join(err.split()) and not (tmp_path / "x.arrow").exists()
    # the conformance suite checks what runs without the package and skips the behaviour, saying why
    report = check_method(NeedsMissingPackage)
    assert report.ok and ("behaviour", msg) in report.skipped


def test_requirements_are_looked_up_without_importing(tmp_path, monkeypatch):
    pkg = tmp_path / "bioanon_probe_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "mod.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _importable("bioanon_probe_pkg") and _importable("bioanon_probe_pkg.mod")
    assert _importable("bioanon_probe_pkg.sub")  # a folder (namespace portion), as cv2/face in opencv-contrib
    assert not _importable("bioanon_probe_pkg.nothing") and not _importable("bioanon_no_such_package.mod")
    assert "bioanon_probe_pkg" not in sys.modules
    monkeypatch.setitem(sys.modules, "bioanon_probe_pkg", None)  # blocked: so are its submodules
    assert not _importable("bioanon_probe_pkg.mod")
    assert _importable("json.decoder") and not _importable("json.no_such_module")


def test_param_types_match_get_type_hints_for_every_registered_method():
    """Registration resolves only the parameters' annotations; the answer is typing.get_type_hints'."""
    for entry in bioanon.get_registry().values():
        cls = entry.cls
        hints = typing.get_type_hints(cls)
        expected = {f.name: hints[f.name] if f.name in hints else _resolve(cls, f.type) for f in cls.param_fields()}
        assert cls.param_types() == expected, cls.id


BAD_DEFAULT_PLUGIN = '''
import attrs
from typing import ClassVar
import bioanon
from bioanon import Anonymizer, param

@attrs.define(kw_only=True)
class Negative(Anonymizer):
    """A default outside its own range."""
    id: ClassVar[str] = "bad.negative"
    trait: ClassVar[str] = "bad"
    scale: float = param(-1.0, help="multiplier", low=0.0)

@bioanon.hookimpl
def register_anonymizers(register):
    register(Negative)
'''


def test_a_default_that_fails_its_own_validation_is_still_caught_at_registration(register_bioanon_plugin, monkeypatch):
    import types

    mod = types.ModuleType("bad_default_plugin")
    monkeypatch.setitem(sys.modules, "bad_default_plugin", mod)
    exec(BAD_DEFAULT_PLUGIN, mod.__dict__)
    with pytest.warns(
        PluginLoadWarning,
        match=r"bad.negative: constructing with default parameters failed: "
        r"bad.negative: parameter 'scale' = -1.0 is invalid",
    ):
        registry = register_bioanon_plugin(mod, "bad")
    assert "bad.negative" not in registry


def test_plain_api_ranges_are_checked_as_packaging_does():
    from packaging.specifiers import SpecifierSet

    from bioanon.plugins import _plain_range_contains, api_compatibility

    ranges = [
        ">=1.0,<2",
        ">=1.1,<2",
        ">=2.0,<3",
        "<1",
        "<1.0",
        "<=1",
        ">1.0",
        ">0.9",
        "==1.0",
        "==1.0.0",
        "!=1.0",
        " >= 1.0 , < 2 ",
        ">=1.0, <2, !=1.5",
        "<2.0.0.0",
        ">=0",
    ]
    for declared in ranges:
        for version in ("1.0", "1.1", "1", "1.0.0", "2.0", "0.9", "10.2"):
            expected = SpecifierSet(declared).contains(version, prereleases=True)
            assert _plain_range_contains(declared, version) is expected, (declared, version)
    for other in ("~=1.0", "==1.*", ">=1.0rc1", "1.0", ">=1.0,", ">=one"):  # left to packaging
        assert _plain_range_contains(other, "1.0") is None
    assert api_compatibility("~=2.1")[1] is False and api_compatibility(">=1.0,") == (None, True)
    assert api_compatibility(">=one")[0].endswith("(Invalid specifier: '>=one')")

"""One error hierarchy: what bioanon raises on user input is a BioanonError naming the method, parameter or file.

A static check walks the core, the built-in plugins and the plugin template with ``ast`` and fails on a bare
``raise ValueError/TypeError/KeyError/RuntimeError/ImportError`` outside :data:`ALLOWED`; the other tests raise a few
representative user errors and catch them as ``bioanon.errors.BioanonError``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import numpy as np
import pytest

import bioanon
from bioanon.errors import BioanonError, DataError, NotFittedError, ParameterError, require_fitted
from bioanon.testing import make_table

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    list(ROOT.glob("core/**/*.py"))
    + list(ROOT.glob("plugins/*/bioanon_*/**/*.py"))
    + list(ROOT.glob("examples/plugin-template/bioanon_example/**/*.py"))
)
BUILTINS = {"ValueError", "TypeError", "KeyError", "RuntimeError", "ImportError"}  # ImportError: MissingDependencyError

#: (file, enclosing function, builtin) -> why a bare builtin is right there. Programming errors that users of
#: bioanon (running methods, evaluations, the CLI) cannot cause, or a Python protocol that requires the builtin.
ALLOWED: dict[tuple[str, str, str], str] = {
    (
        "core/arrow_numpy.py",
        "_NotNow.find_spec",
        "ImportError",
    ): "the import protocol: a finder refuses a module with ImportError (pyarrow's pandas check expects it)",
    (
        "core/builtin/recognizers.py",
        "FeatureSpace.__attrs_post_init__",
        "ValueError",
    ): "an internal invariant of how bioanon builds a fitted space, not a user's input",
    (
        "core/context.py",
        "_default_registry",
        "RuntimeError",
    ): "an internal invariant (importing bioanon installs the default registry), not a user's input",
    (
        "core/methods.py",
        "param",
        "TypeError",
    ): "a plugin author's mutable default in a class definition, raised at import of the plugin",
    (
        "core/methods.py",
        "Comparator.__call__",
        "ValueError",
    ): "a comparator function returned a matrix of the wrong shape: a bug in the method that declares it",
    (
        "core/cache/store.py",
        "_json_default",
        "TypeError",
    ): "json.dumps' default= hook must raise TypeError for values it cannot convert (callers catch TypeError)",
}


def _bare_builtin_raises(path: Path) -> list[tuple[str, str, int]]:
    """(enclosing function qualname, builtin name, line) of each ``raise <builtin>(...)`` / ``raise <builtin>``."""
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, scope + (child.name,))
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(exc, ast.Name) and exc.id in BUILTINS:
                    found.append((".".join(scope), exc.id, child.lineno))
            visit(child, scope)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), ())
    return found


def test_no_bare_builtin_errors_outside_the_allow_list():
    assert len(SOURCES) > 50, SOURCES  # the walk found the code
    seen, bad = set(), []
    for path in SOURCES:
        rel = path.relative_to(ROOT).as_posix()
        for scope, name, line in _bare_builtin_raises(path):
            if (rel, scope, name) in ALLOWED:
                seen.add((rel, scope, name))
            else:
                bad.append(f"{rel}:{line} ({scope or 'module'}): raise {name}")
    assert not bad, (
        "raise a bioanon.errors class (ParameterError, DataError, TableError, ConfigError, "
        "NotFittedError via require_fitted, ...) naming the method/parameter/file, or add the site to "
        "ALLOWED with a reason:\n" + "\n".join(bad)
    )
    assert seen == set(ALLOWED), f"stale ALLOWED entries: {set(ALLOWED) - seen}"


def test_the_walk_finds_bare_raises(tmp_path):
    """The static check can fail: it sees a bare raise in a method, with or without a call."""
    src = tmp_path / "m.py"
    src.write_text(
        "class A:\n    def f(self):\n        raise ValueError('x')\n\ndef g():\n    raise KeyError\n"
        "def h():\n    raise bioanon.errors.DataError('fine')\n"
    )
    assert _bare_builtin_raises(src) == [("A.f", "ValueError", 3), ("g", "KeyError", 6)]


def _plugin_error_classes() -> list[tuple[str, str]]:
    """(module, class name) of every exception class the plugins define (a base named ``...Error``)."""
    out = []
    for path in ROOT.glob("plugins/*/bioanon_*/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                (b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")).endswith(("Error", "Exception"))
                for b in node.bases
            ):
                rel = path.relative_to(ROOT / "plugins").with_suffix("").parts[1:]
                out.append((".".join(rel), node.name))
    return sorted(out)


def test_plugin_domain_errors_are_core_data_errors():
    classes = _plugin_error_classes()
    names = {name for _, name in classes}
    assert {"DatasetError", "KaldiDataError", "MotionDataError", "EmptyFileError"} <= names, names
    for module, name in classes:
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, DataError), f"{module}.{name} is not a bioanon.errors.DataError"


def test_not_fitted_recognizer_names_the_method_and_the_call():
    table = make_table(n_subjects=3, samples_per_subject=2)
    recognizer = bioanon.get_method("any.pca_svm")
    with pytest.raises(BioanonError) as caught:
        recognizer.score(table)
    assert isinstance(caught.value, NotFittedError) and isinstance(caught.value, RuntimeError)
    assert str(caught.value) == "any.pca_svm: call enroll() before score()"
    assert caught.value.method_id == "any.pca_svm"


def test_require_fitted():
    class Thing:
        id = "any.thing"
        a_ = 1
        b_ = None

    require_fitted(Thing(), "a_", call="fit()", before="transform()")
    with pytest.raises(NotFittedError, match=r"^any.thing: call fit\(\) before transform\(\)$"):
        require_fitted(Thing(), "a_", "b_", call="fit()", before="transform()")


def test_bad_parameter_is_a_bioanon_error_naming_it():
    from bioanon.random_set_mean import purity_count

    with pytest.raises(BioanonError, match=r"purity_count: parameter 'purity' = 1.5"):
        purity_count(1.5, 4)
    with pytest.raises(ParameterError, match="make_table: parameter 'payload' = 'smell'"):
        make_table(payload="smell")
    with pytest.raises(ValueError):  # the builtin stays a base for callers that catch it
        make_table(payload="smell")


def test_bad_data_file_is_a_bioanon_error_naming_it(tmp_path):
    pytest.importorskip("cv2")
    from bioanon_face.imageio import read_image

    bad = tmp_path / "face.png"
    bad.write_bytes(b"this is not an image")
    with pytest.raises(BioanonError) as caught:
        read_image(bad)
    assert isinstance(caught.value, DataError) and str(bad) in str(caught.value)


def test_empty_data_file_caught_as_data_error(tmp_path):
    from bioanon_gait.sources import read_numeric_csv

    empty = tmp_path / "walk.csv"
    empty.write_text("x,y\n")
    with pytest.raises(DataError, match="walk.csv: no data rows"):
        read_numeric_csv(empty)


def test_shape_errors_name_the_method():
    from bioanon_motion.signals import sliding_windows

    with pytest.raises(DataError, match="sliding_windows needs a"):
        sliding_windows(np.zeros(5), 2, 1)
    with pytest.raises(ParameterError, match="sliding_windows: parameter 'stride' = 0"):
        sliding_windows(np.zeros((5, 2)), 2, 0)


def test_errors_with_structured_arguments_pickle():
    """Errors cross process pools (the executor's workers) with their type, message and fields."""
    import pickle

    from bioanon.errors import MissingDependencyError, UnknownMethodError

    for err in (
        ParameterError("any.x", "sigma", -5, "a number > 0"),
        NotFittedError("any.x", "enroll()", "score()"),
        UnknownMethodError("any.y", ["any.x"], kind="anonymizer"),
        MissingDependencyError("any.x", {"torch": "pip install torch"}, "CPU wheel"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err) and back.method_id == err.method_id


def test_missing_package_is_a_bioanon_error(monkeypatch):
    import sys

    from bioanon.errors import MissingDependencyError
    from bioanon.torchutil import import_torch

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BioanonError) as caught:
        import_torch("any.thing", "pip install torch")
    assert isinstance(caught.value, MissingDependencyError) and isinstance(caught.value, ImportError)
    assert str(caught.value) == "any.thing needs torch, which is not installed: pip install torch"


def test_exported():
    import bioanon.api as api

    assert api.NotFittedError is NotFittedError and api.require_fitted is require_fitted
    assert "NotFittedError" in api.__all__ and "require_fitted" in api.__all__

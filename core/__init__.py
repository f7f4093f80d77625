"""bioanon: anonymize biometric data and evaluate anonymizations against strong attackers.

Public API::

    import bioanon
    bioanon.list_methods("face.*", kind="anonymizer")
    blur = bioanon.get_method("face.gaussian_blur", kernel=29)
    table = bioanon.load_dataset("any.synthetic", n_subjects=50)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import context as _context
from ._version import __version__
from .arrow_numpy import pandas_loaded_on_demand as _pandas_loaded_on_demand
from .errors import (
    BioanonError,
    CacheError,
    ConfigError,
    ParameterError,
    PluginError,
    TableError,
    UnknownMethodError,
    unknown_param_error,
)
from .hookspecs import hookimpl
from .methods import (
    Anonymizer,
    DatasetSource,
    Deanonymizer,
    Method,
    Recognizer,
    ScoreMatrix,
    Selector,
    UtilityMeasure,
    fitted,
    param,
)

_pandas_loaded_on_demand()

if TYPE_CHECKING:  # types only
    import os
    from collections.abc import Sequence
    from pathlib import Path

    from .evaluation.run import EvaluationResult
    from .registry import Registry
    from .table import SampleTable

__all__ = [
    "Anonymizer",
    "BioanonError",
    "CacheError",
    "ConfigError",
    "DatasetSource",
    "Deanonymizer",
    "Method",
    "ParameterError",
    "PluginError",
    "Recognizer",
    "ScoreMatrix",
    "Selector",
    "TableError",
    "UnknownMethodError",
    "UtilityMeasure",
    "__version__",
    "anonymize",
    "evaluate",
    "example",
    "get_method",
    "get_registry",
    "hookimpl",
    "list_methods",
    "load_dataset",
    "open_results",
    "fitted",
    "param",
]


def get_registry() -> Registry:
    """The registry of every installed method (built-in and plugins). An entry point: the library itself
    never calls it; it reaches the registry through the run's :class:`~bioanon.context.RunContext`."""
    from .plugins import get_registry as _get

    return _get()


_context.set_default_registry(get_registry)  # what a context outside any run uses (bioanon.context)


def get_method(method_id: str, **params: Any) -> Method:
    """Create a method by id with validated parameters, e.g. ``get_method("any.gaussian_noise", sigma=0.3)`` or
    ``get_method(method_id="any.gaussian_noise", sigma=0.3)``. ``method_id`` is never a method's parameter (the
    registry refuses a method that declares it); a parameter the method does not have is a
    :class:`~bioanon.errors.ParameterError` naming it and the accepted ones."""
    return get_registry().create(method_id, **params)


def _either(function: str, name: str, positional: tuple[Any, ...], keyword: Any) -> tuple[Any, ...]:
    """The values of a variable-length argument given either positionally or as ``name=[...]`` (a single value
    counts as a list of one), never both (ParameterError naming the function)."""
    if keyword is None:
        return positional
    if positional:
        raise ParameterError(function, name, keyword, f"the {name} either positionally or as {name}=[...], not both")
    return (keyword,) if isinstance(keyword, str) or not isinstance(keyword, (list, tuple)) else tuple(keyword)


def list_methods(
    *pattern_args: str, patterns: str | Sequence[str] | None = None, kind: str | None = None, trait: str | None = None
) -> list[str]:
    """Ids of the installed methods matching shell-style patterns (given positionally, or as ``patterns=[...]``),
    a kind and a trait."""
    chosen = _either("bioanon.list_methods", "patterns", pattern_args, patterns)
    return [e.cls.id for e in get_registry().find(chosen, kind=kind, trait=trait)]


def evaluate(config: Any, **kwargs: Any) -> EvaluationResult:
    """Run a strong evaluation from a TOML path, a dict or an EvalConfig; see
    :func:`bioanon.evaluation.run.evaluate` for the options (all keywords; one it does not take is a
    :class:`~bioanon.errors.ParameterError` naming it and the accepted ones). Returns an EvaluationResult."""
    import inspect

    from .evaluation.run import evaluate as _evaluate

    accepted = [p for p in inspect.signature(_evaluate).parameters if p != "config"]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise unknown_param_error("bioanon.evaluate", unknown[0], kwargs[unknown[0]], accepted, what="option")
    kwargs.setdefault("context", _context.RunContext(get_registry()))
    return _evaluate(config, **kwargs)


def open_results(path: str | os.PathLike[str]) -> EvaluationResult:
    """The result of a finished evaluation from its results folder (``<out>/<run id>``), equal to what
    :func:`evaluate` returned, e.g. ``bioanon.open_results("runs/quickstart-20260101-120000-1a2b3c").summary()``
    in a later session; see :func:`bioanon.evaluation.run.open_results` for the errors (a folder that is not a
    results folder, a run that did not finish, a folder written by a newer bioanon)."""
    from .evaluation.run import open_results as _open_results

    return _open_results(path)


def example(name: str) -> Path:
    """The installed path of an example config, e.g. ``bioanon.evaluate(bioanon.example("quickstart"))``
    from any directory (``bioanon init`` lists the examples and copies one to edit)."""
    from .scaffold import example as _example

    return _example(name)


def anonymize(table: Any, *method_args: Any, methods: Any = None) -> SampleTable:
    """Apply anonymizers (instances or ids, given positionally after the table or as ``methods=[...]``) in order,
    each fitted on the previous one's output; recorded in the lineage as one step (an ``any.chain`` of them when
    there are several, as ``bioanon anonymize -m a -m b``). Write the result with
    :func:`bioanon.export.write_table` (format by extension)."""
    from .export import anonymize as _anonymize

    chosen = _either("bioanon.anonymize", "methods", method_args, methods)
    return _anonymize(table, chosen, registry=get_registry())


def load_dataset(source_id: str, path: Any = None, **params: Any) -> SampleTable:
    """Load a data set with a registered dataset source (``bioanon datasets`` lists them): ``path`` is where a
    source that reads a data layout finds it (None for a generated one), the other keywords are the source's
    parameters, e.g. ``load_dataset("face.folder", path="faces/", size=(64, 64))``. ``source_id`` and ``path``
    are never a source's parameters (the registry refuses a source that declares them); a parameter the source
    does not have is a :class:`~bioanon.errors.ParameterError` naming it and the accepted ones."""
    return _context.RunContext(get_registry()).load_dataset(source_id, path, **params)

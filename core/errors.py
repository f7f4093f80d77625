"""Exception types. Every error bioanon raises on bad input derives from :class:`BioanonError`.

Catch ``BioanonError`` to catch "bioanon said no" in one place. Each class that users may already catch as a
builtin keeps that builtin as a second base (``DataError`` is a ``ValueError``, ``NotFittedError`` a
``RuntimeError``). Messages name the method, parameter, file or column at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast


class BioanonError(Exception):
    """Base class of all bioanon errors."""


class ParameterError(BioanonError, ValueError):
    """A method parameter is invalid. Names the method id, the parameter, the value and what is allowed."""

    def __init__(self, method_id: str, param: str, value: object, allowed: str):
        self.method_id, self.param, self.value, self.allowed = method_id, param, value, allowed
        super().__init__(f"{method_id}: parameter {param!r} = {value!r} is invalid; allowed: {allowed}")

    def __reduce__(self) -> tuple[Any, ...]:  # the constructor's arguments, so it crosses process pools
        return type(self), (self.method_id, self.param, self.value, self.allowed)


def unknown_param_error(
    owner: str, name: str, value: Any, accepted: Sequence[str], *, what: str = "parameter"
) -> ParameterError:
    """The error for a keyword ``name`` that ``owner`` (a method id, a function) does not take: it names the
    keyword, the closest accepted one and every accepted one (a method's parameters, a function's options)."""
    import difflib

    close = difflib.get_close_matches(name, list(accepted), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    listed = ", ".join(accepted) if accepted else "none"
    more = f" (see `bioanon describe {owner}`)" if what == "parameter" and "." in owner else ""
    return ParameterError(owner, name, value, f"no such {what}; {hint}accepted: {listed}{more}")


class UnknownMethodError(BioanonError, LookupError):
    """No method with that id is registered."""

    def __init__(self, method_id: str, suggestions: list[str] | tuple[str, ...] = (), kind: str | None = None):
        self.method_id, self.suggestions, self.kind = method_id, list(suggestions), kind
        what = f"{kind} " if kind else ""
        msg = f"unknown {what}method id {method_id!r}"
        if self.suggestions:
            msg += "; did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
        else:
            msg += "; run `bioanon methods` to list the installed ones"
        super().__init__(msg)

    def __str__(self) -> str:  # LookupError would quote the message
        return cast(str, self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.method_id, self.suggestions, self.kind)


class TableError(BioanonError, ValueError):
    """A sample table is malformed, or an operation on it cannot be done (e.g. a split part would be empty)."""


class TooFewValuesError(TableError):
    """The data a method got hold too few values of an attribute to do its work: e.g. a part of the subject split
    with one gender, where a protection must learn to suppress gender. A problem of one setting's data, not of the
    config: an evaluation fails that setting's tasks and lets the others finish (unless ``keep_going`` is false),
    and ``[rates] stratify`` gives every part every value where the counts allow."""


class CacheError(BioanonError, OSError):
    """The cache could not be read or written."""


class WriteError(BioanonError, OSError):
    """A file could not be written (the disk is full, the folder is read-only, …): names the file and the reason.
    Files are written through a temp file and a rename, so what was there before stays as it was."""


class PluginError(BioanonError):
    """A plugin failed to load or registered something invalid."""


class ConfigError(BioanonError, ValueError):
    """An evaluation config is invalid; the message names the key path."""


class DataError(BioanonError, ValueError):
    """A data file or folder is missing, empty, malformed or outside the data root, or data handed to a method
    (an array, a payload) has the wrong shape or content; the message names the file, column or method."""


class NotFittedError(BioanonError, RuntimeError):
    """A method was used before it was fitted: names the method id, what to call first and what was called,
    e.g. ``"any.pca_svm: call fit() or enroll() before score()"``. Raised by :func:`require_fitted`."""

    def __init__(self, method_id: str, call: str = "fit()", before: str = "this"):
        self.method_id, self.call, self.before = method_id, call, before
        super().__init__(f"{method_id}: call {call} before {before}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.method_id, self.call, self.before)


def require_fitted(method: Any, *attrs: str, call: str = "fit()", before: str = "this") -> None:
    """Raise :class:`NotFittedError` unless every fitted attribute ``attrs`` of ``method`` is set (not None).

    ``call`` is what must be called first, ``before`` what was called: in a recognizer's ``score``,
    ``require_fitted(self, "classes_", call="enroll()", before="score()")``."""
    if any(getattr(method, a, None) is None for a in attrs):
        raise NotFittedError(getattr(method, "id", type(method).__name__), call, before)


class MissingDependencyError(PluginError, ImportError):
    """A method needs an optional package that is not installed here.

    Names the method, the missing packages (import names) and the command that installs them; raised when such a
    method is created through the registry (``bioanon.get_method``, ``Registry.create``), and by a method that
    finds a package missing when it runs. ``missing`` maps each import name to its install command."""

    def __init__(self, method_id: str, missing: dict[str, str], detail: str = ""):
        self.method_id, self.missing, self.detail = method_id, dict(missing), detail
        msg = missing_text(method_id, self.missing)
        super().__init__(msg + (f" ({detail})" if detail else ""), name=next(iter(self.missing), None))

    def __str__(self) -> str:
        return cast(str, self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.method_id, self.missing, self.detail)


def missing_text(method_id: str, missing: dict[str, str]) -> str:
    """``"<id> needs <packages>, which are not installed: <install command>"``: the one line that says why a
    method is unavailable, shared by :class:`MissingDependencyError` and the listings of ``bioanon``."""
    installs = " ; ".join(dict.fromkeys(missing.values()))
    verb = "is" if len(missing) == 1 else "are"
    return f"{method_id} needs {', '.join(missing)}, which {verb} not installed: {installs}"

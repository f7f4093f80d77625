"""Exception types. Every error bioanon raises on bad input derives from :class:`BioanonError`."""

from __future__ import annotations


class BioanonError(Exception):
    """Base class of all bioanon errors."""


class ParameterError(BioanonError, ValueError):
    """A method parameter is invalid. Names the method id, the parameter, the value and what is allowed."""

    def __init__(self, method_id: str, param: str, value: object, allowed: str):
        self.method_id, self.param, self.value, self.allowed = method_id, param, value, allowed
        super().__init__(f"{method_id}: parameter {param!r} = {value!r} is invalid; allowed: {allowed}")


class UnknownMethodError(BioanonError, LookupError):
    """No method with that id is registered."""

    def __init__(self, method_id: str, suggestions: list[str] | tuple[str, ...] = (), kind: str | None = None):
        self.method_id, self.suggestions = method_id, list(suggestions)
        what = f"{kind} " if kind else ""
        msg = f"unknown {what}method id {method_id!r}"
        if self.suggestions:
            msg += "; did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
        else:
            msg += "; run `bioanon methods` to list the installed ones"
        super().__init__(msg)

    def __str__(self) -> str:  # LookupError would quote the message
        return self.args[0]


class TableError(BioanonError, ValueError):
    """A sample table is malformed, or an operation on it cannot be done (e.g. a split part would be empty)."""


class CacheError(BioanonError, OSError):
    """The cache could not be read or written."""


class PluginError(BioanonError):
    """A plugin failed to load or registered something invalid."""


class ConfigError(BioanonError, ValueError):
    """An evaluation config is invalid; the message names the key path."""


class DataError(BioanonError, ValueError):
    """A data file or folder is missing, empty, malformed or outside the data root; the message names it."""

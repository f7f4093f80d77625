"""Writing TOML (through tomli-w; Python reads TOML with the standard library's tomllib)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ConfigError

__all__ = ["dumps", "string"]


def _check(value: Any, where: str) -> None:
    """Raise ConfigError (a ValueError) naming the first value TOML cannot hold (None has no TOML form)."""
    if value is None:
        raise ConfigError(f"{where}: None cannot be written as TOML; store it as JSON instead")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check(v, f"{where}[{i}]")


def dumps(data: Mapping[str, Any], *, header: str = "") -> str:
    """``data`` as a TOML document (scalars first, then tables, in the dict's order), after the comment lines
    ``header``; a None anywhere raises ConfigError (a ValueError) naming its key path."""
    import tomli_w

    _check(data, "")
    head = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) if header else ""
    return head + tomli_w.dumps(dict(data))


def string(value: str) -> str:
    """``value`` as a TOML string literal (for editing one line of a TOML file in place)."""
    import tomli_w

    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()

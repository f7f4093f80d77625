"""Hook specifications of bioanon plugins.

A plugin is a module (or object) with functions marked ``@bioanon.hookimpl`` whose names are the hooks
below, exposed through an entry point in the group ``bioanon.plugins`` named after the distribution::

    [project.entry-points."bioanon.plugins"]
    bioanon_myplugin = "bioanon_myplugin.plugin"

The ``register_*`` hooks use the register-callback style: the plugin calls ``register(cls, aliases=())`` with
method **classes** (never instances), so listing methods never builds a model.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pluggy

hookspec = pluggy.HookspecMarker("bioanon")
hookimpl = pluggy.HookimplMarker("bioanon")

Register = Callable[..., None]
"""``register(cls: type[Method], aliases: tuple[str, ...] = ()) -> None``"""


@hookspec
def register_anonymizers(register: Register) -> None:
    """Register :class:`~bioanon.methods.Anonymizer` subclasses: ``register(cls, aliases=())``."""


@hookspec
def register_deanonymizers(register: Register) -> None:
    """Register :class:`~bioanon.methods.Deanonymizer` subclasses."""


@hookspec
def register_recognizers(register: Register) -> None:
    """Register :class:`~bioanon.methods.Recognizer` subclasses (identity and attribute attackers)."""


@hookspec
def register_utility_measures(register: Register) -> None:
    """Register :class:`~bioanon.methods.UtilityMeasure` subclasses."""


@hookspec
def register_selectors(register: Register) -> None:
    """Register :class:`~bioanon.methods.Selector` subclasses (subject selection strategies)."""


@hookspec
def register_datasets(register: Register) -> None:
    """Register :class:`~bioanon.methods.DatasetSource` subclasses (real layouts and synthetic generators)."""


@hookspec
def register_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add sub-commands to the ``bioanon`` CLI: ``subparsers.add_parser(name, help=...)`` and set
    ``func=callable(args) -> int`` with ``parser.set_defaults(func=...)``."""


REGISTER_HOOKS: dict[str, str] = {
    "register_anonymizers": "anonymizer",
    "register_deanonymizers": "deanonymizer",
    "register_recognizers": "recognizer",
    "register_utility_measures": "utility",
    "register_selectors": "selector",
    "register_datasets": "dataset",
}

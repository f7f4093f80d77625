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


RegisterFeatures = Callable[..., None]
"""``register(payload: str, featurize: Callable[[SampleTable], numpy.ndarray], *, description: str = "") -> None``"""


@hookspec
def register_payload_features(register: RegisterFeatures) -> None:
    """Provide the default feature view of a payload column that cannot be flattened into a vector.

    Trait-agnostic methods (the ``any.*`` recognizers, attribute attacks and ``any.attribute_accuracy``, the
    paper protocol, the embedding selectors) work on one fixed-length vector per sample. They take the first
    fixed-shape payload present (``features``, ``imu``, ``pose``, ``image``) and flatten it; when the table has
    none of those (e.g. only variable-length ``audio``), they ask the plugin that registered a featurizer for
    one of the table's payloads (:func:`bioanon.methods.feature_matrix`).

    Call ``register(payload, featurize, description="...")`` once per payload column name:

    * ``payload``: the payload column (e.g. ``"audio"``); one featurizer per payload across all plugins (a
      second distribution registering the same payload fails to load, naming both);
    * ``featurize(table) -> numpy.ndarray``: a pure, deterministic function of the table's rows (no fitting
      on the table, no randomness: the training, gallery and probe tables are featurized independently and
      must land in one space), returning a float array of shape ``(len(table), D)`` with D the same for every
      table of that payload. It runs inside methods, so import heavy libraries inside it, not at module import.
      bioanon-voice registers the utterance MFCC statistics of ``voice.mfcc_*`` with their default settings.
    * ``description``: one line shown by ``bioanon plugins``.

    Example (in the plugin module of the entry point)::

        @bioanon.hookimpl
        def register_payload_features(register):
            def featurize(table):
                from .dsp import summary_stats  # heavy imports here
                return summary_stats(table.payload("ecg"))
            register("ecg", featurize, description="per-beat summary statistics")
    """


REGISTER_HOOKS: dict[str, str] = {
    "register_anonymizers": "anonymizer",
    "register_deanonymizers": "deanonymizer",
    "register_recognizers": "recognizer",
    "register_utility_measures": "utility",
    "register_selectors": "selector",
    "register_datasets": "dataset",
}

OTHER_HOOKS: tuple[str, ...] = ("register_commands", "register_payload_features")
"""The hooks that register something other than method classes."""

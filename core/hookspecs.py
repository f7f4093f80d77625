"""Hook specifications of bioanon plugins.

A plugin is a module (or object) with functions marked :data:`hookimpl` whose names are the hooks below, exposed
through an entry point in the group ``bioanon.plugins`` named after the distribution::

    [project.entry-points."bioanon.plugins"]
    bioanon_myplugin = "bioanon_myplugin.plugin"

and the module declares the range of :data:`bioanon.api.API_VERSION` it supports::

    # bioanon_myplugin/plugin.py
    from bioanon.api import hookimpl

    BIOANON_API = ">=1.0,<2"

    @hookimpl
    def register_anonymizers(register):
        from .methods import MyBlur  # heavy imports inside the hook, not at module import
        register(MyBlur, aliases=("myplugin.blur",))

A hook implementation may take any subset of the hook's parameters, by name. Every hook here returns ``None``;
return values are ignored.

**When the hooks run.** The ``register_*`` hooks and :func:`register_payload_features` run when the method
registry is built: on its first use in a process (``bioanon.get_registry()``, ``get_method``, a CLI command),
and again only when a plugin is added in code (``PluginManager.register_plugin``). Plugins are loaded one at a
time in a fixed order: bioanon's own methods first (plugin name ``bioanon``), then the entry points sorted by
entry-point name, then plugins registered in code in the order they were added. For each plugin, its
``register_*`` hooks are called in the order listed here (anonymizers, deanonymizers, recognizers, utility
measures, selectors, datasets), then its :func:`register_payload_features`. Each call sees only that plugin's
implementation: no plugin sees or wraps another's registrations, and pluggy's ``tryfirst``/``trylast``/
``hookwrapper`` options have no effect on them. :func:`register_commands` runs later, only in the ``bioanon``
command.

**Which plugin wins.** Nothing is overridden: method ids, aliases and payload feature views are global, and the
first plugin in load order keeps them (so bioanon's own ids can never be replaced). A plugin that registers an
id or alias already taken by a plugin loaded before it, registers one id twice, registers an invalid class, or
raises in a hook is *broken*: none of its registrations are kept, ``bioanon plugins`` lists it as ``failed``
with the reason (naming both distributions for a clash), and the other plugins load normally. With
``BIOANON_STRICT_PLUGINS=1`` the first broken plugin raises :class:`~bioanon.errors.PluginError` instead.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import pluggy

if TYPE_CHECKING:
    import numpy as np

    from .methods import Method
    from .table import SampleTable

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time (typing.get_type_hints reads the hooks' annotations)
    Subparsers = argparse._SubParsersAction

hookspec = pluggy.HookspecMarker("bioanon")
hookimpl = pluggy.HookimplMarker("bioanon")
"""Marks a function of a plugin as the implementation of the bioanon hook of the same name."""


class Register(Protocol):
    """The ``register`` callback of the ``register_*`` hooks (one per hook, bound to its kind of method)."""

    def __call__(
        self, cls: type[Method], aliases: Sequence[str] = (), *, deprecated_aliases: Sequence[str] = ()
    ) -> None:
        """Register the method class ``cls`` under ``cls.id`` and the extra ids ``aliases``.

        :param cls: a method **class** (never an instance, so listing methods builds no model): an attrs class
            (``@attrs.define(kw_only=True)``) deriving from the base class of the hook's kind, with an ``id`` of
            the form ``"<trait>.<name>"`` in lower case, every parameter declared with
            :func:`~bioanon.methods.param` with a default, no parameter named like an attribute of the base
            class, and constructible with the default parameters. Registration sets ``cls.distribution``.
        :param aliases: other ids that resolve to ``cls`` (a tuple or list of ids, not one string).
        :param deprecated_aliases: old ids of ``cls`` (after a rename) that still resolve to it; using one warns
            once per process with a DeprecationWarning naming ``cls.id``, and results show ``cls.id`` (API 1.2).
        :raises PluginError: when ``cls`` is not valid for the hook or is registered twice by the plugin (the
            plugin is then reported as broken). Clashes with other plugins' ids are found after the hook returns.
        """


class RegisterFeatures(Protocol):
    """The ``register`` callback of :func:`register_payload_features`."""

    def __call__(self, payload: str, featurize: Callable[[SampleTable], np.ndarray], *, description: str = "") -> None:
        """Register ``featurize`` as the default feature view of the payload column ``payload``.

        :param payload: the payload column name, lower case (e.g. ``"audio"``).
        :param featurize: ``featurize(table) -> numpy.ndarray`` of shape ``(len(table), D)``; see
            :func:`register_payload_features`.
        :param description: one line shown by ``bioanon plugins``.
        :raises PluginError: for an invalid payload name, a featurizer that is not callable, or a payload
            registered twice by the plugin.
        """


@hookspec
def register_anonymizers(register: Register) -> None:
    """Register :class:`~bioanon.methods.Anonymizer` subclasses (``kind == "anonymizer"``): methods that transform a
    :class:`~bioanon.table.SampleTable` into an anonymized one.

    :param register: :class:`Register`: call ``register(cls, aliases=())`` once per Anonymizer class. A class
        of another kind, an invalid class or one id registered twice makes the plugin broken.
    :returns: ``None`` (ignored).

    Called once per build of the method registry, for this plugin only, in load order (see the module
    documentation). Import the modules that define the classes inside the hook, not at module import.

    Conflicts: the first plugin in load order keeps an id or alias; a later plugin that registers a taken id
    or alias fails to load as a whole (none of its methods are registered) and ``bioanon plugins`` lists it as
    ``failed``, naming both distributions.

    Template protections whose output must be compared in their own way (e.g. blocks shuffled per template)
    declare their comparator by overriding :meth:`~bioanon.methods.Anonymizer.comparator` to return a
    :class:`~bioanon.methods.Comparator` (a name and a vectorized ``(P, D), (R, D) -> (P, R)`` similarity); the
    evaluation records it in the protected tables and the template-comparing recognizers use it (the black-box
    attacker). The comparator is rebuilt from the registered id and the recorded parameters, so it must depend
    on the parameters only.
    """


@hookspec
def register_deanonymizers(register: Register) -> None:
    """Register :class:`~bioanon.methods.Deanonymizer` subclasses (``kind == "deanonymizer"``): methods fitted on
    clear/anonymized pairs that undo an anonymization.

    :param register: :class:`Register`: call ``register(cls, aliases=())`` once per Deanonymizer class. A class
        of another kind, an invalid class or one id registered twice makes the plugin broken.
    :returns: ``None`` (ignored).

    Called once per build of the method registry, for this plugin only, in load order (see the module
    documentation). Import the modules that define the classes inside the hook, not at module import.

    Conflicts: the first plugin in load order keeps an id or alias; a later plugin that registers a taken id
    or alias fails to load as a whole (none of its methods are registered) and ``bioanon plugins`` lists it as
    ``failed``, naming both distributions.
    """


@hookspec
def register_recognizers(register: Register) -> None:
    """Register :class:`~bioanon.methods.Recognizer` subclasses (``kind == "recognizer"``): identity and attribute
    attackers (``fit``, ``enroll``, ``score`` returning a :class:`~bioanon.methods.ScoreMatrix`).

    :param register: :class:`Register`: call ``register(cls, aliases=())`` once per Recognizer class. A class
        of another kind, an invalid class or one id registered twice makes the plugin broken.
    :returns: ``None`` (ignored).

    Called once per build of the method registry, for this plugin only, in load order (see the module
    documentation). Import the modules that define the classes inside the hook, not at module import.

    Conflicts: the first plugin in load order keeps an id or alias; a later plugin that registers a taken id
    or alias fails to load as a whole (none of its methods are registered) and ``bioanon plugins`` lists it as
    ``failed``, naming both distributions.
    """


@hookspec
def register_utility_measures(register: Register) -> None:
    """Register :class:`~bioanon.methods.UtilityMeasure` subclasses (``kind == "utility"``): how useful the anonymized
    data still is, one value per sample.

    :param register: :class:`Register`: call ``register(cls, aliases=())`` once per UtilityMeasure class. A class
        of another kind, an invalid class or one id registered twice makes the plugin broken.
    :returns: ``None`` (ignored).

    Called once per build of the method registry, for this plugin only, in load order (see the module
    documentation). Import the modules that define the classes inside the hook, not at module import.

    Conflicts: the first plugin in load order keeps an id or alias; a later plugin that registers a taken id
    or alias fails to load as a whole (none of its methods are registered) and ``bioanon plugins`` lists it as
    ``failed``, naming both distributions.
    """


@hookspec
def register_selectors(register: Register) -> None:
    """Register :class:`~bioanon.methods.Selector` subclasses (``kind == "selector"``): strategies that choose the
    evaluated subjects.

    :param register: :class:`Register`: call ``register(cls, aliases=())`` once per Selector class. A class
        of another kind, an invalid class or one id registered twice makes the plugin broken.
    :returns: ``None`` (ignored).

    Called once per build of the method registry, for this plugin only, in load order (see the module
    documentation). Import the modules that define the classes inside the hook, not at module import.

    Conflicts: the first plugin in load order keeps an id or alias; a later plugin that registers a taken id
    or alias fails to load as a whole (none of its methods are registered) and ``bioanon plugins`` lists it as
    ``failed``, naming both distributions.
    """


@hookspec
def register_datasets(register: Register) -> None:
    """Register :class:`~bioanon.methods.DatasetSource` subclasses (``kind == "dataset"``): readers of real data
    layouts and synthetic generators.

    :param register: :class:`Register`: call ``register(cls, aliases=())`` once per DatasetSource class. A class
        of another kind, an invalid class or one id registered twice makes the plugin broken.
    :returns: ``None`` (ignored).

    Called once per build of the method registry, for this plugin only, in load order (see the module
    documentation). Import the modules that define the classes inside the hook, not at module import.

    Conflicts: the first plugin in load order keeps an id or alias; a later plugin that registers a taken id
    or alias fails to load as a whole (none of its methods are registered) and ``bioanon plugins`` lists it as
    ``failed``, naming both distributions.
    """


@hookspec
def register_commands(subparsers: Subparsers) -> None:
    """Add sub-commands to the ``bioanon`` command line.

    :param subparsers: the ``argparse`` sub-parsers of the ``bioanon`` command. Add a command with
        ``p = subparsers.add_parser(name, help="one line")``, its options with ``p.add_argument(...)``, and
        its handler with ``p.set_defaults(func=handler)``: ``handler(args: argparse.Namespace) -> int`` returns
        the exit code; a :class:`~bioanon.errors.BioanonError` it raises is printed as one ``bioanon: error:``
        line with exit code 2.
    :returns: ``None`` (ignored).

    Called each time the ``bioanon`` command builds its parser (every invocation, after bioanon's own commands
    were added), once per loaded plugin, in load order; not called when bioanon is used from Python.

    Conflicts: command names and aliases are global. A plugin that adds a name already taken (by a bioanon
    command or by a plugin loaded before it), or raises, gets none of its commands added (all or nothing);
    ``bioanon plugins`` shows the reason in its note and the other commands work. With
    ``BIOANON_STRICT_PLUGINS=1`` the ``bioanon`` command fails with a :class:`~bioanon.errors.PluginError`
    instead.

    Example::

        @hookimpl
        def register_commands(subparsers):
            p = subparsers.add_parser("hello", help="say hello")
            p.add_argument("--name", default="world")
            p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)
    """


@hookspec
def register_payload_features(register: RegisterFeatures) -> None:
    """Provide the default feature view of a payload column that cannot be flattened into a vector.

    Trait-agnostic methods (the ``any.*`` recognizers, attribute attacks and ``any.attribute_accuracy``, the
    paper protocol, the embedding selectors) work on one fixed-length vector per sample. They take the first
    fixed-shape payload present (``features``, ``imu``, ``pose``, ``image``) and flatten it; when the table has
    none of those (e.g. only variable-length ``audio``), they ask the plugin that registered a featurizer for
    one of the table's payloads (:func:`bioanon.methods.feature_matrix`).

    :param register: :class:`RegisterFeatures`: call ``register(payload, featurize, description="...")``
        once per payload column name:

        * ``payload``: the payload column (e.g. ``"audio"``);
        * ``featurize(table) -> numpy.ndarray``: a pure, deterministic function of the table's rows (no
          fitting on the table, no randomness: the training, gallery and probe tables are featurized
          independently and must land in one space), returning a float array of shape ``(len(table), D)`` with
          D the same for every table of that payload. It runs inside methods, so import heavy libraries inside
          it, not at module import. bioanon-voice registers the utterance MFCC statistics of its statistics
          recognizers (``voice.svm``, ``voice.lda``, ...) with their default settings.
        * ``description``: one line shown by ``bioanon plugins``.
    :returns: ``None`` (ignored).

    Called once per build of the method registry, for this plugin only, right after its ``register_*`` hooks.

    Conflicts: one featurizer per payload across all plugins. The first plugin in load order keeps it; a later
    distribution registering the same payload fails to load as a whole, naming both.

    Example (in the plugin module of the entry point)::

        @hookimpl
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
"""The hooks that register method classes, and the kind of method each takes."""

OTHER_HOOKS: tuple[str, ...] = ("register_commands", "register_payload_features")
"""The hooks that register something other than method classes."""

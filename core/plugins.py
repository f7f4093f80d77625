"""The plugin manager: guarded entry-point loading, switches and the method registry.

Plugins are found through the entry-point group ``bioanon.plugins``. Loading is guarded: a plugin that fails
to import, has an invalid hook implementation or registers something invalid (or an id another distribution
already registered) is reported in one line and skipped, and the others still load.

API compatibility: a plugin's entry-point module declares the range of :data:`bioanon.api.API_VERSION` it
supports, ``BIOANON_API = ">=1.0,<2"`` (a PEP 440 specifier). A plugin whose range excludes this version is not
registered and is listed as ``incompatible`` ("needs bioanon API >=2.0,<3; this bioanon provides 1.0"), also
when its module fails to import (the range is then read from its source, without executing it). A malformed
range makes the plugin ``failed``; a plugin without ``BIOANON_API`` loads as before.

Environment switches:

``BIOANON_STRICT_PLUGINS=1``
    any plugin failure raises :class:`~bioanon.errors.PluginError` (use it in CI).
``BIOANON_DISABLE_PLUGIN_AUTOLOAD=1``
    load no entry-point plugins (only the built-in methods and plugins registered in code).
``BIOANON_DISABLE_PLUGINS=name,name``
    skip these plugins (entry-point or distribution names; ``-``, ``.`` and ``_`` are equivalent).
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata as md
import logging
import os
import re
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from . import hookspecs
from ._version import API_VERSION
from .errors import PluginError
from .registry import Entry, Featurizer, Registry, validate_method_class

if TYPE_CHECKING:
    from .methods import Method

ENTRY_POINT_GROUP = "bioanon.plugins"
BUILTIN_NAME = "bioanon"
API_ATTRIBUTE = "BIOANON_API"
"""The module-level name under which a plugin declares the API range it supports."""


class PluginLoadWarning(UserWarning):
    """A plugin could not be loaded and was skipped."""


def normalize_name(name: str) -> str:
    """PEP 503-style normalization with underscores: ``Bioanon-Face`` → ``bioanon_face``."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


@attrs.define
class PluginStatus:
    """Load status of one plugin."""

    name: str
    distribution: str
    version: str
    status: str  # "loaded" | "failed" | "incompatible" | "disabled"
    error: str | None = None  # why it failed or is incompatible; for a loaded plugin, why its commands are missing
    methods: dict[str, int] = attrs.field(factory=dict)  # kind -> count
    module: str = ""
    featurizers: list[str] = attrs.field(factory=list)  # payloads it gives a default feature view
    api: str | None = None  # the BIOANON_API range it declares (bioanon itself: the API_VERSION it provides)
    commands: list[str] = attrs.field(factory=list)  # the CLI sub-commands it added

    @property
    def n_methods(self) -> int:
        return sum(self.methods.values())

    def report_line(self) -> str:
        """The one-line problem report (distribution, version, error, how to disable it)."""
        what = {"incompatible": "is incompatible", "loaded": "could not add its commands"}.get(
            self.status, "failed to load"
        )
        return (
            f"bioanon: plugin {self.distribution} {self.version} ({self.name}) {what}: {self.error} "
            f"-- disable it with BIOANON_DISABLE_PLUGINS={self.name}"
        )

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self) | {"n_methods": self.n_methods}


@attrs.define
class _Candidate:
    name: str
    distribution: str
    version: str
    load: Callable[[], object]
    module: str = ""


class PluginManager:
    """Loads plugins and builds the :class:`~bioanon.registry.Registry`.

    Parameters
    ----------
    autoload : load entry-point plugins (default: unless ``BIOANON_DISABLE_PLUGIN_AUTOLOAD`` is set).
    disabled : names of plugins to skip (default: ``BIOANON_DISABLE_PLUGINS``).
    strict : raise on the first plugin failure (default: ``BIOANON_STRICT_PLUGINS``).
    include_builtin : register the core's own methods (always, unless testing the machinery itself).
    """

    def __init__(
        self,
        *,
        autoload: bool | None = None,
        disabled: Iterable[str] | None = None,
        strict: bool | None = None,
        include_builtin: bool = True,
    ):
        self.autoload = (not _env_flag("BIOANON_DISABLE_PLUGIN_AUTOLOAD")) if autoload is None else autoload
        if disabled is None:
            disabled = [d for d in os.environ.get("BIOANON_DISABLE_PLUGINS", "").split(",") if d.strip()]
        self.disabled = {normalize_name(d.strip()) for d in disabled}
        self.strict = _env_flag("BIOANON_STRICT_PLUGINS") if strict is None else strict
        self.include_builtin = include_builtin
        self._extra: list[_Candidate] = []
        self._registry: Registry | None = None
        self._statuses: list[PluginStatus] = []
        self._pm: pluggy.PluginManager | None = None
        self._lock = threading.RLock()

    # -- public ----------------------------------------------------------------------------------------
    def register_plugin(
        self, plugin: object, name: str, *, distribution: str | None = None, version: str = "0"
    ) -> None:
        """Add a plugin object (module, class or instance with hookimpls) in code; rebuilds the registry."""
        with self._lock:
            self._extra.append(
                _Candidate(name, distribution or name, version, lambda: plugin, getattr(plugin, "__name__", ""))
            )
            self._registry = None

    @property
    def registry(self) -> Registry:
        """The registry of every successfully registered method (built on first use)."""
        with self._lock:
            if self._registry is None:
                self._build()
            assert self._registry is not None
            return self._registry

    @property
    def statuses(self) -> list[PluginStatus]:
        """Load status of every plugin considered (loaded, failed, disabled)."""
        _ = self.registry
        return list(self._statuses)

    @property
    def failures(self) -> list[PluginStatus]:
        """Plugins with a problem to report: failed, incompatible, or loaded but without their commands."""
        return [
            s for s in self.statuses if s.status in ("failed", "incompatible") or (s.status == "loaded" and s.error)
        ]

    @property
    def pluggy_manager(self) -> pluggy.PluginManager:
        _ = self.registry
        assert self._pm is not None
        return self._pm

    def add_commands(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        """Let plugins add CLI sub-commands, all or nothing per plugin.

        A plugin that raises, or adds a command name or alias already taken (by a bioanon command or a plugin
        before it), gets none of its commands added; the reason is kept on its status (``error``, listed by
        ``bioanon plugins``) and warned, or raised as :class:`PluginError` when strict."""
        pm = self.pluggy_manager
        statuses = {s.name: s for s in self._statuses}
        for s in self._statuses:
            if s.status == "loaded":
                s.error, s.commands = None, []
        owners = dict.fromkeys(subparsers.choices, "bioanon")  # command name -> who added it
        for impl in pm.hook.register_commands.get_hookimpls():
            status = statuses.get(impl.plugin_name)
            who = status.distribution if status else impl.plugin_name
            taken, help_lines = dict(subparsers.choices), list(subparsers._choices_actions)
            try:
                impl.function(**{a: subparsers for a in impl.argnames})
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the command line
                for name in [n for n in subparsers.choices if n not in taken]:  # roll this plugin's commands back
                    del subparsers.choices[name]
                subparsers._choices_actions[:] = help_lines
                clash = re.search(r"conflicting subparser(?: alias)?: (\S+)", str(exc))
                if isinstance(exc, argparse.ArgumentError) and clash and clash.group(1) in owners:
                    name = clash.group(1)
                    owner = "a bioanon command" if owners[name] == "bioanon" else f"a command of {owners[name]}"
                    error = f"command {name!r} is already {owner}; none of its commands were added"
                else:
                    error = f"{type(exc).__name__}: {exc}; none of its commands were added"
                if status is None:
                    status = PluginStatus(impl.plugin_name, who, "?", "loaded")
                status.error = " ".join(error.split())
                if self.strict:
                    fatal = " (fatal because BIOANON_STRICT_PLUGINS is set)"
                    raise PluginError(status.report_line() + fatal) from exc
                warnings.warn(status.report_line(), PluginLoadWarning, stacklevel=2)
                continue
            added = [n for n in subparsers.choices if n not in taken]
            owners.update(dict.fromkeys(added, who))
            if status is not None:
                status.commands = added

    # -- loading ---------------------------------------------------------------------------------------
    def _candidates(self) -> list[_Candidate]:
        out = []
        if self.include_builtin:
            from ._version import __version__

            def load_builtin() -> object:
                from .builtin import plugin

                return plugin

            out.append(_Candidate(BUILTIN_NAME, "bioanon", __version__, load_builtin, "bioanon.builtin.plugin"))
        if self.autoload:
            seen: dict[str, str] = {}
            eps = sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
            for ep in eps:
                dist = ep.dist.name if ep.dist is not None else "?"
                version = ep.dist.version if ep.dist is not None else "?"
                if ep.name in seen and seen[ep.name] == dist:
                    continue  # the same distribution seen twice on sys.path
                seen[ep.name] = dist
                out.append(_Candidate(ep.name, dist, version, ep.load, ep.value))
        out.extend(self._extra)
        return out

    def _fail(self, status: PluginStatus, error: str, kind: str = "failed") -> None:
        status.status, status.error = kind, " ".join(error.split())
        if self.strict:
            raise PluginError(status.report_line() + " (fatal because BIOANON_STRICT_PLUGINS is set)")
        warnings.warn(status.report_line(), PluginLoadWarning, stacklevel=4)

    def _api_rejects(self, status: PluginStatus, declared: object, *, loaded: bool = True) -> bool:
        """Check a plugin's declared ``BIOANON_API`` against :data:`API_VERSION`; True (reported) when it must
        not be registered. ``loaded=False``: the module failed to import, so only an excluding range is
        reported here (the import error is reported otherwise)."""
        if declared is None:
            return False
        status.api = declared if isinstance(declared, str) else repr(declared)
        problem, compatible = api_compatibility(declared)
        if problem is None:
            return False
        if not compatible:
            self._fail(status, problem, kind="incompatible")
            return True
        if loaded:
            self._fail(status, problem)
            return True
        return False

    def _build(self) -> None:
        pm = pluggy.PluginManager("bioanon")
        pm.add_hookspecs(hookspecs)
        entries: dict[str, Entry] = {}
        featurizers: dict[str, Featurizer] = {}
        aliases_taken: dict[str, str] = {}
        statuses: list[PluginStatus] = []
        for cand in self._candidates():
            status = PluginStatus(cand.name, cand.distribution, cand.version, "loaded", module=cand.module)
            statuses.append(status)
            if cand.name != BUILTIN_NAME and (
                normalize_name(cand.name) in self.disabled or normalize_name(cand.distribution) in self.disabled
            ):
                status.status = "disabled"
                continue
            if pm.has_plugin(cand.name):
                self._fail(status, f"another plugin is already registered under the name {cand.name!r}")
                continue
            if cand.name == BUILTIN_NAME:
                status.api = API_VERSION
            try:
                obj = cand.load()
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
                if cand.name == BUILTIN_NAME or not self._api_rejects(status, source_api(cand.module), loaded=False):
                    self._fail(status, f"{type(exc).__name__}: {exc}")
                continue
            if cand.name != BUILTIN_NAME and self._api_rejects(status, declared_api(obj)):
                continue
            try:
                pm.register(obj, name=cand.name)
            except Exception as exc:  # noqa: BLE001
                self._fail(status, f"{type(exc).__name__}: {exc}")
                continue
            try:
                self._check_unknown_hooks(pm, cand.name)
                new = self._collect(pm, cand.name, cand.distribution)
                new_features = self._collect_featurizers(pm, cand.name, cand.distribution)
                for payload in new_features:
                    if payload in featurizers:
                        raise PluginError(
                            f"duplicate feature view of payload {payload!r}: registered by both "
                            f"{featurizers[payload].distribution} and {cand.distribution}"
                        )
                for mid, entry in new.items():
                    if mid in entries or mid in aliases_taken:
                        other = entries[mid].distribution if mid in entries else aliases_taken[mid]
                        raise PluginError(
                            f"duplicate method id {mid!r}: registered by both {other} and {cand.distribution}"
                        )
                    for a in entry.aliases:
                        if a in entries or a in aliases_taken:
                            raise PluginError(f"alias {a!r} of {mid} is already taken")
            except Exception as exc:  # noqa: BLE001
                pm.unregister(name=cand.name)
                msg = str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
                self._fail(status, msg)
                continue
            for mid, entry in new.items():
                entries[mid] = entry
                for a in entry.aliases:
                    aliases_taken[a] = cand.distribution
                status.methods[entry.cls.kind] = status.methods.get(entry.cls.kind, 0) + 1
            featurizers.update(new_features)
            status.featurizers = sorted(new_features)
        self._pm = pm
        self._statuses = statuses
        self._registry = Registry(entries, featurizers)

    @staticmethod
    def _check_unknown_hooks(pm: pluggy.PluginManager, name: str) -> None:
        plugin = pm.get_plugin(name)
        for caller in pm.get_hookcallers(plugin) or []:
            if caller.spec is None:
                raise PluginError(
                    f"hook implementation {caller.name!r} matches no bioanon hook "
                    f"(known: {', '.join(sorted(hookspecs.REGISTER_HOOKS) + list(hookspecs.OTHER_HOOKS))})"
                )

    @staticmethod
    def _collect(pm: pluggy.PluginManager, name: str, distribution: str) -> dict[str, Entry]:
        """Call one plugin's register_* hooks and validate what it registers."""
        new: dict[str, Entry] = {}
        for hook_name, kind in hookspecs.REGISTER_HOOKS.items():
            caller = getattr(pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                if impl.plugin_name != name:
                    continue

                def register(
                    cls: type[Method],
                    aliases: Iterable[str] = (),
                    *,
                    deprecated_aliases: Iterable[str] = (),
                    _kind: str = kind,
                ) -> None:
                    validate_method_class(cls, _kind)
                    for what, ids in (("aliases", aliases), ("deprecated_aliases", deprecated_aliases)):
                        if isinstance(ids, str):
                            raise PluginError(
                                f"{cls.id}: {what} must be a tuple of ids such as ({ids!r},), not the string {ids!r}"
                            )
                    if cls.id in new:
                        raise PluginError(f"{distribution} registers {cls.id!r} twice")
                    cls.distribution = distribution
                    old = tuple(deprecated_aliases)
                    new[cls.id] = Entry(cls, distribution, tuple(aliases) + old, old)

                kwargs = {"register": register}
                impl.function(**{a: kwargs[a] for a in impl.argnames})
        return new

    @staticmethod
    def _collect_featurizers(pm: pluggy.PluginManager, name: str, distribution: str) -> dict[str, Featurizer]:
        """Call one plugin's ``register_payload_features`` hook and validate what it registers."""
        new: dict[str, Featurizer] = {}
        for impl in pm.hook.register_payload_features.get_hookimpls():
            if impl.plugin_name != name:
                continue

            def register(payload: str, featurize: Callable[..., Any], *, description: str = "") -> None:
                if not isinstance(payload, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", payload):
                    raise PluginError(
                        f"{distribution}: register_payload_features: payload must be a column name "
                        f"in lower case (e.g. 'audio'), got {payload!r}"
                    )
                if not callable(featurize):
                    raise PluginError(
                        f"{distribution}: register_payload_features: the featurizer of payload "
                        f"{payload!r} must be callable(table) -> array, got {featurize!r}"
                    )
                if payload in new:
                    raise PluginError(f"{distribution} registers a feature view of payload {payload!r} twice")
                new[payload] = Featurizer(payload, featurize, distribution, str(description))

            kwargs = {"register": register}
            impl.function(**{a: kwargs[a] for a in impl.argnames})
        return new


# --------------------------------------------------------------------------------------------------- API range


def api_compatibility(declared: object) -> tuple[str | None, bool]:
    """``(problem, compatible)`` of a declared ``BIOANON_API`` against :data:`API_VERSION`: ``(None, True)`` when
    the range includes it, ``(note, False)`` when it excludes it, ``(note, True)`` when it is malformed."""
    example = "a PEP 440 version range such as '>=1.0,<2'"
    if not isinstance(declared, str) or not declared.strip():
        return f"{API_ATTRIBUTE} = {declared!r} is not {example}", True
    contains = _plain_range_contains(declared, API_VERSION)
    if contains is None:  # any other PEP 440 range: packaging (~10 ms to import, so not at every start-up)
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            spec = SpecifierSet(declared)
        except InvalidSpecifier as exc:
            return f"{API_ATTRIBUTE} = {declared!r} is not {example} ({exc})", True
        contains = spec.contains(API_VERSION, prereleases=True)
    if contains:
        return None, True
    return f"needs bioanon API {declared.strip()}; this bioanon provides {API_VERSION}", False


_PLAIN_CLAUSE = re.compile(r"\s*(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)\s*")


def _plain_range_contains(declared: str, version: str) -> bool | None:
    """Whether ``version`` (a release number such as API_VERSION) is in ``declared`` when every clause of it compares
    with a release number (``>=1.0,<2``), as packaging's ``SpecifierSet.contains`` answers: PEP 440 compares
    release numbers padded with zeros, and without pre-, post- or local parts on either side ``<``/``>`` are plain
    comparisons. None for any other range (wildcards, ``~=``, ``===``, pre-releases, malformed)."""

    def key(text: str) -> tuple[int, ...]:
        parts = [int(p) for p in text.split(".")]
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        return tuple(parts)

    if not re.fullmatch(r"\d+(?:\.\d+)*", version):
        return None
    v = key(version)
    contains = True
    for clause in declared.split(","):
        m = _PLAIN_CLAUSE.fullmatch(clause)
        if m is None:
            return None
        op, bound = m.group(1), key(m.group(2))
        contains &= {
            ">=": v >= bound,
            "<=": v <= bound,
            ">": v > bound,
            "<": v < bound,
            "==": v == bound,
            "!=": v != bound,
        }[op]
    return contains


def declared_api(plugin: object) -> object:
    """The ``BIOANON_API`` of a plugin object, else of the module that defines it (None when undeclared)."""
    value = getattr(plugin, API_ATTRIBUTE, None)
    if value is None and not isinstance(plugin, types.ModuleType):
        value = getattr(sys.modules.get(getattr(plugin, "__module__", None) or ""), API_ATTRIBUTE, None)
    return value


def source_api(target: str) -> object:
    """The ``BIOANON_API`` literal assigned at the top level of an entry point's module (``"pkg.mod"`` or
    ``"pkg.mod:attr"``), read from its source without executing it; None when it cannot be found."""
    module = target.split(":", 1)[0].strip()
    try:
        source = _module_source(module)
        tree = ast.parse(source or "")
    except Exception:  # noqa: BLE001 - no source, or unparsable: nothing declared that can be read
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == API_ATTRIBUTE for t in targets):
            try:
                return ast.literal_eval(value)
            except ValueError:
                return None
    return None


def _module_source(module: str) -> str | None:
    """The source of ``module``, found through the import system's finders without importing it or (unlike
    :func:`importlib.util.find_spec`) its parent packages."""
    spec: Any = None
    path: Any = None
    parts = module.split(".")
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        loaded = sys.modules.get(name)
        spec = getattr(loaded, "__spec__", None) if loaded is not None else None
        if spec is None:
            spec = next(
                (
                    found
                    for finder in sys.meta_path
                    if hasattr(finder, "find_spec") and (found := finder.find_spec(name, path)) is not None
                ),
                None,
            )
        if spec is None:
            return None
        path = spec.submodule_search_locations
    get_source = getattr(spec.loader, "get_source", None)
    return get_source(module) if get_source is not None else None


# --------------------------------------------------------------------------------------------------- default

_default: PluginManager | None = None
_default_lock = threading.Lock()


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager (created on first use from the environment switches)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = PluginManager()
        return _default


def reset_plugin_manager(manager: PluginManager | None = None) -> PluginManager | None:
    """Replace the process-wide manager (tests); returns the previous one."""
    global _default
    with _default_lock:
        old, _default = _default, manager
        return old


def get_registry() -> Registry:
    """The registry of the process-wide plugin manager."""
    return get_plugin_manager().registry


def format_failures(manager: PluginManager, stream: Any = None) -> None:
    """Each failed plugin's one-line report: written to ``stream`` when given, else logged as a warning of the
    ``bioanon.plugins`` logger."""
    for s in manager.failures:
        if stream is not None:
            stream.write(s.report_line() + "\n")
        else:
            logging.getLogger(__name__).warning("%s", s.report_line())

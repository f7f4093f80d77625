"""The plugin manager: guarded entry-point loading, switches and the method registry.

Plugins are found through the entry-point group ``bioanon.plugins``. Loading is guarded: a plugin that fails
to import, has an invalid hook implementation or registers something invalid (or an id another distribution
already registered) is reported in one line and skipped, and the others still load.

Environment switches:

``BIOANON_STRICT_PLUGINS=1``
    any plugin failure raises :class:`~bioanon.errors.PluginError` (use it in CI).
``BIOANON_DISABLE_PLUGIN_AUTOLOAD=1``
    load no entry-point plugins (only the built-in methods and plugins registered in code).
``BIOANON_DISABLE_PLUGINS=name,name``
    skip these plugins (entry-point or distribution names; ``-``, ``.`` and ``_`` are equivalent).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pluggy

from . import hookspecs
from .errors import PluginError
from .registry import Entry, Featurizer, Registry, validate_method_class

ENTRY_POINT_GROUP = "bioanon.plugins"
BUILTIN_NAME = "bioanon"


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
    status: str  # "loaded" | "failed" | "disabled"
    error: str | None = None
    methods: dict[str, int] = attrs.field(factory=dict)  # kind -> count
    module: str = ""
    featurizers: list[str] = attrs.field(factory=list)  # payloads it gives a default feature view

    @property
    def n_methods(self) -> int:
        return sum(self.methods.values())

    def report_line(self) -> str:
        """The one-line failure report (distribution, version, error, how to disable it)."""
        return (
            f"bioanon: plugin {self.distribution} {self.version} ({self.name}) failed to load: {self.error} "
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
    def register_plugin(self, plugin: object, name: str, *, distribution: str | None = None, version: str = "0") -> None:
        """Add a plugin object (module, class or instance with hookimpls) in code; rebuilds the registry."""
        with self._lock:
            self._extra.append(_Candidate(name, distribution or name, version, lambda: plugin, getattr(plugin, "__name__", "")))
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
        return [s for s in self.statuses if s.status == "failed"]

    @property
    def pluggy_manager(self) -> pluggy.PluginManager:
        _ = self.registry
        assert self._pm is not None
        return self._pm

    def add_commands(self, subparsers: Any) -> None:
        """Let plugins add CLI sub-commands (failures are reported, not fatal unless strict)."""
        pm = self.pluggy_manager
        for impl in pm.hook.register_commands.get_hookimpls():
            try:
                impl.function(subparsers=subparsers)
            except Exception as exc:  # noqa: BLE001
                msg = f"bioanon: plugin {impl.plugin_name} failed to add its commands: {type(exc).__name__}: {exc}"
                if self.strict:
                    raise PluginError(msg) from exc
                warnings.warn(msg, PluginLoadWarning, stacklevel=2)

    # -- loading ---------------------------------------------------------------------------------------
    def _candidates(self) -> list[_Candidate]:
        out = []
        if self.include_builtin:
            from . import __version__

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

    def _fail(self, status: PluginStatus, error: str) -> None:
        status.status, status.error = "failed", " ".join(error.split())
        if self.strict:
            raise PluginError(status.report_line() + " (fatal because BIOANON_STRICT_PLUGINS is set)")
        warnings.warn(status.report_line(), PluginLoadWarning, stacklevel=4)

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
            try:
                obj = cand.load()
                pm.register(obj, name=cand.name)
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
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
                            f"{featurizers[payload].distribution} and {cand.distribution}")
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

                def register(cls: type, aliases: Iterable[str] = (), *, _kind: str = kind) -> None:
                    validate_method_class(cls, _kind)
                    if cls.id in new:
                        raise PluginError(f"{distribution} registers {cls.id!r} twice")
                    cls.distribution = distribution
                    new[cls.id] = Entry(cls, distribution, tuple(aliases))

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
                    raise PluginError(f"{distribution}: register_payload_features: payload must be a column name "
                                      f"in lower case (e.g. 'audio'), got {payload!r}")
                if not callable(featurize):
                    raise PluginError(f"{distribution}: register_payload_features: the featurizer of payload "
                                      f"{payload!r} must be callable(table) -> array, got {featurize!r}")
                if payload in new:
                    raise PluginError(f"{distribution} registers a feature view of payload {payload!r} twice")
                new[payload] = Featurizer(payload, featurize, distribution, str(description))

            kwargs = {"register": register}
            impl.function(**{a: kwargs[a] for a in impl.argnames})
        return new


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
    """Print each failed plugin's one-line report to ``stream`` (stderr)."""
    stream = stream or sys.stderr
    for s in manager.failures:
        print(s.report_line(), file=stream)

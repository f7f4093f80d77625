"""The registry of method classes, built by the plugin manager and immutable afterwards."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, cast

import attrs

from .errors import PluginError, UnknownMethodError
from .log import warn_deprecated
from .methods import KIND_CLASSES, KINDS, Method

ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9][a-z0-9_:\-]*$")


@attrs.frozen
class Entry:
    """A registered method class and where it came from.

    ``aliases`` are the other ids that resolve to ``cls``; ``deprecated_aliases``, a subset of them, are old ids
    kept so that existing configs and scripts keep working: resolving one warns (once per registry, i.e. once
    per process for the process-wide registry) with a DeprecationWarning naming ``cls.id``."""

    cls: type[Method]
    distribution: str
    aliases: tuple[str, ...] = ()
    deprecated_aliases: tuple[str, ...] = attrs.field(default=())

    @deprecated_aliases.validator
    def _check_deprecated(self, attribute: object, value: tuple[str, ...]) -> None:
        stray = [a for a in value if a not in self.aliases]
        if stray:
            raise PluginError(f"{self.cls.id}: deprecated aliases {stray} are not among its aliases {self.aliases}")


# the keywords the public functions take beside a method's parameters (``get_method(method_id, **params)``,
# ``load_dataset(source_id, path, **params)``): no method of the kind may declare a parameter of that name
KEYWORDS_BESIDE_PARAMS: dict[str, tuple[str, ...]] = {"any": ("method_id",), "dataset": ("source_id", "path")}


def validate_method_class(cls: object, kind: str) -> None:
    """Raise PluginError when ``cls`` cannot be registered as a method of ``kind``."""
    if not isinstance(cls, type):
        raise PluginError(f"register() takes a class, got {type(cls).__name__} {cls!r}")
    base = KIND_CLASSES[kind]
    if not issubclass(cls, base):
        raise PluginError(f"{cls.__qualname__} registered as {kind} but is not a subclass of {base.__name__}")
    if not attrs.has(cls):
        raise PluginError(f"{cls.__qualname__} is not an attrs class (decorate it with @attrs.define(kw_only=True))")
    method = cast("type[Method]", cls)  # a Method subclass (checked above; attrs.has() narrowed cls to attrs')
    if not isinstance(method.id, str) or not ID_PATTERN.match(method.id):
        raise PluginError(
            f"{method.__qualname__} has invalid id {method.id!r}: use '<trait>.<name>' in lower case, e.g. 'face.blur'"
        )
    reserved = {n for n in dir(base) if not n.startswith("_")}
    clashes = [f.name for f in method.param_fields() if f.name in reserved]
    if clashes:
        raise PluginError(
            f"{method.id}: parameter names {clashes} clash with attributes of {base.__name__} "
            f"(e.g. id, kind, trait, distribution, payloads); rename them"
        )
    keywords = KEYWORDS_BESIDE_PARAMS["any"] + KEYWORDS_BESIDE_PARAMS.get(kind, ())
    clashes = [f.name for f in method.param_fields() if f.name in keywords]
    if clashes:
        raise PluginError(
            f"{method.id}: parameter names {clashes} clash with the keywords that bioanon.get_method / "
            f"bioanon.load_dataset take beside a method's parameters ({', '.join(keywords)}); rename them"
        )
    missing = [f.name for f in method.param_fields() if f.default is attrs.NOTHING]
    if missing:
        raise PluginError(f"{method.id}: parameters without default: {missing}")
    try:
        method()
    except Exception as exc:  # noqa: BLE001 - report any construction failure
        raise PluginError(f"{method.id}: constructing with default parameters failed: {exc}") from exc


@attrs.frozen
class Featurizer:
    """The default feature view of a payload column, registered through ``register_payload_features``:
    ``function(table) -> (N, D) array``."""

    payload: str
    function: Callable[[Any], Any]
    distribution: str
    description: str = ""


class Registry(Mapping[str, Entry]):
    """Immutable mapping ``method id → Entry``; aliases resolve too. ``featurizers`` maps payload column names
    to their :class:`Featurizer` (the default feature view of a payload that cannot be flattened).

    Looking up a deprecated alias (``registry[old]``, :meth:`get`, :meth:`create`) emits a DeprecationWarning
    naming the new id the first time only; ``in`` and :meth:`find` do not warn."""

    def __init__(self, entries: Mapping[str, Entry], featurizers: Mapping[str, Featurizer] | None = None):
        self._entries = MappingProxyType(dict(sorted(entries.items())))
        self.featurizers: Mapping[str, Featurizer] = MappingProxyType(dict(featurizers or {}))
        aliases = {}
        deprecated = {}
        for mid, e in self._entries.items():
            for a in e.aliases:
                aliases[a] = mid
            for a in e.deprecated_aliases:
                deprecated[a] = mid
        self._aliases = MappingProxyType(aliases)
        self._deprecated = MappingProxyType(deprecated)
        # the deprecated aliases already warned about: not part of the mapping, which stays immutable
        self._warned: set[str] = set()

    def __getitem__(self, method_id: str) -> Entry:
        if method_id in self._deprecated:
            self._warn_deprecated(method_id)
        return self._entries[self._aliases.get(method_id, method_id)]

    def _warn_deprecated(self, old: str) -> None:
        """The DeprecationWarning of the deprecated alias ``old``, once."""
        if old in self._warned:
            return
        self._warned.add(old)
        new = self._deprecated[old]
        warn_deprecated(
            f"method id {old!r} is deprecated: use {new!r} (same method and parameters; {old!r} will "
            f"be removed in a future version)"
        )

    def current_id(self, method_id: str) -> str:
        """``method_id`` itself, or the id that replaces it when it is a deprecated alias (without warning);
        what results should show for a method written with an old id."""
        return self._deprecated.get(method_id, method_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, method_id: object) -> bool:
        return method_id in self._entries or method_id in self._aliases

    def suggest(self, method_id: str, kind: str | None = None, n: int = 3) -> list[str]:
        """Ids close to ``method_id`` (for "did you mean")."""
        import difflib

        pool = [m for m, e in self._entries.items() if kind is None or e.cls.kind == kind]
        pool += [
            a
            for a, m in self._aliases.items()  # old ids are not suggested
            if a not in self._deprecated and (kind is None or self._entries[m].cls.kind == kind)
        ]
        close = difflib.get_close_matches(method_id, pool, n=n, cutoff=0.75)
        # also match on the part after the dot: "gaussian_blur" -> "face.gaussian_blur"
        tail = [m for m in pool if m.split(".", 1)[-1] == method_id.split(".", 1)[-1] and m not in close]
        return (tail + close)[:n]

    def get(self, method_id: str, kind: str | None = None) -> type[Method]:  # type: ignore[override]
        """The class registered under ``method_id``; UnknownMethodError with suggestions otherwise."""
        if method_id in self:
            cls = self[method_id].cls
            if kind is None or cls.kind == kind:
                return cls
            raise UnknownMethodError(method_id, self.suggest(method_id, kind), kind=kind)
        raise UnknownMethodError(method_id, self.suggest(method_id, kind), kind=kind)

    def create(self, method_id: str, kind: str | None = None, **params: object) -> Method:
        """Instantiate a method with parameters (validated); MissingDependencyError when an optional package it
        declares in ``requires`` is not installed (naming the packages and the install command)."""
        cls = self.get(method_id, kind)
        cls.check_requirements()
        return cls(**params)

    def unavailable(self, entries: Iterable[Entry] | None = None) -> dict[str, dict[str, str]]:
        """Method id → its missing optional packages (import name → install command), for the methods (of
        ``entries``, default all) that cannot run here; looked up without importing anything."""
        out = {}
        for e in self._entries.values() if entries is None else entries:
            missing = e.cls.missing_requirements()
            if missing:
                out[e.cls.id] = missing
        return out

    def find(
        self,
        patterns: Iterable[str] = (),
        *,
        kind: str | None = None,
        trait: str | None = None,
    ) -> list[Entry]:
        """Entries matching any of the shell-style ``patterns`` (all when none), a kind and a trait."""
        if kind is not None and kind not in KINDS:
            import difflib

            raise UnknownMethodError(kind, difflib.get_close_matches(kind, KINDS, n=2), kind="kind of")
        pats = list(patterns) or ["*"]
        out = []
        for mid, e in self._entries.items():
            if kind is not None and e.cls.kind != kind:
                continue
            if trait is not None and e.cls.trait != trait:
                continue
            if any(fnmatch.fnmatchcase(mid, p) or p in e.aliases for p in pats):
                out.append(e)
        return out

    def by_distribution(self) -> dict[str, list[Entry]]:
        """Entries grouped by the distribution that registered them."""
        out: dict[str, list[Entry]] = {}
        for e in self._entries.values():
            out.setdefault(e.distribution, []).append(e)
        return out

"""Base classes of the six method kinds, and :func:`param`, the typed parameter declaration.

A method is an ``attrs`` class whose init fields are its parameters::

    @attrs.define(kw_only=True)
    class GaussianNoise(Anonymizer):
        \"\"\"Add zero-mean Gaussian noise to every value.\"\"\"
        id = "any.gaussian_noise"
        payloads = ("features",)
        sigma: float = param(0.1, help="noise standard deviation", low=0.0)
        seed: int = param(0, help="random seed")

        def transform(self, table): ...

Construction is cheap and validates every parameter against its annotation and constraints; a bad value raises
:class:`~bioanon.errors.ParameterError` naming the method id, the parameter, the value and what is allowed.
Fitted state lives in ``init=False`` fields whose names end in ``_``.
"""

from __future__ import annotations

import contextvars
import enum
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, cast

import attrs
import numpy as np

from .bibliography import cite, reference_keys
from .device import DEVICE_HELP, PRECISIONS, check_device_text
from .errors import DataError, ParameterError, require_fitted, unknown_param_error

__all__ = [
    "KINDS",
    "Anonymizer",
    "DatasetSource",
    "Deanonymizer",
    "Method",
    "Recognizer",
    "CentroidRecognizer",
    "Comparator",
    "FeatureRecognizer",
    "ScoreMatrix",
    "FLAT_PAYLOADS",
    "feature_matrix",
    "feature_view",
    "Selector",
    "UtilityMeasure",
    "comparator_stamp",
    "fitted",
    "n_components_ok",
    "param",
    "table_comparator",
    "with_comparator",
]

_HELP = "bioanon_help"
_GIVEN_PARAMS: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "bioanon_given_params", default=None
)
_AFFECTS = "bioanon_affects_output"
_CONSTRAINT = "bioanon_constraint"


@attrs.frozen
class _Constraint:
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True
    choices: tuple[Any, ...] | None = None
    check: Callable[[Any], bool] | None = None
    check_text: str | None = None

    def describe(self) -> str:
        parts = []
        if self.choices is not None:
            parts.append("one of " + ", ".join(repr(c) for c in self.choices))
        if self.low is not None or self.high is not None:
            lo = "(-inf" if self.low is None else ("[" if self.low_inclusive else "(") + f"{self.low:g}"
            hi = "inf)" if self.high is None else f"{self.high:g}" + ("]" if self.high_inclusive else ")")
            parts.append(f"in {lo}, {hi}")
        if self.check_text:
            parts.append(self.check_text)
        return "; ".join(parts)

    def ok(self, value: Any) -> bool:
        if value is None:
            return True
        if self.choices is not None and value not in self.choices:
            return False
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if self.low is not None and (v < self.low or (v == self.low and not self.low_inclusive)):
                return False
            if self.high is not None and (v > self.high or (v == self.high and not self.high_inclusive)):
                return False
        if self.check is not None and not self.check(value):
            return False
        return True


#: The largest magnitude a float parameter takes on a side where its declaration sets no bound (``low``/``high`` of
#: :func:`param`): beyond it a value is absurd for any method (a noise scale of 1e308 overflows every computation),
#: and a method that needs more declares its own bound.
FLOAT_PARAM_LIMIT = 1e12


def float_problem(value: Any, constraint: _Constraint | None = None) -> str:
    """What is wrong with the float(s) of a parameter value (a float, or the floats of a tuple): not finite
    (inf, -inf, nan), or beyond :data:`FLOAT_PARAM_LIMIT` in magnitude on a side where ``constraint`` declares no
    bound; ``""`` when nothing is. The text says what is allowed."""
    values = value if isinstance(value, tuple) else (value,)
    low = constraint.low if constraint is not None and constraint.low is not None else -FLOAT_PARAM_LIMIT
    high = constraint.high if constraint is not None and constraint.high is not None else FLOAT_PARAM_LIMIT
    for v in values:
        if not isinstance(v, float):
            continue
        if not math.isfinite(v) or not low <= v <= high:
            return f"a finite number in [{low:g}, {high:g}]"
    return ""


def param(
    default: Any = attrs.NOTHING,
    *,
    help: str,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    choices: Sequence[Any] | None = None,
    check: Callable[[Any], bool] | None = None,
    check_text: str | None = None,
    affects_output: bool = True,
) -> Any:
    """Declare a method parameter.

    Parameters
    ----------
    default : the default value (required: every parameter has one, so ``Method()`` always works).
    help : one-line help text, shown by ``bioanon describe`` and ``--params``.
    low, high, low_inclusive, high_inclusive : numeric range (applies to every element of a tuple value). A float
        value must also be finite and, on a side without a bound here, within ±:data:`FLOAT_PARAM_LIMIT`.
    choices : the allowed values (a ``Literal[...]`` annotation does the same).
    check, check_text : any further predicate and the text that says what it allows.
    affects_output : False for parameters that cannot change results (batch size, threads, device, progress);
        they are left out of the fingerprint.
    """
    constraint = _Constraint(
        low, high, low_inclusive, high_inclusive, tuple(choices) if choices is not None else None, check, check_text
    )
    metadata = {_HELP: help, _AFFECTS: affects_output, _CONSTRAINT: constraint}
    if isinstance(default, (list, dict, set)):
        raise TypeError("param(): use a tuple (immutable) as default, not a list/dict/set")
    return attrs.field(default=default, metadata=metadata, on_setattr=_validate_on_assignment)


def _validate_on_assignment(method: Method, attribute: attrs.Attribute[Any], value: Any) -> Any:
    """``method.<param> = value`` runs the checks of construction: the value stored is the checked (coerced)
    one, and an invalid one raises :class:`~bioanon.errors.ParameterError` and leaves the old value."""
    return method._checked_param(attribute, value)


def fitted(default: Any = None) -> Any:
    """Declare fitted state (set by ``fit``/``enroll``; not a parameter, not in repr or equality).
    Name such fields with a trailing underscore: ``mean_: np.ndarray | None = fitted()``."""
    return attrs.field(default=default, init=False, repr=False, eq=False)


# --------------------------------------------------------------------------------------------------- typing


def _type_text(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a) for a in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"tuple[{_type_text(args[0])}, ...]"
        return "tuple[" + ", ".join(_type_text(a) for a in args) + "]"
    if tp is type(None):
        return "None"
    return getattr(tp, "__name__", str(tp))


def _resolve(cls: type, tp: Any) -> Any:
    """Evaluate a string annotation in the class's module (and typing's names) when get_type_hints cannot."""
    if not isinstance(tp, str):
        return Any if tp is None else tp
    import sys

    namespace = dict(vars(typing))
    namespace.update(getattr(sys.modules.get(cls.__module__), "__dict__", {}))
    try:
        return eval(tp, namespace)  # noqa: S307 - annotations of an installed plugin's own class
    except Exception:  # noqa: BLE001
        return Any


_ANNOTATION_CODE: dict[str, types.CodeType] = {}  # annotation text -> compiled expression (shared, immutable)


def _param_hints(cls: type, names: set[str]) -> dict[str, Any]:
    """The resolved annotations of ``names`` (the parameters), as ``typing.get_type_hints(cls)`` gives them.

    Only the parameters' annotations are evaluated, each in the namespaces get_type_hints uses for the class of
    the MRO that declares it (that class's dict as globals, its module's dict as locals), not every annotation of
    every base class: that made registering ~140 classes cost ~0.05 s at start-up. An annotation that evaluates
    to a plain class (``int``, ``str``, ...) is taken as is (get_type_hints returns the same class); any other
    goes through get_type_hints. A declaring class whose annotations do not resolve is left out (the caller falls
    back to :func:`_resolve`)."""
    import sys

    hints: dict[str, Any] = {}
    todo = set(names)
    for base in cls.__mro__:  # the most derived declaration of a name wins
        ann = base.__dict__.get("__annotations__")
        if not isinstance(ann, dict):
            continue
        own = {n: t for n, t in ann.items() if n in todo}
        if not own:
            continue
        todo -= set(own)
        module_ns = getattr(sys.modules.get(base.__module__), "__dict__", {})
        class_ns = dict(vars(base))
        rest = {}
        for name, text in own.items():
            value = None
            if isinstance(text, str):
                code = _ANNOTATION_CODE.get(text)
                try:
                    if code is None:
                        code = _ANNOTATION_CODE.setdefault(text, compile(text, "<annotation>", "eval"))
                    value = eval(code, class_ns, module_ns)  # noqa: S307 - an installed class's annotation
                except Exception:  # noqa: BLE001 - left to get_type_hints (and its error handling)
                    value = None
            if isinstance(value, type) and not isinstance(value, types.GenericAlias):
                hints[name] = value
            else:
                rest[name] = text
        if not rest:
            continue
        try:
            hints.update(typing.get_type_hints(types.SimpleNamespace(__annotations__=rest), class_ns, module_ns))
        except Exception:  # noqa: BLE001 - e.g. a name the module does not define
            continue
    return hints


def _importable(name: str) -> bool:
    """Whether ``import name`` would find the module, found without importing it: a dotted name is looked up
    in the folders of its parent package's spec unless the parent is imported already (``cv2.face`` exists as
    a folder only in the opencv-contrib wheels)."""
    import importlib.util
    import pkgutil
    import sys

    if name in sys.modules:
        return sys.modules[name] is not None  # None: blocked, e.g. by a test
    parent = name.rpartition(".")[0]
    try:
        if not parent or sys.modules.get(parent) is not None:
            return importlib.util.find_spec(name) is not None
        if parent in sys.modules:  # the parent is blocked
            return False
        parts = name.split(".")
        spec = importlib.util.find_spec(parts[0])
        for i in range(2, len(parts) + 1):
            locations = spec.submodule_search_locations if spec is not None else None
            if not locations:
                return False
            finders = (pkgutil.get_importer(loc) for loc in locations)  # the finders of sys.path_hooks
            spec = next((sp for f in finders if f is not None and (sp := f.find_spec(".".join(parts[:i])))), None)
        return spec is not None
    except (ImportError, ValueError):
        return False


def _coerce(value: Any, tp: Any) -> tuple[bool, Any]:
    """Check ``value`` against annotation ``tp``; return (ok, coerced value). Coercions are lossless only:
    int → float, numpy scalars → Python, list → tuple, enum by value."""
    if tp is Any:
        return True, value
    if isinstance(value, np.generic):
        value = value.item()
    origin = typing.get_origin(tp)
    if origin is Literal:
        return (value in typing.get_args(tp)), value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            ok, v = _coerce(value, arg)
            if ok and (arg is not float or not isinstance(value, int) or int not in typing.get_args(tp)):
                return True, v
        return False, value
    if origin is tuple or tp is tuple:
        if isinstance(value, (list, tuple)):
            args = typing.get_args(tp)
            if not args:
                return True, tuple(value)
            if len(args) == 2 and args[1] is Ellipsis:
                out = [_coerce(v, args[0]) for v in value]
            elif len(args) == len(value):
                out = [_coerce(v, a) for v, a in zip(value, args, strict=True)]
            else:
                return False, value
            return all(o[0] for o in out), tuple(o[1] for o in out)
        return False, value
    if tp is type(None):
        return value is None, value
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return (isinstance(value, int) and not isinstance(value, bool)), value
    if tp is float:
        if isinstance(value, bool):
            return False, value
        if isinstance(value, (int, float)):
            value = float(value)
            return (not math.isnan(value)), value
        return False, value
    if tp is str:
        return isinstance(value, str), value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return True, tp(value)
        except ValueError:
            return False, value
    if isinstance(tp, type):
        return isinstance(value, tp), value
    return True, value


def parse_param_text(text: str, tp: Any) -> Any:
    """Parse a command-line value (``-o name=value``) for a parameter of annotation ``tp``.

    JSON is tried first (numbers, true/false, null, lists); a bare word stays a string."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = text
    ok, _ = _coerce(value, tp)
    if not ok and isinstance(value, (int, float, bool)) and not isinstance(value, str):
        ok_s, _ = _coerce(text, tp)
        if ok_s:
            return text
    if isinstance(value, str) and "," in value and typing.get_origin(tp) is tuple:
        return [parse_param_text(v.strip(), typing.get_args(tp)[0]) for v in value.split(",")]
    return value


# --------------------------------------------------------------------------------------------------- Method

KINDS = ("anonymizer", "deanonymizer", "recognizer", "utility", "selector", "dataset")


# words whose full stop does not end a sentence ("Zou et al. (2018)", "e.g. Gaussian", "cf. Fig. 2")
ABBREVIATIONS = frozenset(
    {
        "al",
        "e.g",
        "i.e",
        "cf",
        "vs",
        "fig",
        "figs",
        "eq",
        "eqs",
        "sec",
        "ch",
        "no",
        "nos",
        "ref",
        "refs",
        "approx",
        "resp",
        "ca",
        "vol",
        "pp",
    }
)


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (whitespace joined): up to the first ``.``, ``!`` or ``?`` followed by a
    space and not by a lower-case word, where the full stop does not end an abbreviation (:data:`ABBREVIATIONS`:
    "et al.", "e.g.", ...); the whole text when it has one sentence."""
    text = " ".join(text.split())
    for m in re.finditer(r"[.!?](?= )", text):
        i = m.start()
        if text[i + 2 : i + 3].islower():  # "etc. and", "approx. equal": the sentence goes on
            continue
        word = text[:i].rsplit(" ", 1)[-1].lstrip("([{\"'`").lower()
        if text[i] == "." and word in ABBREVIATIONS:
            continue
        return text[: i + 1]
    return text


@attrs.define(kw_only=True)
class Method:
    """Base of every method. Subclasses set the class attributes below and declare parameters with
    :func:`param`."""

    id: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    trait: ClassVar[str] = "any"
    version: ClassVar[str] = "1"
    payloads: ClassVar[tuple[str, ...]] = ()
    # the works the method follows, parts separated by ";": a part starting with a key of bibliography.BIBLIOGRAPHY
    # cites that entry ("fantomas §6.1, Table IV"), any other part is free text shown as written
    reference: ClassVar[str] = ""
    distribution: ClassVar[str | None] = None  # set by the registry when a plugin registers the class
    example_params: ClassVar[dict[str, Any]] = {}  # parameters that run on bioanon.testing's tiny tables
    # optional packages the method imports when it runs: import name -> install command (checked without
    # importing them by missing_requirements(): a method missing one stays registered, is listed as unavailable
    # with the command, and creating it through the registry raises MissingDependencyError; config validation
    # reports it too). Import them inside the methods, never at module import.
    requires: ClassVar[dict[str, str]] = {}
    # parameters whose values name attribute columns of the data (a string, or a tuple of strings; "" and
    # "subject" name none): config validation checks them against the attribute columns the data set's source
    # declares (DatasetSource.attribute_names), before any data is loaded
    attribute_params: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def missing_requirements(cls) -> dict[str, str]:
        """The declared optional packages that cannot be imported here (name -> install command).

        Looked up without importing them (a dotted name such as ``cv2.face`` in its parent package's folders,
        without importing the parent); a name set to None in ``sys.modules`` (blocked, e.g. by a test) is
        missing."""
        return {name: install for name, install in cls.requires.items() if not _importable(name)}

    def requirement_problems(self) -> list[str]:
        """One line per declared optional package that cannot be imported here (for ``preflight``)."""
        return [
            f"{self.id} needs {name}, which is not installed: {how}"
            for name, how in self.missing_requirements().items()
        ]

    @classmethod
    def check_requirements(cls) -> None:
        """Raise :class:`~bioanon.errors.MissingDependencyError` (naming the method, the packages and the
        install command) when a package of ``requires`` cannot be imported here; the registry calls it when it
        creates the method."""
        missing = cls.missing_requirements()
        if missing:
            from .errors import MissingDependencyError

            raise MissingDependencyError(cls.id or cls.__name__, missing)

    # named sets of parameter values (``preset`` parameter): name -> {param: value}; a preset fills the
    # parameters left at their declared defaults (see _apply_preset)
    presets: ClassVar[dict[str, dict[str, Any]]] = {}

    def __new__(cls, *args: Any, **given: Any) -> Method:
        accepted = [f.alias or f.name for f in attrs.fields(cls) if f.init]
        unknown = [name for name in given if name not in accepted]
        if unknown:  # attrs' __init__ would raise a bare TypeError
            raise unknown_param_error(cls.id or cls.__name__, unknown[0], given[unknown[0]], accepted)
        _GIVEN_PARAMS.set(frozenset(given))  # the parameters the caller set (a preset fills the others)
        return super().__new__(cls)

    def __attrs_post_init__(self) -> None:
        self._apply_preset()
        self._validate_params()

    def _apply_preset(self) -> None:
        """Give every parameter the caller did not set the value of the chosen ``preset`` (if any); a value
        given explicitly wins, also when it equals the declared default."""
        given = _GIVEN_PARAMS.get()
        _GIVEN_PARAMS.set(None)
        chosen = getattr(self, "preset", None)
        if not self.presets or chosen is None:
            return
        values = self.presets.get(chosen)
        if values is None:
            raise ParameterError(
                self.id or type(self).__name__, "preset", chosen, " | ".join(repr(p) for p in self.presets)
            )
        defaults = {f.name: f.default for f in self.param_fields()}
        for name, value in values.items():
            if name in defaults and (name not in given if given is not None else getattr(self, name) == defaults[name]):
                object.__setattr__(self, name, value)

    @classmethod
    def preset_params(cls) -> set[str]:
        """The parameters some preset of the class sets."""
        return {name for values in cls.presets.values() for name in values}

    # -- parameters ------------------------------------------------------------------------------------
    @classmethod
    def param_fields(cls) -> tuple[attrs.Attribute[Any], ...]:
        """The init fields (parameters), in declaration order."""
        return tuple(f for f in attrs.fields(cls) if f.init)

    @classmethod
    def param_types(cls) -> dict[str, Any]:
        """Resolved annotations of the parameters."""
        cache = cls.__dict__.get("_bioanon_types")
        if cache is None:
            hints = _param_hints(cls, {f.name for f in cls.param_fields()})
            cache = {f.name: hints[f.name] if f.name in hints else _resolve(cls, f.type) for f in cls.param_fields()}
            type.__setattr__(cls, "_bioanon_types", cache)
        return cache

    @classmethod
    def param_specs(cls) -> list[dict[str, Any]]:
        """One dict per parameter: name, type, default, help, allowed, affects_output."""
        out = []
        types_ = cls.param_types()
        for f in cls.param_fields():
            c: _Constraint | None = f.metadata.get(_CONSTRAINT)
            default: Any = f.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory()
            out.append(
                {
                    "name": f.name,
                    "type": _type_text(types_[f.name]),
                    "default": None if default is attrs.NOTHING else default,
                    "required": default is attrs.NOTHING,
                    "help": f.metadata.get(_HELP, ""),
                    "allowed": c.describe() if c else "",
                    "affects_output": f.metadata.get(_AFFECTS, True),
                }
            )
        return out

    def _validate_params(self) -> None:
        for f in self.param_fields():
            value = getattr(self, f.name)
            coerced = self._checked_param(f, value)
            if coerced is not value:
                object.__setattr__(self, f.name, coerced)

    def _checked_param(self, f: attrs.Attribute[Any], value: Any) -> Any:
        """``value`` for parameter ``f`` checked against its type and constraint (coerced, e.g. list → tuple,
        int → float); ParameterError naming the method, the parameter, the value and what is allowed."""
        tp = self.param_types()[f.name]
        ok, coerced = _coerce(value, tp)
        c: _Constraint | None = f.metadata.get(_CONSTRAINT)
        if not ok:
            allowed = _type_text(tp)
            if c and c.describe():
                allowed += f" ({c.describe()})"
            raise ParameterError(self.id or type(self).__name__, f.name, value, allowed)
        if c is not None and not c.ok(coerced):
            raise ParameterError(self.id or type(self).__name__, f.name, value, c.describe())
        problem = float_problem(coerced, c)
        if problem:
            raise ParameterError(self.id or type(self).__name__, f.name, value, problem)
        return coerced

    def get_params(self) -> dict[str, Any]:
        """The parameters as a dict (tuples stay tuples)."""
        return {f.name: getattr(self, f.name) for f in self.param_fields()}

    def with_params(self, **changes: Any) -> Method:
        """An unfitted copy with some parameters changed (validated again)."""
        accepted = [f.name for f in self.param_fields()]
        unknown = sorted(set(changes) - set(accepted))
        if unknown:
            raise unknown_param_error(self.id, unknown[0], changes[unknown[0]], accepted)
        params = self.get_params()
        if self.presets and changes.get("preset", getattr(self, "preset", None)) != getattr(self, "preset", None):
            # another preset: parameters that hold what the old preset (else the default) gave them are left for
            # the new one to set
            defaults = {f.name: f.default for f in self.param_fields()}
            old = self.presets.get(self.preset, {})  # type: ignore[attr-defined]
            for name in self.preset_params():
                if name not in changes and name in params and params[name] == old.get(name, defaults.get(name)):
                    del params[name]
        params.update(changes)
        return type(self)(**params)

    def fingerprint(self) -> str:
        """Hash of id, version and every output-affecting parameter (defaults applied); for a method with a
        ``device`` parameter also the kind of device it runs on (cpu, cuda, mps; see :mod:`bioanon.device`)."""
        from .cache import fingerprint

        affecting = {f.name: getattr(self, f.name) for f in self.param_fields() if f.metadata.get(_AFFECTS, True)}
        spec: dict[str, Any] = {"id": self.id, "version": self.version, "params": affecting}
        if "device" in attrs.fields_dict(type(self)):
            # CPU and GPU results differ beyond bitwise equality: they are never mixed (bioanon.device)
            from .device import device_kind

            # (getattr: only subclasses with a device parameter have the attribute)
            spec["device_kind"] = device_kind(getattr(self, "device") or "")  # noqa: B009
        return fingerprint(spec)

    def _repr_html_(self) -> str:
        """Notebook display: id, summary and every parameter with its value."""
        from .notebook import method_html

        return method_html(self)

    @classmethod
    def summary(cls) -> str:
        """The docstring's first sentence (of its first paragraph; see :func:`first_sentence`)."""
        doc = (inspect.getdoc(cls) or "").strip()
        if not doc:
            return ""
        return first_sentence(doc.split("\n\n")[0])

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """Everything a user needs to know about the method, as a JSON-able dict."""
        return {
            "id": cls.id,
            "kind": cls.kind,
            "trait": cls.trait,
            "version": cls.version,
            "payloads": list(cls.payloads),
            "summary": cls.summary(),
            "doc": inspect.getdoc(cls) or "",
            "reference": cls.reference,
            "citation": cite(cls.reference),  # the reference with each bibliography key spelled out
            "reference_keys": reference_keys(cls.reference),
            "distribution": cls.distribution,
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "params": cls.param_specs(),
            "presets": {name: dict(values) for name, values in cls.presets.items()},
            "requires": dict(cls.requires),
            "missing": cls.missing_requirements(),  # not installed here: the method is unavailable
        }


def _require_payload(method: Method, table: Any, name: str | None = None) -> str:
    """Return the payload column the method works on (the first of its ``payloads`` the table has)."""
    from .errors import TableError

    candidates = [name] if name else list(method.payloads)
    for c in candidates:
        if c in table.payload_names:
            return c
    raise TableError(
        f"{method.id}: the table has none of the payload columns {candidates}; it has {table.payload_names}"
    )


#: Payloads that trait-agnostic methods flatten into one vector per sample, in order of preference.
FLAT_PAYLOADS: tuple[str, ...] = ("features", "imu", "pose", "image")


def feature_view(
    table: Any,
    payload: str | None = None,
    *,
    candidates: Sequence[str] = FLAT_PAYLOADS,
    who: str = "",
    registry: Any = None,
) -> tuple[str, np.ndarray]:
    """The payload column a trait-agnostic method reads and its samples as vectors: ``(column, (N, D) float32)``.

    * ``payload`` given: that column — flattened when it is fixed-shape, else through its registered feature
      view;
    * else the first of ``candidates`` (fixed-shape payloads: ``features``, ``imu``, ``pose``, ``image``) the
      table has, flattened;
    * else the first of the table's payloads for which a plugin registered a default feature view through the
      ``register_payload_features`` hook (:mod:`bioanon.hookspecs`), e.g. the utterance MFCC statistics that
      bioanon-voice registers for ``audio``. The core knows no trait: which payloads have a view, and what it
      is, comes from the installed plugins (``registry``: default the current run's,
      :func:`bioanon.context.current_context`).

    Each table is resolved on its own, so a clear table with ``audio`` and an anonymized one with the same
    statistics as ``features`` (``voice.random_set_mean``) meet in one space.

    Raises
    ------
    TableError
        Naming ``who`` (the method id), the columns looked for and the table's payloads, when no column fits;
        or when a feature view returns something other than ``(len(table), D)`` numbers.
    """
    from .errors import TableError
    from .payloads import flatten_payload

    prefix = f"{who}: " if who else ""
    names = list(table.payload_names)
    if payload:
        if payload not in names:
            raise TableError(f"{prefix}the table has no payload column {payload!r}; it has {names}")
        order = [payload]
    else:
        order = [c for c in candidates if c in names] + [c for c in names if c not in candidates]
    featurizers = None
    for column in order:
        fixed = None not in table.payload_shape(column)  # from the schema: nothing is read yet
        if fixed and (payload or column in candidates):
            return column, flatten_payload(table.payload(column))
        if featurizers is None:
            if registry is None:
                from .context import current_context

                registry = current_context().registry
            featurizers = getattr(registry, "featurizers", {})
        view = featurizers.get(column)
        if view is None:
            continue
        y = np.asarray(view.function(table))
        if y.ndim != 2 or y.shape[0] != len(table) or y.dtype.kind not in "biuf":
            raise TableError(
                f"{prefix}the feature view of payload {column!r} (registered by {view.distribution}) "
                f"returned an array of shape {y.shape} and dtype {y.dtype}; expected numbers of shape "
                f"({len(table)}, D)"
            )
        return column, y.astype(np.float32, copy=False)
    if payload:
        raise TableError(
            f"{prefix}payload {payload!r} has variable-length samples and no installed plugin provides "
            f"a feature view of it (hook register_payload_features); choose a fixed-shape payload of "
            f"{names}"
        )
    raise TableError(
        f"{prefix}the table has none of the fixed-shape payload columns {list(candidates)} and no "
        f"installed plugin provides a feature view of its payloads {names} (a trait plugin provides one "
        f"through the hook register_payload_features, e.g. bioanon-voice for 'audio')"
    )


def feature_matrix(
    table: Any,
    payload: str | None = None,
    *,
    candidates: Sequence[str] = FLAT_PAYLOADS,
    who: str = "",
    registry: Any = None,
) -> np.ndarray:
    """The ``(N, D)`` float32 vectors of :func:`feature_view` (without the column name)."""
    return feature_view(table, payload, candidates=candidates, who=who, registry=registry)[1]


# --------------------------------------------------------------------------------------------------- comparators

#: Table metadata key under which a protection records the comparator its templates must be compared with.
COMPARATOR_KEY = "comparator"


@attrs.frozen
class Comparator:
    """How templates of a protection are compared: ``function(probes, references)`` takes ``(P, D)`` and
    ``(R, D)`` arrays of templates and returns the ``(P, R)`` similarities (higher = more alike), vectorized over
    all pairs; ``name`` says in the report which comparator was used (e.g. ``"PE-MIU block alignment
    (optimal)"``).

    A protection (an :class:`Anonymizer`) whose templates must not be compared with plain cosine or Euclidean
    distance declares one by returning it from :meth:`Anonymizer.comparator`; the template-comparing recognizers
    (``any.similarity_attribute_attack``, ``any.knn``, ``any.cosine_centroid``) then use it when their
    reference templates (the attacker database, the gallery) come from that protection: the black-box attacker
    of the soft-biometric attack paper runs the protection, comparator included."""

    name: str
    function: Callable[[np.ndarray, np.ndarray], np.ndarray] = attrs.field(eq=False)

    def __call__(self, probes: np.ndarray, references: np.ndarray) -> np.ndarray:
        p = np.asarray(probes, dtype=np.float32)
        r = np.asarray(references, dtype=np.float32)
        if p.ndim != 2 or r.ndim != 2 or p.shape[1] != r.shape[1]:
            raise DataError(
                f"comparator {self.name!r}: expected (P, D) probes and (R, D) references, got {p.shape} and {r.shape}"
            )
        s = np.asarray(self.function(p, r), dtype=np.float64)
        if s.shape != (len(p), len(r)):
            raise ValueError(f"comparator {self.name!r} returned shape {s.shape}, expected {(len(p), len(r))}")
        return s


def with_comparator(table: Any, anonymizer: Anonymizer) -> Any:
    """``table`` with the comparator that ``anonymizer`` declares recorded in its metadata (the protection's
    id and parameters, and the comparator's name); ``table`` unchanged when it declares none. The anonymize
    stage of an evaluation calls it on every anonymized table; a protection may call it in ``transform`` too."""
    cmp = anonymizer.comparator()
    if cmp is None:
        return table
    import json

    params = json.loads(json.dumps(anonymizer.get_params(), default=str))
    return table.with_metadata(**{COMPARATOR_KEY: {"id": anonymizer.id, "params": params, "name": cmp.name}})


def comparator_stamp(table: Any) -> dict[str, Any] | None:
    """The comparator record :func:`with_comparator` left in ``table``'s metadata (None: plain templates)."""
    stamp = table.metadata.get(COMPARATOR_KEY)
    return stamp if isinstance(stamp, dict) else None


def table_comparator(table: Any, registry: Any = None) -> Comparator | None:
    """The :class:`Comparator` declared for ``table``'s templates: the recorded protection is created from
    ``registry`` (default: the current run's) with its recorded parameters and asked for its comparator.
    None when the table records none."""
    stamp = comparator_stamp(table)
    if stamp is None:
        return None
    if registry is None:
        from .context import current_context

        registry = current_context().registry
    comparator = registry.create(stamp["id"], "anonymizer", **stamp.get("params", {})).comparator()
    return cast("Comparator | None", comparator)


# --------------------------------------------------------------------------------------------------- parameters
# (of torch-backed methods; here rather than in bioanon.device, which knows nothing of methods)


def device_param(default: str = "") -> Any:
    """The ``device`` parameter of a torch-backed method (does not enter the parameters' fingerprint; the device
    *kind* does, see :meth:`Method.fingerprint`)."""
    return param(
        default,
        help=DEVICE_HELP,
        check=check_device_text,
        check_text="'', auto, cpu, cuda, cuda:N or mps",
        affects_output=False,
    )


def cuda_graphs_param(default: bool = True) -> Any:
    """The ``cuda_graphs`` parameter of a torch-backed method whose training loss suits CUDA graphs (see
    :class:`bioanon.nettrain.GraphedStep`). Not part of the fingerprint: like ``threads`` it changes how the
    same training runs (on a CUDA device only the dropout draws differ), not what it computes."""
    return param(
        default,
        help="on a CUDA device, run each training step (forward, backward and the optimizer's update) as a CUDA "
        "graph, one per batch shape: the same training with far fewer kernel launches; ignored on the CPU",
        affects_output=False,
    )


def precision_param(default: str = "auto") -> Any:
    """The ``precision`` parameter of a torch-backed method (part of the fingerprint: it changes results)."""
    return param(
        default,
        help="arithmetic: auto (bf16 autocast on CUDA, fp32 on the CPU), fp32, bf16 or fp16 "
        "(autocast; weights stay fp32)",
        choices=PRECISIONS,
    )


def weights_param(what: str = "a torch state dict / checkpoint file") -> Any:
    """The ``weights`` parameter of a trainable torch method: ``what`` to start from, fine-tuned on the training
    data (its content digest enters the trained-weight cache key; nothing is ever downloaded)."""
    return param("", help=f"{what} to start from (fine-tuned on the training data); nothing is downloaded")


def align(original: Any, anonymized: Any) -> Any:
    """``anonymized`` with its rows reordered to match ``original`` by sample id.

    Raises
    ------
    TableError
        If the two tables do not hold the same sample ids (names some missing and extra ones).
    """
    from .errors import TableError

    a, b = original.sample_ids, anonymized.sample_ids
    if len(a) == len(b) and np.array_equal(a, b):
        return anonymized
    order = np.argsort(b)
    pos = np.minimum(np.searchsorted(b[order], a), max(len(b) - 1, 0))
    found = (b[order][pos] == a) if len(b) else np.zeros(len(a), bool)
    if len(a) != len(b) or not found.all():
        missing = a[~found][:5].tolist()
        extra = sorted(set(b.tolist()) - set(a.tolist()))[:5]
        raise TableError(
            f"original ({len(a)} samples) and anonymized ({len(b)} samples) tables do not hold the "
            f"same sample ids: missing from anonymized {missing}, extra in anonymized {extra}"
        )
    return anonymized.take(order[pos])


# --------------------------------------------------------------------------------------------------- kinds


@attrs.define(kw_only=True)
class Anonymizer(Method):
    """Transforms samples to hide identity. ``fit(background)`` is optional (used by methods that need a
    population, e.g. k-Same); ``transform(table)`` returns a table with the same sample ids in the same order."""

    kind: ClassVar[str] = "anonymizer"
    needs_fit: ClassVar[bool] = False
    fit_defines_columns: ClassVar[bool] = False
    """True when ``fit`` chooses the output's columns — which features are kept, or what each output value
    means (``any.ive`` drops the features a forest finds telling of an attribute; ``any.pfrnet`` outputs a
    learned code) —, so that two fits on different data give outputs that do not line up column by column. An
    evaluation must then fit it once, on a background, and apply it to every set: ``[rates] background = 0``
    under ``[attacker_dataset]`` (which would fit it on the attacker data and on the evaluated data apart) is
    refused before any work (API 1.6)."""

    @classmethod
    def defines_columns_by_fit(cls, params: Mapping[str, Any]) -> bool:
        """Whether this anonymizer with ``params`` has output columns chosen by its fit (see
        :attr:`fit_defines_columns`, the default answer). A composite overrides it to answer for its parts
        (``any.chain``: whether one of its steps does). Called on validated parameters, before any work."""
        return cls.fit_defines_columns

    per_sample: ClassVar[bool] = False
    """True when each output row depends only on its own input row (payload, sample id, subject, attributes) and
    the parameters, and ``fit`` learns nothing from the data: a noise seeded by the sample id, a blur, a part
    removal. An evaluation then anonymizes each data set once, in shards that run as separate cached tasks
    across its workers, and takes every part's rows from that (a new split, other rates or another selection
    reuse every anonymized sample; each anonymized sample is stored once). The conformance check
    ``rows_independent`` checks the claim on a shuffled subset (API 1.9)."""

    @classmethod
    def rows_independent(cls, params: Mapping[str, Any]) -> bool:
        """Whether this anonymizer with ``params`` is :attr:`per_sample` (the default answer). A composite
        overrides it to answer for its parts (``any.chain``: whether every step is). Called on validated
        parameters, before any work."""
        return cls.per_sample

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """:meth:`Method.describe` and ``per_sample`` (with the default parameters)."""
        return {**super().describe(), "per_sample": bool(cls.rows_independent({}))}

    def fit(self, background: Any) -> Anonymizer:
        return self

    def transform(self, table: Any) -> Any:
        raise NotImplementedError

    def fit_transform(self, table: Any, background: Any = None) -> Any:
        return self.fit(background if background is not None else table).transform(table)

    def comparator(self) -> Comparator | None:
        """The comparator the anonymized templates must be compared with (a :class:`Comparator`), or None
        (default) when plain cosine or Euclidean comparison is meaningful. Template protections that change how
        templates are compared (e.g. ``any.pe_miu``, whose blocks are shuffled per template and aligned by the
        comparator) override it; the evaluation records it in the anonymized tables (:func:`with_comparator`)
        and template-comparing recognizers use it (the black-box attacker)."""
        return None

    payload_column = _require_payload


@attrs.define(kw_only=True)
class Deanonymizer(Method):
    """Learns to undo an anonymization from (clear, anonymized) pairs matched by sample id."""

    kind: ClassVar[str] = "deanonymizer"

    def fit(self, clear: Any, anonymized: Any) -> Deanonymizer:
        raise NotImplementedError

    def transform(self, table: Any) -> Any:
        raise NotImplementedError

    def held_out_ids(self) -> np.ndarray | None:
        """The sample ids of the attacker's pairs the last fit held out and did not train on (its validation
        share), or None. An evaluation de-anonymizes them and compares the result with trivial baselines, so a
        de-anonymizer that learned nothing is flagged instead of passing for a weak attack (API 1.4). By
        default the fitted attribute ``held_out_`` (a learned de-anonymizer sets it in ``fit``), else None."""
        held: np.ndarray | None = getattr(self, "held_out_", None)
        return held

    payload_column = _require_payload


@attrs.frozen
class ScoreMatrix:
    """Scores of probes against classes (higher = more alike)."""

    scores: np.ndarray  # (n_probes, n_classes) float
    classes: np.ndarray  # (n_classes,) labels of the columns
    probe_ids: np.ndarray | None = None

    def __attrs_post_init__(self) -> None:
        if self.scores.ndim != 2 or self.scores.shape[1] != len(self.classes):
            raise DataError(f"score matrix of shape {self.scores.shape} does not match {len(self.classes)} classes")

    def predict(self) -> np.ndarray:
        """The top-scoring class per probe."""
        return cast(np.ndarray, self.classes[np.argmax(self.scores, axis=1)])


@attrs.define(kw_only=True)
class Recognizer(Method):
    """An attacker: identifies subjects or infers an attribute.

    ``fit(train, label)`` trains the model (optional for training-free recognizers), ``enroll(gallery, label)``
    builds class references, ``score(probes)`` returns a :class:`ScoreMatrix`. Identity and attribute inference
    share this contract (``label="subject"`` or an attribute name).

    An evaluation scores a large probe set a block of probes at a time (within ``[run] memory``), which gives
    the same scores as one call when each probe's scores depend on that probe alone. A recognizer whose scores
    of one probe depend on the other probes (e.g. normalizing over the probe set) sets
    ``scores_probes_independently = False`` and is always called with every probe at once."""

    kind: ClassVar[str] = "recognizer"
    has_embedding: ClassVar[bool] = False
    embeds_per_sample: ClassVar[bool] = False
    """True when ``embed`` gives each sample's template from that sample alone and ``fit`` learns nothing from the
    data (a pretrained encoder): the ``[templates]`` stage then embeds each data set once, in shards that are
    separate cached tasks run across the workers, and every split's templates are row selections of that
    (API 1.9)."""
    scores_probes_independently: ClassVar[bool] = True

    def fit(self, train: Any, label: str = "subject") -> Recognizer:
        return self

    def enroll(self, gallery: Any, label: str = "subject") -> Recognizer:
        raise NotImplementedError

    def score(self, probes: Any) -> ScoreMatrix:
        raise NotImplementedError

    def embed(self, table: Any) -> np.ndarray:
        raise NotImplementedError(f"{self.id} has no embedding")

    def comparator_used(self) -> str:
        """The name of the :class:`Comparator` a protection declared that the last ``enroll``/``score`` compared
        templates with; ``""`` when the recognizer used its own comparison (the default)."""
        return ""

    payload_column = _require_payload


def n_components_ok(value: Any) -> bool:
    """Validator for PCA sizes: a share of variance in (0, 1] or a component count ≥ 1."""
    return (isinstance(value, int) and not isinstance(value, bool) and value >= 1) or (
        isinstance(value, float) and 0.0 < value <= 1.0
    )


@attrs.define(kw_only=True)
class FeatureRecognizer(Recognizer):
    """A recognizer that maps samples to a ``features`` table and delegates to an inner (core) recognizer.

    Subclasses implement ``inner_recognizer()`` (a fresh, unfitted recognizer for the features),
    ``feature_table(table)`` and, when the feature extraction itself learns something from the attacker's
    training set, ``fit_features(train)``. ``fit`` learns both on the training set; ``enroll`` may be called
    many times on one fitted recognizer; without ``fit`` it fits on the gallery."""

    has_embedding: ClassVar[bool] = True

    inner_: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def inner_recognizer(self) -> Recognizer:
        raise NotImplementedError

    def fit_features(self, train: Any) -> None:
        """Learn the feature extraction on the training set (default: nothing to learn)."""

    def feature_table(self, table: Any) -> Any:
        raise NotImplementedError

    def fit(self, train: Any, label: str = "subject") -> FeatureRecognizer:
        self.fit_features(train)
        features = self.feature_table(train)
        del train  # the samples can go while the inner recognizer fits, unless the caller still holds them
        self.inner_ = self.inner_recognizer().fit(features, label)
        return self

    def enroll(self, gallery: Any, label: str = "subject") -> FeatureRecognizer:
        if self.inner_ is None:
            self.fit(gallery, label)
        self.inner_.enroll(self.feature_table(gallery), label)
        return self

    def score(self, probes: Any) -> ScoreMatrix:
        require_fitted(self, "inner_", call="enroll()", before="score()")
        return cast(ScoreMatrix, self.inner_.score(self.feature_table(probes)))

    def embed(self, table: Any) -> np.ndarray:
        require_fitted(self, "inner_", call="fit() or enroll()", before="embed()")
        return cast(np.ndarray, self.inner_.embed(self.feature_table(table)))


@attrs.define(kw_only=True)
class CentroidRecognizer(Recognizer):
    """A recognizer that scores by cosine similarity of L2-normalized embeddings to each enrolled class's
    normalized mean embedding.

    Subclasses implement ``embed(table)`` (rows L2-normalized) and ``fit``; ``is_fitted()`` says whether
    ``enroll`` must first fit on the gallery (default: never)."""

    has_embedding: ClassVar[bool] = True

    classes_: Any = attrs.field(default=None, init=False, repr=False, eq=False)
    templates_: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def is_fitted(self) -> bool:
        return True

    def enroll(self, gallery: Any, label: str = "subject") -> CentroidRecognizer:
        if not self.is_fitted():
            self.fit(gallery, label)
        self.classes_, self.templates_ = centroid_templates(self.embed(gallery), labels_of(gallery, label))
        return self

    def score(self, probes: Any) -> ScoreMatrix:
        require_fitted(self, "templates_", call="enroll()", before="score()")
        s = np.asarray(self.embed(probes), dtype=np.float32) @ self.templates_.T  # float32 scores, kept as such
        return ScoreMatrix(s, self.classes_, probes.sample_ids)


def centroid_templates(embeddings: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(classes, L2-normalized mean embedding of each class) — vectorized over samples."""
    classes, inv = np.unique(labels, return_inverse=True)
    sums = class_sums(embeddings, inv, len(classes))
    norms = np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return classes, (sums / norms).astype(np.float32)


def class_sums(x: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-class sums (float64, ``(n_classes, D)``) of the rows of ``x`` with class codes ``0..n_classes-1``:
    a sparse one-hot matrix product (about 20× faster than ``np.add.at`` on float32 rows)."""
    import scipy.sparse

    x = np.asarray(x)
    x = x.reshape(len(x), int(np.prod(x.shape[1:])))
    codes = np.asarray(codes, dtype=np.int64)
    onehot = scipy.sparse.csr_matrix(
        (np.ones(len(codes)), (codes, np.arange(len(codes)))), shape=(n_classes, len(codes))
    )
    return np.asarray(onehot @ x.astype(np.float64, copy=False))


def labels_of(table: Any, label: str) -> np.ndarray:
    """The label column a recognizer trains on: ``subject`` or an attribute name."""
    return cast(np.ndarray, table.subjects if label == "subject" else table.attribute(label))


@attrs.define(kw_only=True)
class UtilityMeasure(Method):
    """How useful the anonymized data still is. ``fit(clear)`` (optional, task-based measures train on clear
    data); ``measure(original, anonymized)`` returns one value per sample (rows matched by sample id).

    ``higher_is_better`` gives the direction; ``floor(table)`` the worst meaningful level (chance for a
    task-based measure), used to normalize utility between floor and clear level."""

    kind: ClassVar[str] = "utility"
    higher_is_better: ClassVar[bool] = True
    paired: ClassVar[bool] = True
    extracts: ClassVar[bool] = False
    """True for a measure in two stages: ``extract(table)`` (slow, one JSON-able value per sample, e.g. a
    transcript) and ``compare(original, original_values, anonymized_values)``. An evaluation then runs each
    extraction as its own cached task, once per table (the clear evaluation set is extracted once for all
    anonymizers), and ``measure`` is ``compare`` of the two extractions."""

    def fit(self, clear: Any) -> UtilityMeasure:
        return self

    def measure(self, original: Any, anonymized: Any) -> np.ndarray:
        if self.extracts:
            anonymized = align(original, anonymized)
            return self.compare(original, self.extract(original), self.extract(anonymized))
        raise NotImplementedError

    def extract(self, table: Any) -> list[Any]:
        """Per-sample values (JSON-able: str, number, list) of ``table``, in row order (two-stage measures)."""
        raise NotImplementedError

    def compare(self, original: Any, original_values: list[Any], anonymized_values: list[Any]) -> np.ndarray:
        """One utility value per row of ``original`` from the extracted values of the clear rows and of their
        anonymized versions (same order) (two-stage measures)."""
        raise NotImplementedError

    def floor(self, table: Any) -> float:
        return 0.0

    payload_column = _require_payload


@attrs.define(kw_only=True)
class Selector(Method):
    """Chooses ``n`` subjects of the anonymized evaluation set (the False Sense of Privacy paper §4.3.3).

    ``reads_payloads`` (API 1.10): ``False`` for a selector that looks only at the subjects and the attributes
    (a random draw, metadata): an evaluation then gives it the tables without their payloads, and reads and
    copies none of them.

    ``subjects_only`` (API 1.12): ``True`` for a selector whose choice depends on the evaluation set's subject
    names and its seed alone, never on the anonymized data (a random draw): an evaluation then selects once per
    repeat, from the clear tables, for every anonymizer and setting, and computes each recognizer's clear level
    on those subjects once instead of once per setting."""

    kind: ClassVar[str] = "selector"
    reads_payloads: ClassVar[bool] = True
    subjects_only: ClassVar[bool] = False

    def select(self, table: Any, n: int, *, attacker: Any = None) -> list[str]:
        raise NotImplementedError


@attrs.define(kw_only=True)
class DatasetSource(Method):
    """Loads a real data layout (``load(path)``) or generates synthetic data (``load()``) as a SampleTable.

    The path is an argument, not a parameter, so it never enters a fingerprint: tables are fingerprinted
    by content. Problems found while loading that the user should see (files skipped, images without a face)
    go into the table metadata as sentences under ``load_warnings``; an evaluation lists them first among its
    warnings.

    ``attribute_names``: the attribute columns (names without ``attr.``) the source's tables can have, when
    they do not depend on the data (an optional file may leave some out); ``None`` (the default) when the data
    decide (a folder with a CSV of any columns). ``bioanon validate`` and config loading check the label and
    every attribute name a config uses against a declared list, without loading the data; ``bioanon describe``
    shows it.

    ``demo`` (API 1.8): what ``bioanon demo --trait <trait>`` runs on the synthetic source ``<trait>.synthetic``,
    as sections of an evaluation config: ``anonymizers``, ``recognizers`` and ``utility`` (required: the trait's
    own methods, cheap enough for a laptop), optionally ``params`` (the source's parameters), ``selection``,
    ``scenarios`` and ``rates``; the demo fills in the rest. Choose subject counts the evaluation set reaches and
    attackers strong on the clear data, so the demo warns about nothing. ``None`` (the default): the demo runs
    the core's ``any.*`` methods on the source's data."""

    kind: ClassVar[str] = "dataset"
    needs_path: ClassVar[bool] = True
    attribute_names: ClassVar[tuple[str, ...] | None] = None
    demo: ClassVar[Mapping[str, Any] | None] = None

    def load(self, path: Any = None) -> Any:
        raise NotImplementedError

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """:meth:`Method.describe` plus ``attribute_names``: the declared attribute columns (None: unknown until
        the data are loaded)."""
        out = super().describe()
        out["attribute_names"] = None if cls.attribute_names is None else list(cls.attribute_names)
        return out


KIND_CLASSES: dict[str, type[Method]] = {
    "anonymizer": Anonymizer,
    "deanonymizer": Deanonymizer,
    "recognizer": Recognizer,
    "utility": UtilityMeasure,
    "selector": Selector,
    "dataset": DatasetSource,
}

"""Testing support for bioanon and its plugins: a pytest plugin with fixtures, and conformance checks.

A pytest plugin, loaded only where it is asked for: ``pytest -p bioanon.testing``, or in a project's pytest
configuration ``addopts = "-p bioanon.testing"`` (as the plugin template and every plugin ``bioanon new-plugin``
creates have it), or ``pytest_plugins = ["bioanon.testing"]`` in the ``conftest.py`` at the rootdir or in its
``tests/`` folder (as bioanon's own tests have it; pytest refuses ``pytest_plugins`` in deeper conftest files).
Other projects that merely have bioanon in their environment do not get it. It provides:

``bioanon_plugin_manager``
    a fresh plugin manager (entry-point autoload off, built-in methods on) installed as the process default
    for the duration of the test.
``register_bioanon_plugin``
    ``register_bioanon_plugin(plugin_object, name)`` adds a plugin to that manager and returns the registry.
``make_sample_table`` / ``tiny_table``
    tiny seeded synthetic tables (payload ``features``, ``image``, ``imu``, ``pose`` or ``audio``).

and :func:`check_method`, which runs every conformance check on a method class::

    from bioanon.testing import check_method

    def test_my_anonymizer_conforms():
        report = check_method(MyAnonymizer)
        report.raise_for_failures()
        assert report.checks_run >= 10
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs
import numpy as np

from .errors import ParameterError
from .methods import (
    KIND_CLASSES,
    KINDS,
    Anonymizer,
    DatasetSource,
    Deanonymizer,
    Method,
    Recognizer,
    ScoreMatrix,
    Selector,
    UtilityMeasure,
)
from .registry import ID_PATTERN

if TYPE_CHECKING:
    from .table import SampleTable

__all__ = ["ConformanceReport", "check_method", "make_table"]

_M = TypeVar("_M", bound=Method)

_SESSION_TOTALS = {"methods": 0, "checks": 0, "found": 0, "failed": 0, "expected": 0}


# --------------------------------------------------------------------------------------------------- tables


def make_table(
    n_subjects: int = 6,
    samples_per_subject: int = 6,
    *,
    payload: str = "features",
    seed: int = 0,
) -> SampleTable:
    """A tiny synthetic :class:`~bioanon.table.SampleTable` where subjects are separable.

    ``payload`` is one of ``features`` (float32 16), ``image`` (uint8 16×16×3), ``imu`` (float32 32×6),
    ``pose`` (float32 20×5×3) or ``audio`` (ragged float32 at 8 kHz). Attributes: ``group`` (per subject) and
    ``activity`` (per sample)."""
    from .table import SampleTable

    rng = np.random.default_rng(seed)
    n = n_subjects * samples_per_subject
    subj = np.repeat(np.arange(n_subjects), samples_per_subject)
    shapes = {"features": (16,), "image": (16, 16, 3), "imu": (32, 6), "pose": (20, 5, 3)}
    metadata: dict[str, Any] = {"trait": "any"}
    if payload == "audio":
        lengths = rng.integers(800, 1200, size=n)
        freqs = 200 + 40 * subj
        t = [np.arange(k) / 8000.0 for k in lengths]
        values: Any = [
            (np.sin(2 * np.pi * f * tt) + 0.05 * rng.standard_normal(len(tt))).astype(np.float32)
            for f, tt in zip(freqs, t, strict=True)
        ]
        metadata["sample_rate"] = 8000
    elif payload in shapes:
        shape = shapes[payload]
        centres = rng.standard_normal((n_subjects, *shape)) * 2.0
        x = centres[subj] + 0.3 * rng.standard_normal((n, *shape))
        if payload == "image":
            values = np.clip(128 + 30 * x, 0, 255).astype(np.uint8)
        else:
            values = x.astype(np.float32)
    else:
        raise ParameterError("make_table", "payload", payload, f"one of {sorted(shapes) + ['audio']}")
    return SampleTable.from_arrays(
        subject=np.array([f"s{i}" for i in range(n_subjects)])[subj],
        payloads={payload: values},
        attributes={
            "group": np.array(["a", "b"])[subj % 2],
            "activity": (np.arange(n) % 3).astype(np.int64),
        },
        metadata=metadata,
    )


# --------------------------------------------------------------------------------------------------- report


@attrs.define
class ConformanceReport:
    """What :func:`check_method` found: passed, failed (with reasons) and skipped checks."""

    method_id: str
    passed: list[str] = attrs.field(factory=list)
    failed: list[tuple[str, str]] = attrs.field(factory=list)
    skipped: list[tuple[str, str]] = attrs.field(factory=list)

    @property
    def checks_run(self) -> int:
        return len(self.passed) + len(self.failed)

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        head = (
            f"{self.method_id}: {self.checks_run} conformance checks run, {len(self.passed)} passed, "
            f"{len(self.failed)} failed, {len(self.skipped)} skipped"
        )
        lines = [head] + [f"  FAILED {name}: {why}" for name, why in self.failed]
        lines += [f"  skipped {name}: {why}" for name, why in self.skipped]
        return "\n".join(lines)

    def raise_for_failures(self) -> ConformanceReport:
        """Raise AssertionError listing every failed check."""
        if self.failed:
            raise AssertionError(str(self))
        return self


class _Checker:
    def __init__(self, report: ConformanceReport):
        self.report = report

    def run(self, name: str, fn: Callable[[], Any]) -> bool:
        try:
            out = fn()
        except _Skip as s:
            self.report.skipped.append((name, str(s)))
            return False
        except Exception as exc:  # noqa: BLE001 - a check failing for any reason is a failure
            self.report.failed.append((name, f"{type(exc).__name__}: {exc}"))
            return False
        if out is False:
            self.report.failed.append((name, "check returned False"))
            return False
        self.report.passed.append(name)
        return True


class _Skip(Exception):
    pass


# --------------------------------------------------------------------------------------------------- values


def _bad_values(spec_type: Any, constraint: Any) -> list[Any]:
    """Values a validator must reject, derived from the annotation and the declared constraint."""
    bad: list[Any] = []
    origin = typing.get_origin(spec_type)
    args = typing.get_args(spec_type)
    allows_none = type(None) in args
    is_union = origin in (typing.Union, types.UnionType)
    core = [a for a in args if a is not type(None)] if is_union else [spec_type]
    if len(core) == 1:
        t = core[0]
        if t in (int, float):
            bad += ["not-a-number", [1, 2]]
            if t is int:
                bad.append(1.5)
        elif t is bool:
            bad += ["yes", 2]
        elif t is str:
            bad += [12345]
        elif typing.get_origin(t) is typing.Literal:
            bad.append("__not_a_choice__")
    if not allows_none and spec_type is not typing.Any:
        bad.append(None)
    if constraint is not None:
        if constraint.low is not None:
            bad.append(constraint.low - 1 if constraint.low_inclusive else constraint.low)
        if constraint.high is not None:
            bad.append(constraint.high + 1 if constraint.high_inclusive else constraint.high)
        if constraint.choices is not None:
            bad.append("__not_a_choice__")
    return bad


def _changed_values(value: Any, spec_type: Any, constraint: Any) -> Iterator[Any]:
    """Other values to try for a parameter (validity is checked by constructing)."""
    if isinstance(value, bool):
        yield not value
        return
    choices = constraint.choices if constraint is not None and constraint.choices is not None else None
    if choices is None and typing.get_origin(spec_type) is typing.Literal:
        choices = typing.get_args(spec_type)
    if choices is not None:
        yield from (c for c in choices if c != value)
        return
    if isinstance(value, int):
        yield from (value + 1, value - 1, value * 2 + 1)
    elif isinstance(value, float):
        yield from (value * 0.5 if value else 0.5, value + 0.1, value * 2 + 1.0)
    elif value is None:
        return


def _payload_for(cls: type[Method]) -> str | None:
    for p in cls.payloads:
        if p == "*":
            return "features"
        if p in ("features", "image", "imu", "pose", "audio"):
            return p
    return None


# --------------------------------------------------------------------------------------------------- checks


def check_method(
    cls: type[Method],
    *,
    table: Any = None,
    label: str = "subject",
    invalid_params: dict[str, list[Any]] | None = None,
    params: dict[str, Any] | None = None,
) -> ConformanceReport:
    """Run the conformance checks on a method class.

    Parameters
    ----------
    cls : the method class (any of the six kinds).
    table : a SampleTable the method can work on; by default a tiny synthetic table with the first payload the
        method declares (``features``, ``image``, ``imu``, ``pose``, ``audio``). Behaviour checks are skipped
        (and listed) when no table fits.
    label : the label column recognizers train on.
    invalid_params : further values per parameter that must be rejected.
    params : parameters for the behaviour checks (e.g. a small ``epochs`` for a network); default: the class's
        ``example_params``.

    Checks: id and kind, documentation, help on every parameter, defaults construct, validators reject bad
    values (by type, range, choices), ``with_params`` round-trips and rejects unknown names, ``describe()`` is
    JSON, fingerprints are stable and change with every output-affecting parameter, and the kind's behaviour
    (transforms keep sample ids and row order, seeded determinism, score matrix shape, …).
    """
    report = ConformanceReport(getattr(cls, "id", repr(cls)))
    c = _Checker(report)
    params = dict(getattr(cls, "example_params", {}) if params is None else params)

    def id_and_kind() -> None:
        is_attrs = attrs.has(cls)  # (not asserted directly: that would narrow cls to an attrs instance type)
        assert is_attrs, "not an attrs class"
        assert isinstance(cls.id, str) and ID_PATTERN.match(cls.id), f"invalid id {cls.id!r}"
        assert cls.kind in KINDS, f"kind {cls.kind!r} not in {KINDS}"
        assert issubclass(cls, KIND_CLASSES[cls.kind]), f"not a subclass of {KIND_CLASSES[cls.kind].__name__}"
        assert cls.id.split(".", 1)[0] in (cls.trait, "any") or cls.trait == "any", "id prefix != trait"

    def documented() -> None:
        assert cls.summary(), "the class has no docstring"

    def params_have_help() -> None:
        missing = [p["name"] for p in cls.param_specs() if not p["help"].strip()]
        assert not missing, f"parameters without help text: {missing}"
        nodefault = [p["name"] for p in cls.param_specs() if p["required"]]
        assert not nodefault, f"parameters without default: {nodefault}"
        unknown = [n for n in cls.attribute_params if n not in {p["name"] for p in cls.param_specs()}]
        assert not unknown, f"attribute_params names no parameter: {unknown}"

    c.run("id_and_kind", id_and_kind)
    c.run("documented", documented)
    c.run("params_have_help", params_have_help)
    if not c.run("constructs_with_defaults", lambda: cls()):
        return _finish(report)
    default = cls()

    types_ = cls.param_types()
    for f in cls.param_fields():
        constraint = f.metadata.get("bioanon_constraint")
        bad = _bad_values(types_[f.name], constraint) + list((invalid_params or {}).get(f.name, []))

        def rejects(name: str = f.name, bad: list[Any] = bad) -> None:
            accepted = []
            for v in bad:
                try:
                    cls(**{name: v})
                except ParameterError as e:
                    assert e.param == name and cls.id in str(e), f"error does not name {cls.id}/{name}: {e}"
                else:
                    accepted.append(v)
            assert not accepted, f"parameter {name!r} accepted invalid values {accepted!r}"

        if bad:
            c.run(f"validator_rejects[{f.name}]", rejects)

    def with_params_round_trip() -> None:
        copy = default.with_params(**default.get_params())
        assert type(copy) is cls and copy.get_params() == default.get_params()
        assert copy is not default
        try:
            default.with_params(__no_such_param__=1)
        except ParameterError:
            pass
        else:
            raise AssertionError("with_params accepted an unknown parameter")

    def describe_is_json() -> None:
        d = cls.describe()
        json.dumps(d, default=str)
        assert d["id"] == cls.id and len(d["params"]) == len(cls.param_fields())

    def fingerprint_stable() -> None:
        assert cls().fingerprint() == cls().fingerprint()
        assert default.with_params().fingerprint() == default.fingerprint()

    def fingerprint_sensitive() -> None:
        unchanged = []
        for f in cls.param_fields():
            if not f.metadata.get("bioanon_affects_output", True):
                continue
            value = getattr(default, f.name)
            for other in _changed_values(value, types_[f.name], f.metadata.get("bioanon_constraint")):
                try:
                    changed = default.with_params(**{f.name: other})
                except ParameterError:
                    continue
                if changed.fingerprint() == default.fingerprint():
                    unchanged.append(f.name)
                break
        assert not unchanged, f"fingerprint ignores parameters {unchanged}"

    c.run("with_params_round_trip", with_params_round_trip)
    c.run("describe_is_json", describe_is_json)
    c.run("fingerprint_stable", fingerprint_stable)
    c.run("fingerprint_changes_with_params", fingerprint_sensitive)

    _behaviour_checks(cls, c, table, label, params)
    return _finish(report)


def _finish(report: ConformanceReport) -> ConformanceReport:
    _SESSION_TOTALS["methods"] += 1
    _SESSION_TOTALS["checks"] += report.checks_run
    _SESSION_TOTALS["found"] += len(report.failed)
    return report


def _behaviour_checks(cls: type[Method], c: _Checker, table: Any, label: str, params: dict[str, Any]) -> None:
    missing = cls.missing_requirements()
    if missing:  # an unavailable method: nothing can run without its optional packages
        from .errors import missing_text

        c.report.skipped.append(("behaviour", missing_text(cls.id, missing)))
        return
    kind = cls.kind
    if kind == "dataset":
        source = cast("type[DatasetSource]", cls)
        if source.needs_path:
            c.report.skipped.append(("loads_deterministically", "the source reads files; test it on a fixture"))
            return

        def loads() -> None:
            from .cache import table_fingerprint

            a, b = source(**params).load(), source(**params).load()
            a.validate()
            assert len(a) > 0, "empty table"
            undeclared = sorted(set(a.attribute_names) - set(source.attribute_names or a.attribute_names))
            assert not undeclared, f"attribute columns {undeclared} are not in the declared attribute_names"
            assert table_fingerprint(a) == table_fingerprint(b), "same seed gave different data"

        c.run("loads_deterministically", loads)
        return

    if table is None:
        payload = _payload_for(cls)
        if payload is None:
            c.report.skipped.append(("behaviour", f"no table given and no built-in table for payloads {cls.payloads}"))
            return
        table = make_table(payload=payload)

    def instance(kind_class: type[_M]) -> _M:
        """A new instance with ``params``, typed as ``kind_class`` (the kind's base class, checked by
        ``id_and_kind``)."""
        return cast(_M, cls(**params))

    if kind == "anonymizer":

        def keeps_ids_and_order() -> None:
            m = instance(Anonymizer)
            m.fit(table)
            out = m.transform(table)
            assert len(out) == len(table), f"{len(out)} rows out for {len(table)} in"
            assert np.array_equal(out.sample_ids, table.sample_ids), "sample ids or their order changed"
            assert np.array_equal(out.subjects, table.subjects), "subjects changed"

        def deterministic() -> None:
            a = instance(Anonymizer).fit_transform(table)
            b = instance(Anonymizer).fit_transform(table)
            _assert_tables_equal(a, b)

        def rows_independent() -> None:
            if len(table) < 2:
                return
            whole = instance(Anonymizer).fit_transform(table)
            rows = np.random.default_rng(0).permutation(len(table))[: max(1, len(table) // 2)]
            part = instance(Anonymizer).fit_transform(table.take(rows))
            for name in whole.payload_names:
                expected, got = whole.take(rows).payload(name), part.payload(name)
                if isinstance(expected, np.ndarray):
                    same = np.array_equal(expected, got)
                else:  # a ragged payload: one array per sample
                    same = all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True))
                assert same, (
                    f"per_sample is true, but payload {name!r} of a shuffled half of the table anonymized on "
                    "its own differs from the same rows of the whole table anonymized"
                )

        c.run("transform_keeps_sample_ids_and_order", keeps_ids_and_order)
        c.run("seeded_determinism", deterministic)
        if cast("type[Anonymizer]", cls).rows_independent(params):
            c.run("rows_independent", rows_independent)
    elif kind == "deanonymizer":

        def round_trip() -> None:
            m = instance(Deanonymizer).fit(table, table)
            out = m.transform(table)
            assert np.array_equal(out.sample_ids, table.sample_ids), "sample ids or their order changed"

        c.run("transform_keeps_sample_ids_and_order", round_trip)
    elif kind == "recognizer":

        def scores() -> ScoreMatrix:
            m = instance(Recognizer).fit(table, label)
            m.enroll(table, label)
            return m.score(table)

        def score_shape() -> None:
            s = scores()
            assert isinstance(s, ScoreMatrix), f"score() returned {type(s).__name__}, not ScoreMatrix"
            n_classes = len(np.unique(table.subjects if label == "subject" else table.attribute(label)))
            assert s.scores.shape == (len(table), n_classes), f"scores shape {s.scores.shape}"
            assert np.all(np.isfinite(s.scores)), "non-finite scores"

        def deterministic() -> None:
            assert np.array_equal(scores().scores, scores().scores), "two seeded runs scored differently"

        c.run("score_matrix_shape", score_shape)
        c.run("seeded_determinism", deterministic)
    elif kind == "utility":

        def per_sample() -> None:
            m = instance(UtilityMeasure).fit(table)
            v = np.asarray(m.measure(table, table))
            assert v.shape == (len(table),), f"measure() returned shape {v.shape}, expected ({len(table)},)"
            assert np.all(np.isfinite(v)), "non-finite utility values"
            assert math.isfinite(m.floor(table))

        c.run("per_sample_values", per_sample)
    elif kind == "selector":

        def selects() -> None:
            a = instance(Selector).select(table, 2, attacker=table)
            b = instance(Selector).select(table, 2, attacker=table)
            assert len(a) == 2 and len(set(a)) == 2, f"selected {a}"
            assert set(a) <= set(table.subjects), "selected subjects not in the table"
            assert list(a) == list(b), "two seeded runs selected differently"

        c.run("selects_n_distinct_subjects", selects)


def _assert_tables_equal(a: Any, b: Any) -> None:
    assert a.arrow.schema.equals(b.arrow.schema), "schemas differ"
    for name in a.arrow.column_names:
        assert a.arrow.column(name).equals(b.arrow.column(name)), f"column {name!r} differs between two runs"


# --------------------------------------------------------------------------------------------------- pytest

try:  # the fixtures need pytest; the checks above do not
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def bioanon_plugin_manager() -> Iterator[Any]:
        """A fresh plugin manager (no entry-point autoload) installed as the process default."""
        from .plugins import PluginManager, reset_plugin_manager

        pm = PluginManager(autoload=False, disabled=(), strict=False)
        old = reset_plugin_manager(pm)
        try:
            yield pm
        finally:
            reset_plugin_manager(old)

    @pytest.fixture
    def register_bioanon_plugin(bioanon_plugin_manager: Any) -> Callable[..., Any]:
        """``register_bioanon_plugin(plugin, name)`` → the registry with that plugin added."""

        def register(plugin: object, name: str = "test_plugin", **kw: Any) -> Any:
            bioanon_plugin_manager.register_plugin(plugin, name, **kw)
            return bioanon_plugin_manager.registry

        return register

    @pytest.fixture
    def make_sample_table() -> Callable[..., Any]:
        """Factory of tiny synthetic tables: ``make_sample_table(n_subjects=6, samples_per_subject=6,
        payload="features", seed=0)``."""
        return make_table

    @pytest.fixture
    def tiny_table() -> Any:
        """6 subjects × 6 samples of 16-D features, attributes ``group`` and ``activity``."""
        return make_table()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item: Any) -> Any:
        """Failed checks found during a test that passed were expected by it (a test of the checks themselves
        runs them on broken methods); those found during a failing test count as failures."""
        before = _SESSION_TOTALS["found"]
        outcome = yield
        found = _SESSION_TOTALS["found"] - before
        _SESSION_TOTALS["failed" if outcome.excinfo is not None else "expected"] += found

    def pytest_terminal_summary(terminalreporter: Any) -> None:
        t = _SESSION_TOTALS
        if t["methods"]:
            expected = f" ({t['expected']} more found on purpose by tests of the checks)" if t["expected"] else ""
            terminalreporter.write_line(
                f"bioanon conformance: {t['checks']} checks run on {t['methods']} method classes, "
                f"{t['failed']} failed{expected}"
            )

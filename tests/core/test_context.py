"""The run context: created at the entry points, active during a run, no process-global stores."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np

import bioanon
from bioanon.context import RunContext, active_context, current_context, reuse_computed

CORE = Path(__file__).resolve().parents[2] / "core"
PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
#: where get_registry() may be called: the entry points (the package root) and its definition
ENTRY_POINTS = {CORE / "__init__.py", CORE / "plugins.py"}


def test_the_library_calls_no_get_registry():
    calls = []
    for path in [*CORE.rglob("*.py"), *PLUGINS.rglob("bioanon_*/*.py")]:
        if path in ENTRY_POINTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name == "get_registry":
                    calls.append(f"{path.relative_to(CORE.parent)}:{node.lineno}")
    assert not calls, f"get_registry() called inside the library: {calls}"


def test_no_process_global_store():
    import bioanon.fit_memo as fm

    assert not hasattr(fm, "FITTED") and not hasattr(fm, "COMPUTED")
    calls = []

    def compute():
        calls.append(1)
        return np.arange(3.0)

    x = [np.ones(4)]
    reuse_computed("t", {}, x, compute)
    reuse_computed("t", {}, x, compute)
    assert len(calls) == 2  # outside any run: computed every time
    ctx = RunContext(bioanon.get_registry())
    with ctx.activate():
        assert current_context() is ctx and active_context() is ctx
        reuse_computed("t", {}, x, compute)
        reuse_computed("t", {}, x, compute)
    assert len(calls) == 3 and (ctx.computed.hits, ctx.computed.misses) == (1, 1)
    assert active_context() is None
    assert current_context() is not current_context()  # outside a run: a fresh one each time


def test_a_context_pickles_without_registry_and_stores(tmp_path):
    from bioanon.cache import Cache

    ctx = RunContext(bioanon.get_registry(), cache=Cache(tmp_path), device="cpu")
    ctx.computed.get("t", {}, [np.ones(2)], lambda: np.zeros(2))
    copy = pickle.loads(pickle.dumps(ctx))
    assert copy.run_id == ctx.run_id and copy.device == "cpu" and copy.cache.root == ctx.cache.root
    assert copy.computed.misses == 0 and copy._registry is None  # built on first use, in the worker
    assert "any.identity" in copy.registry
    assert copy.hold() is copy and active_context() is copy  # a worker keeps the run's context ...
    again = pickle.loads(pickle.dumps(ctx))
    assert again.hold() is copy  # ... for the run's next task
    other = RunContext(bioanon.get_registry())
    assert other.hold() is other
    with other.activate():  # the test's thread: leave nothing held behind
        pass
    from bioanon.context import _ACTIVE

    _ACTIVE.set(None)


def test_methods_built_by_id_use_the_active_registry():
    """A chain builds its steps by id with the active run's registry (here an empty one)."""
    import pytest

    from bioanon.registry import Registry

    chain_cls = bioanon.get_registry().get("any.chain")
    empty = RunContext(Registry({}))
    with empty.activate(), pytest.raises(bioanon.ParameterError, match="unknown anonymizer 'any.pe_miu'"):
        chain_cls(steps=({"id": "any.pe_miu", "params": {}},))
    with empty.activate():
        chain_cls(steps=({"id": "any.identity", "params": {}},))  # the core's own steps need no registry
    chain_cls(steps=({"id": "any.pe_miu", "params": {}},))  # outside a run: the default registry


def test_anonymize_with_several_methods_records_one_chain():
    table = bioanon.load_dataset("any.synthetic", n_subjects=6, samples_per_subject=4, dim=8)
    out = bioanon.anonymize(table, "any.gaussian_noise", bioanon.get_method("any.block_permutation", key=2))
    steps = out.lineage
    assert [s["step"] for s in steps][-1] == "any.chain"
    assert [s["id"] for s in steps[-1]["params"]["steps"]] == ["any.gaussian_noise", "any.block_permutation"]
    assert len(steps) == len(table.lineage) + 1
    chain = bioanon.get_method("any.chain", steps=steps[-1]["params"]["steps"])
    np.testing.assert_array_equal(out.payload("features"), chain.fit(table).transform(table).payload("features"))
    one = bioanon.anonymize(table, "any.gaussian_noise")  # one method: recorded as itself
    assert one.lineage[-1]["step"] == "any.gaussian_noise"

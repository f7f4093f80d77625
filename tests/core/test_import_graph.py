"""The modules of ``bioanon`` import each other without cycles, lazy (function-level) imports included.

Every ``import`` / ``from ... import`` of a bioanon module anywhere in a module's source is an edge — at the top,
inside functions, in ``try`` blocks — except those under ``if TYPE_CHECKING:``: they never run (they only name
types for the type checker), so they cannot take part in an import-time or run-time cycle. ``from pkg import
name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``; relative imports are resolved.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"

#: Edges still allowed while another change lands (each with the reason it is here).
ALLOWED: set[tuple[str, str]] = set()


def _modules(root: Path = CORE) -> dict[str, Path]:
    mods = {}
    for path in root.rglob("*.py"):
        parts = ["bioanon", *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import node of ``tree`` outside ``if TYPE_CHECKING:`` bodies (their ``else`` branches count)."""
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def import_graph(root: Path = CORE) -> dict[str, set[str]]:
    """Module name -> the bioanon modules it imports (see the module docstring for what counts)."""
    mods = _modules(root)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                targets = subs + ([target] if len(subs) < len(node.names) else [])
            for t in targets:
                while t not in mods and "." in t:  # `import bioanon.x.y` of a name inside a module
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != mod and (mod, t) not in ALLOWED:
                    edges[mod].add(t)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path ``[a, b, ..., a]``, or None when it is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(edges[v]):
            if state.get(w) == 1:
                return path[path.index(w) :] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(edges):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_bioanon_imports_no_module_cycle():
    edges = import_graph()
    assert len(edges) > 50 and edges["bioanon.evaluation.run"], "the graph was not read"
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_allowed_edges_still_exist():
    """An allow-list entry whose import is gone must be removed from :data:`ALLOWED`."""
    mods = _modules()
    for a, b in ALLOWED:
        text = mods[a].read_text(encoding="utf-8")
        assert b.rsplit(".", 1)[1] in text, f"{a} no longer imports {b}: remove it from ALLOWED"


def test_the_checker_finds_lazy_cycles_and_skips_type_checking(tmp_path):
    pkg = tmp_path / "core"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n    return b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import a\n")
    edges = import_graph(pkg)
    assert edges["bioanon.a"] == {"bioanon.sub.b"} and find_cycle(edges) is None  # TYPE_CHECKING: no edge
    (pkg / "sub" / "b.py").write_text("def g():\n    from bioanon import a\n")
    cycle = find_cycle(import_graph(pkg))
    assert cycle is not None and cycle[0] == cycle[-1] and {"bioanon.a", "bioanon.sub.b"} <= set(cycle)

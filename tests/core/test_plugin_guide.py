"""The plugin guide (docs/plugins.md, with the README and template sections it includes) shows Python code that
runs as written: every ```python block is executed on its own, in an empty folder. A block that cannot run alone
is marked by the line ``<!-- not run -->`` right before its fence."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "plugins.md"
_INCLUDE = re.compile(r'^--8<-- "(?P<spec>[^"]+)"[ \t]*$', re.M)  # pymdownx.snippets: "FILE" or "FILE:section"
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
NOT_RUN = "<!-- not run -->"


def _resolved(text: str) -> str:
    """The page with its snippet includes replaced by what they include, as the site shows it."""

    def include(m: re.Match[str]) -> str:
        path, _, section = m["spec"].partition(":")
        body = (ROOT / path).read_text(encoding="utf-8")
        if section:
            start, end = f"--8<-- [start:{section}]", f"--8<-- [end:{section}]"
            assert start in body and end in body, f"{path} has no section {section!r}"
            body = body.split(start, 1)[1].split(end, 1)[0].split("\n", 1)[1]
        return _resolved(body)

    return _INCLUDE.sub(include, text)


def _python_blocks() -> list[tuple[int, str]]:
    """(line number in the resolved page, code) of every runnable ```python block."""
    page = _resolved(GUIDE.read_text(encoding="utf-8"))
    blocks = []
    for m in _FENCE.finditer(page):
        if m["lang"] not in ("python", "py"):
            continue
        before = page[: m.start()].rstrip().rsplit("\n", 1)[-1].strip()
        if before != NOT_RUN:
            blocks.append((page.count("\n", 0, m.start()) + 1, textwrap.dedent(m["body"])))
    return blocks


BLOCKS = _python_blocks()


def test_the_guide_has_python_blocks():
    assert len(BLOCKS) >= 2, BLOCKS


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line{line}" for line, _ in BLOCKS])
def test_a_python_block_of_the_plugin_guide_runs_as_written(line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{GUIDE} (resolved), block at line {line}", "exec"), {"__name__": f"guide_block_{line}"})

"""What a user reads names nothing they cannot follow: no paper by a file name of the developers' copy, no
internal design notes, no issue numbers, and no example path that is not in the wheel. Checked: the docs pages
and the generated ones (catalogue, bibliography), every command's ``--help``, every installed method's
documentation, parameter help, presets and reference, the example configs `bioanon init` copies, and the
distributions' long descriptions (their READMEs).
Every method's reference cites a bibliography entry or is free text."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

import bioanon
from bioanon.bibliography import BIBLIOGRAPHY, cite, reference_keys, split_reference
from bioanon.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]

#: Data files that sources read and name on purpose (the user must have them), not papers.
DATA_FILES = {
    "identity_celeba.txt",
    "list_attr_celeba.txt",
    "speakers.txt",
    "trans.txt",
    "audiomnist_meta.txt",
    "notes.txt",
}
FORBIDDEN = re.compile(r"\b[\w-]+\.txt\b|DESIGN\.md|METRICS\.md|\bissue \d+", re.IGNORECASE)
EXAMPLE_PATH = re.compile(r"\bexamples/[\w-]+\.toml\b")
LONG_DESCRIPTIONS = [
    ROOT / "README.md",
    *sorted((ROOT / "plugins").glob("*/README.md")),
    ROOT / "examples/plugin-template/README.md",
]


def _found(texts: dict[str, str], pattern: re.Pattern[str] = FORBIDDEN) -> list[str]:
    """``place: match`` for each forbidden match (data file names aside) in the texts, by place."""
    out = []
    for place, text in texts.items():
        for m in pattern.finditer(text):
            if m.group(0).lower() not in DATA_FILES:
                out.append(f"{place}: {m.group(0)!r}")
    return out


def _help_texts() -> dict[str, str]:
    """``bioanon --help`` and every (sub)command's help, by command line."""
    texts: dict[str, str] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        texts[name] = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")

    walk(build_parser(), "bioanon")
    return texts


def _method_texts() -> dict[str, str]:
    """Every installed method's documentation, summary, citation, parameter help and presets, by id."""
    texts = {}
    for method_id in bioanon.list_methods():
        d = bioanon.get_registry().get(method_id).describe()
        parts = [d["doc"], d["summary"], d["citation"], repr(d["presets"])]
        parts += [f"{p['name']}: {p['help']} {p['allowed'] or ''}" for p in d["params"]]
        texts[method_id] = "\n".join(parts)
    return texts


def _generated_pages() -> dict[str, str]:
    pytest.importorskip("mkdocs_gen_files", reason="the docs extra is not installed (pip install -e '.[docs]')")
    spec = importlib.util.spec_from_file_location("gen_pages_under_test", ROOT / "docs/gen_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the page builders; writes nothing outside a docs build
    return {f"generated {path}": text for path, text in module.pages().items()}


def test_docs_pages_name_no_paper_files_design_notes_or_issues():
    pages = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))}
    found = _found(pages | _generated_pages())
    assert not found, "user-facing docs cite what a reader cannot follow:\n" + "\n".join(found)


def test_command_help_names_no_paper_files_design_notes_or_issues():
    found = _found(_help_texts())
    assert not found, "command help cites what a reader cannot follow:\n" + "\n".join(found)


def test_method_texts_name_no_paper_files_design_notes_or_issues():
    found = _found(_method_texts())
    assert not found, "method documentation cites what a reader cannot follow:\n" + "\n".join(found)


def test_long_descriptions_name_no_paper_files_or_example_paths():
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in LONG_DESCRIPTIONS}
    found = _found(texts) + _found(texts, EXAMPLE_PATH)
    assert not found, (
        "a wheel's long description names what is not in the wheel (examples: `bioanon init NAME`):\n"
        + "\n".join(found)
    )


def test_example_configs_name_no_paper_files_design_notes_or_issues():
    # `bioanon init` lists them by their opening comment and copies them to the user
    configs = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("examples/*.toml"))}
    found = _found(configs)
    assert not found, "example configs cite what a reader cannot follow:\n" + "\n".join(found)


def test_every_reference_cites_the_bibliography_or_is_plain_text():
    bad = []
    for method_id in bioanon.list_methods():
        reference = bioanon.get_registry().get(method_id).reference
        for entry, text in split_reference(reference):
            if entry is None and FORBIDDEN.search(text):
                bad.append(f"{method_id}: {text!r}")
    assert not bad, "references naming a file instead of a bibliography key:\n" + "\n".join(bad)


def test_a_reference_resolves_through_the_bibliography_and_free_text_stays():
    assert reference_keys("k-same; fantomas §6.1.5, Table IV") == ["k-same", "fantomas"]
    text = cite("fantomas §6.1.5, Table IV; Viola & Jones 2001")
    assert text == f"{BIBLIOGRAPHY['fantomas'].short}, §6.1.5, Table IV; Viola & Jones 2001"
    assert cite("Doe et al., A method, 2023") == "Doe et al., A method, 2023"  # a third-party plugin's free text
    assert cite("seba", link="bib.md") == f"[{BIBLIOGRAPHY['seba'].short}](bib.md#seba)"
    for entry in BIBLIOGRAPHY.values():
        assert entry.authors and entry.title and entry.year, entry.key

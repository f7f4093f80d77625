"""Files bioanon writes for its users: the example configs (``bioanon init``) and new plugin projects
(``bioanon new-plugin``).

Both come from the package data of :mod:`bioanon.examples` (the repository's ``examples/`` folder), so they work
from a plain ``pip install`` as well as from a clone.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import BioanonError, ConfigError
from .fileio import atomic_write_text
from .methods import first_sentence
from .tomlio import string as toml_string

TEMPLATE = "plugin-template"
_SKIP = ("__pycache__", ".pytest_cache", "build", "dist", ".egg-info")  # build output of a local install


def examples_dir() -> Path:
    """The folder holding the installed example configs and the plugin template."""
    return Path(str(resources.files("bioanon.examples")))


@dataclass(frozen=True)
class Example:
    """One example config shipped with bioanon."""

    name: str
    path: Path
    summary: str  # the first sentence of its opening comment
    source: str  # the dataset source id, e.g. "face.orl"
    data_path: str | None  # the dataset folder it reads ([dataset] path), None for built-in/synthetic data

    @property
    def plugin(self) -> str:
        """The distribution that provides the example's data source ("bioanon" for the core's own)."""
        trait = self.source.split(".", 1)[0]
        return "bioanon" if trait == "any" else f"bioanon-{trait}"


def _summary(text: str) -> str:
    """The first sentence of the config's opening comment (the lines before its ``bioanon evaluate`` line)."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#") or "bioanon evaluate" in line:
            break
        lines.append(line.lstrip("# ").strip())
    return first_sentence(" ".join(lines)).rstrip(".:").strip()


def examples() -> list[Example]:
    """Every example config, sorted by name."""
    found = []
    for path in sorted(examples_dir().glob("*.toml")):
        text = path.read_text(encoding="utf-8")
        dataset = tomllib.loads(text).get("dataset", {})
        found.append(Example(path.stem, path, _summary(text), str(dataset.get("source", "")), dataset.get("path")))
    return found


def _find(name: str) -> Example:
    known = {e.name: e for e in examples()}
    stem = name.removesuffix(".toml")
    if stem not in known:
        raise ConfigError(f"unknown example {name!r}; the examples are: {', '.join(known)}")
    return known[stem]


def example(name: str) -> Path:
    """The path of the installed example config ``name`` (e.g. ``"quickstart"``), to pass to
    :func:`bioanon.evaluate` from any directory."""
    return _find(name).path


_PATH_LINE = re.compile(r'^(\s*path\s*=\s*)("[^"]*"|\'[^\']*\')(.*)$')


def write_example(
    name: str, directory: str | Path = ".", *, data: str | Path | None = None, force: bool = False
) -> tuple[Path, str | None]:
    """Copy the example config ``name`` into ``directory`` (created if needed) as ``NAME.toml``.

    The dataset folder of examples that read recorded data is rewritten for the new location: to ``data`` when
    given, else to the absolute path of the folder the example points at when that exists (running from a
    clone), else left as it is. Returns the written path and, when the data folder still needs setting, a
    one-line hint saying so. Never overwrites an existing file unless ``force``.
    """
    info = _find(name)
    src = info.path
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory")
    target = directory / src.name
    if target.exists() and not force:
        raise ConfigError(f"{target} exists; pass --force to overwrite it")
    text = src.read_text(encoding="utf-8").replace(f"examples/{src.name}", str(target))
    hint = None
    if info.data_path is not None:
        if data is not None:
            new = Path(data).expanduser().resolve()
        else:
            new = (src.parent / info.data_path).resolve()
        if data is None and not new.is_dir():
            hint = (
                f"{target}: set [dataset] path to your copy of the data ({info.source}; "
                f"now {info.data_path!r}), or rerun with --data DIR"
            )
        else:
            text = _replace_dataset_path(text, str(new), target)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    return target, hint


def _replace_dataset_path(text: str, new: str, target: Path) -> str:
    lines = text.splitlines(keepends=True)
    table = None
    for i, line in enumerate(lines):
        head = re.match(r"^\s*\[([^\]]+)\]", line)
        if head:
            table = head.group(1).strip()
        elif table == "dataset":
            m = _PATH_LINE.match(line.rstrip("\n"))
            if m:
                comment = "   # set by bioanon init" if "#" in m.group(3) else m.group(3)
                lines[i] = f"{m.group(1)}{toml_string(new)}{comment}\n"
                return "".join(lines)
    raise ConfigError(f"{target}: found no path = ... line in [dataset] to rewrite")


# -- new plugin projects ------------------------------------------------------------------------------------

_PLUGIN_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def template_dir() -> Path:
    """The plugin template that ``bioanon new-plugin`` copies (``examples/plugin-template`` in a clone)."""
    return examples_dir() / TEMPLATE


#: the author a new plugin project gets when none is given and git knows no ``user.name``
PLACEHOLDER_AUTHOR = "Your Name"

#: the template's own author, description and copyright line, replaced in a new project
_TEMPLATE_AUTHOR = "The bioanon developers"
_TEMPLATE_DESCRIPTION = "A minimal third-party bioanon plugin: one anonymizer and one recognizer"
_TEMPLATE_DOCSTRING = "a minimal third-party bioanon plugin (copy this folder to start your own)."
# the template's method ids and their prefix (``example.quantize``, ``'example.*'``, ```example.```), not inside
# a longer name (``bioanon_example.``)
_TEMPLATE_IDS = re.compile(r"(?<![\w.-])example\.(?=[a-z_*`'\"])")


def default_author() -> str:
    """The author of a new plugin project when ``--author`` is not given: git's ``user.name`` where git is
    installed and has one, else :data:`PLACEHOLDER_AUTHOR` (to be replaced in ``pyproject.toml``, ``LICENSE``
    and ``README.md``)."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "config", "--get", "user.name"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return PLACEHOLDER_AUTHOR
    name = out.stdout.strip() if out.returncode == 0 else ""
    return name if name and "\n" not in name else PLACEHOLDER_AUTHOR


def _one_line(option: str, value: str) -> str:
    text = " ".join(str(value).split())
    if not text:
        raise ConfigError(f"new plugin: --{option} ({option}=) is empty; give a short text, e.g. --{option} 'Ada'")
    return text


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def new_plugin(
    name: str, directory: str | Path | None = None, *, author: str | None = None, description: str | None = None
) -> Path:
    """Create a separately installable plugin project ``bioanon-NAME`` from the plugin template.

    ``name`` is the plugin's method prefix and trait (lower case letters, digits and ``_``, starting with a
    letter): the project gets the distribution ``bioanon-NAME`` (underscores become dashes), the package
    ``bioanon_NAME``, the entry point ``bioanon_NAME`` and the method ids ``NAME.quantize`` and
    ``NAME.nearest_neighbour``, with tests that run bioanon's conformance suite (``pip install -e '.[test]'``
    installs pytest for them). ``author`` (default: :func:`default_author`) goes into ``pyproject.toml``, the
    ``LICENSE`` copyright and ``README.md``; ``description`` (default: "A bioanon plugin for NAME data") into
    ``pyproject.toml``, ``README.md`` and the package docstring. ``directory`` defaults to ``./bioanon-NAME``
    and must not exist or be empty. Returns the project folder.
    """
    import datetime as _dt

    if not _PLUGIN_NAME.match(name or ""):
        raise ConfigError(
            f"plugin name {name!r}: use lower case letters, digits and '_', starting with a "
            "letter (at most 40 characters), e.g. 'ecg' or 'hand_geometry'"
        )
    if name in ("any", "bioanon", "example"):
        raise ConfigError(f"plugin name {name!r} is reserved; choose another")
    author = _one_line("author", default_author() if author is None else author)
    description = _one_line("description", f"A bioanon plugin for {name} data" if description is None else description)
    dist = f"bioanon-{name.replace('_', '-')}"
    target = Path(directory) if directory is not None else Path(dist)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError(f"{target} exists and is not empty; choose another directory")
    source = template_dir()
    if not (source / "pyproject.toml").is_file():
        raise BioanonError(f"the plugin template is missing from this installation ({source})")
    year = _dt.date.today().year
    replacements = [
        (f"description = {toml_string(_TEMPLATE_DESCRIPTION)}", f"description = {toml_string(description)}"),
        (f"{{ name = {toml_string(_TEMPLATE_AUTHOR)} }}", f"{{ name = {toml_string(author)} }}"),
        (_TEMPLATE_DOCSTRING, _sentence(description).replace("\\", "\\\\").replace('"', '\\"')),
        ("# bioanon-example\n", f"# bioanon-example\n\n{description} (by {author})\n"),
        ("the example plugin", f"the {dist} plugin"),
        ("Licensed under the MIT licence", f"Copyright (c) {year} {author}. Licensed under the MIT licence"),
        ("bioanon_example", f"bioanon_{name}"),
        ("bioanon-example", dist),
        ('"example"', f'"{name}"'),
        ("Example plugin", f"{name} plugin"),
    ]
    copyright_line = re.compile(r"Copyright \(c\) \d{4} " + re.escape(_TEMPLATE_AUTHOR))
    with tempfile.TemporaryDirectory(
        prefix=".bioanon-new-plugin-", dir=target.parent if target.parent.is_dir() else None
    ) as tmp:
        staged = Path(tmp) / "project"
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if any(part.endswith(_SKIP) or part in _SKIP for part in rel.parts) or path.suffix == ".pyc":
                continue
            out = staged / Path(*[p.replace("bioanon_example", f"bioanon_{name}") for p in rel.parts])
            if path.is_dir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix in (".py", ".toml", ".md") or path.name == "LICENSE":
                text = _TEMPLATE_IDS.sub(f"{name}.", path.read_text(encoding="utf-8"))
                text = copyright_line.sub(lambda _: f"Copyright (c) {year} {author}", text)
                for old, new in replacements:
                    text = text.replace(old, new)
                out.write_text(text, encoding="utf-8")
            else:
                shutil.copyfile(path, out)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.rmdir()  # empty (checked above)
        shutil.move(str(staged), str(target))
    return target

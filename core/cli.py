"""The ``bioanon`` command line: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
import warnings
from collections.abc import Sequence
from typing import Any

from . import __version__
from .errors import BioanonError
from .plugins import PluginLoadWarning, get_plugin_manager

WIDTH = 80


def _width() -> int:
    return min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def _cut(text: str, width: int) -> str:
    text = str(text)
    lead = text[: len(text) - len(text.lstrip())]
    text = lead + " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _table(rows: list[list[str]], headers: list[str], *, flex: int = -1) -> str:
    """Left-aligned columns; the ``flex`` column is cut so every line fits the terminal width."""
    cols = list(zip(*([headers] + rows))) if rows else [[h] for h in headers]
    widths = [max(len(str(c)) for c in col) for col in cols]
    total = sum(widths) + 2 * (len(widths) - 1)
    if total > _width():
        widths[flex] = max(8, widths[flex] - (total - _width()))
    lines = []
    for r in [headers] + rows:
        cells = [_cut(str(c), w).ljust(w) for c, w in zip(r, widths)]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


# --------------------------------------------------------------------------------------------------- commands


def cmd_plugins(args: argparse.Namespace) -> int:
    pm = get_plugin_manager()
    statuses = [s for s in pm.statuses if args.all or s.status != "disabled"]
    if args.json:
        _print_json([s.as_dict() for s in statuses])
        return 0
    rows = []
    for s in statuses:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(s.methods.items())) if args.all else str(s.n_methods)
        note = s.error if s.status == "failed" else ("" if s.status == "loaded" else s.status)
        rows.append([s.distribution, s.version, s.status, kinds, note or ""])
    print(_table(rows, ["distribution", "version", "status", "methods", "note"]))
    for s in pm.failures:
        print(textwrap.fill(s.report_line(), _width()), file=sys.stderr)
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    registry = get_plugin_manager().registry
    entries = registry.find(args.patterns, kind=args.kind, trait=args.trait)
    if not entries and args.patterns and not any(c in "".join(args.patterns) for c in "*?["):
        from .errors import UnknownMethodError

        raise UnknownMethodError(args.patterns[0], registry.suggest(args.patterns[0], args.kind))
    if args.json:
        _print_json([e.cls.describe() if args.params else _brief(e) for e in entries])
        return 0
    if not args.params:
        rows = [[e.cls.id, e.cls.kind, e.cls.summary()] for e in entries]
        print(_table(rows, ["id", "kind", "summary"]))
        return 0
    for e in entries:
        print(f"{e.cls.id}  ({e.cls.kind}, {e.distribution})")
        _print_params(e.cls.param_specs(), indent="  ")
    return 0


def _brief(entry: Any) -> dict[str, Any]:
    cls = entry.cls
    return {"id": cls.id, "kind": cls.kind, "trait": cls.trait, "distribution": entry.distribution,
            "summary": cls.summary()}


def _print_params(specs: list[dict[str, Any]], indent: str = "") -> None:
    if not specs:
        print(f"{indent}(no parameters)")
    for p in specs:
        head = f"{indent}{p['name']}: {p['type']} = {p['default']!r}"
        print(_cut(head, _width()))
        text = p["help"] + (f" [{p['allowed']}]" if p["allowed"] else "")
        if not p["affects_output"]:
            text += " (does not affect results)"
        print(textwrap.fill(text, _width(), initial_indent=indent + "    ", subsequent_indent=indent + "    "))


def cmd_describe(args: argparse.Namespace) -> int:
    registry = get_plugin_manager().registry
    cls = registry.get(args.id)
    d = cls.describe()
    if args.json:
        _print_json(d)
        return 0
    print(f"{d['id']}  —  {d['kind']}, trait {d['trait']}, version {d['version']}")
    print(f"from {d['distribution']} ({d['class']})")
    if d["payloads"]:
        print("payloads: " + ", ".join(d["payloads"]))
    if d["reference"]:
        print(textwrap.fill("reference: " + d["reference"], _width()))
    print()
    for para in d["doc"].split("\n\n"):
        print(textwrap.fill(" ".join(para.split()), _width()))
        print()
    print("parameters:")
    _print_params(d["params"], indent="  ")
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    registry = get_plugin_manager().registry
    entries = registry.find(args.patterns, kind="dataset")
    if args.json:
        _print_json([_brief(e) | {"needs_path": e.cls.needs_path} for e in entries])
        return 0
    rows = [[e.cls.id, "path" if e.cls.needs_path else "generated", e.cls.summary()] for e in entries]
    print(_table(rows, ["id", "input", "summary"]))
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from .cache import Cache, format_bytes

    cache = Cache(args.cache_dir)
    if args.action == "info":
        info = cache.info()
        if args.json:
            _print_json({k: str(v) if k == "root" else v for k, v in vars(info).items()} if hasattr(info, "__dict__") else info)
            return 0
        print(f"cache: {cache.uri}")
        print(f"tables: {info.n_tables}   json: {info.n_json}   size: {format_bytes(info.total_bytes)}")
        if getattr(info, "n_temp", 0):
            print(f"left-over temporary files: {info.n_temp} (removed by `bioanon cache clear`)")
        return 0
    removed = cache.clear(older_than_days=args.older_than)
    print(f"removed {removed} entries from {cache.uri}")
    return 0


# --------------------------------------------------------------------------------------------------- parser


def _version_text() -> str:
    lines = [f"bioanon {__version__}"]
    for s in get_plugin_manager().statuses:
        if s.name != "bioanon":
            lines.append(f"  {s.distribution} {s.version} ({s.status})")
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any):
        super().__init__(option_strings, dest=dest, nargs=0, help="show versions of bioanon and its plugins")

    def __call__(self, parser: argparse.ArgumentParser, *a: Any, **kw: Any) -> None:
        print(_version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bioanon",
        description="Anonymize biometric data and evaluate anonymizations against strong attackers.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("plugins", help="installed plugins, versions, load status, method counts")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--all", action="store_true", help="include disabled plugins and counts per kind")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("methods", help="list methods (wildcards allowed: 'face.*')")
    p.add_argument("patterns", nargs="*", metavar="PATTERN")
    p.add_argument("--kind", choices=["anonymizer", "deanonymizer", "recognizer", "utility", "selector", "dataset"])
    p.add_argument("--trait", help="face, gait, voice, motion or any")
    p.add_argument("--params", action="store_true", help="show each method's typed parameters")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("describe", help="one method: documentation, parameters, reference")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("datasets", help="dataset sources (real layouts and synthetic generators)")
    p.add_argument("patterns", nargs="*", metavar="PATTERN")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser("cache", help="show or clear the cache of derived tables")
    p.add_argument("action", choices=["info", "clear"])
    p.add_argument("--cache-dir", default=None, help="cache location (default: $BIOANON_CACHE or the user cache)")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="clear only older entries")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_cache)

    get_plugin_manager().add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bioanon`` command."""
    with warnings.catch_warnings():
        # plugin failures are printed once, as one line each, by the commands themselves
        warnings.simplefilter("ignore", PluginLoadWarning)
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
            if not getattr(args, "func", None):
                parser.print_help()
                return 0
            if args.command != "plugins":
                for s in get_plugin_manager().failures:
                    print(textwrap.fill(s.report_line(), _width()), file=sys.stderr)
            return int(args.func(args) or 0)
        except BioanonError as exc:
            print(f"bioanon: error: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``bioanon`` command line: a thin layer over the Python API.

Command results go to stdout; messages (progress, phases, warnings, errors) go to stderr through the
``bioanon`` logger (:mod:`bioanon.log`), at INFO by default, WARNING with ``-q`` and DEBUG with ``-v``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import textwrap
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ._version import __version__
from .errors import BioanonError, ConfigError
from .fileio import printable
from .log import cli_logging, verbosity_level
from .plugins import PluginLoadWarning, get_plugin_manager

if TYPE_CHECKING:
    from .methods import Anonymizer, DatasetSource, Method

WIDTH = 80
log = logging.getLogger(__name__)

# exit codes (listed by ``bioanon --help``)
EXIT_OK = 0
EXIT_NO_RESULTS = 1  # a run finished with failed tasks or without any result
EXIT_USAGE = 2  # bad command line, config, parameter or data (argparse's own usage errors exit 2 too)
EXIT_INTERRUPTED = 130  # Ctrl-C (finished tasks are cached: the same command resumes)
EXIT_CODES = f"""\
exit codes:
  {EXIT_OK:<4} success
  {EXIT_NO_RESULTS:<4} an evaluation finished but tasks failed or it produced no results
  {EXIT_USAGE:<4} usage, config, parameter or data error (nothing was run), or a file
       that could not be written (disk full): finished tasks are cached, and
       what was written before stays whole
  {EXIT_INTERRUPTED:<4} interrupted (Ctrl-C); the finished tasks are cached and the same command resumes"""


def _width() -> int:
    return min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def _cut(text: str, width: int) -> str:
    text = str(text)
    lead = text[: len(text) - len(text.lstrip())]
    text = lead + " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _table(rows: list[list[str]], headers: list[str], *, flex: int = -1) -> str:
    """Left-aligned columns; the ``flex`` column is cut so every line fits the terminal width."""
    cols = list(zip(*([headers] + rows), strict=True)) if rows else [[h] for h in headers]
    widths = [max(len(str(c)) for c in col) for col in cols]
    excess = sum(widths) + 2 * (len(widths) - 1) - _width()
    if excess > 0:  # cut the flex column first, then the widest ones
        cut = min(excess, max(0, widths[flex] - 8))
        widths[flex] -= cut
        excess -= cut
        while excess > 0 and max(widths) > 6:
            i = widths.index(max(widths))
            widths[i] -= 1
            excess -= 1
    lines = []
    for r in [headers] + rows:
        cells = [_cut(str(c), w).ljust(w) for c, w in zip(r, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


# --------------------------------------------------------------------------------------------------- commands


def cmd_plugins(args: argparse.Namespace) -> int:
    pm = get_plugin_manager()
    statuses = [s for s in pm.statuses if args.all or s.status != "disabled"]
    by_dist = pm.registry.by_distribution()
    unavailable = {s.distribution: pm.registry.unavailable(by_dist.get(s.distribution, [])) for s in statuses}
    if args.json:
        _print_json([s.as_dict() | {"unavailable": unavailable[s.distribution]} for s in statuses])
        return 0
    rows = []
    for s in statuses:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(s.methods.items())) if args.all else str(s.n_methods)
        if s.error:  # failed, incompatible, or loaded without its commands
            note = s.error
        elif s.status == "disabled":
            note = s.status
        else:
            note = "declares no API range" if s.api is None and s.name != "bioanon" else ""
        if unavailable[s.distribution]:
            installs = " ; ".join(dict.fromkeys(i for m in unavailable[s.distribution].values() for i in m.values()))
            note = "; ".join(filter(None, [f"{len(unavailable[s.distribution])} unavailable: {installs}", note]))
        rows.append([s.distribution, s.version, s.status, kinds, s.api or "-", note])
    print(_table(rows, ["distribution", "version", "status", "methods", "API", "note"]))
    _print_unavailable({mid: m for u in unavailable.values() for mid, m in u.items()})
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
    unavailable = registry.unavailable(entries)
    if not args.params:
        rows = [[e.cls.id, e.cls.kind, _marked_summary(e.cls, unavailable)] for e in entries]
        print(_table(rows, ["id", "kind", "summary"]))
        _print_unavailable(unavailable)
        return 0
    for e in entries:
        print(f"{e.cls.id}  ({e.cls.kind}, {e.distribution})")
        if e.cls.id in unavailable:
            _print_unavailable({e.cls.id: unavailable[e.cls.id]}, header=False)
        _print_params(e.cls.param_specs(), indent="  ")
    return 0


UNAVAILABLE_MARK = "[unavailable] "


def _marked_summary(cls: type[Method], unavailable: dict[str, dict[str, str]]) -> str:
    """The summary, led by a mark when the method's optional packages are not installed."""
    return (UNAVAILABLE_MARK if cls.id in unavailable else "") + cls.summary()


def _print_unavailable(unavailable: dict[str, dict[str, str]], *, header: bool = True) -> None:
    """One line per unavailable method: the packages it needs and the command that installs them."""
    from .errors import missing_text

    if not unavailable:
        return
    if header:
        print(f"\n{UNAVAILABLE_MARK.strip()} methods cannot run here until their optional packages are installed:")
    lines = [missing_text(method_id, missing) for method_id, missing in unavailable.items()]
    if header and any("torch" in missing for missing in unavailable.values()):
        lines.append(TORCH_HINT)
    for line in lines:
        print(
            textwrap.fill(
                line,
                _width(),
                initial_indent="  ",
                subsequent_indent="      ",
                break_on_hyphens=False,
                break_long_words=False,
            )
        )


TORCH_HINT = (
    "Every other method runs without them (so does `bioanon demo`). pip's default torch is the CUDA build, "
    "several GB: on a machine without an NVIDIA GPU install the CPU build first: pip install torch --index-url "
    "https://download.pytorch.org/whl/cpu"
)
"""The note under a listing of unavailable methods when some need torch: which torch build to install."""


def _brief(entry: Any) -> dict[str, Any]:
    cls = entry.cls
    return {
        "id": cls.id,
        "kind": cls.kind,
        "trait": cls.trait,
        "distribution": entry.distribution,
        "summary": cls.summary(),
        "missing": cls.missing_requirements(),
    }


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
    from .errors import missing_text

    registry = get_plugin_manager().registry
    cls = registry.get(args.id)
    d = cls.describe()
    if args.json:
        _print_json(d)
        return 0
    print(f"{d['id']}  —  {d['kind']}, trait {d['trait']}, version {d['version']}")
    print(f"from {d['distribution']} ({d['class']})")
    if d["missing"]:
        print(
            textwrap.fill(
                "unavailable: " + missing_text(d["id"], d["missing"]),
                _width(),
                subsequent_indent="  ",
                break_on_hyphens=False,
                break_long_words=False,
            )
        )
    if d["payloads"]:
        print("payloads: " + ", ".join(d["payloads"]))
    if d["reference"]:
        print(textwrap.fill("reference: " + d["citation"], _width()))
    if d.get("attribute_names") is not None:  # a dataset source that declares its attribute columns
        names = ", ".join(d["attribute_names"]) or "none"
        print(textwrap.fill("attribute columns: " + names, _width(), subsequent_indent="  "))
    elif d["kind"] == "dataset":
        print("attribute columns: those of the data (known once loaded)")
    if d.get("per_sample"):
        print(
            textwrap.fill(
                "per sample: each sample is anonymized on its own, so an evaluation runs it once per data set, in "
                "shards across its workers, and reuses it for any split or rates",
                _width(),
                subsequent_indent="  ",
            )
        )
    print()
    for para in d["doc"].split("\n\n"):
        print(textwrap.fill(" ".join(para.split()), _width()))
        print()
    print("parameters:")
    _print_params(d["params"], indent="  ")
    if d.get("presets"):
        print("\npresets (preset=NAME fills every parameter left at its default):")
        for name, values in d["presets"].items():
            text = ", ".join(f"{k}={v!r}" for k, v in values.items()) or "the defaults above"
            print(textwrap.fill(f"{name}: {text}", _width(), initial_indent="  ", subsequent_indent="    "))
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    registry = get_plugin_manager().registry
    entries = registry.find(args.patterns, kind="dataset")
    if args.json:
        _print_json([_brief(e) | {"needs_path": cast("type[DatasetSource]", e.cls).needs_path} for e in entries])
        return 0
    unavailable = registry.unavailable(entries)
    rows = [
        [
            e.cls.id,
            "path" if cast("type[DatasetSource]", e.cls).needs_path else "generated",
            _marked_summary(e.cls, unavailable),
        ]
        for e in entries
    ]
    print(_table(rows, ["id", "input", "summary"]))
    _print_unavailable(unavailable)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from .cache import Cache, format_bytes

    cache = Cache(args.cache_dir)
    if args.action == "info":
        info = cache.info()
        if args.json:
            _print_json(
                {k: str(v) if k == "root" else v for k, v in vars(info).items()} if hasattr(info, "__dict__") else info
            )
            return 0
        print(f"cache: {cache.uri}")
        print(f"tables: {info.n_tables}   json: {info.n_json}   size: {format_bytes(info.total_bytes)}")
        if getattr(info, "n_temp", 0):
            print(f"left-over temporary files: {info.n_temp} (removed by `bioanon cache clean`)")
        corrupt = cache.quarantined()
        if corrupt:
            print(f"moved aside as damaged: {len(corrupt)} (removed by `bioanon cache clear`)")
            for path in corrupt[:20]:
                print(f"  {path}")
            if len(corrupt) > 20:
                print(f"  … and {len(corrupt) - 20} more")
        return 0
    if args.action == "verify":
        report = cache.verify(progress=None)
        print(f"{report['checked']} entries checked, {len(report['damaged'])} damaged in {cache.uri}")
        for path in report["damaged"]:
            print(f"  moved aside: {path}.corrupt (computed again by the next run that needs it)")
        return 1 if report["damaged"] else 0
    if args.action == "clean":
        removed = cache.clean()
        print(f"removed {removed} left-over files (temporary files of writers that are gone) from {cache.uri}")
        return 0
    removed = cache.clear(older_than_days=args.older_than)
    print(f"removed {removed} entries from {cache.uri}")
    return 0


def _fmt(x: Any) -> str:
    try:
        return "—" if x != x else f"{float(x):.3f}"
    except (TypeError, ValueError):
        return str(x)


def _print_summary(result: Any) -> None:
    """What a user wants to see after a run: the worst case per setting, AUCs, warnings, where the report is."""
    head = result.headline()
    if not head.empty:
        sel, n = head.selector.iloc[0], head.n_subjects.iloc[0]
        if head.metric.iloc[0] == "balanced_accuracy":
            print(
                f"\nworst-case balanced accuracy of the attribute attack ({sel} selection, {n} subjects; clear "
                f"level and its uniform chance beside it, then the same attack's plain accuracy and ITS chance, "
                f"the majority-class rate):"
            )
            rows = [
                [
                    r.anonymizer,
                    r.setting or "-",
                    _fmt(r.worst_accuracy),
                    f"{r.worst_recognizer} / {r.worst_scenario}",
                    _fmt(r.clear_accuracy),
                    _fmt(r.chance),
                    _fmt(r.top1),
                    _fmt(r.majority_rate),
                ]
                for r in head.itertuples()
            ]
            print(
                _table(
                    rows,
                    ["anonymizer", "setting", "bal. acc.", "achieved by", "clear", "chance", "accuracy", "majority"],
                    flex=3,
                )
            )
        else:
            print(f"\nworst-case top-1 accuracy ({sel} selection, {n} subjects; clear level and chance beside it):")
            rows = [
                [
                    r.anonymizer,
                    r.setting or "-",
                    _fmt(r.worst_accuracy),
                    f"{r.worst_recognizer} / {r.worst_scenario}",
                    _fmt(r.clear_accuracy),
                    _fmt(r.chance),
                ]
                for r in head.itertuples()
            ]
            print(_table(rows, ["anonymizer", "setting", "worst", "achieved by", "clear", "chance"], flex=3))
    if result.auc is not None and not result.auc.empty:
        counted = result.auc[result.auc.counted]
        largest = counted.groupby("selector").n_subjects.transform("max")
        counted = counted[counted.n_subjects == largest]
        print(
            "\nprivacy–utility AUC (1 = ideal; the lower of with/without de-anonymization; all subject counts "
            "in the report):"
        )
        rows = [[r.anonymizer, r.measure, f"{r.selector} n={r.n_subjects}", _fmt(r.auc)] for r in counted.itertuples()]
        print(_table(rows, ["anonymizer", "utility measure", "selection", "AUC"], flex=1))
    for w in result.warnings:
        log.warning("%s", w)
    for f in result.failures:
        log.error("failed: %s: %s", f["task"], f["error"].splitlines()[0])
    print(f"\ntasks: {result.executed} computed, {result.cached} reused from the cache")
    if result.report_path is not None:
        print(f"report: {result.report_path}")
    elif result.run_dir is not None:
        print(f"results: {result.run_dir}")


def _run_context() -> Any:
    """A new run context over the registry of the installed plugins (one per command)."""
    from .context import RunContext

    return RunContext(get_plugin_manager().registry)


def _run_evaluation(config: Any, args: argparse.Namespace) -> int:
    from .evaluation.run import evaluate

    result = evaluate(
        config,
        out_dir=args.out,
        run_id=args.run_id,
        cache=args.cache_dir,
        executor=args.executor,
        scheduler=args.scheduler,
        keep_going=args.keep_going,
        progress=not args.quiet,
        report=not args.no_report,
        device=args.device,
        jobs=args.jobs,
        context=_run_context(),
    )
    _print_summary(result)
    where = f" (see {result.run_dir / 'failures.json'})" if result.run_dir is not None else ""
    if result.metrics is None or len(result.metrics) == 0:
        why = (
            f"{len(result.failures)} task(s) failed or were skipped{where}"
            if result.failures
            else "no metric was computed (check the config's recognizers, scenarios and selection)"
        )
        log.error("the evaluation produced no results: %s", why)
        return EXIT_NO_RESULTS
    if result.failures:
        log.error("%d task(s) failed or were skipped%s", len(result.failures), where)
        return EXIT_NO_RESULTS
    return EXIT_OK


def _config_from_args(args: argparse.Namespace) -> Any:
    """The config path, or with --skip-bad-files the validated config with that dataset parameter set."""
    config: Any = args.config
    if args.skip_bad_files:
        from pathlib import Path

        from .evaluation.config import load_config, read_toml

        path = Path(args.config)
        try:
            raw: Any = read_toml(path)
        except ConfigError:
            raw = None  # let load_config report the problem with the file name
        if isinstance(raw, dict) and isinstance(raw.get("dataset"), dict):
            raw["dataset"].setdefault("params", {})["skip_bad_files"] = True
            config = load_config(raw, registry=get_plugin_manager().registry, base_dir=path.resolve().parent)
    return config


def cmd_evaluate(args: argparse.Namespace) -> int:
    return _run_evaluation(_config_from_args(args), args)


def cmd_validate(args: argparse.Namespace) -> int:
    from .evaluation.checks import validate

    with _run_context().activate():
        cfg = validate(_config_from_args(args), out_dir=args.out, load_data=args.data)
    settings = sum(len(a.settings()) for a in cfg.anonymizers)
    checked = (
        "config, methods, parameters, optional packages"
        + (", output folder" if args.out else "")
        + (", data payloads and label" if args.data else "")
    )
    print(
        f"{args.config}: valid ({checked}): {settings} anonymizer setting(s), {len(cfg.recognizers)} "
        f"recognizer(s) × {len(cfg.scenarios) + 1} scenario(s) with clear, {len(cfg.utility)} utility measure(s), "
        f"{cfg.repeats} repeat(s)"
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .evaluation.demo import demo_config

    log.info("demo: a full strong evaluation on built-in synthetic data (trait: %s)", args.trait)
    return _run_evaluation(demo_config(args.trait, get_plugin_manager().registry), args)


def cmd_report(args: argparse.Namespace) -> int:
    from .report import render_report

    print(f"report: {render_report(args.run_dir, force=args.force)}")
    return 0


def _parse_assignments(items: list[str], cls: Any, what: str) -> dict[str, Any]:
    """``name=value`` options → typed parameters of ``cls`` (JSON values; bare words stay strings)."""
    from .errors import ParameterError
    from .methods import parse_param_text

    types = cls.param_types()
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep:
            raise ParameterError(cls.id, item, None, f"write {what} as name=value")
        if name not in types:
            import difflib

            close = difflib.get_close_matches(name, list(types), n=1)
            raise ParameterError(
                cls.id,
                name,
                text,
                f"no such parameter; did you mean {close[0]!r}?" if close else "known: " + ", ".join(types),
            )
        out[name] = parse_param_text(text, types[name])
    return out


def cmd_anonymize(args: argparse.Namespace) -> int:
    from .errors import BioanonError
    from .export import anonymize, as_chain, check_output, write_table

    registry = get_plugin_manager().registry
    source_cls = cast("type[DatasetSource]", registry.get(args.source, kind="dataset"))
    source_cls.check_requirements()
    dataset_params = _parse_assignments(args.dataset_param, source_cls, "-d")
    if args.skip_bad_files:
        dataset_params["skip_bad_files"] = True  # validated: sources without it reject the parameter
    source = source_cls(**dataset_params)
    methods: list[Anonymizer] = []
    for method_id, options in args.steps or []:
        cls = cast("type[Anonymizer]", registry.get(method_id, kind="anonymizer"))
        cls.check_requirements()
        methods.append(cls(**_parse_assignments(options, cls, "-o")))
    if not methods:
        raise BioanonError("give at least one anonymizer with -m METHOD")
    methods = [as_chain(methods, registry)]  # several -m: one any.chain of them, in the order given
    if source.needs_path and not args.path:
        raise BioanonError(f"{source.id} reads a data layout: give its PATH")
    check_output(args.out)  # before any work
    from .device import resolve_device, using_device

    with using_device(args.device):
        for m in getattr(methods[0], "methods_", methods):  # a device not here fails before the data are read
            if hasattr(m, "device"):
                resolve_device(m.device, who=m.id)
        table = source.load(args.path if source.needs_path else None)
        result = anonymize(table, methods, registry=registry)
    written = write_table(result, args.out)
    chain = " → ".join(m.id for m in getattr(methods[0], "methods_", methods))
    print(f"anonymized {len(result)} samples of {result.num_subjects} subjects with {chain} -> {written}")
    return 0


class _StepAction(argparse.Action):
    """``-m METHOD``: start a new step of the anonymization chain."""

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, value: Any, option_string: str | None = None
    ) -> None:
        ns.steps = [*(ns.steps or []), (value, [])]


class _StepOptionAction(argparse.Action):
    """``-o NAME=VALUE``: a parameter of the anonymizer named by the ``-m`` before it."""

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, value: Any, option_string: str | None = None
    ) -> None:
        if not ns.steps:
            parser.error(f"{option_string} {value}: give it after the -m METHOD it sets")
        ns.steps[-1][1].append(value)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="results", help="results folder (default: ./results)")
    p.add_argument(
        "--run-id",
        default=None,
        help="name of the run folder inside --out: letters, digits, '.', '_', '-' (default: name-time-fingerprint)",
    )
    p.add_argument("--cache-dir", default=None, help="cache location (default: $BIOANON_CACHE or the user cache)")
    p.add_argument(
        "--keep-going",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="finish what does not depend on a failed task; --no-keep-going: stop at the first failure (default: "
        "[run] keep_going, else stop unless a setting fails on its data, which fails that setting only)",
    )
    p.add_argument(
        "--executor",
        choices=["local", "dask"],
        default="local",
        help="run the task graph on this machine (local) or on a Dask cluster",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="Dask scheduler address, e.g. tcp://10.0.0.1:8786 (with --executor dask; without it a "
        "local Dask cluster of --jobs workers is started)",
    )
    p.add_argument(
        "--jobs",
        type=_jobs_count,
        default=None,
        metavar="N",
        help="worker processes running evaluation cells at once (default: [run] jobs of the config, "
        "else $BIOANON_JOBS, else every usable core; 1: all in this process)",
    )
    p.add_argument("--no-report", action="store_true", help="write the tables but not report.html")
    _add_device_option(p)  # (--quiet / -q: the global option)


def _jobs_count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of worker processes (0 = every core), got {text!r}")
    return int(text)


def _add_device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        default=None,
        metavar="DEVICE",
        help="torch device of the network methods: auto (CUDA, else mps, else CPU), cpu, cuda, cuda:N "
        "or mps (default: [run] device of the config, else $BIOANON_DEVICE, else auto)",
    )


# --------------------------------------------------------------------------------------------------- parser


def _version_text() -> str:
    lines = [f"bioanon {__version__}"]
    for s in get_plugin_manager().statuses:
        if s.name != "bioanon":
            lines.append(f"  {s.distribution} {s.version} ({s.status})")
    return "\n".join(lines)


def cmd_init(args: argparse.Namespace) -> int:
    from .scaffold import examples, write_example

    if args.example is None:
        found = examples()
        if args.json:
            _print_json(
                [
                    {"name": e.name, "summary": e.summary, "source": e.source, "plugin": e.plugin, "data": e.data_path}
                    for e in found
                ]
            )
            return 0
        for e in found:
            data = f"recorded data ({e.source})" if e.data_path else "built-in data"
            print(f"{e.name:<28}{data}, needs {e.plugin}")
            print(textwrap.fill(e.summary, _width(), initial_indent="    ", subsequent_indent="    "))
        print("\nbioanon init NAME [DIR] writes DIR/NAME.toml; run it with bioanon evaluate DIR/NAME.toml")
        return 0
    target, hint = write_example(args.example, args.dir, data=args.data, force=args.force)
    print(f"wrote {target}")
    if hint:
        print(hint)
    print(f"run it with: bioanon evaluate {target}")
    return 0


def cmd_import_seba(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .errors import ConfigError
    from .fileio import atomic_write_text
    from .seba_import import compact_labels, import_seba

    to_stdout = args.output == "-"
    output = Path(args.output) if args.output and not to_stdout else Path(Path(args.runconfig).name)
    stem = output.name.removesuffix(".toml").removesuffix(".yaml").removesuffix(".runconfig").removesuffix(".config")
    result = import_seba(
        args.runconfig,
        data_dir=args.data,
        trait=args.trait,
        fidelity=not args.no_fidelity,
        out_dir=Path.cwd() if to_stdout else output.parent.absolute(),
        name=stem,
    )
    if not result.configs:
        print(result.table(_width()))
        raise ConfigError(f"{args.runconfig}: no entry could be mapped to a bioanon config (see the table)")
    if to_stdout:
        if len(result.configs) > 1:
            raise ConfigError(
                f"{args.runconfig} gives {len(result.configs)} configs; write them with -o FILE.toml "
                f"(FILE-1.toml, FILE-2.toml, …)"
            )
        print(result.configs[0].to_toml(args.runconfig), end="")
        print(result.table(_width()), file=sys.stderr)
        return 0
    targets = [output.parent / f"{c.name}.toml" for c in result.configs]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not args.force:
        raise ConfigError(f"{', '.join(existing)} exist{'s' if len(existing) == 1 else ''}; pass --force to overwrite")
    for c, target in zip(result.configs, targets, strict=True):
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, c.to_toml(args.runconfig))
    print(result.table(_width()))
    print()
    for c, target in zip(result.configs, targets, strict=True):
        print(f"wrote {target} (SEBA {compact_labels(c.entries)})")
    print("check with: " + " ; ".join(f"bioanon validate {t}" for t in targets))
    return 0


def cmd_new_plugin(args: argparse.Namespace) -> int:
    import shlex

    from .scaffold import PLACEHOLDER_AUTHOR, new_plugin

    target = new_plugin(args.name, args.dir, author=args.author, description=args.description)
    print(
        f"created {target}: the plugin bioanon-{args.name.replace('_', '-')} with methods "
        f"{args.name}.quantize and {args.name}.nearest_neighbour"
    )
    if args.author is None and PLACEHOLDER_AUTHOR in (target / "LICENSE").read_text(encoding="utf-8"):
        print(
            f"note: the author is {PLACEHOLDER_AUTHOR!r} (git has no user.name): put yours in pyproject.toml, "
            "LICENSE and README.md, or create the project again with --author"
        )
    print(
        f"next: cd {shlex.quote(str(target))} && pip install -e '.[test]' && bioanon methods '{args.name}.*' "
        "&& pytest tests"
    )
    return 0


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any):
        super().__init__(option_strings, dest=dest, nargs=0, help="show versions of bioanon and its plugins")

    def __call__(self, parser: argparse.ArgumentParser, *a: Any, **kw: Any) -> None:
        print(_version_text())
        parser.exit()


def _add_verbosity(p: argparse.ArgumentParser, *, top: bool = False) -> None:
    """``-q`` / ``-v``: on the top-level parser with defaults, on each sub-command without (so they can be
    given before or after the command and the sub-command does not reset what was given before it)."""
    default: Any = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        **({"default": False} if top else default),
        help="warnings and errors only, no progress bars",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        **({"default": 0} if top else default),
        help="debug messages too (each naming the module that logs it)",
    )


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    example: str,
    description: str | None = None,
    **kw: Any,
) -> argparse.ArgumentParser:
    """A sub-command (``summary``: its line in ``bioanon --help``) whose ``--help`` ends with examples
    (``example``: one command a line)."""
    epilog = "example" + ("s" if "\n" in example.strip() else "") + ":\n" + textwrap.indent(example.strip(), "  ")
    p = sub.add_parser(
        name,
        help=summary,
        description=description or summary[:1].upper() + summary[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kw,
    )
    _add_verbosity(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bioanon",
        description="Anonymize biometric data and evaluate anonymizations against strong attackers.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  bioanon demo\n  bioanon methods 'face.*'\n  bioanon -q evaluate config.toml\n"
        "  bioanon COMMAND --help\n\n"
        "Messages go to stderr (-q: warnings and errors only; -v: debug), results to stdout; progress bars\n"
        "are drawn only on a terminal.\n\n" + EXIT_CODES,
    )
    parser.add_argument("--version", action=_VersionAction)
    _add_verbosity(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _command(
        sub,
        "plugins",
        "installed plugins, versions, load status, method counts",
        "bioanon plugins\nbioanon plugins --all --json",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--all", action="store_true", help="include disabled plugins and counts per kind")
    p.set_defaults(func=cmd_plugins)

    p = _command(
        sub,
        "methods",
        "list methods (wildcards allowed: 'face.*')",
        "bioanon methods 'face.*' --kind anonymizer\nbioanon methods --trait voice --params\n"
        "bioanon methods any.gaussian_noise --json",
    )
    p.add_argument("patterns", nargs="*", metavar="PATTERN")
    p.add_argument("--kind", choices=["anonymizer", "deanonymizer", "recognizer", "utility", "selector", "dataset"])
    p.add_argument("--trait", help="face, gait, voice, motion or any")
    p.add_argument("--params", action="store_true", help="show each method's typed parameters")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_methods)

    p = _command(
        sub,
        "describe",
        "one method: documentation, parameters, reference",
        "bioanon describe any.gaussian_noise\nbioanon describe face.gaussian_blur --json",
    )
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_describe)

    p = _command(
        sub,
        "datasets",
        "dataset sources (real layouts and synthetic generators)",
        "bioanon datasets\nbioanon datasets 'face.*' --json",
    )
    p.add_argument("patterns", nargs="*", metavar="PATTERN")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_datasets)

    p = _command(
        sub,
        "cache",
        "show, check, tidy or clear the cache of derived tables",
        "bioanon cache info\nbioanon cache verify\nbioanon cache clean\nbioanon cache clear --older-than 30",
    )
    p.add_argument(
        "action",
        choices=["info", "verify", "clean", "clear"],
        help="info: sizes and damaged entries; verify: check every entry's checksum (exit 1 if any was damaged: "
        "moved aside); clean: remove temporary files of dead writers; clear: remove entries",
    )
    p.add_argument("--cache-dir", default=None, help="cache location (default: $BIOANON_CACHE or the user cache)")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="clear only older entries")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_cache)

    p = _command(
        sub,
        "evaluate",
        "run a strong evaluation from a TOML config",
        "bioanon init quickstart && bioanon evaluate quickstart.toml\n"
        "bioanon evaluate config.toml --out runs --jobs 4 --keep-going\n"
        "bioanon -q evaluate config.toml 2> errors.log",
        description="Run a strong evaluation from a TOML config: one line per phase on stderr, the "
        "worst cases and AUCs on stdout, tables and report.html in OUT/RUN-ID. Exit code 1 "
        "when tasks failed or nothing was computed.",
    )
    p.add_argument("config", help="the evaluation config (TOML)")
    p.add_argument(
        "--skip-bad-files",
        action="store_true",
        help="skip unreadable data files and list them (sources with a skip_bad_files parameter)",
    )
    _add_run_options(p)
    p.set_defaults(func=cmd_evaluate)

    p = _command(
        sub,
        "validate",
        "check a config without running it (exit 2 listing every problem)",
        "bioanon validate config.toml\nbioanon validate config.toml --data --out runs",
    )
    p.add_argument("config", help="the evaluation config (TOML)")
    p.add_argument("--out", default=None, help="also check that a run folder can be created in this folder")
    p.add_argument(
        "--data",
        action="store_true",
        help="also load the data set and check every method's payload and the label column",
    )
    p.add_argument("--skip-bad-files", action="store_true", help="as for evaluate")
    p.set_defaults(func=cmd_validate)

    p = _command(
        sub,
        "demo",
        "a full evaluation on built-in synthetic data (about a minute)",
        "bioanon demo\nbioanon demo --trait face --out /tmp/demo",
    )
    p.add_argument(
        "--trait",
        default="any",
        help="run this trait plugin's own demo: its methods on its synthetic data (default: any, the core's)",
    )
    _add_run_options(p)
    p.set_defaults(func=cmd_demo)

    p = _command(
        sub,
        "anonymize",
        "anonymize a data set with one or more anonymizers and write it",
        "bioanon anonymize any.synthetic -d n_subjects=20 -m any.gaussian_noise -o sigma=2 "
        "--out noisy.arrow\n"
        "bioanon anonymize face.orl ~/data/att_faces -m face.gaussian_blur -o kernel=29 --out blurred/",
        description="Anonymize a data set. Several -m build one any.chain, applied in the order "
        "given (each step fitted on the previous one's output); each -o sets a "
        "parameter of the -m before it. "
        "The output format follows --out: .arrow, .parquet, .csv (features only) or "
        "a folder (no suffix) of PNG/WAV files with metadata.csv. Evaluate an "
        '.arrow/.parquet output with [dataset] source = "any.table".',
    )
    p.add_argument("source", help="dataset source id (see `bioanon datasets`)")
    p.add_argument("path", nargs="?", default=None, help="data folder, for sources that read files")
    p.add_argument(
        "-m",
        "--method",
        action=_StepAction,
        dest="steps",
        required=True,
        metavar="METHOD",
        help="anonymizer id (repeatable: a chain, applied in order)",
    )
    p.add_argument(
        "-o",
        "--option",
        action=_StepOptionAction,
        dest="steps",
        metavar="NAME=VALUE",
        help="parameter of the anonymizer given by the -m before it (repeatable)",
    )
    p.add_argument(
        "-d",
        "--dataset-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="dataset source parameter (repeatable)",
    )
    p.add_argument(
        "--out", required=True, help="output: .arrow, .parquet, .csv (features only), or a new folder for images/audio"
    )
    p.add_argument("--skip-bad-files", action="store_true", help="skip unreadable data files and list them")
    _add_device_option(p)
    p.set_defaults(func=cmd_anonymize)

    p = _command(
        sub,
        "init",
        "list the example configs, or copy one into a folder to run or edit",
        "bioanon init\nbioanon init quickstart\nbioanon evaluate quickstart.toml\n"
        "bioanon init face-orl runs/ --data ~/data/att_faces",
        description="Without EXAMPLE: list the examples. With EXAMPLE: write DIR/EXAMPLE.toml.",
    )
    p.add_argument("example", nargs="?", help="the example's name (see the list)")
    p.add_argument("dir", nargs="?", default=".", help="where to write it (default: here)")
    p.add_argument(
        "--data",
        default=None,
        metavar="DIR",
        help="for examples on recorded data: the folder of your copy of that data set",
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument("--json", action="store_true", help="machine-readable list")
    p.set_defaults(func=cmd_init)

    p = _command(
        sub,
        "new-plugin",
        "create a new, separately installable plugin project",
        "bioanon new-plugin ecg --author 'Ada Lovelace' --description 'Anonymizers of ECG features'\n"
        "cd bioanon-ecg && pip install -e '.[test]'\nbioanon methods 'ecg.*'\npytest tests",
        description="Create bioanon-NAME from the plugin template: one anonymizer, one "
        "recognizer, tests that run bioanon's conformance suite (pip install -e '.[test]' installs pytest for "
        "them), and a README.",
    )
    p.add_argument("name", help="method prefix and trait: lower case letters, digits, '_' (e.g. ecg)")
    p.add_argument("dir", nargs="?", default=None, help="project folder (default: ./bioanon-NAME)")
    p.add_argument(
        "--author",
        default=None,
        help="the author in pyproject.toml, the LICENSE copyright and README.md (default: git's user.name, "
        "else 'Your Name')",
    )
    p.add_argument(
        "--description",
        default=None,
        help="one line in pyproject.toml, README.md and the package docstring (default: 'A bioanon plugin for "
        "NAME data')",
    )
    p.set_defaults(func=cmd_new_plugin)

    p = _command(
        sub,
        "import",
        "turn another tool's config into bioanon configs (SEBA)",
        "bioanon import seba sample.runconfig.yaml -o study.toml\nbioanon validate study.toml",
        description="Turn another tool's config into bioanon evaluation configs.",
    )
    imports = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    q = _command(
        imports,
        "seba",
        "a SEBA run config or experiment config (YAML) as bioanon configs",
        "bioanon import seba sample.runconfig.yaml -o study.toml\n"
        "bioanon import seba sweep.config.yaml --data ~/seba/data -o sweep.toml\n"
        "bioanon import seba run.yaml -o - > run.toml",
        description=textwrap.fill(
            "Turn a SEBA run config (a YAML list of {repeat, config} entries) or experiment config (an "
            "'anonymizations' list with sweeps) into bioanon configs: entries that differ only in "
            "anonymization, privacy or utility method share one config; others get FILE-1.toml, "
            "FILE-2.toml, …. Prints what could not be mapped, or maps only approximately, and writes it "
            "as comments into each config.",
            79,
        ),
    )
    q.add_argument("runconfig", help="the SEBA YAML file")
    q.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="FILE.toml",
        help="where to write (default: ./NAME.toml after the YAML file; '-': stdout, one config only)",
    )
    q.add_argument(
        "--data",
        default=None,
        metavar="DIR",
        help="SEBA's data folder (default: data/ beside the YAML file): sets' traits and image sizes",
    )
    q.add_argument(
        "--trait",
        choices=["motion", "face"],
        default=None,
        help="the sets' trait when their meta files are not at hand and the method names fit both",
    )
    q.add_argument(
        "--no-fidelity",
        action="store_true",
        help="leave out the options that reproduce SEBA's attacker and selector (cv_folds, keep, "
        "scores, attacker_fit, by, order): bioanon's own attacker",
    )
    q.add_argument("--force", action="store_true", help="overwrite existing files")
    q.set_defaults(func=cmd_import_seba)

    p = _command(
        sub,
        "report",
        "re-render report.html and plots of a results folder (an unchanged report is reused; --force draws it again)",
        "bioanon report results/quickstart-20260101-120000-abc123",
    )
    p.add_argument("run_dir")
    p.add_argument("--force", action="store_true", help="draw the report again even when its results are unchanged")
    p.set_defaults(func=cmd_report)

    get_plugin_manager().add_commands(sub)
    for p in {id(p): p for p in sub.choices.values()}.values():  # plugins' commands take -q / -v too
        if not {"-q", "--quiet", "-v", "--verbose"} & set(p._option_string_actions):
            _add_verbosity(p)
    return parser


def _build_parser_at_startup() -> argparse.ArgumentParser:
    """:func:`build_parser` in the ``bioanon`` process itself (``argv`` not given): it loads the plugins, whose
    modules and method classes live as long as the process. The garbage collector is paused meanwhile and then
    told to ignore them (``gc.freeze``), so no collection traverses them again, the one at exit included (~30 ms
    of start-up with the four trait plugins). Not when ``main`` is called with ``argv`` from a longer-lived
    process (e.g. tests), where freezing would keep cycles that are alive now from ever being collected."""
    import gc

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return build_parser()
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _show_warning(
    message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None
) -> None:
    """``warnings.warn`` inside the command: one ``bioanon: warning:`` line through the logger (where it was
    raised only with ``-v``)."""
    name = "" if category is UserWarning or category.__module__.startswith("bioanon") else f"{category.__name__}: "
    log.warning("%s%s", name, str(message).removeprefix("bioanon: "))
    log.debug("(warned at %s:%s)", filename, lineno)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bioanon`` command; returns its exit code (see ``EXIT_CODES``)."""
    with warnings.catch_warnings(), cli_logging(logging.INFO) as handler:
        # plugin failures are printed once, as one line each, by the commands themselves
        warnings.simplefilter("ignore", PluginLoadWarning)
        warnings.showwarning = _show_warning
        try:
            parser = _build_parser_at_startup() if argv is None else build_parser()
            args = parser.parse_args(argv)
            if args.quiet and args.verbose:
                parser.error("-q/--quiet and -v/--verbose exclude each other")
            handler.set_level(verbosity_level(args.quiet, args.verbose))
            if not getattr(args, "func", None):
                parser.print_help()
                return EXIT_OK
            if args.command != "plugins":
                for s in get_plugin_manager().failures:
                    print(textwrap.fill(s.report_line(), _width()), file=sys.stderr)
            return int(args.func(args) or 0)
        except BioanonError as exc:
            log.debug("details", exc_info=True)
            print(f"bioanon: error: {printable(str(exc))}", file=sys.stderr)  # undecodable file-name bytes as \xff
            return EXIT_USAGE
        except BrokenPipeError:
            return EXIT_OK
        except KeyboardInterrupt as exc:  # one line, no traceback; finished tasks are in the cache
            print(f"bioanon: {exc}" if str(exc) else "bioanon: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

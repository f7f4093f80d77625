"""The evaluation config: a TOML file (or an equivalent dict) validated completely before any work starts.

::

    import bioanon
    from bioanon.evaluation.config import load_config

    cfg = load_config(bioanon.example("quickstart"))
    for spec in cfg.anonymizers:
        for setting in spec.settings():            # the grid's cartesian product
            anonymizer = spec.create(setting)
            print(spec.name, spec.setting_label(setting))

Validation collects *every* problem and raises one :class:`~bioanon.errors.ConfigError` whose message has a
header line and then one line per problem, each starting with its key path::

    invalid evaluation config demo.toml (2 problems):
      repeats: expected an integer ≥ 1, got '2' (str)
      recognizers[0].id: unknown recognizer 'any.cosine_centroi'; did you mean 'any.cosine_centroid'?

The problem lines (without indentation) are also available as ``error.problems``.

Method parameters are validated by constructing the method for every grid setting (a float parameter must be
finite and, where its declaration sets no bound, within ±:data:`~bioanon.methods.FLOAT_PARAM_LIMIT`). What would
only fail after minutes of work is refused here, from the config alone: a grid of more than
:data:`MAX_GRID_SETTINGS` settings (before any is constructed), a plan of more than :data:`MAX_PLAN_SCORINGS`
scorings, ``[report] bootstrap`` above :data:`MAX_BOOTSTRAP`, and subject counts of which none is reachable when
the config fixes the data set's number of subjects (a generated data set's ``n_subjects``). The loaded config is
*resolved*: aliases are replaced by canonical ids, every default is filled in and every method's parameters
are completed with the method's own defaults, so ``cfg.to_dict()`` is a self-contained record of what ran and
``load_config(cfg.to_dict()) == cfg``.
"""

from __future__ import annotations

import difflib
import itertools
import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, TypeGuard, cast

import attrs

from ..errors import ConfigError, ParameterError
from ..fileio import jsonable
from ..methods import Anonymizer, DatasetSource, Method, Recognizer
from ..sanity import ON_BAD
from .scenarios import ALWAYS_SCENARIOS, DEANON, SCENARIOS, default_scenarios, parse_scenario

if TYPE_CHECKING:  # types only
    from ..registry import Registry

__all__ = [
    "ALWAYS_SCENARIOS",
    "SCENARIOS",
    "AttackerDatasetSpec",
    "AttributeMap",
    "DatasetSpec",
    "EvalConfig",
    "MethodSpec",
    "Rates",
    "ReportSpec",
    "RunSpec",
    "SelectionSpec",
    "TemplatesSpec",
    "background_fit_problems",
    "fit_defined_anonymizers",
    "load_config",
]


DEFAULT_NAME = "evaluation"
DEFAULT_SELECTORS = ("random",)
DEFAULT_RANDOM_DRAWS = 5
DEFAULT_RATES = {"background": 0.2, "attacker": 0.4, "evaluation": 0.4, "enrolment": 0.5}
# with [attacker_dataset]: the attacker's share comes from that data set; the evaluated one gives the rest
DEFAULT_CROSS_RATES = {"background": 0.2, "attacker": 0.0, "evaluation": 0.8, "enrolment": 0.5}


class _ReportDefaults(TypedDict):
    bootstrap: int
    confidence: float
    per_probe_scores: bool


DEFAULT_REPORT: _ReportDefaults = {"bootstrap": 1000, "confidence": 0.95, "per_probe_scores": False}

# Limits on the size of an evaluation, checked when a config is loaded (so `bioanon validate` refuses an absurd
# config at once, without the data, instead of a run failing after minutes of planning or on a MemoryError).
MAX_BOOTSTRAP = 100_000
"""The most bootstrap resamples ``[report] bootstrap`` takes (10,000 already gives stable 95 % intervals)."""
MAX_GRID_SETTINGS = 10_000
"""The most settings one anonymizer's grid may have (the product of its grid's value counts); checked before any
setting is constructed."""
MAX_PLAN_SCORINGS = 200_000
"""The most score computations a plan may hold: repeats × anonymizer settings × selections (per selector: subject
counts × random draws) × (recognizers × scenarios + utility measures). Planning takes a few kB of memory and
some tens of microseconds per task before the first result, and each scoring is a task."""

_KIND_NOUN = {
    "anonymizer": "anonymizer",
    "deanonymizer": "deanonymizer",
    "recognizer": "recognizer",
    "utility": "utility measure",
    "selector": "selector",
    "dataset": "dataset source",
}

_TOP_KEYS = (
    "name", "seed", "repeats", "label", "scenarios", "dataset", "rates", "anonymizers", "deanonymizer",
    "recognizers", "selection", "utility", "report", "run", "attacker_dataset", "attacker_fit", "templates",
)  # fmt: skip
_TOP_SCALARS = ("name", "seed", "repeats", "label", "scenarios", "attacker_fit")
ATTACKER_FITS = ("attacker", "enrolment")
"""``attacker_fit``: the recognizer is fitted on the attacker split (default) or, as SEBA, on the enrolment part
of the selected evaluation subjects in the scenario's training kind."""
_DATASET_KEYS = ("source", "path", "params", "files", "on_bad")
_ATTACKER_DATASET_KEYS = _DATASET_KEYS + ("attributes", "subjects", "subject_prefix")
DATASET_FILE_CHECKS = ("stat", "content")
_RATE_VALUE_KEYS = ("background", "attacker", "evaluation", "enrolment")
_RATE_KEYS = _RATE_VALUE_KEYS + ("stratify",)
#: ``[rates] stratify = "auto"``: the label when it is an attribute, and every attribute a configured method names.
STRATIFY_AUTO = "auto"
#: The name in ``[rates] stratify`` that stands for the config's ``label`` (when that is an attribute).
STRATIFY_LABEL = "label"
_SHARE_KEYS = ("background", "attacker", "evaluation")
_SELECTION_KEYS = ("selectors", "subject_counts", "random_draws")
_RUN_KEYS = ("device", "jobs", "memory", "keep_going")
_REPORT_KEYS = (
    "bootstrap",
    "confidence",
    "per_probe_scores",
    "paper_protocol",
    "reversibility_thresholds",
    "breakdown",
)
BREAKDOWN_AUTO = ("sex", "gender", "subset")
"""The attribute columns ``[report] breakdown = "auto"`` (the default) breaks EER and min Cllr down by: those of
them the data have."""
DEFAULT_REVERSIBILITY = (0.1, 0.5)
_METHOD_KEYS = ("id", "name", "params")
_AUGMENT_KEYS = ("flip", "shift")
_ANONYMIZER_KEYS = ("id", "name", "params", "grid")
_TEMPLATES_KEYS = ("recognizer", "params", "fit", "label")
TEMPLATE_FITS = ("background", "attacker")


# --------------------------------------------------------------------------------------------------- specs


def _registry() -> Registry:
    """The registry ids resolve in: the current run's (:func:`bioanon.context.current_context`)."""
    from ..context import current_context

    return current_context().registry


@attrs.frozen
class MethodSpec:
    """One configured method: canonical ``id``, its fixed ``params`` (completed with the method's defaults),
    the swept parameters ``grid`` (name → values, in the order written) and a display ``name``."""

    id: str
    params: dict[str, Any] = attrs.field(factory=dict)
    grid: dict[str, tuple[Any, ...]] = attrs.field(factory=dict)
    name: str = ""
    cls: type[Method] | None = attrs.field(default=None, eq=False, repr=False, kw_only=True)
    """The method class found at validation (not compared); looked up in the registry when ``None``."""

    def __attrs_post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.id)
        object.__setattr__(self, "grid", {k: tuple(v) for k, v in self.grid.items()})

    def settings(self) -> list[dict[str, Any]]:
        """Every parameter setting: ``params`` merged with each combination of the grid (cartesian product,
        the first grid key varying slowest, values in the order given); ``[params]`` without a grid."""
        if not self.grid:
            return [dict(self.params)]
        keys = list(self.grid)
        return [
            {**self.params, **dict(zip(keys, combo, strict=True))}
            for combo in itertools.product(*(self.grid[k] for k in keys))
        ]

    def method_class(self) -> type[Method]:
        return self.cls if self.cls is not None else _registry().get(self.id)

    def create(self, setting: Mapping[str, Any] | None = None) -> Method:
        """Instantiate the method with ``params`` updated by ``setting`` (a dict from :meth:`settings`, or just
        its grid part). Without a setting, the spec must have no grid."""
        if setting is None:
            if self.grid:
                raise ConfigError(f"{self.name}: sweeps {', '.join(self.grid)}; pass one of settings() to create()")
            setting = {}
        return self.method_class()(**{**self.params, **setting})

    def setting_label(self, setting: Mapping[str, Any]) -> str:
        """The grid part of a setting as text, e.g. ``"sigma=0.5, seed=1"``; ``""`` without a grid."""
        return ", ".join(f"{k}={_label_value(setting[k])}" for k in self.grid if k in setting)

    def to_dict(self, *, grid: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "params": jsonable(self.params)}
        if grid:
            out["grid"] = {k: jsonable(list(v)) for k, v in self.grid.items()}
        return out


@attrs.frozen
class DatasetSpec:
    """The data set: a registered dataset source, its path (``None`` for generators) and its parameters.

    ``files``: how a run recognizes data files it imported before (the imported table is then opened from the
    cache, memory-mapped, without parsing anything): ``"stat"`` (default) by their names, sizes and modification
    times; ``"content"`` by a hash of their bytes (slower; for files rewritten with the same size and time).

    ``on_bad``: what the data checks on import do with bad samples (:mod:`bioanon.sanity`): ``"error"``
    (default) stops with an error naming them, ``"skip"`` drops them with one warning, ``"warn"`` keeps them
    with a warning."""

    source: str
    path: str | None = None
    params: dict[str, Any] = attrs.field(factory=dict)
    files: str = "stat"
    on_bad: str = "error"
    cls: type[Method] | None = attrs.field(default=None, eq=False, repr=False, kw_only=True)

    def create(self) -> DatasetSource:
        cls = self.cls if self.cls is not None else _registry().get(self.source, "dataset")
        return cast(DatasetSource, cls(**self.params))  # a source of kind "dataset"

    def load(self) -> Any:
        """Load the table (``source.load(path)``)."""
        return self.create().load(self.path)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        if self.path is not None:
            out["path"] = self.path
        out["params"] = jsonable(self.params)
        if self.files != "stat":
            out["files"] = self.files
        if self.on_bad != "error":
            out["on_bad"] = self.on_bad
        return out


@attrs.frozen
class AttributeMap:
    """How one attribute of the attacker data set maps onto the evaluated data's label space: its new
    ``name`` (the evaluated data's attribute) and ``values`` (attacker value, as text → evaluated value; values
    not listed are kept as they are)."""

    name: str
    values: dict[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> Any:
        return {"to": self.name, "values": jsonable(self.values)} if self.values else self.name


@attrs.frozen
class AttackerDatasetSpec(DatasetSpec):
    """``[attacker_dataset]``: a second data set whose subjects form the attacker's training set (and database)
    for cross-database protocols; the evaluated ``[dataset]`` then gives only the background and the evaluation
    subjects. Besides a :class:`DatasetSpec`'s keys:

    ``attributes``: attacker attribute → :class:`AttributeMap` (written ``gender = "sex"`` to rename, or
    ``gender = { to = "sex", values = { female = "F", male = "M" } }`` to map values too).
    ``subjects``: the share of the attacker data set's subjects used (drawn per repeat; 1 = all).
    ``subject_prefix``: prepended to the attacker data's subject ids. Ids found in both data sets are an error,
    since the protocol is valid only when attacker and evaluation subjects are different people; give a prefix
    only when the two data sets number different people with the same ids."""

    attributes: dict[str, AttributeMap] = attrs.field(factory=dict)
    subjects: float = 1.0
    subject_prefix: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["attributes"] = {k: m.to_dict() for k, m in self.attributes.items()}
        out["subjects"] = self.subjects
        if self.subject_prefix:
            out["subject_prefix"] = self.subject_prefix
        return out


@attrs.frozen
class Rates:
    """Shares of subjects (background, attacker, evaluation; they sum to 1) and the share of each evaluation
    subject's samples used for enrolment. ``background = 0`` means no background: the background part is
    empty and every anonymizer is fitted on the set it anonymizes (the attacker and evaluation sets each on
    their own, as ``fit_transform(table)`` does). A config may give ``background`` and ``attacker`` only (SEBA's
    form): ``evaluation`` is then the rest, 1 − background − attacker.

    With ``[attacker_dataset]`` the attacker set is that other data set: ``attacker`` is 0 (omit it or write
    0), background + evaluation sum to 1 (default 0.2 / 0.8) and divide the evaluated data set.

    ``stratify``: attribute names (``"label"`` for the config's label when that is an attribute) by which the
    subject split is stratified (:meth:`~bioanon.table.SampleTable.split_subjects`), or ``"auto"``: the label
    when it is an attribute and every attribute a configured method names (:func:`stratify_columns`); empty
    (default): the plain split."""

    background: float = DEFAULT_RATES["background"]
    attacker: float = DEFAULT_RATES["attacker"]
    evaluation: float = DEFAULT_RATES["evaluation"]
    enrolment: float = DEFAULT_RATES["enrolment"]
    stratify: tuple[str, ...] | str = ()
    #: how the subject shares become subject counts: ``"largest_remainder"`` (bioanon) or ``"seba"`` (SEBA's
    #: truncation ``int(N * share)`` of background and attacker, the rest evaluated; set by ``bioanon import seba``)
    rounding: str = "largest_remainder"


@attrs.frozen
class SelectionSpec:
    """Subject selection: the selectors, the selection sizes (decreasing; empty = all evaluation subjects)
    and how often selectors with id ``any.select_random`` are drawn."""

    selectors: tuple[MethodSpec, ...]
    subject_counts: tuple[int, ...] = ()
    random_draws: int = DEFAULT_RANDOM_DRAWS


@attrs.frozen
class ReportSpec:
    bootstrap: int = DEFAULT_REPORT["bootstrap"]
    confidence: float = DEFAULT_REPORT["confidence"]
    per_probe_scores: bool = DEFAULT_REPORT["per_probe_scores"]
    paper_protocol: str = ""  # attribute of interest: also report the utility-preserving anonymization paper §5.1.3
    reversibility_thresholds: tuple[float, float] = (0.1, 0.5)  # categories (ours, configurable)
    # attribute columns whose groups get their own EER and min Cllr; "auto": those of BREAKDOWN_AUTO in the data
    breakdown: str | tuple[str, ...] = "auto"


@attrs.frozen
class RunSpec:
    """How the run executes (not what it computes): ``device`` is the torch device of every torch-backed method
    whose own ``device`` parameter is ``""`` — ``""`` here means unset (``BIOANON_DEVICE``, else ``auto``);
    ``--device`` on the command line overrides it (see :mod:`bioanon.device`). ``jobs``: worker processes of the
    local executor (0 = unset: ``BIOANON_JOBS``, else every usable core; ``--jobs`` overrides it). ``memory``:
    the memory the run's working arrays may use, shared by its workers (``""`` = half the machine's; a byte count,
    ``"8 GB"``, ``"512 MiB"`` or ``"25%"``): it sizes the blocks that score matrices are computed and read in,
    and never changes a result. ``keep_going``: what a failed task does to the run (``keep_going`` of
    :func:`~bioanon.evaluation.run.evaluate`, which ``--keep-going`` / ``--no-keep-going`` override): ``true``
    finishes everything that does not depend on it, ``false`` stops the run there, unset (None) stops it unless
    the failure is a data problem of one setting (:func:`~bioanon.executors.stops_run`), which fails that
    setting's tasks only."""

    device: str = ""
    jobs: int = 0
    memory: str = ""
    keep_going: bool | None = None


#: ``[run] memory`` when unset: the share of the machine's memory a run may use for its working arrays.
DEFAULT_MEMORY_SHARE = 0.5
_MEMORY_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20}
_MEMORY_UNITS.update({"gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40})
#: The smallest memory budget a run accepts (below it the block sizes become absurd).
MIN_MEMORY = 64 * 2**20


def parse_memory(text: Any, total: int) -> int:
    """Bytes of a ``[run] memory`` setting: a byte count, a size with a unit (``"8 GB"``, ``"512MiB"``) or a
    share of the machine's ``total`` memory (``"25%"``); ``""`` = :data:`DEFAULT_MEMORY_SHARE` of it. ConfigError
    with the reason on anything else."""
    if _is_int(text):
        return int(text)
    if not isinstance(text, str):
        raise ConfigError(f'expected a size such as "8 GB", "512 MiB" or "50%", {_got(text)}')
    t = text.strip().lower().replace(" ", "")
    if not t:
        return int(DEFAULT_MEMORY_SHARE * total)
    if t.endswith("%"):
        share = float(t[:-1]) if t[:-1].replace(".", "", 1).isdigit() else math.nan
        if not 0 < share <= 100:
            raise ConfigError(f"expected a share of the machine's memory in (0, 100] %, got {text!r}")
        return int(share / 100 * total)
    number = t.rstrip("kmgtib")
    unit = t[len(number) :]
    if unit not in _MEMORY_UNITS or not number.replace(".", "", 1).isdigit():
        raise ConfigError(f'expected a size such as "8 GB", "512 MiB" or "50%", got {text!r}')
    return int(float(number) * _MEMORY_UNITS[unit])


def machine_memory() -> int:
    """The machine's physical memory in bytes (8 GiB where it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


@attrs.frozen
class AugmentSpec:
    """``[deanonymizer] augment``: augmented copies of the attacker's clear images (a horizontal ``flip``; four
    ``shift`` s of that many pixels, edges repeated), anonymized by the evaluated anonymizer and added to the
    de-anonymizer's training pairs (:mod:`bioanon.augment`). Only for image payloads."""

    flip: bool = False
    shift: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"flip": self.flip, "shift": self.shift}


@attrs.frozen
class TemplatesSpec:
    """The ``[templates]`` stage: after the subject split and before anonymization, the template extractor
    ``recognizer`` (a recognizer that embeds: ``has_embedding``) is fitted on the ``fit`` part for ``label`` and
    every part, the clear data included, becomes its templates (payload ``features``), so the protections
    (anonymizers) and the attackers work on templates.

    ``fit = "background"`` (default): the data owner's extractor, trained on subjects that are neither the
    attacker's nor evaluated (needs ``rates.background > 0``); ``"attacker"``: trained on the attacker's
    subjects (an extractor the attacker could have trained too)."""

    recognizer: MethodSpec
    fit: str = "background"
    label: str = "subject"

    def to_dict(self) -> dict[str, Any]:
        return {
            "recognizer": self.recognizer.id,
            "params": jsonable(self.recognizer.params),
            "fit": self.fit,
            "label": self.label,
        }


@attrs.frozen
class EvalConfig:
    """A validated, resolved evaluation config (see :func:`load_config`)."""

    name: str
    seed: int
    repeats: int
    label: str
    dataset: DatasetSpec
    rates: Rates
    anonymizers: tuple[MethodSpec, ...]
    deanonymizer: MethodSpec | None
    recognizers: tuple[MethodSpec, ...]
    scenarios: tuple[str, ...]
    selection: SelectionSpec
    utility: tuple[MethodSpec, ...]
    report: ReportSpec
    run: RunSpec = RunSpec()
    attacker_dataset: AttackerDatasetSpec | None = None
    attacker_fit: str = "attacker"  # ATTACKER_FITS
    templates: TemplatesSpec | None = None
    augment: AugmentSpec | None = None
    """``[deanonymizer] augment`` (None: the attacker's pairs as they are)."""

    def all_scenarios(self) -> tuple[str, ...]:
        """The listed scenarios plus the levels always reported (``clear``, ``chance``)."""
        return ALWAYS_SCENARIOS + self.scenarios

    def to_dict(self) -> dict[str, Any]:
        """The resolved config as a JSON-able dict (every default filled in, method parameters completed);
        ``load_config(cfg.to_dict()) == cfg``."""
        out: dict[str, Any] = {
            "name": self.name,
            "seed": self.seed,
            "repeats": self.repeats,
            "label": self.label,
            "scenarios": list(self.scenarios),
            "attacker_fit": self.attacker_fit,
            "dataset": self.dataset.to_dict(),
            "rates": {  # stratify below when asked; rounding only when not the default (configs keep their dict)
                k: v
                for k, v in attrs.asdict(self.rates).items()
                if k != "stratify" and (k != "rounding" or v != "largest_remainder")
            },
            "anonymizers": [a.to_dict() for a in self.anonymizers],
        }
        if self.rates.stratify:  # only when asked, so that the configs (and digests) of other runs stay the same
            stratify = self.rates.stratify
            out["rates"]["stratify"] = stratify if isinstance(stratify, str) else list(stratify)
        if self.deanonymizer is not None:
            out["deanonymizer"] = self.deanonymizer.to_dict(grid=False)
            if self.augment is not None:
                out["deanonymizer"]["augment"] = self.augment.to_dict()
        out["recognizers"] = [r.to_dict(grid=False) for r in self.recognizers]
        out["selection"] = {
            "selectors": [s.to_dict(grid=False) for s in self.selection.selectors],
            "subject_counts": list(self.selection.subject_counts),
            "random_draws": self.selection.random_draws,
        }
        out["utility"] = [u.to_dict(grid=False) for u in self.utility]
        out["report"] = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(self.report).items()}
        out["run"] = {k: v for k, v in attrs.asdict(self.run).items() if k != "keep_going" or v is not None}
        if self.attacker_dataset is not None:  # beside [dataset]
            items = list(out.items())
            i = list(out).index("dataset") + 1
            out = dict(items[:i] + [("attacker_dataset", self.attacker_dataset.to_dict())] + items[i:])
        if self.templates is not None:
            out["templates"] = self.templates.to_dict()
        return out

    def to_toml(self) -> str:
        """The resolved config as TOML (``load_config`` reads it back to an equal config).

        TOML has no null: a parameter whose value is ``None`` is left out, which reads back the same when
        ``None`` is that parameter's default; otherwise ValueError (store :meth:`to_dict` as JSON instead)."""
        return _to_toml(self)


# --------------------------------------------------------------------------------------------------- loading


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any] | EvalConfig,
    *,
    registry: Registry | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    check_paths: bool = True,
) -> EvalConfig:
    """Read and validate an evaluation config.

    Parameters
    ----------
    source : the path of a ``.toml`` file, or the config as a dict (e.g. ``EvalConfig.to_dict()``); an
        ``EvalConfig`` is returned as it is.
    registry : the method registry to resolve ids in (default: the current run's,
        :func:`bioanon.context.current_context`).
    base_dir : directory a relative ``dataset.path`` is resolved against (default: the TOML file's
        directory; for a dict, the current directory). The path is stored absolute.
    check_paths : report a ``dataset.path`` that does not exist.

    Raises
    ------
    ConfigError : listing every problem found, one per line, each prefixed by its key path.
    """
    where = "<dict>"
    if isinstance(source, EvalConfig):
        return source
    if isinstance(source, Mapping):
        raw: Any = source
    elif isinstance(source, (str, os.PathLike)):
        file = Path(source)
        where = str(file)
        raw = read_toml(file)
        if base_dir is None:
            base_dir = file.resolve().parent
    else:
        raise ConfigError(f"load_config() takes a path or a mapping, got {type(source).__name__}")
    v = _Validator(registry if registry is not None else _registry(), base_dir, check_paths)
    config = v.config(raw)
    if v.problems:
        n = len(v.problems)
        _raise(v.problems, f"invalid evaluation config {where} ({n} problem{'s' if n > 1 else ''})")
    assert config is not None
    return config


def read_toml(file: str | os.PathLike[str]) -> dict[str, Any]:
    """A config file's TOML as a dict. The file is UTF-8, with or without the byte-order mark that some editors
    write at its start.

    Raises
    ------
    ConfigError : naming the file (and line) when it is missing, a folder, unreadable, not UTF-8, not valid
        TOML, or nested too deeply to read.
    """
    file = Path(file)
    header = f"invalid evaluation config {file}"
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        _raise([f"{file}: no such config file"], header)
    except IsADirectoryError:
        _raise([f"{file}: is a directory, not a config file"], header)
    except OSError as exc:
        _raise([f"{file}: cannot read: {exc}"], header)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        _raise([f"{file}: is UTF-16 text; save it as UTF-8"], header)
    try:
        text = data.decode("utf-8-sig")  # "-sig": without a byte-order mark at the start
    except UnicodeDecodeError as exc:
        _raise([f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"], header)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        _raise([f"{file}: invalid TOML: {exc}"], header)
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        _raise([_too_deep(file, text)], header)


def _too_deep(file: Path, text: str) -> str:
    """The problem line of a TOML text nested too deeply to parse: the file, and the line and key of the first
    deep run of ``[`` / ``{`` (inline tables' keys between them allowed), when one is found."""
    m = re.search(r"(?:[\[{](?:\s*[\w\-\"'.]+\s*=)?\s*){64,}", text)
    if m is None:
        return f"{file}: invalid TOML: arrays or inline tables nested too deeply to read"
    line_no = text.count("\n", 0, m.start()) + 1
    line = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
    key = line.split("=", 1)[0].strip() if "=" in line else ""
    depth = m.group().count("[") + m.group().count("{")
    what = f"the value of {key!r}" if key else "a value"
    return f"{file}:{line_no}: invalid TOML: {what} is nested too deeply to read ({depth} levels of arrays or tables)"


def _raise(problems: list[str], header: str) -> NoReturn:
    err = ConfigError(header + ":\n" + "\n".join("  " + p for p in problems))
    err.problems = list(problems)  # type: ignore[attr-defined]
    raise err


def raise_problems(problems: list[str], header: str) -> None:
    """Raise one ConfigError listing ``problems`` (nothing when there are none)."""
    if problems:
        n = len(problems)
        _raise(problems, f"{header} ({n} problem{'s' if n > 1 else ''})")


def fit_defined_anonymizers(anonymizers: Iterable[MethodSpec | None]) -> list[tuple[int, MethodSpec]]:
    """``(index, spec)`` of the configured anonymizers of which some setting has output columns chosen by its
    fit (:attr:`~bioanon.methods.Anonymizer.fit_defines_columns`, answered per setting by
    :meth:`~bioanon.methods.Anonymizer.defines_columns_by_fit`; ``None`` entries, which failed validation, are
    skipped)."""
    out = []
    for i, spec in enumerate(anonymizers):
        if spec is None:
            continue
        cls = spec.method_class()
        if cls.kind == "anonymizer" and any(
            cast("type[Anonymizer]", cls).defines_columns_by_fit(setting) for setting in spec.settings()
        ):
            out.append((i, spec))
    return out


def _shown(spec: MethodSpec) -> str:
    return spec.id if spec.name == spec.id else f"{spec.id} ({spec.name!r})"


def _background_fit_problems(
    anonymizers: Iterable[MethodSpec | None], background: float, cross: bool
) -> list[tuple[str, str]]:
    """``(key path, message)`` of every anonymizer that ``background = 0`` under ``[attacker_dataset]`` would fit
    apart on the attacker data and on the evaluated data although its output columns depend on the fit."""
    if background != 0 or not cross:
        return []
    return [
        (
            f"anonymizers[{i}]",
            f"{_shown(spec)} is fitted on the background and its output columns depend on that fit, but "
            "[rates] background = 0 under [attacker_dataset] fits it apart on the attacker data set and on the "
            "evaluated data, whose outputs then keep different columns that do not line up (the attacker's "
            "classifiers fall below chance, which reads as protection); give a background share > 0 (e.g. 0.2: "
            "[rates] background = 0.2, evaluation = 0.8) so that it is fitted once on the background and "
            "applied identically to every set",
        )
        for i, spec in fit_defined_anonymizers(anonymizers)
    ]


def background_fit_problems(cfg: EvalConfig) -> list[str]:
    """The anonymizers of ``cfg`` whose output columns their fit chooses (``any.ive``, ``any.pfrnet``, a chain
    with one of them, a plugin's method declaring :attr:`~bioanon.methods.Anonymizer.fit_defines_columns`)
    under ``[rates] background = 0`` and ``[attacker_dataset]``: one line each, naming the fix. :func:`load_config`
    reports them; ``bioanon validate`` and :func:`~bioanon.evaluation.run.evaluate` check an already validated
    :class:`EvalConfig` again before any work."""
    problems = _background_fit_problems(cfg.anonymizers, cfg.rates.background, cfg.attacker_dataset is not None)
    return [f"{path}: {message}" for path, message in problems]


def stratify_columns(cfg: EvalConfig) -> tuple[str, ...]:
    """The attribute columns the subject split of ``cfg`` is stratified by: ``[rates] stratify`` with ``"label"``
    replaced by the config's label; ``"auto"``: the label when it is an attribute (an identity label needs no
    stratification: the split is subject-disjoint) and every attribute a configured method names through its
    :attr:`~bioanon.methods.Method.attribute_params` (anonymizers, de-anonymizer, recognizers, selectors, utility
    measures and the template extractor, in that order; every grid value). Empty: the plain split."""
    stratify = cfg.rates.stratify
    if not stratify:
        return ()
    if stratify != STRATIFY_AUTO:
        return tuple(dict.fromkeys(cfg.label if name == STRATIFY_LABEL else name for name in stratify))
    names = [cfg.label] if cfg.label != "subject" else []
    specs: list[tuple[str, MethodSpec | None]] = [(f"anonymizers[{i}]", s) for i, s in enumerate(cfg.anonymizers)]
    specs += [("deanonymizer", cfg.deanonymizer)] + [(f"recognizers[{i}]", s) for i, s in enumerate(cfg.recognizers)]
    specs += [(f"selection.selectors[{i}]", s) for i, s in enumerate(cfg.selection.selectors)]
    specs += [(f"utility[{i}]", s) for i, s in enumerate(cfg.utility)]
    if cfg.templates is not None:
        specs.append(("templates", cfg.templates.recognizer))
    names += [name for path, spec in specs if spec is not None for _, name in _used(path, spec)]
    return tuple(n for n in dict.fromkeys(names) if n != "subject")


def _got(value: Any) -> str:
    return f"got {value!r} ({type(value).__name__})"


def _is_int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeio" else "a ") + noun  # "a utility measure"


#: Attribute names often written for another one: a name → the columns to suggest instead, where the data set has
#: them (``label = "sex"`` on a source whose column is ``gender``).
COLUMN_SYNONYMS: dict[str, tuple[str, ...]] = {
    "sex": ("gender",),
    "gender": ("sex",),
    "age": ("age_group",),
    "age_group": ("age",),
    "transcript": ("text",),
    "text": ("transcript",),
    "speaker": ("subject",),
    "identity": ("subject",),
    "user": ("subject",),
}


def column_suggestion(name: str, columns: Iterable[str]) -> str | None:
    """The column of ``columns`` that ``name`` most likely means: the same name in another case (``male`` →
    ``Male``), a synonym (:data:`COLUMN_SYNONYMS`: ``sex`` → ``gender``) or the closest spelling (difflib); None
    when none is close."""
    cols = list(columns)
    by_case = {c.lower(): c for c in cols}
    if name.lower() in by_case:
        return by_case[name.lower()]
    for other in COLUMN_SYNONYMS.get(name.lower(), ()):
        if other in by_case:
            return by_case[other]
    close = difflib.get_close_matches(name, cols, n=1, cutoff=0.6)
    return close[0] if close else None


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    options = list(options)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return "allowed: " + ", ".join(options)


class _Validator:
    def __init__(self, registry: Registry, base_dir: str | os.PathLike[str] | None, check_paths: bool) -> None:
        self.registry = registry
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.check_paths = check_paths
        self.problems: list[str] = []
        self.resolved: dict[str, type[Method]] = {}  # key path -> method class, for the suitability checks

    def add(self, path: str, message: str) -> None:
        line = f"{path}: {message}"
        if line not in self.problems:
            self.problems.append(line)

    # -- generic checks --------------------------------------------------------------------------------
    def table(
        self, raw: Any, path: str, keys: tuple[str, ...], *, method: type[Method] | None = None
    ) -> dict[str, Any]:
        """A table (dict) with only ``keys``; unknown keys are reported (the table is returned without them)."""
        if not isinstance(raw, Mapping):
            self.add(path, f"expected a table, {_got(raw)}")
            return {}
        out: dict[str, Any] = {}
        for k, value in raw.items():
            if k in keys:
                out[k] = value
                continue
            key_path = f"{path}.{k}" if path else str(k)
            params = [f.name for f in method.param_fields()] if method is not None else []
            if k in params:
                self.add(key_path, f"unknown key; method parameters go in params (params.{k} = ...)")
            elif path and k in _TOP_SCALARS:
                self.add(
                    key_path,
                    f"unknown key; {k!r} is a top-level key: in TOML, top-level keys must come before the first "
                    "[table] header",
                )
            else:
                self.add(key_path, f"unknown key; {_did_you_mean(str(k), keys)}")
        return out

    def integer(
        self, raw: dict[str, Any], key: str, path: str, default: int, low: int, high: int | None = None, why: str = ""
    ) -> int:
        """``raw[key]`` (``default`` when absent), an integer in [low, high]; else a problem at ``path`` (``why``:
        the reason for ``high``, said with it)."""
        value = raw.get(key, default)
        if not _is_int(value) or value < low:
            self.add(path, f"expected an integer ≥ {low}, {_got(value)}")
            return default
        if high is not None and value > high:
            self.add(path, f"expected an integer in [{low}, {high:,}]{why}, {_got(value)}")
            return default
        return value

    def number(self, raw: dict[str, Any], key: str, path: str, default: float, low: float, high: float) -> float:
        value = raw.get(key, default)
        if not _is_number(value) or not low < value < high:
            self.add(path, f"expected a number in ({low:g}, {high:g}), {_got(value)}")
            return default
        return float(value)

    def string(self, raw: dict[str, Any], key: str, path: str, default: str | None) -> str | None:
        value = raw.get(key, default)
        if not isinstance(value, str) or not value.strip():
            self.add(path, f"expected a non-empty string, {_got(value)}")
            return default
        return value

    def boolean(self, raw: dict[str, Any], key: str, path: str, default: bool) -> bool:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            self.add(path, f"expected true or false, {_got(value)}")
            return default
        return value

    def table_list(self, raw: Any, path: str, required: bool) -> list[Any]:
        if raw is None:
            if required:
                self.add(path, f"missing required key (at least one [[{path}]] table)")
            return []
        if isinstance(raw, Mapping):
            self.add(path, f"expected a list of tables, got a single table: write [[{path}]], not [{path}]")
            return []
        if not isinstance(raw, list):
            self.add(path, f"expected a list of tables ([[{path}]]), {_got(raw)}")
            return []
        if required and not raw:
            self.add(path, f"expected at least one [[{path}]] table, got an empty list")
        return raw

    # -- the config ------------------------------------------------------------------------------------
    def config(self, raw_any: Any) -> EvalConfig | None:
        raw = self.table(raw_any, "", _TOP_KEYS)
        if not isinstance(raw_any, Mapping):
            return None
        name = self.string(raw, "name", "name", DEFAULT_NAME)
        if name and re.search(r"[/\\\x00]", name):
            self.add("name", f"expected a name without path separators, {_got(name)}")
        seed = self.integer(raw, "seed", "seed", 0, 0)
        repeats = self.integer(raw, "repeats", "repeats", 1, 1)
        label = self.string(raw, "label", "label", "subject")
        dataset = self.dataset(raw.get("dataset"))
        attacker_dataset = self.attacker_dataset(raw.get("attacker_dataset"))
        if "attacker_dataset" in raw:
            rates = self.cross_rates(raw.get("rates", {}))
        else:
            rates = self.rates(raw.get("rates", {}))
        anonymizers = self.methods(raw.get("anonymizers"), "anonymizers", "anonymizer", required=True, grid=True)
        self.unique_names(anonymizers, "anonymizers")
        for path, message in _background_fit_problems(anonymizers, rates.background, "attacker_dataset" in raw):
            self.add(path, message)
        deanonymizer, augment = None, None
        if "deanonymizer" in raw:
            raw_de = raw["deanonymizer"]
            if isinstance(raw_de, Mapping) and "augment" in raw_de:
                augment = self.augment(raw_de["augment"], raw)
                raw_de = {k: v for k, v in raw_de.items() if k != "augment"}
            deanonymizer = self.method(raw_de, "deanonymizer", "deanonymizer")
        recognizers = self.methods(raw.get("recognizers"), "recognizers", "recognizer", required=True)
        self.unique_names(recognizers, "recognizers")
        scenarios = self.scenarios(raw, "deanonymizer" in raw)
        attacker_fit = raw.get("attacker_fit", "attacker")
        if attacker_fit not in ATTACKER_FITS:
            self.add(
                "attacker_fit",
                f"expected 'attacker' (fit on the attacker split) or 'enrolment' (SEBA: fit on "
                f"the enrolment part of the selected subjects), {_got(attacker_fit)}",
            )
        elif attacker_fit == "enrolment" and "attacker_dataset" in raw:
            self.add(
                "attacker_fit",
                "'enrolment' fits the attacker on the evaluated subjects' enrolment part, so "
                "[attacker_dataset] would train no attacker: remove one of them",
            )
        selection = self.selection(raw.get("selection", {}), _declared_subjects(dataset), rates)
        utility = self.methods(raw.get("utility"), "utility", "utility", required=False)
        self.unique_names(utility, "utility")
        report = self.report(raw.get("report", {}))
        run = self.run(raw.get("run", {}))
        templates = self.templates(raw["templates"], rates) if "templates" in raw else None
        if not self.problems:
            self.plan_size(anonymizers, recognizers, scenarios, selection, utility, repeats)
        self.suitability()
        method_specs = [(f"anonymizers[{i}]", s) for i, s in enumerate(anonymizers)]
        method_specs += [("deanonymizer", deanonymizer)] + [(f"recognizers[{i}]", s) for i, s in enumerate(recognizers)]
        method_specs += [
            (f"selection.selectors[{i}]", s) for i, s in enumerate(selection.selectors if selection else ())
        ]
        method_specs += [(f"utility[{i}]", s) for i, s in enumerate(utility)]
        used: list[tuple[str, str | None]] = [
            ("label", label),
            ("templates.label", templates.label if templates else None),
        ]
        used += [("report.paper_protocol", report.paper_protocol)]
        used += [("report.breakdown", c) for c in (() if report.breakdown == "auto" else report.breakdown)]
        used += [(where, name) for path, spec in method_specs if spec is not None for where, name in _used(path, spec)]
        if templates is not None:
            used += _used("templates", templates.recognizer)
        used += self.stratify_names(rates.stratify, label)
        self.attribute_columns(used, attacker_dataset, label)
        if self.problems:
            return None
        return EvalConfig(
            name=name,  # type: ignore[arg-type]
            seed=seed,
            repeats=repeats,
            label=label,  # type: ignore[arg-type]
            dataset=dataset,  # type: ignore[arg-type]
            rates=rates,
            anonymizers=tuple(anonymizers),  # type: ignore[arg-type]
            deanonymizer=deanonymizer,
            recognizers=tuple(recognizers),  # type: ignore[arg-type]
            scenarios=scenarios,
            selection=selection,  # type: ignore[arg-type]
            utility=tuple(utility),  # type: ignore[arg-type]
            report=report,
            run=run,
            attacker_dataset=attacker_dataset,
            attacker_fit=attacker_fit,
            templates=templates,
            augment=augment,
        )

    def augment(self, raw_any: Any, raw: Mapping[str, Any]) -> AugmentSpec | None:
        """``[deanonymizer] augment = {flip = true, shift = 2}``: checked keys and values (a shift below a
        quarter of the image is checked against the data, :func:`~bioanon.evaluation.checks.data_problems`);
        refused for data sources that declare no image payload and with ``[templates]``. No copy at all
        (``{}``, ``flip = false, shift = 0``) is None."""
        from ..augment import AUGMENTABLE_PAYLOADS

        path = "deanonymizer.augment"
        if not isinstance(raw_any, Mapping):
            self.add(path, f"expected a table such as {{flip = true, shift = 2}}, {_got(raw_any)}")
            return None
        table = self.table(raw_any, path, _AUGMENT_KEYS)
        flip = self.boolean(table, "flip", f"{path}.flip", False)
        shift = self.integer(table, "shift", f"{path}.shift", 0, 0)
        if "templates" in raw:
            self.add(
                path, "[templates] turns the images into templates before any protection: nothing to flip or shift"
            )
        for key in ("dataset", "attacker_dataset"):
            source = self.resolved.get(f"{key}.source")
            declared = tuple(getattr(source, "payloads", ()) or ())
            if declared and not set(declared) & set(AUGMENTABLE_PAYLOADS):
                self.add(
                    path,
                    f"flips and shifts need image payloads ({', '.join(AUGMENTABLE_PAYLOADS)}), but the {key} "
                    f"source {source.id} gives {', '.join(declared)}: remove augment",  # type: ignore[union-attr]
                )
        if not flip and shift == 0:
            return None
        return AugmentSpec(flip=flip, shift=shift)

    def templates(self, raw_any: Any, rates: Rates) -> TemplatesSpec | None:
        """The ``[templates]`` table: a recognizer that embeds, its params, the part it is fitted on."""
        raw = self.table(raw_any, "templates", _TEMPLATES_KEYS)
        if not isinstance(raw_any, Mapping):
            return None
        if "recognizer" not in raw:
            self.add(
                "templates.recognizer",
                "missing required key (the id of a recognizer that embeds, e.g. gait.cnn or any.lda_cosine)",
            )
            return None
        fit = raw.get("fit", "background")
        if fit not in TEMPLATE_FITS:
            self.add("templates.fit", f"expected one of {', '.join(TEMPLATE_FITS)}, {_got(fit)}")
            fit = "background"
        elif fit == "background" and rates.background == 0:
            self.add(
                "templates.fit",
                "'background' needs a background part: rates.background is 0; set it > 0 or fit = \"attacker\"",
            )
        label = self.string(raw, "label", "templates.label", "subject")
        spec = self.method(
            {"id": raw["recognizer"], "params": raw.get("params", {})}, "templates", "recognizer", bare=True
        )
        if spec is None:
            return None
        if not cast("type[Recognizer]", spec.method_class()).has_embedding:  # kind "recognizer"
            self.add(
                "templates.recognizer",
                f"{spec.id} has no embedding (has_embedding is false) and cannot "
                "extract templates; use a recognizer that embeds",
            )
            return None
        return TemplatesSpec(spec, fit, label or "subject")

    def run(self, raw_any: Any) -> RunSpec:
        from ..device import check_device_text

        raw = self.table(raw_any, "run", _RUN_KEYS)
        device = raw.get("device", "")
        if not check_device_text(device):
            self.add("run.device", f"expected auto, cpu, cuda, cuda:N or mps, {_got(device)}")
            device = ""
        jobs = raw.get("jobs", 0)
        if not _is_int(jobs) or jobs < 0:
            self.add("run.jobs", f"expected a number of worker processes (0 = every core), {_got(jobs)}")
            jobs = 0
        memory = raw.get("memory", "")
        try:
            if parse_memory(memory, machine_memory()) < MIN_MEMORY:
                self.add("run.memory", f"expected at least 64 MiB, {_got(memory)}")
                memory = ""
        except ConfigError as e:
            self.add("run.memory", str(e))
            memory = ""
        keep_going = raw.get("keep_going")
        if keep_going is not None and not isinstance(keep_going, bool):
            self.add(
                "run.keep_going",
                f"expected true (finish what does not depend on a failed task) or false (stop at the first "
                f"failure); leave it out to stop unless a setting fails on its data, {_got(keep_going)}",
            )
            keep_going = None
        memory = str(memory) if _is_int(memory) else memory
        return RunSpec(device=device, jobs=jobs, memory=memory, keep_going=keep_going)

    def suitability(self) -> None:
        """Every method suits the data set's trait (a trait method on another trait's data fails), and every
        optional package a method declares in ``requires`` can be imported (also for entries whose parameters
        have problems: every problem is listed at once)."""
        source = self.resolved.get("dataset.source")
        for where, cls in self.resolved.items():
            if source is not None and source.trait != "any" and cls.trait not in ("any", source.trait):
                self.add(
                    where,
                    f"{cls.id} is {_a(cls.trait)} method, but the data set {source.id} holds "
                    f"{source.trait} data; use {source.trait}.* or any.* methods "
                    f"(`bioanon methods '{source.trait}.*' 'any.*' --kind {cls.kind}`)",
                )
            self.requirements(cls, where)

    def attribute_columns(
        self, used: list[tuple[str, str | None]], attacker: AttackerDatasetSpec | None, label: str | None
    ) -> None:
        """Every attribute name the config uses (``used``: key path, name) is a column the data set's source
        declares (:attr:`~bioanon.methods.DatasetSource.attribute_names`), and the attacker data set's declared
        columns give the mapping's columns and, after it, the label. A source that declares none is checked once
        its data are loaded (``bioanon validate --data``, the start of a run)."""
        source = cast("type[DatasetSource] | None", self.resolved.get("dataset.source"))
        if source is not None and source.attribute_names is not None:
            declared = source.attribute_names
            for where, name in used:
                if not name or name == "subject" or name in declared:
                    continue
                options = [*declared, "subject"] if where.endswith("label") else list(declared)
                hint = column_suggestion(name, options)
                self.add(
                    where,
                    f"the data set {source.id} has no attribute column {name!r}; its attribute columns: "
                    f"{', '.join(declared) or 'none'}" + (f"; did you mean {hint!r}?" if hint else ""),
                )
        theirs = cast("type[DatasetSource] | None", self.resolved.get("attacker_dataset.source"))
        if attacker is None or theirs is None or theirs.attribute_names is None:
            return
        columns = theirs.attribute_names
        for col in attacker.attributes:
            if col not in columns:
                hint = column_suggestion(col, columns)
                self.add(
                    f"attacker_dataset.attributes.{col}",
                    f"the attacker data set {theirs.id} has no attribute column {col!r}; its attribute columns: "
                    f"{', '.join(columns) or 'none'}" + (f"; did you mean {hint!r}?" if hint else ""),
                )
        mapped = [c for c in columns if c not in attacker.attributes] + [m.name for m in attacker.attributes.values()]
        if label and label != "subject" and label not in mapped:
            hint = column_suggestion(label, [c for c in columns if c not in attacker.attributes])
            self.add(
                "attacker_dataset",
                f"the attacker data set {theirs.id} has no attribute column {label!r} (the evaluation's label) after "
                f"the mapping; its attribute columns: {', '.join(mapped) or 'none'}; map one onto it with "
                f'attacker_dataset.attributes = {{ {hint or "<column>"} = "{label}" }}',
            )

    def stratify_names(self, stratify: tuple[str, ...] | str, label: str | None) -> list[tuple[str, str]]:
        """``(key path, attribute name)`` of the names in ``[rates] stratify`` to check against the data set's
        columns; ``"subject"``, and ``"label"`` beside ``label = "subject"``, are reported here."""
        out: list[tuple[str, str]] = []
        for i, name in enumerate(() if isinstance(stratify, str) else stratify):
            where = f"rates.stratify[{i}]"
            if name == "subject" or (name == STRATIFY_LABEL and label == "subject"):
                self.add(
                    where,
                    f"{name!r} names the subject"
                    + (" (the label)" if name == STRATIFY_LABEL else "")
                    + ": the split is subject-disjoint, so every subject is in one part and there is nothing to "
                    "stratify; name attribute columns (e.g. gender), or set label to an attribute to stratify by it",
                )
            elif name != STRATIFY_LABEL:
                out.append((where, name))
        return out

    def requirements(self, cls: type[Method], where: str) -> None:
        missing = cls.missing_requirements()
        if missing:
            installs = " ; ".join(dict.fromkeys(missing.values()))
            self.add(where, f"{cls.id} needs {', '.join(missing)}, which cannot be imported here: {installs}")

    def dataset(
        self, raw_any: Any, where: str = "dataset", keys: tuple[str, ...] = _DATASET_KEYS
    ) -> DatasetSpec | None:
        """Validate a data set table (``[dataset]``, or ``[attacker_dataset]`` with ``where`` and its ``keys``)."""
        if raw_any is None:
            self.add(f"{where}.source", f"missing required key (the [{where}] table names a dataset source)")
            return None
        if not isinstance(raw_any, Mapping):
            self.add(where, f"expected a table, {_got(raw_any)}")
            return None
        if "source" not in raw_any:
            self.add(f"{where}.source", "missing required key (a registered dataset source id)")
            cls = None
        else:
            cls = self.resolve(raw_any["source"], f"{where}.source", "dataset")
        raw = self.table(raw_any, where, keys, method=cls)
        params = self.params_table(raw.get("params", {}), f"{where}.params")
        path = raw.get("path")
        if path is not None and not isinstance(path, (str, os.PathLike)):
            self.add(f"{where}.path", f"expected a path (string), {_got(path)}")
            path = None
        if cls is None:
            return None
        if cls.needs_path and path is None:  # type: ignore[attr-defined]
            self.add(f"{where}.path", f"missing required key: {cls.id} reads a data set from disk; give its path")
        elif not cls.needs_path and path is not None:  # type: ignore[attr-defined]
            self.add(f"{where}.path", f"not allowed: {cls.id} generates its data and takes no path")
            path = None
        if path is not None:
            p = Path(path).expanduser()
            if not p.is_absolute():
                p = (self.base_dir if self.base_dir is not None else Path.cwd()) / p
            p = Path(os.path.normpath(p.absolute()))
            if self.check_paths and not p.exists():
                self.add(f"{where}.path", f"no such file or directory: {str(p)!r}")
            path = str(p)
        files = raw.get("files", "stat")
        if files not in DATASET_FILE_CHECKS:
            self.add(f"{where}.files", f"expected one of {', '.join(DATASET_FILE_CHECKS)}, {_got(files)}")
            files = "stat"
        on_bad = raw.get("on_bad", "error")
        if on_bad not in ON_BAD:
            self.add(f"{where}.on_bad", f"expected one of {', '.join(ON_BAD)}, {_got(on_bad)}")
            on_bad = "error"
        resolved = self.construct(cls, params, {}, where)
        if resolved is None:
            return None
        return DatasetSpec(cls.id, path, resolved[0], files, on_bad, cls=cls)

    def rates(self, raw_any: Any) -> Rates:
        raw = self.table(raw_any, "rates", (*_RATE_KEYS, "rounding"))
        rounding = self.rounding(raw.pop("rounding", "largest_remainder"))
        return attrs.evolve(self._rates(raw), rounding=rounding)

    def rounding(self, value: Any) -> str:
        """``rates.rounding``: one of :data:`~bioanon.table_transforms.ROUNDINGS`."""
        from ..table_transforms import ROUNDINGS

        if value not in ROUNDINGS:
            self.add(
                "rates.rounding",
                f"expected one of {', '.join(map(repr, ROUNDINGS))} (seba: SEBA's truncated subject counts), "
                f"{_got(value)}",
            )
            return "largest_remainder"
        return str(value)

    def _rates(self, raw: dict[str, Any]) -> Rates:
        given = [k for k in _SHARE_KEYS if k in raw]
        if given == ["background", "attacker"]:  # SEBA's form: the evaluation set is the rest
            b, a = raw["background"], raw["attacker"]
            if _is_number(b) and _is_number(a) and b + a >= 1 - 1e-9:
                self.add(
                    "rates",
                    f"background + attacker = {b:g} + {a:g} = {b + a:g} leaves no evaluation "
                    f"share (evaluation = 1 - background - attacker must be > 0)",
                )
                return Rates()
            if _is_number(b) and _is_number(a):
                raw = {**raw, "evaluation": round(1.0 - b - a, 12)}
                given = list(_SHARE_KEYS)
        if given and len(given) < 3:
            for k in _SHARE_KEYS:
                if k not in raw:
                    self.add(
                        f"rates.{k}",
                        "missing: give all of background, attacker and evaluation (they must sum to 1), "
                        "background and attacker (evaluation = the rest), or none",
                    )
            return Rates()
        values, ok = self.rate_values(raw, _RATE_VALUE_KEYS, DEFAULT_RATES)
        total = sum(values[k] for k in _SHARE_KEYS)
        if ok and abs(total - 1.0) > 1e-9:
            self.add(
                "rates",
                "background + attacker + evaluation must sum to 1, got "
                + " + ".join(f"{values[k]:g}" for k in _SHARE_KEYS)
                + f" = {total:g}",
            )
        return Rates(**cast(dict[str, Any], values), stratify=self.stratify(raw.get("stratify", ())))

    def stratify(self, value: Any) -> tuple[str, ...] | str:
        """``[rates] stratify``: ``"auto"`` or a list of distinct attribute names (checked against the data set's
        columns with the other attribute names, in :meth:`attribute_columns`)."""
        if value == STRATIFY_AUTO:
            return STRATIFY_AUTO
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
            self.add(
                "rates.stratify",
                f'expected a list of attribute names (e.g. ["gender"]; "label" = the label) or "auto", {_got(value)}',
            )
            return ()
        if len(set(value)) != len(value):
            self.add("rates.stratify", f"names an attribute twice: {list(value)}")
        return tuple(dict.fromkeys(value))

    def attacker_dataset(self, raw_any: Any) -> AttackerDatasetSpec | None:
        """``[attacker_dataset]``: a data set like ``[dataset]``, plus the attribute mapping, the share of its
        subjects used and an optional subject-id prefix (see :class:`AttackerDatasetSpec`)."""
        if raw_any is None:
            return None
        base = self.dataset(raw_any, "attacker_dataset", _ATTACKER_DATASET_KEYS)
        if not isinstance(raw_any, Mapping):
            return None
        attributes = self.attribute_maps(raw_any.get("attributes", {}))
        share = raw_any.get("subjects", 1.0)
        if not _is_number(share) or not 0 < share <= 1:
            self.add(
                "attacker_dataset.subjects",
                f"expected the share of the attacker data set's subjects to use, in (0, 1], {_got(share)}",
            )
            share = 1.0
        prefix = raw_any.get("subject_prefix", "")
        if not isinstance(prefix, str):
            self.add("attacker_dataset.subject_prefix", f"expected a string, {_got(prefix)}")
            prefix = ""
        if base is None:
            return None
        return AttackerDatasetSpec(
            base.source,
            base.path,
            base.params,
            base.files,
            base.on_bad,
            attributes=attributes,
            subjects=float(share),
            subject_prefix=prefix,
            cls=base.cls,
        )

    def attribute_maps(self, raw: Any) -> dict[str, AttributeMap]:
        """``attributes = { <attacker column> = "<evaluated name>" | { to = ..., values = { old = new } } }``."""
        where = "attacker_dataset.attributes"
        if not isinstance(raw, Mapping):
            self.add(where, f"expected a table of attacker attribute → evaluated attribute, {_got(raw)}")
            return {}
        out: dict[str, AttributeMap] = {}
        targets: dict[str, str] = {}
        for col, spec in raw.items():
            path = f"{where}.{col}"
            values: Any = {}
            if isinstance(spec, Mapping):
                for k in spec:
                    if k not in ("to", "values"):
                        self.add(f"{path}.{k}", f"unknown key; {_did_you_mean(str(k), ('to', 'values'))}")
                name, values = spec.get("to", col), spec.get("values", {})
            else:
                name = spec
            if not isinstance(name, str) or not name.strip() or name.startswith("attr."):
                self.add(path, f"expected the evaluated data's attribute name (without 'attr.'), {_got(name)}")
                continue
            if not isinstance(values, Mapping) or not all(
                isinstance(v, (str, bool)) or _is_number(v) for v in values.values()
            ):
                self.add(
                    f"{path}.values",
                    f"expected a table of attacker value → evaluated value (strings or numbers), {_got(values)}",
                )
                continue
            if name in targets:
                self.add(path, f"maps onto {name!r} like {where}.{targets[name]}; map one column onto each name")
                continue
            targets[name] = col
            out[col] = AttributeMap(name, dict(values))
        return out

    def rate_values(
        self, raw: Mapping[str, Any], keys: Sequence[str], defaults: Mapping[str, float], closed: Sequence[str] = ()
    ) -> tuple[dict[str, float], bool]:
        """Each rate of ``keys`` (default from ``defaults``) checked to lie in (0, 1) — (0, 1] for the keys in
        ``closed`` — with ``background = 0`` meaning no background (anonymizers fit on each set they anonymize);
        returns the values (defaults where invalid) and whether all were valid."""
        values: dict[str, float] = {}
        ok = True
        for k in keys:
            value = raw.get(k, defaults[k])
            if k == "background" and _is_number(value) and value == 0:
                values[k] = 0.0
            elif not _is_number(value) or not (0 < value <= 1 if k in closed else 0 < value < 1):
                span = "(0, 1]" if k in closed else "(0, 1)"
                self.add(
                    f"rates.{k}",
                    f"expected a number in {span}, {_got(value)}"
                    + ("; 0 = no background" if k == "background" else ""),
                )
                ok = False
                values[k] = defaults[k]
            else:
                values[k] = float(value)
        return values, ok

    def cross_rates(self, raw_any: Any) -> Rates:
        """``[rates]`` beside ``[attacker_dataset]``: background + evaluation = 1 divide the evaluated data set;
        ``attacker`` must be 0 or omitted (the attacker's subjects come from the attacker data set)."""
        raw = self.table(raw_any, "rates", _RATE_KEYS)
        stratify = self.stratify(raw.get("stratify", ()))
        attacker = raw.get("attacker", 0)
        if not (_is_number(attacker) and attacker == 0):
            self.add(
                "rates.attacker",
                f"must be 0 or omitted with [attacker_dataset] (the attacker's subjects "
                f"come from that data set; background + evaluation divide [dataset]), "
                f"{_got(attacker)}",
            )
        given = [k for k in ("background", "evaluation") if k in raw]
        if len(given) == 1:
            other = "evaluation" if given[0] == "background" else "background"
            self.add(
                f"rates.{other}",
                "missing: with [attacker_dataset] give both background and evaluation (they must sum to 1) or neither",
            )
            return Rates(**cast(dict[str, Any], DEFAULT_CROSS_RATES), stratify=stratify)
        values, ok = self.rate_values(
            raw, ("background", "evaluation", "enrolment"), DEFAULT_CROSS_RATES, closed=("evaluation",)
        )
        values["attacker"] = 0.0
        total = values["background"] + values["evaluation"]
        if ok and abs(total - 1.0) > 1e-9:
            self.add(
                "rates",
                f"with [attacker_dataset] background + evaluation must sum to 1, got "
                f"{values['background']:g} + {values['evaluation']:g} = {total:g}",
            )
        return Rates(**cast(dict[str, Any], values), stratify=stratify)

    def scenarios(self, raw: dict[str, Any], has_deanonymizer: bool) -> tuple[str, ...]:
        """The config's attack scenarios, each parsed by :func:`~bioanon.evaluation.scenarios.parse_scenario`."""
        if "scenarios" not in raw:
            return default_scenarios(has_deanonymizer)
        value = raw["scenarios"]
        if not isinstance(value, list) or not value:
            self.add("scenarios", f"expected a non-empty list of scenario names, {_got(value)}")
            return ()
        out: list[str] = []
        for i, s in enumerate(value):
            path = f"scenarios[{i}]"
            if not isinstance(s, str):
                self.add(path, f"expected a scenario name (string), {_got(s)}")
                continue
            try:
                s = parse_scenario(s)
            except ConfigError as exc:
                self.add(path, str(exc))
                continue
            if s == DEANON and not has_deanonymizer:
                self.add(path, "'deanon' needs a de-anonymizer: add a [deanonymizer] table")
                continue
            if s in out:
                self.add(path, f"duplicate scenario {s!r}")
                continue
            out.append(s)
        if has_deanonymizer and DEANON not in out and all(isinstance(s, str) for s in value):
            self.add("deanonymizer", "given but unused: add 'deanon' to scenarios or remove [deanonymizer]")
        return tuple(out)

    def plan_size(
        self,
        anonymizers: list[MethodSpec | None],
        recognizers: list[MethodSpec | None],
        scenarios: tuple[str, ...],
        selection: SelectionSpec | None,
        utility: list[MethodSpec | None],
        repeats: int,
    ) -> None:
        """Refuse a plan of more than :data:`MAX_PLAN_SCORINGS` score computations (see there), estimated from
        the config alone before any plan is built; the problem gives the estimate, its factors and what to
        lower."""
        if selection is None:
            return
        settings = sum(math.prod(len(v) for v in s.grid.values()) for s in anonymizers if s is not None)
        counts = max(1, len(selection.subject_counts))
        selections = sum(
            counts * (selection.random_draws if s.id == "any.select_random" else 1) for s in selection.selectors
        )
        per_selection = len(recognizers) * max(1, len(scenarios)) + len(utility)
        total = repeats * settings * selections * per_selection
        if total > MAX_PLAN_SCORINGS:
            self.add(
                "anonymizers",
                f"the evaluation would compute {total:,} scorings ({repeats} repeat(s) × {settings:,} anonymizer "
                f"setting(s) × {selections:,} selection(s) × ({len(recognizers)} recognizer(s) × "
                f"{max(1, len(scenarios))} scenario(s) + {len(utility)} utility measure(s))); at most "
                f"{MAX_PLAN_SCORINGS:,}: sweep fewer grid values, or lower repeats, selection.subject_counts or "
                "selection.random_draws, or split the config",
            )

    def selection(
        self, raw_any: Any, n_subjects: int | None = None, rates: Rates | None = None
    ) -> SelectionSpec | None:
        """The ``[selection]`` table; ``n_subjects``: the data set's subject count when the config fixes it (a
        generated data set): subject counts of which none is reachable with the evaluation share (``rates``) of
        that many subjects are refused (else they are checked with the data; a count beyond it beside reachable
        ones is skipped with a warning by the run)."""
        raw = self.table(raw_any, "selection", _SELECTION_KEYS)
        selectors: list[MethodSpec | None] = []
        value = raw.get("selectors", list(DEFAULT_SELECTORS))
        missing_default = [s for s in DEFAULT_SELECTORS if s not in self.registry]
        if "selectors" not in raw and missing_default:
            self.add(
                "selection.selectors",
                f"the default selector {missing_default[0]!r} is not installed; list the selectors explicitly",
            )
        elif not isinstance(value, list) or not value:
            self.add("selection.selectors", f"expected a non-empty list of selector ids or tables, {_got(value)}")
        else:
            for i, s in enumerate(value):
                if not isinstance(s, (str, Mapping)):
                    self.add(f"selection.selectors[{i}]", f"expected a selector id or a table, {_got(s)}")
                    selectors.append(None)
                    continue
                path = f"selection.selectors[{i}]"
                selectors.append(
                    self.method(s if isinstance(s, Mapping) else {"id": s}, path, "selector", bare=isinstance(s, str))
                )
            self.unique_names(selectors, "selection.selectors")
        counts: list[int] = []
        value = raw.get("subject_counts", [])
        if not isinstance(value, list):
            self.add("selection.subject_counts", f"expected a list of integers ≥ 2, {_got(value)}")
        else:
            for i, n in enumerate(value):
                if not _is_int(n) or n < 2:
                    self.add(f"selection.subject_counts[{i}]", f"expected an integer ≥ 2, {_got(n)}")
                else:
                    counts.append(n)
            reach = evaluation_subjects(n_subjects, rates)
            if counts and rates is not None and reach is not None and min(counts) > reach:
                self.add(
                    "selection.subject_counts",
                    f"no count in {sorted(counts)} is reachable: the evaluation set has at most {reach} of the data "
                    f"set's {n_subjects} subjects (its parameters say so; rates.evaluation = "
                    f"{rates.evaluation:g}); give a count ≤ {reach}",
                )
        draws = self.integer(raw, "random_draws", "selection.random_draws", DEFAULT_RANDOM_DRAWS, 1)
        if any(s is None for s in selectors):
            return None
        counts = sorted(set(counts), reverse=True)
        return SelectionSpec(tuple(selectors), tuple(counts), draws)  # type: ignore[arg-type]

    def report(self, raw_any: Any) -> ReportSpec:
        raw = self.table(raw_any, "report", _REPORT_KEYS)
        return ReportSpec(
            bootstrap=self.integer(
                raw,
                "bootstrap",
                "report.bootstrap",
                DEFAULT_REPORT["bootstrap"],
                0,
                MAX_BOOTSTRAP,
                " (10,000 resamples already give stable intervals)",
            ),
            confidence=self.number(raw, "confidence", "report.confidence", DEFAULT_REPORT["confidence"], 0, 1),
            per_probe_scores=self.boolean(
                raw, "per_probe_scores", "report.per_probe_scores", DEFAULT_REPORT["per_probe_scores"]
            ),
            paper_protocol=(
                self.string(raw, "paper_protocol", "report.paper_protocol", "") or ""
                if raw.get("paper_protocol", "") != ""
                else ""
            ),
            reversibility_thresholds=self.thresholds(raw),
            breakdown=self.breakdown(raw),
        )

    def breakdown(self, raw: dict[str, Any]) -> str | tuple[str, ...]:
        value = raw.get("breakdown", "auto")
        if value == "auto":
            return "auto"
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            self.add(
                "report.breakdown",
                f'expected "auto" or a list of attribute column names (e.g. ["sex", '
                f'"subset"]; [] = no breakdown), {_got(value)}',
            )
            return "auto"
        return tuple(dict.fromkeys(v.strip().removeprefix("attr.") for v in value))

    def thresholds(self, raw: dict[str, Any]) -> tuple[float, float]:
        value = raw.get("reversibility_thresholds", list(DEFAULT_REVERSIBILITY))
        ok = (
            isinstance(value, (list, tuple))
            and len(value) == 2
            and all(_is_number(v) for v in value)
            and 0 < value[0] < value[1] < 1
        )
        if not ok:
            self.add(
                "report.reversibility_thresholds",
                f"expected two increasing numbers in (0, 1) (irreversible below the first, highly "
                f"reversible from the second), {_got(value)}",
            )
            return DEFAULT_REVERSIBILITY
        return (float(value[0]), float(value[1]))

    # -- methods ---------------------------------------------------------------------------------------
    def methods(self, raw: Any, path: str, kind: str, *, required: bool, grid: bool = False) -> list[MethodSpec | None]:
        items = self.table_list(raw, path, required)
        return [self.method(item, f"{path}[{i}]", kind, grid=grid) for i, item in enumerate(items)]

    def unique_names(self, specs: list[MethodSpec | None], path: str) -> None:
        seen: dict[str, int] = {}
        for i, spec in enumerate(specs):
            if spec is None:
                continue
            if spec.name in seen:
                self.add(
                    f"{path}[{i}].name",
                    f"duplicate name {spec.name!r} (also {path}[{seen[spec.name]}]); give each a distinct name",
                )
            else:
                seen[spec.name] = i

    def resolve(self, method_id: Any, path: str, kind: str) -> type[Method] | None:
        """The class registered under ``method_id`` (an id or alias) if it is of ``kind``; else a problem."""
        noun = _KIND_NOUN[kind]
        if not isinstance(method_id, str) or not method_id.strip():
            self.add(path, f"expected {_a(noun)} id (string), {_got(method_id)}")
            return None
        if method_id in self.registry:
            cls = self.registry[method_id].cls
            if cls.kind == kind:
                self.resolved[path] = cls
                return cls
            self.add(path, f"{method_id!r} is {_a(_KIND_NOUN[cls.kind])}, not {_a(noun)}")
            return None
        suggestions = self.registry.suggest(method_id, kind)
        if suggestions:
            hint = "did you mean " + " or ".join(repr(s) for s in suggestions) + "?"
        else:
            hint = f"run `bioanon methods --kind {kind}` to list the installed ones"
        self.add(path, f"unknown {noun} {method_id!r}; {hint}")
        return None

    def params_table(self, raw: Any, path: str) -> dict[str, Any]:
        if not isinstance(raw, Mapping):
            self.add(path, f"expected a table of parameters, {_got(raw)}")
            return {}
        return dict(raw)

    def method(
        self, raw_any: Any, path: str, kind: str, *, grid: bool = False, bare: bool = False
    ) -> MethodSpec | None:
        """Validate one method table; ``bare``: the user wrote only the id (a string), so its problems point at
        ``path`` itself."""
        if not isinstance(raw_any, Mapping):
            self.add(path, f"expected a table with an id, {_got(raw_any)}")
            return None
        cls = None
        if "id" not in raw_any:
            self.add(f"{path}.id", f"missing required key (a registered {_KIND_NOUN[kind]} id)")
        else:
            cls = self.resolve(raw_any["id"], path if bare else f"{path}.id", kind)
        keys = _ANONYMIZER_KEYS if grid else _METHOD_KEYS
        if not grid and "grid" in raw_any:
            self.add(f"{path}.grid", "unknown key; only anonymizers take a grid (list one table per setting instead)")
            raw_any = {k: v for k, v in raw_any.items() if k != "grid"}
        raw = self.table(raw_any, path, keys, method=cls)
        name = None
        if "name" in raw:
            name = self.string(raw, "name", f"{path}.name", None)
        params = self.params_table(raw.get("params", {}), f"{path}.params")
        sweep: dict[str, list[Any]] = {}
        if grid and "grid" in raw:
            g = raw["grid"]
            if not isinstance(g, Mapping):
                self.add(f"{path}.grid", f"expected a table of parameter → list of values, {_got(g)}")
            else:
                for k, values in g.items():
                    if not isinstance(values, list) or not values:
                        self.add(f"{path}.grid.{k}", f"expected a non-empty list of values, {_got(values)}")
                    elif k in params:
                        self.add(f"{path}.grid.{k}", "also given in params; give it in one place")
                    else:
                        sweep[k] = values
        n_settings = math.prod(len(v) for v in sweep.values())
        if n_settings > MAX_GRID_SETTINGS:
            sizes = ", ".join(f"{k}: {len(v):,} values" for k, v in sweep.items())
            self.add(
                f"{path}.grid",
                f"the grid has {n_settings:,} settings ({sizes}); at most {MAX_GRID_SETTINGS:,}: sweep fewer values "
                "(or split the sweep over several configs)",
            )
            return None
        if cls is None:
            return None
        resolved = self.construct(cls, params, sweep, path)
        if resolved is None:
            return None
        fixed, swept = resolved
        written = raw_any.get("id") if isinstance(raw_any.get("id"), str) else cls.id
        written = self.registry.current_id(written)  # a deprecated id is shown as the id that replaces it
        return MethodSpec(cls.id, fixed, swept, name or written, cls=cls)  # default name: the id as written

    def construct(
        self, cls: type[Method], params: dict[str, Any], sweep: dict[str, list[Any]], path: str
    ) -> tuple[dict[str, Any], dict[str, tuple[Any, ...]]] | None:
        """Construct ``cls`` for every grid setting; return (completed fixed params, coerced grid)."""
        names = [f.name for f in cls.param_fields()]
        ok = True
        for section, table in (("params", params), ("grid", sweep)):
            for k in list(table):
                if k not in names:
                    hint = _did_you_mean(str(k), names) if names else f"{cls.id} takes no parameters"
                    self.add(f"{path}.{section}.{k}", f"unknown parameter of {cls.id}; {hint}")
                    ok = False
        params = {k: v for k, v in params.items() if k in names}
        sweep = {k: v for k, v in sweep.items() if k in names}
        # each value alone first, so a bad fixed parameter does not hide a bad grid value (or the reverse)
        bad_fixed = not all([self._construct_one(cls, {k: v}, f"{path}.params.{k}") for k, v in params.items()])
        bad_values = {
            (k, i)
            for k, values in sweep.items()
            for i, v in enumerate(values)
            if not self._construct_one(cls, {k: v}, f"{path}.grid.{k}[{i}]")
        }
        ok &= not bad_fixed and not bad_values
        keys = list(sweep)
        coerced: dict[str, list[Any]] = {k: [_MISSING] * len(v) for k, v in sweep.items()}
        fixed: dict[str, Any] | None = None
        for combo in itertools.product(*(range(len(sweep[k])) for k in keys)):
            if bad_fixed or any((k, i) in bad_values for k, i in zip(keys, combo, strict=True)):
                continue  # already reported value by value
            setting = {k: sweep[k][i] for k, i in zip(keys, combo, strict=True)}
            try:
                instance = cls(**params, **setting)
            except ParameterError as exc:
                ok = False
                if exc.param in sweep:
                    where = f"{path}.grid.{exc.param}[{combo[keys.index(exc.param)]}]"
                else:
                    where = f"{path}.params.{exc.param}"
                self.add(where, str(exc))
                continue
            except Exception as exc:  # noqa: BLE001 - a method's own checks may raise anything
                ok = False
                shown = ", ".join(f"{k}={v!r}" for k, v in {**params, **setting}.items())
                self.add(path, f"{cls.id}({shown}) failed: {type(exc).__name__}: {exc}")
                continue
            values = instance.get_params()
            if fixed is None:  # (parameters a preset sets stay unset unless given: each setting's preset sets them)
                preset_set = cls.preset_params() if "preset" in sweep else set()
                fixed = {k: v for k, v in values.items() if k not in sweep and (k in params or k not in preset_set)}
            for k, i in zip(keys, combo, strict=True):
                coerced[k][i] = values[k]
        if not ok or fixed is None:
            return None
        return fixed, {k: tuple(v) for k, v in coerced.items()}

    def _construct_one(self, cls: type[Method], params: dict[str, Any], where: str) -> bool:
        """Construct ``cls`` with one parameter (the others default); report a ParameterError at ``where``."""
        try:
            cls(**params)
        except ParameterError as exc:
            self.add(where, str(exc))
            return False
        except Exception:  # noqa: BLE001 - checked again with all parameters together, and reported there
            return True
        return True


_MISSING = object()

#: Parameters of a generating data set source (one that takes no path) that fix its number of subjects.
_SUBJECT_COUNT_PARAMS = ("n_subjects", "n_speakers")


def _declared_subjects(dataset: DatasetSpec | None) -> int | None:
    """The data set's number of subjects when its config fixes it: a source that generates its data (no path)
    with an ``n_subjects`` (or ``n_speakers``) parameter; ``None`` when only the data tell."""
    if dataset is None or dataset.path is not None:
        return None
    for name in _SUBJECT_COUNT_PARAMS:
        value = dataset.params.get(name)
        if _is_int(value):
            return int(value)
    return None


def evaluation_subjects(n_subjects: int | None, rates: Rates | None) -> int | None:
    """An upper bound of the evaluation set's subjects out of ``n_subjects`` (the largest-remainder split of
    :func:`~bioanon.table.SampleTable.split_subjects` gives a part at most the ceiling of its share)."""
    if n_subjects is None or rates is None or not 0 < rates.evaluation <= 1:
        return None
    return min(n_subjects, math.ceil(n_subjects * rates.evaluation - 1e-9))


def _used(path: str, spec: MethodSpec) -> list[tuple[str, str]]:
    """``(key path, attribute name)`` of every attribute a configured method names through its
    :attr:`~bioanon.methods.Method.attribute_params` (fixed parameters and grid values; a tuple value names
    several)."""
    out: list[tuple[str, str]] = []
    for p in spec.method_class().attribute_params:
        places = [(f"{path}.params.{p}", spec.params[p])] if p in spec.params else []
        places += [(f"{path}.grid.{p}[{i}]", v) for i, v in enumerate(spec.grid.get(p, ()))]
        for where, value in places:
            for name in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(name, str) and name.strip():
                    out.append((where, name))
    return out


# --------------------------------------------------------------------------------------------------- output


def _label_value(value: Any) -> str:
    value = jsonable(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(_label_value(v) for v in value) + "]"
    return repr(value)


def _default_is_none(spec: MethodSpec | DatasetSpec, name: str) -> bool:
    cls = spec.cls if spec.cls is not None else None
    if cls is None:
        cls = _registry().get(spec.source if isinstance(spec, DatasetSpec) else spec.id)
    for f in cls.param_fields():
        if f.name == name:
            return f.default is None
    return False


def _params_without_none(params: Mapping[str, Any], spec: Any, where: str) -> dict[str, Any]:
    """``params`` without the parameters whose value is None where None is their default (TOML has no null);
    any other None raises ConfigError naming it."""
    out = {}
    for k, v in params.items():
        if v is None:
            if spec is not None and _default_is_none(spec, k):
                continue
            raise ConfigError(f"{where}.{k}: None cannot be written as TOML; store the config as JSON (to_dict())")
        out[k] = v
    return out


def _to_toml(cfg: EvalConfig) -> str:
    from ..tomlio import dumps

    d = cfg.to_dict()
    d["dataset"]["params"] = _params_without_none(d["dataset"]["params"], cfg.dataset, "dataset.params")
    if cfg.attacker_dataset is not None:
        a = d["attacker_dataset"]
        a["params"] = _params_without_none(a["params"], cfg.attacker_dataset, "attacker_dataset.params")
    for section, specs in (
        ("anonymizers", cfg.anonymizers),
        ("recognizers", cfg.recognizers),
        ("utility", cfg.utility),
    ):
        for i, (entry, spec) in enumerate(zip(d[section], specs, strict=True)):
            entry["params"] = _params_without_none(entry["params"], spec, f"{section}[{i}].params")
    if cfg.deanonymizer is not None:
        d["deanonymizer"]["params"] = _params_without_none(
            d["deanonymizer"]["params"], cfg.deanonymizer, "deanonymizer.params"
        )
    for i, (entry, spec) in enumerate(zip(d["selection"]["selectors"], cfg.selection.selectors, strict=True)):
        entry["params"] = _params_without_none(entry["params"], spec, f"selection.selectors[{i}].params")
    if cfg.templates is not None:
        d["templates"]["params"] = _params_without_none(
            d["templates"]["params"], cfg.templates.recognizer, "templates.params"
        )
    return dumps(d, header="bioanon evaluation config (resolved: every default filled in)")

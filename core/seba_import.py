"""``bioanon import seba``: turn a SEBA run config (or experiment config) into bioanon evaluation configs.

SEBA (kit-ps/seba; the SEBA paper) describes a study as a YAML **run config**: a list of ``{repeat, config}``
entries, each one experiment (``exp: anon`` or ``exp: deanon``) with one data set, one anonymization, one
selector, one privacy *or* utility method and the rates ``{anonbg, attacker, enroll}``; ``$ROUND`` in any
string is replaced by the round number ``0 … repeat-1``. An **experiment config** (SEBA's
``sample.config.yaml``) holds an ``anonymizations`` list whose params may carry one list-valued sweep
parameter; SEBA's ``generate_run_configs.py`` expands it into run entries with privacy ``arcface`` and, for
``anon``, a ``detection`` utility run with ``enroll: 1.0``. Both are read here.

How entries become configs
    One bioanon config evaluates several anonymizer settings, recognizers and utility measures on one data
    set, one subject split (``seed``, ``repeats``) and one selection. So entries that agree on the experiment
    type, data set, rates, seed, repeat count, label, selector and de-anonymizer are merged into **one**
    config: their anonymizations become ``[[anonymizers]]`` (a setting per distinct parameter set; settings
    of one method that differ in exactly one bioanon parameter become a ``grid``), their privacy methods
    ``[[recognizers]]`` and their utility methods ``[[utility]]``. Utility entries (SEBA's ``enroll: 1.0``
    comparisons) join the privacy group they otherwise match. Selectors that differ only in ``ids`` become one
    selector with several ``subject_counts``. Entries that differ in anything else give separate configs
    (``NAME-1.toml``, ``NAME-2.toml``, …).

    * ``seed`` with ``$ROUND`` → ``repeats = repeat`` (independent seeded subject splits) and the seed of round
      0 (a non-integer SEBA seed becomes its CRC-32: bioanon seeds are integers); without ``$ROUND`` SEBA
      reruns the same split (its cache even reuses the anonymized sets), so ``repeats = 1``.
    * ``exp: anon`` (strong attacker: train, enrol and probe anonymized) → scenario ``parrot``;
      ``exp: deanon`` → scenario ``deanon`` with the mapped ``[deanonymizer]`` (``noop`` → scenario ``naive``).
    * ``rates {anonbg, attacker, enroll}`` → ``[rates] background, attacker, evaluation = 1 − both,
      enrolment`` and ``rounding = "seba"`` (SEBA's truncated subject counts: ``int(N · share)`` background and
      attacker subjects, the rest evaluated; 100 subjects with 0.02 / 0.58 give 2 / 57 / 41).
    * ``dataset: NAME`` is SEBA's ``data/NAME`` folder: ``gait.seba`` (``path`` = the data folder,
      ``set = NAME``) for motion, ``face.seba`` (the same, SEBA's flat ``<id>.<point>.jpg`` layout read as it is)
      for faces.

SEBA's trait comes from ``data/<set>.meta.yaml``; when that file is not at hand it is inferred from the method
names (or given with ``trait=``).

Everything that has no bioanon counterpart, or maps only approximately (units, semantics, SEBA bugs), is
listed as a :class:`Note` — printed as a table by the command and written as comments at the top of each
config. Unknown SEBA method or parameter names, malformed YAML and missing keys raise
:class:`~bioanon.errors.ConfigError` naming the file and the entry.

SEBA fidelity options
    SEBA's motion attacker cross-validates on the enrolment data and keeps the best fold, scores with
    ``predict_proba``, never uses the attacker set and leaves the sign of each walk's principal direction to
    scikit-learn's PCA; its ``classification`` selector ranks by a stored
    attribute. The bioanon options that reproduce this (recognizer params ``cv_folds``, ``keep``, ``scores``,
    ``signs``;
    the top-level ``attacker_fit``; selector params ``by``, ``order``) are added in one separate step,
    :func:`add_fidelity_options`; ``fidelity=False`` leaves them out, so the config uses bioanon's own
    attacker (trained on the anonymized attacker set, scored by its own rule).

The tables map SEBA's names to method ids as text; no plugin is imported here (``bioanon validate`` checks the
result against the installed methods).
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import os
import re
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import attrs

from .errors import ConfigError, MissingDependencyError

__all__ = [
    "ImportedConfig",
    "Note",
    "SebaImport",
    "add_fidelity_options",
    "compact_labels",
    "import_seba",
    "read_seba",
    "to_toml",
]

ROUND = "$ROUND"
SEBA_FACE_SIZE = 224  # SEBA's face pipeline works at 224×224 (convlinae only runs there); used for pixel params


# --------------------------------------------------------------------------------------------------- results


@attrs.frozen
class Note:
    """One thing that could not be mapped, or mapped only approximately.

    ``status``: ``dropped`` (no counterpart: left out), ``approximate`` (mapped, but the numbers will differ),
    ``ignored`` (does not affect results in SEBA either) or ``fidelity`` (needs a SEBA fidelity option that
    was left out)."""

    where: str  # e.g. "entries[2].anonymization"
    seba: str  # the SEBA name or key, e.g. "noise_injection.distribution"
    status: str
    why: str


@attrs.define
class ImportedConfig:
    """One bioanon config made from the SEBA entries ``entries`` (their indices in the run config)."""

    name: str
    config: dict[str, Any]
    entries: list[str]
    notes: list[Note]
    unused: list[Note] = attrs.field(factory=list)
    """Notes of the file's entries that gave no config at all (also listed in every config's comments)."""

    def to_toml(self, source: str = "") -> str:
        """The config as TOML, led by comments naming the SEBA entries and every note."""
        head = [
            f"# bioanon evaluation config made by `bioanon import seba` from {source or 'a SEBA config'}",
            f"# SEBA entries: {compact_labels(self.entries)}",
        ]
        for title, notes in (
            ("What could not be mapped, or maps only approximately:", self.notes),
            ("Entries of the SEBA file that gave no config:", self.unused),
        ):
            if notes:
                head.append("# " + title)
                head += [f"#   [{n.status}] {n.where}: {n.seba}: {n.why}" for n in notes]
        return "\n".join(head) + "\n" + to_toml(self.config)


@attrs.define
class SebaImport:
    """The configs made from one SEBA file, and the notes of entries that gave no config (``unused``)."""

    source: str
    configs: list[ImportedConfig]
    unused: list[Note] = attrs.field(factory=list)

    def notes(self) -> list[tuple[str, Note]]:
        """(config name or ``-``, note) for every note."""
        out = [(c.name, n) for c in self.configs for n in c.notes]
        return out + [("-", n) for n in self.unused]

    def table(self, width: int = 100) -> str:
        """The notes as plain text: per note ``[status] config: where: SEBA key`` and the reason, indented."""
        notes = self.notes()
        if not notes:
            return "everything was mapped"
        several = len(self.configs) > 1 or any(c == "-" for c, _ in notes)
        lines = [
            f"{len(notes)} thing(s) could not be mapped or map only approximately (also written as comments "
            f"into the config):"
        ]
        for c, n in notes:
            lines.append(f"[{n.status}] " + (f"{c}: " if several else "") + f"{n.where}: {n.seba}")
            lines += ["    " + w for w in _wrap(n.why, max(40, width - 4))]
        return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


# --------------------------------------------------------------------------------------------------- TOML


def to_toml(config: Mapping[str, Any]) -> str:
    """A bioanon config dict as TOML (:func:`bioanon.tomlio.dumps`: scalars first, then tables and arrays of
    tables, in the dict's order)."""
    from .tomlio import dumps

    return dumps(config)


# --------------------------------------------------------------------------------------------------- reading


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise MissingDependencyError(
            "bioanon import seba", {"yaml": "pip install 'bioanon[seba]'"}, "SEBA configs are YAML"
        ) from None
    return yaml


def read_seba(path: str | os.PathLike[str]) -> Any:
    """The YAML document of a SEBA file (ConfigError naming the file and line when it is not valid YAML)."""
    yaml = _yaml()
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the SEBA config: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start}); is it a SEBA config?") from None
    try:
        return yaml.safe_load(text)
    except RecursionError:  # the pure-Python YAML loader nests recursively
        raise ConfigError(f"{file}: invalid YAML in the SEBA config: nested too deeply to read") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark is not None else str(file)
        raise ConfigError(f"{where}: invalid YAML in the SEBA config: {getattr(exc, 'problem', None) or exc}") from None


class _Entry:
    """One SEBA run entry after ``$ROUND`` substitution for one round."""

    def __init__(self, where: str, repeat: int, template: dict[str, Any], round_: int):
        self.where, self.repeat, self.template, self.round = where, repeat, template, round_
        self.config = _substitute(copy.deepcopy(template), str(round_))


def _substitute(value: Any, round_: str) -> Any:
    if isinstance(value, str):
        return value.replace(ROUND, round_)
    if isinstance(value, list):
        return [_substitute(v, round_) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, round_) for k, v in value.items()}
    return value


def _has_round(value: Any) -> bool:
    if isinstance(value, str):
        return ROUND in value
    if isinstance(value, list):
        return any(_has_round(v) for v in value)
    if isinstance(value, dict):
        return any(_has_round(v) for v in value.values())
    return False


def _run_entries(doc: Any, file: str) -> list[tuple[str, int, dict[str, Any]]]:
    """(where, repeat, config) for each entry of a run config, or of an experiment config expanded as SEBA's
    ``generate_run_configs.py`` does."""
    if isinstance(doc, Mapping) and "anonymizations" in doc:
        return _expand_experiment(dict(doc), file)
    if isinstance(doc, Mapping):
        raise ConfigError(
            f"{file}: a SEBA run config is a YAML list of {{repeat, config}} entries, and an "
            f"experiment config a mapping with an 'anonymizations' list; got a mapping with "
            f"keys {sorted(map(str, doc))}"
        )
    if not isinstance(doc, list) or not doc:
        raise ConfigError(
            f"{file}: expected a SEBA run config (a YAML list of {{repeat, config}} entries), got "
            f"{type(doc).__name__ if doc is not None else 'an empty file'}"
        )
    out = []
    for i, item in enumerate(doc):
        where = f"entries[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(
                f"{file}: {where}: expected a mapping with keys repeat and config, got {type(item).__name__}"
            )
        extra = set(map(str, item)) - {"repeat", "config"}
        if extra:
            raise ConfigError(f"{file}: {where}: unknown keys {sorted(extra)}; an entry has repeat and config")
        for key in ("repeat", "config"):
            if key not in item:
                raise ConfigError(f"{file}: {where}: missing required key {key!r}")
        repeat = item["repeat"]
        if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 0:
            raise ConfigError(f"{file}: {where}.repeat: expected an integer ≥ 0, got {repeat!r}")
        if not isinstance(item["config"], Mapping):
            raise ConfigError(f"{file}: {where}.config: expected a mapping, got {type(item['config']).__name__}")
        out.append((where, repeat, dict(item["config"])))
    return out


# parameters whose SEBA value is itself a list (not a sweep) in experiment configs
_LIST_PARAMS = {"remove_parts": {"body_parts"}, "chain": {"anonymizations"}}


def _expand_experiment(doc: dict[str, Any], file: str) -> list[tuple[str, int, dict[str, Any]]]:
    """SEBA's generate_run_configs: one entry per anonymization × sweep value, privacy arcface (unless the
    experiment config names its own privacy method) and, for ``anon``, a detection utility run (enroll 1.0)."""
    anons = doc.pop("anonymizations")
    repeat = doc.pop("repeat", 1)
    if not isinstance(anons, list) or not anons:
        raise ConfigError(f"{file}: anonymizations: expected a non-empty list of {{name, params}}")
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 0:
        raise ConfigError(f"{file}: repeat: expected an integer ≥ 0, got {repeat!r}")
    # (``_implied``: added by SEBA's generator, not by the user; see _implied_method)
    privacy = doc.pop("privacy", {"name": "arcface", "params": {"opt": {"num_gpus": 1}}, "_implied": True})
    utility = doc.pop(
        "utility", {"name": "detection", "params": {}, "_implied": True} if doc.get("exp") == "anon" else None
    )
    out = []
    for j, anon in enumerate(anons):
        where = f"anonymizations[{j}]"
        if not isinstance(anon, Mapping) or "name" not in anon:
            raise ConfigError(f"{file}: {where}: expected a mapping with a name (and params)")
        params = anon.get("params") or {}
        if not isinstance(params, Mapping):
            raise ConfigError(f"{file}: {where}.params: expected a mapping, got {type(params).__name__}")
        lists = [k for k, v in params.items() if isinstance(v, list) and k not in _LIST_PARAMS.get(anon["name"], ())]
        if len(lists) > 1:
            raise ConfigError(
                f"{file}: {where} ({anon['name']}): SEBA sweeps one list-valued parameter, got "
                f"lists in {', '.join(map(str, lists))}"
            )
        values = params[lists[0]] if lists else [None]
        for v in values:
            setting = dict(params)
            if lists:
                setting[lists[0]] = v
            base = {**copy.deepcopy(doc), "anonymization": {"name": anon["name"], "params": setting}}
            label = where + (f"[{values.index(v)}]" if lists else "")
            rates = dict(base.get("rates") or {})
            out.append((label, repeat, {**base, "privacy": copy.deepcopy(privacy)}))
            if utility is not None:
                out.append(
                    (
                        label,
                        repeat,
                        {**copy.deepcopy(base), "utility": copy.deepcopy(utility), "rates": {**rates, "enroll": 1.0}},
                    )
                )
    return out


# --------------------------------------------------------------------------------------------------- mapping


class _Unmappable(Exception):
    """A known SEBA method or value without a bioanon counterpart (becomes a ``dropped`` note)."""


class _Ctx:
    """What a mapper may need: notes, the trait, the face image size."""

    def __init__(self, where: str, notes: list[Note], image_size: tuple[int, int] | None, file: str):
        self.where, self.notes, self.image_size, self.file = where, notes, image_size, file

    def note(self, seba: str, status: str, why: str) -> None:
        self.notes.append(Note(self.where, seba, status, why))

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{self.file}: {self.where}: {message}")

    def number(self, params: Mapping[str, Any], key: str, default: Any, *, integer: bool = False) -> Any:
        value = params.get(key, default)
        if isinstance(value, str):  # "$ROUND" substitutions arrive as text
            try:
                value = int(value) if integer else float(value)
            except ValueError:
                raise self.error(f"parameter {key!r}: expected a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"parameter {key!r}: expected a number, got {value!r}")
        return int(value) if integer else value

    def choice(self, params: Mapping[str, Any], key: str, default: str, allowed: tuple[str, ...]) -> str:
        value = params.get(key, default)
        if value not in allowed:
            raise self.error(f"parameter {key!r}: expected one of {', '.join(allowed)}, got {value!r}")
        return cast(str, value)

    def face_size(self, seba: str) -> tuple[int, int]:
        if self.image_size is not None:
            return self.image_size
        self.note(
            seba,
            "approximate",
            f"pixel sizes converted for {SEBA_FACE_SIZE}×{SEBA_FACE_SIZE} images "
            f"(SEBA's face size; no image of the set was found to measure)",
        )
        return (SEBA_FACE_SIZE, SEBA_FACE_SIZE)


Mapper = Callable[[dict[str, Any], _Ctx], tuple[str, dict[str, Any]]]


def _fixed(method_id: str, **params: Any) -> Mapper:
    return lambda p, ctx: (method_id, dict(params))


def _dropped(why: str) -> Mapper:
    def mapper(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
        raise _Unmappable(why)

    return mapper


# -- motion anonymizations -------------------------------------------------------------------------------

_NOISE_SD = {"normal": 1.0, "laplace": math.sqrt(2.0), "uniform": 1.0 / math.sqrt(12.0)}


def _noise_injection(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    dist = ctx.choice(p, "distribution", "uniform", ("normal", "laplace", "uniform"))
    scaling = ctx.number(p, "scaling", 1.0)
    mode = ctx.choice(p, "type", "direct", ("direct", "indirect"))
    if "distribution" not in p:
        ctx.note(
            "noise_injection.distribution",
            "approximate",
            "SEBA's default is uniform; its cache also matched an omitted distribution to any cached "
            "noise set (false cache hit), so check which noise SEBA's numbers came from",
        )
    if dist == "uniform":
        ctx.note(
            "noise_injection.distribution",
            "approximate",
            "SEBA's uniform noise is U(0,1): mean 0.5 (a bias of 0.5·σ·scaling per coordinate, which "
            "bioanon does not add) and SD 1/√12; bioanon's is zero-mean unit-variance, so scale = "
            "scaling/√12 matches the random part",
        )
    elif dist == "laplace":
        ctx.note(
            "noise_injection.distribution",
            "approximate",
            "SEBA's Laplace(0,1) has SD √2; bioanon's unit-variance Laplace needs scale = scaling·√2",
        )
    if mode == "indirect":
        ctx.note(
            "noise_injection.type",
            "approximate",
            "SEBA's indirect mode adds no noise (bug: it returns data[1:]), so SEBA's figures are those of "
            "no anonymization; bioanon adds the noise to the frame differences",
        )
    ctx.note("noise_injection", "approximate", "SEBA's noise is unseeded; bioanon's is seeded (seed = 0)")
    return "gait.noise", {"noise": dist, "scale": round(scaling * _NOISE_SD[dist], 12), "mode": mode, "seed": 0}


def _coarsening(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    kind = ctx.choice(p, "coarsening_type", "time", ("time", "precision", "precision_inverted"))
    if kind == "time":
        return "gait.coarsen_time", {
            "factor": ctx.number(p, "coarsening_factor", 10, integer=True),
            "interpolation": "linear",
        }
    if kind == "precision":
        decimals = ctx.number(p, "coarsening_decimals", 0, integer=True)
        ctx.note(
            "coarsening.coarsening_decimals",
            "approximate",
            "SEBA rounds the raw millimetres to `decimals` places; bioanon's step is in metres "
            "(10^-decimals mm, assuming the set is in mm as gait.seba reads it)",
        )
        return "gait.coarsen_precision", {"step": 10.0 ** (-decimals) / 1000.0}
    raise _Unmappable("precision_inverted (data % decimals) has no bioanon counterpart")


def _resampling(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    if "total_number_of_frames" in p:
        ctx.note(
            "resampling.total_number_of_frames",
            "dropped",
            "bioanon's gait sources resample every sequence to `frames` on load; resampling targets a frame rate only",
        )
    return "gait.resample", {"fps": float(ctx.number(p, "fps", 60))}


def _rolling_average(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note(
        "rolling_average",
        "approximate",
        "SEBA's valid convolution shortens each sequence by window−1 "
        "frames; bioanon keeps the length (trailing window, shorter at the start)",
    )
    return "gait.rolling_average", {"window": ctx.number(p, "window_size", 2, integer=True), "alignment": "trailing"}


def _trajectory(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    invert = p.get("invert", False)
    if not isinstance(invert, bool):
        raise ctx.error(f"parameter 'invert': expected true or false, got {invert!r}")
    return "gait.trajectory_features", {
        "window": ctx.number(p, "window_size", 1, integer=True),
        "baseline": ctx.choice(p, "type", "all", ("all", "edges")),
        "output": "residual" if invert else "average",
    }


_PARTS = ("head", "torso", "left_arm", "right_arm", "hip", "left_leg", "right_leg")


def _remove_parts(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    parts = p.get("body_parts")
    if not isinstance(parts, list) or not parts or any(x not in _PARTS for x in parts):
        raise ctx.error(f"parameter 'body_parts': expected a list of {', '.join(_PARTS)}, got {parts!r}")
    invert = p.get("invert", False)
    return ("gait.keep_parts" if invert else "gait.remove_parts"), {"parts": list(parts)}


def _size_normalization(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    axis = p.get("axis")
    if axis not in (None, 1, 2, 3, "1", "2", "3"):
        raise ctx.error(f"parameter 'axis': expected 1, 2 or 3 (SEBA's 1-based axis), got {axis!r}")
    return "gait.size_normalization", {
        "by": "height",
        "target": float(ctx.number(p, "normalized_height", 1.8)),
        "height_attribute": "height",
        "axis": "all" if axis is None else "xyz"[int(axis) - 1],
    }


def _average_pose(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note("average_pose", "approximate", "SEBA outputs one pose (1-D); bioanon repeats it in every frame")
    return "gait.average_pose", {}


def _first_pose(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note("first_pose", "approximate", "SEBA outputs one pose (1-D); bioanon repeats it in every frame")
    return "gait.first_pose", {}


def _chain(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    steps = p.get("anonymizations")
    if not isinstance(steps, list) or not steps:
        raise ctx.error("parameter 'anonymizations': expected a non-empty list of {name, params}")
    ctx.note(
        "chain",
        "approximate",
        "SEBA's chain never ran (it loads its steps with trait 'gait': "
        "ModuleNotFoundError), so SEBA has no figures to compare with",
    )
    out = []
    for k, step in enumerate(steps):
        if not isinstance(step, Mapping) or "name" not in step:
            raise ctx.error(f"chain step {k}: expected a mapping with a name (and params)")
        if step["name"] == "chain":
            raise _Unmappable("a chain inside a chain")
        method_id, params = _map_method(MOTION_ANON, "motion anonymization", step, ctx)
        out.append({"id": method_id, "params": params})
    return "any.chain", {"steps": out}


MOTION_ANON: dict[str, tuple[tuple[str, ...], Mapper]] = {
    "noop": ((), _fixed("any.identity")),
    "noise_injection": (("distribution", "scaling", "type"), _noise_injection),
    "coarsening": (("coarsening_type", "coarsening_factor", "coarsening_decimals"), _coarsening),
    "resampling": (("fps", "total_number_of_frames"), _resampling),
    "rolling_average": (("window_size",), _rolling_average),
    "motion_extraction": (
        ("difference",),
        lambda p, ctx: ("gait.motion_extraction", {"lag": ctx.number(p, "difference", 1, integer=True)}),
    ),
    "trajectory_feature_extraction": (("type", "window_size", "invert"), _trajectory),
    "remove_parts": (("body_parts", "invert"), _remove_parts),
    "sum_of_parts": ((), _fixed("gait.sum_of_parts", distance=0.5)),
    "simple_size_normalization": (("normalized_height", "axis"), _size_normalization),
    "normalize": ((), _fixed("gait.normalize", method="l2", per="joint_axis")),
    "average_pose": ((), _average_pose),
    "first_pose": ((), _first_pose),
    "chain": (("anonymizations",), _chain),
}


# -- face anonymizations ---------------------------------------------------------------------------------


def _eyemask(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    h, _ = ctx.face_size("eyemask")
    center, dist = ctx.number(p, "center", 85), ctx.number(p, "dist", 70)
    top, bottom = max(0.0, (center - dist) / h), min(1.0, (center + dist) / h)
    return "face.eye_mask", {"top": round(top, 6), "bottom": round(bottom, 6), "left": 0.0, "right": 1.0, "value": 0}


def _gaussianblur(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    _, w = ctx.face_size("gaussianblur")
    kernel = ctx.number(p, "kernel", 9)
    return "face.gaussian_blur", {"kernel": 2 * math.floor(w * kernel / 200) + 1, "sigma": 0.0}


def _gaussnoise(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note(
        "gaussnoise",
        "approximate",
        "SEBA draws into a uint8 buffer, so only positive (brightening) noise is added; bioanon's noise is zero-mean",
    )
    return "face.gaussian_noise", {"sigma": float(ctx.number(p, "sigma", 10)), "seed": 0}


def _pixelate(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    if p.get("keepshape", True) is not True:
        ctx.note("pixelate.keepshape", "dropped", "bioanon always keeps the image size (keepshape: true)")
    return "face.pixelation", {"size": ctx.number(p, "size", 5, integer=True)}


def _blockpermutate(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    for key in ("seed", "blocksize"):
        if key not in p:
            raise ctx.error(f"blockpermutate: missing required parameter {key!r}")
    return "face.block_permutation", {
        "block_size": ctx.number(p, "blocksize", 0, integer=True),
        "key": _int_seed(p["seed"]),
    }


def _pxlreloc(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note(
        "pxlreloc",
        "approximate",
        "SEBA shifts pixels `steps` positions along a spiral; bioanon's pixel "
        "relocation runs `steps` rounds of keyed row/column shifts (same idea, other algorithm)",
    )
    return "face.pixel_relocation", {"steps": ctx.number(p, "steps", 50, integer=True)}


def _required(p: dict[str, Any], ctx: _Ctx, name: str, keys: tuple[str, ...]) -> None:
    for key in keys:
        if key not in p:
            raise ctx.error(f"{name}: missing required parameter {key!r}")


def _dppix(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    _required(p, ctx, "dppix", ("e", "b", "m"))
    return "face.dp_pix", {
        "epsilon": float(ctx.number(p, "e", 0)),
        "b": ctx.number(p, "b", 0, integer=True),
        "m": ctx.number(p, "m", 0, integer=True),
        "seed": 0,
    }


def _dpsamp(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    _required(p, ctx, "dpsamp", ("e", "k", "m", "threshold"))
    return "face.dp_samp", {
        "epsilon": float(ctx.number(p, "e", 0)),
        "k": ctx.number(p, "k", 0, integer=True),
        "m": ctx.number(p, "m", 0, integer=True),
        "threshold": float(ctx.number(p, "threshold", 0)),
        "seed": _int_seed(p.get("seed", 0) if p.get("seed") is not None else 0),
    }


def _dpsnow(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    _required(p, ctx, "dpsnow", ("d",))
    d = float(ctx.number(p, "d", 0))
    ctx.note(
        "dpsnow.d",
        "approximate",
        "SEBA replaces a 1−d share of the pixels, bioanon's d is the share replaced: d = 1 − SEBA's d",
    )
    return "face.dp_snow", {
        "d": round(1.0 - d, 12),
        "grey": 127,
        "seed": _int_seed(p.get("seed", 0) if p.get("seed") is not None else 0),
    }


def _ksame(method_id: str) -> Mapper:
    def mapper(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
        _required(p, ctx, method_id, ("k", "pcan"))
        return method_id, {
            "k": ctx.number(p, "k", 0, integer=True),
            "n_components": ctx.number(p, "pcan", 0, integer=True),
        }

    return mapper


def _krtio(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    _required(p, ctx, "krtio", ("key",))
    ctx.note(
        "krtio.overlay",
        "approximate",
        "SEBA draws the overlays from a separate set (krtio-overlay) with "
        "an AES-keyed PRF; bioanon uses the background set and a SplitMix64-keyed PRF",
    )
    return "face.k_rtio", {
        "key": _int_seed(p["key"]),
        "alpha": float(ctx.number(p, "alpha", 0.5)),
        "block_size": ctx.number(p, "blocksize", 60, integer=True),
        "k": ctx.number(p, "k", 3, integer=True),
    }


def _blackbox(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    return "face.eye_mask", {"top": 0.0, "bottom": 1.0, "left": 0.0, "right": 1.0, "value": 0}


FACE_ANON: dict[str, tuple[tuple[str, ...], Mapper]] = {
    "noop": ((), _fixed("any.identity")),
    "blackbox": ((), _blackbox),
    "eyemask": (("center", "dist"), _eyemask),
    "gaussianblur": (("kernel",), _gaussianblur),
    "gaussnoise": (("sigma",), _gaussnoise),
    "pixelate": (("size", "keepshape"), _pixelate),
    "blockpermutate": (("seed", "blocksize"), _blockpermutate),
    "pxlreloc": (("steps",), _pxlreloc),
    "dppix": (("e", "b", "m"), _dppix),
    "dpsamp": (("e", "k", "m", "threshold", "seed"), _dpsamp),
    "dpsnow": (("d", "seed"), _dpsnow),
    "ksamepixel": (("k", "pcan"), _ksame("face.k_same_pixel")),
    "ksameeigen": (("k", "pcan"), _ksame("face.k_same_eigen")),
    "krtio": (("key", "overlay", "alpha", "blocksize", "k"), _krtio),
    "arpoison": (
        ("coefficients", "offset"),
        _dropped("autoregressive-process poisoning needs SEBA's external bin/arps; no bioanon counterpart"),
    ),
    "pick": (
        ("dataset", "hardlink"),
        _dropped("imports images anonymized elsewhere; in bioanon, evaluate such images as their own data set"),
    ),
    "deepprivacy": (("model",), _dropped("DeepPrivacy (external GAN, pretrained weights): no bioanon counterpart")),
    "ciagan": ((), _dropped("CIAGAN (external GAN, pretrained weights): no bioanon counterpart")),
    "fawkes": (("mode", "no_align"), _dropped("Fawkes (external cloaking tool): no bioanon counterpart")),
}


# -- de-anonymizations (face) ----------------------------------------------------------------------------

_LOSSES = {"ssim": "ssim", "mse": "mse", "mae": "l1"}


def _fantomas(method_id: str) -> Mapper:
    def mapper(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
        _required(p, ctx, method_id, ("epochs", "learning_rate", "train_rate", "loss"))
        loss = p["loss"]
        if loss == "msssim":
            ctx.note(f"{method_id}.loss", "approximate", "MS-SSIM loss has no counterpart; SSIM is used")
            loss = "ssim"
        if loss not in _LOSSES:
            raise ctx.error(f"{method_id}: parameter 'loss': expected ssim, msssim, mse or mae, got {loss!r}")
        out = {
            "resolution": [SEBA_FACE_SIZE, SEBA_FACE_SIZE],
            "features": ctx.number(p, "features", 9, integer=True),
            "loss": _LOSSES[loss],
            "epochs": ctx.number(p, "epochs", 0, integer=True),
            "lr": float(ctx.number(p, "learning_rate", 0)),
            "validation": round(1.0 - float(ctx.number(p, "train_rate", 0)), 12),
            "batch_size": ctx.number(p, "train_batch_size", 64, integer=True),
            "patience": ctx.number(p, "early_stop", 20, integer=True),
        }
        if p.get("reduce_lr", True) is False:
            out["lr_factor"] = 1.0
        return ("face.fantomas" if method_id == "convlinae" else "face.fantomas_conv"), out

    return mapper


def _resample_inv(kind: str) -> Mapper:
    def mapper(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
        ctx.note(
            kind,
            "approximate",
            "SEBA's resample de-anonymizers fail at import (SsimRecognition was "
            "renamed), so SEBA has no figures; bioanon learns the factor on the attacker pairs",
        )
        if ctx.number(p, "resample", 0) != 0:
            ctx.note(f"{kind}.resample", "dropped", "a fixed factor: bioanon always learns it")
        return "face.resample_inversion", {"interpolations": ["linear" if kind == "linear" else "cubic"]}

    return mapper


_TORCH_PARAMS = (
    "epochs",
    "learning_rate",
    "train_rate",
    "loss",
    "features",
    "train_batch_size",
    "validation_batch_size",
    "reduce_lr",
    "early_stop",
)
FACE_DEANON: dict[str, tuple[tuple[str, ...], Mapper]] = {
    "convlinae": (_TORCH_PARAMS, _fantomas("convlinae")),
    "convae": (_TORCH_PARAMS, _fantomas("convae")),
    "feedforward": (
        _TORCH_PARAMS,
        _dropped("SEBA's feedforward crashes (math.prod of an int); the closest bioanon method is any.mlp_inversion"),
    ),
    "applymodel": (
        ("model",),
        _dropped(
            "applies a pickled torch model; bioanon loads state dicts through a de-anonymizer's weights parameter"
        ),
    ),
    "linear": (("resample", "final_res"), _resample_inv("linear")),
    "bicubic": (("resample", "final_res"), _resample_inv("bicubic")),
    "resample": (("resample", "final_res"), _resample_inv("linear")),
    "wiener": ((), _fixed("face.wiener")),
    "uwiener": (("ks",), _fixed("face.wiener")),
    "blindwiener": ((), _fixed("face.wiener")),
    "rldeconv": ((), _fixed("face.richardson_lucy")),
    "wavelet": ((), _fixed("face.wavelet_denoise")),
    "interpolate_empty": (
        ("min_confidence", "threshold", "empty"),
        lambda p, ctx: ("face.neighbour_interpolation", {"value": ctx.number(p, "empty", 0, integer=True)}),
    ),
    "learn_permutation": (("max_img_b", "max_img_c"), _fixed("face.learned_permutation")),
    "mprnet": ((), _dropped("MPRNet (external repository and weights): no bioanon counterpart")),
    "stripformer": ((), _dropped("Stripformer (external repository and weights): no bioanon counterpart")),
    "dicsr": ((), _dropped("DIC-SR (external repository and weights): no bioanon counterpart")),
    "pix2pix": (("epochs",), _dropped("pix2pix (external repository): no bioanon counterpart")),
    "normsparsity": ((), _dropped("needs MATLAB: no bioanon counterpart")),
}


# -- privacy (recognizers) -------------------------------------------------------------------------------

_SKLEARN: dict[str, tuple[str, dict[str, Any]]] = {
    "svm": ("gait.svm", {"kernel": "rbf", "c": 1.0}),
    "randomForest": ("gait.random_forest", {"n_estimators": 10, "seed": 0}),
    "kNeighbors": ("gait.knn", {"k": 3}),
}


def _sklearn_features(p: dict[str, Any], ctx: _Ctx, name: str) -> dict[str, Any]:
    rep = ctx.choice(p, "feature_rep", "simple", ("none", "flatten", "simple", "segment"))
    if rep == "segment":
        raise _Unmappable("the 'segment' features (per-window statistics of body-part means) have no gait counterpart")
    if rep == "none":
        ctx.note(f"{name}.feature_rep", "approximate", "'none' (raw 1-D poses) is read as flatten")
    ctx.note(
        f"{name}.feature_rep",
        "approximate",
        "SEBA's features are not translation-invariant: centering = "
        "'none' reproduces them; bioanon's default 'frame' gives a stronger attacker",
    )
    return {"features": "flatten" if rep in ("none", "flatten") else "simple", "centering": "none"}


def _motion_privacy(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    clf = ctx.choice(p, "classifier", "svm", ("svm", "randomForest", "decisionTree", "kNeighbors", "gNaiveBayes"))
    if clf not in _SKLEARN:
        raise _Unmappable(f"classifier {clf!r} has no gait counterpart (svm, randomForest, kNeighbors do)")
    method_id, params = _SKLEARN[clf]
    if clf == "kNeighbors":
        ctx.note(
            "sklearn.classifier",
            "approximate",
            "SEBA's KNN(3) votes; gait.knn averages the k nearest enrolled samples per class",
        )
    if "attribute_conversion" in p:
        ctx.note("sklearn.attribute_conversion", "ignored", "bioanon encodes the label's values itself")
    out = {**_sklearn_features(p, ctx, "sklearn"), **params}
    out["_seba_cv"] = ctx.number(p, "number_of_splits", 10, integer=True)  # used by add_fidelity_options
    return method_id, out


def _pcasvm(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    out: dict[str, Any] = {"standardize": True, "n_components": 1.0, "kernel": "rbf", "c": 1.0}
    for key, value in p.items():
        if key == "pca__n_components":
            out["n_components"] = value if value is not None else 1.0
        elif key == "svm__kernel":
            if value not in ("linear", "rbf"):
                ctx.note("pcasvm.svm__kernel", "dropped", f"kernel {value!r}: any.pca_svm has linear and rbf")
            else:
                out["kernel"] = value
        elif key == "svm__C":
            out["c"] = float(value)
        else:
            ctx.note(f"pcasvm.{key}", "dropped", "no counterpart in any.pca_svm")
    return "any.pca_svm", out


def _arcface(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note(
        "arcface",
        "approximate",
        "SEBA trains insightface's r50 (combined margin 0.4, 512-d, batch 128, "
        "lr 0.1, 40 epochs, fp16); face.arcface preset 'paper' is a ResNet-50 at 112×112 with an additive "
        "angular margin",
    )
    return "face.arcface", {"preset": "paper", "epochs": 40, "batch_size": 128}


def _learnpcasvm(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note(
        "learnpcasvm",
        "approximate",
        "SEBA searches PCA size, whitening, C, class weights and kernel with "
        "BayesSearchCV (64 steps); bioanon has no search: any.pca_svm with SEBA's pcasvm defaults",
    )
    return _pcasvm({}, ctx)


MOTION_PRIVACY: dict[str, tuple[tuple[str, ...], Mapper]] = {
    "sklearn": (
        ("feature_rep", "classifier", "number_of_splits", "attribute", "attribute_conversion"),
        _motion_privacy,
    ),
}
FACE_PRIVACY: dict[str, tuple[tuple[str, ...], Mapper]] = {
    "pcasvm": ((), _pcasvm),  # any sklearn Pipeline parameter (step__param)
    "learnpcasvm": ((), _learnpcasvm),
    "arcface": ((), _arcface),
    "frknn": ((), _fixed("face.dlib_knn", k=0)),
    "landmarks": ((), _dropped("MediaPipe landmarks: no bioanon counterpart")),
    "learnlandmarks": ((), _dropped("MediaPipe landmarks: no bioanon counterpart")),
    "deepface": (
        ("model", "detector", "distance"),
        _dropped(
            "deepface's pretrained VGG-Face (patched deepface 0.0.65): no bioanon counterpart; face.arcface or "
            "face.dlib_knn are strong attackers"
        ),
    ),
    "rekognition": ((), _dropped("AWS Rekognition (a cloud account): no bioanon counterpart")),
    "ssim": ((), _dropped("SEBA's ssim recognizer can never be right (it returns point names, not identities)")),
}


# -- utility ---------------------------------------------------------------------------------------------

_UTIL_CLASSIFIERS = {"randomForest": "random_forest", "kNeighbors": "knn"}


def _motion_attribute_utility(name: str) -> Mapper:
    def mapper(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
        if "attribute" not in p:
            raise ctx.error(f"{name}: missing required parameter 'attribute'")
        clf = p.get("classifier", "svm")
        if clf not in _UTIL_CLASSIFIERS:
            ctx.note(
                f"{name}.classifier",
                "approximate",
                f"classifier {clf!r}: gait.attribute_accuracy has "
                f"random_forest, logistic_regression and knn; random_forest is used",
            )
        feats = _sklearn_features(p, ctx, name)
        return "gait.attribute_accuracy", {
            "attribute": str(p["attribute"]),
            "features": feats["features"],
            "centering": "none",
            "classifier": _UTIL_CLASSIFIERS.get(clf, "random_forest"),
        }

    return mapper


_DISTANCE_KEYS = ("distance", "type", "metric", "method")


def _time_series(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    key = next((k for k in _DISTANCE_KEYS if k in p), None)
    kind = p.get(key, "dtw") if key else "dtw"
    ids = {"dtw": "gait.dtw", "frechet": "gait.frechet", "euclidian": "gait.euclidean", "euclidean": "gait.euclidean"}
    if kind not in ids:
        raise ctx.error(f"time_series_distance: expected dtw, frechet or euclidian, got {kind!r}")
    if "step" in p:
        ctx.note("time_series_distance.step", "dropped", "bioanon's Fréchet distance uses every frame")
    return ids[kind], {"per": "joint"}


MOTION_UTILITY: dict[str, tuple[tuple[str, ...], Mapper]] = {
    "sklearn": (
        ("attribute", "attribute_conversion", "classifier", "feature_rep", "number_of_splits"),
        _motion_attribute_utility("sklearn"),
    ),
    "datapoint_classification": (
        ("attribute", "classifier", "feature_rep", "number_of_splits"),
        _motion_attribute_utility("datapoint_classification"),
    ),
    "time_series_distance": (_DISTANCE_KEYS + ("step",), _time_series),
}


def _lpips(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note(
        "lpips",
        "approximate",
        "LPIPS needs pretrained AlexNet/VGG weights (and SEBA scales its input "
        "wrongly); face.perceptual_similarity trains its own small auto-encoder",
    )
    return "face.perceptual_similarity", {}


def _detection(p: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    ctx.note(
        "detection",
        "approximate",
        "SEBA's MediaPipe detector confidence; bioanon's is OpenCV's Haar cascade confidence",
    )
    return "face.detection_confidence", {}


FACE_UTILITY: dict[str, tuple[tuple[str, ...], Mapper]] = {
    "ssim": ((), _fixed("face.ssim")),
    "lpips": (("net",), _lpips),
    "detection": ((), _detection),
    "attributes": (
        (),
        _dropped(
            "deepface's emotion, race, sex and age models: no bioanon counterpart; "
            "face.attribute_accuracy measures one stored attribute"
        ),
    ),
    "landmarks_mediapipe": ((), _dropped("MediaPipe landmarks: no bioanon counterpart")),
    "landmarks_retinaface": ((), _dropped("RetinaFace landmarks: no bioanon counterpart")),
}


# -- selectors -------------------------------------------------------------------------------------------


def _map_selector(sel: Any, ctx: _Ctx) -> tuple[dict[str, Any], int | None]:
    """(bioanon selector table, subject count or None = all)."""
    if not isinstance(sel, Mapping) or "name" not in sel:
        raise ctx.error("selector: expected a mapping with a name (and params)")
    name, p = sel["name"], sel.get("params") or {}
    known = {
        "random": ("ids", "min_imgs_per_id", "max_imgs_per_id"),
        "classification": ("ids", "key"),
        "center": ("ids", "attributes", "encoding"),
        "greedy": ("ids", "attributes", "encoding"),
        "distinctive": ("ids", "min_imgs_per_id"),
        "mostpoints": ("ids", "offset"),
        "datapoint_type": ("selected_types",),
        "full": (),
    }
    _check_known(name, p, known.get(name), known, "selector", ctx)
    ids = ctx.number(p, "ids", 0, integer=True) if "ids" in p else None
    for key in ("min_imgs_per_id", "max_imgs_per_id"):
        if p.get(key) is not None:
            ctx.note(
                f"{name}.{key}",
                "dropped",
                "bioanon selects whole subjects; subjects with too few samples "
                "to enrol and test are kept out automatically",
            )
    if name == "random":
        return {"id": "any.select_random"}, ids
    if name == "classification":
        return {"id": "any.select_classification", "params": {"_seba_key": p.get("key", "classification_hitrate")}}, ids
    if name in ("center", "greedy"):
        if "encoding" in p:
            ctx.note(f"{name}.encoding", "ignored", "bioanon one-hot encodes categorical attributes itself")
        if name == "greedy":
            ctx.note(
                "greedy",
                "approximate",
                "SEBA's greedy is max-min farthest-point; bioanon's metadata "
                "selector adds the subject farthest from the chosen ones' mean (SEBA's center)",
            )
        attributes = p.get("attributes") or []
        return {"id": "any.select_metadata", "params": {"attributes": [str(a) for a in attributes]}}, ids
    if name == "distinctive":
        ctx.note(
            "distinctive",
            "approximate",
            "SEBA scores subjects with ArcFace embeddings; bioanon's "
            "distinctive selector uses its own recognizer (any.lda_cosine)",
        )
        return {"id": "any.select_distinctive"}, ids
    if name == "full":
        return {"id": "any.select_random"}, None
    ctx.note(
        name,
        "dropped",
        {
            "mostpoints": "no selector ranks subjects by their number of samples",
            "datapoint_type": "selects samples by type, not subjects: filter the data set instead",
        }[name]
        + "; random selection is used",
    )
    return {"id": "any.select_random"}, ids


# -- shared ----------------------------------------------------------------------------------------------


def _check_known(
    name: Any, params: Any, known: tuple[str, ...] | None, table: Mapping[str, Any], what: str, ctx: _Ctx
) -> None:
    if not isinstance(name, str) or known is None:
        close = difflib.get_close_matches(str(name), list(table), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(table))}"
        raise ctx.error(f"unknown SEBA {what} {name!r}; {hint}")
    if not isinstance(params, Mapping):
        raise ctx.error(f"{name}: params: expected a mapping, got {type(params).__name__}")
    if not known:  # () = any parameter (or none documented)
        return
    for key in params:
        if key == "opt" or key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"SEBA's {name} takes {', '.join(known)}"
        raise ctx.error(f"unknown parameter {key!r} of SEBA {what} {name!r}; {hint}")


def _map_method(
    table: Mapping[str, tuple[tuple[str, ...], Mapper]], what: str, spec: Any, ctx: _Ctx
) -> tuple[str, dict[str, Any]]:
    """(bioanon id, params) of a SEBA ``{name, params}``; raises _Unmappable or ConfigError."""
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise ctx.error(f"expected a mapping with a name (and params) for the {what}")
    name, params = spec["name"], spec.get("params") or {}
    entry = table.get(name) if isinstance(name, str) else None
    _check_known(name, params, entry[0] if entry else None, table, what, ctx)
    if isinstance(params.get("opt"), Mapping) and params["opt"]:
        ctx.note(f"{name}.opt", "ignored", "SEBA's opt settings do not affect results (paths, GPUs, batches)")
    return entry[1]({k: v for k, v in params.items() if k != "opt"}, ctx)  # type: ignore[index]


def _int_seed(value: Any) -> int:
    """A SEBA seed (any YAML scalar) as a bioanon seed (an integer ≥ 0): integers as they are, other text as
    its CRC-32."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    text = str(value)
    if text.isdigit():
        return int(text)
    return zlib.crc32(text.encode("utf-8"))


# --------------------------------------------------------------------------------------------------- traits

_TRAIT_TABLES = {
    "motion": {
        "anonymization": MOTION_ANON,
        "privacy": MOTION_PRIVACY,
        "utility": MOTION_UTILITY,
        "deanonymization": {},
    },
    "face": {
        "anonymization": FACE_ANON,
        "privacy": FACE_PRIVACY,
        "utility": FACE_UTILITY,
        "deanonymization": FACE_DEANON,
    },
}


def _names_trait(config: Mapping[str, Any]) -> str | None:
    """The trait the config's method names belong to (None when they fit both, e.g. noop alone)."""
    votes = set()
    for kind in ("anonymization", "privacy", "utility", "deanonymization"):
        spec = config.get(kind)
        name = spec.get("name") if isinstance(spec, Mapping) and not spec.get("_implied") else None
        if not isinstance(name, str):
            continue
        fits = {t for t, tables in _TRAIT_TABLES.items() if name in tables[kind]}
        if len(fits) == 1:
            votes |= fits
    return votes.pop() if len(votes) == 1 else None


def _meta_trait(data_dir: Path, dataset: str) -> str | None:
    meta = data_dir / f"{dataset}.meta.yaml"
    if not meta.is_file():
        return None
    content = read_seba(meta)
    if isinstance(content, Mapping):
        if isinstance(content.get("original_meta"), Mapping):
            content = {**content["original_meta"], **content}
        trait = content.get("trait", content.get("datatype"))
        return trait if trait in _TRAIT_TABLES else None
    return None


def _image_size(folder: Path) -> tuple[int, int] | None:
    """(height, width) of the first image of a SEBA face set, when the set and Pillow are at hand."""
    if not folder.is_dir():
        return None
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with the face plugin
        return None
    for f in sorted(folder.iterdir()):
        if f.suffix.lower() in (".jpg", ".jpeg", ".png"):
            try:
                with Image.open(f) as im:
                    return (im.height, im.width)
            except OSError:  # unreadable: try the next one
                continue
    return None


# --------------------------------------------------------------------------------------------------- import


@attrs.define
class _Mapped:
    """One SEBA entry round, mapped."""

    where: str
    key: tuple[str, ...]  # what must agree for entries to share a config
    enroll: float | None  # the privacy enrolment share (None for utility entries)
    anonymizer: tuple[str, str, dict[str, Any]] | None  # (SEBA name, id, params)
    recognizer: tuple[str, str, dict[str, Any]] | None
    utility: tuple[str, str, dict[str, Any]] | None
    subject_count: int | None
    fixed: dict[str, Any]  # the config fields the key stands for
    notes: list[Note]


def _implied_method(kind: str, spec: dict[str, Any], trait: str, ctx: _Ctx) -> dict[str, Any] | None:
    """The privacy (arcface) or utility (detection) method SEBA's generator adds to an experiment config: face
    methods, which SEBA cannot run on a motion set. For motion: SEBA's motion attacker (sklearn, defaults)
    instead of arcface, and no utility."""
    if spec["name"] in _TRAIT_TABLES[trait][kind]:
        return spec
    if kind == "privacy":
        ctx.note(
            spec["name"],
            "approximate",
            "SEBA's generate_run_configs adds arcface, a face method (SEBA "
            "fails on a motion set); SEBA's motion attacker sklearn with its defaults is used",
        )
        return {"name": "sklearn", "params": {}}
    ctx.note(
        spec["name"],
        "dropped",
        "SEBA's generate_run_configs adds the face detection utility, which SEBA cannot run on a motion set",
    )
    return None


_REQUIRED = ("exp", "dataset", "seed", "selector", "anonymization", "rates")


def import_seba(
    path: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    trait: str | None = None,
    fidelity: bool = True,
    out_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
) -> SebaImport:
    """Convert a SEBA run config (or experiment config) into bioanon configs.

    Parameters
    ----------
    path : the SEBA YAML file.
    data_dir : SEBA's ``data/`` folder (default: ``data`` beside the file, SEBA's working directory); its
        ``<set>.meta.yaml`` files tell each set's trait, its face images their size.
    trait : ``"motion"`` or ``"face"`` for sets whose meta file is not at hand and whose method names fit both.
    fidelity : add the options that reproduce SEBA's attacker and selector (:func:`add_fidelity_options`).
    out_dir : where the configs will be written; the data path is written relative to it (default: absolute).
    name : the configs' name (default: the file's stem; several configs get ``-1``, ``-2``, …).
    """
    file = Path(path)
    if trait is not None and trait not in _TRAIT_TABLES:
        raise ConfigError(f"trait must be one of {', '.join(_TRAIT_TABLES)}, got {trait!r}")
    data = Path(data_dir) if data_dir is not None else file.resolve().parent / "data"
    doc = read_seba(file)
    mapped: list[_Mapped] = []
    unused: list[Note] = []
    for where, repeat, template in _run_entries(doc, str(file)):
        if repeat == 0:
            unused.append(Note(where, "repeat", "dropped", "repeat: 0 runs nothing in SEBA"))
            continue
        for r in range(repeat):
            entry = _Entry(where, repeat, template, r)
            m, notes = _map_entry(entry, file, data, trait)
            if m is not None:
                mapped.append(m)
            else:
                unused += [n for n in notes if n not in unused]
    return _build(mapped, unused, file, data, fidelity, out_dir, name)


def _map_entry(entry: _Entry, file: Path, data: Path, trait_arg: str | None) -> tuple[_Mapped | None, list[Note]]:
    """The entry round mapped (None when its anonymization or its privacy/utility method has no counterpart),
    and its notes."""
    c, where = entry.config, entry.where
    notes: list[Note] = []
    ctx = _Ctx(where, notes, None, str(file))
    for key in _REQUIRED:
        if key not in c:
            raise ctx.error(f"missing required key config.{key}")
    unknown = set(map(str, c)) - set(_REQUIRED) - {"privacy", "utility", "deanonymization", "cleanup"}
    if unknown:
        raise ctx.error(
            f"unknown keys {sorted(unknown)} in config (SEBA reads exp, dataset, seed, selector, "
            f"anonymization, deanonymization, privacy, utility, rates, cleanup)"
        )
    exp = c["exp"]
    if exp not in ("anon", "deanon"):
        raise ctx.error(f"config.exp: expected anon or deanon, got {exp!r}")
    if "privacy" not in c and "utility" not in c:
        raise ctx.error("config: needs a privacy or a utility method")
    if exp == "deanon" and "deanonymization" not in c:
        raise ctx.error("config.deanonymization: missing (exp: deanon needs one)")
    dataset = c["dataset"]
    if not isinstance(dataset, str) or not dataset or "/" in dataset:
        raise ctx.error(f"config.dataset: expected the name of a set under data/, got {dataset!r}")
    trait = _meta_trait(data, dataset) or trait_arg or _names_trait(c)
    if trait is None:
        raise ctx.error(
            f"cannot tell the trait of data set {dataset!r}: {data / (dataset + '.meta.yaml')} is "
            f"not there and the method names fit both motion and face; give --trait or --data"
        )
    named = _names_trait(c)
    if named is not None and named != trait:
        raise ctx.error(f"data set {dataset!r} holds {trait} data, but the methods are SEBA {named} methods")
    tables = _TRAIT_TABLES[trait]
    if trait == "face":
        ctx.image_size = _image_size(data / dataset)

    rates = c["rates"]
    if not isinstance(rates, Mapping):
        raise ctx.error("config.rates: expected a mapping with anonbg, attacker and enroll")
    for key in ("anonbg", "attacker", "enroll"):
        if key not in rates:
            raise ctx.error(f"missing required key config.rates.{key}")
    anonbg, attacker = (ctx.number(rates, k, 0) for k in ("anonbg", "attacker"))
    enroll = ctx.number(rates, "enroll", 0)
    if not (0 <= anonbg and 0 < attacker and anonbg + attacker < 1):
        raise ctx.error(
            f"config.rates: bioanon needs anonbg ≥ 0, attacker > 0 and anonbg + attacker < 1 (the "
            f"evaluation set gets the rest), got anonbg {anonbg}, attacker {attacker}"
        )
    if anonbg == 0:
        notes.append(
            Note(
                where,
                "rates.anonbg",
                "approximate",
                "SEBA turns an empty background into a full copy (bug); bioanon's background = 0 means none",
            )
        )

    # the privacy / utility method (privacy wins, as in SEBA)
    recognizer = utility = None
    label = "subject"
    kind = "privacy" if "privacy" in c else "utility"
    if "privacy" in c and "utility" in c:
        notes.append(Note(where, "utility", "dropped", "SEBA runs privacy when both are given; so does this"))
    spec = c[kind]
    ctx.where = f"{where}.{kind}"
    if isinstance(spec, Mapping) and spec.get("_implied"):
        spec = _implied_method(kind, {k: v for k, v in spec.items() if k != "_implied"}, trait, ctx)
    if spec is None:
        return None, notes
    try:
        method_id, params = _map_method(tables[kind], f"{trait} {kind} method", spec, ctx)
        entry_name = spec["name"]
        if kind == "privacy":
            recognizer = (entry_name, method_id, params)
            attribute = (spec.get("params") or {}).get("attribute", "identity")
            if attribute != "identity":
                label = str(attribute)
        else:
            utility = (entry_name, method_id, params)
    except _Unmappable as exc:
        notes.append(Note(ctx.where, str(spec.get("name")), "dropped", str(exc)))
    if kind == "privacy" and not 0 < enroll < 1:
        notes.append(
            Note(
                f"{where}.rates",
                "enroll",
                "dropped",
                f"enroll {enroll}: bioanon enrols a share in (0, 1) of each subject's samples; 0.5 is used",
            )
        )
        enroll = 0.5

    ctx.where = f"{where}.anonymization"
    anonymizer = None
    try:
        anon_id, anon_params = _map_method(tables["anonymization"], f"{trait} anonymization", c["anonymization"], ctx)
        anonymizer = (c["anonymization"]["name"], anon_id, anon_params)
    except _Unmappable as exc:
        notes.append(Note(ctx.where, str(c["anonymization"].get("name")), "dropped", str(exc)))

    deanon = None
    scenarios = ["parrot"]
    if exp == "anon" and "deanonymization" in c:
        notes.append(
            Note(
                f"{where}.deanonymization",
                str((c["deanonymization"] or {}).get("name")),
                "ignored",
                "SEBA's anon experiment does not de-anonymize (use exp: deanon)",
            )
        )
    if exp == "deanon":
        ctx.where = f"{where}.deanonymization"
        spec = c["deanonymization"]
        if isinstance(spec, Mapping) and spec.get("name") == "noop":
            scenarios = ["naive"]
        else:
            try:
                d_id, d_params = _map_method(tables["deanonymization"], f"{trait} de-anonymization", spec, ctx)
                deanon = {"id": d_id, "name": spec["name"], "params": d_params}
                scenarios = ["deanon"]
            except _Unmappable as exc:
                notes.append(Note(ctx.where, str(spec.get("name")), "dropped", str(exc)))
                return None, notes

    ctx.where = f"{where}.selector"
    selector, count = _map_selector(c["selector"], ctx)

    seed_template = entry.template.get("seed")
    per_round = _has_round(seed_template)
    seed = _int_seed(_substitute(seed_template, "0"))
    if not isinstance(seed_template, int) and not str(_substitute(seed_template, "0")).isdigit():
        notes.append(
            Note(
                where,
                "seed",
                "approximate",
                f"seed {seed_template!r} is not an integer: bioanon seeds "
                f"are integers, CRC-32 of round 0's seed = {seed} is used",
            )
        )
    repeats = entry.repeat if per_round else 1
    if entry.repeat > 1 and not per_round:
        notes.append(
            Note(
                where,
                "repeat",
                "approximate",
                f"repeat {entry.repeat} without $ROUND in the seed "
                f"reruns SEBA on the same split (and its cache reuses the anonymized sets); bioanon is "
                f"seeded, so one run gives the same numbers: repeats = 1 (raise it for independent "
                f"splits)",
            )
        )
    if entry.repeat > 1 and _has_round({k: v for k, v in entry.template.items() if k != "seed"}):
        notes.append(
            Note(
                where,
                "$ROUND",
                "approximate",
                "$ROUND outside the seed: SEBA pairs round r's split "
                "with round r's value; bioanon crosses the values (a grid or several methods) with "
                "the repeats",
            )
        )
    fixed = {
        "exp": exp,
        "trait": trait,
        "dataset": dataset,
        "seed": seed,
        "repeats": repeats,
        "label": label,
        "scenarios": scenarios,
        "background": anonbg,
        "attacker": attacker,
        "selector": selector,
        "deanonymizer": deanon,
    }
    group_key = tuple(json.dumps(fixed[k], sort_keys=True) for k in sorted(fixed) if k != "label")
    if anonymizer is None or (recognizer is None and utility is None):
        return None, notes
    return _Mapped(
        where, group_key, enroll if kind == "privacy" else None, anonymizer, recognizer, utility, count, fixed, notes
    ), notes


def _unique(name: str, used: set[str]) -> str:
    out, k = name, 2
    while out in used:
        out, k = f"{name}-{k}", k + 1
    used.add(out)
    return out


def _methods(items: list[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Distinct (SEBA name, id, params) as method tables named after SEBA (``-2``, … when repeated)."""
    used: set[str] = set()
    out, seen = [], set()
    for seba, method_id, params in items:
        fingerprint = json.dumps([method_id, params], sort_keys=True)
        if fingerprint in seen:
            continue
        seen.add(fingerprint)
        table: dict[str, Any] = {"id": method_id, "name": _unique(seba, used)}
        if params:
            table["params"] = params
        out.append(table)
    return out


def _anonymizers(items: list[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Anonymizer tables: the distinct settings of one SEBA method that differ in exactly one bioanon
    parameter become one table with a grid; other differing settings become tables of their own."""
    by_method: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for seba, method_id, params in items:
        settings = by_method.setdefault((seba, method_id), [])
        if params not in settings:
            settings.append(params)
    used: set[str] = set()
    out: list[dict[str, Any]] = []
    for (seba, method_id), settings in by_method.items():
        keys = {frozenset(s) for s in settings}
        varying = [k for k in settings[0] if len({json.dumps(s.get(k), sort_keys=True) for s in settings}) > 1]
        if len(settings) > 1 and len(keys) == 1 and len(varying) == 1:
            fixed = {k: v for k, v in settings[0].items() if k != varying[0]}
            table: dict[str, Any] = {"id": method_id, "name": _unique(seba, used)}
            if fixed:
                table["params"] = fixed
            table["grid"] = {varying[0]: [s[varying[0]] for s in settings]}
            out.append(table)
            continue
        for s in settings:
            table = {"id": method_id, "name": _unique(seba, used)}
            if s:
                table["params"] = s
            out.append(table)
    return out


# the trait's default SEBA attacker, for groups of utility entries only (bioanon always attacks)
_DEFAULT_ATTACKER = {
    "motion": (
        "sklearn",
        "gait.svm",
        {"features": "simple", "centering": "none", "kernel": "rbf", "c": 1.0, "_seba_cv": 10},
    ),
    "face": ("arcface", "face.arcface", {"preset": "paper", "epochs": 40, "batch_size": 128}),
}


def _config(
    cname: str, members: list[_Mapped], data: Path, out_dir: Any
) -> tuple[dict[str, Any] | None, list[Note], list[tuple[tuple[str | int, ...], str, Any, str]]]:
    """(config dict or None, notes, fidelity options) of one group of entry rounds."""
    notes: list[Note] = []
    for m in members:
        notes += [n for n in m.notes if n not in notes]
    privacy = [m for m in members if m.recognizer is not None]
    first = (privacy or members)[0]
    f = first.fixed
    where = ", ".join(dict.fromkeys(m.where for m in members))
    if not [m for m in members if m.anonymizer is not None]:
        notes.append(
            Note(
                where,
                "anonymization",
                "dropped",
                "no anonymization of these entries could be mapped: no config written",
            )
        )
        return None, notes, []

    data_path = Path(os.path.abspath(data))
    shown = os.path.relpath(data_path, os.path.abspath(out_dir)) if out_dir is not None else str(data_path)
    if f["trait"] == "motion":
        dataset = {"source": "gait.seba", "path": shown, "params": {"set": f["dataset"]}}
        notes.append(
            Note(
                where,
                f"dataset {f['dataset']}",
                "approximate",
                "gait.seba resamples every sequence to "
                "frames = 100 on load; SEBA keeps each recording's frames: set "
                "dataset.params.frames to your sequences' length to stay close",
            )
        )
    else:
        dataset = {"source": "face.seba", "path": shown, "params": {"set": f["dataset"]}}
    enrolments = sorted(cast("set[float]", {m.enroll for m in privacy}))  # privacy rounds have a share
    enrolment = enrolments[0] if enrolments else 0.5
    recognizers = [m.recognizer for m in privacy if m.recognizer is not None]  # (privacy holds only those)
    if not recognizers:
        recognizers = [_DEFAULT_ATTACKER[f["trait"]]]
        notes.append(
            Note(
                where,
                "privacy",
                "approximate",
                f"only utility entries: bioanon always attacks, so "
                f"SEBA's default attacker ({recognizers[0][0]}) is added",
            )
        )
    bg, att = f["background"], f["attacker"]
    config: dict[str, Any] = {
        "name": cname,
        "seed": f["seed"],
        "repeats": f["repeats"],
        "label": f["label"],
        "scenarios": f["scenarios"],
        "dataset": dataset,
        "rates": {
            "background": bg,
            "attacker": att,
            "evaluation": round(1.0 - bg - att, 12),
            "enrolment": enrolment,
            "rounding": "seba",  # SEBA's int(N * share) subject counts (100 × 0.58 -> 57)
        },
        "anonymizers": _anonymizers([m.anonymizer for m in members if m.anonymizer is not None]),
    }
    if f["deanonymizer"] is not None:
        config["deanonymizer"] = f["deanonymizer"]
    options: list[tuple[tuple[str | int, ...], str, Any, str]] = []
    config["recognizers"] = _methods(recognizers)
    for i, r in enumerate(config["recognizers"]):
        folds = r.get("params", {}).pop("_seba_cv", None)
        if folds is not None:
            path = ("recognizers", i, "params")
            why = (
                f"SEBA's sklearn attacker keeps the best of {folds} stratified folds of the enrolment data "
                f"and scores with predict_proba"
            )
            options += [(path, "cv_folds", folds, why), (path, "keep", "best", why), (path, "scores", "proba", why)]
            if r.get("params", {}).get("features") == "simple":
                options.append(
                    (
                        path,
                        "signs",
                        "svd",
                        "SEBA's simple features keep the sign scikit-learn's PCA gives each walk's first principal "
                        "direction (a subject's walks may get opposite signs); bioanon aligns them (stronger)",
                    )
                )
            options.append(
                (
                    (),
                    "attacker_fit",
                    "enrolment",
                    "SEBA's motion attacker never uses the attacker set: "
                    "it is trained on the (anonymized) enrolment part of the selected identities",
                )
            )
    selector = copy.deepcopy(f["selector"])
    key = selector.get("params", {}).pop("_seba_key", None)
    if "params" in selector and not selector["params"]:
        del selector["params"]
    if key is not None:
        why = f"SEBA's classification selector keeps the subjects with the highest stored attribute {key!r}"
        options += [
            (("selection", "selectors", 0, "params"), "by", key, why),
            (("selection", "selectors", 0, "params"), "order", "descending", why),
        ]
    counts = {m.subject_count for m in members}
    if None in counts and len(counts) > 1:
        notes.append(
            Note(
                where,
                "selector.ids",
                "approximate",
                "some entries select every subject, others a number; bioanon evaluates the listed numbers only",
            )
        )
    small = sorted(c for c in counts if c is not None and c < 2)
    if small:
        notes.append(Note(where, "selector.ids", "dropped", f"ids {small}: bioanon needs at least 2 subjects"))
    config["selection"] = {
        "selectors": [selector],
        "subject_counts": sorted((c for c in counts if c is not None and c >= 2), reverse=True),
        "random_draws": 1,
    }
    utility = [m.utility for m in members if m.utility is not None]
    if utility:
        config["utility"] = _methods(utility)
    unique = []
    for o in options:
        if o not in unique:
            unique.append(o)
    return config, notes, unique


def add_fidelity_options(config: dict[str, Any], options: list[tuple[tuple[str | int, ...], str, Any, str]]) -> None:
    """Set the SEBA fidelity ``options`` — ``(path, key, value, why)``, ``path`` a tuple of keys and indices
    into ``config`` (``()`` = top level) — in ``config``. Kept apart from the mapping so configs can be made
    without them (``fidelity=False``) for a bioanon that lacks these options."""
    for path, key, value, _why in options:
        target: Any = config
        for step in path:
            if isinstance(target, dict) and step not in target:
                target[step] = {}
            target = target[step]
        target[key] = value
    if "attacker_fit" in config:  # a top-level key: keep it with the other scalars, before the tables
        value = config.pop("attacker_fit")
        items = list(config.items())
        at = next(i for i, (k, _) in enumerate(items) if k == "dataset")
        config.clear()
        config.update(items[:at] + [("attacker_fit", value)] + items[at:])


def _build(
    mapped: list[_Mapped], unused: list[Note], file: Path, data: Path, fidelity: bool, out_dir: Any, name: str | None
) -> SebaImport:
    groups: dict[tuple[str, ...], list[_Mapped]] = {}
    for m in mapped:
        if m.enroll is not None:
            groups.setdefault(m.key + (repr(m.enroll), m.fixed["label"]), []).append(m)
    for m in mapped:  # utility entries join the one privacy group they match
        if m.enroll is None:
            matches = [k for k in groups if k[: len(m.key)] == m.key]
            target = matches[0] if len(matches) == 1 else m.key + ("None", m.fixed["label"])
            groups.setdefault(target, []).append(m)
    base = name or file.stem.removesuffix(".runconfig").removesuffix(".config").replace(".", "-")
    configs: list[ImportedConfig] = []
    for i, members in enumerate(groups.values()):
        cname = base if len(groups) == 1 else f"{base}-{i + 1}"
        cfg, notes, options = _config(cname, members, data, out_dir)
        if cfg is None:
            unused += [n for n in notes if n not in unused]
            continue
        if fidelity:
            add_fidelity_options(cfg, options)
        else:
            for path, key, value, why in options:
                where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "(top)"
                notes.append(Note(where, f"{key} = {value!r}", "fidelity", f"left out (fidelity off): {why}"))
        entries = list(dict.fromkeys(m.where for m in members))
        configs.append(ImportedConfig(cname, cfg, entries, _merge_notes(notes, entries)))
    unused = _merge_notes(unused)
    for c in configs:
        c.unused = unused
    return SebaImport(str(file), configs, unused)


def _merge_notes(notes: list[Note], entries: list[str] | None = None) -> list[Note]:
    """One note per (SEBA key, status, why), its places joined; places in every one of ``entries`` (the
    config's) become ``every entry`` (with the same suffix, e.g. ``every entry.privacy``)."""
    merged: dict[tuple[str, str, str], list[str]] = {}
    for n in notes:
        places = merged.setdefault((n.seba, n.status, n.why), [])
        for w in n.where.split(", "):
            if w not in places:
                places.append(w)
    out = []
    for (seba, status, why), places in merged.items():
        if entries and len(entries) > 1:
            by_suffix: dict[str, set[str]] = {}
            for p in places:
                e = next((e for e in entries if p == e or p.startswith(e + ".")), None)
                if e is not None:
                    by_suffix.setdefault(p[len(e) :], set()).add(e)
            every = [suffix for suffix, es in by_suffix.items() if es == set(entries)]
            places = [p for p in places if not any(p.endswith(x) and p[: len(p) - len(x)] in entries for x in every)]
            places = [f"every entry{x}" for x in every] + places
        out.append(Note(compact_labels(places), seba, status, why))
    return out


_INDEX = re.compile(r"^(.*)\[(\d+)\]([^\[]*)$")


def compact_labels(places: list[str]) -> str:
    """``entries[0].privacy, entries[1].privacy, entries[2].privacy`` → ``entries[0-2].privacy``."""
    groups: dict[tuple[str, str], list[int]] = {}
    others: list[str] = []
    for p in places:
        m = _INDEX.match(p)
        if m:
            groups.setdefault((m.group(1), m.group(3)), []).append(int(m.group(2)))
        else:
            others.append(p)
    out = []
    for (head, tail), idx in groups.items():
        idx = sorted(set(idx))
        runs: list[str] = []
        start = prev = idx[0]
        for i in idx[1:] + [None]:
            if i is not None and i == prev + 1:
                prev = i
                continue
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            if i is not None:
                start = prev = i
        out.append(f"{head}[{','.join(runs)}]{tail}")
    return ", ".join(out + others)

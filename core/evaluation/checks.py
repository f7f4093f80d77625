"""Checks that run before any computation: ``bioanon validate`` and the start of every evaluation.

:func:`~bioanon.evaluation.config.load_config` checks the config itself (keys, ids, parameters and grids value
by value, rates, paths, each method's trait against the data set's, the optional packages methods declare, the
label and attribute names against the columns the data set's source declares).
This module adds what needs more than the config: whether the results folder can be written, whether the
devices asked for exist on this machine, whether a method's existing ``weights`` file loads with the safe loader,
and — once the data are loaded — whether every method finds a payload
it reads, the label column exists, and each method's own preflight (e.g. a user's weights file that must fit
the network, checked without computing anything) passes.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from ..fileio import output_problem
from .config import background_fit_problems, evaluation_subjects, raise_problems


def reads_payload(cls: Any, payload_names: list[str], viewed: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether method class ``cls`` reads one of the table's payloads (``*`` or no declaration: any). A
    trait-agnostic method of flattened payloads also reads the payloads in ``viewed``: those a plugin gives a
    feature view (``register_payload_features``, e.g. ``audio``)."""
    from ..methods import FLAT_PAYLOADS

    wanted = set(cls.payloads)
    if not wanted or "*" in wanted or wanted & set(payload_names):
        return True
    return cls.trait == "any" and bool(wanted & set(FLAT_PAYLOADS)) and bool(viewed & set(payload_names))


def _method_groups(cfg: Any) -> list[tuple[str, Any]]:
    """(key path, spec) of every configured method that runs on the data."""
    out = [(f"anonymizers[{i}]", s) for i, s in enumerate(cfg.anonymizers)]
    if cfg.deanonymizer is not None:
        out.append(("deanonymizer", cfg.deanonymizer))
    out += [(f"recognizers[{i}]", s) for i, s in enumerate(cfg.recognizers)]
    out += [(f"selection.selectors[{i}]", s) for i, s in enumerate(cfg.selection.selectors)]
    out += [(f"utility[{i}]", s) for i, s in enumerate(cfg.utility)]
    if getattr(cfg, "templates", None) is not None:
        out.append(("templates", cfg.templates.recognizer))
    return out


def device_problems(cfg: Any, device: str | None = None) -> list[str]:
    """Devices that do not exist here: the run's (``device``, else ``[run] device``, else ``BIOANON_DEVICE``)
    and any method's own ``device`` parameter (e.g. ``cuda`` on a machine without CUDA)."""
    from ..device import DeviceError, resolve_device, using_device

    problems: list[str] = []
    if not any("device" in attrs.fields_dict(spec.method_class()) for _, spec in _method_groups(cfg)):
        return problems  # no torch-backed method: the device does not matter (and torch is not imported)
    where = "device (--device)" if device else ("run.device" if cfg.run.device else "BIOANON_DEVICE")
    try:
        with using_device(device or cfg.run.device):
            resolve_device("")
    except DeviceError as exc:
        problems.append(f"{where}: {exc}")
    for path, spec in _method_groups(cfg):
        for setting in spec.settings() if hasattr(spec, "settings") else [None]:
            value = {**spec.params, **(setting or {})}.get("device", "")
            if value:
                try:
                    resolve_device(value, who=spec.id)
                except DeviceError as exc:
                    problems.append(f"{path}.params.device: {exc}")
                break
    return problems


def data_problems(cfg: Any, table: Any) -> list[str]:
    """Problems of the configured methods with the loaded data: payloads no method input matches, a label
    column that does not exist. Each line starts with the config key path."""
    from ..context import current_context

    problems = []
    payloads = table.payload_names
    viewed = set(current_context().registry.featurizers)
    templates = getattr(cfg, "templates", None)
    if templates is not None:  # the extractor reads the data; everything after it reads templates
        cls = templates.recognizer.method_class()
        if not reads_payload(cls, payloads, viewed):
            problems.append(
                f"templates: {cls.id} reads {' or '.join(cls.payloads)} data, but the data set has only "
                f"{', '.join(payloads) or 'no payload'}"
            )
        if templates.label != "subject" and templates.label not in table.attribute_names:
            problems.append(f"templates.label: the data set has no attribute column 'attr.{templates.label}'")
        payloads = ["features"]
    groups = [("anonymizers", cfg.anonymizers), ("recognizers", cfg.recognizers), ("utility", cfg.utility)]
    if cfg.deanonymizer is not None:
        groups.append(("deanonymizer", [cfg.deanonymizer]))
    for path, specs in groups:
        for i, spec in enumerate(specs):
            cls = spec.method_class()
            if not reads_payload(cls, payloads, viewed):
                where = f"{path}.id" if path == "deanonymizer" else f"{path}[{i}].id"
                problems.append(
                    f"{where}: {cls.id} reads {' or '.join(cls.payloads)} data, but the data set has "
                    f"only {', '.join(payloads) or 'no payload'}"
                )
    problems += augment_problems(cfg, table, payloads)
    protocol = cfg.report.paper_protocol
    if protocol:
        from ..methods import FLAT_PAYLOADS

        if not (set(payloads) & (set(FLAT_PAYLOADS) | viewed)):
            problems.append(
                f"report.paper_protocol: the protocol's classifiers need feature vectors, but the data "
                f"set has only {', '.join(payloads)} and no installed plugin provides a feature view of "
                "it (hook register_payload_features)"
            )
        if protocol not in table.attribute_names:
            problems.append(
                f"report.paper_protocol: the data set has no attribute column 'attr.{protocol}'; "
                f"available: {table.attribute_names}"
            )
    breakdown = cfg.report.breakdown
    for col in () if breakdown == "auto" else breakdown:
        if col not in table.attribute_names:
            problems.append(
                f"report.breakdown: the data set has no attribute column 'attr.{col}'; available: "
                f"{table.attribute_names}"
            )
    stratify = cfg.rates.stratify
    for i, name in enumerate(() if isinstance(stratify, str) else stratify):
        if name not in ("label", "subject") and name not in table.attribute_names:
            problems.append(
                f"rates.stratify[{i}]: the data set has no attribute column 'attr.{name}'; available: "
                f"{table.attribute_names}"
            )
    problems += role_problems(table)
    counts = cfg.selection.subject_counts
    reach = evaluation_subjects(table.num_subjects, cfg.rates)
    if counts and reach is not None and min(counts) > reach:
        problems.append(
            f"selection.subject_counts: no count in {sorted(counts)} is reachable: the evaluation set has at most "
            f"{reach} of the data set's {table.num_subjects} subjects (rates.evaluation = {cfg.rates.evaluation:g}); "
            f"give a count ≤ {reach}"
        )
    if cfg.label != "subject" and cfg.label not in table.attribute_names:
        problems.append(
            f"label: the data set has no attribute column 'attr.{cfg.label}'; available: {table.attribute_names}"
        )
    if not problems:
        problems += preflight_problems(cfg, table)
    return problems


def augment_problems(cfg: Any, table: Any, payloads: list[str]) -> list[str]:
    """``[deanonymizer] augment`` against the data: the de-anonymizer's payload must be an image payload
    (:data:`~bioanon.augment.AUGMENTABLE_PAYLOADS`, N×H×W×C) and the shift below a quarter of the image."""
    from ..augment import AUGMENTABLE_PAYLOADS

    augment = getattr(cfg, "augment", None)
    if augment is None or cfg.deanonymizer is None:
        return []
    cls = cfg.deanonymizer.method_class()
    column = cfg.deanonymizer.params.get("payload") or next((p for p in cls.payloads if p in payloads), None)
    if column not in AUGMENTABLE_PAYLOADS or column not in table.payload_names:
        return [
            f"deanonymizer.augment: flips and shifts need an image payload ({', '.join(AUGMENTABLE_PAYLOADS)}); "
            f"{cls.id} reads {column or 'none'} of the data's {', '.join(payloads) or 'no payload'}: remove augment"
        ]
    shape = table.payload_shape(column)
    if len(shape) != 3 or None in shape:
        return [f"deanonymizer.augment: payload {column!r} has samples of shape {shape}, not fixed H×W×C images"]
    if 4 * augment.shift >= min(shape[0], shape[1]):
        return [
            f"deanonymizer.augment.shift: {augment.shift} pixels is a quarter of the {shape[0]}×{shape[1]} images "
            f"or more; use at most {(min(shape[0], shape[1]) - 1) // 4}"
        ]
    return []


def role_problems(table: Any) -> list[str]:
    """Values of the role column (:data:`~bioanon.evaluation.tasks.ROLE_COLUMN`) other than enrolment, trial
    or null."""
    from .tasks import ROLE_COLUMN, ROLE_VALUES, has_roles

    if not has_roles(table):
        return []
    role = table.attribute(ROLE_COLUMN).astype(object)
    bad = sorted({str(v) for v in role if v is not None and v not in ROLE_VALUES})
    if bad:
        return [
            f"data: the attribute column 'attr.{ROLE_COLUMN}' fixes the enrolment/test split and takes the "
            f"values {list(ROLE_VALUES)} (or null), got {bad[:5]}"
        ]
    return []


def weights_problems(cfg: Any) -> list[str]:
    """Weights files (a method's ``weights`` parameter) that exist but do not load with the safe loader
    (:func:`~bioanon.nettrain.read_state_dict`, ``weights_only=True``: a file that would run code is refused),
    checked without the data; whether they fit the network is checked with the data (:func:`preflight_problems`).
    A path that does not exist is left to those checks."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for path, spec in _method_groups(cfg):
        cls = spec.method_class()
        if "weights" not in attrs.fields_dict(cls) or cls.missing_requirements():
            continue
        grid = spec.grid.get("weights", ()) if hasattr(spec, "grid") else ()
        places = [(f"{path}.params.weights", spec.params.get("weights"))]
        places += [(f"{path}.grid.weights[{i}]", v) for i, v in enumerate(grid)]
        for where, file in places:
            if not isinstance(file, str) or not file or not os.path.isfile(file) or (cls.id, file) in seen:
                continue
            seen.add((cls.id, file))
            from ..nettrain import WeightsError, read_state_dict

            try:
                read_state_dict(file, who=cls.id)
            except WeightsError as exc:
                problems.append(f"{where}: {exc}")
    return problems


def preflight_problems(cfg: Any, table: Any) -> list[str]:
    """What each configured method's ``preflight(table)`` finds (e.g. a weights file that does not fit the
    network built for the data), for every grid setting, without computing anything."""
    problems: list[str] = []
    for path, spec in _method_groups(cfg):
        cls = spec.method_class()
        if not hasattr(cls, "preflight"):
            continue
        seen: set[str] = set()
        for setting in spec.settings() if hasattr(spec, "settings") else [None]:
            for line in spec.create(setting).preflight(table):
                if line not in seen:
                    seen.add(line)
                    problems.append(f"{path}.params: {line}")
    return problems


def validate(
    config: Any, *, out_dir: str | os.PathLike[str] | None = None, data: Any = None, load_data: bool = False
) -> Any:
    """Check a config before running it; return the validated :class:`~bioanon.evaluation.config.EvalConfig`.

    Parameters
    ----------
    config : a TOML path, a dict or an EvalConfig.
    out_dir : also check that a run folder can be created there.
    data : a SampleTable to check the methods against (payloads, label column).
    load_data : load the configured data set and check against it (slower: reads the data).

    Raises
    ------
    ConfigError : listing every problem, one per line, each prefixed by its key path.
    """
    from ..errors import ConfigError
    from .config import load_config

    problems = []
    why = output_problem(out_dir) if out_dir is not None else None
    if why:
        problems.append(f"out: cannot create a run folder in {why}")
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        where = f" {config}" if isinstance(config, (str, os.PathLike)) else ""
        raise_problems(getattr(exc, "problems", [str(exc)]) + problems, f"invalid evaluation config{where}")
        raise
    if data is None and load_data:
        from .data import load_data as _load

        data = _load(cfg)
    problems += background_fit_problems(cfg)  # (an EvalConfig given as it is was not validated by load_config)
    problems += device_problems(cfg)
    problems += weights_problems(cfg)
    if data is not None:
        problems += data_problems(cfg, data)
        if load_data and getattr(cfg, "attacker_dataset", None) is not None:
            problems += attacker_problems(cfg, data)
    raise_problems(problems, f"config {cfg.name!r} cannot run")
    return cfg


def attacker_problems(cfg: Any, data: Any) -> list[str]:
    """What is wrong with the ``[attacker_dataset]`` of ``cfg`` against the evaluated data ``data`` (its
    attribute mapping, subject, label and payload checks; see :func:`~bioanon.evaluation.data.prepare_attacker_data`),
    after loading it without the cache."""
    from .data import attacker_data_problems, import_dataset, map_attacker_table

    problems: list[str] = []
    table = map_attacker_table(
        import_dataset(cfg.attacker_dataset, None, "attacker data set")[0], cfg.attacker_dataset, problems
    )
    if table is not None:
        problems += attacker_data_problems(cfg, data, table)
    return problems

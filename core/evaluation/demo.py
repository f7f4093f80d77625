"""The built-in demo: a full strong evaluation on synthetic data, small enough for a laptop (< 3 min, 2 cores).

``bioanon demo`` runs the core's ``any.*`` methods on its synthetic feature vectors; ``bioanon demo --trait T``
runs the evaluation the plugin's synthetic source ``T.synthetic`` declares in :attr:`DatasetSource.demo`: the
trait's own anonymizers, recognizers and utility measures on its own data."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..errors import BioanonError, ConfigError

DEMO_SECTIONS = ("params", "anonymizers", "recognizers", "utility", "selection", "scenarios", "rates")
"""The config sections a :attr:`DatasetSource.demo` declaration may give (``params``: the source's parameters)."""

DEMO_REQUIRED = ("anonymizers", "recognizers", "utility")
"""The sections a :attr:`DatasetSource.demo` declaration must give."""


def _base_config(trait: str, dataset: dict[str, Any]) -> dict[str, Any]:
    """What every demo shares: one repeat, naive and parrot attackers, two selectors, a 500-draw bootstrap."""
    return {
        "name": f"demo-{trait}",
        "seed": 0,
        "repeats": 1,
        "dataset": dataset,
        "rates": {"background": 0.2, "attacker": 0.4, "evaluation": 0.4, "enrolment": 0.5},
        "scenarios": ["naive", "parrot"],
        "selection": {"selectors": ["random", "classification"], "subject_counts": [24, 12, 6], "random_draws": 3},
        "report": {"bootstrap": 500},
    }


def _generic_methods(attribute: str) -> dict[str, Any]:
    """The core's trait-agnostic methods: two anonymizers swept, three recognizers, two utility measures."""
    return {
        "anonymizers": [
            {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.25, 1.0, 2.0, 4.0]}},
            {"id": "any.block_permutation", "name": "permutation", "grid": {"block_size": [1, 4]}},
        ],
        "recognizers": [{"id": "any.cosine_centroid"}, {"id": "any.lda_cosine"}, {"id": "any.pca_svm"}],
        "utility": [
            {"id": "any.attribute_accuracy", "params": {"attribute": attribute}},
            {"id": "any.cosine_similarity"},
        ],
    }


def declared_demo(source_cls: type[Any]) -> dict[str, Any] | None:
    """The demo sections ``source_cls.demo`` declares (a deep copy), checked for their keys; ``None`` when the
    source declares none.

    :raises ConfigError: naming the source and its plugin, for a declaration that is not a mapping, names an
        unknown section or lacks a required one."""
    declared = getattr(source_cls, "demo", None)
    if declared is None:
        return None
    owner = f"{source_cls.id} ({getattr(source_cls, 'distribution', None) or source_cls.__module__})"
    if not isinstance(declared, Mapping):
        raise ConfigError(f"{owner}: demo must be a mapping of config sections, not {type(declared).__name__}")
    unknown = sorted(set(declared) - set(DEMO_SECTIONS))
    missing = [k for k in DEMO_REQUIRED if k not in declared]
    if unknown or missing:
        raise ConfigError(
            f"{owner}: demo "
            + "; ".join(
                ([f"has unknown sections {unknown}"] if unknown else [])
                + ([f"lacks the sections {missing}"] if missing else [])
            )
            + f"; its sections are {list(DEMO_SECTIONS)} ({list(DEMO_REQUIRED)} required)"
        )
    return copy.deepcopy(dict(declared))


def demo_config(trait: str = "any", registry: Any = None) -> dict[str, Any]:
    """The demo's config for ``trait``.

    ``"any"`` (the default): the core's synthetic feature vectors, two anonymizers swept, three recognizers,
    naive and parrot attackers, two selectors. Another trait: the installed plugin's synthetic source
    (``<trait>.synthetic``) with the evaluation its :attr:`DatasetSource.demo` declares (the trait's own
    methods); a source that declares none gets the core's ``any.*`` methods. ``registry``: where to find the
    source (default: the current run's).

    :raises BioanonError: when no ``<trait>.synthetic`` is installed.
    :raises ConfigError: when its demo declaration is malformed."""
    from ..context import current_context

    if registry is None:
        registry = current_context().registry

    if trait == "any":
        dataset = {
            "source": "any.synthetic",
            "params": {"n_subjects": 60, "samples_per_subject": 12, "dim": 32, "seed": 7},
        }
        return {**_base_config(trait, dataset), **_generic_methods("activity")}
    source = f"{trait}.synthetic"
    if source not in registry:
        raise BioanonError(
            f"--trait {trait}: no dataset source {source!r} is installed; install bioanon-{trait} (or use --trait any)"
        )
    declared = declared_demo(registry.get(source, "dataset"))
    if declared is not None:
        dataset = {"source": source, "params": declared.pop("params", {})}
        return {**_base_config(trait, dataset), **declared}
    # a plugin written before API 1.8: the core's methods on the plugin's data
    dataset = {"source": source, "params": {}}
    attribute = "activity"
    attrs_ = registry.create(source).load().attribute_names
    if attribute not in attrs_:
        if not attrs_:
            raise BioanonError(f"{source} has no attribute column for the utility measure")
        attribute = attrs_[0]
    return {**_base_config(trait, dataset), **_generic_methods(attribute)}

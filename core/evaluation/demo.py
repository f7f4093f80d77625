"""The built-in demo: a full strong evaluation on synthetic data, small enough for a laptop (< 3 min, 2 cores)."""

from __future__ import annotations

from typing import Any

from ..errors import BioanonError


def demo_config(trait: str = "any", registry: Any = None) -> dict[str, Any]:
    """The demo's config: two anonymizers swept, three recognizers, naive and parrot attackers, two selectors.

    ``trait`` picks the installed plugin's synthetic source (``<trait>.synthetic``); the default uses the core's
    synthetic feature vectors. ``registry``: where to find the source (default: the current run's)."""
    from ..context import current_context

    if registry is None:
        registry = current_context().registry

    if trait == "any":
        dataset = {
            "source": "any.synthetic",
            "params": {"n_subjects": 60, "samples_per_subject": 12, "dim": 32, "seed": 7},
        }
    else:
        source = f"{trait}.synthetic"
        if source not in registry:
            raise BioanonError(
                f"--trait {trait}: no dataset source {source!r} is installed; "
                f"install bioanon-{trait} (or use --trait any)"
            )
        dataset = {"source": source, "params": {}}
    attribute = "activity"
    if trait != "any":
        attrs_ = registry.create(dataset["source"]).load().attribute_names
        if attribute not in attrs_:
            if not attrs_:
                raise BioanonError(f"{dataset['source']} has no attribute column for the utility measure")
            attribute = attrs_[0]
    return {
        "name": f"demo-{trait}",
        "seed": 0,
        "repeats": 1,
        "dataset": dataset,
        "rates": {"background": 0.2, "attacker": 0.4, "evaluation": 0.4, "enrolment": 0.5},
        "anonymizers": [
            {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.25, 1.0, 2.0, 4.0]}},
            {"id": "any.block_permutation", "name": "permutation", "grid": {"block_size": [1, 4]}},
        ],
        "recognizers": [{"id": "any.cosine_centroid"}, {"id": "any.lda_cosine"}, {"id": "any.pca_svm"}],
        "scenarios": ["naive", "parrot"],
        "selection": {"selectors": ["random", "classification"], "subject_counts": [24, 12, 6], "random_draws": 3},
        "utility": [
            {"id": "any.attribute_accuracy", "params": {"attribute": attribute}},
            {"id": "any.cosine_similarity"},
        ],
        "report": {"bootstrap": 500},
    }

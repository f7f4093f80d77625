"""The built-in plugin: the core's trait-agnostic methods, registered through the same hooks as any plugin."""

from __future__ import annotations

from ..hookspecs import Register, hookimpl


@hookimpl
def register_anonymizers(register: Register) -> None:
    from .anonymizers import BlockPermutation, Chain, GaussianNoise, Identity
    from .random_set_mean import RandomSetMean

    register(Identity)
    register(GaussianNoise)
    register(BlockPermutation)
    register(Chain)
    register(RandomSetMean)

    from .templates import Ive, PeMiu

    register(PeMiu)
    register(Ive)

    from .pfrnet import Pfrnet  # torch is imported lazily, on fit

    register(Pfrnet)


@hookimpl
def register_recognizers(register: Register) -> None:
    from .recognizers import (
        CosineNearestCentroid,
        LdaCosine,
        LogisticRegression,
        NearestNeighbors,
        PcaSvm,
        RandomForest,
    )

    for cls in (CosineNearestCentroid, PcaSvm, RandomForest, NearestNeighbors, LogisticRegression, LdaCosine):
        register(cls)

    from .attacks import AttributeKnn, AttributeSvm, SimilarityAttributeAttack

    for attack in (SimilarityAttributeAttack, AttributeKnn, AttributeSvm):
        register(attack)


@hookimpl
def register_selectors(register: Register) -> None:
    from .selectors import (
        CenterSelection,
        ClassificationSelection,
        DistinctiveSelection,
        MetadataSelection,
        RandomSelection,
    )

    register(RandomSelection, aliases=("random",))
    register(ClassificationSelection, aliases=("classification",))
    register(MetadataSelection, aliases=("metadata",))
    register(DistinctiveSelection, aliases=("distinctive",))
    register(CenterSelection, aliases=("center",))


@hookimpl
def register_utility_measures(register: Register) -> None:
    from .utility import AttributeAccuracy, CosineSimilarity, Snr

    register(AttributeAccuracy)
    register(CosineSimilarity)
    register(Snr)

    from .templates import VerificationError

    register(VerificationError)


@hookimpl
def register_datasets(register: Register) -> None:
    from .datasets import SyntheticFeatures
    from .table_source import HfDataset, SavedTable

    register(SyntheticFeatures)
    register(SavedTable)
    register(HfDataset)


@hookimpl
def register_deanonymizers(register: Register) -> None:
    from .deanonymizers import RidgeInversion

    register(RidgeInversion)

    from .inversion import MlpInversion  # torch is imported lazily, on fit

    register(MlpInversion)

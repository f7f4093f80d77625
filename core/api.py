"""The stable API for plugin authors: everything a bioanon plugin imports comes from here.

A plugin (and its tests) imports only from this module::

    from bioanon.api import Anonymizer, SampleTable, TableError, fitted, hookimpl, param

Names outside ``bioanon.api`` (``bioanon.methods``, ``bioanon.nettrain``, ...) are internal: they may move or
change in any release. The names below follow :data:`API_VERSION`; a plugin states the range it supports in its
entry-point module, ``BIOANON_API = ">=1.0,<2"``, and ``bioanon plugins`` lists a plugin whose range excludes
this version as ``incompatible`` instead of loading it.

Importing this module is light (numpy, attrs and pluggy, as ``import bioanon``): the names of the later groups
are imported on first use, so a plugin's entry-point module that imports ``hookimpl`` stays fast. Nothing here
imports torch, scikit-learn, SciPy or matplotlib at import time.

Method base classes, parameters and fitted state
    :class:`Method`, :class:`Anonymizer`, :class:`Deanonymizer`, :class:`Recognizer`,
    :class:`FeatureRecognizer` (features + an inner recognizer), :class:`CentroidRecognizer` (cosine to class
    centroids of an embedding), :class:`UtilityMeasure`, :class:`Selector`, :class:`DatasetSource`,
    :class:`ScoreMatrix` (what ``Recognizer.score`` returns), :data:`KINDS`; :func:`param` declares a
    validated parameter, :func:`fitted` fitted state; helpers :func:`labels_of`, :func:`class_sums`,
    :func:`n_components_ok`, :func:`feature_matrix`.

Hooks and registration
    :data:`hookimpl` marks hook implementations (see :mod:`bioanon.hookspecs` for every hook);
    :class:`Register` and :class:`RegisterFeatures` are the types of the ``register`` callbacks the hooks
    receive. :func:`get_registry`, :func:`get_method` and :func:`list_methods` reach the installed methods
    (e.g. a chain of other plugins' anonymizers).

Sample table and payload helpers
    :class:`SampleTable` (one row per sample, payload columns, subject, attributes, lineage);
    :func:`restore_dtype`, :func:`flatten_payload`, :func:`table_rng` (a seeded generator per table);
    :func:`blas_threads` (1.3; one BLAS thread around batched small linear algebra).

Errors
    :class:`BioanonError` (base of all), :class:`ParameterError`, :class:`TableError`, :class:`DataError`,
    :class:`PluginError`, :class:`UnknownMethodError`, :class:`ConfigError`, :class:`CacheError`,
    :class:`DeviceError`, :class:`WeightsError`, :class:`NotFittedError` (1.1: a method used before
    ``fit``/``enroll``; check with :func:`require_fitted`, 1.1); :class:`MissingDependencyError` (a method's
    optional package is not installed: the registry raises it when such a method is created; raise it when a
    method finds one missing as it runs).

Device and training helpers for torch methods
    parameters :func:`device_param`, :func:`precision_param`, :func:`weights_param`, :func:`cuda_graphs_param`
    (1.5); :func:`resolve_device`;
    :func:`import_torch` (a clear install hint when torch is missing); the shared trainer :func:`train_net`
    with :func:`method_training`, :func:`preflight_weights`, :func:`infer`, :func:`stage`, :func:`to_device`,
    :func:`batch_rows` and :func:`take_rows` (a batch's rows of staged tensors without a GPU stall; 1.2),
    heads :func:`arcface_head`, :func:`softmax_head` and the choices :data:`OPTIMIZERS`, :data:`SCHEDULERS`.

Reading data sets
    :func:`resolve_within` (a path that cannot leave the data root), :func:`uniform_column`,
    :func:`parse_cell`, :func:`jsonable`; metadata files: :class:`Metadata`, :func:`read_metadata_csv`,
    :func:`read_csv_rows`, :func:`key_columns`, :func:`file_key`, :data:`FILE_COLUMNS`,
    :data:`SUBJECT_COLUMNS`.

Reusable building blocks
    :class:`RandomSetMean` (the random-set mean anonymizer to subclass per payload),
    :class:`Chain` (``any.chain``, anonymizers applied in order; 1.1),
    :class:`AttributeAccuracy` and :func:`align` (utility), :func:`paired_payloads` (de-anonymizers), the
    core recognizers :class:`PcaSvm`, :class:`RandomForest`, :class:`LogisticRegression`,
    :class:`NearestNeighbors`, :class:`LdaCosine` (as inner recognizers of a :class:`FeatureRecognizer`), and
    their SEBA-style options for a wrapper: the :class:`ClassifierOptions` mixin (``cv_folds``, ``keep``; pass
    ``classifier_options()`` to the inner recognizer) and :func:`scores_param` (``scores``);
    :func:`reuse_computed` (1.1) reuses within the active run an array computed from array content by a fixed
    function (a pretrained encoder's embeddings, feature extraction), and with ``rows`` (1.3) across runs,
    per sample, through the cache; :func:`current_context` (1.2) gives the
    active run's :class:`RunContext` (its ``registry`` builds another method by id).

Testing and conformance
    :func:`check_method` runs every conformance check on a method class and returns a
    :class:`ConformanceReport`; :func:`make_table` makes tiny seeded tables; :mod:`testing` is the whole
    module (its pytest fixtures ``register_bioanon_plugin``, ``tiny_table``, ... load where a project asks for
    them: ``addopts = "-p bioanon.testing"`` in its pytest configuration, as the plugin template has it).
    Importing this module does not import pytest; using these names imports it when installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import get_method, get_registry, list_methods
from ._version import API_VERSION as _API_VERSION
from .errors import (
    BioanonError,
    CacheError,
    ConfigError,
    DataError,
    MissingDependencyError,
    NotFittedError,
    ParameterError,
    PluginError,
    TableError,
    UnknownMethodError,
    require_fitted,
)
from .hookspecs import Register, RegisterFeatures, hookimpl
from .methods import (
    KINDS,
    Anonymizer,
    CentroidRecognizer,
    DatasetSource,
    Deanonymizer,
    FeatureRecognizer,
    Method,
    Recognizer,
    ScoreMatrix,
    Selector,
    UtilityMeasure,
    class_sums,
    feature_matrix,
    fitted,
    labels_of,
    n_components_ok,
    param,
)

API_VERSION = _API_VERSION
"""The version of this API, ``"major.minor"``.

The minor number grows when names are added (a plugin written for 1.0 works with 1.3); the major number grows
when a name is removed or its behaviour or signature changes incompatibly. A plugin declares the range it
supports as a PEP 440 specifier in its entry-point module, usually ``BIOANON_API = ">=1.<minor it needs>,<2"``;
the plugin loader skips a plugin whose range excludes this version and lists it as ``incompatible``.

1.1 added two-stage utility measures (``UtilityMeasure.extracts``, ``extract``, ``compare``), ``progress_bar``,
the classifier options (``ClassifierOptions``: ``cv_folds``, ``keep``; ``scores_param``) and comparators that
travel with a protection (``Anonymizer.comparator``), ``reuse_computed``, and ``NotFittedError`` with its check
``require_fitted``.

1.2 added the run context: ``current_context`` (the active run's :class:`~bioanon.context.RunContext`, whose
``registry`` a method uses to build another method by id) and ``RunContext``; ``reuse_computed`` reuses within
the active run; renamed ids: ``register(cls, deprecated_aliases=(old_id, ...))`` (the old id warns once) and
``warn_deprecated`` (a DeprecationWarning attributed to the user's code, so that it is shown).

1.3 added per-sample reuse: ``reuse_computed(..., rows=...)`` keeps a fixed per-sample function's result rows
per sample in the run's cache, so that a new split or other rates compute only the samples not met before;
and ``Recognizer.scores_probes_independently`` (default true: an evaluation may score the probes in blocks);
``blas_threads`` (BLAS limited to one thread, or ``n``, inside a ``with`` block: batched small linear algebra).

1.4 added ``Deanonymizer.held_out_ids`` (the sample ids of the attacker pairs a fit held out: an evaluation
checks on them that the de-anonymizer learned, and marks its rows when it did not) and ``paired_ids``.

1.5 added ``cuda_graphs_param`` (a method's switch for training steps run as CUDA graphs; the trainer's
``cuda_graphs`` argument, passed by ``method_training``).

1.6 added ``Anonymizer.fit_defines_columns`` (a protection whose fit chooses its output columns, e.g. feature
elimination: an evaluation refuses ``[rates] background = 0`` under ``[attacker_dataset]`` for it) and
``Anonymizer.defines_columns_by_fit`` (the same per parameter setting, for composites such as ``any.chain``);
``DatasetSource.attribute_names`` (the attribute columns a source produces, None when the data decide) and
``Method.attribute_params`` (the parameters that name attribute columns): configs are checked against them
without loading the data. Method and source parameters may not be named ``method_id``, ``source_id`` or
``path`` (the keywords of ``get_method`` and ``load_dataset``).

1.7 added ``held_out_pairs`` (a de-anonymizer's seeded validation split of its pairs that keeps the augmented
copies of a pair — ``[deanonymizer] augment`` — with their source: a copy of a held-out image is never trained
on), and SEBA's data layout for sources that import it: ``seba_set`` (a set's meta file, folder and metadata),
``seba_sample_attributes``, ``seba_attributes`` and ``read_seba_yaml`` (the safe YAML loader, errors naming the
file).

1.8 added ``DatasetSource.demo``: the evaluation ``bioanon demo --trait <trait>`` runs on a plugin's synthetic
source (its own anonymizers, recognizers and utility measures; a source without it gets the core's ``any.*``
methods).

1.9 added ``Anonymizer.per_sample`` and ``Anonymizer.rows_independent`` (an anonymizer whose output rows each
depend on their own input row only: an evaluation anonymizes each data set once, in shards run as separate
cached tasks, and takes every part's rows from it; checked by the conformance check ``rows_independent``), and
``Recognizer.embeds_per_sample`` (a fixed encoder: the ``[templates]`` stage embeds each data set once, in shards,
and takes every split's templates from it).

1.10 added ``Selector.reads_payloads`` (``False`` for a selector of subjects or attributes alone, such as a random
draw: an evaluation gives it its tables without their payloads).

1.11 added ``SampleTable.map_payload`` (a per-sample function of a payload, run chunk by chunk: the rows of a table
read from several stored parts are never joined into one array first).

1.12 added ``Selector.subjects_only`` (``True`` for a selector whose choice depends on the subject names and its
seed alone, such as a random draw: an evaluation selects once per repeat from the clear tables, and computes each
recognizer's clear level on those subjects once for every anonymizer setting)."""

# name -> (module, attribute or None for the module itself), imported on first access
_LAZY: dict[str, tuple[str, str | None]] = {
    # sample table and payload helpers
    "SampleTable": ("bioanon.table", "SampleTable"),
    "flatten_payload": ("bioanon.payloads", "flatten_payload"),
    "restore_dtype": ("bioanon.payloads", "restore_dtype"),
    "table_rng": ("bioanon.payloads", "table_rng"),
    "blas_threads": ("bioanon.payloads", "blas_threads"),  # 1.3
    # errors of the device and training helpers
    "DeviceError": ("bioanon.device", "DeviceError"),
    "WeightsError": ("bioanon.nettrain", "WeightsError"),
    # device and training helpers for torch methods
    "device_param": ("bioanon.methods", "device_param"),
    "cuda_graphs_param": ("bioanon.methods", "cuda_graphs_param"),  # 1.5
    "precision_param": ("bioanon.methods", "precision_param"),
    "weights_param": ("bioanon.methods", "weights_param"),
    "resolve_device": ("bioanon.device", "resolve_device"),
    "import_torch": ("bioanon.torchutil", "import_torch"),
    "OPTIMIZERS": ("bioanon.nettrain", "OPTIMIZERS"),
    "SCHEDULERS": ("bioanon.nettrain", "SCHEDULERS"),
    "arcface_head": ("bioanon.nettrain", "arcface_head"),
    "batch_rows": ("bioanon.nettrain", "batch_rows"),
    "infer": ("bioanon.nettrain", "infer"),
    "method_training": ("bioanon.nettrain", "method_training"),
    "preflight_weights": ("bioanon.nettrain", "preflight_weights"),
    "softmax_head": ("bioanon.nettrain", "softmax_head"),
    "take_rows": ("bioanon.nettrain", "take_rows"),
    "stage": ("bioanon.nettrain", "stage"),
    "to_device": ("bioanon.nettrain", "to_device"),
    "train_net": ("bioanon.nettrain", "train_net"),
    # reading data sets
    "jsonable": ("bioanon.fileio", "jsonable"),
    "parse_cell": ("bioanon.fileio", "parse_cell"),
    "resolve_within": ("bioanon.fileio", "resolve_within"),
    "uniform_column": ("bioanon.fileio", "uniform_column"),
    "FILE_COLUMNS": ("bioanon.metadata", "FILE_COLUMNS"),
    "SUBJECT_COLUMNS": ("bioanon.metadata", "SUBJECT_COLUMNS"),
    "Metadata": ("bioanon.metadata", "Metadata"),
    "file_key": ("bioanon.metadata", "file_key"),
    "key_columns": ("bioanon.metadata", "key_columns"),
    "read_csv_rows": ("bioanon.metadata", "read_csv_rows"),
    "read_metadata_csv": ("bioanon.metadata", "read_metadata_csv"),
    "progress_bar": ("bioanon.log", "progress_bar"),  # 1.1
    "warn_deprecated": ("bioanon.log", "warn_deprecated"),  # 1.2
    # reusable building blocks
    "RandomSetMean": ("bioanon.builtin.random_set_mean", "RandomSetMean"),
    "Chain": ("bioanon.builtin.anonymizers", "Chain"),  # 1.1
    "AttributeAccuracy": ("bioanon.builtin.utility", "AttributeAccuracy"),
    "align": ("bioanon.methods", "align"),
    "paired_ids": ("bioanon.builtin.deanonymizers", "paired_ids"),
    "held_out_pairs": ("bioanon.builtin.deanonymizers", "held_out_pairs"),  # 1.7
    "read_seba_yaml": ("bioanon.seba_data", "read_seba_yaml"),  # 1.7
    "seba_attributes": ("bioanon.seba_data", "seba_attributes"),  # 1.7
    "seba_sample_attributes": ("bioanon.seba_data", "seba_sample_attributes"),  # 1.7
    "seba_set": ("bioanon.seba_data", "seba_set"),  # 1.7
    "paired_payloads": ("bioanon.builtin.deanonymizers", "paired_payloads"),
    "ClassifierOptions": ("bioanon.builtin.recognizers", "ClassifierOptions"),
    "LdaCosine": ("bioanon.builtin.recognizers", "LdaCosine"),
    "LogisticRegression": ("bioanon.builtin.recognizers", "LogisticRegression"),
    "NearestNeighbors": ("bioanon.builtin.recognizers", "NearestNeighbors"),
    "PcaSvm": ("bioanon.builtin.recognizers", "PcaSvm"),
    "RandomForest": ("bioanon.builtin.recognizers", "RandomForest"),
    "scores_param": ("bioanon.builtin.recognizers", "scores_param"),
    # the run context and reuse within a run
    "RunContext": ("bioanon.context", "RunContext"),  # 1.2
    "current_context": ("bioanon.context", "current_context"),  # 1.2
    "reuse_computed": ("bioanon.context", "reuse_computed"),
    # testing and conformance (imports pytest when installed, for the fixtures)
    "testing": ("bioanon.testing", None),
    "ConformanceReport": ("bioanon.testing", "ConformanceReport"),
    "check_method": ("bioanon.testing", "check_method"),
    "make_table": ("bioanon.testing", "make_table"),
}

__all__ = [  # every name of the API (the lazy ones included)
    "API_VERSION",
    "Anonymizer",
    "AttributeAccuracy",
    "BioanonError",
    "CacheError",
    "CentroidRecognizer",
    "Chain",
    "ClassifierOptions",
    "ConfigError",
    "ConformanceReport",
    "DataError",
    "DatasetSource",
    "Deanonymizer",
    "DeviceError",
    "FILE_COLUMNS",
    "FeatureRecognizer",
    "KINDS",
    "LdaCosine",
    "LogisticRegression",
    "Metadata",
    "Method",
    "MissingDependencyError",
    "NearestNeighbors",
    "NotFittedError",
    "OPTIMIZERS",
    "ParameterError",
    "PcaSvm",
    "PluginError",
    "RandomForest",
    "RandomSetMean",
    "RunContext",
    "Recognizer",
    "Register",
    "RegisterFeatures",
    "SCHEDULERS",
    "SUBJECT_COLUMNS",
    "SampleTable",
    "ScoreMatrix",
    "Selector",
    "TableError",
    "UnknownMethodError",
    "UtilityMeasure",
    "WeightsError",
    "align",
    "arcface_head",
    "batch_rows",
    "blas_threads",
    "check_method",
    "class_sums",
    "current_context",
    "device_param",
    "cuda_graphs_param",
    "feature_matrix",
    "file_key",
    "fitted",
    "flatten_payload",
    "get_method",
    "get_registry",
    "hookimpl",
    "import_torch",
    "infer",
    "jsonable",
    "key_columns",
    "labels_of",
    "list_methods",
    "make_table",
    "method_training",
    "n_components_ok",
    "paired_ids",
    "held_out_pairs",
    "read_seba_yaml",
    "seba_attributes",
    "seba_sample_attributes",
    "seba_set",
    "paired_payloads",
    "param",
    "parse_cell",
    "precision_param",
    "preflight_weights",
    "progress_bar",
    "read_csv_rows",
    "read_metadata_csv",
    "require_fitted",
    "resolve_device",
    "resolve_within",
    "restore_dtype",
    "reuse_computed",
    "scores_param",
    "softmax_head",
    "warn_deprecated",
    "stage",
    "table_rng",
    "take_rows",
    "testing",
    "to_device",
    "train_net",
    "uniform_column",
    "weights_param",
]


def __getattr__(name: str) -> Any:
    """Import the module of a lazily exported name on first use (PEP 562) and keep the value."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'bioanon.api' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from . import testing as testing
    from .builtin.anonymizers import Chain as Chain
    from .builtin.deanonymizers import held_out_pairs as held_out_pairs
    from .builtin.deanonymizers import paired_ids as paired_ids
    from .builtin.deanonymizers import paired_payloads as paired_payloads
    from .builtin.random_set_mean import RandomSetMean as RandomSetMean
    from .builtin.recognizers import (
        ClassifierOptions as ClassifierOptions,
    )
    from .builtin.recognizers import (
        LdaCosine as LdaCosine,
    )
    from .builtin.recognizers import (
        LogisticRegression as LogisticRegression,
    )
    from .builtin.recognizers import (
        NearestNeighbors as NearestNeighbors,
    )
    from .builtin.recognizers import (
        PcaSvm as PcaSvm,
    )
    from .builtin.recognizers import (
        RandomForest as RandomForest,
    )
    from .builtin.recognizers import (
        scores_param as scores_param,
    )
    from .builtin.utility import AttributeAccuracy as AttributeAccuracy
    from .context import RunContext as RunContext
    from .context import current_context as current_context
    from .context import reuse_computed as reuse_computed
    from .device import DeviceError as DeviceError
    from .device import resolve_device as resolve_device
    from .fileio import (
        jsonable as jsonable,
    )
    from .fileio import (
        parse_cell as parse_cell,
    )
    from .fileio import (
        resolve_within as resolve_within,
    )
    from .fileio import (
        uniform_column as uniform_column,
    )
    from .log import progress_bar as progress_bar
    from .log import warn_deprecated as warn_deprecated
    from .metadata import (
        FILE_COLUMNS as FILE_COLUMNS,
    )
    from .metadata import (
        SUBJECT_COLUMNS as SUBJECT_COLUMNS,
    )
    from .metadata import (
        Metadata as Metadata,
    )
    from .metadata import (
        file_key as file_key,
    )
    from .metadata import (
        key_columns as key_columns,
    )
    from .metadata import (
        read_csv_rows as read_csv_rows,
    )
    from .metadata import (
        read_metadata_csv as read_metadata_csv,
    )
    from .methods import (
        align as align,
    )
    from .methods import (
        cuda_graphs_param as cuda_graphs_param,
    )
    from .methods import (
        device_param as device_param,
    )
    from .methods import (
        precision_param as precision_param,
    )
    from .methods import (
        weights_param as weights_param,
    )
    from .nettrain import (
        OPTIMIZERS as OPTIMIZERS,
    )
    from .nettrain import (
        SCHEDULERS as SCHEDULERS,
    )
    from .nettrain import (
        WeightsError as WeightsError,
    )
    from .nettrain import (
        arcface_head as arcface_head,
    )
    from .nettrain import (
        batch_rows as batch_rows,
    )
    from .nettrain import (
        infer as infer,
    )
    from .nettrain import (
        method_training as method_training,
    )
    from .nettrain import (
        preflight_weights as preflight_weights,
    )
    from .nettrain import (
        softmax_head as softmax_head,
    )
    from .nettrain import (
        stage as stage,
    )
    from .nettrain import (
        take_rows as take_rows,
    )
    from .nettrain import (
        to_device as to_device,
    )
    from .nettrain import (
        train_net as train_net,
    )
    from .payloads import blas_threads as blas_threads
    from .payloads import flatten_payload as flatten_payload
    from .payloads import restore_dtype as restore_dtype
    from .payloads import table_rng as table_rng
    from .seba_data import read_seba_yaml as read_seba_yaml
    from .seba_data import seba_attributes as seba_attributes
    from .seba_data import seba_sample_attributes as seba_sample_attributes
    from .seba_data import seba_set as seba_set
    from .table import SampleTable as SampleTable
    from .testing import ConformanceReport as ConformanceReport
    from .testing import check_method as check_method
    from .testing import make_table as make_table
    from .torchutil import import_torch as import_torch

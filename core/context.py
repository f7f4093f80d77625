"""The run context: what one run of bioanon works with, passed from the entry point to what needs it.

A :class:`RunContext` holds the method registry, the cache and device of the run (when it has them), and the
in-run stores that let a run reuse work: the fitted recognizers (:class:`~bioanon.fit_memo.FittedRecognizers`)
and the arrays computed from array content (:class:`~bioanon.fit_memo.ComputedFeatures`). It is created only at
the entry points — the CLI commands and the public functions of :mod:`bioanon` (``evaluate``, ``anonymize``,
``get_method``, …) — and handed on explicitly: to config validation, planning, the tasks and the executors.

Methods deep inside a run (a plugin's recognizer calling :func:`reuse_computed`, a chain building its steps by
id) cannot be handed it without changing the plugin API. For them a run *activates* its context for the
duration of the work (``with context.activate(): ...``; the task runner does it per task) and
:func:`current_context` returns it. Outside any run, :func:`current_context` gives a fresh context over the
default registry with empty stores, so nothing is reused between calls: there is no process-global store of
fitted models or computed arrays.

The default registry is the one :func:`bioanon.get_registry` returns; the package's root module hands that
function to :func:`set_default_registry` when ``bioanon`` is imported (this module imports no plugin machinery,
so the core's low-level modules can use it without an import cycle).

A context pickles without its registry and stores: a worker process builds the registry from the installed
entry points on first use (:meth:`RunContext.__setstate__`) and starts with empty stores; a pool worker keeps
the context of the run it serves between that run's tasks (:meth:`RunContext.hold`).
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from numpy.typing import NDArray

from .errors import BioanonError, unknown_param_error
from .fit_memo import ComputedFeatures, FittedRecognizers

if TYPE_CHECKING:  # types only: a registry module import would close a cycle through the plugin loader
    from .cache import Cache
    from .methods import DatasetSource, Method
    from .registry import Registry
    from .table import SampleTable

__all__ = ["RunContext", "active_context", "current_context", "reuse_computed", "set_default_registry"]

_ACTIVE: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("bioanon_run_context", default=None)
_DEFAULT_REGISTRY: list[Callable[[], Registry]] = []  # the one factory bioanon/__init__.py installs


def set_default_registry(factory: Callable[[], Registry]) -> None:
    """Install the function that gives the default registry (``bioanon/__init__.py`` passes
    :func:`bioanon.get_registry` once, on import; a second call replaces it)."""
    _DEFAULT_REGISTRY[:] = [factory]


def _default_registry() -> Registry:
    if not _DEFAULT_REGISTRY:  # pragma: no cover - bioanon/__init__.py installs it before any submodule runs
        raise RuntimeError("bioanon.context: no default registry installed (import bioanon first)")
    return _DEFAULT_REGISTRY[0]()


class RunContext:
    """The registry, cache, device and reuse stores of one run.

    :attr:`fit_uses` counts, per fit (:func:`~bioanon.evaluation.tasks.fit_affinity`), the tasks of the run's
    plan that use it; a fit that only one task uses is not kept in :attr:`fitted` (its memory is given back as
    soon as that task is done). Empty (outside an evaluation): every fit is kept.

    Parameters
    ----------
    registry : the method registry (default: :func:`bioanon.get_registry`'s).
    cache : the run's :class:`~bioanon.cache.Cache`, if it has one.
    device : the run's device text (``""``: not set; see :mod:`bioanon.device`).
    memory : bytes of working memory one task may use (``[run] memory`` shared by the workers; 0 = a default).
    fitted : the store of fitted recognizers (default: a new one).
    computed : the store of content-derived arrays (default: a new one).
    """

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        cache: Cache | None = None,
        device: str = "",
        memory: int = 0,
        fitted: FittedRecognizers | None = None,
        computed: ComputedFeatures | None = None,
    ) -> None:
        self._registry = registry  # None: the default registry, looked up on first use
        self.cache = cache
        self.device = device
        self.memory = memory
        self.fitted = fitted if fitted is not None else FittedRecognizers()
        self.computed = computed if computed is not None else ComputedFeatures()
        self.fit_uses: dict[str, int] = {}
        self.run_id = uuid.uuid4().hex  # tells a worker whether a context it holds is this run's

    def __repr__(self) -> str:
        return f"RunContext(run_id={self.run_id[:8]}, cache={self.cache!r}, device={self.device!r})"

    # -- the registry --------------------------------------------------------------------------------------
    @property
    def registry(self) -> Registry:
        """The run's method registry (the default one, :func:`bioanon.get_registry`'s, unless one was given)."""
        if self._registry is None:
            self._registry = _default_registry()
        return self._registry

    def create(self, method_id: str, kind: str | None = None, **params: Any) -> Method:
        """A method of this run's registry by id, with validated parameters."""
        return self.registry.create(method_id, kind, **params)

    def load_dataset(self, source_id: str, path: Any = None, **params: Any) -> SampleTable:
        """Load a data set with a dataset source of this run's registry: ``path`` for the source's ``load``, the
        other keywords its parameters (as :func:`bioanon.load_dataset`; BioanonError naming the source when it
        reads a data layout and no ``path`` is given)."""
        accepted = [f.alias or f.name for f in self.registry.get(source_id, "dataset").param_fields()]
        unknown = [name for name in params if name not in accepted]
        if unknown:  # named with ``path``, the keyword beside the source's parameters
            raise unknown_param_error(source_id, unknown[0], params[unknown[0]], ["path", *accepted])
        source = cast("DatasetSource", self.create(source_id, "dataset", **params))  # of kind "dataset"
        if getattr(source, "needs_path", False) and path is None:
            raise BioanonError(f"{source_id} reads a data layout: give the path of the data set")
        table: SampleTable = source.load(path)
        return table

    # -- reuse ---------------------------------------------------------------------------------------------
    def fit(
        self,
        spec: Mapping[str, Any],
        train_id: Any,
        label: str,
        train: Callable[[], Any],
        *,
        kind: str | None = "recognizer",
        affinity: str = "",
    ) -> Any:
        """A recognizer built from ``spec`` (``{"id": ..., "params": {...}}``) with this run's registry and
        fitted on ``train()`` for ``label``, reused from :attr:`fitted` (see
        :meth:`~bioanon.fit_memo.FittedRecognizers.get`); kept there for the run's other tasks unless
        :attr:`fit_uses` says that ``affinity`` (the fit's) has no other task."""
        keep = not affinity or self.fit_uses.get(affinity, 2) > 1
        return self.fitted.get(spec, train_id, label, train, create=self.registry.create, kind=kind, keep=keep)

    # -- activation ----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def activate(self) -> Iterator[RunContext]:
        """Make this the context :func:`current_context` returns inside the block (this thread / task only)."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def hold(self) -> RunContext:
        """In a worker process of the local executor: the context this worker holds for the same run (its
        stores filled by the run's earlier tasks here), else this one, held from now on. A pool worker runs its
        tasks in its main thread, so the held context stays the active one between tasks; the task runner
        still activates it per task (:func:`bioanon.evaluation.tasks.run_task`)."""
        held = _ACTIVE.get()
        if held is not None and held.run_id == self.run_id:
            return held
        _ACTIVE.set(self)
        return self

    # -- pickling (to worker processes) --------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {
            "cache": self.cache,
            "device": self.device,
            "memory": self.memory,
            "run_id": self.run_id,
            "fit_uses": self.fit_uses,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """In a worker: the registry built from the installed entry points on first use, empty stores."""
        self._registry = None
        self.cache, self.device, self.run_id = state["cache"], state["device"], state["run_id"]
        self.memory = int(state.get("memory", 0))
        self.fit_uses = dict(state.get("fit_uses", {}))
        self.fitted, self.computed = FittedRecognizers(), ComputedFeatures()


def active_context() -> RunContext | None:
    """The context activated for the current run (:meth:`RunContext.activate`), or None outside any run."""
    return _ACTIVE.get()


def current_context() -> RunContext:
    """The active run's context, or outside any run a fresh one over the default registry (empty stores)."""
    ctx = _ACTIVE.get()
    return ctx if ctx is not None else RunContext()


def reuse_computed(
    what: str,
    params: Mapping[str, Any],
    inputs: Sequence[NDArray[Any]] | NDArray[Any],
    compute: Callable[[], NDArray[Any]],
    *,
    rows: Callable[[NDArray[Any]], NDArray[Any]] | None = None,
) -> NDArray[Any]:
    """``compute()``, reused from the active run's store of computed arrays when the same ``what`` (e.g. the
    method id and step), ``params`` and input arrays were computed before in this run. For a deterministic
    function of the inputs only (a pretrained encoder, fixed feature extraction), never for fitted or seeded
    state. Outside any run (no active :class:`RunContext`) it simply computes.

    ``rows`` (API 1.3), for a function with one result row per input sample: ``rows(indices)`` computes the
    rows of the samples ``inputs[indices]`` alone. The rows are then also kept per sample in the run's cache
    (keyed by each sample's content, ``what``, ``params`` and the code of ``rows``' module), so that a later
    run meeting the same samples in other tables (a new split, other rates, another selection) computes only
    the samples it has not met (:func:`bioanon.fit_memo.reuse_per_sample`)."""
    ctx = _ACTIVE.get()
    if ctx is None:
        return compute()
    if rows is not None and ctx.cache is not None and FittedRecognizers.enabled() and len(inputs):
        from .fit_memo import reuse_per_sample

        cache, per_sample = ctx.cache, rows
        return ctx.computed.get(what, params, inputs, lambda: reuse_per_sample(cache, what, params, inputs, per_sample))
    return ctx.computed.get(what, params, inputs, compute)

"""Trait-agnostic anonymizers that work on any fixed-shape payload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, cast

import attrs
import numpy as np

from ..errors import BioanonError, ParameterError, UnknownMethodError
from ..methods import Anonymizer, Comparator, Method, param
from ..payloads import restore_dtype, table_rng, total_std


@attrs.define(kw_only=True)
class Identity(Anonymizer):
    """No anonymization: returns the table unchanged (the clear reference in a sweep)."""

    id: ClassVar[str] = "any.identity"
    payloads: ClassVar[tuple[str, ...]] = ("*",)
    per_sample: ClassVar[bool] = True

    def transform(self, table: Any) -> Any:
        return table


@attrs.define(kw_only=True)
class GaussianNoise(Anonymizer):
    """Add zero-mean Gaussian noise to every value of a payload.

    ``sigma`` is in units of the payload's own standard deviation over the table when ``relative`` is true
    (the default), else in payload units. Integer payloads (e.g. uint8 images) are rounded and clipped to
    their dtype's range."""

    id: ClassVar[str] = "any.gaussian_noise"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")

    sigma: float = param(0.5, help="noise standard deviation", low=0.0)
    relative: bool = param(True, help="sigma is relative to the payload's standard deviation")
    payload: str = param("", help="payload column to anonymize (default: the first supported one present)")
    seed: int = param(0, help="random seed")

    def transform(self, table: Any) -> Any:
        column = self.payload_column(table, self.payload or None)
        x = table.payload(column)
        scale = self.sigma * (total_std(x) if self.relative else 1.0)
        rng = table_rng(table, self.seed)  # independent noise for every table, reproducible per table
        noisy = x.astype(np.float32, copy=True)
        # the noise in blocks of rows, drawn in order (the same values as one draw of the whole shape): no
        # temporaries of the size of the set
        rows = max(1, 2**22 // max(int(np.prod(x.shape[1:])), 1))
        for start in range(0, len(noisy), rows):
            noise = rng.standard_normal((min(rows, len(noisy) - start), *x.shape[1:]), dtype=np.float32)
            noise *= np.float32(scale)
            noisy[start : start + rows] += noise
        return table.with_payload(column, restore_dtype(noisy, x.dtype))


@attrs.define(kw_only=True)
class BlockPermutation(Anonymizer):
    """Keyed permutation of blocks of the flattened payload (a deterministic, invertible scrambling).

    The flattened values are cut into consecutive blocks of ``block_size`` values; the blocks are permuted
    with a permutation drawn from ``key`` (the same for every sample), and with ``shuffle_within`` the values
    inside each block are permuted too. Every sample is scrambled identically, so an attacker who trains or
    enrols on scrambled data (parrot) recognizes as well as on clear data, while a naive attacker fails — the
    paper's H1 in its purest form (the False Sense of Privacy paper; face block permutation in the Fantômas paper).
    A trailing partial block stays in place."""

    id: ClassVar[str] = "any.block_permutation"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    per_sample: ClassVar[bool] = True  # the same permutation for every sample

    block_size: int = param(1, help="values per block", low=1)
    shuffle_within: bool = param(False, help="also permute the values inside each block")
    key: int = param(0, help="permutation key (the secret)")
    payload: str = param("", help="payload column to anonymize (default: the first supported one present)")

    def permutation(self, n_values: int) -> np.ndarray:
        """The index permutation applied to ``n_values`` flattened values."""
        rng = np.random.default_rng(self.key)
        n_blocks = n_values // self.block_size
        blocks = rng.permutation(n_blocks)
        inner = rng.permutation(self.block_size) if self.shuffle_within else np.arange(self.block_size)
        idx = (blocks[:, None] * self.block_size + inner[None, :]).ravel()
        return np.concatenate([idx, np.arange(n_blocks * self.block_size, n_values)])

    def transform(self, table: Any) -> Any:
        column = self.payload_column(table, self.payload or None)
        x = table.payload(column)
        flat = x.reshape(len(x), -1)
        out = flat[:, self.permutation(flat.shape[1])].reshape(x.shape)
        return table.with_payload(column, out)


def _steps_shape_ok(steps: tuple[Any, ...]) -> bool:
    """Validator of ``any.chain``'s ``steps``: a non-empty list of ``{id = "...", params = {...}}`` tables (the
    ids and parameters are checked when the chain is built, with errors naming ``steps[i]``)."""
    return len(steps) > 0 and all(
        isinstance(s, dict)
        and isinstance(s.get("id"), str)
        and set(s) <= {"id", "params"}
        and isinstance(s.get("params", {}), dict)
        for s in steps
    )


@attrs.define(kw_only=True)
class Chain(Anonymizer):
    """Anonymizers applied in order, each fitted on the previous one's output: the one way to compose methods.

    ``steps`` is an ordered list of ``{id, params}`` tables, in TOML an array of inline tables::

        [[anonymizers]]
        id = "any.chain"
        params = { steps = [{ id = "any.gaussian_noise", params = { sigma = 0.2 } },
                            { id = "any.block_permutation", params = { key = 1 } }] }

    Every step must be an installed anonymizer; its id and parameters are validated when the chain is built
    (errors name ``steps[i]``). ``fit`` fits each step on the background as transformed by the steps before it
    (as SEBA's ``chain`` anonymization meant to); ``transform`` applies
    the fitted steps in order. The fingerprint covers every step's fingerprint (defaults applied); the comparator
    is the last step's that declares one. A step that sets no ``seed`` keeps its own default."""

    id: ClassVar[str] = "any.chain"
    payloads: ClassVar[tuple[str, ...]] = ("*",)
    example_params: ClassVar[dict[str, Any]] = {
        "steps": (
            {"id": "any.gaussian_noise", "params": {"sigma": 0.2, "seed": 1}},
            {"id": "any.block_permutation", "params": {"key": 1}},
        )
    }

    steps: tuple[dict[str, Any], ...] = param(
        ({"id": "any.identity", "params": {}},),
        help='the anonymizers in order, each {id = "...", params = {...}}',
        check=_steps_shape_ok,
        check_text='a non-empty list of {id = "...", params = {...}} tables',
    )

    methods_: list[Anonymizer] = attrs.field(init=False, repr=False, eq=False, factory=list)
    built_for_: Any = attrs.field(init=False, repr=False, eq=False, default=None)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.methods_ = self.build_steps()
        self.built_for_ = self.get_params()

    def current_steps(self) -> list[Anonymizer]:
        """The step methods, built again (unfitted) when a parameter was assigned since they were built."""
        params = self.get_params()
        if params != self.built_for_:
            self.methods_, self.built_for_ = self.build_steps(), params
        return self.methods_

    @classmethod
    def local_step_classes(cls) -> dict[str, type[Any]]:
        """Anonymizers found without the registry (which is still being built while plugins register and the
        default chains are constructed): the core's own here; a subclass may add its plugin's."""
        return {c.id: c for c in (Identity, GaussianNoise, BlockPermutation)}

    @classmethod
    def step_class(cls, method_id: str) -> type[Method]:
        """The anonymizer class of a step id: the one place the chain reaches the registry, the current run's
        (:func:`bioanon.context.current_context`). UnknownMethodError, with suggestions, when no method has
        that id (a method of another kind is returned: :meth:`build_steps` names its kind)."""
        local = cls.local_step_classes()
        if method_id in local:
            return local[method_id]
        from ..context import current_context

        registry = current_context().registry
        if method_id not in registry:
            raise UnknownMethodError(method_id, registry.suggest(method_id, "anonymizer"), kind="anonymizer")
        return registry.get(method_id)

    @classmethod
    def _steps_of(cls, params: Mapping[str, Any]) -> list[Anonymizer] | None:
        """The steps of a chain with ``params``; None when they cannot be built (reported where the chain is
        validated)."""
        try:
            return cls(**params).current_steps()
        except BioanonError:
            return None

    @classmethod
    def defines_columns_by_fit(cls, params: Mapping[str, Any]) -> bool:
        """Whether one of the chain's steps has output columns chosen by its fit (then the chain's too)."""
        steps = cls._steps_of(params)
        return bool(steps) and any(type(m).defines_columns_by_fit(m.get_params()) for m in steps or ())

    @classmethod
    def rows_independent(cls, params: Mapping[str, Any]) -> bool:
        """Whether every step of the chain anonymizes each sample on its own (then the chain does)."""
        steps = cls._steps_of(params)
        return bool(steps) and all(type(m).rows_independent(m.get_params()) for m in steps or ())

    def step_specs(self) -> list[tuple[str, dict[str, Any]]]:
        """``(id, params)`` of every step, in order."""
        return [(s["id"], dict(s.get("params", {}))) for s in self.steps]

    def build_steps(self) -> list[Anonymizer]:
        """Construct the steps (validated; ParameterError naming ``steps[i]``)."""
        out: list[Anonymizer] = []
        payloads: set[str] | None = None
        for i, (method_id, params) in enumerate(self.step_specs()):
            where = f"steps[{i}]"
            try:
                cls = self.step_class(method_id)
            except BioanonError as e:
                hint = getattr(e, "suggestions", None)
                raise ParameterError(
                    self.id,
                    where,
                    method_id,
                    f"unknown anonymizer {method_id!r}" + (f"; did you mean {hint[0]!r}?" if hint else ""),
                ) from None
            if cls.kind != "anonymizer":
                raise ParameterError(self.id, where, method_id, f"{method_id} is a {cls.kind}, not an anonymizer")
            names = [f.name for f in cls.param_fields()]
            for name in params:
                if name not in names:
                    import difflib

                    close = difflib.get_close_matches(name, names, n=1)
                    raise ParameterError(
                        self.id,
                        where,
                        params,
                        f"{method_id} has no parameter {name!r}"
                        + (f"; did you mean {close[0]!r}?" if close else f"; it has {names}"),
                    )
            cls.check_requirements()
            try:
                m = cls(**params)
            except ParameterError as e:
                raise ParameterError(self.id, where, params, f"{e}") from None
            if "*" not in cls.payloads:
                payloads = set(cls.payloads) if payloads is None else payloads & set(cls.payloads)
                if not payloads:
                    raise ParameterError(
                        self.id,
                        where,
                        method_id,
                        f"{method_id} reads {list(cls.payloads)}, "
                        "which no step before it can read: steps must share a payload",
                    )
            out.append(cast(Anonymizer, m))  # (its kind was checked above)
        if len({m.trait for m in out} - {"any"}) > 1:
            raise ParameterError(self.id, "steps", [m.id for m in out], "steps of one trait (and any.* steps)")
        return out

    def common_trait(self) -> str:
        """The steps' common trait: the one trait of its trait-specific steps, else ``any``."""
        traits = {m.trait for m in self.current_steps()} - {"any"}
        return traits.pop() if traits else "any"

    def fit(self, background: Any) -> Chain:
        data = background
        steps = self.current_steps()
        for i, m in enumerate(steps):
            if i + 1 < len(steps):  # the next step learns from what it will be given
                data = m.fit_transform(data)
            else:
                m.fit(data)
        return self

    def transform(self, table: Any) -> Any:
        for m in self.current_steps():
            table = m.transform(table)
        return table

    def fingerprint(self) -> str:
        """Hash of the chain's id and version and every step's fingerprint, in order."""
        from ..cache import fingerprint

        steps = [m.fingerprint() for m in self.current_steps()]
        return fingerprint({"id": self.id, "version": self.version, "steps": steps})

    def comparator(self) -> Comparator | None:
        """The comparator of the last step that declares one (None when none does)."""
        for m in reversed(self.current_steps()):
            cmp = m.comparator()
            if cmp is not None:
                return cmp
        return None

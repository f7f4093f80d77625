"""The random-set selective weighted-mean anonymizer (the utility-preserving anonymization paper, Algorithm 1)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from .. import random_set_mean as engine
from ..device import resolve_device
from ..errors import ParameterError, TableError, TooFewValuesError
from ..methods import Anonymizer, device_param, fitted, labels_of, param
from ..payloads import flatten_payload, restore_dtype

__all__ = ["RandomSetMean"]


@attrs.define(kw_only=True)
class RandomSetMean(Anonymizer):
    """Random-set selective weighted mean: each record becomes a weighted mean of a random set of records.

    Algorithm 1 of the utility-preserving anonymization paper (§4). For every record **d** of the table being
    transformed (the paper's data set D), a random set G of ``set_size`` = g records of that table is drawn,
    **d** included (§4.2): ``m = max(1, round_half_up(purity·g))`` members (the record itself counted) share
    **d**'s value of the attribute of interest p, the other g − m have another value; ``purity="population"``
    draws the g − 1 others uniformly from the table without **d**, whatever their values (the paper's third
    case). t·g is rarely an integer (the paper's own t = 0.6, g = 32 gives 19.2 → m = 19, a realized purity of
    19/32); a t below 1/g gives m = 1, the paper's lower bound t = 1/g (every other member has another value).
    Members are distinct records. Then line 9, with X_I the indicator of the selected features::

        d' = ((w - 1)·d + Σ_{x∈G} x) / ((w - 1) + g) ⊙ X_I  +  (Σ_{x∈G} x) / g ⊙ (1 - X_I)

    The sum over G contains **d** itself: on the selected features **d** weighs w and every other member 1;
    elsewhere, and everywhere when w = 1, d' is the plain mean of G (so ``retention=0`` with no additional
    attributes makes every record the plain mean of its set).

    Selected features (lines 1–5, §5.1.4, §5.2.7): ``I = ({c_p} ∪ {c_q1} ∪ … ∪ {c_qn}) \\ {c_s}``, where
    {c_a} is the ``ceil(r_a·D)`` features most relevant to attribute a (``retention`` for p,
    ``additional_retention`` for each of ``additional_attributes``, ``sensitive_exclusion`` for
    ``sensitive_attribute``; an attribute name ``subject`` means the identity). Relevance is the Gini
    importance of a random forest (``relevance_trees`` trees) or the mutual information, estimated on at most
    ``relevance_samples`` records drawn at random (a subsample, so it does not dominate on large tables; it
    changes the selection and so the output; records without a value of an attribute are left out of its
    estimate). ``sensitive_exclusion=0.5`` is the paper's c_s (top 50%, §5.2.7). ``fit(background)`` estimates
    relevance on the background (clear data) when the background has the payload and every attribute needed;
    otherwise (no or an empty background), and when ``transform`` is called unfitted, it is estimated on the
    table being transformed (as the paper does: Algorithm 1 estimates it on D). An attribute of which the
    background holds fewer than two values (a small background need not hold every speaker's accent) is scored
    on the table being transformed, the others on the background; where that table too holds fewer than two
    values, a TableError names the attribute, its parameter, the values present and what to do.

    Payloads: any fixed-shape payload (``payload`` picks the column) is flattened to D values per record and
    restored to its shape and dtype afterwards (integer payloads such as uint8 images are rounded and clipped).

    Errors and edge cases: ``set_size`` larger than the table, a missing attribute column (the message names
    the available ones), missing attribute values or NaN/inf in the payload raise :class:`TableError`. A class
    with too few records for the requested purity (fewer than m, or fewer than g − m records of other values)
    raises with ``small_class="error"`` (the default); with ``"with_replacement"`` the records of such a class
    draw that part of their sets with replacement. Sets are seeded per block of 8192 records, so the output does
    not depend on chunking or threads; the torch and numpy backends agree to float32 rounding.

    Defaults follow the paper's MotionSense setting (t = 0.9, g = 32, r_p = 10%, w = 100); its FER-2013 and
    AudioMNIST settings were t = 0.6, g = 32, r_p = 1%, w = 100 and t = 0.8, g = 128, r_p = 1%, w = 10.

    Trait plugins subclass it with their own id, payloads and defaults::

        @attrs.define(kw_only=True)
        class MotionRandomSetMean(RandomSetMean):
            \"\"\"Random-set selective weighted mean of IMU windows (Algorithm 1).\"\"\"
            id = "motion.random_set_mean"
            trait = "motion"
            payloads = ("imu",)
            attribute: str = RandomSetMean.default_for("attribute", "activity")
    """

    id: ClassVar[str] = "any.random_set_mean"
    attribute_params: ClassVar[tuple[str, ...]] = ("attribute", "additional_attributes", "sensitive_attribute")
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    reference: ClassVar[str] = "utility-preserving Algorithm 1"
    example_params: ClassVar[dict[str, Any]] = {"attribute": "activity", "set_size": 4, "purity": 0.5}

    attribute: str = param("", help="attribute of interest p whose value the random sets keep (required)")
    set_size: int = param(32, help="g, records per random set (the record itself included)", low=1)
    purity: float | Literal["population"] = param(
        0.9,
        low=0.0,
        high=1.0,
        help="t, share of each set with the record's value of p (rounded half up, at least the record); "
        "'population' = the others drawn uniformly from the whole table",
    )
    weight: float = param(100.0, help="w, weight of the record itself on the selected features", low=1.0)
    retention: float = param(0.1, help="r_p, share of features kept for the attribute of interest", low=0.0, high=1.0)
    additional_attributes: tuple[str, ...] = param((), help="q_1..q_n, further attributes to preserve")
    additional_retention: tuple[float, ...] = param(
        (), help="r_q per additional attribute (same length as additional_attributes)", low=0.0, high=1.0
    )
    sensitive_attribute: str = param(
        "", help="s, attribute whose relevant features are not weighted ('subject' = identity; '' = none)"
    )
    sensitive_exclusion: float = param(
        0.5, help="r_s, share of features most relevant to s removed from the weighted set", low=0.0, high=1.0
    )
    relevance: Literal["random_forest", "mutual_information"] = param(
        "random_forest", help="feature relevance estimator: Gini importances of a random forest, or mutual information"
    )
    relevance_samples: int = param(2000, help="records subsampled to estimate relevance", low=2)
    relevance_trees: int = param(50, help="trees of the relevance random forest", low=1)
    small_class: Literal["error", "with_replacement"] = param(
        "error", help="a class too small for the purity: raise, or draw that part of the set with replacement"
    )
    payload: str = param("", help="payload column to anonymize (default: the first supported one present)")
    seed: int = param(0, help="random seed (relevance subsample, forest and sets)")
    backend: Literal["auto", "torch", "numpy"] = param(
        "auto", help="summation kernel: torch embedding_bag when installed, or numpy", affects_output=False
    )
    threads: int = param(0, help="threads (0 = all cores)", low=0, affects_output=False)
    device: str = device_param()

    selected_: np.ndarray | None = fitted()
    relevance_scores_: dict[str, np.ndarray] | None = fitted()
    background_unscored_: dict[str, list[Any]] | None = fitted()

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if len(self.additional_retention) != len(self.additional_attributes):
            raise ParameterError(
                self.id,
                "additional_retention",
                self.additional_retention,
                f"one retention ratio per additional attribute: {len(self.additional_attributes)} attributes "
                f"{self.additional_attributes!r}, {len(self.additional_retention)} ratios",
            )

    @classmethod
    def default_for(cls, name: str, default: Any) -> Any:
        """A copy of parameter ``name`` (help, constraints) with another default, for subclasses."""
        field = attrs.fields_dict(cls)[name]
        return attrs.field(default=default, metadata=dict(field.metadata))

    # ---------------------------------------------------------------------------------------------------- parts
    def _sum_device(self) -> str:
        """Where the torch backend sums: the resolved ``device`` (the CPU for the numpy backend)."""
        return "cpu" if self.backend == "numpy" else resolve_device(self.device, who=self.id)

    def _needs(self) -> list[tuple[str, str, float]]:
        """(parameter, attribute, ratio) whose relevance is needed (ratio strictly between 0 and 1)."""
        out = []
        if 0.0 < self.retention < 1.0:
            out.append(("attribute", self.attribute, self.retention))
        for name, ratio in zip(self.additional_attributes, self.additional_retention, strict=True):
            if 0.0 < ratio < 1.0:
                out.append(("additional_attributes", name, ratio))
        if self.sensitive_attribute and 0.0 < self.sensitive_exclusion < 1.0:
            out.append(("sensitive_attribute", self.sensitive_attribute, self.sensitive_exclusion))
        return out

    def _labels(self, table: Any, name: str, param_name: str) -> np.ndarray:
        if name != "subject" and name not in table.attribute_names:
            raise TableError(
                f"{self.id}: no attribute {name!r} ({param_name}) in the table; available: "
                f"{['subject'] + list(table.attribute_names)}"
            )
        return labels_of(table, name)

    def _flat(self, table: Any) -> tuple[str, np.ndarray, np.ndarray]:
        column = self.payload_column(table, self.payload or None)
        x = table.payload(column)
        if not isinstance(x, np.ndarray):
            raise TableError(
                f"{self.id}: payload {column!r} has variable-length records; the random-set mean "
                f"needs a fixed-shape payload (extract features first)"
            )
        return column, x, flatten_payload(x)

    _RATIO_OF = {
        "attribute": "retention",
        "additional_attributes": "additional_retention",
        "sensitive_attribute": "sensitive_exclusion",
    }

    def _relevance(
        self,
        table: Any,
        flat: np.ndarray,
        *,
        where: str,
        known: dict[str, np.ndarray] | None = None,
        strict: bool = True,
    ) -> tuple[dict[str, np.ndarray], dict[str, list[Any]]]:
        """Relevance scores (on a subsample of ``table``) of every needed attribute not in ``known``.

        An attribute with fewer than two distinct values among the sampled records cannot be scored: with
        ``strict`` a TableError names it (the parameter, the values found, what to do); otherwise it is left out
        and returned in the second dict (name → the values found) for the caller to score elsewhere."""
        import pandas as pd

        n = flat.shape[0]
        needs = [(p, name) for p, name, _ in self._needs() if name not in (known or {})]
        scores: dict[str, np.ndarray] = {}
        missing: dict[str, list[Any]] = {}
        if not needs:
            return scores, missing
        labels = {name: (p, self._labels(table, name, p)) for p, name in needs}
        engine.check_finite(flat, f"{self.id}: the payload")
        rng = np.random.default_rng([int(self.seed) & 0xFFFFFFFFFFFFFFFF, 0x5E1EC7])
        rows = (
            np.sort(rng.choice(n, self.relevance_samples, replace=False))
            if n > self.relevance_samples
            else np.arange(n)
        )
        sample = flat[rows]
        for name, (p, y_all) in labels.items():
            y = y_all[rows]
            keep = ~pd.isna(y)  # records without a value of this attribute do not inform its relevance
            values = sorted({str(v) for v in y[keep].tolist()})
            if len(values) < 2:
                if not strict:
                    missing[name] = values
                    continue
                every = sorted({str(v) for v in y_all[~pd.isna(y_all)].tolist()})
                sub = (
                    f" (the {len(rows)} records subsampled by relevance_samples={self.relevance_samples} hold "
                    f"{values}; raise relevance_samples)"
                    if len(every) >= 2
                    else ""
                )
                raise TooFewValuesError(
                    f"{self.id}: the relevance of the features to {name!r} (parameter {p}) needs records of at least "
                    f"two values of {name!r}, but {where} ({n} records) has only {every}{sub}; anonymize a table "
                    f"that holds several values of {name!r}, or set {self._RATIO_OF[p]} to 0 or 1 so that no "
                    f"relevance to {name!r} is needed"
                )
            try:
                scores[name] = engine.estimate_relevance(
                    sample[keep],
                    y[keep],
                    self.relevance,
                    seed=self.seed,
                    n_trees=self.relevance_trees,
                    threads=self.threads,
                )
            except TableError as e:
                raise TableError(f"{self.id}: relevance to {name!r} ({p}) on {where}: {e}") from None
        return scores, missing

    def _mask(self, d: int, scores: dict[str, np.ndarray]) -> np.ndarray:
        """The selected-feature mask X_I from the relevance scores."""
        return engine.select_features(
            d,
            scores.get(self.attribute),
            self.retention,
            [(scores.get(q), r) for q, r in zip(self.additional_attributes, self.additional_retention, strict=True)],
            (scores.get(self.sensitive_attribute), self.sensitive_exclusion) if self.sensitive_attribute else None,
        )

    def _select(self, table: Any, flat: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Relevance scores (on a subsample) and the selected-feature mask for ``table``."""
        scores, _ = self._relevance(table, flat, where="the table being transformed")
        return self._mask(flat.shape[1], scores), scores

    def _has_everything(self, table: Any) -> bool:
        try:
            column = self.payload_column(table, self.payload or None)
        except TableError:
            return False
        names = {"subject", *table.attribute_names}
        return isinstance(table.payload(column), np.ndarray) and all(a in names for _, a, _ in self._needs())

    # ---------------------------------------------------------------------------------------------------- API
    def fit(self, background: Any) -> RandomSetMean:
        """Estimate feature relevance on ``background`` (clear data), when it has the payload and attributes.

        Otherwise (no background, an empty one, or one without the payload or an attribute column) the
        anonymizer stays unfitted and :meth:`transform` estimates relevance on the table it transforms. An
        attribute of which the background holds fewer than two values (a small background need not hold every
        value, e.g. the speakers' accents) cannot be scored there: its relevance alone is estimated on the
        table being transformed (``background_unscored_`` lists such attributes and the values the background
        held; a warning says so), the other attributes' relevance stays the background's. Values that the
        background lacks but that still leave two or more are fine: relevance is a property of the features,
        estimated from the values present, and the random sets are drawn from the transformed table's own
        values."""
        self.selected_, self.relevance_scores_, self.background_unscored_ = None, None, {}
        if background is None or len(background) == 0 or not self._has_everything(background):
            return self
        _, _, flat = self._flat(background)
        scores, missing = self._relevance(background, flat, where="the background", strict=False)
        self.relevance_scores_ = scores
        if missing:
            import warnings

            self.background_unscored_ = missing
            warnings.warn(
                f"{self.id}: the background ({len(background)} records) holds fewer than two values of "
                + ", ".join(f"{a!r} ({v})" for a, v in missing.items())
                + ": the relevance to "
                + ("it" if len(missing) == 1 else "them")
                + " is estimated on each table being transformed instead",
                stacklevel=2,
            )
        else:
            self.selected_ = self._mask(flat.shape[1], scores)
        return self

    def transform(self, table: Any) -> Any:
        """Anonymize ``table``: every record becomes the line-9 weighted mean of its random set from ``table``."""
        if not self.attribute:
            raise ParameterError(
                self.id,
                "attribute",
                self.attribute,
                f"the name of the attribute of interest; the table has {['subject'] + list(table.attribute_names)}",
            )
        column, x, flat = self._flat(table)
        n, d = flat.shape
        labels = self._labels(table, self.attribute, "attribute")
        if self.set_size > n:
            raise TableError(
                f"{self.id}: set_size g={self.set_size} exceeds the {n} records of the table (a "
                f"random set holds g distinct records of the table being transformed)"
            )
        what = f"attribute {self.attribute!r}"
        n_same = None if self.purity == "population" else engine.purity_count(self.purity, self.set_size)
        try:  # the cheap checks first: no relevance work for sets that cannot be drawn
            codes, classes = engine.factorize(labels, what)
            engine.check_set_sizes(
                codes, self.set_size, n_same, small_class=self.small_class, classes=classes, attribute=what
            )
        except TableError as e:
            raise TableError(f"{self.id}: {e}") from None
        fitted_dims = {v.size for v in (self.relevance_scores_ or {}).values()}
        if self.selected_ is not None:
            fitted_dims.add(self.selected_.size)
        if fitted_dims - {d}:
            raise TableError(
                f"{self.id}: fitted on records of {min(fitted_dims - {d})} values, but payload "
                f"{column!r} has {d} per record"
            )
        if self.selected_ is not None:
            selected = self.selected_
        else:  # unfitted, or partly: the relevance the background could not give, from the table itself
            known = self.relevance_scores_ or {}
            scores, _ = self._relevance(table, flat, where="the table being transformed", known=known)
            selected = self._mask(d, {**known, **scores})
        try:
            out = engine.random_set_mean(
                flat,
                codes,
                selected,
                set_size=self.set_size,
                n_same=n_same,
                weight=self.weight,
                seed=self.seed,
                small_class=self.small_class,
                backend=self.backend,
                threads=self.threads,
                classes=classes,
                attribute=what,
                device=self._sum_device(),
            )  # also raises for NaN/inf, naming the rows
        except TableError as e:
            raise TableError(f"{self.id}: {e}") from None
        return table.with_payload(column, restore_dtype(out.reshape(x.shape), x.dtype))

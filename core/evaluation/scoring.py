"""Metric rows from one score matrix: identification, verification and per-subject figures with CIs.

A score matrix (probes × classes) grows with the product of the probe and class counts, so the metrics read it
in blocks of probe rows (:class:`ScoreBlocks`): ranks by counting the scores above the genuine one, the
verification metrics from counts (:class:`bioanon.metrics.NonmatedCounts`), never a sort or a float64 copy of
the whole matrix. The results equal those of the whole-matrix formulas, whatever the block size (tested)."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any

import numpy as np

from .. import metrics as M
from ..builtin.utility import _valid

#: Working memory per score of one block: the block as the recognizer gave it (≤ 8 bytes), the recognizer's own
#: temporaries, and in a metric pass a float64 copy (8), the comparison masks (2) and the non-mated scores (8).
BYTES_PER_SCORE = 48
#: The working memory of one block when no budget is given (a whole matrix handed to :func:`score_metrics`).
DEFAULT_BLOCK_BYTES = 256 * 1024 * 1024
#: The blocks a recognizer computed are held in memory up to this share (1 / KEEP_SHARE) of the block budget;
#: the rest go to a temporary file (a score matrix grows with probes × classes, faster than the data).
KEEP_SHARE = 4
#: The working memory of the rows a metric pass reads at a time (its temporaries: a float64 copy, the masks,
#: the non-mated scores).
PASS_BYTES = 32 * 1024 * 1024


def block_rows(n_classes: int, memory: int) -> int:
    """Probe rows per block so that one block's working memory stays within ``memory`` bytes (at least 1)."""
    return max(1, int(memory) // (BYTES_PER_SCORE * max(int(n_classes), 1)))


class ScoreBlocks:
    """A score matrix (probes × classes, higher = more alike) held as blocks of probe rows.

    Made from a whole matrix (:meth:`of`: the blocks are views, nothing is copied) or by a recognizer scoring
    its probes a block at a time (:meth:`from_recognizer`). Blocks a recognizer computed are kept in float32
    where that holds every score exactly, and stay in memory while their bytes fit a quarter of the block budget
    (:data:`KEEP_SHARE`), else they go to an anonymous temporary file (deleted when closed or collected) and are
    read back one at a time, so the memory a pass needs is one block's, whatever the size of the matrix.
    Iterating gives ``(first_row, block)`` in probe order, as often as needed."""

    def __init__(self, classes: Any, n_probes: int, blocks: list[np.ndarray], spill: IO[bytes] | None = None):
        self.classes = np.asarray(classes)
        self.n_probes = int(n_probes)
        self._blocks = blocks  # in memory, or (spill) empty arrays that give each block's shape and dtype
        self._spill = spill
        self._read_buffer: np.ndarray | None = None  # where blocks are read back from the temporary file
        self._first: tuple[np.ndarray, _FirstPass] | None = None  # (true_idx, its first pass) made while scoring

    @property
    def n_classes(self) -> int:
        return int(self.classes.shape[0])

    @property
    def n_blocks(self) -> int:
        return len(self._blocks)

    @property
    def spilled(self) -> bool:
        """Whether the blocks are in a temporary file rather than in memory."""
        return self._spill is not None

    @classmethod
    def of(cls, scores: Any, *, memory: int = DEFAULT_BLOCK_BYTES) -> ScoreBlocks:
        """Blocks over a whole matrix: a :class:`ScoreBlocks` as it is, else anything with ``scores`` (probes ×
        classes) and ``classes`` (a :class:`~bioanon.ScoreMatrix`), cut into row views of ``memory`` bytes of
        working memory each."""
        if isinstance(scores, ScoreBlocks):
            return scores
        S = M._score_matrix(scores.scores)
        rows = block_rows(S.shape[1], memory)
        return cls(scores.classes, S.shape[0], [S[i : i + rows] for i in range(0, S.shape[0], rows)])

    @classmethod
    def from_recognizer(
        cls, recognizer: Any, probes: Any, *, memory: int, n_classes: int = 0, true_labels: Any = None
    ) -> ScoreBlocks:
        """The scores of an enrolled ``recognizer`` for the ``probes`` table, computed a block of probes at a
        time within ``memory`` bytes, at most :data:`DEFAULT_BLOCK_BYTES` (``n_classes``: the expected class
        count, e.g. the enrolled labels, which sizes the blocks; 0 = unknown). A matrix that fits is scored in one
        call, exactly as a whole; so is every matrix of a recognizer that declares
        ``scores_probes_independently = False`` (its score of one probe depends on the others). The class labels
        of every block must agree.

        ``true_labels`` (each probe's true class, as :func:`score_metrics` will get them): the metrics' first pass
        over the scores (ranks, mated scores, the non-mated range) is made on each block as it is scored, so
        blocks that go to the temporary file are read back once fewer (:meth:`first_pass`)."""
        n = len(probes)
        one_call = not getattr(recognizer, "scores_probes_independently", True)
        # larger blocks than DEFAULT_BLOCK_BYTES gain no speed, only memory
        memory = min(int(memory), DEFAULT_BLOCK_BYTES)
        if one_call or n * max(n_classes, 1) * BYTES_PER_SCORE <= memory:
            sm = recognizer.score(probes)
            S = M._score_matrix(sm.scores)
            return cls.of(sm, memory=memory) if S.shape[0] == n else _wrong_rows(recognizer, S.shape[0], n)
        rows = block_rows(n_classes, memory)
        keep_bytes = memory // KEEP_SHARE  # the blocks' own bytes held in memory before they go to a temporary file
        blocks: list[np.ndarray] = []
        spill: IO[bytes] | None = None
        classes: np.ndarray | None = None
        first: _FirstPass | None = None
        true_idx = np.empty(0, np.int64)
        pass_rows = 1
        held = 0
        for start, part in zip(range(0, n, rows), probes.iter_batches(rows), strict=True):  # zero-copy slices
            sm = recognizer.score(part)
            block = _compact(M._score_matrix(sm.scores))
            if block.shape[0] != min(rows, n - start):
                _wrong_rows(recognizer, block.shape[0], min(rows, n - start))
            if classes is None:
                classes = np.asarray(sm.classes)
                if true_labels is not None:
                    true_idx, first = _first_pass_for(true_labels, classes, n)
                    pass_rows = block_rows(len(classes), PASS_BYTES)
            elif not np.array_equal(classes, np.asarray(sm.classes)):
                raise M.MetricError(
                    f"{getattr(recognizer, 'id', recognizer)}: the classes of its scores differ between blocks of "
                    "probes; declare scores_probes_independently = False on the recognizer"
                )
            del sm  # the recognizer's own matrix (float64 where the block is now float32) before the next one
            if first is not None:  # in the same views of rows as passes() reads them back
                for i in range(0, block.shape[0], pass_rows):
                    first.add(start + i, block[i : i + pass_rows], true_idx)
            held += block.nbytes
            if spill is None and held > keep_bytes:  # from now on in a temporary file, the blocks so far too
                spill = tempfile.TemporaryFile(prefix="bioanon-scores-")
                for b in blocks:
                    np.ascontiguousarray(b).tofile(spill)
                blocks = [np.empty((b.shape[0], 0), b.dtype) for b in blocks]
            if spill is not None:
                np.ascontiguousarray(block).tofile(spill)
                blocks.append(np.empty((block.shape[0], 0), block.dtype))
            else:
                blocks.append(block)
        assert classes is not None  # n > 0 here: a matrix that fits was scored in one call
        out = cls(classes, n, blocks, spill)
        if first is not None:
            out._first = (true_idx, first)
        return out

    def first_pass(self, true_idx: np.ndarray) -> _FirstPass | None:
        """The first pass :meth:`from_recognizer` made while scoring, if it was made for these true classes."""
        if self._first is None or not np.array_equal(self._first[0], true_idx):
            return None
        return self._first[1]

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        """``(first_row, block)`` in probe order. A block read back from the temporary file is read into one
        buffer, reused for every block and every pass: it holds its rows until the next block is read (fresh
        arrays would be memory the system maps and zeroes again at each block)."""
        start = 0
        if self._spill is not None:
            self._spill.seek(0)
        for b in self._blocks:
            if self._spill is not None:
                b = self._read_block(b.shape[0], b.dtype)
            yield start, b
            start += b.shape[0]

    def _read_block(self, rows: int, dtype: np.dtype[Any]) -> np.ndarray:
        """The next ``rows`` rows of the temporary file, in the reused read buffer."""
        assert self._spill is not None
        nbytes = rows * self.n_classes * dtype.itemsize
        if self._read_buffer is None or self._read_buffer.size < nbytes:
            largest = max(b.shape[0] * b.dtype.itemsize for b in self._blocks) * self.n_classes
            self._read_buffer = np.empty(largest, np.uint8)
        view = self._read_buffer[:nbytes]
        got = self._spill.readinto(view.data)  # type: ignore[attr-defined]  # a TemporaryFile: BufferedRandom
        if got != nbytes:  # the file is ours and complete: only a full disk or a removed file gets here
            raise M.MetricError(f"the score blocks' temporary file ended after {got} of {nbytes} bytes of a block")
        return view.view(dtype).reshape(rows, self.n_classes)

    def passes(self) -> Iterator[tuple[int, np.ndarray]]:
        """``(first_row, rows)`` over every block in views of at most :data:`PASS_BYTES` of working memory: what
        a metric pass reads at a time (a block the recognizer scored in one call may be larger)."""
        rows = block_rows(self.n_classes, PASS_BYTES)
        for start, block in self:
            for i in range(0, block.shape[0], rows):
                yield start + i, block[i : i + rows]

    def dense(self, dtype: Any = np.float64) -> np.ndarray:
        """The whole matrix in one array (for the per-probe score tables a user asks for)."""
        out = np.empty((self.n_probes, self.n_classes), dtype=dtype)
        for start, b in self:
            out[start : start + b.shape[0]] = b
        return out

    def close(self) -> None:
        """Delete the temporary file, if any."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None
            self._blocks = []
            self._read_buffer = None


def _first_pass_for(true_labels: Any, classes: np.ndarray, n_probes: int) -> tuple[np.ndarray, _FirstPass | None]:
    """Each probe's class index, as :func:`score_metrics` finds it, and an empty first pass to fill; no pass
    when a label is not among ``classes`` (:func:`score_metrics` then says so) or the counts differ."""
    true = np.asarray(true_labels).astype(str)
    if true.shape != (n_probes,):
        return np.empty(0, np.int64), None
    try:
        true_idx = M.label_indices(true, classes.astype(str))
    except M.MetricError:
        return np.empty(0, np.int64), None
    return true_idx, _FirstPass(n_probes, len(classes))


def _compact(block: np.ndarray) -> np.ndarray:
    """The block in float32 when that holds every score exactly (a float64 block of float32 scores, as most
    recognizers compute them: half the bytes to keep or spill, the same metrics), else as it is."""
    if block.dtype != np.float64:
        return block
    with np.errstate(over="ignore"):  # a score beyond float32's range: the block stays float64
        small = block.astype(np.float32)
    return small if np.array_equal(small, block) else block


def _wrong_rows(recognizer: Any, got: int, expected: int) -> Any:
    raise M.MetricError(
        f"{getattr(recognizer, 'id', recognizer)}: its score matrix has {got} rows for {expected} probes"
    )


class _FirstPass:
    """What one pass over the blocks gives: each probe's rank, tie count and mated score, whether the rows are
    posteriors (and their row sums and KL from uniform), and the non-mated scores' range and finiteness.
    Filled a view of rows at a time (:meth:`add`): by :meth:`of` from blocks held or spilled, or by
    :meth:`ScoreBlocks.from_recognizer` as it scores them (then the blocks need not be read back for it)."""

    def __init__(self, n_probes: int, n_classes: int) -> None:
        P = int(n_probes)
        self.n_classes = int(n_classes)
        self.rank = np.empty(P, np.int64)
        self.ties = np.empty(P, np.int64)
        self.mated = np.empty(P)
        self.sums = np.empty(P)
        self.kl = np.empty(P)
        self.posterior = True
        self.n_min, self.n_max, self.n_finite = math.inf, -math.inf, True

    @classmethod
    def of(cls, blocks: ScoreBlocks, true_idx: np.ndarray) -> _FirstPass:
        first = cls(blocks.n_probes, blocks.n_classes)
        for start, block in blocks.passes():
            first.add(start, block, true_idx)
        return first

    def add(self, start: int, block: np.ndarray, true_idx: np.ndarray) -> None:
        """The rows ``block`` (probes ``start`` on) of the matrix; ``true_idx``: every probe's class index."""
        S = M._score_matrix(block)  # compared as they are: a float32 block is never copied to float64
        stop = start + S.shape[0]
        ti = true_idx[start:stop]
        self.rank[start:stop], self.ties[start:stop], self.mated[start:stop] = M._ranks_of(S, ti)
        if self.posterior:
            self.posterior = bool(np.all(S >= 0))
        if self.posterior:
            S64 = np.asarray(S, dtype=np.float64)  # a float64 copy of a pass block at most
            sums = S64.sum(axis=1)
            self.posterior = bool(np.allclose(sums, 1.0, atol=1e-6))
            if self.posterior:
                self.sums[start:stop] = sums
                self.kl[start:stop] = M.kl_rows(S64)
        if self.n_classes > 1:
            N = M._nonmated_of(S, ti)
            self.n_min, self.n_max = min(self.n_min, float(N.min())), max(self.n_max, float(N.max()))
            self.n_finite = self.n_finite and bool(np.isfinite(N).all())

    def hits(self, k: int) -> np.ndarray:
        return M._hits(self.rank, self.ties, k)


def _verification(blocks: ScoreBlocks, true_idx: np.ndarray, first: _FirstPass) -> dict[str, float]:
    """The verification metrics of all the blocks' scores (a second pass: the non-mated scores counted)."""
    counts = M.NonmatedCounts(first.mated, n_min=first.n_min, n_max=first.n_max, n_finite=first.n_finite)
    for start, block in blocks.passes():
        counts.add_rows(block, true_idx[start : start + block.shape[0]])
    return counts.result()


#: Fewer subjects than this: the CI over subjects is approximate (simulated coverage of the expanded BCa interval
#: ≈ 92–94 % at 6 subjects for accuracies far from 0.5, 93–97 % from 10 on); such rows say so in their note.
FEW_SUBJECTS = 10


def score_metrics(
    scores: Any,
    true_labels: np.ndarray,
    groups: np.ndarray,
    *,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    attribute: bool = False,
) -> list[dict[str, Any]]:
    """Rows ``{metric, value, ci_low, ci_high, chance, n_probes, note}`` for one recognizer run.

    Identification (top-1, top-5 when there are more than 5 classes, chance-normalized top-1, balanced
    accuracy, mean per-subject accuracy) gets bootstrap CIs over subjects (``groups``; the expanded BCa interval
    of :func:`bioanon.metrics.bootstrap_ci`); the verification metrics computed from the same matrix (EER, min Cllr,
    linkability D↔sys) are reported without CI. The mixture level 1 − top-1 and, when the scores are posteriors
    (non-negative rows summing to 1), the KL divergence of the attacker's posteriors from uniform are added.

    Chance levels: for an ``attribute`` attack the top-1 (plain accuracy) chance is the majority-class rate
    and balanced accuracy's chance is uniform, 1/|classes|; balanced accuracy is the attribute
    headline (a majority-class guesser scores the majority rate in accuracy but exactly 1/|classes| in balanced
    accuracy). For identity both are 1/|G|.

    A metric that is undefined for this matrix is still a row: value NaN and ``note`` saying why (linkability
    with fewer than 20 mated scores, EER and min Cllr without non-mated scores, chance-normalized accuracy when
    chance is 1). ``note`` also flags CIs that are missing or approximate (fewer than 2 or :data:`FEW_SUBJECTS`
    subjects, or no variation between subjects)."""
    blocks = ScoreBlocks.of(scores)
    classes = np.asarray(blocks.classes).astype(str)
    true_idx = M.label_indices(np.asarray(true_labels).astype(str), classes)
    n_probes, n_classes = blocks.n_probes, blocks.n_classes
    first = blocks.first_pass(true_idx) or _FirstPass.of(blocks, true_idx)
    alpha = 1.0 - confidence
    groups = np.asarray(groups)
    if groups.ndim == 1 and groups.size:
        # each probe's subject as its rank among the subjects: every bootstrap CI below groups the probes the same
        # way, and sorts these integers instead of the labels (strings sort some 20× slower)
        subjects, codes = np.unique(groups, return_inverse=True)
        groups, n_subjects = codes.reshape(-1), len(subjects)
    else:
        n_subjects = len(np.unique(groups))  # (bootstrap_ci says what is wrong with these groups)
    rows: list[dict[str, Any]] = []

    def ci(values: np.ndarray, statistic: str = "pooled", **kw: Any) -> tuple[float, float]:
        if bootstrap <= 0 or n_subjects < 2:
            return math.nan, math.nan
        return M.bootstrap_ci(values, groups, n_resamples=bootstrap, seed=seed, alpha=alpha, statistic=statistic, **kw)

    def ci_note(lo: float, hi: float) -> str:
        if bootstrap <= 0:
            return ""
        if n_subjects < 2:
            return "no CI: an interval over subjects needs at least 2 subjects"
        if lo == hi:
            return "CI degenerate: every bootstrap resample gives the same value (no variation between subjects)"
        if n_subjects < FEW_SUBJECTS:
            return (
                f"CI approximate: only {n_subjects} subjects (coverage may fall below the nominal level, "
                f"to about 92 % for values far from 0.5)"
            )
        return ""

    def add(
        metric: str,
        value: float,
        lo: float = math.nan,
        hi: float = math.nan,
        chance: float = math.nan,
        note: str | None = None,
    ) -> None:
        if note is None:
            note = ci_note(lo, hi)
        rows.append(
            {
                "metric": metric,
                "value": float(value),
                "ci_low": float(lo),
                "ci_high": float(hi),
                "chance": float(chance),
                "n_probes": int(n_probes),
                "note": note,
            }
        )

    hits1 = first.hits(1)
    c1 = M.majority_chance(true_idx) if attribute else M.chance_level(n_classes, 1)
    lo, hi = ci(hits1)
    add("top1", hits1.mean(), lo, hi, c1)
    add("mixture", 1.0 - hits1.mean(), 1.0 - hi, 1.0 - lo, 1.0 - c1)
    for k in (5, 10):
        if n_classes > k and not attribute:
            hits = first.hits(k)
            add(f"top{k}", hits.mean(), *ci(hits), chance=M.chance_level(n_classes, k))
    if first.posterior:
        M.check_posterior_sums(first.sums)
        add("kl_uniform", float(np.mean(first.kl)), chance=0.0, note="")
    if c1 < 1:
        cna: Callable[[float], float] = lambda a: (a - c1) / (1 - c1)  # noqa: E731 - monotone map of the top-1 CI
        add("cna1", cna(hits1.mean()), cna(lo), cna(hi), 0.0)
    else:
        add(
            "cna1",
            math.nan,
            chance=0.0,
            note="undefined: the chance level is 1 (a single class), so (A − c)/(1 − c) has no denominator",
        )
    add(
        "balanced_accuracy",
        float(np.nanmean(M.per_class_mean(hits1, true_idx, n_classes))),
        *ci(hits1, "balanced", classes=true_idx),
        chance=1.0 / n_classes,
    )
    add(
        "per_subject_accuracy",
        hits1.mean() if n_probes == 0 else _mean_per_class(hits1, true_idx),
        *ci(hits1, "subject"),
        chance=c1,
    )
    if n_classes > 1:
        v = _verification(blocks, true_idx, first)
        add("eer", v["eer"], chance=0.5, note="")
        add("min_cllr", v["min_cllr"], chance=1.0, note="")
        if v["linkability_bins"] >= 2:
            add("linkability", v["linkability"], chance=0.0, note=f"{v['linkability_bins']} histogram bins")
        else:
            add(
                "linkability",
                math.nan,
                chance=0.0,
                note=f"undefined: {n_probes} mated scores, fewer than the 20 needed for 2 histogram bins "
                f"(n_bins = min(⌊|M|/10⌋, 100)); with 1 bin D↔sys would be 0 by construction",
            )
    else:
        why = "undefined: no non-mated scores (the gallery has a single class)"
        for metric, chance in (("eer", 0.5), ("min_cllr", 1.0), ("linkability", 0.0)):
            add(metric, math.nan, chance=chance, note=why)
    return rows


def _mean_per_class(hits: np.ndarray, true_idx: np.ndarray) -> float:
    sums = np.bincount(true_idx, weights=hits)
    counts = np.bincount(true_idx)
    present = counts > 0
    return float(np.mean(sums[present] / counts[present]))


#: The score metrics broken down by group (``[report] breakdown``): the verification metrics, which need no CI
#: machinery and read the same from any subset of trials.
BREAKDOWN_METRICS = (("eer", 0.5), ("min_cllr", 1.0))


def breakdown_metrics(
    scores: Any,
    true_labels: np.ndarray,
    attributes: dict[str, np.ndarray],
    *,
    within: bool = True,
) -> list[dict[str, Any]]:
    """EER and min Cllr per group of probes: rows ``{by, group, metric, value, chance, n_probes, n_subjects,
    n_mated, n_nonmated, note}`` for every attribute ``by`` in ``attributes`` (one value per probe) and every
    value ``group`` it takes (probes whose value is missing belong to no group).

    A group's trials are its probes against, with ``within`` (identity), only the enrolled classes that are
    the true class of one of the group's probes — for a per-subject attribute such as sex: same-sex trials,
    as in VoicePrivacy's per-sex trial lists; without ``within`` (an attribute label), against every class.
    Mated scores: a probe against its own class; non-mated: against the other classes kept. No CI (as for the
    overall EER and min Cllr); a group without mated or non-mated scores gives NaN with a note."""
    blocks = ScoreBlocks.of(scores)
    classes = np.asarray(blocks.classes).astype(str)
    true = np.asarray(true_labels).astype(str)
    true_idx = M.label_indices(true, classes)
    first = blocks.first_pass(true_idx)  # made while scoring: its mated scores, without reading the blocks
    if first is not None:
        mated = first.mated
    else:
        mated = np.empty(blocks.n_probes)
        for first_row, block in blocks.passes():  # a first pass: the mated scores, every group's anchors
            ti = true_idx[first_row : first_row + block.shape[0]]
            mated[first_row : first_row + block.shape[0]] = block[np.arange(len(ti)), ti]
    rows: list[dict[str, Any]] = []
    # every group of every attribute: its probes, the classes its trials keep, its non-mated counts
    cells: list[tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, M.NonmatedCounts | None]] = []
    for by, values in attributes.items():
        values = np.asarray(values)
        known = _valid(values)  # probes whose value is missing (None, NaN) belong to no group
        groups, codes = np.unique(values[known].astype(str), return_inverse=True)
        group_of = np.full(len(values), -1)
        group_of[known] = codes
        for g, group in enumerate(groups.tolist()):
            mask = group_of == g
            t = true[mask]
            keep = np.isin(classes, t) if within else np.ones(len(classes), dtype=bool)
            n_mated, n_kept = int(mask.sum()), int(keep.sum())
            base = {
                "by": by,
                "group": group,
                "n_probes": n_mated,
                "n_subjects": int(len(np.unique(t))),
                "n_mated": n_mated,
                "n_nonmated": n_mated * (n_kept - 1),
            }
            counts = M.NonmatedCounts(mated[mask], linkability=False) if n_kept > 1 else None
            position = np.cumsum(keep) - 1  # column of each kept class among the kept columns
            cells.append((base, mask, keep, position, counts))
    for first_row, block in blocks.passes():  # the second pass: each group's non-mated scores counted
        for _, mask, keep, position, counts in cells:
            in_block = mask[first_row : first_row + block.shape[0]]
            if counts is None or not in_block.any():
                continue
            ti = position[true_idx[first_row : first_row + block.shape[0]][in_block]]
            counts.add_rows(block[in_block][:, keep], ti)
    for base, _, _, _, counts in cells:
        if counts is not None:
            v = counts.result()
            for metric, chance in BREAKDOWN_METRICS:
                rows.append({**base, "metric": metric, "value": float(v[metric]), "chance": chance, "note": ""})
        else:
            why = (
                f"undefined: the group's probes meet a single {'enrolled subject' if within else 'class'}, "
                "so there are no non-mated scores"
            )
            for metric, chance in BREAKDOWN_METRICS:
                rows.append({**base, "metric": metric, "value": math.nan, "chance": chance, "note": why})
    return rows

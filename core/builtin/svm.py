"""A support vector classifier in numpy: libsvm's C-SVC, one-vs-one, with scikit-learn's one-vs-rest scores.

:class:`OvoSvc` trains the same model as ``sklearn.svm.SVC(kernel=…, C=…, gamma="scale",
decision_function_shape="ovr")`` without importing scikit-learn (which imports SciPy's statistics and pandas:
about 1 s and 110 MB of a run that needs only the SVM). Each pair of classes is one binary problem

    min ½ αᵀQα − Σα   subject to   0 ≤ α ≤ C,  yᵀα = 0,   Q_ij = y_i y_j K(x_i, x_j),

solved by libsvm's SMO: the working pair chosen by second-order information (Fan, Chen & Lin 2005, libsvm's
``select_working_set``), the same two-variable update and clipping, the same stopping rule (the maximal KKT
violation below ``tol``, 1e-3 as libsvm's ``eps``) and the same bias (libsvm's ``calculate_rho``). libsvm
also shrinks the working set; that changes the path, not the optimum, so the decision values agree with
scikit-learn's to within the tolerance of the solve (tested), not bit for bit.

All the pairs are solved at once: one SMO step updates every unfinished problem (numpy over a batch of
padded problems), so a gallery of many small classes costs a few hundred vectorized steps, not a Python loop
per pair. Pairs of larger classes (:data:`MAX_PAIR_SAMPLES`), where libsvm's compiled loop is far faster, are
left to scikit-learn by :func:`bioanon.builtin.recognizers.svc`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import DataError, ParameterError

#: libsvm's TAU: the smallest curvature of a step
TAU = 1e-12
#: the largest binary problem solved here: numpy's steps cost about 100 µs each where libsvm's in C cost about
#: 1 µs, and a large problem of overlapping classes takes thousands of them (2 × 500 samples: 0.8 s here,
#: 0.01 s in libsvm); galleries of many small classes, solved all at once, cost about what libsvm does
MAX_PAIR_SAMPLES = 200
#: bytes of the Q matrices of one batch of problems solved together
BATCH_BYTES = 64 * 2**20
#: bytes of the pairwise decision values computed at once (probes are taken in chunks below it)
DECISION_BYTES = 32 * 2**20
KERNELS = ("linear", "rbf", "poly", "sigmoid")


def kernel_matrix(
    kernel: str, a: np.ndarray, b: np.ndarray, *, gamma: float, degree: int = 3, coef0: float = 0.0
) -> np.ndarray:
    """libsvm's kernels between the rows of ``a`` and ``b`` (float64): linear ``a·b``, rbf
    ``exp(-γ|a-b|²)``, poly ``(γ a·b + coef0)^degree``, sigmoid ``tanh(γ a·b + coef0)``."""
    if kernel not in KERNELS:
        raise ParameterError("OvoSvc", "kernel", kernel, " | ".join(KERNELS))
    sq = (np.einsum("ij,ij->i", a, a)[:, None], np.einsum("ij,ij->i", b, b)[None, :]) if kernel == "rbf" else None
    return _from_dot(kernel, a @ b.T, sq, gamma=gamma, degree=degree, coef0=coef0)


def _from_dot(
    kernel: str, dot: np.ndarray, sq: tuple[np.ndarray, np.ndarray] | None, *, gamma: float, degree: int, coef0: float
) -> np.ndarray:
    """The kernel from the dot products ``dot`` (overwritten) and, for rbf, the squared norms of both sides
    (broadcastable to ``dot``)."""
    out: np.ndarray
    if kernel == "linear":
        out = dot
    elif kernel == "rbf" and sq is not None:
        dot *= -2.0
        dot += sq[0]
        dot += sq[1]
        out = np.exp(-gamma * np.maximum(dot, 0.0, out=dot), out=dot)
    elif kernel == "poly":
        out = (gamma * dot + coef0) ** degree
    else:
        out = np.tanh(gamma * dot + coef0, out=dot)
    return out


def _last_argmax(v: np.ndarray) -> np.ndarray:
    """Index of the last maximum of each row (libsvm's ``>=`` scans keep the last of equal values)."""
    last: np.ndarray = v.shape[1] - 1 - np.argmax(v[:, ::-1], axis=1)
    return last


def smo(q: np.ndarray, y: np.ndarray, valid: np.ndarray, c: float, tol: float, max_iter: int) -> tuple[Any, ...]:
    """Solve a batch of binary SVM duals (libsvm's ``Solver`` without shrinking).

    ``q``: (B, n, n) the problems' ``Q`` (padded); ``y``: (B, n) labels ±1 (0 on padding); ``valid``: (B, n)
    which entries are samples. Returns ``alpha`` (B, n), ``rho`` (B,) and the steps each problem took (B,)."""
    b_all, n = y.shape
    alpha = np.zeros((b_all, n))
    grad = np.where(valid, -1.0, 0.0)
    qd = np.diagonal(q, axis1=1, axis2=2)
    steps = np.zeros(b_all, dtype=np.int64)
    live = np.arange(b_all)  # the problems still being solved, in the arrays below
    ql, yl, vl, al, gl, qdl = q, y, valid, alpha, grad, qd
    pos, neg = yl > 0, yl < 0
    it = 0
    while live.size:
        if it >= max_iter:
            warnings.warn(
                f"SVM solver stopped after {max_iter} steps on {live.size} of {b_all} problems "
                "without reaching its tolerance (the scores are those of the last step)",
                RuntimeWarning,
                stacklevel=3,
            )
            break
        r = np.arange(live.size)
        below_c, above_0 = al < c, al > 0
        up = vl & ((pos & below_c) | (neg & above_0))
        low = vl & ((pos & above_0) | (neg & below_c))
        yg = yl * gl
        up_val = np.where(up, -yg, -np.inf)
        i = _last_argmax(up_val)
        g_max = up_val[r, i]
        g_max2 = np.where(low, yg, -np.inf).max(axis=1)
        qi = ql[r, i]  # (B, n): rows i of Q
        yi = yl[r, i]
        grad_diff = g_max[:, None] + yg
        quad = qdl[r, i][:, None] + qdl - 2.0 * (yi[:, None] * yl) * qi
        quad = np.where(quad > 0, quad, TAU)
        obj = np.where(low & (grad_diff > 0), -(grad_diff * grad_diff) / quad, np.inf)
        j = _last_argmax(-obj)
        done = (g_max + g_max2 < tol) | ~np.isfinite(obj[r, j])
        if done.any():  # write finished problems back; keep solving the others
            alpha[live[done]] = al[done]
            grad[live[done]] = gl[done]
            keep = ~done
            live, i, j, qi, yi = live[keep], i[keep], j[keep], qi[keep], yi[keep]
            ql, yl, vl, al, gl, qdl = ql[keep], yl[keep], vl[keep], al[keep], gl[keep], qdl[keep]
            pos, neg = yl > 0, yl < 0
            if not live.size:
                break
            r = np.arange(live.size)
        steps[live] += 1
        it += 1
        qj = ql[r, j]
        yj = yl[r, j]
        q_ij = qi[r, j]
        a_i, a_j = al[r, i], al[r, j]
        g_i, g_j = gl[r, i], gl[r, j]
        qd_i, qd_j = qdl[r, i], qdl[r, j]
        opposite = yi != yj
        # labels differ: alpha_i - alpha_j is kept
        quad_o = qd_i + qd_j + 2.0 * q_ij
        quad_o = np.where(quad_o > 0, quad_o, TAU)
        delta_o = (-g_i - g_j) / quad_o
        diff = a_i - a_j
        ni_o, nj_o = a_i + delta_o, a_j + delta_o
        m = (diff > 0) & (nj_o < 0)
        nj_o, ni_o = np.where(m, 0.0, nj_o), np.where(m, diff, ni_o)
        m = (diff <= 0) & (ni_o < 0)
        ni_o, nj_o = np.where(m, 0.0, ni_o), np.where(m, -diff, nj_o)
        m = (diff > 0) & (ni_o > c)
        ni_o, nj_o = np.where(m, c, ni_o), np.where(m, c - diff, nj_o)
        m = (diff <= 0) & (nj_o > c)
        nj_o, ni_o = np.where(m, c, nj_o), np.where(m, c + diff, ni_o)
        # same label: alpha_i + alpha_j is kept
        quad_s = qd_i + qd_j - 2.0 * q_ij
        quad_s = np.where(quad_s > 0, quad_s, TAU)
        delta_s = (g_i - g_j) / quad_s
        total = a_i + a_j
        ni_s, nj_s = a_i - delta_s, a_j + delta_s
        m = (total > c) & (ni_s > c)
        ni_s, nj_s = np.where(m, c, ni_s), np.where(m, total - c, nj_s)
        m = (total <= c) & (nj_s < 0)
        nj_s, ni_s = np.where(m, 0.0, nj_s), np.where(m, total, ni_s)
        m = (total > c) & (nj_s > c)
        nj_s, ni_s = np.where(m, c, nj_s), np.where(m, total - c, ni_s)
        m = (total <= c) & (ni_s < 0)
        ni_s, nj_s = np.where(m, 0.0, ni_s), np.where(m, total, nj_s)
        new_i = np.where(opposite, ni_o, ni_s)
        new_j = np.where(opposite, nj_o, nj_s)
        gl += qi * (new_i - a_i)[:, None] + qj * (new_j - a_j)[:, None]
        al[r, i] = new_i
        al[r, j] = new_j
    if live.size:  # stopped at max_iter
        alpha[live], grad[live] = al, gl
    return alpha, _rho(alpha, grad, y, valid, c), steps


def _rho(alpha: np.ndarray, grad: np.ndarray, y: np.ndarray, valid: np.ndarray, c: float) -> np.ndarray:
    """libsvm's ``calculate_rho``: the mean of ``y·G`` over the free variables, else the middle of its bounds."""
    yg = y * grad
    upper, lower = valid & (alpha >= c), valid & (alpha <= 0)
    free = valid & ~upper & ~lower
    to_ub = (upper & (y < 0)) | (lower & (y > 0))
    to_lb = (upper & (y > 0)) | (lower & (y < 0))
    ub = np.where(to_ub, yg, np.inf).min(axis=1)
    lb = np.where(to_lb, yg, -np.inf).max(axis=1)
    n_free = free.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):  # each row takes one of the two
        rho: np.ndarray = np.where(n_free > 0, np.where(free, yg, 0.0).sum(axis=1) / n_free, (ub + lb) / 2.0)
    return rho


class OvoSvc:
    """libsvm's C-SVC (one-vs-one) with scikit-learn's one-vs-rest decision function, in numpy.

    ``OvoSvc(kernel, C, gamma="scale").fit(x, y).decision_function(z)`` gives the scores of
    ``sklearn.svm.SVC(kernel=kernel, C=C, decision_function_shape="ovr")`` to within the solver's tolerance:
    a (probes, classes) matrix of votes plus confidences in (-1/3, 1/3), or for two classes one column, positive
    for the second class.

    Parameters
    ----------
    kernel
        ``"linear"``, ``"rbf"``, ``"poly"`` or ``"sigmoid"`` (libsvm's kernels).
    C
        The regularization: the bound of every dual variable (> 0).
    gamma
        The kernel's scale (rbf, poly, sigmoid): a float > 0, or ``"scale"`` = 1 / (features × variance of x),
        or ``"auto"`` = 1 / features (scikit-learn's options).
    degree, coef0
        The poly kernel's degree, and the constant of the poly and sigmoid kernels.
    tol
        The stopping tolerance on the largest KKT violation (libsvm's ``eps``; scikit-learn's ``tol``).
    max_iter
        The most SMO steps of one problem (a warning names the problems stopped there).
    """

    def __init__(
        self,
        kernel: str = "rbf",
        C: float = 1.0,  # noqa: N803 - scikit-learn's name
        *,
        gamma: float | str = "scale",
        degree: int = 3,
        coef0: float = 0.0,
        tol: float = 1e-3,
        max_iter: int = 1_000_000,
    ):
        if kernel not in KERNELS:
            raise ParameterError("OvoSvc", "kernel", kernel, " | ".join(KERNELS))
        if not C > 0:
            raise ParameterError("OvoSvc", "C", C, "a number > 0")
        self.kernel, self.C, self.gamma, self.degree, self.coef0 = kernel, float(C), gamma, int(degree), float(coef0)
        self.tol, self.max_iter = float(tol), int(max_iter)

    def _kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return kernel_matrix(self.kernel, a, b, gamma=self.gamma_, degree=self.degree, coef0=self.coef0)

    def fit(self, x: np.ndarray, y: np.ndarray) -> OvoSvc:
        """Train one binary SVM per pair of classes of ``y`` (classes sorted, as scikit-learn's)."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.ndim != 2 or len(x) != len(y):
            raise DataError(f"OvoSvc.fit: x must be (samples, features) with one label each, got {x.shape}")
        self.classes_, codes = np.unique(y, return_inverse=True)
        k = len(self.classes_)
        if k < 2:
            raise DataError("OvoSvc.fit: needs at least 2 classes")
        if self.gamma == "scale":
            var = float(x.var())
            self.gamma_ = 1.0 / (x.shape[1] * var) if var != 0 else 1.0
        elif self.gamma == "auto":
            self.gamma_ = 1.0 / x.shape[1]
        else:
            self.gamma_ = float(self.gamma)
        order = np.argsort(codes, kind="stable")  # samples grouped by class, in their order within it
        counts = np.bincount(codes, minlength=k)
        starts = np.concatenate([[0], np.cumsum(counts)])
        first, second = np.triu_indices(k, 1)  # libsvm's pair order: (0,1), (0,2), …, (1,2), …
        sizes = counts[first] + counts[second]
        n_max = int(sizes.max())
        if n_max > MAX_PAIR_SAMPLES:
            raise DataError(f"OvoSvc.fit: a pair of classes holds {n_max} samples (at most {MAX_PAIR_SAMPLES})")
        # coef[s, col]: y·alpha of sample s (grouped order) in its pair with the col-th other class (libsvm's
        # sv_coef layout: the other class's index, minus one past the sample's own class)
        coef = np.zeros((len(x), k - 1))
        self.rho_ = np.zeros(len(first))
        self.n_iter_ = np.zeros(len(first), dtype=np.int64)
        xs = x[order]
        # the kernel of every pair's problem is read from the kernel of the whole set when that is small (a
        # gallery: no (pairs, n, features) stack of samples is ever made), else computed batch by batch
        whole = self._kernel(xs, xs) if 8 * len(xs) ** 2 <= BATCH_BYTES else None
        per_batch = max(1, BATCH_BYTES // (8 * n_max * (n_max if whole is not None else max(n_max, x.shape[1]))))
        lane = np.arange(n_max)
        for lo in range(0, len(first), per_batch):
            a, b = first[lo : lo + per_batch], second[lo : lo + per_batch]
            na, nb = counts[a], counts[b]
            valid = lane[None, :] < (na + nb)[:, None]
            in_a = lane[None, :] < na[:, None]
            idx = np.where(in_a, starts[a][:, None] + lane, starts[b][:, None] + lane - na[:, None])
            idx = np.where(valid, idx, 0)
            yb = np.where(valid, np.where(in_a, 1.0, -1.0), 0.0)
            kb = whole[idx[:, :, None], idx[:, None, :]] if whole is not None else self._batch_kernel(xs[idx])
            q = kb * (yb[:, :, None] * yb[:, None, :])
            alpha, rho, steps = smo(q, yb, valid, self.C, self.tol, self.max_iter)
            self.rho_[lo : lo + len(a)] = rho
            self.n_iter_[lo : lo + len(a)] = steps
            dual = alpha * yb
            # a sample of class a in pair (a, b) sits in column b - 1; of class b, in column a
            rows = idx[valid]
            cols = np.where(in_a, b[:, None] - 1, a[:, None])[valid]
            coef[rows, cols] = dual[valid]
        used = np.any(coef != 0, axis=1)
        self.support_ = np.sort(order[used])  # indices into x of the support vectors
        self._sv = xs[used]
        self._sv_coef = coef[used]
        self._sv_class = np.repeat(np.arange(k), counts)[used]
        self.n_support_ = np.bincount(self._sv_class, minlength=k)
        return self

    def _batch_kernel(self, xb: np.ndarray) -> np.ndarray:
        """The kernel within each problem of a batch ``xb`` (B, n, d): (B, n, n)."""
        sq = np.einsum("bij,bij->bi", xb, xb) if self.kernel == "rbf" else None
        return _from_dot(
            self.kernel,
            np.matmul(xb, xb.transpose(0, 2, 1)),
            None if sq is None else (sq[:, :, None], sq[:, None, :]),
            gamma=self.gamma_,
            degree=self.degree,
            coef0=self.coef0,
        )

    def pair_decision(self, z: np.ndarray) -> np.ndarray:
        """libsvm's decision values (probes × pairs, pairs in (0,1), (0,2), …, (1,2), … order): positive for the
        pair's first class."""
        z = np.asarray(z, dtype=np.float64)
        k = len(self.classes_)
        pair_of = np.full((k, k), -1)
        first, second = np.triu_indices(k, 1)
        pair_of[first, second] = pair_of[second, first] = np.arange(len(first))
        kz = self._kernel(z, self._sv)
        dec = np.broadcast_to(-self.rho_, (len(z), len(first))).copy()
        for a in range(k):
            mine = self._sv_class == a
            if not mine.any():
                continue
            others = np.delete(np.arange(k), a)
            dec[:, pair_of[a, others]] += kz[:, mine] @ self._sv_coef[mine]
        return dec

    def decision_function(self, z: np.ndarray) -> np.ndarray:
        """scikit-learn's ``decision_function_shape="ovr"`` scores: per class, its one-vs-one votes plus its
        summed decision values mapped into (-1/3, 1/3); for two classes the one decision value, positive for
        the second class."""
        z = np.asarray(z, dtype=np.float64)
        k = len(self.classes_)
        if k == 2:
            return -self.pair_decision(z)[:, 0]
        rows = max(1, DECISION_BYTES // (8 * k * (k - 1) // 2))
        out = np.empty((len(z), k))
        for lo in range(0, len(z), rows):
            out[lo : lo + rows] = ovr_scores(self.pair_decision(z[lo : lo + rows]), k)
        return out

    def predict(self, z: np.ndarray) -> np.ndarray:
        """The class of each row of ``z`` with the highest one-vs-rest score."""
        d = self.decision_function(z)
        best = (d > 0).astype(int) if d.ndim == 1 else np.argmax(d, axis=1)
        labels: np.ndarray = self.classes_[best]
        return labels


def ovr_scores(dec: np.ndarray, k: int) -> np.ndarray:
    """scikit-learn's one-vs-rest scores of ``k`` classes from libsvm's pairwise decisions (probes × pairs):
    each class's votes plus its summed decisions mapped into (-1/3, 1/3)."""
    first, second = np.triu_indices(k, 1)
    by_second = np.argsort(second, kind="stable")
    wins = dec >= 0  # scikit-learn: a decision of exactly 0 votes for the first class
    votes = _sum_by(wins, first, k) + _sum_by(~wins[:, by_second], second[by_second], k)
    conf = _sum_by(dec, first, k) - _sum_by(dec[:, by_second], second[by_second], k)
    out: np.ndarray = votes + conf / (3.0 * (np.abs(conf) + 1.0))
    return out


def _sum_by(values: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
    """Row sums of the columns of ``values`` per group (``groups`` sorted, one per column): (rows, k)."""
    out = np.zeros((values.shape[0], k))
    present, starts = np.unique(groups, return_index=True)
    out[:, present] = np.add.reduceat(values.astype(np.float64, copy=False), starts, axis=1)
    return out

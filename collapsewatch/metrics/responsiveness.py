"""Responsiveness: does the reasoning depend on the input? (what entropy misses)

RAGEN-2 (arXiv 2604.06268, diagnostics section) estimates the mutual information
I(X; Z) between input X and reasoning Z in-batch: with M reasonings z_i, N distinct
inputs x_j (columns) and c(i) the column of z_i's own input, a score matrix
A_ij = log p(z_i | x_j) gives

    MI = mean_i [ A_{i,c(i)} - (logsumexp_j A_ij - log N) ]        (nats, <= log N)

and retrieval accuracy = share of i whose argmax_j A_ij is c(i). :func:`mi_from_scores`
and :func:`retrieval_from_scores` are that core, shared by the log-prob estimators
(trainer-supplied A: also the conditional and marginal entropies, the marginal std and
the MI z-score, and :func:`merge_columns` for identical inputs) and the text-only ones
here, which put a similarity kernel in place of log p: A_ij = cos(e_i, leave-one-out
centroid of column j) / temperature. :func:`action_mi` is the text-free check: the
mutual information between the state and the first action.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from .representation import Embeddings, unit_rows
from .structure import group_codes

# Below this squared norm a leave-one-out centroid is "no other member": cancelling
# vectors or rounding, never a real direction.
_EMPTY_SQ = 1e-12
# Dense column sums up to this many entries (32 MiB of float64); sparse beyond.
_DENSE_SUMS_MAX = 1 << 22
# The permutation null uses the Gram matrix E E^T up to this many rows (32 MiB); with
# more it recomputes E @ S^T per relabelling (slower, but memory stays O(M D)).
_GRAM_MAX_ROWS = 2048


def _check_scores(
    scores: ArrayLike, own: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    a = np.asarray(scores, dtype=np.float64)
    o = np.asarray(own).reshape(-1)
    if a.ndim != 2:
        raise ValueError(f"scores must be 2-D (M, N), got shape {a.shape}")
    if o.shape[0] != a.shape[0]:
        raise ValueError(f"scores has {a.shape[0]} rows but own has {o.shape[0]}")
    if not np.all(np.isfinite(a)):
        raise ValueError("scores must be finite")
    if o.size and (not np.issubdtype(o.dtype, np.integer) or o.min() < 0 or o.max() >= a.shape[1]):
        raise ValueError("own must hold integer column indices in [0, N)")
    return a, o.astype(np.intp)


def mi_from_scores(scores: ArrayLike, own: ArrayLike) -> float | None:
    """RAGEN-2's in-batch mutual-information estimator from a score matrix.

    ``MI = mean_i [A_{i,c(i)} - (logsumexp_j A_ij - log N)]``: how much better row i's
    own input scores it than the average input does, in the softmax sense.

    Args:
        scores: ``(M, N)`` float, ``A_ij`` = score of reasoning i under input j: a
            log-probability log p(z_i | x_j) (nats) or a scaled similarity.
        own: ``(M,)`` int, ``c(i)``, the column of row i's own input.

    Returns:
        Nats, at most log N; 0 when the scores do not depend on the column (every row
        scores all inputs alike); None when M = 0 or N < 2.
        Source: RAGEN-2 (arXiv 2604.06268), diagnostics section (in-batch MI estimate).
    """
    a, o = _check_scores(scores, own)
    m, n = a.shape
    if m == 0 or n < 2:
        return None
    marginal = logsumexp(a, axis=1) - np.log(n)
    return float(np.mean(a[np.arange(m), o] - marginal))


def retrieval_from_scores(
    scores: ArrayLike,
    own: ArrayLike,
    *,
    k: int = 1,
    chance_corrected: bool = True,
    tie_tol: float = 1e-9,
) -> float | None:
    """Share of rows whose own input is among their k best-scoring columns.

    Ties get fractional credit: with g columns scoring above row i's own column and t
    columns (its own included) tied with it, row i counts ``clip((k - g) / t, 0, 1)``,
    the chance that breaking the tie at random puts its own column in the top k. So
    identical scores give chance, not a bias toward the first column; for k = 1 a row
    whose own column ties t best columns counts 1/t.

    Args:
        scores: ``(M, N)`` float score matrix (as in :func:`mi_from_scores`).
        own: ``(M,)`` int own column of each row.
        k: how many best columns count as a hit (>= 1); k >= N is always a hit.
        chance_corrected: return ``(acc - c) / (1 - c)`` with c = :func:`retrieval_chance`
            (0 = chance, 1 = perfect, negative = worse than chance) instead of the raw
            accuracy.
        tie_tol: scores within this absolute distance of each other tie.

    Returns:
        The (corrected) accuracy, unitless; None when M = 0 or N < 2, and, corrected,
        also when k >= N (every row is a hit: chance is 1).
        Source: RAGEN-2 (arXiv 2604.06268), retrieval accuracy and top-k accuracy
        (chance = min(k, N) / N).
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    a, o = _check_scores(scores, own)
    m, n = a.shape
    if m == 0 or n < 2:
        return None
    mine = a[np.arange(m), o][:, None]
    above = np.count_nonzero(a > mine + tie_tol, axis=1)
    tied = np.count_nonzero(np.abs(a - mine) <= tie_tol, axis=1)
    acc = float(np.mean(np.clip((k - above) / tied, 0.0, 1.0)))
    if not chance_corrected:
        return acc
    chance = retrieval_chance(n, k)
    if chance is None or chance >= 1.0:
        return None
    return (acc - chance) / (1.0 - chance)


def retrieval_chance(num_columns: int, k: int = 1) -> float | None:
    """Expected top-k retrieval accuracy of a guess that ignores the reasoning.

    Args:
        num_columns: N, the number of distinct inputs (columns).
        k: top-k (>= 1).

    Returns:
        ``min(k, N) / N`` in (0, 1], or None when N < 2 (retrieval is undefined).
        Source: RAGEN-2 (arXiv 2604.06268), retrieval chance level.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    return min(k, num_columns) / num_columns if num_columns >= 2 else None


def merge_columns(
    scores: ArrayLike, keys: Sequence[Hashable]
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Merge columns that stand for the same input into one column.

    Two columns with equal key are one input (RAGEN-2 counts identical prompts as one):
    the merged score is ``log mean_{j in J} exp(A_ij)``, the log-probability under the
    uniform mixture of the merged columns, which is their common value when the inputs
    really are identical (then every member scores the same). With the columns merged,
    N counts distinct inputs, so log N, the chance level and the retrieval hits all
    refer to distinct inputs.

    Args:
        scores: ``(M, N)`` float scores (log p, nats), finite.
        keys: ``(N,)`` hashable identity of each column's input.

    Returns:
        ``(merged, column_of)``: merged ``(M, N')`` scores, columns in order of first
        appearance of their key, and ``column_of`` ``(N,)``, the merged column of each
        original column (map own columns through it).
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != len(keys):
        raise ValueError(f"scores has shape {a.shape} but keys has {len(keys)} entries")
    column_of, n = group_codes(keys)
    if n == a.shape[1]:
        return a, column_of
    merged = np.empty((a.shape[0], n))
    for j in range(n):
        members = np.flatnonzero(column_of == j)
        merged[:, j] = logsumexp(a[:, members], axis=1) - np.log(len(members))
    return merged, column_of


def marginal_from_scores(scores: ArrayLike) -> NDArray[np.float64]:
    """Per-row log-probability under the uniform mixture of the inputs.

    ``marginal_i = logsumexp_j A_ij - log N = log (1/N sum_j p(z_i | x_j))``.

    Args:
        scores: ``(M, N)`` float, ``A_ij = log p(z_i | x_j)`` (nats), finite, N >= 1.

    Returns:
        ``(M,)`` float, nats. Source: RAGEN-2 (arXiv 2604.06268), the mixture
        p_mix(z) = 1/N sum_j p(z | x_j) of its MI estimator.
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] == 0:
        raise ValueError(f"scores must be 2-D with at least one column, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("scores must be finite")
    return logsumexp(a, axis=1) - np.log(a.shape[1])


def conditional_entropy_from_scores(scores: ArrayLike, own: ArrayLike) -> float | None:
    """Monte Carlo estimate of H(Z | X): minus the mean log-probability of each
    reasoning under its own input.

    ``H(Z | X) ~ -mean_i A_{i,c(i)}``, unbiased when z_i is sampled from p(z | x_c(i))
    (as the step's rollouts are) and A is the policy's own log p.

    Args:
        scores: ``(M, N)`` float, ``A_ij = log p(z_i | x_j)``: per token (nats/token)
            or summed over the reasoning (nats).
        own: ``(M,)`` int own column of each row.

    Returns:
        Nats (per token or per sequence, as the scores), >= 0 for log-probabilities;
        None when M = 0. Source: RAGEN-2 (arXiv 2604.06268), H(Z | X) =
        -E log p(z | x), the "conditional entropy" of its decomposition.
    """
    a, o = _check_scores(scores, own)
    if a.shape[0] == 0:
        return None
    return float(-np.mean(a[np.arange(a.shape[0]), o]))


def marginal_entropy_from_scores(scores: ArrayLike) -> float | None:
    """Monte Carlo estimate of H(Z) under the uniform mixture of the step's inputs.

    ``H(Z) ~ -mean_i marginal_i`` (:func:`marginal_from_scores`); with
    :func:`conditional_entropy_from_scores` it satisfies RAGEN-2's identity
    ``H(Z) - H(Z | X) = MI`` (:func:`mi_from_scores`) exactly, row by row.

    Args:
        scores: ``(M, N)`` float log p(z_i | x_j), per token or summed.

    Returns:
        Nats (as the scores); None when M = 0.
        Source: RAGEN-2 (arXiv 2604.06268), H(Z) = -E log p_mix(z).
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim == 2 and a.shape[0] == 0:
        return None
    return float(-np.mean(marginal_from_scores(a)))


def marginal_std_from_scores(scores: ArrayLike) -> float | None:
    """Spread of the per-row marginal log-probabilities: ``std_i(marginal_i)``, ddof 0.

    Args:
        scores: ``(M, N)`` float log p(z_i | x_j), per token or summed.

    Returns:
        Nats (as the scores), >= 0; None when M = 0. The scale that
        :func:`mi_zscore_from_scores` divides by. Source: RAGEN-2 (arXiv 2604.06268),
        the marginal std of its MI z-score (population std).
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim == 2 and a.shape[0] == 0:
        return None
    return float(np.std(marginal_from_scores(a)))


def mi_zscore_from_scores(scores: ArrayLike, own: ArrayLike, *, eps: float = 1e-3) -> float | None:
    """RAGEN-2's MI z-score: the in-batch MI over the spread of the marginals.

    ``mi_zscore = MI / (std_i(marginal_i) + eps)`` (:func:`mi_from_scores`,
    :func:`marginal_std_from_scores`): the MI in units of the batch's own log-prob
    spread, so it does not drift with the overall scale of the log-probabilities.
    When every marginal is equal (a single row, or identical rows) the denominator is
    eps and the value is MI / eps.

    Args:
        scores: ``(M, N)`` float log p(z_i | x_j) (the scorer uses per-token scores).
        own: ``(M,)`` int own column of each row.
        eps: stabiliser of the denominator (RAGEN-2: 1e-3).

    Returns:
        Unitless; 0 when the scores ignore the input; None when M = 0 or N < 2.
        Source: RAGEN-2 (arXiv 2604.06268), MI z-score, the paper's best single
        predictor of task success.
    """
    if eps <= 0:
        raise ValueError("eps must be > 0")
    mi = mi_from_scores(scores, own)
    if mi is None:
        return None
    return mi / (float(np.std(marginal_from_scores(scores))) + eps)


@dataclass(frozen=True)
class CentroidScores:
    """Leave-one-out centroid similarities of a step (see :func:`centroid_similarity`).

    ``sims`` is ``(K, N)`` cosine similarity of each scored row to each column's
    centroid, ``own`` its ``(K,)`` own column, ``rows`` the ``(K,)`` indices of the scored
    rows in the input, ``num_columns`` N.
    """

    sims: NDArray[np.float64]
    own: NDArray[np.intp]
    rows: NDArray[np.intp]
    num_columns: int


def _column_dots(
    e: NDArray[np.float64] | sp.csr_matrix,
    codes: NDArray[np.intp],
    n: int,
    gram: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """``(K, n)`` dot products e_i . S_j with S_j the sum of column j's rows.

    From the rows (E @ S^T) or, when the Gram matrix G = E E^T is given, as G summed
    over each column's members: the same numbers, and much faster when many labellings
    of the same rows are scored (the permutation null of :func:`mi_embed`).
    """
    k = len(codes)
    member = sp.csr_matrix((np.ones(k), (codes, np.arange(k))), shape=(n, k))
    if gram is not None:
        return np.asarray(member @ gram).T  # G is symmetric: (member @ G)[j, i] = e_i . S_j
    sums = member @ e
    if sp.issparse(sums) and n * sums.shape[1] <= _DENSE_SUMS_MAX:
        sums = sums.toarray()
    dots = e @ sums.T
    return dots.toarray() if sp.issparse(dots) else np.asarray(dots)


def _loo_sims(
    e: NDArray[np.float64] | sp.csr_matrix,
    codes: NDArray[np.intp],
    n: int,
    gram: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """``(K, n)`` LOO centroid cosines of unit rows ``e`` and the mask of scorable rows.

    With S_j the sum of column j's rows, cos(e_i, S_j) = e_i.S_j / ||S_j||, and for i's
    own column the centroid without i is S_c - e_i, so
    cos = (e_i.S_c - 1) / sqrt(||S_c||^2 - 2 e_i.S_c + 1): one product for all (i, j).
    """
    k = len(codes)
    dots = _column_dots(e, codes, n, gram)
    rows = np.arange(k)
    own_dot = dots[rows, codes]
    sq = np.bincount(codes, weights=own_dot, minlength=n)  # ||S_j||^2 = sum_{i in j} e_i.S_j
    norms = np.sqrt(np.maximum(sq, 0.0))
    sims = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > np.sqrt(_EMPTY_SQ))
    loo_sq = sq[codes] - 2.0 * own_dot + 1.0
    counts = np.bincount(codes, minlength=n)
    scored = (counts[codes] >= 2) & (loo_sq > _EMPTY_SQ)
    loo = np.divide(own_dot - 1.0, np.sqrt(np.maximum(loo_sq, 0.0)), out=np.zeros(k), where=scored)
    sims[rows, codes] = loo
    return sims, scored


def _prepare(
    embeddings: Embeddings, groups: Sequence[Hashable] | NDArray[np.generic]
) -> tuple[NDArray[np.float64] | sp.csr_matrix, NDArray[np.intp], int, NDArray[np.intp]]:
    if embeddings.shape[0] != len(groups):
        raise ValueError(f"embeddings has {embeddings.shape[0]} rows but groups has {len(groups)}")
    e, keep = unit_rows(embeddings)
    codes, n = group_codes([g for g, k in zip(groups, keep, strict=True) if k])
    return e, codes, n, np.flatnonzero(keep)


def centroid_similarity(
    embeddings: Embeddings, groups: Sequence[Hashable] | NDArray[np.generic]
) -> CentroidScores:
    """Cosine similarity of each rollout's reasoning to each state's centroid, leave-one-out.

    Column j is a distinct state_id among rollouts with non-empty text; its centroid is
    the mean direction of its rollouts, without rollout i itself when j = c(i) (else i
    would be compared with itself). Vectorised: one sparse or dense product E @ S^T.

    Args:
        embeddings: ``(M, D)`` dense or scipy sparse reasoning representations; need not
            be normalised. A zero row (empty text) is skipped and makes no column.
        groups: ``(M,)`` state ids.

    Returns:
        :class:`CentroidScores` with ``sims`` ``(K, N)`` in [-1, 1] for the K rows that
        can be scored (non-empty text, and another non-empty rollout in their state).
        Source: DESIGN.md §4 (responsiveness from text alone).
    """
    e, codes, n, kept = _prepare(embeddings, groups)
    if n == 0:
        return CentroidScores(np.zeros((0, 0)), np.zeros(0, np.intp), np.zeros(0, np.intp), 0)
    sims, scored = _loo_sims(e, codes, n)
    return CentroidScores(sims[scored], codes[scored], kept[scored], n)


def mi_embed(
    embeddings: Embeddings,
    groups: Sequence[Hashable] | NDArray[np.generic],
    *,
    temperature: float = 0.1,
    null_permutations: int = 16,
    seed: int = 0,
) -> float | None:
    """In-batch MI between state and reasoning, from text representations.

    RAGEN-2's estimator (:func:`mi_from_scores`) with a similarity kernel in place of
    log p: ``A_ij = cos(e_i, LOO centroid of column j) / temperature``.

    Bias correction. With a kernel, unlike with log p, the column centroids are
    themselves estimated from a few rollouts each, so even reasoning that ignores the
    state gives columns that differ by sampling noise, and by Jensen's inequality
    (logsumexp_j A_ij - log N >= mean_j A_ij) the raw estimate is then negative, the
    more so the more diverse the reasoning. Measured on 8 states x 8 rollouts drawn
    from 3 unrelated templates at temperature 0.1: raw -1.8 nats with TF-IDF, -1.2 with
    MiniLM. Left raw, a policy that merely explores more (diversity up, dependence on
    the state unchanged) would read as losing responsiveness: a false template-collapse
    alarm. So the value returned is the raw estimate minus its mean over
    ``null_permutations`` random relabellings of the rollouts' states (group sizes
    kept), the shuffle ("bootstrap") bias correction of information estimates (Panzeri
    et al. 2007, "Correcting for the sampling bias problem in spike train information
    measures"). Its expectation is exactly 0 when the reasoning ignores the state; its
    spread there is what the data allow (sd about 0.16 nats on that 64-rollout case
    with TF-IDF, 0.09 with MiniLM; smaller for larger steps and higher temperatures).

    Args:
        embeddings: ``(M, D)`` dense or scipy sparse reasoning representations (rows
            need not be normalised; zero rows = empty text, skipped).
        groups: ``(M,)`` state ids; each distinct one is a column.
        temperature: kernel temperature (> 0); lower sharpens the softmax over columns.
        null_permutations: relabellings for the bias correction; 0 returns the raw
            estimate.
        seed: seed of the relabellings, fixed so that a step always scores the same.

    Returns:
        Nats: about 0 when reasoning ignores the state, positive when it depends on it.
        The raw estimate is at most log N; the correction adds back the null bias, so
        a strongly state-dependent step can read above log N (2.9 nats with N = 8 on
        the planted restating case, of which 2.0 raw).
        Rows whose state has no other non-empty rollout, or whose text is empty, are
        skipped. None with fewer than 2 columns or no scorable row.
        Source: RAGEN-2 (arXiv 2604.06268), diagnostics section; DESIGN.md §4.
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    if null_permutations < 0:
        raise ValueError("null_permutations must be >= 0")
    e, codes, n, _ = _prepare(embeddings, groups)
    if n < 2:
        return None

    gram = None
    if null_permutations and e.shape[0] <= _GRAM_MAX_ROWS:
        g = e @ e.T
        gram = g.toarray() if sp.issparse(g) else np.asarray(g)

    def raw(labels: NDArray[np.intp]) -> float | None:
        sims, scored = _loo_sims(e, labels, n, gram)
        if not scored.any():
            return None
        return mi_from_scores(sims[scored] / temperature, labels[scored])

    observed = raw(codes)
    if observed is None or null_permutations == 0:
        return observed
    rng = np.random.default_rng(seed)
    null = [raw(rng.permutation(codes)) for _ in range(null_permutations)]
    null_values = [v for v in null if v is not None]
    if not null_values:
        return observed
    return observed - float(np.mean(null_values))


def retrieval_embed(
    embeddings: Embeddings, groups: Sequence[Hashable] | NDArray[np.generic]
) -> float | None:
    """Leave-one-out nearest-centroid retrieval of a rollout's state from its reasoning.

    Share of scorable rollouts whose most similar centroid (:func:`centroid_similarity`)
    is their own state's, chance-corrected: ``(acc - 1/N) / (1 - 1/N)``.

    Args:
        embeddings: ``(M, D)`` dense or scipy sparse reasoning representations.
        groups: ``(M,)`` state ids; each distinct one is a column.

    Returns:
        Unitless, 0 = chance, 1 = every rollout retrieves its state, negative = worse
        than chance; None with fewer than 2 columns or no scorable row (same skipping as
        :func:`mi_embed`). Source: RAGEN-2 (arXiv 2604.06268), retrieval accuracy;
        DESIGN.md §4.
    """
    c = centroid_similarity(embeddings, groups)
    if c.num_columns < 2 or c.sims.shape[0] == 0:
        return None
    return retrieval_from_scores(c.sims, c.own)


def _entropy_mm(counts: NDArray[np.intp], total: int) -> float:
    """Miller–Madow entropy (nats) of a histogram: plug-in + (bins used - 1) / (2 n)."""
    c = counts[counts > 0].astype(np.float64)
    return float(np.log(total) - np.dot(c, np.log(c)) / total + (len(c) - 1) / (2.0 * total))


def mutual_information_mm(x: ArrayLike, y: ArrayLike) -> float | None:
    """Plug-in mutual information of two discrete variables, Miller–Madow corrected.

    ``I = H(X) + H(Y) - H(X, Y)``, each entropy the plug-in (maximum-likelihood)
    estimate from the empirical histogram plus Miller–Madow's first-order bias term
    ``(m - 1) / (2 n)``, m the number of non-empty bins, n the sample size. Together:
    ``I_MM = I_plugin + (m_X + m_Y - m_XY - 1) / (2 n)``. The plug-in MI is biased
    upward by about (m_X - 1)(m_Y - 1) / (2 n); this removes the first-order part
    estimated from the bins actually seen.

    Args:
        x: ``(n,)`` non-negative int codes of the first variable.
        y: ``(n,)`` non-negative int codes of the second.

    Returns:
        Nats, can be slightly negative for independent variables; None when n = 0.
        Source: Miller 1955, "Note on the bias of information estimates"; Paninski
        2003, "Estimation of entropy and mutual information", §3.
    """
    xc = np.asarray(x, dtype=np.intp).reshape(-1)
    yc = np.asarray(y, dtype=np.intp).reshape(-1)
    if xc.shape != yc.shape:
        raise ValueError(f"x has {xc.size} entries but y has {yc.size}")
    n = xc.size
    if n == 0:
        return None
    ny = int(yc.max()) + 1
    h_x = _entropy_mm(np.bincount(xc), n)
    h_y = _entropy_mm(np.bincount(yc), n)
    h_xy = _entropy_mm(np.bincount(xc * ny + yc), n)
    return h_x + h_y - h_xy


def normalise_action(action: str) -> str:
    """The discrete action a rollout took, for :func:`action_mi`: stripped, lower-cased."""
    return action.strip().lower()


def action_mi(
    groups: Sequence[Hashable] | NDArray[np.generic],
    actions: Sequence[Hashable],
    *,
    permutations: int = 200,
    seed: int = 0,
) -> tuple[float | None, float | None]:
    """Mutual information between the state and the (first) action, with a p-value.

    The text-free responsiveness check: if the policy's action no longer depends on
    the state, I(state; action) falls to 0 whatever the reasoning looks like.
    :func:`mutual_information_mm` over the rollouts' (state_id, action) pairs; the
    p-value is that of a permutation test of independence: the actions are shuffled
    over the rollouts ``permutations`` times (fixed ``seed``) and
    ``p = (1 + #{I_perm >= I_obs}) / (1 + permutations)``.

    Args:
        groups: ``(M,)`` state ids.
        actions: ``(M,)`` discrete actions (the scorer passes the first turn's action
            text through :func:`normalise_action`; an empty action is a value too).
        permutations: shuffles for the p-value (>= 1); 200 give p >= 1/201 and take
            about 10 ms for M = 1,024.
        seed: seed of the shuffles, fixed so that a step always scores the same.

    Returns:
        ``(mi, p_value)``: mi in nats (<= log of the number of states; about 0 when
        the action ignores the state, and slightly negative is possible), p in
        (0, 1]. ``(None, None)`` with fewer than 2 states or fewer than 2 distinct
        actions (a single action carries no information, and its "0" would look like
        a measured loss of responsiveness). With free-text actions nearly every value
        is distinct and the estimate is mostly bias: it suits discrete action spaces
        (moves, choices), as RAGEN-2's environments have.
        Source: DESIGN.md §4; Miller 1955; permutation test of independence (e.g.
        Good 2005, "Permutation, Parametric, and Bootstrap Tests of Hypotheses").
    """
    if len(actions) != len(groups):
        raise ValueError(f"groups has {len(groups)} entries but actions has {len(actions)}")
    if permutations < 1:
        raise ValueError("permutations must be >= 1")
    x, n_states = group_codes(groups)
    y, n_actions = group_codes(actions)
    if n_states < 2 or n_actions < 2:
        return None, None
    observed = mutual_information_mm(x, y)
    if observed is None:
        return None, None
    rng = np.random.default_rng(seed)
    # Shuffling y keeps both marginals, so only H(X, Y) changes: compare joint entropies.
    n = len(x)
    h_joint = _entropy_mm(np.bincount(x * n_actions + y), n)
    null = np.array(
        [
            _entropy_mm(np.bincount(x * n_actions + rng.permutation(y)), n)
            for _ in range(permutations)
        ]
    )
    # I_perm >= I_obs  <=>  H_perm(X, Y) <= H_obs(X, Y); the tolerance keeps exact ties.
    hits = int(np.count_nonzero(null <= h_joint + 1e-12))
    return observed, (1 + hits) / (1 + permutations)

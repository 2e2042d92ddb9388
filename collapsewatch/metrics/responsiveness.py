"""Responsiveness: does the reasoning depend on the input? (what entropy misses)

RAGEN-2 (arXiv 2604.06268, diagnostics section) estimates the mutual information
I(X; Z) between input X and reasoning Z in-batch: with M reasonings z_i, N distinct
inputs x_j (columns) and c(i) the column of z_i's own input, a score matrix
A_ij = log p(z_i | x_j) gives

    MI = mean_i [ A_{i,c(i)} - (logsumexp_j A_ij - log N) ]        (nats, <= log N)

and retrieval accuracy = share of i whose argmax_j A_ij is c(i). :func:`mi_from_scores`
and :func:`retrieval_from_scores` are that core, shared by the log-prob estimators
(trainer-supplied A) and the text-only ones here, which put a similarity kernel in place
of log p: A_ij = cos(e_i, leave-one-out centroid of column j) / temperature.
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
    scores: ArrayLike, own: ArrayLike, *, chance_corrected: bool = True, tie_tol: float = 1e-9
) -> float | None:
    """Share of rows whose best-scoring column is their own input.

    Ties get fractional credit: a row whose own column is among t tied best columns
    counts 1/t (the expected accuracy of breaking the tie at random), so identical
    scores give chance, not a bias toward the first column.

    Args:
        scores: ``(M, N)`` float score matrix (as in :func:`mi_from_scores`).
        own: ``(M,)`` int own column of each row.
        chance_corrected: return ``(acc - 1/N) / (1 - 1/N)`` (0 = chance, 1 = perfect,
            negative = worse than chance) instead of the raw accuracy.
        tie_tol: scores within this absolute distance of the row maximum tie.

    Returns:
        The (corrected) accuracy, or None when M = 0 or N < 2.
        Source: RAGEN-2 (arXiv 2604.06268), retrieval accuracy (chance = 1/N).
    """
    a, o = _check_scores(scores, own)
    m, n = a.shape
    if m == 0 or n < 2:
        return None
    best = a >= a.max(axis=1, keepdims=True) - tie_tol
    acc = float(np.mean(best[np.arange(m), o] / best.sum(axis=1)))
    if not chance_corrected:
        return acc
    return (acc - 1.0 / n) / (1.0 - 1.0 / n)


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

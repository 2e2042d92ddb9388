"""Diversity: do the outputs vary (for one input, and over the step)?

This is the H(Z | X) side of RAGEN-2's decomposition H(Z) = I(X; Z) + H(Z | X)
(arXiv 2604.06268): template collapse keeps these numbers high while the
responsiveness metrics fall.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from .representation import Embeddings, unit_rows
from .structure import group_codes

_WORD = re.compile(r"\w+")


def distinct_n(texts: Sequence[str], n: int) -> float | None:
    """Distinct n-grams / all n-grams over a set of texts (distinct-n).

    Texts are lower-cased and split into ``\\w+`` words (punctuation dropped); n-grams
    do not cross text boundaries; counts are pooled over all texts.

    Args:
        texts: ``(M,)`` strings.
        n: n-gram order (>= 1).

    Returns:
        A share in (0, 1]: 1 when no n-gram repeats, near 0 when every text is the same;
        None when the texts hold no n-gram (all shorter than n words).
        Source: Li et al. 2016, "A Diversity-Promoting Objective Function for Neural
        Conversation Models", distinct-n.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    seen: set[tuple[str, ...]] = set()
    total = 0
    for text in texts:
        words = _WORD.findall(text.lower())
        grams = list(zip(*(words[k:] for k in range(n)), strict=False))
        total += len(grams)
        seen.update(grams)
    return len(seen) / total if total else None


def distinct_2(texts: Sequence[str]) -> float | None:
    """Distinct bigrams / all bigrams of the step's reasoning texts.

    Args:
        texts: ``(M,)`` reasoning strings (one per rollout or per turn).

    Returns:
        A share in (0, 1] (see :func:`distinct_n`); None when no text has two words.
        Source: Li et al. 2016, distinct-2.
    """
    return distinct_n(texts, 2)


def within_state(
    embeddings: Embeddings, groups: Sequence[Hashable] | NDArray[np.generic]
) -> float | None:
    """Mean pairwise cosine distance between reasoning representations within a state.

    For each GRPO group (rollouts sharing a state_id) the mean of ``1 - cos(e_a, e_b)``
    over its pairs; then the unweighted mean over groups. Computed from column sums, in
    O(M D), not over pairs: with unit rows, sum over pairs of cos = (||S||^2 - k) / 2
    where S is the sum of the group's k rows.

    Args:
        embeddings: ``(M, D)`` dense or scipy sparse; need not be normalised. A zero row
            (empty text) is left out.
        groups: ``(M,)`` state ids.

    Returns:
        Mean cosine distance (unitless): 0 when every state's rollouts are identical,
        up to 1 for TF-IDF (non-negative vectors) and at most 2 in general; None when
        no group has two non-empty rollouts. Source: DESIGN.md §4; the within-input
        spread H(Z | X) of RAGEN-2 (arXiv 2604.06268), measured in embedding space.
    """
    if embeddings.shape[0] != len(groups):
        raise ValueError(f"embeddings has {embeddings.shape[0]} rows but groups has {len(groups)}")
    e, keep = unit_rows(embeddings)
    codes, n = group_codes([g for g, k in zip(groups, keep, strict=True) if k])
    if n == 0:
        return None
    counts = np.bincount(codes, minlength=n).astype(np.float64)
    member = sp.csr_matrix(
        (np.ones(len(codes)), (codes, np.arange(len(codes)))), shape=(n, len(codes))
    )
    sums = member @ e
    if sp.issparse(sums):
        sq = np.asarray(sums.multiply(sums).sum(axis=1)).reshape(-1)
    else:
        sq = np.einsum("nd,nd->n", sums, sums)
    pairs = counts >= 2
    if not pairs.any():
        return None
    k = counts[pairs]
    mean_cos = (sq[pairs] - k) / (k * (k - 1))
    return float(np.mean(np.clip(1.0 - mean_cos, 0.0, 2.0)))


def token_entropy(
    entropies: Sequence[float | None], num_tokens: Sequence[int | None] | None = None
) -> float | None:
    """Mean per-token entropy of the policy over the step's response tokens.

    Args:
        entropies: ``(T,)`` mean entropy per token of each turn (nats), None where the
            trainer did not report it.
        num_tokens: optional ``(T,)`` response lengths (tokens). When every reporting
            turn also gives its length, turns are weighted by it (a token-level mean);
            otherwise turns count equally.

    Returns:
        Entropy in nats/token (>= 0); None when no turn reports an entropy, or when the
        weights are used and sum to zero tokens. Source: RAGEN-2 (arXiv 2604.06268),
        the token entropy that entropy-based monitoring tracks; DESIGN.md §4.
    """
    if num_tokens is not None and len(num_tokens) != len(entropies):
        raise ValueError("entropies and num_tokens must have the same length")
    rows = [
        (h, None if num_tokens is None else num_tokens[i])
        for i, h in enumerate(entropies)
        if h is not None
    ]
    if not rows:
        return None
    h = np.array([r[0] for r in rows], dtype=np.float64)
    if not np.all(np.isfinite(h)):
        raise ValueError("entropies must be finite")
    if all(r[1] is not None for r in rows):
        w = np.array([r[1] for r in rows], dtype=np.float64)
        return float(np.dot(h, w) / w.sum()) if w.sum() > 0 else None
    return float(h.mean())

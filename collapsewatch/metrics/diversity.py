"""Diversity: do the outputs vary (for one input, and over the step)?

This is the H(Z | X) side of RAGEN-2's decomposition H(Z) = I(X; Z) + H(Z | X)
(arXiv 2604.06268): template collapse keeps these numbers high while the
responsiveness metrics fall.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from .representation import Embeddings, unit_rows
from .structure import group_codes

_WORD = re.compile(r"\w+")
# Vendi: above this many rows a seeded random subsample is scored (the eigen-
# decomposition is cubic in min(rows, dims): 0.1 s at 1,024 rows, about 1 s at 2,048).
_VENDI_MAX_ROWS = 2048


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
            trainer did not report it. NaN and ±Inf are left out like None (they are
            counted by ``structure.nonfinite``).
        num_tokens: optional ``(T,)`` response lengths (tokens). When every reporting
            turn also gives its length, turns are weighted by it (a token-level mean);
            otherwise turns count equally.

    Returns:
        Entropy in nats/token (>= 0); None when no turn reports a finite entropy, or when the
        weights are used and sum to zero tokens. Source: RAGEN-2 (arXiv 2604.06268),
        the token entropy that entropy-based monitoring tracks; DESIGN.md §4.
    """
    if num_tokens is not None and len(num_tokens) != len(entropies):
        raise ValueError("entropies and num_tokens must have the same length")
    rows = [
        (h, None if num_tokens is None else num_tokens[i])
        for i, h in enumerate(entropies)
        if h is not None and math.isfinite(h)
    ]
    if not rows:
        return None
    h = np.array([r[0] for r in rows], dtype=np.float64)
    if all(r[1] is not None for r in rows):
        w = np.array([r[1] for r in rows], dtype=np.float64)
        return float(np.dot(h, w) / w.sum()) if w.sum() > 0 else None
    return float(h.mean())


def vendi(
    embeddings: Embeddings, *, max_rows: int = _VENDI_MAX_ROWS, seed: int = 0
) -> float | None:
    """Vendi score of the step's reasoning: the effective number of distinct texts.

    ``VS = exp(-sum_k lambda_k log lambda_k)`` with lambda_k the eigenvalues of K / n,
    K the n x n cosine-similarity kernel of the rows (K_ii = 1, so the eigenvalues sum
    to 1). Computed from whichever of K = E E^T (n x n) and E^T E (d x d) is smaller:
    they share their non-zero eigenvalues. The eigenvalues come from a float32
    symmetric solver (LAPACK ``syevr``, one BLAS thread), which moved the score by
    under 1e-6 relative on the real verl step (1,024 TF-IDF rows: 494.2; 0.1 s on an
    idle machine against 0.25 s in float64).

    Args:
        embeddings: ``(M, D)`` dense or scipy sparse representations; zero rows (empty
            text) are left out, so n = the number of non-empty texts.
        max_rows: above this many non-empty rows, a uniform random subsample of this
            size (``seed``) is scored instead, to bound the cost; the value is then
            that of the subsample (Vendi grows with n, so compare steps of like size).
        seed: seed of that subsample.

    Returns:
        A number in [1, n]: 1 when every text is the same (or all parallel), n when the
        texts are pairwise orthogonal (no shared word, with TF-IDF). None when no row
        is non-empty. Unitless ("effective count"). Source: Friedman & Dieng 2023,
        "The Vendi Score: A Diversity Evaluation Metric for Machine Learning" (TMLR),
        order q = 1.
    """
    e, _ = unit_rows(embeddings)
    n, d = e.shape
    if n == 0:
        return None
    if n > max_rows:
        rows = np.sort(np.random.default_rng(seed).choice(n, size=max_rows, replace=False))
        e, n = e[rows], max_rows
    k = e @ e.T if n <= d else e.T @ e
    k = k.toarray() if sp.issparse(k) else np.asarray(k)
    # One BLAS thread: on a shared machine (or beside other scoring threads) the
    # threaded solver spun for 1-8 s on the verl step where one thread took 0.3 s.
    with threadpool_limits(limits=1, user_api="blas"):
        lam = sla.eigh(k.astype(np.float32) / n, eigvals_only=True, driver="evr")
    lam = lam.astype(np.float64)
    # Below the solver's rounding (the usual rank tolerance), an eigenvalue is 0.
    lam = lam[lam > lam.max() * k.shape[0] * np.finfo(np.float32).eps]
    lam = lam / lam.sum()
    return float(np.exp(-np.sum(lam * np.log(lam))))


def char_entropies(texts: Sequence[str]) -> NDArray[np.float64]:
    """Character entropy of each text: ``-sum_c p_c log p_c`` over its characters.

    Args:
        texts: ``(M,)`` strings.

    Returns:
        ``(K,)`` float, nats per character, one per non-empty text (empty texts are
        left out): 0 for "aaaa", log 2 for "abab", about 2.9-3.1 for English prose.
        Bounded by log(length), so texts of a few characters score low whatever they
        say. Source: Shannon 1948 (entropy of a symbol distribution); issue 3.
    """
    out = np.empty(len(texts), dtype=np.float64)
    k = 0
    for text in texts:
        if not text:
            continue
        # One code point per uint32; np.unique is faster than a Counter on long texts.
        _, counts = np.unique(
            np.frombuffer(text.encode("utf-32-le"), np.uint32), return_counts=True
        )
        p = counts / len(text)
        out[k] = max(0.0, -float(np.dot(p, np.log(p))))
        k += 1
    return out[:k]


def char_entropy(texts: Sequence[str]) -> float | None:
    """Mean per-sample character entropy of the step's reasoning texts.

    Degenerate decoding ("!!!!!!!!", "Peeeeeeeee", one token repeated) has a character
    entropy near 0 while ordinary text sits near 3 nats, and this needs no model and
    no history, so it moves on the first step the degeneration appears.

    Args:
        texts: ``(M,)`` strings, one per rollout.

    Returns:
        Nats per character (>= 0), the mean of :func:`char_entropies`; None when every
        text is empty. Source: issue 3 (``diversity.char_entropy``).
    """
    h = char_entropies(texts)
    return float(h.mean()) if h.size else None


def char_entropy_min(texts: Sequence[str], *, min_chars: int = 32) -> float | None:
    """Lowest character entropy among the step's reasoning texts of some length.

    The mean (:func:`char_entropy`) moves by only h/M when one rollout in M
    degenerates; the minimum shows that one at once (near 0), which is what a
    degenerate-text detector wants on the first step. Texts shorter than ``min_chars``
    are left out: a text of L characters cannot exceed log L nats, so short, normal
    answers would read as degenerate (on the real verl GSM8K step, "#### 7" scores
    0.87 and is the minimum over all texts; over texts of >= 32 characters the minimum
    is 2.65), while degenerate decoding runs long.

    Args:
        texts: ``(M,)`` strings, one per rollout.
        min_chars: shortest text considered (characters).

    Returns:
        Nats per character (>= 0); None when no text has ``min_chars`` characters.
        Source: issue 3 (``diversity.char_entropy``).
    """
    h = char_entropies([t for t in texts if len(t) >= min_chars])
    return float(h.min()) if h.size else None


def char_entropy_stats(
    texts: Sequence[str], *, min_chars: int = 32
) -> tuple[float | None, float | None]:
    """:func:`char_entropy` and :func:`char_entropy_min` from one pass over the texts.

    Args:
        texts: ``(M,)`` strings, one per rollout.
        min_chars: shortest text the minimum considers.

    Returns:
        ``(mean, min)`` as the two functions return them (nats per character).
    """
    nonempty = [t for t in texts if t]
    h = char_entropies(nonempty)
    long_enough = np.array([len(t) >= min_chars for t in nonempty], dtype=bool)
    mean = float(h.mean()) if h.size else None
    low = float(h[long_enough].min()) if long_enough.any() else None
    return mean, low

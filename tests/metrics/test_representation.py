"""representation.*: TF-IDF settings, MiniLM loading and truncation, the stratified sample."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from collapsewatch.metrics import representation as rep


def _cos(m: sp.csr_matrix, i: int, j: int) -> float:
    return float((m[i] @ m[j].T).toarray()[0, 0])


def test_tfidf_uses_bigrams_with_smoothed_idf() -> None:
    # Both texts have the same unigrams (idf 1 each); their bigrams differ and each
    # occurs in one of the 2 texts: idf 1 + ln(3/2). Unigrams alone would give cos 1.
    m = rep.tfidf(["dog bites man", "man bites dog"])
    b = 1 + math.log(1.5)
    assert _cos(m, 0, 1) == pytest.approx(3 / (3 + 2 * b**2))


def test_tfidf_sublinear_tf_and_single_character_tokens() -> None:
    # text 0: x (tf 4 -> 1 + ln 4, idf 1), y (idf b), "x x" (tf 3 -> 1 + ln 3, idf b),
    # "x y" (idf b); text 1: x only. cos = (1 + ln 4) / ||text 0||.
    m = rep.tfidf(["x x x x y", "x"])
    b = 1 + math.log(1.5)
    norm0 = math.sqrt((1 + math.log(4)) ** 2 + b**2 + ((1 + math.log(3)) * b) ** 2 + b**2)
    assert _cos(m, 0, 1) == pytest.approx((1 + math.log(4)) / norm0)


def test_tfidf_rows_and_empty_texts() -> None:
    m = rep.tfidf(["A b c", "", "   ", "c d"])
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, [1, 0, 0, 1])
    assert rep.tfidf(["", " "]).shape == (2, 0)
    assert rep.tfidf([]).shape == (0, 0)


def test_unit_rows_drops_zero_rows() -> None:
    e, keep = rep.unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(e, [[0.6, 0.8]])
    assert keep.tolist() == [True, False]
    es, keep_s = rep.unit_rows(sp.csr_matrix([[0.0, 0.0], [0.0, 2.0]]))
    np.testing.assert_allclose(es.toarray(), [[0.0, 1.0]])
    assert keep_s.tolist() == [False, True]


def test_stratified_sample_keeps_pairs_first() -> None:
    groups = ["a"] * 10 + ["b"] * 10 + ["c"]
    idx = rep.stratified_sample(groups, 5)
    assert Counter(groups[i] for i in idx) == {"a": 2, "b": 2, "c": 1}
    # 3 of 4 states get a pair rather than 4 states one rollout and 2 a second.
    four = [s for s in "abcd" for _ in range(10)]
    counts = Counter(four[i] for i in rep.stratified_sample(four, 6))
    assert sorted(counts.values()) == [2, 2, 2]


def test_stratified_sample_even_rounds_and_determinism() -> None:
    groups = [s for s in "abcd" for _ in range(10)]
    idx = rep.stratified_sample(groups, 20, seed=5)
    assert Counter(groups[i] for i in idx) == {"a": 5, "b": 5, "c": 5, "d": 5}
    assert idx.tolist() == sorted(set(idx.tolist()))
    assert idx.tolist() == rep.stratified_sample(groups, 20, seed=5).tolist()
    assert rep.stratified_sample(groups[:7], 20).tolist() == list(range(7))
    with pytest.raises(ValueError):
        rep.stratified_sample(groups, 0)


def test_minilm_embeds_meaning_and_skips_empty_text() -> None:
    texts = [
        "The cat sits on the mat.",
        "A cat is sitting on a rug.",
        "Stock markets fell sharply today.",
        "",
    ]
    e = rep.minilm(texts)
    assert e.shape == (4, rep.MINILM_DIM)
    np.testing.assert_allclose(np.linalg.norm(e[:3], axis=1), 1.0, atol=1e-5)
    assert not e[3].any()
    assert e[0] @ e[1] > e[0] @ e[2] + 0.3
    assert rep.load_minilm() is rep.load_minilm()


def test_minilm_truncates_to_max_tokens() -> None:
    shared = " ".join(f"word{k}" for k in range(80))
    texts = [shared + " the ending is happy", shared + " a totally different ending"]
    short = rep.minilm(texts, max_tokens=32)
    long = rep.minilm(texts, max_tokens=256)
    assert short[0] @ short[1] == pytest.approx(1.0, abs=1e-5)
    assert long[0] @ long[1] < 0.9999

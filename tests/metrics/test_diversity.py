"""diversity.*: distinct-n, within-state cosine distance, token entropy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from collapsewatch.metrics import diversity


def test_distinct_2_counts_pooled_bigrams() -> None:
    # bigrams: (the cat) (cat sat) | (the cat) (cat ran) -> 3 distinct of 4
    assert diversity.distinct_2(["the cat sat", "the cat ran"]) == 0.75


def test_distinct_2_lowercases_and_drops_punctuation() -> None:
    assert diversity.distinct_2(["The cat", "the CAT!"]) == 0.5
    assert diversity.distinct_2(["a, b. c"]) == 1.0  # (a b) (b c)


def test_distinct_2_does_not_cross_text_boundaries() -> None:
    # Joined, "a b" would make one bigram; per text there is none.
    assert diversity.distinct_2(["a", "b"]) is None
    assert diversity.distinct_2([]) is None


def test_distinct_n_unigrams() -> None:
    assert diversity.distinct_n(["x y x", "y"], 1) == 0.5  # 2 distinct of 4
    with pytest.raises(ValueError):
        diversity.distinct_n(["x"], 0)


def _within_case() -> tuple[np.ndarray, list[str]]:
    # a: (1,0) (0,1) (5,0) -> cos 0, 1, 0 -> mean distance (1 + 0 + 1) / 3 = 2/3
    #    (the third row is not unit length: it must be normalised first)
    # b: (1,0) (-1,0) and a zero row (empty text, left out) -> distance 2
    # c: one rollout -> no pair, left out
    # mean over groups a, b = (2/3 + 2) / 2 = 4/3
    e = np.array([[1, 0], [0, 1], [5, 0], [1, 0], [-1, 0], [0, 0], [0, 1]], dtype=float)
    groups = ["a", "a", "a", "b", "b", "b", "c"]
    return e, groups


def test_within_state_hand_case_dense_and_sparse() -> None:
    e, groups = _within_case()
    assert diversity.within_state(e, groups) == pytest.approx(4 / 3)
    assert diversity.within_state(sp.csr_matrix(e), groups) == pytest.approx(4 / 3)


def test_within_state_zero_for_identical_rollouts() -> None:
    e = np.tile([[0.3, 0.4]], (6, 1))
    assert diversity.within_state(e, ["a"] * 3 + ["b"] * 3) == pytest.approx(0.0, abs=1e-12)


def test_within_state_undefined_without_a_pair() -> None:
    assert diversity.within_state(np.eye(3), ["a", "b", "c"]) is None
    assert diversity.within_state(np.zeros((2, 3)), ["a", "a"]) is None
    with pytest.raises(ValueError, match="groups"):
        diversity.within_state(np.eye(3), ["a", "a"])


def test_token_entropy_weighted_by_tokens() -> None:
    # (1.0 * 10 + 3.0 * 30) / 40 = 2.5; the turn without entropy is left out.
    assert diversity.token_entropy([1.0, None, 3.0], [10, 5, 30]) == pytest.approx(2.5)


def test_token_entropy_unweighted_when_a_length_is_missing() -> None:
    assert diversity.token_entropy([1.0, 3.0], [10, None]) == pytest.approx(2.0)
    assert diversity.token_entropy([1.0, 3.0]) == pytest.approx(2.0)


def test_token_entropy_undefined() -> None:
    assert diversity.token_entropy([None, None], [3, 4]) is None
    assert diversity.token_entropy([]) is None
    assert diversity.token_entropy([1.0, 2.0], [0, 0]) is None

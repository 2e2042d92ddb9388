"""diversity.*: distinct-n, within-state cosine distance, token entropy, Vendi, char entropy."""

from __future__ import annotations

import math

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


def test_token_entropy_leaves_out_nonfinite_values() -> None:
    # NaN and Inf count as "not reported": (1*10 + 3*30) / 40 = 2.5
    nan, inf = float("nan"), float("inf")
    assert diversity.token_entropy([1.0, nan, 3.0, inf], [10, 5, 30, 7]) == pytest.approx(2.5)
    assert diversity.token_entropy([nan]) is None


# --- Vendi ------------------------------------------------------------------------------


def test_vendi_identical_and_orthogonal() -> None:
    assert diversity.vendi(np.tile([[0.6, 0.8]], (5, 1))) == pytest.approx(1.0)
    assert diversity.vendi(np.eye(6)) == pytest.approx(6.0)
    assert diversity.vendi(sp.csr_matrix(np.eye(6) * 3.0)) == pytest.approx(6.0)


def test_vendi_hand_cases() -> None:
    # e1, e1, e2 (+ an empty text, left out): K / 3 = [[1,1,0],[1,1,0],[0,0,1]] / 3 has
    # eigenvalues 2/3, 1/3, 0 -> exp(-(2/3 ln 2/3 + 1/3 ln 1/3)) = 1.88988
    e = np.array([[1.0, 0, 0], [2.0, 0, 0], [0, 1.0, 0], [0, 0, 0]])
    expected = math.exp(-(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)))
    assert diversity.vendi(e) == pytest.approx(expected, rel=1e-6)
    # Two unit vectors 60 degrees apart: K / 2 = [[1, .5], [.5, 1]] / 2, eigenvalues
    # 3/4 and 1/4 -> exp(-(.75 ln .75 + .25 ln .25)) = 1.75477
    e = np.array([[1.0, 0.0], [0.5, math.sqrt(0.75)]])
    assert diversity.vendi(e) == pytest.approx(1.754765, rel=1e-5)
    # n = 5 rows in d = 2 (the d x d path): (1,0) x 3, (0,1) x 2 -> eigenvalues .6, .4
    e = np.array([[1.0, 0]] * 3 + [[0, 1.0]] * 2)
    expected = math.exp(-(0.6 * math.log(0.6) + 0.4 * math.log(0.4)))
    assert diversity.vendi(e) == pytest.approx(expected, rel=1e-6)
    assert diversity.vendi(sp.csr_matrix(e)) == pytest.approx(expected, rel=1e-6)


def test_vendi_undefined_and_subsampled() -> None:
    assert diversity.vendi(np.zeros((3, 4))) is None
    # 10 orthogonal rows scored through a 4-row subsample: exactly 4
    assert diversity.vendi(np.eye(10), max_rows=4) == pytest.approx(4.0)


# --- character entropy --------------------------------------------------------------------


def test_char_entropies_hand_values() -> None:
    h = diversity.char_entropies(["aaaa", "abab", "", "abcd", "aab"])
    # "aab": p = (2/3, 1/3) -> 0.63651
    expected = [0.0, math.log(2), math.log(4), -(2 / 3 * math.log(2 / 3) + math.log(1 / 3) / 3)]
    np.testing.assert_allclose(h, expected, atol=1e-12)
    # code points, not bytes: a 4-byte emoji is one character
    assert diversity.char_entropies(["\U0001f600a\U0001f600a"])[0] == pytest.approx(math.log(2))


def test_char_entropy_mean_and_min_catch_one_degenerate_sample() -> None:
    texts = ["abab", "abcd", "!!!!!!!!"]
    assert diversity.char_entropy(texts) == pytest.approx((math.log(2) + math.log(4)) / 3)
    assert diversity.char_entropy_min(texts, min_chars=1) == 0.0
    assert diversity.char_entropy(["", ""]) is None
    assert diversity.char_entropy_min([]) is None


def test_char_entropy_min_leaves_out_short_texts() -> None:
    # A 6-character answer cannot exceed ln 6; by default texts under 32 characters
    # are left out of the minimum (not of the mean).
    prose = "abcdefgh" * 4  # 32 characters, 8 equally frequent: ln 8
    degenerate = "P" + "e" * 39  # p = (1/40, 39/40)
    texts = [prose, "#### 7", degenerate]
    h_deg = -(1 / 40 * math.log(1 / 40) + 39 / 40 * math.log(39 / 40))
    assert diversity.char_entropy_min(texts) == pytest.approx(h_deg)
    assert diversity.char_entropy_min([prose, "#### 7"]) == pytest.approx(math.log(8))
    assert diversity.char_entropy_min(["#### 7"]) is None
    mean = (math.log(8) + diversity.char_entropies(["#### 7"])[0] + h_deg) / 3
    assert diversity.char_entropy_stats(texts) == (pytest.approx(mean), pytest.approx(h_deg))
    # "#### 7": p = (4/6, 1/6, 1/6) -> 0.867563; the empty text is left out of both
    short = -(2 / 3 * math.log(2 / 3) + 2 / 6 * math.log(1 / 6))
    assert diversity.char_entropy_stats(["#### 7", ""]) == (pytest.approx(short), None)

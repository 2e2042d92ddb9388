"""responsiveness.*: the in-batch MI core, retrieval, and the embedding estimators."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from collapsewatch.metrics import responsiveness as resp

# --- the score-matrix core ---------------------------------------------------------


def test_mi_from_scores_hand_case() -> None:
    # N = 2 columns, rows own [0, 0, 1]:
    # row 0: A = (ln 2, 0): lse = ln 3, marginal = ln 3 - ln 2, term = ln 2 - ln 1.5 = ln(4/3)
    # row 1: A = (0, 0):    lse = ln 2, marginal = 0,           term = 0
    # row 2: A = (0, ln 3): lse = ln 4, marginal = ln 2,        term = ln 3 - ln 2 = ln 1.5
    # mean = (ln(4/3) + ln(3/2)) / 3 = ln 2 / 3
    scores = [[math.log(2), 0.0], [0.0, 0.0], [0.0, math.log(3)]]
    assert resp.mi_from_scores(scores, [0, 0, 1]) == pytest.approx(math.log(2) / 3)


def test_mi_from_scores_bounds() -> None:
    n = 4
    assert resp.mi_from_scores(np.full((5, n), 2.7), [0, 1, 2, 3, 0]) == pytest.approx(0.0)
    perfect = 200.0 * np.eye(n)
    assert resp.mi_from_scores(perfect, np.arange(n)) == pytest.approx(math.log(n))


def test_mi_from_scores_undefined_and_invalid() -> None:
    assert resp.mi_from_scores(np.zeros((3, 1)), [0, 0, 0]) is None
    assert resp.mi_from_scores(np.zeros((0, 3)), np.zeros(0, dtype=int)) is None
    with pytest.raises(ValueError, match="finite"):
        resp.mi_from_scores([[0.0, float("nan")]], [0])
    with pytest.raises(ValueError, match="own"):
        resp.mi_from_scores([[0.0, 1.0]], [2])


def test_retrieval_from_scores_ties_get_fractional_credit() -> None:
    # row 0 hits, row 1 ties its own column with another (1/2), row 2 hits -> 2.5 / 3
    scores = [[2.0, 1.0], [1.0, 1.0], [0.0, 3.0]]
    own = [0, 0, 1]
    acc = 2.5 / 3
    assert resp.retrieval_from_scores(scores, own, chance_corrected=False) == pytest.approx(acc)
    assert resp.retrieval_from_scores(scores, own) == pytest.approx((acc - 0.5) / 0.5)
    assert resp.retrieval_from_scores(np.ones((4, 4)), [0, 1, 2, 3]) == pytest.approx(0.0)
    assert resp.retrieval_from_scores(np.ones((4, 1)), [0, 0, 0, 0]) is None


# --- leave-one-out centroid similarities -----------------------------------------------

# Rows: a: e0 = (1,0), e1 = (0,1), e2 = (1,1) (not unit: normalised to (.7071, .7071));
#       b: e3 = (1,0), alone in its state: a column, but not a scored row.
# S_a = (1.7071, 1.7071), S_b = (1, 0).
# e0: own LOO centroid S_a - e0 = (.7071, 1.7071): cos = .7071 / 1.8478 = cos(67.5 deg)
#     = .38268; vs b: cos(e0, (1,0)) = 1
# e1: own LOO S_a - e1 = (1.7071, .7071): cos = .38268; vs b: 0
# e2: own LOO S_a - e2 = (1, 1): cos = 1; vs b: .70711
HAND_E = np.array([[1, 0], [0, 1], [1, 1], [1, 0]], dtype=float)
HAND_GROUPS = ["a", "a", "a", "b"]
C675 = math.cos(math.radians(67.5))
HAND_SIMS = np.array([[C675, 1.0], [C675, 0.0], [1.0, math.sqrt(0.5)]])


@pytest.mark.parametrize("to_matrix", [np.asarray, sp.csr_matrix], ids=["dense", "sparse"])
def test_centroid_similarity_hand_case(to_matrix: object) -> None:
    c = resp.centroid_similarity(to_matrix(HAND_E), HAND_GROUPS)  # type: ignore[operator]
    np.testing.assert_allclose(c.sims, HAND_SIMS, atol=1e-12)
    assert c.own.tolist() == [0, 0, 0]
    assert c.rows.tolist() == [0, 1, 2]
    assert c.num_columns == 2


def test_retrieval_and_raw_mi_embed_hand_case() -> None:
    # retrieval: e0's best column is b (wrong), e1 and e2 pick a -> acc 2/3 -> (2/3 - 1/2) / (1/2)
    assert resp.retrieval_embed(HAND_E, HAND_GROUPS) == pytest.approx(1 / 3)
    # raw MI at temperature 1 on HAND_SIMS:
    # e0: .38268 - (ln(e^.38268 + e^1) - ln 2) = .38268 - .73824 = -.35556
    # e1: .38268 - (ln(e^.38268 + 1) - ln 2)   = .38268 - .20954 =  .17314
    # e2: 1      - (ln(e + e^.70711) - ln 2)   = 1 - .86422       =  .13578   mean -.01555
    raw = resp.mi_embed(HAND_E, HAND_GROUPS, temperature=1.0, null_permutations=0)
    assert raw == pytest.approx(-0.015549, abs=1e-6)
    # temperature divides the scores
    half = resp.mi_embed(HAND_E, HAND_GROUPS, temperature=0.5, null_permutations=0)
    assert half == pytest.approx(resp.mi_from_scores(HAND_SIMS / 0.5, [0, 0, 0]))


def _brute_force_loo(e: np.ndarray, groups: list[int]) -> np.ndarray:
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    labels = sorted(set(groups), key=groups.index)
    out = np.zeros((len(e), len(labels)))
    for i in range(len(e)):
        for j, lab in enumerate(labels):
            members = [k for k in range(len(e)) if groups[k] == lab and k != i]
            centroid = e[members].sum(axis=0)
            out[i, j] = e[i] @ centroid / np.linalg.norm(centroid)
    return out


@pytest.mark.parametrize("sparse", [False, True])
def test_vectorised_loo_matches_a_loop(sparse: bool) -> None:
    rng = np.random.default_rng(3)
    e = np.abs(rng.normal(size=(30, 12))) * (rng.random((30, 12)) < 0.5) + 0.01
    groups = [int(g) for g in rng.integers(0, 5, 30)]
    c = resp.centroid_similarity(sp.csr_matrix(e) if sparse else e, groups)
    np.testing.assert_allclose(c.sims, _brute_force_loo(e, groups)[c.rows], atol=1e-10)


def test_gram_and_direct_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    e = sp.random(40, 50, density=0.2, random_state=4, format="csr")
    groups = [int(g) for g in rng.integers(0, 6, 40)]
    with_gram = resp.mi_embed(e, groups, null_permutations=5)
    monkeypatch.setattr(resp, "_GRAM_MAX_ROWS", 0)
    assert resp.mi_embed(e, groups, null_permutations=5) == pytest.approx(with_gram, abs=1e-10)


def test_skips_empty_texts_and_lonely_rows() -> None:
    # b's only row is empty: b is no column at all, so one column is left -> undefined.
    e = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 0.0]])
    assert resp.mi_embed(e, ["a", "a", "b"]) is None
    assert resp.retrieval_embed(e, ["a", "a", "b"]) is None
    # every state alone: two columns, but no row has a leave-one-out centroid.
    assert resp.mi_embed(np.eye(3), ["a", "b", "c"]) is None
    assert resp.retrieval_embed(np.eye(3), ["a", "b", "c"]) is None
    c = resp.centroid_similarity(np.zeros((2, 2)), ["a", "b"])
    assert c.num_columns == 0 and c.sims.shape == (0, 0)


def test_mi_embed_bias_correction_centres_the_null() -> None:
    # Reasoning that ignores the state: each row one of 3 orthogonal directions at random.
    # The raw kernel estimate is far below 0 (Jensen bias from noisy centroids); the
    # returned, shuffle-corrected value averages about 0.
    raws, corrected = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        e = np.eye(3)[rng.integers(0, 3, 64)]
        groups = np.repeat(np.arange(8), 8).tolist()
        raws.append(resp.mi_embed(e, groups, null_permutations=0))
        corrected.append(resp.mi_embed(e, groups, seed=seed))
    assert np.mean(raws) < -1.0
    assert abs(np.mean(corrected)) < 0.1


def test_mi_embed_state_dependent_reasoning() -> None:
    # Each state has its own direction plus small noise: retrieval perfect, MI high.
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(8), 8)
    e = np.eye(8)[groups] + 0.05 * rng.random((64, 8))
    assert resp.retrieval_embed(e, groups.tolist()) == pytest.approx(1.0)
    raw = resp.mi_embed(e, groups.tolist(), null_permutations=0)
    assert raw is not None and 0.9 * math.log(8) < raw <= math.log(8)
    corrected = resp.mi_embed(e, groups.tolist())
    assert corrected is not None and corrected > raw  # the null bias is added back


def test_mi_embed_is_deterministic_and_checks_arguments() -> None:
    rng = np.random.default_rng(1)
    e = rng.random((24, 5))
    groups = np.repeat(np.arange(4), 6).tolist()
    assert resp.mi_embed(e, groups, seed=7) == resp.mi_embed(e, groups, seed=7)
    with pytest.raises(ValueError, match="temperature"):
        resp.mi_embed(e, groups, temperature=0.0)
    with pytest.raises(ValueError, match="groups"):
        resp.mi_embed(e, groups[:-1])

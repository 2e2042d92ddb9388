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


# --- log-prob cross-score metrics: one 4 x 4 case worked by hand ------------------------
# A_ij = ln p_ij (per token), rows own columns 0, 1, 2, 3:
#   row 0: p = (1/2, 1/4, 1/8, 1/8)    sum 1    own 1/2
#   row 1: p = (1/8, 1/4, 1/16, 1/16)  sum 1/2  own 1/4
#   row 2: p = (1/4, 1/4, 1/4, 1/4)    sum 1    own 1/4 (tied with all)
#   row 3: p = (1/2, 1/4, 1/8, 1/8)    sum 1    own 1/8 (tied with column 2)
# marginal_i = ln(sum_j p_ij) - ln 4 = -2 ln 2, -3 ln 2, -2 ln 2, -2 ln 2
# matched = -ln 2, -2 ln 2, -2 ln 2, -3 ln 2                mean -2 ln 2
# cond_entropy = 2 ln 2 = 1.386294; marginal_entropy = 9/4 ln 2 = 1.559581
# mi = mean(matched - marginal) = (ln 2 + ln 2 + 0 - ln 2) / 4 = ln 2 / 4 = 0.173287
#    = marginal_entropy - cond_entropy (RAGEN-2's identity)
# marginal std (ddof 0): deviations from -9/4 ln 2 are (1/4, -3/4, 1/4, 1/4) ln 2 ->
#    var = (3/16 + 9/16) / 4 ln^2 2 = 3/16 ln^2 2 -> std = sqrt(3)/4 ln 2 = 0.300142
# z-score = (ln 2 / 4) / (sqrt(3)/4 ln 2 + 1e-3) = 0.173287 / 0.301142 = 0.575433
# top-1: row 0 hit, row 1 hit, row 2 tied 4 ways (1/4), row 3 has 2 above (0) -> 2.25/4
# top-2: 1, 1, 2/4, 0 -> 2.5/4;   top-3: 1, 1, 3/4, (3 - 2)/2 = 1/2 -> 3.25/4
LN2 = math.log(2)
HAND_P = np.array(
    [
        [1 / 2, 1 / 4, 1 / 8, 1 / 8],
        [1 / 8, 1 / 4, 1 / 16, 1 / 16],
        [1 / 4, 1 / 4, 1 / 4, 1 / 4],
        [1 / 2, 1 / 4, 1 / 8, 1 / 8],
    ]
)
HAND_A = np.log(HAND_P)
HAND_OWN = [0, 1, 2, 3]


def test_logprob_metrics_hand_case() -> None:
    a, own = HAND_A, HAND_OWN
    np.testing.assert_allclose(
        resp.marginal_from_scores(a), [-2 * LN2, -3 * LN2, -2 * LN2, -2 * LN2]
    )
    assert resp.mi_from_scores(a, own) == pytest.approx(LN2 / 4)
    assert resp.conditional_entropy_from_scores(a, own) == pytest.approx(2 * LN2)
    assert resp.marginal_entropy_from_scores(a) == pytest.approx(9 / 4 * LN2)
    assert resp.marginal_std_from_scores(a) == pytest.approx(math.sqrt(3) / 4 * LN2)
    z = (LN2 / 4) / (math.sqrt(3) / 4 * LN2 + 1e-3)
    assert resp.mi_zscore_from_scores(a, own) == pytest.approx(z)
    assert z == pytest.approx(0.575433, abs=1e-6)


def test_retrieval_top_k_hand_case() -> None:
    acc = {1: 2.25 / 4, 2: 2.5 / 4, 3: 3.25 / 4, 4: 1.0}
    for k, expected in acc.items():
        got = resp.retrieval_from_scores(HAND_A, HAND_OWN, k=k, chance_corrected=False)
        assert got == pytest.approx(expected), k
    # corrected: (acc - k/4) / (1 - k/4); undefined at k = N (chance is 1)
    assert resp.retrieval_from_scores(HAND_A, HAND_OWN, k=2) == pytest.approx((0.625 - 0.5) / 0.5)
    assert resp.retrieval_from_scores(HAND_A, HAND_OWN, k=4) is None
    assert resp.retrieval_chance(4) == 0.25
    assert resp.retrieval_chance(4, 3) == 0.75
    assert resp.retrieval_chance(2, 3) == 1.0
    assert resp.retrieval_chance(1) is None
    with pytest.raises(ValueError, match="k"):
        resp.retrieval_from_scores(HAND_A, HAND_OWN, k=0)


def test_zscore_with_equal_marginals_divides_by_eps() -> None:
    # rows of equal sum: every marginal is -ln 2 (N = 2), std 0 -> MI / 1e-3
    a = np.log([[0.75, 0.25], [0.25, 0.75]])
    mi = math.log(0.75) + math.log(2)  # both rows: ln .75 - (ln 1 - ln 2)
    assert resp.mi_zscore_from_scores(a, [0, 1]) == pytest.approx(mi / 1e-3)
    assert resp.mi_zscore_from_scores(np.zeros((2, 1)), [0, 0]) is None
    assert resp.conditional_entropy_from_scores(np.zeros((0, 2)), np.zeros(0, int)) is None
    assert resp.marginal_entropy_from_scores(np.zeros((0, 2))) is None


def test_merge_columns_counts_identical_inputs_once() -> None:
    # Columns 1 and 2 are the same input (equal scores, as identical inputs give).
    # Merged: N = 2, row 1 (own column 2) is a top-1 hit instead of a half (tie with 1).
    a = np.log([[0.6, 0.2, 0.2], [0.1, 0.45, 0.45]])
    merged, column_of = resp.merge_columns(a, ["x", "y", "y"])
    assert column_of.tolist() == [0, 1, 1]
    np.testing.assert_allclose(merged, np.log([[0.6, 0.2], [0.1, 0.45]]))
    own = column_of[[0, 2]]
    assert resp.retrieval_from_scores(merged, own, chance_corrected=False) == 1.0
    assert resp.retrieval_from_scores(a, [0, 2], chance_corrected=False) == 0.75
    # MI now against log 2: row 0: ln .6 - ln(.4); row 1: ln .45 - ln(.275)
    mi = (math.log(0.6 / 0.4) + math.log(0.45 / 0.275)) / 2
    assert resp.mi_from_scores(merged, own) == pytest.approx(mi)
    # Distinct scores merge as the log of their mean probability.
    merged, _ = resp.merge_columns(np.log([[0.2, 0.4]]), ["k", "k"])
    np.testing.assert_allclose(merged, np.log([[0.3]]))
    unchanged, codes = resp.merge_columns(a, ["x", "y", "z"])
    assert unchanged is not None and codes.tolist() == [0, 1, 2]


# --- action MI ----------------------------------------------------------------------------


def test_mutual_information_miller_madow_hand_case() -> None:
    # states a a b b, actions x y z z:
    # H(S) = ln 2; H(A) = H(1/4, 1/4, 1/2) = 1.5 ln 2; H(S, A) = 1.5 ln 2 -> plug-in ln 2
    # Miller-Madow: (m_S + m_A - m_SA - 1) / (2n) = (2 + 3 - 3 - 1) / 8 = 1/8
    assert resp.mutual_information_mm([0, 0, 1, 1], [0, 1, 2, 2]) == pytest.approx(LN2 + 1 / 8)
    # independent 2 x 2, all four cells once: plug-in 0, correction (2 + 2 - 4 - 1) / 8
    assert resp.mutual_information_mm([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-1 / 8)
    assert resp.mutual_information_mm([], []) is None


def test_action_mi_value_and_permutation_p_value() -> None:
    groups = ["a", "a", "b", "b"]
    actions = ["x", "y", "z", "z"]
    mi, p = resp.action_mi(groups, actions, permutations=3000, seed=1)
    assert mi == pytest.approx(LN2 + 1 / 8)
    # A shuffle reaches the observed MI iff both z land in one state: 2 of the 6
    # placements of the z pair -> p about 1/3 (sd of the estimate 0.009).
    assert p is not None and abs(p - 1 / 3) < 0.04
    # 8 states, each with its own action: p is the smallest possible, 1 / (1 + B)
    g = [s for s in range(8) for _ in range(4)]
    mi, p = resp.action_mi(g, [f"a{s}" for s in g], permutations=200)
    assert mi == pytest.approx(math.log(8) + (8 + 8 - 8 - 1) / 64)
    assert p == pytest.approx(1 / 201)
    assert resp.action_mi(g, [f"a{s}" for s in g], permutations=200) == (mi, p)  # seeded


def test_action_mi_undefined_cases() -> None:
    assert resp.action_mi(["a", "a"], ["x", "y"]) == (None, None)  # one state
    assert resp.action_mi(["a", "b"], ["x", "x"]) == (None, None)  # one action
    assert resp.normalise_action("  Move LEFT \n") == "move left"
    with pytest.raises(ValueError, match="actions"):
        resp.action_mi(["a", "b"], ["x"])

"""score_step / score_steps: the glue, and DESIGN.md §4's planted cases end to end."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from collapsewatch import scoring
from collapsewatch.metrics import diversity
from collapsewatch.metrics import representation as rep
from collapsewatch.metrics.series import series_metrics
from collapsewatch.schema import CrossScores, Rollout, Turn
from collapsewatch.scoring import METRIC_NAMES, score_step, score_steps
from tests.metrics.planted import (
    constant_step,
    grid_states,
    honest_grid_step,
    restating_step,
    slot_template_step,
    template_step,
)
from tests.metrics.test_responsiveness import HAND_A, LN2


def _rollout(
    rid: str,
    state: str,
    reward: float,
    *,
    step: int = 3,
    success: bool | None = None,
    turns: list[Turn] | None = None,
) -> Rollout:
    return Rollout(
        rollout_id=rid,
        step=step,
        state_id=state,
        reward=reward,
        success=success,
        turns=turns or [Turn(index=0, reasoning=f"thinking about {state}", action="a")],
    )


def _small_step() -> list[Rollout]:
    return [
        _rollout(
            "r0",
            "s1",
            1.0,
            success=True,
            turns=[
                Turn(
                    index=0,
                    reasoning="go left",
                    token_entropy=1.0,
                    num_tokens=10,
                    valid_format=True,
                ),
                Turn(
                    index=1, reasoning="go up", token_entropy=2.0, num_tokens=30, valid_format=False
                ),
            ],
        ),
        _rollout(
            "r1",
            "s1",
            3.0,
            success=False,
            turns=[Turn(index=0, reasoning="go down", token_entropy=4.0, num_tokens=10)],
        ),
        _rollout("r2", "s2", 0.0, success=None),
        _rollout("r3", "s2", 0.0, success=True),
    ]


def test_small_step_exact_values() -> None:
    s = score_step(_small_step())
    m = s.metrics
    assert s.step == 3 and s.representation == "tfidf"
    assert list(m) == list(METRIC_NAMES)
    assert m["structure.num_rollouts"] == 4
    assert m["structure.distinct_states"] == 2
    assert m["correctness.reward_mean"] == 1.0
    assert m["correctness.success_rate"] == pytest.approx(2 / 3)
    # s1: [1, 3] -> sqrt(2); s2: [0, 0] -> 0
    assert m["correctness.group_reward_std"] == pytest.approx(math.sqrt(2) / 2)
    assert m["correctness.zero_std_fraction"] == 0.5
    assert m["correctness.valid_format_rate"] == 0.5
    # (1*10 + 2*30 + 4*10) / 50 = 2.2
    assert m["diversity.token_entropy"] == pytest.approx(2.2)
    # per-turn texts: "go left" "go up" "go down" "thinking about s2" x2:
    # bigrams (go left) (go up) (go down) + 2 x [(thinking about) (about s2)] -> 5 of 7
    assert m["diversity.distinct_2"] == pytest.approx(5 / 7)
    assert all(isinstance(v, float) for v in m.values() if v is not None)


def test_token_entropy_and_success_none_when_absent() -> None:
    rollouts = [_rollout(f"r{k}", f"s{k % 2}", 1.0) for k in range(4)]
    m = score_step(rollouts).metrics
    assert m["diversity.token_entropy"] is None
    assert m["correctness.success_rate"] is None
    assert m["correctness.valid_format_rate"] is None
    assert "diversity.token_entropy" in m


def test_single_state_leaves_responsiveness_undefined() -> None:
    rollouts = [_rollout(f"r{k}", "only", float(k)) for k in range(3)]
    m = score_step(rollouts).metrics
    assert m["responsiveness.mi_embed"] is None
    assert m["responsiveness.retrieval_embed"] is None
    assert m["diversity.within_state"] == pytest.approx(0.0, abs=1e-12)


def test_rollout_text_joins_reasoning_in_turn_order_and_falls_back_to_actions() -> None:
    r = _rollout(
        "r",
        "s",
        0.0,
        turns=[
            Turn(index=1, reasoning="second", action="b"),
            Turn(index=0, reasoning="first", action="a"),
            Turn(index=2, reasoning="", action="c"),
        ],
    )
    assert scoring.rollout_text(r) == "first\nsecond"
    no_reasoning = _rollout(
        "q", "s", 0.0, turns=[Turn(index=0, action="up"), Turn(index=1, action="left")]
    )
    assert scoring.rollout_text(no_reasoning) == "up\nleft"


def test_invalid_input_raises() -> None:
    with pytest.raises(ValueError, match="at least one"):
        score_step([])
    with pytest.raises(ValueError, match="several steps"):
        score_step([_rollout("a", "s", 0.0, step=1), _rollout("b", "s", 0.0, step=2)])
    with pytest.raises(ValueError, match="representation"):
        score_step(_small_step(), representation="bert")


def test_score_steps_groups_and_sorts() -> None:
    rollouts = [
        _rollout("a", "s", 1.0, step=5),
        _rollout("b", "s", 2.0, step=1),
        _rollout("c", "s", 4.0, step=5),
    ]
    scores = score_steps(rollouts)
    assert [s.step for s in scores] == [1, 5]
    assert [s.metrics["correctness.reward_mean"] for s in scores] == [2.0, 2.5]
    assert score_steps([]) == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        scores[0].step = 2  # type: ignore[misc]


def _letter_counts(texts: list[str]) -> np.ndarray:
    """A per-text stand-in for MiniLM: letter counts (26 dims, each text alone)."""
    return np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts])


def test_minilm_embeds_a_stratified_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []

    def fake_minilm(texts: list[str], *, max_tokens: int = 128) -> np.ndarray:
        calls.append((len(texts), max_tokens))
        return _letter_counts(texts)

    monkeypatch.setattr(rep, "minilm", fake_minilm)
    s = score_step(
        restating_step(), representation="minilm", embed_max_texts=24, embed_max_tokens=64
    )
    # the sample, then the sampled texts that copy from their observation (restating
    # copies colour, object and room: all of them) for the masked variants
    assert calls == [(24, 64), (24, 64)]
    assert s.representation == "minilm"
    assert s.metrics["structure.num_rollouts"] == 64  # the sample is for embeddings only
    calls.clear()
    score_step(template_step(), representation="minilm", embed_max_texts=24)
    assert calls == [(24, 128)]  # templates copy nothing: one embedding serves both


# --- DESIGN.md §4 planted cases --------------------------------------------------------
# Single-step responsiveness on 64 short texts is noisy (sd of mi_embed about 0.16 nats
# with TF-IDF under the null), so the "about 0" claims are checked on the mean of
# several independent steps, and each step against a loose bound.


def test_planted_templates_tfidf() -> None:
    steps = [template_step(seed=seed) for seed in range(10)]
    scores = [score_step(s).metrics for s in steps]
    mi = [m["responsiveness.mi_embed"] for m in scores]
    retrieval = [m["responsiveness.retrieval_embed"] for m in scores]
    assert abs(np.mean(mi)) < 0.1
    assert max(abs(v) for v in mi) < 0.5  # type: ignore[arg-type]
    assert abs(np.mean(retrieval)) < 0.15
    assert max(abs(v) for v in retrieval) < 0.15  # type: ignore[arg-type]
    assert min(m["diversity.within_state"] for m in scores) > 0.3  # type: ignore[type-var]


def test_planted_restating_tfidf() -> None:
    m = score_step(restating_step()).metrics
    assert m["responsiveness.retrieval_embed"] > 0.8  # type: ignore[operator]
    assert m["responsiveness.mi_embed"] > 1.0  # type: ignore[operator]


def test_planted_constant_tfidf() -> None:
    m = score_step(constant_step()).metrics
    assert m["diversity.within_state"] == pytest.approx(0.0, abs=1e-9)
    # 11 distinct bigrams, 64 copies of them
    assert m["diversity.distinct_2"] == pytest.approx(1 / 64)
    assert m["responsiveness.mi_embed"] == pytest.approx(0.0, abs=1e-9)
    assert m["responsiveness.retrieval_embed"] == pytest.approx(0.0, abs=1e-9)


def test_planted_cases_minilm() -> None:
    kw = {"representation": "minilm"}
    templates = [score_step(template_step(6, 8, seed=s), **kw).metrics for s in range(4)]
    mi = [m["responsiveness.mi_embed"] for m in templates]
    assert abs(np.mean(mi)) < 0.1
    assert max(abs(v) for v in mi) < 0.3  # type: ignore[arg-type]
    assert abs(np.mean([m["responsiveness.retrieval_embed"] for m in templates])) < 0.15
    assert min(m["diversity.within_state"] for m in templates) > 0.3  # type: ignore[type-var]

    restating = score_step(restating_step(6, 8), **kw).metrics
    assert restating["responsiveness.retrieval_embed"] > 0.8  # type: ignore[operator]
    assert restating["responsiveness.mi_embed"] > 1.0  # type: ignore[operator]

    constant = score_step(constant_step(6, 8), **kw).metrics
    assert constant["diversity.within_state"] == pytest.approx(0.0, abs=1e-5)
    assert constant["diversity.distinct_2"] == pytest.approx(1 / 48)
    assert constant["responsiveness.mi_embed"] == pytest.approx(0.0, abs=1e-3)


# --- new structure metrics, non-finite input ---------------------------------------------


def test_structure_metrics_of_the_small_step() -> None:
    m = score_step(_small_step()).metrics
    assert m["structure.group_size_min"] == 2 and m["structure.group_size_max"] == 2
    # r2 and r3 (group s2) say and do the same: 1 duplicate of 4 rollouts
    assert m["structure.duplicate_rate"] == 0.25
    assert m["structure.nonfinite"] == 0
    assert m["structure.truncated_rate"] is None
    assert m["structure.cross_rows_scored"] is None
    # texts "go left\ngo up", "go down", "thinking about s2" x 2, all under 32 chars
    assert m["diversity.char_entropy_min"] is None
    # the mean is over the rollouts' texts (turns joined by "\n"), not over turns
    texts = ["go left\ngo up", "go down", "thinking about s2", "thinking about s2"]
    assert m["diversity.char_entropy"] == pytest.approx(diversity.char_entropies(texts).mean())
    # "go down": g, o, space, d, o, w, n -> o twice of 7
    p = np.array([1, 2, 1, 1, 1, 1]) / 7
    assert diversity.char_entropies(["go down"])[0] == pytest.approx(-np.sum(p * np.log(p)))


def test_nonfinite_values_are_counted_not_fatal() -> None:
    nan, inf = float("nan"), float("inf")
    rollouts = [
        _rollout("a", "s1", nan),
        _rollout(
            "b",
            "s1",
            2.0,
            turns=[Turn(index=0, reasoning="x y", reward=inf, token_entropy=nan, logprob=-inf)],
        ),
        _rollout("c", "s2", 4.0, turns=[Turn(index=0, reasoning="p q", token_entropy=1.5)]),
        _rollout("d", "s2", 6.0),
    ]
    rollouts[0] = rollouts[0].model_copy(update={"truncated": True})
    rollouts[2] = rollouts[2].model_copy(update={"truncated": False})
    m = score_step(rollouts).metrics
    assert m["structure.nonfinite"] == 4  # reward, turn reward, entropy, logprob
    assert m["correctness.reward_mean"] == 4.0  # (2 + 4 + 6) / 3
    assert m["correctness.group_reward_std"] == pytest.approx(math.sqrt(2))  # s2: [4, 6]
    assert m["diversity.token_entropy"] == 1.5
    assert m["structure.truncated_rate"] == 0.5
    assert all(v is None or math.isfinite(v) for v in m.values())


def test_single_state_leaves_every_responsiveness_metric_undefined() -> None:
    rollouts = [
        _rollout(f"r{k}", "only", float(k), turns=[Turn(index=0, reasoning=f"t {k}", action="up")])
        for k in range(3)
    ]
    # cross-scores against two inputs, but every row is of the one state
    cross = CrossScores(
        step=3,
        rollout_ids=["r0", "r1", "r2"],
        state_ids=["only", "other"],
        logprob_sum=[[-1.0, -2.0], [-1.0, -3.0], [-2.0, -1.0]],
        num_tokens=[1, 1, 1],
    )
    m = score_step(rollouts, cross_scores=cross).metrics
    assert m["structure.distinct_states"] == 1
    assert m["structure.cross_rows_scored"] == 3
    responsiveness = {k: v for k, v in m.items() if k.startswith("responsiveness.")}
    assert len(responsiveness) == 16
    assert all(v is None for v in responsiveness.values()), responsiveness


# --- cross-scores ------------------------------------------------------------------------


def _grid_rollouts(n: int, step: int = 3, observations: list[str] | None = None) -> list[Rollout]:
    obs = observations or [f"grid {k}" for k in range(n)]
    return [
        _rollout(f"r{k}", f"s{k}", 0.0, step=step, turns=[Turn(index=0, observation=obs[k])])
        for k in range(n)
    ]


def test_cross_scores_hand_case_end_to_end() -> None:
    # tests/metrics/test_responsiveness.py works out HAND_A (per token); rows r1 and r3
    # have 2 tokens, so their summed scores are 2 A. Two more rows are left out: one with
    # a NaN (also counted as non-finite) and one of a rollout not in the step.
    # Summed (per-sequence) MI: rows 0 and 2 as per token (ln 2, 0); row 1: p^2 =
    # (1/64, 1/16, 1/256, 1/256), sum 22/256 -> ln(1/16) - ln(22/1024) = ln(32/11);
    # row 3: (1/4, 1/16, 1/64, 1/64), sum 22/64 -> ln(1/64) - ln(22/256) = ln(2/11);
    # mean = ln(2 * 32/11 * 2/11) / 4 = ln(128/121) / 4 = 0.014058
    ntok = [1, 2, 1, 2]
    summed = (HAND_A * np.array(ntok)[:, None]).tolist()
    cross = CrossScores(
        step=3,
        rollout_ids=["r0", "r1", "r2", "r3", "r4", "ghost"],
        state_ids=["s0", "s1", "s2", "s3"],
        logprob_sum=[*summed, [-1.0, float("nan"), -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]],
        num_tokens=[*ntok, 1, 1],
    )
    rollouts = [*_grid_rollouts(4), _rollout("r4", "s0", 0.0)]
    m = score_step(rollouts, cross_scores=cross).metrics
    assert m["structure.cross_rows_scored"] == 4
    assert m["structure.cross_rows_dropped"] == 2
    assert m["structure.nonfinite"] == 1
    assert m["responsiveness.mi_logprob"] == pytest.approx(LN2 / 4)
    assert m["responsiveness.mi_logprob_seq"] == pytest.approx(math.log(128 / 121) / 4)
    assert m["responsiveness.cond_entropy"] == pytest.approx(2 * LN2)
    assert m["responsiveness.marginal_entropy"] == pytest.approx(9 / 4 * LN2)
    assert m["responsiveness.marginal_entropy"] - m["responsiveness.cond_entropy"] == (
        pytest.approx(m["responsiveness.mi_logprob"])
    )
    assert m["responsiveness.marginal_std"] == pytest.approx(math.sqrt(3) / 4 * LN2)
    assert m["responsiveness.mi_zscore"] == pytest.approx(0.575433, abs=1e-6)
    assert m["responsiveness.retrieval_acc"] == pytest.approx(2.25 / 4)
    assert m["responsiveness.retrieval_acc_top3"] == pytest.approx(3.25 / 4)
    assert m["responsiveness.retrieval_chance"] == 0.25
    assert m["responsiveness.retrieval_chance_top3"] == 0.75
    # top-k is a parameter, and names follow it
    m2 = score_step(rollouts, cross_scores=cross, retrieval_k=2).metrics
    assert list(m2) == list(scoring.metric_names(2))
    assert m2["responsiveness.retrieval_acc_top2"] == pytest.approx(2.5 / 4)
    assert m2["responsiveness.retrieval_chance_top2"] == 0.5


def test_cross_scores_identical_inputs_and_extra_columns() -> None:
    # s1 and s2 show the same observation: one input. "extra" is an input no rollout
    # of the step has: still a column. Columns after merging: s0, {s1, s2}, extra -> 3.
    rollouts = _grid_rollouts(3, observations=["room A", "room B", "room B"])
    p = np.array(
        [
            [0.5, 0.2, 0.2, 0.1],  # r0 (s0): own is best
            [0.1, 0.4, 0.4, 0.1],  # r1 (s1): ties s2, which is the same input -> a hit
            [0.3, 0.2, 0.2, 0.3],  # r2 (s2): s0 and extra above -> a miss
        ]
    )
    cross = CrossScores(
        step=3,
        rollout_ids=["r0", "r1", "r2"],
        state_ids=["s0", "s1", "s2", "extra"],
        logprob_sum=np.log(p).tolist(),
        num_tokens=[1, 1, 1],
    )
    m = score_step(rollouts, cross_scores=cross).metrics
    assert m["responsiveness.retrieval_chance"] == pytest.approx(1 / 3)
    assert m["responsiveness.retrieval_acc"] == pytest.approx(2 / 3)
    # merged rows (N = 3): r0 (.5, .2, .1): ln .5 - ln(.8 / 3); r1 (.1, .4, .1):
    # ln .4 - ln(.6 / 3); r2 (.3, .2, .3): ln .2 - ln(.8 / 3) -> mean 0.344691
    mi = (math.log(0.5 * 3 / 0.8) + math.log(0.4 * 3 / 0.6) + math.log(0.2 * 3 / 0.8)) / 3
    assert m["responsiveness.mi_logprob"] == pytest.approx(mi)


def test_cross_scores_of_another_step_raise() -> None:
    cross = CrossScores(
        step=4, rollout_ids=["r0"], state_ids=["s0"], logprob_sum=[[-1.0]], num_tokens=[1]
    )
    with pytest.raises(ValueError, match="step 4"):
        score_step(_grid_rollouts(2), cross_scores=cross)


def test_score_steps_and_series_metrics_with_cross_scores() -> None:
    rollouts = _grid_rollouts(4, step=0) + _grid_rollouts(4, step=1)
    rollouts = [r.model_copy(update={"rollout_id": f"{r.rollout_id}-{r.step}"}) for r in rollouts]
    cross = CrossScores(
        step=1,
        rollout_ids=[f"r{k}-1" for k in range(4)],
        state_ids=["s0", "s1", "s2", "s3"],
        logprob_sum=HAND_A.tolist(),
        num_tokens=[1, 1, 1, 1],
    )
    scores = score_steps(rollouts, cross_scores={1: cross})
    assert scores[0].metrics["responsiveness.mi_logprob"] is None
    assert scores[1].metrics["responsiveness.mi_logprob"] == pytest.approx(LN2 / 4)
    derived = series_metrics({s.step: s.metrics for s in scores})
    assert derived[0]["responsiveness.mi_zscore_ema"] is None
    # the first defined std starts the EMA: the EMA z-score equals the step's z-score
    assert derived[1]["responsiveness.mi_zscore_ema"] == pytest.approx(
        scores[1].metrics["responsiveness.mi_zscore"]
    )
    with pytest.raises(ValueError, match="retrieval_k"):
        score_step(rollouts[:4], retrieval_k=1)


# --- copy-aware responsiveness: planted slot-filling template vs honest reasoning ----------
# (tests/metrics/planted.py; values over seeds 0-4 with TF-IDF: slot template plain
# retrieval 0.98-1.00, masked -0.14 to -0.02; honest plain 0.68-0.95, masked 0.57-0.82)

SEEDS = range(5)


def test_planted_slot_template_fools_plain_but_not_masked() -> None:
    for seed in SEEDS:
        m = score_step(slot_template_step(seed=seed)).metrics
        assert m["responsiveness.retrieval_embed"] > 0.6, seed
        assert m["responsiveness.mi_embed"] > 1.0, seed
        assert abs(m["responsiveness.retrieval_embed_masked"]) <= 0.2, seed  # type: ignore[arg-type]
        assert abs(m["responsiveness.mi_embed_masked"]) < 0.2, seed  # type: ignore[arg-type]
    # one fixed conclusion: the masked texts are identical, exactly chance
    m = score_step(slot_template_step(templates=1)).metrics
    assert m["responsiveness.retrieval_embed_masked"] == pytest.approx(0.0, abs=1e-9)
    assert m["responsiveness.retrieval_embed"] == pytest.approx(1.0)


def test_planted_honest_reasoning_stays_responsive_when_masked() -> None:
    for seed in SEEDS:
        m = score_step(honest_grid_step(seed=seed)).metrics
        assert m["responsiveness.retrieval_embed"] > 0.5, seed
        assert m["responsiveness.retrieval_embed_masked"] > 0.5, seed
        assert m["responsiveness.mi_embed_masked"] > 1.0, seed


def test_masking_keeps_words_every_observation_shares(monkeypatch: pytest.MonkeyPatch) -> None:
    # Masking the moves too (they are in every observation) erases honest conclusions.
    kept = score_step(honest_grid_step()).metrics["responsiveness.retrieval_embed_masked"]
    monkeypatch.setattr(scoring.masking, "shared_tokens", lambda obs: frozenset())
    erased = score_step(honest_grid_step()).metrics["responsiveness.retrieval_embed_masked"]
    assert kept > 0.5 and erased < kept - 0.1  # type: ignore[operator]


def test_planted_template_and_restating_masked() -> None:
    # templates copy nothing: masked == plain; restating copies every fact: masked ~ 0
    t = score_step(template_step()).metrics
    assert t["responsiveness.mi_embed_masked"] == t["responsiveness.mi_embed"]
    r = score_step(restating_step()).metrics
    assert r["responsiveness.retrieval_embed"] > 0.8
    assert abs(r["responsiveness.retrieval_embed_masked"]) < 0.2  # type: ignore[arg-type]


def test_action_mi_on_planted_steps() -> None:
    # The honest grid policy's first move depends on the state; a collapsed policy's
    # does not. (planted steps carry action "x"/"go": give them real actions here.)
    honest = honest_grid_step()
    grid = {f"grid-{s}": g for s, g in enumerate(grid_states())}

    def first_move(state: str) -> str:
        r, c, r2, c2 = grid[state]
        vertical = abs(r2 - r) >= abs(c2 - c)
        return ("down" if r2 > r else "up") if vertical else ("right" if c2 > c else "left")

    def with_action(r: Rollout, action: str) -> Rollout:
        turn = r.turns[0].model_copy(update={"action": action})
        return r.model_copy(update={"turns": [turn]})

    m = score_step([with_action(r, first_move(r.state_id)) for r in honest]).metrics
    assert m["responsiveness.action_mi"] > 0.8
    assert m["responsiveness.action_mi_pvalue"] == pytest.approx(1 / 201)
    rng = np.random.default_rng(0)
    moves = ["up", "down", "left", "right"]
    collapsed = [with_action(r, moves[rng.integers(4)]) for r in honest]
    m = score_step(collapsed).metrics
    assert abs(m["responsiveness.action_mi"]) < 0.15  # type: ignore[arg-type]
    assert m["responsiveness.action_mi_pvalue"] > 0.05  # type: ignore[operator]

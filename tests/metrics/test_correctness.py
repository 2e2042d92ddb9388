"""correctness.*: hand-computed values and the undefined cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collapsewatch.metrics import correctness


def test_reward_mean() -> None:
    assert correctness.reward_mean([1.0, 2.0, 3.0, 6.0]) == 3.0
    assert correctness.reward_mean(np.array([-1.0, 0.5])) == -0.25
    assert correctness.reward_mean([]) is None


def test_success_rate_ignores_null_labels() -> None:
    # 2 successes out of 3 defined labels; the None does not count as a failure.
    assert correctness.success_rate([True, False, None, True]) == pytest.approx(2 / 3)
    assert correctness.success_rate([None, None]) is None
    assert correctness.success_rate([]) is None


def test_valid_format_rate_ignores_null_turns() -> None:
    assert correctness.valid_format_rate([True, None, False, False]) == pytest.approx(1 / 3)
    assert correctness.valid_format_rate([None, None]) is None


def test_group_reward_std_is_bessel_corrected_mean_over_groups() -> None:
    # a: [1, 3]    mean 2, squared deviations 1 + 1 = 2, / (2 - 1) -> std sqrt(2)
    # b: [0, 0, 3] mean 1, squared deviations 1 + 1 + 4 = 6, / (3 - 1) -> std sqrt(3)
    # c: [5] a group of one: left out (ddof=0 would give 1 and sqrt(2): mean 1.207).
    rewards = [1.0, 0.0, 3.0, 0.0, 3.0, 5.0]
    groups = ["a", "b", "a", "b", "b", "c"]
    expected = (math.sqrt(2) + math.sqrt(3)) / 2  # 1.5731
    assert correctness.group_reward_std(rewards, groups) == pytest.approx(expected)


def test_zero_std_fraction_counts_groups_of_two_or_more() -> None:
    # a flat, b varied, c flat, d a group of one (left out) -> 2 of 3.
    rewards = [1.0, 1.0, 0.0, 1.0, 2.0, 2.0, 2.0, 7.0]
    groups = ["a", "a", "b", "b", "c", "c", "c", "d"]
    assert correctness.zero_std_fraction(rewards, groups) == pytest.approx(2 / 3)


def test_zero_std_fraction_treats_float_noise_as_equal() -> None:
    assert correctness.zero_std_fraction([0.1 + 0.2, 0.3], ["a", "a"]) == 1.0
    assert correctness.zero_std_fraction([0.3, 0.3001], ["a", "a"]) == 0.0


def test_group_metrics_undefined_without_a_pair() -> None:
    assert correctness.group_reward_std([1.0, 2.0], ["a", "b"]) is None
    assert correctness.zero_std_fraction([1.0, 2.0], ["a", "b"]) is None
    assert correctness.group_reward_std([], []) is None


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="groups"):
        correctness.group_reward_std([1.0, 2.0], ["a"])


NAN, INF = float("nan"), float("inf")


def test_nonfinite_rewards_are_left_out() -> None:
    # The wire format accepts NaN/Inf (structure.nonfinite counts them); the metrics
    # must neither raise nor return NaN: they drop those rollouts.
    assert correctness.reward_mean([1.0, NAN, 3.0, -INF]) == 2.0
    assert correctness.reward_mean([NAN, INF]) is None
    # a: [1, NaN, 3] -> [1, 3], std sqrt(2); b: [0, Inf] -> [0], a group of one, left out
    rewards = [1.0, NAN, 3.0, 0.0, INF]
    groups = ["a", "a", "a", "b", "b"]
    assert correctness.group_reward_std(rewards, groups) == pytest.approx(math.sqrt(2))
    # a varies; c: [2, NaN, 2] -> flat -> 1 of 2 groups
    rewards = [1.0, 3.0, 2.0, NAN, 2.0]
    groups = ["a", "a", "c", "c", "c"]
    assert correctness.zero_std_fraction(rewards, groups) == 0.5
    assert correctness.zero_std_fraction([NAN, 1.0], ["a", "a"]) is None

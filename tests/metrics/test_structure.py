"""structure.*: group sizes, duplicates, non-finite counts, truncation."""

from __future__ import annotations

import numpy as np
import pytest

from collapsewatch.metrics import structure

NAN, INF = float("nan"), float("inf")


def test_group_codes_and_counts() -> None:
    codes, n = structure.group_codes(["b", "a", "b", "c"])
    assert codes.tolist() == [0, 1, 0, 2] and n == 3
    assert structure.num_rollouts(["b", "a", "b"]) == 3
    assert structure.distinct_states(["b", "a", "b"]) == 2
    assert structure.distinct_states([]) == 0


def test_group_size_range() -> None:
    assert structure.group_size_range(["a", "b", "a", "c", "a", "b"]) == (1, 3)
    assert structure.group_size_range(["x"] * 4) == (4, 4)
    assert structure.group_size_range([]) is None


def test_duplicate_rate_counts_within_groups_only() -> None:
    # a: r0 == r1, r2 differs -> 1 duplicate; b: r3 == r4 -> 1 duplicate, and r3 equals
    # a's r0 but in another group (not a duplicate) -> 2 of 6.
    groups = ["a", "a", "a", "b", "b", "b"]
    keys = [("x", "go"), ("x", "go"), ("y", "go"), ("x", "go"), ("x", "go"), ("z", "go")]
    assert structure.duplicate_rate(groups, keys) == pytest.approx(2 / 6)
    # every rollout of a group of 4 the same -> 3 of 4
    assert structure.duplicate_rate(["s"] * 4, ["t"] * 4) == 0.75
    assert structure.duplicate_rate([], []) is None
    with pytest.raises(ValueError, match="keys"):
        structure.duplicate_rate(["a"], [])


def test_nonfinite_count() -> None:
    # None is "not reported", not non-finite; the matrix counts every entry.
    matrix = np.array([[0.0, NAN], [-INF, -1.0]])
    assert structure.nonfinite_count([1.0, NAN, None, INF], [None, None], matrix) == 4
    assert structure.nonfinite_count([0.0], np.zeros((2, 3))) == 0
    assert structure.nonfinite_count() == 0


def test_truncated_rate_ignores_unknown() -> None:
    assert structure.truncated_rate([True, False, None, True]) == pytest.approx(2 / 3)
    assert structure.truncated_rate([None, None]) is None
    assert structure.truncated_rate([False]) == 0.0

"""The change tests: Mann-Whitney p-values (against scipy) and the CUSUM."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from collapsewatch.detect.changepoint import cusum_fall, mean_ci, shift_pvalue


def test_shift_pvalue_hand_computed() -> None:
    # All 5 recent values below all 5 baseline values: 1 ordering of C(10, 5) = 252.
    assert shift_pvalue([5, 6, 7, 8, 9], [0, 1, 2, 3, 4]) == pytest.approx(1 / 252)
    assert shift_pvalue([5, 6, 7, 8, 9], [0, 1, 2, 3, 4], direction="greater") == 1.0
    # U = 1 (one recent value above one baseline value): 2 orderings of 252.
    assert shift_pvalue([4, 6, 7, 8, 9], [0, 1, 2, 3, 5]) == pytest.approx(2 / 252)


@pytest.mark.parametrize("seed", range(20))
def test_shift_pvalue_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base, recent = rng.normal(size=5 + seed % 6), rng.normal(-0.5, size=3 + seed % 8)
    for d in ("less", "greater"):
        want = mannwhitneyu(recent, base, alternative=d, method="exact").pvalue
        assert shift_pvalue(base, recent, direction=d) == pytest.approx(want, abs=1e-12)
    tied_base, tied_recent = np.round(base), np.round(recent)
    if np.ptp(np.concatenate([tied_base, tied_recent])) > 0:
        want = mannwhitneyu(tied_recent, tied_base, alternative="less", method="asymptotic")
        assert shift_pvalue(tied_base, tied_recent) == pytest.approx(want.pvalue, abs=1e-12)


def test_shift_pvalue_degenerate_inputs() -> None:
    assert shift_pvalue([], [1.0]) == 1.0
    assert shift_pvalue([1.0, 1.0], [1.0, 1.0]) == 1.0
    with pytest.raises(ValueError):
        shift_pvalue([1.0], [2.0], direction="down")


def test_cusum_finds_the_change() -> None:
    values = [0.0, 0.1, -0.1, 0.05, -2.0, -2.1, -1.9, -2.0]
    # Standardised falls of ~2 sd each minus the 0.5 allowance: 1.5, 3.1, 4.5, 6.0 > 5.
    cs = cusum_fall(values, mean=0.0, sd=1.0)
    assert (cs.alarm, cs.alarm_index, cs.change_index) == (True, 7, 4)


def test_cusum_in_control() -> None:
    cs = cusum_fall([0.1, -0.3, 0.2, -0.1] * 10, mean=0.0, sd=0.2)
    assert not cs.alarm and cs.alarm_index is None


def test_mean_ci() -> None:
    lo, hi = mean_ci([1.0, 2.0, 3.0])
    # t(0.975, 2) = 4.3027; sd = 1; half width = 4.3027 / sqrt(3).
    assert (lo, hi) == pytest.approx((2 - 2.48418, 2 + 2.48418), abs=1e-4)
    assert mean_ci([5.0]) == (5.0, 5.0)

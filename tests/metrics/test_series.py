"""series.*: the EMA and the series-derived metrics."""

from __future__ import annotations

import pytest

from collapsewatch.metrics import series


def test_ema_hand_values_and_gaps() -> None:
    # alpha 0.5: 1 -> gap (None, state kept) -> 0.5*3 + 0.5*1 = 2 -> 0.5*5 + 0.5*2 = 3.5
    assert series.ema([1.0, None, 3.0, 5.0], 0.5) == [1.0, None, 2.0, 3.5]
    # leading gaps and NaN are gaps; alpha 1 is the series itself
    assert series.ema([None, float("nan"), 4.0, 2.0], 1.0) == [None, None, 4.0, 2.0]
    assert series.ema([], 0.1) == []
    with pytest.raises(ValueError, match="alpha"):
        series.ema([1.0], 0.0)


def test_series_metrics_hand_values() -> None:
    # Out of order on purpose: the EMA runs by step. alpha 0.5:
    # step 0: std 0.2 -> ema 0.2, z = 0.1 / 0.201
    # step 1: no cross-scores -> both None, the EMA carries 0.2 over
    # step 2: std 0.4 -> ema 0.3, z = 0.3 / 0.301
    data = {
        2: {"responsiveness.marginal_std": 0.4, "responsiveness.mi_logprob": 0.3},
        0: {"responsiveness.marginal_std": 0.2, "responsiveness.mi_logprob": 0.1, "x": 9.0},
        1: {"responsiveness.marginal_std": None, "responsiveness.mi_logprob": None},
    }
    out = series.series_metrics(data, alpha=0.5)
    assert list(out) == [0, 1, 2]
    assert all(tuple(v) == series.SERIES_METRIC_NAMES for v in out.values())
    assert out[0]["responsiveness.marginal_std_ema"] == pytest.approx(0.2)
    assert out[0]["responsiveness.mi_zscore_ema"] == pytest.approx(0.1 / 0.201)
    assert out[1] == {"responsiveness.marginal_std_ema": None, "responsiveness.mi_zscore_ema": None}
    assert out[2]["responsiveness.marginal_std_ema"] == pytest.approx(0.3)
    assert out[2]["responsiveness.mi_zscore_ema"] == pytest.approx(0.3 / 0.301)


def test_series_metrics_default_alpha_and_missing_names() -> None:
    # RAGEN-2's decay 0.9: 1.0 then 2.0 -> 0.1 * 2 + 0.9 * 1 = 1.1
    data = {
        5: {"responsiveness.marginal_std": 1.0, "responsiveness.mi_logprob": 0.5},
        6: {"responsiveness.marginal_std": 2.0, "responsiveness.mi_logprob": 0.5},
        7: {},
    }
    out = series.series_metrics(data)
    assert out[6]["responsiveness.marginal_std_ema"] == pytest.approx(1.1)
    assert out[6]["responsiveness.mi_zscore_ema"] == pytest.approx(0.5 / 1.101)
    assert out[7]["responsiveness.mi_zscore_ema"] is None
    assert series.series_metrics({}) == {}

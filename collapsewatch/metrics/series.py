"""Metrics over a run's series of steps (the ones a single step cannot give).

:func:`score_step <collapsewatch.scoring.score_step>` is a pure function of one step;
a few metrics need the steps before. They are computed here, from the per-step values
alone, by :func:`series_metrics`, which the worker calls over a run's stored series
after scoring a step, and ``collapsewatch score`` over the whole file. It is cheap
(linear in the number of steps), so callers recompute it over the whole series rather
than keep state: a rescored or late step changes the values after it, as it should.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

SERIES_METRIC_NAMES: tuple[str, ...] = (
    "responsiveness.marginal_std_ema",
    "responsiveness.mi_zscore_ema",
)
"""Every metric :func:`series_metrics` returns, in catalogue order (docs/metrics.md)."""

ZSCORE_EPS = 1e-3
"""Stabiliser of the z-score denominators (RAGEN-2: 1e-3), as in
:func:`collapsewatch.metrics.responsiveness.mi_zscore_from_scores`."""


def ema(values: Sequence[float | None], alpha: float) -> list[float | None]:
    """Exponential moving average over a series that may have gaps.

    ``s_t = alpha * x_t + (1 - alpha) * s_{t-1}``, started at the first defined value.
    A None or non-finite ``x_t`` is a gap: its output is None and the average carries
    over it unchanged (a step where the metric is undefined neither resets nor drags
    the average).

    Args:
        values: ``(T,)`` the series in step order; None where undefined.
        alpha: weight of the newest value, in (0, 1]; 1 returns the series itself.
            RAGEN-2's decay 0.9 on the old value is alpha = 0.1.

    Returns:
        ``(T,)``: the average after each defined value, None at the gaps.
        Source: RAGEN-2 (arXiv 2604.06268), EMA of the marginal std.
    """
    if not 0.0 < alpha <= 1.0:
        raise ValueError("alpha must be in (0, 1]")
    out: list[float | None] = []
    state: float | None = None
    for x in values:
        if x is None or not math.isfinite(x):
            out.append(None)
            continue
        state = x if state is None else alpha * x + (1.0 - alpha) * state
        out.append(state)
    return out


def series_metrics(
    series: Mapping[int, Mapping[str, float | None]], alpha: float = 0.1
) -> dict[int, dict[str, float | None]]:
    """The series-derived metrics of every step of a run.

    - ``responsiveness.marginal_std_ema``: :func:`ema` of ``responsiveness.marginal_std``
      (the per-token std of the marginal log-probabilities) over the steps in order.
    - ``responsiveness.mi_zscore_ema`` = ``responsiveness.mi_logprob`` /
      (``marginal_std_ema`` + 1e-3): RAGEN-2's MI z-score with the batch std replaced by
      its moving average, so that one step whose marginals happen to bunch up (a small
      std) does not blow the z-score up.

    Args:
        series: ``{step: {name: value}}``, the per-step metrics as :func:`score_step`
            returns them (other names are ignored; a missing name counts as None).
        alpha: EMA weight of the newest step (RAGEN-2: decay 0.9, i.e. alpha 0.1).

    Returns:
        ``{step: {name: value}}`` for every step of ``series`` and every name of
        :data:`SERIES_METRIC_NAMES`, None where undefined: at a step whose
        ``marginal_std`` (for the EMA) or ``mi_logprob`` (for the z-score) is None, i.e.
        a step without cross-scores. Only these names: merge them with the step's own
        metrics. Source: RAGEN-2 (arXiv 2604.06268), EMA-normalised MI z-score.
    """
    steps = sorted(series)
    std_ema = ema([series[s].get("responsiveness.marginal_std") for s in steps], alpha)
    out: dict[int, dict[str, float | None]] = {}
    for s, sd in zip(steps, std_ema, strict=True):
        mi = series[s].get("responsiveness.mi_logprob")
        z = None if mi is None or sd is None or not math.isfinite(mi) else mi / (sd + ZSCORE_EPS)
        out[s] = {"responsiveness.marginal_std_ema": sd, "responsiveness.mi_zscore_ema": z}
    return out

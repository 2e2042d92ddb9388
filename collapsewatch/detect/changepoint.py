"""Change tests over metric series: did a metric move away from its early baseline?

Two complementary tools, both deterministic:

- :func:`shift_pvalue`: a two-sample test between the baseline window and the recent
  window (one-sided Mann-Whitney U, exact for small windows). Rank-based, so one wild
  step (a responsiveness estimate of -0.6 among values near 0.5, as the real TRL run
  shows) moves it by one rank, not by its size.
- :func:`cusum_fall`: Page's one-sided CUSUM for a fall in mean, in units of the
  baseline's standard deviation; its alarm time and the last time it left zero give
  an estimate of when the change began.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

# The baseline sd of a handful of steps can be ~0 by chance (or exactly 0 for a metric
# stuck at a value); the CUSUM divides by it, so it is floored at this share of the
# baseline's magnitude (and an absolute epsilon).
_SD_FLOOR_REL = 0.05
_SD_FLOOR_ABS = 1e-6


# Exact null distribution of U up to this many values per sample (without ties);
# larger samples, or ties, use the normal approximation.
_EXACT_MAX = 20


@lru_cache(maxsize=256)
def _u_counts(n1: int, n2: int) -> NDArray[np.float64]:
    """Number of orderings of n1 + n2 distinct values giving each U = 0 .. n1*n2 for
    sample 1 (the classic recurrence f(n1, n2, u) = f(n1-1, n2, u-n2) + f(n1, n2-1, u))."""
    # table[b][u] for the current a, built up over a = 0 .. n1.
    prev = [np.ones(1) for _ in range(n2 + 1)]  # a = 0: U is 0 whatever b
    for a in range(1, n1 + 1):
        cur = [np.ones(1)]  # b = 0: U is 0
        for b in range(1, n2 + 1):
            size = a * b + 1
            row = np.zeros(size)
            left = prev[b]  # f(a-1, b, u - b): sample-1 value is the largest
            row[b : b + len(left)] += left
            down = cur[b - 1]  # f(a, b-1, u): sample-2 value is the largest
            row[: len(down)] += down
            cur.append(row)
        prev = cur
    return prev[n2]


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based) of ``values`` and the sizes of their tie groups."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = []
    k = 0
    while k < len(order):
        j = k
        while j + 1 < len(order) and values[order[j + 1]] == values[order[k]]:
            j += 1
        for m in range(k, j + 1):
            ranks[order[m]] = (k + j) / 2.0 + 1.0
        ties.append(j - k + 1)
        k = j + 1
    return ranks, ties


def shift_pvalue(
    baseline: Sequence[float], recent: Sequence[float], *, direction: str = "less"
) -> float:
    """One-sided p-value that ``recent`` is shifted below (``"less"``) or above
    (``"greater"``) ``baseline``: the Mann-Whitney U test.

    Args:
        baseline: ``(B,)`` float, the early values.
        recent: ``(W,)`` float, the recent values.
        direction: ``"less"`` (recent lower) or ``"greater"`` (recent higher).

    Returns:
        The p-value: exact (the U distribution by recurrence) when neither sample has
        more than 20 values and no value ties; otherwise the normal approximation with
        tie correction and continuity correction (as scipy's ``mannwhitneyu``). 1.0 when
        a sample is empty or every value is equal. Written out here because scipy's
        wrapper costs about 2 ms a call and replay calls it at every step.
        Source: Mann & Whitney 1947.
    """
    if direction not in ("less", "greater"):
        raise ValueError("direction must be 'less' or 'greater'")
    r = [float(v) for v in recent]
    b = [float(v) for v in baseline]
    both = r + b
    if not b or not r or min(both) == max(both):
        return 1.0
    n1, n2 = len(r), len(b)
    ranks, ties = _ranks(both)
    u = math.fsum(ranks[:n1]) - n1 * (n1 + 1) / 2  # U of the recent sample
    if n1 <= _EXACT_MAX and n2 <= _EXACT_MAX and max(ties) == 1:
        counts = _u_counts(n1, n2)
        k = int(round(u))
        tail = counts[: k + 1].sum() if direction == "less" else counts[k:].sum()
        return float(min(1.0, tail / counts.sum()))
    n = n1 + n2
    mu = n1 * n2 / 2.0
    var = n1 * n2 / 12.0 * ((n + 1) - sum(t**3 - t for t in ties) / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (u + 0.5 - mu) / math.sqrt(var) if direction == "less" else (u - 0.5 - mu) / math.sqrt(var)
    # Normal cdf (less) or survival function (greater) of z.
    p = (
        0.5 * math.erfc(-z / math.sqrt(2))
        if direction == "less"
        else 0.5 * math.erfc(z / math.sqrt(2))
    )
    return float(min(1.0, p))


@dataclass(frozen=True)
class Cusum:
    """Result of :func:`cusum_fall` over a sequence of values.

    ``statistic`` is the final CUSUM value (baseline sds), ``alarm`` whether it ever
    exceeded the threshold, ``alarm_index`` the first index where it did and
    ``change_index`` the index after the last zero before the alarm (Page's estimate of
    where the change began); both None without an alarm.
    """

    statistic: float
    alarm: bool
    alarm_index: int | None
    change_index: int | None


def cusum_fall(
    values: ArrayLike, *, mean: float, sd: float, drift: float = 0.5, threshold: float = 5.0
) -> Cusum:
    """Page's one-sided CUSUM for a fall below ``mean``.

    ``S_0 = 0``, ``S_t = max(0, S_{t-1} + (mean - x_t) / sd - drift)``; alarm when
    ``S_t > threshold``.

    Args:
        values: ``(T,)`` float, the values after the baseline, in order.
        mean: in-control mean (the baseline mean).
        sd: in-control standard deviation; floored at 5% of ``|mean|`` (and 1e-6) so a
            baseline that happened to be flat does not make every wiggle an alarm.
        drift: allowance k in sds (half the shift to detect).
        threshold: decision threshold h in sds.

    Returns:
        A :class:`Cusum`. Source: Page 1954, "Continuous inspection schemes";
        Montgomery, "Introduction to Statistical Quality Control", ch. 9.
    """
    x = np.asarray(values, dtype=np.float64)
    scale = max(float(sd), _SD_FLOOR_REL * abs(float(mean)), _SD_FLOOR_ABS)
    s = 0.0
    last_zero = -1
    for t, v in enumerate(x):
        s = max(0.0, s + (mean - v) / scale - drift)
        if s == 0.0:
            last_zero = t
        elif s > threshold:
            return Cusum(statistic=s, alarm=True, alarm_index=t, change_index=last_zero + 1)
    return Cusum(statistic=s, alarm=False, alarm_index=None, change_index=None)


@lru_cache(maxsize=64)
def _t_quantile(q: float, df: int) -> float:
    return float(stats.t.ppf(q, df))


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Student-t confidence interval of the mean of ``values`` (at least 2 values);
    the interval is the single value twice for one value."""
    x = [float(v) for v in values]
    m = math.fsum(x) / len(x)
    if len(x) < 2:
        return (m, m)
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in x) / (len(x) - 1))
    half = _t_quantile(0.5 + level / 2, len(x) - 1) * sd / math.sqrt(len(x))
    return (m - half, m + half)

"""A run's metric series, indexed for causal look-ups by the rules.

Every look-up at position ``i`` (the i-th scored step, in step order) reads only
steps at positions ``<= i``: that is what makes :func:`~collapsewatch.detect.replay`
give a longer series' events with the shorter series' events as a prefix.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

Series = Mapping[int, Mapping[str, float | None]]


@dataclass(frozen=True)
class Window:
    """Consecutive defined values of one metric: ``steps`` and ``values`` in step order.

    Plain Python floats: windows hold a handful of values and replay builds several per
    rule and step, where numpy's per-call overhead would dominate.
    """

    steps: tuple[int, ...]
    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.steps)

    @cached_property
    def mean(self) -> float:
        # Divide first: the sum of values near the float limit (1e200 rewards) overflows.
        n = len(self.values)
        return math.fsum(v / n for v in self.values)

    @cached_property
    def median(self) -> float:
        return statistics.median(self.values)

    @cached_property
    def sd(self) -> float:
        """Sample standard deviation (ddof 1); 0 for one value."""
        if self.n < 2:
            return 0.0
        m = self.mean
        # Scaled so that squaring huge deviations cannot overflow.
        scale = max(abs(v - m) for v in self.values)
        if scale == 0.0 or not math.isfinite(scale):
            return 0.0 if scale == 0.0 else math.inf
        total = math.fsum(((v - m) / scale) ** 2 for v in self.values)
        return scale * math.sqrt(total / (self.n - 1))

    def summary(self) -> dict[str, object]:
        """Evidence form: the step span, count, mean, median and sd."""
        return {
            "steps": [self.steps[0], self.steps[-1]],
            "n": self.n,
            "mean": self.mean,
            "median": self.median,
            "sd": self.sd,
        }


class Track:
    """The defined, finite values of one metric, with their positions in the run."""

    def __init__(self, positions: list[int], steps: list[int], values: list[float]) -> None:
        self.positions = positions
        self.steps = steps
        self.values = values

    def count(self, i: int) -> int:
        """How many defined values lie at positions ``<= i``."""
        return bisect.bisect_right(self.positions, i)

    def at(self, i: int) -> float | None:
        """The value at position ``i`` itself, None when undefined there."""
        k = self.count(i)
        if k and self.positions[k - 1] == i:
            return self.values[k - 1]
        return None

    def first(self, n: int, i: int) -> Window | None:
        """The first ``n`` defined values (the early baseline), None until all ``n``
        lie at positions ``<= i``."""
        if self.count(i) < n:
            return None
        return Window(tuple(self.steps[:n]), tuple(self.values[:n]))

    def last(self, n: int, i: int, *, skip: int = 0) -> Window | None:
        """The last ``n`` defined values at positions ``<= i``, taken only from values
        after the first ``skip`` (so a recent window never overlaps the baseline); None
        when fewer than ``n`` are there."""
        k = self.count(i)
        if k - skip < n:
            return None
        return Window(tuple(self.steps[k - n : k]), tuple(self.values[k - n : k]))


def _retrieval_acc_corrected(row: Mapping[str, float | None]) -> float | None:
    """RAGEN-2's log-prob retrieval accuracy chance-corrected like ``retrieval_embed``:
    ``(acc - chance) / (1 - chance)``, 0 = chance, so that a ratio to its baseline means
    the same as for the text metrics."""
    acc = row.get("responsiveness.retrieval_acc")
    chance = row.get("responsiveness.retrieval_chance")
    if acc is None or chance is None or not (math.isfinite(acc) and 0 <= chance < 1):
        return None
    return (acc - chance) / (1.0 - chance)


RETRIEVAL_ACC_CORRECTED = "responsiveness.retrieval_acc (chance-corrected)"
DERIVED = {RETRIEVAL_ACC_CORRECTED: _retrieval_acc_corrected}
"""Series the rules read that the scorer does not store, computed per step from it."""


class History:
    """A run's metric series, sorted by step, with one :class:`Track` per metric."""

    def __init__(self, series: Series) -> None:
        self.steps: list[int] = sorted(int(s) for s in series)
        self.rows: list[Mapping[str, float | None]] = [series[s] for s in self.steps]
        self._tracks: dict[str, Track] = {}

    def __len__(self) -> int:
        return len(self.steps)

    def track(self, name: str) -> Track:
        """The metric's defined values (non-finite values and None are left out)."""
        found = self._tracks.get(name)
        if found is None:
            positions, steps, values = [], [], []
            derive = DERIVED.get(name)
            for i, row in enumerate(self.rows):
                v = derive(row) if derive is not None else row.get(name)
                if v is not None and math.isfinite(v):
                    positions.append(i)
                    steps.append(self.steps[i])
                    values.append(float(v))
            found = self._tracks[name] = Track(positions, steps, values)
        return found

    def value(self, name: str, i: int) -> float | None:
        """The metric at position ``i``; None when missing, None or non-finite."""
        v = self.rows[i].get(name)
        if v is None or not math.isfinite(v):
            return None
        return float(v)

    def nonfinite_names(self, i: int) -> list[str]:
        """Names of the metrics whose value at position ``i`` is NaN or ±Inf."""
        return sorted(
            k for k, v in self.rows[i].items() if isinstance(v, float) and not math.isfinite(v)
        )

"""Callbacks of the reference trainer.

The trainer calls the SDK's training hook protocol
(:class:`collapsewatch.sdk.hook.TrainingHook`): after every step
``on_step_end(step, rollouts, cross_scores, metrics)`` with the step's rollouts in the
wire format, the step's cross-score matrix when it was computed (else None) and the
step's trainer metrics (name → float); at the end ``on_train_end()``. Callbacks must not
raise into the training loop: the trainer logs and skips a callback that does.

* :class:`collapsewatch.sdk.hook.CollapsewatchHook` streams to a collapsewatch server
  (the hook any training loop can use).
* :class:`CSVCallback` writes the per-step metrics to a CSV file (for curves).

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collapsewatch.schema import CrossScores, Rollout
from collapsewatch.sdk.hook import CollapsewatchHook, TrainingHook

__all__ = ["CSVCallback", "CollapsewatchHook", "TrainingHook"]


class CSVCallback:
    """Writes one CSV row per step: ``step`` then the metrics, columns fixed by the
    first step (later new names are ignored, missing ones left empty)."""

    def __init__(self, path: str | Path, columns: Sequence[str] | None = None) -> None:
        self.path = Path(path)
        self.columns = list(columns) if columns is not None else None
        self._file: Any = None
        self._writer: Any = None

    def on_step_end(
        self,
        step: int,
        rollouts: list[Rollout],
        cross_scores: CrossScores | None,
        metrics: dict[str, float],
    ) -> None:
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.columns is None:
                self.columns = sorted(metrics)
            self._file = self.path.open("w", newline="")
            self._writer = csv.writer(self._file)
            self._writer.writerow(["step", *self.columns])
        row: list[Any] = [step]
        for name in self.columns or []:
            value = metrics.get(name)
            row.append("" if value is None or not math.isfinite(value) else f"{value:.6g}")
        self._writer.writerow(row)
        self._file.flush()

    def on_train_end(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            self._writer = None

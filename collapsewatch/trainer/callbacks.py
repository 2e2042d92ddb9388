"""The trainer's streaming hook: a small protocol any training loop can call.

After every step the trainer calls ``on_step_end(step, rollouts, cross_scores,
metrics)`` on each callback with the step's rollouts in the wire format
(:class:`collapsewatch.schema.Rollout`), the step's cross-score matrix when it was
computed (:class:`collapsewatch.schema.CrossScores`, else None) and the step's trainer
metrics (name → float); at the end it calls ``on_train_end()``. Callbacks must not
raise into the training loop: the trainer logs and skips a callback that does.

* :class:`CollapsewatchCallback` forwards to a ``collapsewatch.Client``.
* :class:`CSVCallback` writes the per-step metrics to a CSV file (for curves).

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from collapsewatch.schema import CrossScores, Rollout


@runtime_checkable
class TrainerCallback(Protocol):
    """What the trainer calls. Both methods are required; make them cheap."""

    def on_step_end(
        self,
        step: int,
        rollouts: list[Rollout],
        cross_scores: CrossScores | None,
        metrics: dict[str, float],
    ) -> None: ...

    def on_train_end(self) -> None: ...


class CollapsewatchCallback:
    """Streams each step to a collapsewatch server through a client.

    ``client`` is duck-typed like ``collapsewatch.Client``: ``log_rollouts(step,
    rollouts)`` and ``complete_step(step)`` are used; ``log_cross_scores(cross_scores)``
    is used when the client has it (older clients do not, and the cross-scores are then
    dropped and counted in ``cross_scores_dropped``); ``flush()`` / ``close()`` at the
    end when present and ``close_client`` is true.
    """

    def __init__(self, client: Any, close_client: bool = False) -> None:
        self.client = client
        self.close_client = close_client
        self.cross_scores_sent = 0
        self.cross_scores_dropped = 0

    def on_step_end(
        self,
        step: int,
        rollouts: list[Rollout],
        cross_scores: CrossScores | None,
        metrics: dict[str, float],
    ) -> None:
        self.client.log_rollouts(step, rollouts)
        if cross_scores is not None:
            log_cross_scores = getattr(self.client, "log_cross_scores", None)
            if callable(log_cross_scores):
                log_cross_scores(cross_scores)
                self.cross_scores_sent += 1
            else:
                self.cross_scores_dropped += 1
        self.client.complete_step(step)

    def on_train_end(self) -> None:
        flush = getattr(self.client, "flush", None)
        if callable(flush):
            flush()
        if self.close_client:
            close = getattr(self.client, "close", None)
            if callable(close):
                close()


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

"""Metrics the trainer reports itself (TRL's entropy, verl's clip fraction, ...).

The worker computes the ``diversity.*``, ``responsiveness.*`` and ``correctness.*``
series from rollouts; a trainer knows things the rollouts do not carry (its own token
entropy, clip ratios, KL, gradient norm). Those arrive here, already renamed by the
integrations' alias table (docs/integrations.md), and are stored under the
``trainer.`` prefix so that they never overwrite a metric the worker computes for the
same step.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Annotated

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy.exc import IntegrityError

from collapsewatch.api.deps import RunDep, SessionDep
from collapsewatch.schema import INT32_MAX
from collapsewatch.store import queries

router = APIRouter(prefix="/api/v1/runs/{run_id}", tags=["metrics"])

TRAINER_PREFIX = "trainer."
"""Every trainer-reported metric is stored under this prefix."""
MAX_NAME_CHARS = 128
"""Longest stored name, prefix included (the metric_point.name column)."""
MAX_POINTS_PER_REQUEST = 10_000
"""Most points in one request; the SDK sends far fewer (one step's logs at a time)."""

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")


def stored_name(name: str) -> str:
    """The name a point is stored under: ``name`` itself when it already starts with
    ``trainer.``, else ``trainer.`` + ``name``."""
    return name if name.startswith(TRAINER_PREFIX) else TRAINER_PREFIX + name


class TrainerMetricPoint(BaseModel):
    """One value the trainer logged for one step.

    ``name`` is dotted (letters, digits, ``_``, ``-``, ``.``); it is stored as
    ``trainer.<name>`` (unless it already starts with ``trainer.``), at most 128
    characters in all. ``value`` may be null (undefined) or NaN/±Infinity (JSON
    ``NaN``/``Infinity``): a trainer producing non-finite numbers is what the
    ``nonfinite`` rule reports.
    """

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=0, le=INT32_MAX, description="Training step the value belongs to, >= 0.")
    name: str = Field(min_length=1, description="Metric name, e.g. 'diversity.token_entropy'.")
    value: float | None = Field(description="The value; null where undefined.")

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise ValueError(
                "name must be letters, digits, '_', '-' and '.', starting with a letter, "
                f"digit or '_'; got {name[:80]!r}"
            )
        full = stored_name(name)
        if len(full) > MAX_NAME_CHARS:
            raise ValueError(
                f"stored name {full[:40]!r}... has {len(full)} characters; the limit is "
                f"{MAX_NAME_CHARS} (the '{TRAINER_PREFIX}' prefix included)"
            )
        return name


class TrainerMetricsResult(BaseModel):
    """What a request stored."""

    accepted: int = Field(description="Points stored (a repeated (step, name) counts once).")
    steps: list[int] = Field(description="Steps the points belong to, ascending.")


@router.post("/metrics", response_model=TrainerMetricsResult)
def post_trainer_metrics(
    points: Annotated[
        list[TrainerMetricPoint],
        Body(max_length=MAX_POINTS_PER_REQUEST, description="Points to store."),
    ],
    run: RunDep,
    session: SessionDep,
) -> TrainerMetricsResult:
    """Store metric points the trainer logged, as ``trainer.<name>`` series.

    The body is a JSON list of ``{"step", "name", "value"}`` (at most 10,000). A
    point replaces an earlier one with the same step and name, so resending is
    harmless; within one request the last of a repeated (step, name) wins. The
    whole list is validated first (422 naming the field, e.g. ``["body", 3,
    "name"]``) and stored in one transaction. Read the series back with
    ``GET /api/v1/runs/{run_id}/metrics``.
    """
    by_step: dict[int, dict[str, float | None]] = defaultdict(dict)
    for point in points:
        by_step[point.step][stored_name(point.name)] = point.value
    for attempt in (1, 2):
        try:
            for step, metrics in sorted(by_step.items()):
                queries.write_metric_points(
                    session=session, run_id=run.id, step=step, metrics=metrics, representation=None
                )
            session.commit()
            break
        except IntegrityError:
            # Two requests wrote the same (run, step, name) at once (delete-then-insert
            # raced): the other one's rows are committed now, so replacing them works.
            session.rollback()
            if attempt == 2:
                raise
    return TrainerMetricsResult(
        accepted=sum(len(m) for m in by_step.values()), steps=sorted(by_step)
    )

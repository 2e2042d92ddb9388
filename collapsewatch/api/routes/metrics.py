"""A run's metric series, step status and alerts."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from collapsewatch.api.deps import RunDep, SessionDep
from collapsewatch.schema import INT32_MAX, AlertOut, MetricSeries
from collapsewatch.store import queries

router = APIRouter(prefix="/api/v1/runs/{run_id}", tags=["metrics"])


@router.get("/metrics", response_model=MetricSeries)
def get_metrics(
    run: RunDep,
    session: SessionDep,
    name: Annotated[list[str] | None, Query(description="Metric names (repeatable).")] = None,
    since_step: Annotated[
        int | None, Query(ge=0, le=INT32_MAX, description="Only steps >= this.")
    ] = None,
) -> MetricSeries:
    """Metric points of the run ordered by (name, step). ``value`` is null where the
    metric is undefined for that step."""
    points = queries.metric_series(
        session=session, run_id=run.id, names=name, since_step=since_step
    )
    return MetricSeries(run_id=run.id, run=run.name, points=points)


@router.get("/steps")
def get_steps(run: RunDep, session: SessionDep) -> list[dict[str, Any]]:
    """Per-step state: rollouts received, complete, scored, pending, last error."""
    return queries.step_status(session=session, run_id=run.id)


@router.get("/alerts", response_model=list[AlertOut])
def get_alerts(run: RunDep, session: SessionDep) -> list[AlertOut]:
    """The run's alerts, newest first."""
    return [
        AlertOut(
            id=a.id,
            run_id=a.run_id,
            rule=a.rule,
            severity=a.severity,
            state=a.state,
            step_fired=a.step_fired,
            step_resolved=a.step_resolved,
            message=a.message,
            evidence=a.evidence or {},
            created_at=a.created_at,
        )
        for a in queries.list_alerts(session=session, run_id=run.id)
    ]

"""Read queries of the dashboard (the store module holds the write side and the API's).

Every function takes the session as a keyword argument and, where a run is looked up,
the project scope (``None``: every project), so a dashboard started with
``--project`` never shows another project's run, not even by guessing its id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from collapsewatch.store.models import AlertRow, MetricPointRow, Project, Run, Step, utcnow


@dataclass(frozen=True)
class RunSummary:
    """One row of the runs page."""

    id: int
    project: str
    name: str
    created_at: datetime
    last_step: int | None
    num_steps: int
    num_rollouts: int
    last_rollout_at: datetime | None
    live: bool
    open_alerts: int
    open_rules: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "live" if self.live else "idle"


def _as_utc(value: datetime | str | None) -> datetime | None:
    """A timestamp from an aggregate: SQLite returns MAX() of a timestamp column as
    untyped text, PostgreSQL as an aware datetime."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value


def _scoped(stmt, project: str | None):
    if project is not None:
        stmt = stmt.where(Project.name == project)
    return stmt


def list_run_summaries(
    *,
    session: Session,
    project: str | None = None,
    live_seconds: float = 120.0,
    now: datetime | None = None,
) -> list[RunSummary]:
    """Every run (of ``project``), newest first, with its last step, counts, status
    (live: a rollout arrived within ``live_seconds``) and firing alerts."""
    now = now or utcnow()
    steps = (
        select(
            Step.run_id,
            func.max(Step.step).label("last_step"),
            func.count(Step.id).label("num_steps"),
            func.coalesce(func.sum(Step.num_rollouts), 0).label("num_rollouts"),
            func.max(Step.last_rollout_at).label("last_rollout_at"),
        )
        .where(Step.num_rollouts > 0)
        .group_by(Step.run_id)
        .subquery()
    )
    stmt = _scoped(
        select(
            Run.id,
            Project.name,
            Run.name,
            Run.created_at,
            steps.c.last_step,
            steps.c.num_steps,
            steps.c.num_rollouts,
            steps.c.last_rollout_at,
        )
        .join(Project, Project.id == Run.project_id)
        .outerjoin(steps, steps.c.run_id == Run.id)
        .order_by(Run.created_at.desc(), Run.id.desc()),
        project,
    )
    rows = session.execute(stmt).all()
    firing: dict[int, list[str]] = {}
    alert_stmt = _scoped(
        select(AlertRow.run_id, AlertRow.rule)
        .join(Run, Run.id == AlertRow.run_id)
        .join(Project, Project.id == Run.project_id)
        .where(AlertRow.state == "firing")
        .order_by(AlertRow.run_id, AlertRow.step_fired),
        project,
    )
    for run_id, rule in session.execute(alert_stmt):
        firing.setdefault(run_id, []).append(rule)
    cutoff = now - timedelta(seconds=live_seconds)
    out = []
    for run_id, proj, name, created, last_step, n_steps, n_rollouts, last_at in rows:
        last_at = _as_utc(last_at)
        rules = firing.get(run_id, [])
        out.append(
            RunSummary(
                id=run_id,
                project=proj,
                name=name,
                created_at=created,
                last_step=last_step,
                num_steps=int(n_steps or 0),
                num_rollouts=int(n_rollouts or 0),
                last_rollout_at=last_at,
                live=last_at is not None and last_at >= cutoff,
                open_alerts=len(rules),
                open_rules=sorted(set(rules)),
            )
        )
    return out


@dataclass(frozen=True)
class RunRef:
    """A run as the run page heads it."""

    id: int
    name: str
    project: str
    last_rollout_at: datetime | None


def get_run(*, session: Session, run_id: int, project: str | None = None) -> RunRef | None:
    """The run ``run_id`` if it is in scope, else None."""
    row = session.execute(
        _scoped(
            select(Run.id, Run.name, Project.name)
            .join(Project, Project.id == Run.project_id)
            .where(Run.id == run_id),
            project,
        )
    ).first()
    if row is None:
        return None
    last = session.scalar(
        select(func.max(Step.last_rollout_at)).where(Step.run_id == run_id, Step.num_rollouts > 0)
    )
    return RunRef(id=row[0], name=row[1], project=row[2], last_rollout_at=_as_utc(last))


def list_runs_brief(*, session: Session, project: str | None = None) -> list[tuple[int, str]]:
    """(id, "project / name") of every run in scope, newest first (for pickers)."""
    stmt = _scoped(
        select(Run.id, Project.name, Run.name)
        .join(Project, Project.id == Run.project_id)
        .order_by(Run.created_at.desc(), Run.id.desc()),
        project,
    )
    return [(i, f"{p} / {n}") for i, p, n in session.execute(stmt)]


def metric_rows(
    *, session: Session, run_id: int, names: Sequence[str] | None = None
) -> list[tuple[int, str, float | None]]:
    """(step, name, value) of a run's metric points, ordered by (name, step); value
    None where the metric is undefined at that step."""
    stmt = select(MetricPointRow.step, MetricPointRow.name, MetricPointRow.value).where(
        MetricPointRow.run_id == run_id
    )
    if names:
        stmt = stmt.where(MetricPointRow.name.in_(list(names)))
    stmt = stmt.order_by(MetricPointRow.name, MetricPointRow.step)
    return [(s, n, v) for s, n, v in session.execute(stmt)]


def run_alerts(*, session: Session, run_id: int) -> list[AlertRow]:
    """A run's alerts in the order they fired."""
    return list(
        session.scalars(
            select(AlertRow)
            .where(AlertRow.run_id == run_id)
            .order_by(AlertRow.step_fired, AlertRow.id)
        )
    )


def run_signature(*, session: Session, run_id: int) -> list[str]:
    """A cheap fingerprint of what the run page shows; it changes when a step is
    scored or an alert changes, so a refresh with nothing new redraws nothing."""
    m = session.execute(
        select(func.count(MetricPointRow.id), func.max(MetricPointRow.created_at)).where(
            MetricPointRow.run_id == run_id
        )
    ).one()
    a = session.execute(
        select(
            func.count(AlertRow.id),
            func.max(AlertRow.created_at),
            func.max(AlertRow.resolved_at),
            func.count(AlertRow.step_resolved),
        ).where(AlertRow.run_id == run_id)
    ).one()
    return [str(v) for v in (*m, *a)]


def run_steps(*, session: Session, run_id: int) -> list[int]:
    """Steps of a run that hold rollouts, ascending."""
    return list(
        session.scalars(
            select(Step.step)
            .where(Step.run_id == run_id, Step.num_rollouts > 0)
            .order_by(Step.step)
        )
    )


def step_metrics(*, session: Session, run_id: int, step: int) -> dict[str, float | None]:
    """The metric values of one step, by name."""
    return dict(
        session.execute(
            select(MetricPointRow.name, MetricPointRow.value)
            .where(MetricPointRow.run_id == run_id, MetricPointRow.step == step)
            .order_by(MetricPointRow.name)
        ).all()
    )


def metric_names(*, session: Session, run_ids: Sequence[int]) -> list[str]:
    """Metric names that any of these runs has, sorted."""
    if not run_ids:
        return []
    return list(
        session.scalars(
            select(MetricPointRow.name)
            .where(MetricPointRow.run_id.in_(list(run_ids)))
            .distinct()
            .order_by(MetricPointRow.name)
        )
    )


def compare_rows(
    *, session: Session, run_ids: Sequence[int], name: str, project: str | None = None
) -> list[tuple[int, int, float | None]]:
    """(run_id, step, value) of one metric across runs in scope, by run then step."""
    if not run_ids:
        return []
    stmt = _scoped(
        select(MetricPointRow.run_id, MetricPointRow.step, MetricPointRow.value)
        .join(Run, Run.id == MetricPointRow.run_id)
        .join(Project, Project.id == Run.project_id)
        .where(MetricPointRow.run_id.in_(list(run_ids)), MetricPointRow.name == name)
        .order_by(MetricPointRow.run_id, MetricPointRow.step),
        project,
    )
    return [(r, s, v) for r, s, v in session.execute(stmt)]

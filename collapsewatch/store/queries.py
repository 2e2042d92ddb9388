"""Query functions over the store. Each takes the session as a keyword argument.

Bulk writes go through one inserter per table (``INSERT … ON CONFLICT``, executed as
multi-row VALUES by SQLAlchemy's insertmanyvalues), never a loop of ``session.add``. On
PostgreSQL, rollouts and turns take a faster path (one JSON parameter and binary COPY,
see :func:`_insert_rollouts_postgres`): benchmarks/ingestion.py measures it against raw
COPY.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import Insert, and_, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, aliased

from collapsewatch.schema import CrossScores, IngestResult, MetricPoint, Rollout, RunOut, Turn
from collapsewatch.store.models import (
    AlertRow,
    CrossScoreRow,
    MetricPointRow,
    Project,
    RolloutRow,
    Run,
    Step,
    TurnRow,
    utcnow,
)


def _insert(session: Session, table: Any) -> Insert:
    """A dialect-specific INSERT that supports ON CONFLICT (PostgreSQL or SQLite)."""
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect: {name}")


# -- runs -----------------------------------------------------------------------------


def get_or_create_run(
    *, session: Session, project: Project, name: str, config: dict[str, Any], tags: list[str]
) -> tuple[Run, bool]:
    """The run ``name`` of ``project``, created if missing; returns (run, created).

    A concurrent create of the same name is resolved by the unique constraint: the
    loser reads the winner's row. An existing run keeps its first config and tags.
    """
    stmt = (
        _insert(session, Run)
        .values(
            project_id=project.id,
            name=name,
            config=config,
            tags=tags,
            created_at=utcnow(),
            updated_at=utcnow(),
        )
        .on_conflict_do_nothing(index_elements=["project_id", "name"])
        .returning(Run.id)
    )
    created_id = session.execute(stmt).scalar_one_or_none()
    run = session.scalar(select(Run).where(Run.project_id == project.id, Run.name == name))
    assert run is not None
    return run, created_id is not None


def get_run(*, session: Session, project: Project, run_id: int) -> Run | None:
    """The run with ``run_id`` if it belongs to ``project`` (else None: no leaking ids)."""
    return session.scalar(select(Run).where(Run.id == run_id, Run.project_id == project.id))


def list_runs(*, session: Session, project: Project, name: str | None = None) -> list[RunOut]:
    """The project's runs, newest first, with rollout and step counts and the last step."""

    # Counted per run (correlated subqueries), so only this project's steps are read,
    # through the (run_id, step) index, instead of aggregating the whole step table.
    def per_run(column: Any) -> Any:
        return select(column).where(Step.run_id == Run.id, Step.num_rollouts > 0).scalar_subquery()

    stmt = (
        select(
            Run,
            per_run(func.coalesce(func.sum(Step.num_rollouts), 0)),
            per_run(func.count(Step.id)),
            per_run(func.max(Step.step)),
        )
        .where(Run.project_id == project.id)
        .order_by(Run.created_at.desc(), Run.id.desc())
    )
    if name is not None:
        stmt = stmt.where(Run.name == name)
    out = []
    for run, n_rollouts, n_steps, last_step in session.execute(stmt):
        out.append(_run_out(run, project, n_rollouts or 0, n_steps or 0, last_step))
    return out


def run_out(*, session: Session, project: Project, run: Run) -> RunOut:
    """One run with its counts."""
    n_rollouts, n_steps, last_step = session.execute(
        select(
            func.coalesce(func.sum(Step.num_rollouts), 0),
            func.count(Step.id),
            func.max(Step.step),
        ).where(Step.run_id == run.id, Step.num_rollouts > 0)
    ).one()
    return _run_out(run, project, n_rollouts, n_steps, last_step)


def _run_out(run: Run, project: Project, n_rollouts: int, n_steps: int, last: int | None) -> RunOut:
    return RunOut(
        id=run.id,
        project=project.name,
        name=run.name,
        config=run.config or {},
        tags=list(run.tags or []),
        created_at=run.created_at,
        num_rollouts=int(n_rollouts),
        num_steps=int(n_steps),
        last_step=last,
    )


# -- ingestion ------------------------------------------------------------------------


def _rollout_row(run_id: int, r: Rollout, now: datetime) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "rollout_id": r.rollout_id,
        "step": r.step,
        "env_id": r.env_id,
        "state_id": r.state_id,
        "reward": r.reward,
        "success": r.success,
        "truncated": r.truncated,
        "num_turns": len(r.turns),
        "metadata": r.metadata,
        "created_at": now,
    }


def _turn_row(rollout_pk: int, t: Turn) -> dict[str, Any]:
    return {
        "rollout_pk": rollout_pk,
        "index": t.index,
        "observation": t.observation,
        "reasoning": t.reasoning,
        "action": t.action,
        "reward": t.reward,
        "done": t.done,
        "token_entropy": t.token_entropy,
        "num_tokens": t.num_tokens,
        "logprob": t.logprob,
        "valid_format": t.valid_format,
    }


# One short statement whatever the batch size, so psycopg parses and prepares it once
# (a multi-row VALUES list is a new statement per batch size, parsed in Python each time).
# The rows travel as one JSON array: json.dumps is C, where psycopg dumps array
# parameters element by element in Python.
_ROLLOUTS_FROM_JSON = """
INSERT INTO rollout (run_id, created_at, rollout_id, step, env_id, state_id, reward, success,
                     truncated, num_turns, metadata)
SELECT %s, %s, r->>0, (r->>1)::int, r->>2, r->>3, (r->>4)::float8, (r->>5)::bool,
       (r->>6)::bool, (r->>7)::int, (r->8)::json
FROM jsonb_array_elements(%s::jsonb) AS r
ON CONFLICT (run_id, rollout_id) DO NOTHING
RETURNING id, rollout_id
"""
# Binary COPY: half the client CPU of the text format (psycopg packs each value in C).
_TURNS_COPY = (
    'COPY turn (rollout_pk, "index", observation, reasoning, action, reward, done, '
    "token_entropy, num_tokens, logprob, valid_format) FROM STDIN (FORMAT BINARY)"
)
_TURN_TYPES = (
    "int8", "int4", "text", "text", "text", "float8", "bool", "float8", "int4", "float8", "bool"
)  # fmt: skip


def _insert_rollouts_postgres(
    session: Session, run_id: int, rollouts: Sequence[Rollout], now: datetime
) -> dict[str, int]:
    """PostgreSQL bulk path: rollouts by one ``INSERT … SELECT FROM
    jsonb_array_elements(…) ON CONFLICT DO NOTHING``, the new rollouts' turns by ``COPY``.
    Both run on the session's connection, in its transaction. Returns {rollout_id:
    primary key} of the new rows."""
    import psycopg

    raw = session.connection().connection.driver_connection
    try:
        return _write_rollouts(raw, run_id, rollouts, now)
    except psycopg.Error as exc:
        # Raised by psycopg directly, not through SQLAlchemy: wrap it as SQLAlchemy would
        # (OperationalError, DataError, ...), so the API's error handlers see one kind.
        raise DBAPIError.instance(_ROLLOUTS_FROM_JSON, None, exc, psycopg.Error) from exc


def _write_rollouts(
    raw: Any, run_id: int, rollouts: Sequence[Rollout], now: datetime
) -> dict[str, int]:
    with raw.cursor() as cur:
        rows = [
            (
                r.rollout_id,
                r.step,
                r.env_id,
                r.state_id,
                # JSON has no NaN/Infinity; float8 reads them from text ('nan', 'inf').
                r.reward if math.isfinite(r.reward) else str(r.reward),
                r.success,
                r.truncated,
                len(r.turns),
                r.metadata,
            )
            for r in rollouts
        ]
        cur.execute(_ROLLOUTS_FROM_JSON, (run_id, now, json.dumps(rows)))
        inserted = {rid: pk for pk, rid in cur.fetchall()}
        if inserted:
            with cur.copy(_TURNS_COPY) as copy:
                copy.set_types(_TURN_TYPES)
                for r in rollouts:
                    pk = inserted.get(r.rollout_id)
                    if pk is None:
                        continue
                    for t in r.turns:
                        copy.write_row(
                            (
                                pk,
                                t.index,
                                t.observation,
                                t.reasoning,
                                t.action,
                                t.reward,
                                t.done,
                                t.token_entropy,
                                t.num_tokens,
                                t.logprob,
                                t.valid_format,
                            )
                        )
    return inserted


_step_upserts: dict[str, Insert] = {}


def _step_upsert(session: Session) -> Insert:
    """The step row upsert of an ingest (new rollouts: add to the count, mark dirty).

    Built once per dialect: building it costs more than executing it from SQLAlchemy's
    compiled cache, on every batch.
    """
    name = session.get_bind().dialect.name
    stmt = _step_upserts.get(name)
    if stmt is None:
        ins = _insert(session, Step.__table__)
        stmt = _step_upserts[name] = ins.on_conflict_do_update(
            index_elements=["run_id", "step"],
            set_={
                "dirty": True,
                "last_rollout_at": ins.excluded.last_rollout_at,
                "num_rollouts": Step.__table__.c.num_rollouts + ins.excluded.num_rollouts,
            },
        )
    return stmt


def ingest_rollouts(
    *,
    session: Session,
    run: Run,
    rollouts: Sequence[Rollout],
    complete_steps: Iterable[int] = (),
    now: datetime | None = None,
) -> IngestResult:
    """Store a batch of rollouts and their turns; skip rollout ids already stored.

    Idempotent on (run, rollout_id): a retried batch inserts nothing twice. Steps that
    received new rollouts are marked dirty (to be scored), and steps in
    ``complete_steps`` are marked complete. Runs in the caller's transaction.
    """
    now = now or utcnow()
    inserted: dict[str, int] = {}
    if rollouts and session.get_bind().dialect.name == "postgresql":
        inserted = _insert_rollouts_postgres(session, run.id, rollouts, now)
    elif rollouts:
        rows = [_rollout_row(run.id, r, now) for r in rollouts]
        # The ORM attribute is ``metadata_``; the column is "metadata".
        stmt = (
            _insert(session, RolloutRow.__table__)
            .on_conflict_do_nothing(index_elements=["run_id", "rollout_id"])
            .returning(RolloutRow.__table__.c.id, RolloutRow.__table__.c.rollout_id)
        )
        for pk, rid in session.execute(stmt, rows):
            inserted[rid] = pk
        turn_rows = [
            _turn_row(inserted[r.rollout_id], t)
            for r in rollouts
            if r.rollout_id in inserted
            for t in r.turns
        ]
        if turn_rows:
            session.execute(_insert(session, TurnRow.__table__), turn_rows)

    new_per_step: dict[int, int] = {}
    for r in rollouts:
        if r.rollout_id in inserted:
            new_per_step[r.step] = new_per_step.get(r.step, 0) + 1
    if new_per_step:
        session.execute(
            _step_upsert(session),
            [
                {
                    "run_id": run.id,
                    "step": s,
                    "num_rollouts": n,
                    "dirty": True,
                    "last_rollout_at": now,
                    "score_count": 0,
                }
                for s, n in sorted(new_per_step.items())
            ],
        )
    complete = sorted(set(complete_steps))
    if complete:
        mark_steps_complete(session=session, run=run, steps=complete, now=now)
    if inserted:
        session.execute(update(Run).where(Run.id == run.id).values(updated_at=now))

    duplicates = [r.rollout_id for r in rollouts if r.rollout_id not in inserted]
    return IngestResult(
        accepted=len(inserted),
        duplicates=len(duplicates),
        duplicate_rollout_ids=duplicates[:100],
        steps=sorted({r.step for r in rollouts} | set(complete)),
    )


def mark_steps_complete(
    *, session: Session, run: Run, steps: Sequence[int], now: datetime | None = None
) -> None:
    """Mark steps as fully sent, so the worker scores them without waiting."""
    now = now or utcnow()
    ins = _insert(session, Step.__table__)
    stmt = ins.on_conflict_do_update(
        index_elements=["run_id", "step"], set_={"completed_at": ins.excluded.completed_at}
    )
    session.execute(
        stmt,
        [
            {
                "run_id": run.id,
                "step": s,
                "num_rollouts": 0,
                "dirty": False,
                "completed_at": now,
                "last_rollout_at": now,
                "score_count": 0,
            }
            for s in steps
        ],
    )


def store_cross_scores(
    *, session: Session, run: Run, cross_scores: CrossScores, now: datetime | None = None
) -> None:
    """Store (or replace) a step's cross-score matrix and mark the step for rescoring.

    The matrix may arrive before or after the step's rollouts; scoring aligns it with
    the rollouts by id.
    """
    now = now or utcnow()
    matrix = np.asarray(cross_scores.logprob_sum, dtype="<f8")
    values = {
        "run_id": run.id,
        "step": cross_scores.step,
        "rollout_ids": cross_scores.rollout_ids,
        "state_ids": cross_scores.state_ids,
        "num_tokens": cross_scores.num_tokens,
        "logprob_sum": matrix.tobytes(),
        "created_at": now,
    }
    ins = _insert(session, CrossScoreRow.__table__)
    session.execute(
        ins.values(values).on_conflict_do_update(
            index_elements=["run_id", "step"],
            set_={
                k: ins.excluded[k]
                for k in ("rollout_ids", "state_ids", "num_tokens", "logprob_sum", "created_at")
            },
        )
    )
    ins = _insert(session, Step.__table__)
    session.execute(
        ins.values(
            run_id=run.id,
            step=cross_scores.step,
            num_rollouts=0,
            dirty=True,
            last_rollout_at=now,
            score_count=0,
        ).on_conflict_do_update(index_elements=["run_id", "step"], set_={"dirty": True})
    )


def load_cross_scores(*, session: Session, run_id: int, step: int) -> CrossScores | None:
    """The stored cross-score matrix of (run, step), or None."""
    row = session.scalar(
        select(CrossScoreRow).where(CrossScoreRow.run_id == run_id, CrossScoreRow.step == step)
    )
    if row is None:
        return None
    m, n = len(row.rollout_ids), len(row.state_ids)
    matrix = np.frombuffer(row.logprob_sum, dtype="<f8").reshape(m, n)
    return CrossScores.model_construct(
        step=step,
        rollout_ids=list(row.rollout_ids),
        state_ids=list(row.state_ids),
        logprob_sum=matrix.tolist(),
        num_tokens=list(row.num_tokens),
    )


# -- worker: claims -------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """A worker's lease on one (run, step); ``token`` fences its final write."""

    step_pk: int
    run_id: int
    step: int
    token: str


def _ready_clause(now: datetime, idle_seconds: float) -> Any:
    newer = aliased(Step)
    # "A newer step of the run has rollouts", as a comparison with the run's newest such
    # step: PostgreSQL reads that max() from the (run_id, step) index backwards, where it
    # planned EXISTS (… step > this step …) as a scan of the whole step table
    # (benchmarks/growth.py).
    newest = (
        select(func.max(newer.step))
        .where(newer.run_id == Step.run_id, newer.num_rollouts > 0)
        .scalar_subquery()
    )
    has_newer = Step.step < newest
    unclaimed = or_(Step.claim_token.is_(None), Step.claim_expires_at < now)
    settled = or_(
        Step.completed_at.is_not(None),
        Step.last_rollout_at < now - timedelta(seconds=idle_seconds),
        has_newer,
    )
    abandoned = and_(Step.claim_token.is_not(None), Step.claim_expires_at < now)
    return or_(and_(Step.dirty.is_(True), unclaimed, settled), abandoned)


def claim_step(
    *,
    session: Session,
    worker_id: str,
    token: str,
    idle_seconds: float,
    lease_seconds: float,
    now: datetime | None = None,
) -> Claim | None:
    """Claim one step that is ready to score, or return None.

    Ready: new rollouts since the last scoring, and the step is settled (marked
    complete, idle for ``idle_seconds``, or a newer step of the run has rollouts); or
    a claim whose lease expired (its worker died). On PostgreSQL the candidate row is
    locked with ``FOR UPDATE SKIP LOCKED`` so concurrent workers pick different steps;
    the conditional UPDATE makes the claim safe on SQLite too. Commits.
    """
    now = now or utcnow()
    ready = _ready_clause(now, idle_seconds)
    candidate = session.execute(
        select(Step.id, Step.run_id, Step.step)
        .where(ready)
        .order_by(Step.run_id, Step.step)
        .limit(1)
        .with_for_update(skip_locked=True, of=Step)
    ).first()
    if candidate is None:
        session.rollback()
        return None
    step_pk, run_id, step = candidate
    result = session.execute(
        update(Step)
        .where(Step.id == step_pk, ready)
        .values(
            claim_token=token,
            claimed_by=worker_id,
            dirty=False,
            claim_expires_at=now + timedelta(seconds=lease_seconds),
        )
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        session.rollback()
        return None
    session.commit()
    return Claim(step_pk=step_pk, run_id=run_id, step=step, token=token)


def load_step_rollouts(*, session: Session, run_id: int, step: int) -> list[Rollout]:
    """All rollouts of (run, step) with their turns, in arrival order."""
    rows = (
        session.execute(
            select(RolloutRow)
            .where(RolloutRow.run_id == run_id, RolloutRow.step == step)
            .order_by(RolloutRow.id)
        )
        .scalars()
        .all()
    )
    if not rows:
        return []
    turns: dict[int, list[Turn]] = {r.id: [] for r in rows}
    pks = list(turns)
    for chunk_start in range(0, len(pks), 5000):
        chunk = pks[chunk_start : chunk_start + 5000]
        for t in session.execute(
            select(TurnRow)
            .where(TurnRow.rollout_pk.in_(chunk))
            .order_by(TurnRow.rollout_pk, TurnRow.index)
        ).scalars():
            turns[t.rollout_pk].append(
                Turn.model_construct(
                    index=t.index,
                    observation=t.observation,
                    reasoning=t.reasoning,
                    action=t.action,
                    reward=t.reward,
                    done=t.done,
                    token_entropy=t.token_entropy,
                    num_tokens=t.num_tokens,
                    logprob=t.logprob,
                    valid_format=t.valid_format,
                )
            )
    return [
        Rollout.model_construct(
            rollout_id=r.rollout_id,
            step=r.step,
            env_id=r.env_id,
            state_id=r.state_id,
            reward=r.reward,
            success=r.success,
            truncated=r.truncated,
            turns=turns[r.id],
            metadata=r.metadata_,
        )
        for r in rows
    ]


def finish_step(
    *,
    session: Session,
    claim: Claim,
    metrics: dict[str, float | None],
    representation: str | None,
    now: datetime | None = None,
    commit: bool = True,
    error: str | None = None,
) -> bool:
    """Write a step's metric points and release the claim, if the claim still holds.

    Returns False (and writes nothing) when another worker took the claim over after
    this one's lease expired: the fencing token no longer matches. Commits unless
    ``commit`` is False (the worker then evaluates alerts in the same transaction).
    """
    now = now or utcnow()
    released = session.execute(
        update(Step)
        .where(Step.id == claim.step_pk, Step.claim_token == claim.token)
        .values(
            claim_token=None,
            claimed_by=None,
            claim_expires_at=None,
            scored_at=now,
            score_count=Step.score_count + 1,
            last_error=error[:2000] if error else None,
        )
        .execution_options(synchronize_session=False)
    )
    if released.rowcount != 1:
        session.rollback()
        return False
    write_metric_points(
        session=session,
        run_id=claim.run_id,
        step=claim.step,
        metrics=metrics,
        representation=representation,
        now=now,
    )
    if commit:
        session.commit()
    return True


def fail_step(*, session: Session, claim: Claim, error: str) -> None:
    """Release a claim whose scoring raised; the step waits for new rollouts. Commits."""
    session.execute(
        update(Step)
        .where(Step.id == claim.step_pk, Step.claim_token == claim.token)
        .values(claim_token=None, claimed_by=None, claim_expires_at=None, last_error=error[:2000])
        .execution_options(synchronize_session=False)
    )
    session.commit()


# -- metrics --------------------------------------------------------------------------


def write_metric_points(
    *,
    session: Session,
    run_id: int,
    step: int,
    metrics: dict[str, float | None],
    representation: str | None,
    now: datetime | None = None,
) -> None:
    """Set the named metric points of (run, step) to ``metrics`` (other names stay).

    An upsert (``ON CONFLICT DO UPDATE``), so two workers writing the same point at
    once (the series-derived metrics of neighbouring steps) both succeed.
    """
    if not metrics:
        return
    now = now or utcnow()
    ins = _insert(session, MetricPointRow.__table__)
    session.execute(
        ins.on_conflict_do_update(
            index_elements=["run_id", "step", "name"],
            set_={
                "value": ins.excluded.value,
                "representation": ins.excluded.representation,
                "created_at": ins.excluded.created_at,
            },
        ),
        [
            {
                "run_id": run_id,
                "step": step,
                "name": name,
                "value": value,
                "representation": representation,
                "created_at": now,
            }
            for name, value in metrics.items()
        ],
    )


def metric_series(
    *,
    session: Session,
    run_id: int,
    names: Sequence[str] | None = None,
    since_step: int | None = None,
) -> list[MetricPoint]:
    """A run's metric points ordered by (name, step); optionally some names, from a step."""
    stmt = select(
        MetricPointRow.step,
        MetricPointRow.name,
        MetricPointRow.value,
        MetricPointRow.representation,
    ).where(MetricPointRow.run_id == run_id)
    if names:
        stmt = stmt.where(MetricPointRow.name.in_(list(names)))
    if since_step is not None:
        stmt = stmt.where(MetricPointRow.step >= since_step)
    stmt = stmt.order_by(MetricPointRow.name, MetricPointRow.step)
    # JSON has no NaN/Inf: a non-finite value (a trainer's NaN loss) reads as null here;
    # the nonfinite detector reads the stored value and raises the alert that names it.
    return [
        MetricPoint(
            step=s,
            name=n,
            value=v if v is None or math.isfinite(v) else None,
            representation=rep,
        )
        for s, n, v, rep in session.execute(stmt)
    ]


def step_status(*, session: Session, run_id: int) -> list[dict[str, Any]]:
    """Per-step ingestion and scoring state of a run, ordered by step."""
    rows = session.execute(select(Step).where(Step.run_id == run_id).order_by(Step.step)).scalars()
    return [
        {
            "step": s.step,
            "num_rollouts": s.num_rollouts,
            "complete": s.completed_at is not None,
            "scored": s.scored_at is not None and not s.dirty and s.claim_token is None,
            "scored_at": s.scored_at,
            "pending": s.dirty or s.claim_token is not None,
            "score_count": s.score_count,
            "last_error": s.last_error,
        }
        for s in rows
    ]


def list_alerts(*, session: Session, run_id: int) -> list[AlertRow]:
    """A run's alerts, newest first."""
    return list(
        session.execute(
            select(AlertRow)
            .where(AlertRow.run_id == run_id)
            .order_by(AlertRow.created_at.desc(), AlertRow.id.desc())
        ).scalars()
    )


# -- alerts ---------------------------------------------------------------------------


def settled_last_step(*, session: Session, run_id: int) -> int | None:
    """The last step of the run's settled prefix: it and every earlier step with
    rollouts are scored and not waiting for a rescore (None if no step is)."""
    last = None
    for step, num_rollouts, dirty, token, scored_at in session.execute(
        select(Step.step, Step.num_rollouts, Step.dirty, Step.claim_token, Step.scored_at)
        .where(Step.run_id == run_id)
        .order_by(Step.step)
    ):
        if num_rollouts == 0:
            continue
        if dirty or token is not None or scored_at is None:
            break
        last = step
    return last


def settled_series(*, session: Session, run_id: int) -> dict[int, dict[str, float | None]]:
    """The run's metrics for its settled prefix of steps: ``{step: {name: value}}``.

    Detectors read only this prefix (:func:`settled_last_step`), so they never evaluate a
    step before the steps that come before it (several workers may score out of order).
    """
    last = settled_last_step(session=session, run_id=run_id)
    if last is None:
        return {}
    series: dict[int, dict[str, float | None]] = {}
    for step, name, value in session.execute(
        select(MetricPointRow.step, MetricPointRow.name, MetricPointRow.value).where(
            MetricPointRow.run_id == run_id, MetricPointRow.step <= last
        )
    ):
        series.setdefault(step, {})[name] = value
    return series


@dataclass(frozen=True)
class AlertChange:
    """A stored alert's state change that sinks must hear about."""

    alert_id: int
    transition: str
    rule: str
    step: int


def record_alert_events(
    *, session: Session, run_id: int, events: Iterable[Any], now: datetime | None = None
) -> list[AlertChange]:
    """Store replayed alert events; return only the changes not stored before.

    ``events`` are :class:`collapsewatch.detect.AlertEvent` in replay order (a firing
    event, then possibly its resolve, per rule). Replaying the same series again changes
    nothing: a firing event inserts with ``ON CONFLICT DO NOTHING`` on (run, rule,
    step_fired), and a resolve updates only an alert still firing. Does not commit.
    """
    now = now or utcnow()
    changes: list[AlertChange] = []
    open_episode: dict[str, int] = {}
    for ev in events:
        if ev.state == "firing":
            open_episode[ev.rule] = ev.step
            stmt = (
                _insert(session, AlertRow.__table__)
                .values(
                    run_id=run_id,
                    rule=ev.rule,
                    severity=ev.severity,
                    state="firing",
                    step_fired=ev.step,
                    message=ev.message,
                    evidence=ev.evidence,
                    created_at=now,
                )
                .on_conflict_do_nothing(index_elements=["run_id", "rule", "step_fired"])
                .returning(AlertRow.__table__.c.id)
            )
            alert_id = session.execute(stmt).scalar_one_or_none()
            if alert_id is not None:
                changes.append(AlertChange(alert_id, "firing", ev.rule, ev.step))
        elif ev.state == "resolved" and ev.rule in open_episode:
            fired = open_episode.pop(ev.rule)
            alert_id = session.execute(
                update(AlertRow)
                .where(
                    AlertRow.run_id == run_id,
                    AlertRow.rule == ev.rule,
                    AlertRow.step_fired == fired,
                    AlertRow.state == "firing",
                )
                .values(state="resolved", step_resolved=ev.step, resolved_at=now)
                .returning(AlertRow.id)
                .execution_options(synchronize_session=False)
            ).scalar_one_or_none()
            if alert_id is not None:
                changes.append(AlertChange(alert_id, "resolved", ev.rule, ev.step))
    return changes


def add_alert_evidence(*, session: Session, alert_id: int, extra: dict[str, Any]) -> None:
    """Merge ``extra`` into an alert's evidence (e.g. example rollouts)."""
    alert = session.get(AlertRow, alert_id)
    if alert is not None:
        alert.evidence = {**(alert.evidence or {}), **extra}


def detector_overrides(*, session: Session, run_id: int) -> dict[str, Any]:
    """The detector-threshold overrides of the run's project (empty if none)."""
    from collapsewatch.store.models import ProjectDetectorOverrides

    row = session.execute(
        select(ProjectDetectorOverrides.overrides)
        .join(Run, Run.project_id == ProjectDetectorOverrides.project_id)
        .where(Run.id == run_id)
    ).scalar_one_or_none()
    return dict(row or {})

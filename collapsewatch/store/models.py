"""SQLAlchemy 2 table models. Alembic (migrations/) owns the schema; these mirror it.

Tables: project, api_key, run, step (the worker's work queue), rollout, turn,
metric_point, alert. Names follow the wire format (collapsewatch.schema).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# BIGINT on PostgreSQL, INTEGER on SQLite (only INTEGER PRIMARY KEY autoincrements there).
BigId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    """Timezone-aware now in UTC; every stored timestamp is UTC."""
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored and returned as UTC on every backend.

    SQLite keeps no offset, so values are normalised to UTC before they are written
    and tagged as UTC when read back.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


class IEEEFloat(TypeDecorator[float]):
    """A double that keeps NaN and ±Inf on every backend.

    PostgreSQL's float8 stores them natively. SQLite turns a bound NaN into NULL, so NaN
    is written as the text 'NaN' (SQLite keeps text that is not a number as text in a
    REAL column) and read back as ``float('nan')``.
    """

    impl = Float
    cache_ok = True

    def bind_processor(self, dialect: Any) -> Any:
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)

        # Replaces the whole chain: Float's own processor would turn 'NaN' back into nan.
        def process(value: float | None) -> Any:
            if value is not None and math.isnan(value):
                return "NaN"
            return value

        return process

    def process_result_value(self, value: Any, dialect: Any) -> float | None:
        if value is None:
            return None
        return float(value)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Project(Base):
    __tablename__ = "project"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ApiKey(Base):
    """A bearer key, stored only as its SHA-256 hash; ``prefix`` lets a user tell keys apart."""

    __tablename__ = "api_key"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(128), default="default")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Run(Base):
    __tablename__ = "run"
    __table_args__ = (UniqueConstraint("project_id", "name", name="uq_run_project_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(256))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    tags: Mapped[list[Any]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Step(Base):
    """One (run, step): the unit of scoring and the worker's work queue.

    ``dirty`` is set by every ingest that adds rollouts and cleared by a claim, so late
    rollouts cause a rescore. A claim is (``claim_token``, ``claim_expires_at``); an
    expired claim may be taken over, and only the holder of the current token may
    write results (fencing), so a step is never scored twice concurrently.
    """

    __tablename__ = "step"
    __table_args__ = (
        UniqueConstraint("run_id", "step", name="uq_step_run_step"),
        Index("ix_step_ready", "dirty", "claim_expires_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    num_rollouts: Mapped[int] = mapped_column(Integer, default=0)
    dirty: Mapped[bool] = mapped_column(Boolean, default=True)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_rollout_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    claim_token: Mapped[str | None] = mapped_column(String(64))
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    claim_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    scored_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    score_count: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)


class RolloutRow(Base):
    __tablename__ = "rollout"
    __table_args__ = (
        UniqueConstraint("run_id", "rollout_id", name="uq_rollout_run_rollout_id"),
        Index("ix_rollout_run_step", "run_id", "step"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    rollout_id: Mapped[str] = mapped_column(String(256))
    step: Mapped[int] = mapped_column(Integer)
    env_id: Mapped[str] = mapped_column(String(256))
    state_id: Mapped[str] = mapped_column(String(256))
    reward: Mapped[float] = mapped_column(IEEEFloat)
    success: Mapped[bool | None] = mapped_column(Boolean)
    truncated: Mapped[bool | None] = mapped_column(Boolean)
    num_turns: Mapped[int] = mapped_column(Integer)
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TurnRow(Base):
    __tablename__ = "turn"
    __table_args__ = (UniqueConstraint("rollout_pk", "index", name="uq_turn_rollout_index"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    rollout_pk: Mapped[int] = mapped_column(ForeignKey("rollout.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    observation: Mapped[str] = mapped_column(Text, default="")
    reasoning: Mapped[str] = mapped_column(Text, default="")
    action: Mapped[str] = mapped_column(Text, default="")
    reward: Mapped[float] = mapped_column(IEEEFloat, default=0.0)
    done: Mapped[bool] = mapped_column(Boolean, default=False)
    token_entropy: Mapped[float | None] = mapped_column(IEEEFloat)
    num_tokens: Mapped[int | None] = mapped_column(Integer)
    logprob: Mapped[float | None] = mapped_column(IEEEFloat)
    valid_format: Mapped[bool | None] = mapped_column(Boolean)


class MetricPointRow(Base):
    """A metric value of one step; ``value`` NULL means undefined for that step."""

    __tablename__ = "metric_point"
    __table_args__ = (
        UniqueConstraint("run_id", "step", "name", name="uq_metric_point_run_step_name"),
        Index("ix_metric_point_run_name_step", "run_id", "name", "step"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(128))
    value: Mapped[float | None] = mapped_column(IEEEFloat)
    representation: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CrossScoreRow(Base):
    """A step's cross-score matrix (see :class:`collapsewatch.schema.CrossScores`).

    The M×N matrix is stored as little-endian float64 bytes (row-major), which keeps
    NaN/Inf and is ~8 bytes per entry instead of JSON text.
    """

    __tablename__ = "cross_score"
    __table_args__ = (UniqueConstraint("run_id", "step", name="uq_cross_score_run_step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    rollout_ids: Mapped[list[Any]] = mapped_column(JSON)
    state_ids: Mapped[list[Any]] = mapped_column(JSON)
    num_tokens: Mapped[list[Any]] = mapped_column(JSON)
    logprob_sum: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AlertRow(Base):
    """One episode of trouble: fired at ``step_fired``, resolved at ``step_resolved``.

    Unique per (run, rule, step_fired), so two workers replaying the same series
    cannot store the same alert twice.
    """

    __tablename__ = "alert"
    __table_args__ = (
        Index("ix_alert_run_rule", "run_id", "rule"),
        UniqueConstraint("run_id", "rule", "step_fired", name="uq_alert_run_rule_step"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    rule: Mapped[str] = mapped_column(String(64))
    severity: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    step_fired: Mapped[int] = mapped_column(Integer)
    step_resolved: Mapped[int | None] = mapped_column(Integer)
    message: Mapped[str] = mapped_column(Text, default="")
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


# -- alert delivery (migration 0003) ---------------------------------------------------


class AlertSinkRow(Base):
    """A place a project's alerts are sent: a Slack incoming webhook or a signed webhook.

    ``secret`` is the ``whsec_…`` signing secret of a webhook sink (never returned by the
    API after creation). ``rules`` (null: every rule) and ``min_severity`` filter which
    alerts reach the sink.
    """

    __tablename__ = "alert_sink"
    __table_args__ = (UniqueConstraint("project_id", "name", name="uq_alert_sink_project_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[str | None] = mapped_column(Text)
    rules: Mapped[list[Any] | None] = mapped_column(JSON)
    min_severity: Mapped[str] = mapped_column(String(16), default="warning")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ProjectDetectorOverrides(Base):
    """Per-project overrides of detector thresholds: ``{DetectorSettings field: number}``."""

    __tablename__ = "project_detector_overrides"

    project_id: Mapped[int] = mapped_column(
        ForeignKey("project.id", ondelete="CASCADE"), primary_key=True
    )
    overrides: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AlertDeliveryRow(Base):
    """The outbox: one message for one alert state change to one sink.

    ``idempotency_key`` is the webhook-id the receiver sees; it is derived from
    (alert, transition, sink) and unique, so enqueuing a state change twice stores one
    row and sends one message. ``sink_key`` names the sink: ``sink:<id>`` for a sink
    configured through the API, ``env:slack`` / ``env:webhook`` for one from settings.
    ``payload`` is the notification as it was when the state changed, so retries send
    the same body.
    """

    __tablename__ = "alert_delivery"
    __table_args__ = (
        UniqueConstraint("idempotency_key", name="uq_alert_delivery_idempotency_key"),
        Index("ix_alert_delivery_due", "status", "next_attempt_at"),
        Index("ix_alert_delivery_alert", "alert_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alert.id", ondelete="CASCADE"))
    transition: Mapped[str] = mapped_column(String(16))
    sink_key: Mapped[str] = mapped_column(String(64))
    sink_id: Mapped[int | None] = mapped_column(
        ForeignKey("alert_sink.id", ondelete="SET NULL"), nullable=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    idempotency_key: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class AlertDeliveryAttemptRow(Base):
    """The delivery log: one row per HTTP attempt of a delivery, whatever its outcome."""

    __tablename__ = "alert_delivery_attempt"
    __table_args__ = (Index("ix_alert_delivery_attempt_delivery", "delivery_id", "attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    delivery_id: Mapped[int] = mapped_column(ForeignKey("alert_delivery.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    status_code: Mapped[int | None] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)

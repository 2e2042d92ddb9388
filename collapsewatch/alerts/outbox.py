"""Alert delivery as an outbox: a row per (alert state change, sink), sent later.

:func:`enqueue` runs in the transaction that stores the alert state change, so a
change is never stored without its deliveries (nor the reverse). :func:`deliver_due`
runs on the worker's loop: it takes due rows under a lease (``FOR UPDATE SKIP LOCKED``
on PostgreSQL, so several workers share the outbox), sends each outside any
transaction, and records every attempt in ``alert_delivery_attempt``.

Guarantees: one row, hence one message id, per state change and sink (the
idempotency key is unique); delivery is at least once (a worker that dies after the
receiver answered but before the outcome is stored causes one resend with the same
``webhook-id``, which receivers deduplicate on).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import Insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from collapsewatch.alerts.notification import TRANSITIONS, Notification, build_notification
from collapsewatch.alerts.settings import AlertSettings
from collapsewatch.alerts.sinks import AlertSink, DeliveryResult
from collapsewatch.alerts.slack import SlackSink
from collapsewatch.alerts.webhook import WebhookSink
from collapsewatch.store.models import (
    AlertDeliveryAttemptRow,
    AlertDeliveryRow,
    AlertRow,
    AlertSinkRow,
    Project,
    Run,
    utcnow,
)

log = logging.getLogger("collapsewatch.alerts")

SEVERITY_RANK = {"warning": 1, "critical": 2}
ENV_SLACK = "env:slack"
ENV_WEBHOOK = "env:webhook"


def severity_rank(severity: str) -> int:
    """Order of severities; an unknown one counts as a warning, so it is not lost."""
    return SEVERITY_RANK.get(severity, 1)


@dataclass(frozen=True)
class SinkTarget:
    """A sink an alert goes to: ``key`` is ``sink:<id>`` or ``env:slack|webhook``."""

    key: str
    kind: str
    sink_id: int | None = None


def sink_from_config(
    kind: str, url: str, secret: str | None, *, timeout: float = 10.0
) -> AlertSink:
    """A sink object for a configured (kind, url, secret).

    Raises:
        ValueError: unknown kind, or a webhook without a valid secret.
    """
    if kind == "slack":
        return SlackSink(url, timeout=timeout)
    if kind == "webhook":
        if not secret:
            raise ValueError("a webhook sink needs a signing secret")
        return WebhookSink(url, secret, timeout=timeout)
    raise ValueError(f"unknown sink kind {kind!r}")


def targets_for(session: Session, *, alert: AlertRow, project_id: int, settings: AlertSettings):
    """The sinks ``alert`` goes to: the project's enabled API sinks whose rule filter
    and least severity admit it, and the sinks from settings."""
    rank = severity_rank(alert.severity)
    out: list[SinkTarget] = []
    rows = session.scalars(
        select(AlertSinkRow)
        .where(AlertSinkRow.project_id == project_id, AlertSinkRow.enabled.is_(True))
        .order_by(AlertSinkRow.id)
    )
    for row in rows:
        if row.rules and alert.rule not in row.rules:
            continue
        if rank < severity_rank(row.min_severity):
            continue
        out.append(SinkTarget(key=f"sink:{row.id}", kind=row.kind, sink_id=row.id))
    if rank >= severity_rank(settings.alerts_min_severity):
        if settings.slack_webhook_url:
            out.append(SinkTarget(key=ENV_SLACK, kind="slack"))
        if settings.webhook_url and settings.webhook_secret:
            out.append(SinkTarget(key=ENV_WEBHOOK, kind="webhook"))
    return out


def idempotency_key(alert: AlertRow, transition: str, sink_key: str) -> str:
    """The message id (``webhook-id``) of one state change to one sink: stable across
    retries and enqueues; the alert's creation time keeps it unique across databases."""
    created = alert.created_at.isoformat() if alert.created_at else ""
    raw = f"{alert.id}|{created}|{transition}|{sink_key}".encode()
    return "msg_" + hashlib.sha256(raw).hexdigest()[:40]


def _insert(session: Session, table: Any) -> Insert:
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect: {name}")


def enqueue(
    session: Session,
    *,
    alert_id: int,
    transition: str,
    settings: AlertSettings | None = None,
    now: datetime | None = None,
) -> int:
    """Queue the messages of one alert state change, in the caller's transaction.

    One row per matching sink; enqueuing the same change again adds nothing (the
    idempotency key is unique and the insert is ``ON CONFLICT DO NOTHING``, which
    leaves the caller's transaction usable). Does not commit. Returns the number of
    rows added.

    Raises:
        ValueError: ``transition`` is not "firing" or "resolved", or the alert does not
            exist.
    """
    if transition not in TRANSITIONS:
        raise ValueError(f"transition must be one of {TRANSITIONS}, got {transition!r}")
    settings = settings or AlertSettings()
    now = now or utcnow()
    found = session.execute(
        select(AlertRow, Run.name, Project.id, Project.name)
        .join(Run, Run.id == AlertRow.run_id)
        .join(Project, Project.id == Run.project_id)
        .where(AlertRow.id == alert_id)
    ).first()
    if found is None:
        raise ValueError(f"alert {alert_id} not found")
    alert, run_name, project_id, project_name = found
    targets = targets_for(session, alert=alert, project_id=project_id, settings=settings)
    if not targets:
        return 0
    notification = build_notification(
        alert=alert,
        run_name=run_name,
        project=project_name,
        transition=transition,
        dashboard_url=settings.dashboard_url,
        now=now,
    )
    rows = [
        {
            "alert_id": alert.id,
            "transition": transition,
            "sink_key": t.key,
            "sink_id": t.sink_id,
            "kind": t.kind,
            "idempotency_key": idempotency_key(alert, transition, t.key),
            "payload": notification.to_dict(),
            "status": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        }
        for t in targets
    ]
    stmt = (
        _insert(session, AlertDeliveryRow.__table__)
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
        .returning(AlertDeliveryRow.__table__.c.id)
    )
    added = len(session.execute(stmt, rows).all())
    log.info("alert %s %s: %d deliveries queued", alert_id, transition, added)
    return added


def backoff_seconds(attempts: int, result: DeliveryResult, settings: AlertSettings) -> float:
    """Wait before the next attempt after ``attempts`` failed ones: the receiver's
    Retry-After when it gave one, else base × 2^(attempts − 1); both capped."""
    if result.retry_after is not None:
        return min(result.retry_after, settings.delivery_backoff_max_seconds)
    delay = settings.delivery_backoff_seconds * (2 ** max(0, attempts - 1))
    return min(delay, settings.delivery_backoff_max_seconds)


def _claim(
    factory: sessionmaker[Session], *, now: datetime, limit: int, lease: timedelta
) -> list[int]:
    with factory() as session:
        due = (AlertDeliveryRow.status == "pending") & (AlertDeliveryRow.next_attempt_at <= now)
        ids = list(
            session.scalars(
                select(AlertDeliveryRow.id)
                .where(due)
                .order_by(AlertDeliveryRow.next_attempt_at, AlertDeliveryRow.id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
        )
        claimed = []
        for delivery_id in ids:
            # Conditional, so two SQLite writers (no row locks there) cannot both win.
            res = session.execute(
                update(AlertDeliveryRow)
                .where(AlertDeliveryRow.id == delivery_id, due)
                .values(next_attempt_at=now + lease)
                .execution_options(synchronize_session=False)
            )
            if res.rowcount == 1:
                claimed.append(delivery_id)
        session.commit()
        return claimed


def _resolve_sink(
    session: Session, row: AlertDeliveryRow, settings: AlertSettings
) -> AlertSink | str:
    """The sink object of a delivery, or why there is none any more."""
    timeout = settings.delivery_timeout_seconds
    try:
        if row.sink_key == ENV_SLACK:
            if not settings.slack_webhook_url:
                return "COLLAPSEWATCH_SLACK_WEBHOOK_URL is no longer set"
            return SlackSink(settings.slack_webhook_url, timeout=timeout)
        if row.sink_key == ENV_WEBHOOK:
            if not settings.webhook_url or not settings.webhook_secret:
                return "COLLAPSEWATCH_WEBHOOK_URL is no longer set"
            return WebhookSink(settings.webhook_url, settings.webhook_secret, timeout=timeout)
        sink = session.get(AlertSinkRow, row.sink_id) if row.sink_id is not None else None
        if sink is None:
            return "the sink was deleted"
        if not sink.enabled:
            return "the sink was disabled"
        return sink_from_config(sink.kind, sink.url, sink.secret, timeout=timeout)
    except ValueError as exc:
        return f"sink misconfigured: {exc}"


def _record(
    session: Session,
    row: AlertDeliveryRow,
    result: DeliveryResult,
    *,
    started: datetime,
    base: datetime,
    settings: AlertSettings,
) -> None:
    attempt = row.attempts + 1
    session.add(
        AlertDeliveryAttemptRow(
            delivery_id=row.id,
            attempt=attempt,
            started_at=started,
            duration_ms=result.duration_ms,
            status_code=result.status_code,
            outcome=result.outcome,
            error=result.error,
        )
    )
    row.attempts = attempt
    row.last_status_code = result.status_code
    row.last_error = result.error
    finished = base + timedelta(milliseconds=result.duration_ms)
    if result.outcome == "delivered":
        row.status = "delivered"
        row.delivered_at = finished
    elif result.outcome == "retry" and attempt < settings.delivery_max_attempts:
        row.next_attempt_at = finished + timedelta(
            seconds=backoff_seconds(attempt, result, settings)
        )
    else:
        row.status = "failed"
        log.warning(
            "alert delivery %s (%s) failed after %d attempts: %s",
            row.id,
            row.sink_key,
            attempt,
            result.error,
        )


def deliver_due(
    factory: sessionmaker[Session],
    settings: AlertSettings | None = None,
    *,
    now: datetime | None = None,
    limit: int = 50,
    client: httpx.Client | None = None,
) -> int:
    """Send up to ``limit`` due deliveries; returns how many were attempted.

    ``now`` (default: the clock) decides what is due; tests pass it to step through the
    backoff without sleeping. Never raises for a receiver's failure: that is recorded
    on the delivery and its attempt log.
    """
    settings = settings or AlertSettings()
    now = now or utcnow()
    ids = _claim(
        factory, now=now, limit=limit, lease=timedelta(seconds=settings.delivery_lease_seconds)
    )
    if not ids:
        return 0
    own_client = client is None
    http = client or httpx.Client(follow_redirects=False)
    try:
        for delivery_id in ids:
            with factory() as session:
                row = session.get(AlertDeliveryRow, delivery_id)
                if row is None or row.status != "pending":
                    continue
                sink = _resolve_sink(session, row, settings)
                started = utcnow()
                if isinstance(sink, str):
                    result = DeliveryResult("failed", error=sink)
                else:
                    result = sink.deliver(
                        Notification.from_dict(row.payload),
                        message_id=row.idempotency_key,
                        client=http,
                    )
                # Backoff counts from the later of ``now`` and the clock: a simulated
                # ``now`` in the future (tests) or a long batch (real time) both hold.
                _record(
                    session,
                    row,
                    result,
                    started=started,
                    base=max(now, started),
                    settings=settings,
                )
                session.commit()
    finally:
        if own_client:
            http.close()
    return len(ids)


def list_deliveries(
    session: Session,
    *,
    project_id: int | None = None,
    alert_id: int | None = None,
    status: str | None = None,
    limit: int = 100,
) -> list[AlertDeliveryRow]:
    """Deliveries, newest first, optionally of one project, alert or status."""
    stmt = select(AlertDeliveryRow)
    if project_id is not None:
        stmt = (
            stmt.join(AlertRow, AlertRow.id == AlertDeliveryRow.alert_id)
            .join(Run, Run.id == AlertRow.run_id)
            .where(Run.project_id == project_id)
        )
    if alert_id is not None:
        stmt = stmt.where(AlertDeliveryRow.alert_id == alert_id)
    if status is not None:
        stmt = stmt.where(AlertDeliveryRow.status == status)
    stmt = stmt.order_by(AlertDeliveryRow.created_at.desc(), AlertDeliveryRow.id.desc())
    return list(session.scalars(stmt.limit(limit)))


def delivery_attempts(
    session: Session, *, delivery_ids: Sequence[int]
) -> dict[int, list[AlertDeliveryAttemptRow]]:
    """The attempt log of each delivery, in attempt order."""
    out: dict[int, list[AlertDeliveryAttemptRow]] = {i: [] for i in delivery_ids}
    if not delivery_ids:
        return out
    for a in session.scalars(
        select(AlertDeliveryAttemptRow)
        .where(AlertDeliveryAttemptRow.delivery_id.in_(list(delivery_ids)))
        .order_by(AlertDeliveryAttemptRow.delivery_id, AlertDeliveryAttemptRow.attempt)
    ):
        out[a.delivery_id].append(a)
    return out

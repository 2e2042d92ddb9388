"""Alert sinks of the key's project (Slack or signed webhook), their delivery log, and
the project's detector threshold overrides."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    StrictFloat,
    ValidationError,
    field_validator,
)
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from collapsewatch.alerts import outbox
from collapsewatch.alerts.webhook import generate_secret, secret_key
from collapsewatch.api.deps import ProjectDep, SessionDep
from collapsewatch.schema import INT32_MAX
from collapsewatch.store.models import AlertSinkRow, ProjectDetectorOverrides, utcnow

router = APIRouter(prefix="/api/v1", tags=["alerts"])

SinkKind = Literal["slack", "webhook"]
Severity = Literal["warning", "critical"]
RuleName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
_OVERRIDE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _check_secret(value: str | None) -> str | None:
    if value is not None:
        secret_key(value)  # ValueError -> 422 naming the field
    return value


class SinkCreate(BaseModel):
    """A new sink. A webhook sink without ``secret`` gets a generated one, returned once."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128, description="Unique within the project.")
    kind: SinkKind
    url: HttpUrl = Field(description="Slack incoming-webhook URL, or the receiver's URL.")
    secret: str | None = Field(
        default=None, description="Webhook signing secret, whsec_<base64> (webhook only)."
    )
    rules: list[RuleName] | None = Field(
        default=None, description="Only these detector rules; null = every rule."
    )
    min_severity: Severity = "warning"
    enabled: bool = True

    @field_validator("secret")
    @classmethod
    def _secret_format(cls, value: str | None) -> str | None:
        return _check_secret(value)


class SinkUpdate(BaseModel):
    """Fields to change; absent fields keep their value."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=128)
    url: HttpUrl | None = None
    secret: str | None = None
    rules: list[RuleName] | None = None
    min_severity: Severity | None = None
    enabled: bool | None = None

    @field_validator("secret")
    @classmethod
    def _secret_format(cls, value: str | None) -> str | None:
        return _check_secret(value)


class SinkOut(BaseModel):
    """A sink as the API shows it: the secret is never shown again after creation."""

    id: int
    name: str
    kind: str
    url: str
    rules: list[str] | None
    min_severity: str
    enabled: bool
    has_secret: bool
    created_at: datetime
    updated_at: datetime
    secret: str | None = Field(
        default=None, description="Only in the creation response of a webhook sink."
    )


class DeliveryAttemptOut(BaseModel):
    attempt: int
    started_at: datetime
    duration_ms: float
    status_code: int | None
    outcome: str
    error: str | None


class DeliveryOut(BaseModel):
    id: int
    alert_id: int
    transition: str
    sink_key: str
    kind: str
    idempotency_key: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: datetime
    created_at: datetime
    delivered_at: datetime | None
    log: list[DeliveryAttemptOut]


class DetectorOverrides(BaseModel):
    """Per-project detector thresholds: ``{DetectorSettings field name: number}``."""

    model_config = ConfigDict(extra="forbid")

    overrides: dict[str, StrictFloat] = Field(default_factory=dict)


class DetectorOverridesOut(BaseModel):
    """The stored overrides, typed as the detectors' settings (counts are integers)."""

    overrides: dict[str, int | float]


def _sink_out(row: AlertSinkRow, *, secret: str | None = None) -> SinkOut:
    return SinkOut(
        id=row.id,
        name=row.name,
        kind=row.kind,
        url=row.url,
        rules=row.rules,
        min_severity=row.min_severity,
        enabled=row.enabled,
        has_secret=bool(row.secret),
        created_at=row.created_at,
        updated_at=row.updated_at,
        secret=secret,
    )


def _get_sink(session: SessionDep, project: ProjectDep, sink_id: int) -> AlertSinkRow:
    row = session.get(AlertSinkRow, sink_id)
    if row is None or row.project_id != project.id:
        raise HTTPException(404, f"Alert sink {sink_id} not found in project '{project.name}'.")
    return row


def _invalid(loc: list[Any], msg: str, kind: str = "value_error") -> RequestValidationError:
    return RequestValidationError([{"loc": loc, "msg": msg, "type": kind}])


def _commit_unique_name(session: SessionDep, name: str) -> None:
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise _invalid(
            ["body", "name"], f"a sink named '{name}' already exists in this project"
        ) from None


SinkId = Annotated[
    int, Path(ge=1, le=INT32_MAX, description="Sink id from POST /api/v1/alert-sinks.")
]


@router.get("/alert-sinks", response_model=list[SinkOut])
def list_sinks(session: SessionDep, project: ProjectDep) -> list[SinkOut]:
    """The project's alert sinks (secrets are not shown)."""
    rows = session.scalars(
        select(AlertSinkRow).where(AlertSinkRow.project_id == project.id).order_by(AlertSinkRow.id)
    )
    return [_sink_out(r) for r in rows]


@router.post("/alert-sinks", response_model=SinkOut, status_code=status.HTTP_201_CREATED)
def create_sink(body: SinkCreate, session: SessionDep, project: ProjectDep) -> SinkOut:
    """Add a sink. For a webhook sink without ``secret`` one is generated and returned
    in this response only; keep it to verify requests (``collapsewatch.alerts.verify``)."""
    if body.kind == "slack" and body.secret is not None:
        raise _invalid(["body", "secret"], "a Slack sink takes no secret")
    secret = body.secret
    generated = None
    if body.kind == "webhook" and secret is None:
        secret = generated = generate_secret()
    now = utcnow()
    row = AlertSinkRow(
        project_id=project.id,
        name=body.name,
        kind=body.kind,
        url=str(body.url),
        secret=secret,
        rules=body.rules,
        min_severity=body.min_severity,
        enabled=body.enabled,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    _commit_unique_name(session, body.name)
    return _sink_out(row, secret=generated)


@router.get("/alert-sinks/{sink_id}", response_model=SinkOut)
def get_sink(sink_id: SinkId, session: SessionDep, project: ProjectDep) -> SinkOut:
    """One sink."""
    return _sink_out(_get_sink(session, project, sink_id))


@router.patch("/alert-sinks/{sink_id}", response_model=SinkOut)
def update_sink(
    sink_id: SinkId, body: SinkUpdate, session: SessionDep, project: ProjectDep
) -> SinkOut:
    """Change a sink; send ``"rules": null`` to go back to every rule."""
    row = _get_sink(session, project, sink_id)
    changes = body.model_dump(exclude_unset=True)
    for field in ("name", "url", "min_severity", "enabled"):
        if field in changes and changes[field] is None:
            raise _invalid(["body", field], "may not be null")
    if "secret" in changes:
        if row.kind == "slack" and changes["secret"] is not None:
            raise _invalid(["body", "secret"], "a Slack sink takes no secret")
        if row.kind == "webhook" and changes["secret"] is None:
            raise _invalid(["body", "secret"], "a webhook sink needs a secret")
    for field, value in changes.items():
        setattr(row, field, str(value) if field == "url" else value)
    row.updated_at = utcnow()
    _commit_unique_name(session, row.name)
    return _sink_out(row)


@router.delete("/alert-sinks/{sink_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_sink(sink_id: SinkId, session: SessionDep, project: ProjectDep) -> Response:
    """Remove a sink; its pending deliveries fail with "the sink was deleted"."""
    session.delete(_get_sink(session, project, sink_id))
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/alert-deliveries", response_model=list[DeliveryOut])
def list_deliveries(
    session: SessionDep,
    project: ProjectDep,
    alert_id: Annotated[
        int | None, Query(ge=1, le=INT32_MAX, description="Only this alert's.")
    ] = None,
    status_: Annotated[
        Literal["pending", "delivered", "failed"] | None,
        Query(alias="status", description="Only deliveries in this status."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[DeliveryOut]:
    """The delivery log of the project's alerts, newest first, each with its attempts."""
    rows = outbox.list_deliveries(
        session, project_id=project.id, alert_id=alert_id, status=status_, limit=limit
    )
    attempts = outbox.delivery_attempts(session, delivery_ids=[r.id for r in rows])
    return [
        DeliveryOut(
            id=r.id,
            alert_id=r.alert_id,
            transition=r.transition,
            sink_key=r.sink_key,
            kind=r.kind,
            idempotency_key=r.idempotency_key,
            status=r.status,
            attempts=r.attempts,
            last_status_code=r.last_status_code,
            last_error=r.last_error,
            next_attempt_at=r.next_attempt_at,
            created_at=r.created_at,
            delivered_at=r.delivered_at,
            log=[
                DeliveryAttemptOut(
                    attempt=a.attempt,
                    started_at=a.started_at,
                    duration_ms=a.duration_ms,
                    status_code=a.status_code,
                    outcome=a.outcome,
                    error=a.error,
                )
                for a in attempts[r.id]
            ],
        )
        for r in rows
    ]


def _detector_settings_model() -> type | None:
    """The detectors' settings model, when that module is installed."""
    try:
        from collapsewatch.detect.config import DetectorSettings
    except ImportError:
        return None
    return DetectorSettings


def _check_overrides(overrides: dict[str, float]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The overrides typed as the detectors' settings (an int field stays an int), and
    the errors (with ``loc``) of their names and values; no errors means valid."""
    errors = []
    for name, value in overrides.items():
        loc = ["body", "overrides", name]
        if not _OVERRIDE_NAME.match(name):
            errors.append({"loc": loc, "msg": "not a setting name", "type": "value_error"})
        elif not math.isfinite(value):
            errors.append({"loc": loc, "msg": "must be a finite number", "type": "value_error"})
    model = _detector_settings_model()
    if errors or model is None:
        return dict(overrides), errors
    for name in overrides:
        if name not in model.model_fields:
            loc = ["body", "overrides", name]
            errors.append({"loc": loc, "msg": "unknown detector setting", "type": "value_error"})
    if errors:
        return dict(overrides), errors
    try:
        # model_validate, not the constructor: checks bounds and types without reading
        # the environment, so only what was sent is judged.
        typed = model.model_validate(overrides)
    except ValidationError as exc:
        return dict(overrides), [
            {"loc": ["body", "overrides", *e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors()
        ]
    return {name: getattr(typed, name) for name in overrides}, []


@router.get("/detector-settings", response_model=DetectorOverridesOut)
def get_detector_settings(session: SessionDep, project: ProjectDep) -> DetectorOverridesOut:
    """The project's detector threshold overrides (empty: the defaults hold)."""
    row = session.get(ProjectDetectorOverrides, project.id)
    return DetectorOverridesOut(overrides=dict(row.overrides) if row else {})


@router.put("/detector-settings", response_model=DetectorOverridesOut)
def put_detector_settings(
    body: DetectorOverrides, session: SessionDep, project: ProjectDep
) -> DetectorOverridesOut:
    """Replace the project's detector threshold overrides.

    Keys are field names of the detectors' settings (``DetectorSettings``), values
    numbers within that field's bounds; an empty object removes every override.
    """
    overrides, errors = _check_overrides(body.overrides)
    if errors:
        raise RequestValidationError(errors)
    row = session.get(ProjectDetectorOverrides, project.id)
    if row is None:
        row = ProjectDetectorOverrides(project_id=project.id, overrides={})
        session.add(row)
    row.overrides = overrides
    row.updated_at = utcnow()
    session.commit()
    return DetectorOverridesOut(overrides=dict(row.overrides))

"""What a sink is told: one alert state change, as a plain JSON-able snapshot.

A :class:`Notification` is built when the state change is stored (so retries send the
same thing even after the alert moved on) and rendered by each sink into its own
format: Slack Block Kit, or the Standard Webhooks JSON body.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

Transition = Literal["firing", "resolved"]
TRANSITIONS: tuple[str, ...] = ("firing", "resolved")

MAX_EXAMPLES = 3
MAX_EXAMPLE_CHARS = 300
MAX_MESSAGE_CHARS = 2000


@dataclass(frozen=True)
class Notification:
    """One alert state change.

    ``type`` is ``alert.firing``, ``alert.resolved`` or ``alert.test``; ``step`` is the
    step of the change (``step_fired`` or ``step_resolved``); ``values`` are the
    detector's evidence numbers and ``examples`` a few rollouts it points at
    (``state_id``, ``rollout_id``, ``reasoning`` cut to 300 characters).
    """

    type: str
    transition: str
    alert_id: int
    rule: str
    severity: str
    message: str
    step: int
    step_fired: int
    step_resolved: int | None
    run_id: int
    run_name: str
    project: str
    occurred_at: str
    run_url: str
    values: dict[str, Any] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Notification:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as the strings "NaN", "Infinity", "-Infinity"
    (strict JSON has no such numbers) and tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value):
            return "NaN"
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _examples(evidence: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for ex in list(evidence.get("examples") or [])[:MAX_EXAMPLES]:
        if not isinstance(ex, dict):
            continue
        reasoning = str(ex.get("reasoning") or "")
        if len(reasoning) > MAX_EXAMPLE_CHARS:
            reasoning = reasoning[: MAX_EXAMPLE_CHARS - 1] + "…"
        out.append(
            {
                "state_id": str(ex.get("state_id", "")),
                "rollout_id": str(ex.get("rollout_id", "")),
                "reasoning": reasoning,
            }
        )
    return out


def run_url(dashboard_url: str, run_id: int, step: int | None = None) -> str:
    """The dashboard page of a run (at ``step``'s drill-down when given)."""
    base = f"{dashboard_url.rstrip('/')}/runs/{run_id}"
    return base if step is None else f"{base}/steps/{step}"


def build_notification(
    *,
    alert: Any,
    run_name: str,
    project: str,
    transition: str,
    dashboard_url: str,
    now: datetime | None = None,
) -> Notification:
    """The notification of ``alert`` (an :class:`~collapsewatch.store.models.AlertRow`)
    entering ``transition``.

    Raises:
        ValueError: ``transition`` is not "firing" or "resolved".
    """
    if transition not in TRANSITIONS:
        raise ValueError(f"transition must be one of {TRANSITIONS}, got {transition!r}")
    evidence = dict(alert.evidence or {})
    values = {k: v for k, v in evidence.items() if k != "examples"}
    if transition == "resolved":
        step = alert.step_resolved if alert.step_resolved is not None else alert.step_fired
        when = alert.resolved_at or now
    else:
        step = alert.step_fired
        when = alert.created_at or now
    when = when or datetime.now(timezone.utc)
    message = str(alert.message or "")[:MAX_MESSAGE_CHARS]
    return Notification(
        type=f"alert.{transition}",
        transition=transition,
        alert_id=int(alert.id),
        rule=str(alert.rule),
        severity=str(alert.severity),
        message=message,
        step=int(step),
        step_fired=int(alert.step_fired),
        step_resolved=alert.step_resolved,
        run_id=int(alert.run_id),
        run_name=run_name,
        project=project,
        occurred_at=when.astimezone(timezone.utc).isoformat().replace("+00:00", "Z"),
        run_url=run_url(dashboard_url, int(alert.run_id)),
        values=json_safe(values),
        examples=_examples(evidence),
    )


def sample_notification(*, dashboard_url: str, now: datetime | None = None) -> Notification:
    """A harmless notification for `collapsewatch alerts test`."""
    when = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return Notification(
        type="alert.test",
        transition="firing",
        alert_id=0,
        rule="test",
        severity="warning",
        message="Test message from collapsewatch: this sink is configured correctly.",
        step=0,
        step_fired=0,
        step_resolved=None,
        run_id=0,
        run_name="(test)",
        project="(test)",
        occurred_at=when.isoformat().replace("+00:00", "Z"),
        run_url=dashboard_url.rstrip("/") + "/",
        values={},
        examples=[],
    )

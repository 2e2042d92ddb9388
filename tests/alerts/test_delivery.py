"""Alert delivery end to end over real HTTP on loopback, on SQLite and PostgreSQL:
Slack payload, webhook signature, retries with backoff, the delivery log, no duplicates."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import timedelta

import pytest
from sqlalchemy import select

from collapsewatch.alerts import AlertSettings, deliver_due, enqueue, generate_secret, verify
from collapsewatch.alerts.outbox import backoff_seconds
from collapsewatch.alerts.sinks import DeliveryResult
from collapsewatch.store.models import (
    AlertDeliveryAttemptRow,
    AlertDeliveryRow,
    AlertRow,
    AlertSinkRow,
    utcnow,
)

SECRET = generate_secret()
DASHBOARD = "http://dash.test:8424"


def _settings(receiver, **kw) -> AlertSettings:
    values = {
        "slack_webhook_url": receiver.url + "/slack",
        "webhook_url": receiver.url + "/hook",
        "webhook_secret": SECRET,
        "dashboard_url": DASHBOARD,
        "delivery_backoff_seconds": 5.0,
        "delivery_timeout_seconds": 5.0,
    }
    values.update(kw)
    return AlertSettings(**values)


def _enqueue(store, alert_id: int, transition: str, settings: AlertSettings) -> int:
    with store.factory() as session:
        n = enqueue(session, alert_id=alert_id, transition=transition, settings=settings)
        session.commit()
        return n


def _deliveries(store, alert_id: int) -> list[AlertDeliveryRow]:
    with store.factory() as session:
        return list(
            session.scalars(
                select(AlertDeliveryRow)
                .where(AlertDeliveryRow.alert_id == alert_id)
                .order_by(AlertDeliveryRow.sink_key)
            )
        )


def _attempts(store, delivery_id: int) -> list[AlertDeliveryAttemptRow]:
    with store.factory() as session:
        return list(
            session.scalars(
                select(AlertDeliveryAttemptRow)
                .where(AlertDeliveryAttemptRow.delivery_id == delivery_id)
                .order_by(AlertDeliveryAttemptRow.attempt)
            )
        )


def test_slack_payload_and_webhook_signature_reach_a_real_receiver(store, receiver) -> None:
    settings = _settings(receiver)
    alert_id = store.add_alert()
    assert _enqueue(store, alert_id, "firing", settings) == 2
    assert deliver_due(store.factory, settings) >= 2

    (slack,) = receiver.on("/slack")
    msg = slack.json()
    run_url = f"{DASHBOARD}/runs/{store.run.id}"
    # Plain-text fallback names the rule, state, step, run and link.
    for part in ("template_collapse", "firing at step 40", "grpo-sokoban", run_url):
        assert part in msg["text"]
    types = [b["type"] for b in msg["blocks"]]
    assert types[0] == "header" and "actions" in types and "context" in types
    assert msg["blocks"][0]["text"]["type"] == "plain_text"
    assert "Firing: template_collapse" in msg["blocks"][0]["text"]["text"]
    fields = next(b["fields"] for b in msg["blocks"] if "fields" in b)
    texts = "\n".join(f["text"] for f in fields)
    assert f"<{run_url}|grpo-sokoban>" in texts
    assert "*Step*\n40" in texts and "critical" in texts and store.project in texts
    values = next(
        b["text"]["text"]
        for b in msg["blocks"]
        if b.get("text", {}).get("text", "").startswith("*Values*")
    )
    assert "`mi_embed`: 0.031" in values and "`baseline`: 0.62" in values
    example = msg["blocks"][types.index("context")]["elements"][0]["text"]
    assert "&lt;about&gt;" in example and "&amp;" in example  # mrkdwn escaped
    button = msg["blocks"][types.index("actions")]["elements"][0]
    assert button["type"] == "button" and button["url"] == run_url

    (hook,) = receiver.on("/hook")
    # Our helper accepts it ...
    body = verify(SECRET, hook.headers, hook.body)
    # ... and so does an independent computation of the Standard Webhooks signature.
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    signed = f"{hook.headers['webhook-id']}.{hook.headers['webhook-timestamp']}.".encode()
    expected = base64.b64encode(hmac.new(key, signed + hook.body, hashlib.sha256).digest())
    assert hook.headers["webhook-signature"] == "v1," + expected.decode()
    assert hook.headers["content-type"] == "application/json"
    assert body["type"] == "alert.firing"
    data = body["data"]
    assert data["rule"] == "template_collapse" and data["step"] == 40
    assert data["run_id"] == store.run.id and data["run_url"] == run_url
    assert data["values"] == {"mi_embed": 0.031, "baseline": 0.62, "token_entropy": 2.1}
    assert data["examples"][0]["state_id"] == "s3"

    by_kind = {d.kind: d for d in _deliveries(store, alert_id)}
    assert hook.headers["webhook-id"] == by_kind["webhook"].idempotency_key
    assert all(d.status == "delivered" and d.attempts == 1 for d in by_kind.values())


def test_receiver_failing_twice_gets_the_message_on_the_third_try(store, receiver) -> None:
    settings = _settings(receiver, slack_webhook_url=None)
    alert_id = store.add_alert()
    _enqueue(store, alert_id, "firing", settings)
    receiver.cue(503, times=2)
    t0 = utcnow()

    assert deliver_due(store.factory, settings, now=t0) >= 1
    deliver_due(store.factory, settings, now=t0)  # backing off: not due yet
    (d,) = _deliveries(store, alert_id)
    assert (d.status, d.attempts, d.last_status_code) == ("pending", 1, 503)
    wait1 = (d.next_attempt_at - t0).total_seconds()
    assert 5.0 <= wait1 < 7.0  # the base backoff

    assert deliver_due(store.factory, settings, now=t0 + timedelta(seconds=6)) >= 1
    (d,) = _deliveries(store, alert_id)
    wait2 = (d.next_attempt_at - (t0 + timedelta(seconds=6))).total_seconds()
    assert 10.0 <= wait2 < 12.0  # doubled
    assert deliver_due(store.factory, settings, now=t0 + timedelta(seconds=20)) >= 1

    (d,) = _deliveries(store, alert_id)
    assert (d.status, d.attempts, d.last_status_code) == ("delivered", 3, 200)
    log = _attempts(store, d.id)
    assert [(a.attempt, a.status_code, a.outcome) for a in log] == [
        (1, 503, "retry"),
        (2, 503, "retry"),
        (3, 200, "delivered"),
    ]
    assert "503" in log[0].error
    hits = receiver.on("/hook")
    assert [h.status for h in hits] == [503, 503, 200]
    # One message: the same id on every attempt, each attempt freshly signed and valid.
    assert len({h.headers["webhook-id"] for h in hits}) == 1
    for h in hits:
        verify(SECRET, h.headers, h.body)
    deliver_due(store.factory, settings, now=t0 + timedelta(hours=1))  # nothing left to send
    assert _deliveries(store, alert_id)[0].attempts == 3 and len(receiver.on("/hook")) == 3


def test_one_state_change_is_one_message_however_often_enqueued(store, receiver) -> None:
    settings = _settings(receiver)
    alert_id = store.add_alert()
    assert _enqueue(store, alert_id, "firing", settings) == 2
    assert _enqueue(store, alert_id, "firing", settings) == 0
    with store.factory() as session:  # twice in one transaction leaves it usable
        assert enqueue(session, alert_id=alert_id, transition="firing", settings=settings) == 0
        session.commit()
    assert len(_deliveries(store, alert_id)) == 2
    deliver_due(store.factory, settings)
    assert _enqueue(store, alert_id, "firing", settings) == 0
    deliver_due(store.factory, settings)
    assert len(receiver.on("/slack")) == 1 and len(receiver.on("/hook")) == 1

    # Resolving is another state change: its own message, with its own id.
    with store.factory() as session:
        alert = session.get(AlertRow, alert_id)
        alert.state, alert.step_resolved, alert.resolved_at = "resolved", 55, utcnow()
        enqueue(session, alert_id=alert_id, transition="resolved", settings=settings)
        session.commit()
    deliver_due(store.factory, settings)
    hooks = receiver.on("/hook")
    assert [h.json()["type"] for h in hooks] == ["alert.firing", "alert.resolved"]
    assert hooks[1].json()["data"]["step"] == 55
    assert hooks[0].headers["webhook-id"] != hooks[1].headers["webhook-id"]
    resolved = receiver.on("/slack")[1].json()
    assert "Resolved: template_collapse" in resolved["blocks"][0]["text"]["text"]
    assert "resolved at step 55 (fired at step 40)" in resolved["text"]


def test_429_waits_as_long_as_retry_after_says(store, receiver) -> None:
    settings = _settings(receiver, slack_webhook_url=None)
    alert_id = store.add_alert()
    _enqueue(store, alert_id, "firing", settings)
    receiver.cue(429, headers={"Retry-After": "120"})
    t0 = utcnow()
    deliver_due(store.factory, settings, now=t0)
    (d,) = _deliveries(store, alert_id)
    assert (d.status, d.last_status_code) == ("pending", 429)
    assert 120 <= (d.next_attempt_at - t0).total_seconds() < 122
    deliver_due(store.factory, settings, now=t0 + timedelta(seconds=60))  # still waiting
    assert len(receiver.on("/hook")) == 1
    assert deliver_due(store.factory, settings, now=t0 + timedelta(seconds=125)) >= 1
    assert _deliveries(store, alert_id)[0].status == "delivered"


def test_other_4xx_fails_at_once_and_network_errors_retry(store, receiver) -> None:
    settings = _settings(receiver, webhook_url=None, webhook_secret=None)
    alert_id = store.add_alert()
    _enqueue(store, alert_id, "firing", settings)
    receiver.cue(404)
    assert deliver_due(store.factory, settings) >= 1
    (d,) = _deliveries(store, alert_id)
    assert (d.status, d.attempts, d.last_status_code) == ("failed", 1, 404)
    deliver_due(store.factory, settings, now=utcnow() + timedelta(days=1))
    assert _deliveries(store, alert_id)[0].attempts == 1 and len(receiver.on("/slack")) == 1

    # A receiver that is down: connection refused is retried, up to the last attempt.
    receiver.stop()
    down = _settings(receiver, webhook_url=None, webhook_secret=None, delivery_max_attempts=2)
    other = store.add_alert(rule="entropy_collapse", step_fired=41)
    _enqueue(store, other, "firing", down)
    t0 = utcnow()
    deliver_due(store.factory, down, now=t0)
    (d,) = _deliveries(store, other)
    assert (d.status, d.attempts, d.last_status_code) == ("pending", 1, None)
    assert "Connect" in d.last_error
    deliver_due(store.factory, down, now=t0 + timedelta(minutes=5))
    (d,) = _deliveries(store, other)
    assert (d.status, d.attempts) == ("failed", 2)
    assert [a.outcome for a in _attempts(store, d.id)] == ["retry", "retry"]


def test_project_sinks_filter_by_rule_and_severity(store, receiver) -> None:
    settings = AlertSettings(dashboard_url=DASHBOARD)
    with store.factory() as session:
        session.add_all(
            [
                AlertSinkRow(
                    project_id=store.project_id,
                    name="oncall",
                    kind="slack",
                    url=receiver.url + "/oncall",
                    min_severity="critical",
                ),
                AlertSinkRow(
                    project_id=store.project_id,
                    name="collapse-only",
                    kind="webhook",
                    url=receiver.url + "/collapse",
                    secret=SECRET,
                    rules=["template_collapse"],
                ),
            ]
        )
        session.commit()
    critical = store.add_alert()
    warning = store.add_alert(rule="no_signal", severity="warning", step_fired=41)
    assert _enqueue(store, critical, "firing", settings) == 2
    assert _enqueue(store, warning, "firing", settings) == 0
    deliver_due(store.factory, settings)
    assert len(receiver.on("/oncall")) == 1
    verify(SECRET, receiver.on("/collapse")[0].headers, receiver.on("/collapse")[0].body)

    # A sink deleted before its message went out: the delivery fails and says why.
    other = store.add_alert(step_fired=42)
    _enqueue(store, other, "firing", settings)
    with store.factory() as session:
        for sink in session.scalars(select(AlertSinkRow)):
            if sink.project_id == store.project_id:
                session.delete(sink)
        session.commit()
    deliver_due(store.factory, settings)
    assert {(d.status, d.last_error) for d in _deliveries(store, other)} == {
        ("failed", "the sink was deleted")
    }


def test_backoff_is_capped_and_unknown_alerts_are_refused(store) -> None:
    s = AlertSettings(delivery_backoff_seconds=5, delivery_backoff_max_seconds=60)
    retry = DeliveryResult("retry", status_code=503)
    assert [backoff_seconds(n, retry, s) for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 40, 60]
    slow = DeliveryResult("retry", status_code=429, retry_after=3600)
    assert backoff_seconds(1, slow, s) == 60
    with store.factory() as session, pytest.raises(ValueError, match="not found"):
        enqueue(session, alert_id=10**9, transition="firing", settings=s)
    with store.factory() as session, pytest.raises(ValueError, match="transition"):
        enqueue(session, alert_id=1, transition="exploded", settings=s)

"""Notifications and their two renderings (Slack Block Kit, Standard Webhooks body),
without a database or a network."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from collapsewatch.alerts import build_notification, slack_payload
from collapsewatch.alerts.notification import sample_notification
from collapsewatch.alerts.slack import HEADER_MAX, fallback_text
from collapsewatch.alerts.webhook import webhook_body

T = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def _alert(**kw):
    values = {
        "id": 7,
        "run_id": 3,
        "rule": "template_collapse",
        "severity": "critical",
        "state": "firing",
        "step_fired": 40,
        "step_resolved": None,
        "message": "responsiveness fell",
        "evidence": {"mi_embed": 0.03},
        "created_at": T,
        "resolved_at": None,
    }
    values.update(kw)
    return SimpleNamespace(**values)


def _note(transition="firing", **kw):
    return build_notification(
        alert=_alert(**kw),
        run_name="run-a",
        project="p",
        transition=transition,
        dashboard_url="http://dash:8424/",
    )


def test_non_finite_evidence_becomes_strict_json() -> None:
    n = _note(evidence={"reward_mean": float("nan"), "ratio": float("inf"), "ok": [1.5]})
    assert n.values == {"reward_mean": "NaN", "ratio": "Infinity", "ok": [1.5]}
    body = json.loads(webhook_body(n))  # allow_nan=False would have raised
    assert body["data"]["values"]["reward_mean"] == "NaN"
    assert "`reward_mean`: NaN" in json.dumps(slack_payload(n))


def test_webhook_body_envelope_and_stability() -> None:
    n = _note()
    body = json.loads(webhook_body(n))
    assert body["type"] == "alert.firing" and body["timestamp"] == "2026-11-30T12:00:00Z"
    assert body["data"]["run_url"] == "http://dash:8424/runs/3"
    assert "type" not in body["data"]
    assert webhook_body(n) == webhook_body(n)  # same bytes on every retry


def test_resolved_notification_uses_the_resolve_step_and_time() -> None:
    later = datetime(2026, 11, 30, 13, 0, tzinfo=timezone.utc)
    n = _note("resolved", state="resolved", step_resolved=57, resolved_at=later)
    assert (n.type, n.step, n.step_fired) == ("alert.resolved", 57, 40)
    assert n.occurred_at == "2026-11-30T13:00:00Z"
    assert "resolved at step 57 (fired at step 40)" in fallback_text(n)
    with pytest.raises(ValueError):
        _note("exploded")


def test_slack_limits_and_escaping() -> None:
    n = _note(
        rule="r" * 300,
        message="<!channel> & " + "x" * 5000,
        evidence={f"v{i}": i for i in range(20)}
        | {"examples": [{"state_id": "s", "rollout_id": "r", "reasoning": "y" * 900}] * 5},
    )
    msg = slack_payload(n)
    header = msg["blocks"][0]["text"]["text"]
    assert len(header) <= HEADER_MAX
    section = msg["blocks"][1]["text"]["text"]
    assert section.startswith("&lt;!channel&gt; &amp; ") and len(section) <= 3000
    sections = [b["text"]["text"] for b in msg["blocks"] if b["type"] == "section" and "text" in b]
    values = next(t for t in sections if t.startswith("*Values*"))
    assert "… and 8 more" in values
    context = next(b for b in msg["blocks"] if b["type"] == "context")
    assert len(context["elements"]) == 3  # at most three examples
    assert all(len(e["text"]) < 400 for e in context["elements"])
    fields = next(b for b in msg["blocks"] if "fields" in b)["fields"]
    assert len(fields) <= 10 and all(len(f["text"]) <= 2000 for f in fields)
    assert len(msg["text"]) <= 3000


def test_sample_notification_renders() -> None:
    n = sample_notification(dashboard_url="http://dash")
    msg = slack_payload(n)
    assert "Test message" in msg["blocks"][0]["text"]["text"]
    assert json.loads(webhook_body(n))["type"] == "alert.test"

"""Slack incoming webhooks: one Block Kit message per alert state change.

The message has a header (state and rule), the detector's message, the run, project,
rule, severity and step as fields, the evidence values, up to three example reasonings,
and a button to the run page; ``text`` is the plain-text fallback that notifications
and screen readers show. Block Kit limits respected here: header text ≤ 150
characters, section text ≤ 3,000, at most 10 fields of ≤ 2,000, button text ≤ 75.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx

from collapsewatch.alerts.notification import Notification
from collapsewatch.alerts.sinks import DeliveryResult, post

HEADER_MAX = 150
SECTION_MAX = 3000
MAX_VALUES = 12

_ICONS = {"alert.firing": "🔴", "alert.resolved": "✅", "alert.test": "🔔"}


def escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_value(value: Any) -> str:
    """A compact human form of an evidence value (4 significant digits for floats)."""
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "null"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, int | str):
        return str(value)
    return _cut(json.dumps(value, separators=(",", ":"), default=str), 200)


def _title(n: Notification) -> str:
    if n.type == "alert.test":
        return "🔔 Test message from collapsewatch"
    state = "Resolved" if n.transition == "resolved" else "Firing"
    return f"{_ICONS.get(n.type, '🔴')} {state}: {n.rule} ({n.severity})"


def fallback_text(n: Notification) -> str:
    """The plain-text ``text`` of the message."""
    if n.type == "alert.test":
        return f"collapsewatch test message. {n.message}"
    if n.transition == "resolved":
        what = f"resolved at step {n.step} (fired at step {n.step_fired})"
    else:
        what = f"firing at step {n.step}"
    return (
        f"[{n.severity}] {n.rule} {what} on run '{n.run_name}' (project {n.project}): "
        f"{n.message} {n.run_url}"
    )


def slack_payload(n: Notification) -> dict[str, Any]:
    """The Block Kit message of a notification."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _cut(_title(n), HEADER_MAX), "emoji": True},
        }
    ]
    if n.message:
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": _cut(escape(n.message), 2900)}}
        )
    if n.type != "alert.test":
        step = f"{n.step} (fired at {n.step_fired})" if n.transition == "resolved" else str(n.step)
        fields = [
            ("Run", f"<{n.run_url}|{escape(n.run_name)}>"),
            ("Project", escape(n.project)),
            ("Rule", f"`{escape(n.rule)}`"),
            ("Severity", escape(n.severity)),
            ("Step", step),
            ("State", n.transition),
        ]
        blocks.append(
            {
                "type": "section",
                "fields": [{"type": "mrkdwn", "text": f"*{k}*\n{v}"} for k, v in fields],
            }
        )
    if n.values:
        lines = [
            f"• `{escape(str(k))}`: {escape(format_value(v))}"
            for k, v in list(n.values.items())[:MAX_VALUES]
        ]
        if len(n.values) > MAX_VALUES:
            lines.append(f"… and {len(n.values) - MAX_VALUES} more")
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": _cut("*Values*\n" + "\n".join(lines), 2900)},
            }
        )
    if n.examples:
        elements = [
            {
                "type": "mrkdwn",
                "text": _cut(
                    f"state `{escape(ex['state_id'])}`, rollout `{escape(ex['rollout_id'])}`: "
                    f"_{escape(ex['reasoning'])}_",
                    SECTION_MAX,
                ),
            }
            for ex in n.examples
        ]
        blocks.append({"type": "context", "elements": elements})
    blocks.append(
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Open run"},
                    "url": n.run_url,
                    "action_id": "open_run",
                }
            ],
        }
    )
    return {"text": _cut(fallback_text(n), SECTION_MAX), "blocks": blocks}


class SlackSink:
    """Posts notifications to a Slack incoming-webhook URL."""

    kind = "slack"

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url
        self.timeout = timeout

    def deliver(
        self, notification: Notification, *, message_id: str, client: httpx.Client | None = None
    ) -> DeliveryResult:
        body = json.dumps(slack_payload(notification), ensure_ascii=False).encode()
        # Slack ignores extra headers; the id helps whoever proxies or logs the request.
        headers = {"webhook-id": message_id}
        return post(self.url, content=body, headers=headers, timeout=self.timeout, client=client)

"""Alert delivery: Slack incoming webhooks and signed generic webhooks, via an outbox.

The worker stores an alert state change and, in the same transaction, calls
:func:`enqueue`; its loop calls :func:`deliver_due` to send what is due, with retries
and backoff, recording every attempt. Receivers of generic webhooks check requests
with :func:`verify`. Sinks come from :class:`AlertSettings` (environment) or per
project from the API (``/api/v1/alert-sinks``). See docs/alerts.md.
"""

from collapsewatch.alerts.notification import Notification, build_notification
from collapsewatch.alerts.outbox import deliver_due, enqueue, list_deliveries, sink_from_config
from collapsewatch.alerts.settings import AlertSettings
from collapsewatch.alerts.sinks import AlertSink, DeliveryResult
from collapsewatch.alerts.slack import SlackSink, slack_payload
from collapsewatch.alerts.webhook import (
    WebhookSink,
    WebhookVerificationError,
    generate_secret,
    sign,
    verify,
)

__all__ = [
    "AlertSettings",
    "AlertSink",
    "DeliveryResult",
    "Notification",
    "SlackSink",
    "WebhookSink",
    "WebhookVerificationError",
    "build_notification",
    "deliver_due",
    "enqueue",
    "generate_secret",
    "list_deliveries",
    "sink_from_config",
    "sign",
    "slack_payload",
    "verify",
]

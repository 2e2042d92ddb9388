"""The sink interface and the HTTP outcome rules every sink shares.

A sink turns a :class:`~collapsewatch.alerts.notification.Notification` into one HTTP
request and reports a :class:`DeliveryResult`. Retry policy (which outcomes are worth
another attempt, and when) is decided here once, so Slack and webhooks behave alike:
2xx delivered; 429 and 5xx and network errors retry (honouring ``Retry-After``); any
other status fails at once, since sending the same request again cannot succeed.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal, Protocol, runtime_checkable

import httpx

from collapsewatch.alerts.notification import Notification

Outcome = Literal["delivered", "retry", "failed"]

USER_AGENT = "collapsewatch-alerts/1"
MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class DeliveryResult:
    """The outcome of one delivery attempt.

    ``retry_after`` is the receiver's Retry-After in seconds (429/503), if it gave one.
    """

    outcome: Outcome
    status_code: int | None = None
    error: str | None = None
    retry_after: float | None = None
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome == "delivered"


@runtime_checkable
class AlertSink(Protocol):
    """Something that can deliver a notification (Slack, a webhook, a test double)."""

    kind: str

    def deliver(
        self, notification: Notification, *, message_id: str, client: httpx.Client | None = None
    ) -> DeliveryResult:
        """Send ``notification`` once; ``message_id`` is stable across retries."""
        ...


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return max(0.0, (when - now).total_seconds())


def classify(response: httpx.Response, duration_ms: float) -> DeliveryResult:
    """The outcome of an HTTP answer, by the rules in this module's docstring."""
    code = response.status_code
    if 200 <= code < 300:
        return DeliveryResult("delivered", status_code=code, duration_ms=duration_ms)
    body = response.text[:MAX_ERROR_CHARS] if response.content else ""
    error = f"HTTP {code}" + (f": {body}" if body else "")
    if code == 429 or code >= 500:
        return DeliveryResult(
            "retry",
            status_code=code,
            error=error,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
            duration_ms=duration_ms,
        )
    return DeliveryResult("failed", status_code=code, error=error, duration_ms=duration_ms)


def post(
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    timeout: float,
    client: httpx.Client | None = None,
) -> DeliveryResult:
    """POST ``content`` to ``url`` once and classify the outcome; never raises for
    network trouble (that is a ``retry``). Redirects are not followed: a receiver that
    moved must be reconfigured, not silently chased."""
    all_headers = {"content-type": "application/json", "user-agent": USER_AGENT, **headers}
    started = time.perf_counter()
    try:
        if client is None:
            with httpx.Client(timeout=timeout, follow_redirects=False) as own:
                response = own.post(url, content=content, headers=all_headers)
        else:
            response = client.post(url, content=content, headers=all_headers, timeout=timeout)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        return DeliveryResult("failed", error=f"invalid URL: {exc}"[:MAX_ERROR_CHARS])
    except httpx.HTTPError as exc:  # connect/read errors, timeouts: worth another try
        elapsed = (time.perf_counter() - started) * 1000
        return DeliveryResult(
            "retry",
            error=f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS],
            duration_ms=elapsed,
        )
    return classify(response, (time.perf_counter() - started) * 1000)

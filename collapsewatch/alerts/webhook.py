"""Generic webhooks, signed the Standard Webhooks way, and the check receivers run.

Each request is a JSON ``POST`` with three headers:

- ``webhook-id``: the message id, the same on every retry of one message (receivers
  deduplicate on it);
- ``webhook-timestamp``: Unix seconds of this attempt;
- ``webhook-signature``: ``v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>``,
  where the key is the base64-decoded part of the ``whsec_…`` secret.

The body is ``{"type": "alert.firing" | "alert.resolved" | "alert.test", "timestamp":
ISO-8601, "data": {...}}``; docs/alerts.md shows it in full and how to verify it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

import httpx

from collapsewatch.alerts.notification import Notification
from collapsewatch.alerts.sinks import DeliveryResult, post

SECRET_PREFIX = "whsec_"
SIGNATURE_VERSION = "v1"
DEFAULT_TOLERANCE_SECONDS = 300


class WebhookVerificationError(ValueError):
    """A webhook request failed verification (missing header, stale, bad signature)."""


def generate_secret(num_bytes: int = 24) -> str:
    """A new signing secret: ``whsec_`` + base64 of ``num_bytes`` random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(num_bytes)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret (the prefix is optional).

    Raises:
        ValueError: the part after the prefix is not base64, or decodes to < 16 bytes.
    """
    raw = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("webhook secret must be 'whsec_' followed by base64") from exc
    if len(key) < 16:
        raise ValueError("webhook secret must decode to at least 16 bytes")
    return key


def sign(secret: str, *, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value for one request."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """Check a received webhook and return its parsed JSON body.

    For receivers: pass the raw body exactly as received (before any JSON parsing)
    and the request headers (any case). The timestamp must be within
    ``tolerance_seconds`` of ``now`` (replay protection); the header may carry several
    space-separated signatures (secret rotation) and one match is enough.

    Raises:
        WebhookVerificationError: a header is missing, the timestamp is malformed or
            out of tolerance, or no signature matches.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        msg_id = lower["webhook-id"]
        ts_text = lower["webhook-timestamp"]
        signatures = lower["webhook-signature"]
    except KeyError as exc:
        raise WebhookVerificationError(f"missing header {exc.args[0]}") from None
    try:
        timestamp = int(ts_text)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance_seconds:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")
    raw = body.encode() if isinstance(body, str) else body
    expected = sign(secret, msg_id=msg_id, timestamp=timestamp, body=raw).split(",", 1)[1]
    for candidate in signatures.split():
        version, _, value = candidate.partition(",")
        if version == SIGNATURE_VERSION and hmac.compare_digest(value, expected):
            return json.loads(raw)
    raise WebhookVerificationError("no matching signature")


def webhook_body(notification: Notification) -> bytes:
    """The JSON body of a notification (compact, stable key order)."""
    data = notification.to_dict()
    payload = {"type": data.pop("type"), "timestamp": notification.occurred_at, "data": data}
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()


class WebhookSink:
    """POSTs signed notifications to ``url`` (Standard Webhooks headers)."""

    kind = "webhook"

    def __init__(self, url: str, secret: str, *, timeout: float = 10.0) -> None:
        secret_key(secret)  # fail at configuration time, not at the first alert
        self.url = url
        self.secret = secret
        self.timeout = timeout

    def deliver(
        self, notification: Notification, *, message_id: str, client: httpx.Client | None = None
    ) -> DeliveryResult:
        body = webhook_body(notification)
        timestamp = int(time.time())
        headers = {
            "webhook-id": message_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(
                self.secret, msg_id=message_id, timestamp=timestamp, body=body
            ),
        }
        return post(self.url, content=body, headers=headers, timeout=self.timeout, client=client)

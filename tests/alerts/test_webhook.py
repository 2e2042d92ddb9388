"""Signing and verification of generic webhooks (Standard Webhooks scheme)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from collapsewatch.alerts import WebhookVerificationError, generate_secret, sign, verify
from collapsewatch.alerts.webhook import secret_key

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
BODY = b'{"type":"alert.firing","data":{"rule":"template_collapse"}}'
NOW = 1_790_000_000


def _headers(msg_id: str = "msg_1", ts: int = NOW, secret: str = SECRET, body: bytes = BODY):
    return {
        "Webhook-Id": msg_id,
        "Webhook-Timestamp": str(ts),
        "Webhook-Signature": sign(secret, msg_id=msg_id, timestamp=ts, body=body),
    }


def test_signature_is_hmac_sha256_of_id_timestamp_body() -> None:
    sig = sign(SECRET, msg_id="msg_1", timestamp=NOW, body=BODY)
    mac = hmac.new(
        b"0123456789abcdef0123456789abcdef", f"msg_1.{NOW}.".encode() + BODY, hashlib.sha256
    )
    assert sig == "v1," + base64.b64encode(mac.digest()).decode()


def test_verify_accepts_a_genuine_request_and_returns_the_body() -> None:
    assert verify(SECRET, _headers(), BODY, now=NOW + 10)["data"]["rule"] == "template_collapse"
    assert verify(SECRET, _headers(), BODY.decode(), now=NOW - 10)["type"] == "alert.firing"


def test_verify_accepts_one_matching_signature_among_several() -> None:
    headers = _headers()
    other = sign(generate_secret(), msg_id="msg_1", timestamp=NOW, body=BODY)
    headers["Webhook-Signature"] = f"v1,bm9wZQ== {other} {headers['Webhook-Signature']}"
    verify(SECRET, headers, BODY, now=NOW)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"body": BODY.replace(b"template", b"entropy")}, "no matching signature"),
        ({"secret": generate_secret()}, "no matching signature"),
        ({"now": NOW + 301}, "tolerance"),
        ({"now": NOW - 301}, "tolerance"),
        ({"drop": "webhook-signature"}, "missing header"),
        ({"drop": "webhook-id"}, "missing header"),
        ({"ts": "soon"}, "not an integer"),
        ({"id": "msg_2"}, "no matching signature"),
    ],
)
def test_verify_rejects(change: dict, message: str) -> None:
    headers = {k.lower(): v for k, v in _headers().items()}
    body = change.get("body", BODY)
    if "drop" in change:
        del headers[change["drop"]]
    if "ts" in change:
        headers["webhook-timestamp"] = change["ts"]
    if "id" in change:
        headers["webhook-id"] = change["id"]
    with pytest.raises(WebhookVerificationError, match=message):
        verify(change.get("secret", SECRET), headers, body, now=change.get("now", NOW))


def test_secrets() -> None:
    secret = generate_secret()
    assert secret.startswith("whsec_") and len(secret_key(secret)) == 24
    assert generate_secret() != secret
    for bad in ("whsec_not base64!", "whsec_c2hvcnQ=", ""):
        with pytest.raises(ValueError):
            secret_key(bad)

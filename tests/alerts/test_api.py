"""The alert sink and detector settings API, over a real server (SQLite and PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import delete

from collapsewatch.alerts import verify
from collapsewatch.store import keys
from collapsewatch.store.engine import make_engine, make_sessionmaker, session_scope


@pytest.fixture
def http(server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30
    ) as c:
        yield c


def _locs(resp: httpx.Response) -> list[list]:
    assert resp.status_code == 422, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    return [e["loc"] for e in resp.json()["errors"]]


def test_sink_crud_and_secret_shown_once(http: httpx.Client, server) -> None:
    resp = http.post(
        "/api/v1/alert-sinks",
        json={"name": "team", "kind": "webhook", "url": "https://hooks.example/cw"},
    )
    assert resp.status_code == 201, resp.text
    sink = resp.json()
    secret = sink["secret"]
    assert secret.startswith("whsec_") and sink["has_secret"] is True
    assert sink["rules"] is None and sink["min_severity"] == "warning" and sink["enabled"]

    listed = http.get("/api/v1/alert-sinks").json()
    assert [s["name"] for s in listed] == ["team"] and listed[0]["secret"] is None
    assert http.get(f"/api/v1/alert-sinks/{sink['id']}").json()["secret"] is None

    patched = http.patch(
        f"/api/v1/alert-sinks/{sink['id']}",
        json={"rules": ["template_collapse", "entropy_collapse"], "min_severity": "critical"},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["rules"] == ["template_collapse", "entropy_collapse"]
    assert (
        http.patch(f"/api/v1/alert-sinks/{sink['id']}", json={"rules": None}).json()["rules"]
        is None
    )

    slack = http.post(
        "/api/v1/alert-sinks",
        json={"name": "slack", "kind": "slack", "url": "https://hooks.slack.com/services/T/B/x"},
    )
    assert slack.status_code == 201 and slack.json()["secret"] is None

    # Another project's key sees none of these.
    other_key = keys.generate_key()
    engine = make_engine(server.settings.resolved_database_url, pool_size=1)
    with session_scope(make_sessionmaker(engine)) as session:
        keys.register_key(session, project=server.settings.project + "-other", key=other_key)
    engine.dispose()
    other = {"Authorization": f"Bearer {other_key}"}
    assert http.get("/api/v1/alert-sinks", headers=other).json() == []
    assert http.get(f"/api/v1/alert-sinks/{sink['id']}", headers=other).status_code == 404
    assert http.delete(f"/api/v1/alert-sinks/{sink['id']}", headers=other).status_code == 404

    assert http.delete(f"/api/v1/alert-sinks/{sink['id']}").status_code == 204
    assert http.get(f"/api/v1/alert-sinks/{sink['id']}").status_code == 404
    assert http.get("/api/v1/alert-sinks", headers={}).status_code in (200, 401)
    assert httpx.get(server.url + "/api/v1/alert-sinks").status_code == 401

    # The generated secret is a working one.
    from collapsewatch.alerts.webhook import sign

    sig = sign(secret, msg_id="m", timestamp=1, body=b"{}")
    verify(
        secret,
        {"webhook-id": "m", "webhook-timestamp": "1", "webhook-signature": sig},
        b"{}",
        now=1,
    )


def test_bad_sinks_get_422_naming_the_field(http: httpx.Client) -> None:
    def post(**body):
        base = {"name": "x", "kind": "webhook", "url": "https://ok.example/"}
        return http.post("/api/v1/alert-sinks", json=base | body)

    assert ["body", "kind"] in _locs(post(kind="email"))
    assert ["body", "url"] in _locs(post(url="not a url"))
    assert ["body", "url"] in _locs(post(url="ftp://files.example/x"))
    assert ["body", "secret"] in _locs(post(secret="whsec_###"))
    assert ["body", "secret"] in _locs(post(kind="slack", secret="whsec_" + "A" * 32))
    assert ["body", "min_severity"] in _locs(post(min_severity="info"))
    assert ["body", "rules", 0] in _locs(post(rules=["Bad Rule!"]))
    assert ["body", "colour"] in _locs(post(colour="red"))
    assert (
        http.post(
            "/api/v1/alert-sinks",
            json={"name": "dup", "kind": "slack", "url": "https://a.example/"},
        ).status_code
        == 201
    )
    assert ["body", "name"] in _locs(
        http.post(
            "/api/v1/alert-sinks",
            json={"name": "dup", "kind": "slack", "url": "https://b.example/"},
        )
    )
    sink_id = http.get("/api/v1/alert-sinks").json()[0]["id"]
    assert ["body", "enabled"] in _locs(
        http.patch(f"/api/v1/alert-sinks/{sink_id}", json={"enabled": None})
    )


def test_detector_threshold_overrides(http: httpx.Client) -> None:
    assert http.get("/api/v1/detector-settings").json() == {"overrides": {}}
    body = {"overrides": {"template_fire_fraction": 0.4, "window_steps": 7}}
    resp = http.put("/api/v1/detector-settings", json=body)
    assert resp.status_code == 200, resp.text
    stored = http.get("/api/v1/detector-settings").json()
    assert stored == body and isinstance(stored["overrides"]["window_steps"], int)

    assert ["body", "overrides", "window_steps"] in _locs(
        http.put("/api/v1/detector-settings", json={"overrides": {"window_steps": "ten"}})
    )
    # Bounds and types are the detectors' own: a fraction above 1, a fractional count.
    assert ["body", "overrides", "template_fire_fraction"] in _locs(
        http.put("/api/v1/detector-settings", json={"overrides": {"template_fire_fraction": 3}})
    )
    assert ["body", "overrides", "window_steps"] in _locs(
        http.put("/api/v1/detector-settings", json={"overrides": {"window_steps": 2.5}})
    )
    assert ["body", "overrides", "no_such_threshold"] in _locs(
        http.put("/api/v1/detector-settings", json={"overrides": {"no_such_threshold": 1}})
    )
    locs = _locs(http.put("/api/v1/detector-settings", json={"overrides": {"flag": True}}))
    assert any(loc[:3] == ["body", "overrides", "flag"] for loc in locs)
    assert ["body", "overrides", "Bad-Name"] in _locs(
        http.put("/api/v1/detector-settings", json={"overrides": {"Bad-Name": 1}})
    )
    assert http.put("/api/v1/detector-settings", json={"overrides": {}}).json() == {"overrides": {}}


def test_delivery_log_endpoint(http: httpx.Client, server) -> None:
    from collapsewatch.alerts import AlertSettings, deliver_due, enqueue
    from collapsewatch.store.models import AlertRow, Project
    from tests.alerts.receiver import Receiver

    receiver = Receiver().start()
    engine = make_engine(server.settings.resolved_database_url, pool_size=1)
    factory = make_sessionmaker(engine)
    try:
        run_id = http.post("/api/v1/runs", json={"name": "r"}).json()["id"]
        http.post(
            "/api/v1/alert-sinks",
            json={"name": "hook", "kind": "slack", "url": receiver.url + "/s"},
        )
        with session_scope(factory) as session:
            alert = AlertRow(
                run_id=run_id,
                rule="no_signal",
                severity="warning",
                state="firing",
                step_fired=3,
                message="m",
                evidence={},
            )
            session.add(alert)
            session.flush()
            enqueue(session, alert_id=alert.id, transition="firing", settings=AlertSettings())
        # The server's own worker may take the delivery first; either way it is sent once.
        deadline = time.monotonic() + 20
        while True:
            deliver_due(factory, AlertSettings())
            log = http.get("/api/v1/alert-deliveries").json()
            if log[0]["status"] != "pending" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(log) == 1
        assert log[0]["status"] == "delivered" and log[0]["kind"] == "slack"
        assert [a["status_code"] for a in log[0]["log"]] == [200]
        assert len(receiver.on("/s")) == 1
        assert http.get("/api/v1/alert-deliveries", params={"status": "failed"}).json() == []
        assert ["query", "status"] in _locs(
            http.get("/api/v1/alert-deliveries", params={"status": "lost"})
        )
    finally:
        receiver.stop()
        with session_scope(factory) as session:
            session.execute(delete(Project).where(Project.name == server.settings.project))
        engine.dispose()

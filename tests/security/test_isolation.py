"""A key of one project can neither read nor write another project's runs, alert sinks,
deliveries or detector settings; the dashboard scoped with --project shows one project.

Two projects with a key each on one real server (SQLite and PostgreSQL). Everything
of project A is asked for with B's key: each answer is the one a missing object gets
(404), or a list without A's objects, and A's data is unchanged afterwards.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from collapsewatch.store import keys
from collapsewatch.store.engine import make_engine, make_sessionmaker, session_scope
from tests.factories import step_batch


@pytest.fixture(scope="module")
def two_projects(module_server) -> dict:
    """Project A (the server's key) with a run, rollouts, cross-scores, a sink and
    detector overrides; project B with its own key and nothing else."""
    url = module_server.url
    a = {"Authorization": f"Bearer {module_server.api_key}"}
    b_key = keys.generate_key()
    engine = make_engine(module_server.settings.resolved_database_url, pool_size=1)
    with session_scope(make_sessionmaker(engine)) as session:
        keys.register_key(session, project=f"other-{uuid.uuid4().hex[:6]}", key=b_key)
    engine.dispose()
    b = {"Authorization": f"Bearer {b_key}"}
    with httpx.Client(base_url=url, headers=a, timeout=30) as http:
        run_id = http.post("/api/v1/runs", json={"name": "secret-run"}).json()["id"]
        assert http.post(
            f"/api/v1/runs/{run_id}/rollouts", json={"rollouts": step_batch(0)}
        ).is_success
        sink = http.post(
            "/api/v1/alert-sinks",
            json={"name": "a-hook", "kind": "webhook", "url": "https://example.com/hook"},
        ).json()
        assert http.put(
            "/api/v1/detector-settings", json={"overrides": {"cooldown_steps": 7.0}}
        ).is_success
    return {"url": url, "a": a, "b": b, "run_id": run_id, "sink_id": sink["id"]}


def _as(p: dict, who: str) -> httpx.Client:
    return httpx.Client(base_url=p["url"], headers=p[who], timeout=30)


def test_other_project_key_cannot_read_or_write_runs(two_projects) -> None:
    p = two_projects
    run = f"/api/v1/runs/{p['run_id']}"
    batch = {"rollouts": step_batch(1, prefix="intruder")}
    cross = {
        "step": 0,
        "rollout_ids": ["x"],
        "state_ids": ["s"],
        "logprob_sum": [[-1.0]],
        "num_tokens": [1],
    }
    with _as(p, "b") as b:
        for method, path, body in [
            ("GET", run, None),
            ("GET", f"{run}/metrics", None),
            ("GET", f"{run}/steps", None),
            ("GET", f"{run}/alerts", None),
            ("POST", f"{run}/rollouts", batch),
            ("POST", f"{run}/steps/0/complete", None),
            ("POST", f"{run}/cross-scores", cross),
            ("POST", f"{run}/metrics", [{"step": 0, "name": "kl", "value": 1.0}]),
        ]:
            resp = b.request(method, path, json=body)
            assert resp.status_code == 404, (method, path, resp.status_code)
            assert "not found" in resp.json()["detail"]
        assert b.get("/api/v1/runs").json() == []
        assert b.get("/api/v1/runs", params={"name": "secret-run"}).json() == []
        # B may use the same run name: it gets a run of its own, not A's.
        own = b.post("/api/v1/runs", json={"name": "secret-run"})
        assert own.status_code == 201 and own.json()["id"] != p["run_id"]
    with _as(p, "a") as a:
        assert a.get(run).json()["num_rollouts"] == 16
        assert a.get(f"{run}/steps").json()[0]["complete"] is False
        assert not any(
            pt["name"].startswith("trainer.") for pt in a.get(f"{run}/metrics").json()["points"]
        )


def test_other_project_key_cannot_touch_alert_sinks_or_detector_settings(two_projects) -> None:
    p = two_projects
    sink = f"/api/v1/alert-sinks/{p['sink_id']}"
    with _as(p, "b") as b:
        assert b.get("/api/v1/alert-sinks").json() == []
        assert b.get(sink).status_code == 404
        assert b.patch(sink, json={"url": "https://attacker.example/hook"}).status_code == 404
        assert b.delete(sink).status_code == 404
        assert b.get("/api/v1/alert-deliveries").json() == []
        assert b.get("/api/v1/detector-settings").json()["overrides"] == {}
        assert b.put("/api/v1/detector-settings", json={"overrides": {}}).is_success
    with _as(p, "a") as a:
        kept = a.get(sink).json()
        assert kept["url"] == "https://example.com/hook"
        assert a.get("/api/v1/detector-settings").json()["overrides"] == {"cooldown_steps": 7}


def test_dashboard_project_scope_shows_one_project(
    two_projects, module_server, monkeypatch
) -> None:
    from dashboard.app import DashboardData
    from dashboard.settings import DashboardSettings

    p = two_projects
    monkeypatch.setenv("COLLAPSEWATCH_DASHBOARD_PROJECT", module_server.settings.project)
    engine = make_engine(module_server.settings.resolved_database_url, pool_size=1)
    data = DashboardData(make_sessionmaker(engine), DashboardSettings())
    try:
        ids = [r.id for r in data.runs()]
        assert p["run_id"] in ids
        with _as(p, "b") as b:
            other = b.get("/api/v1/runs").json()
        assert other and not {r["id"] for r in other} & set(ids)
        assert data.run(other[0]["id"]) is None
        assert not data.run_page(other[0]["id"]).found
        assert data.step_page(other[0]["id"], 0) is None
    finally:
        engine.dispose()

from __future__ import annotations

import httpx

from tests.factories import step_batch


def test_healthz_reports_database(http: httpx.Client, db_url: str) -> None:
    resp = http.get("/healthz")
    assert resp.status_code == 200
    assert resp.json() == {
        "status": "ok",
        "database": "sqlite" if db_url.startswith("sqlite") else "postgresql",
    }


def test_create_run_is_create_or_get(http: httpx.Client) -> None:
    first = http.post(
        "/api/v1/runs", json={"name": "grpo-1", "config": {"lr": 1e-6}, "tags": ["a"]}
    )
    again = http.post("/api/v1/runs", json={"name": "grpo-1", "config": {"lr": 9.0}})
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    # The first config wins: a restarted trainer does not rewrite history.
    assert again.json()["config"] == {"lr": 1e-6}
    assert again.json()["tags"] == ["a"]


def test_list_runs_counts_rollouts_and_steps(http: httpx.Client, run_id: int) -> None:
    for step in (0, 1, 2):
        resp = http.post(
            f"/api/v1/runs/{run_id}/rollouts",
            json={"rollouts": step_batch(step, n_states=3, group_size=2)},
        )
        assert resp.status_code == 200, resp.text
    http.post("/api/v1/runs", json={"name": "empty-run"})
    runs = {r["name"]: r for r in http.get("/api/v1/runs").json()}
    assert runs["run-a"]["num_rollouts"] == 18
    assert runs["run-a"]["num_steps"] == 3
    assert runs["run-a"]["last_step"] == 2
    assert runs["empty-run"]["num_rollouts"] == 0
    assert runs["empty-run"]["last_step"] is None
    only = http.get("/api/v1/runs", params={"name": "run-a"}).json()
    assert [r["id"] for r in only] == [run_id]


def test_runs_are_scoped_to_the_key_project(http: httpx.Client, run_id: int, server) -> None:
    from collapsewatch.store import keys
    from collapsewatch.store.engine import make_engine, make_sessionmaker, session_scope

    other_key = keys.generate_key()
    engine = make_engine(server.settings.resolved_database_url)
    with session_scope(make_sessionmaker(engine)) as session:
        keys.register_key(session, project=server.settings.project + "-other", key=other_key)
    engine.dispose()
    other = {"Authorization": f"Bearer {other_key}"}
    assert http.get(f"/api/v1/runs/{run_id}", headers=other).status_code == 404
    assert http.get("/api/v1/runs", headers=other).json() == []
    resp = http.post(
        f"/api/v1/runs/{run_id}/rollouts", headers=other, json={"rollouts": step_batch(0)}
    )
    assert resp.status_code == 404
    assert http.get(f"/api/v1/runs/{run_id}").json()["num_rollouts"] == 0

"""Failures that must not stop monitoring: detector errors, huge values, NaN metrics."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from collapsewatch.detect.history import Window
from tests.factories import step_batch


def test_window_statistics_do_not_overflow_on_huge_values() -> None:
    w = Window((1, 2, 3), (1e200, 3e200, 2e200))
    assert w.mean == pytest.approx(2e200)
    assert w.sd == pytest.approx(1e200)
    assert Window((1, 2), (1.0, 3.0)).sd == pytest.approx(2**0.5)


def _wait_steps(http: httpx.Client, run_id: int, n: int) -> list[dict]:
    deadline = time.monotonic() + 60
    while True:
        steps = http.get(f"/api/v1/runs/{run_id}/steps").json()
        if len([s for s in steps if s["scored"]]) >= n or time.monotonic() > deadline:
            return steps
        time.sleep(0.1)


def test_detector_failure_still_scores_the_step_and_says_why(
    server, monkeypatch: pytest.MonkeyPatch
) -> None:
    import collapsewatch.detect as detect

    def broken(*args, **kwargs):
        raise OverflowError("math range error")

    monkeypatch.setattr(detect, "replay", broken)
    headers = {"Authorization": f"Bearer {server.api_key}"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        run_id = http.post("/api/v1/runs", json={"name": "r"}).json()["id"]
        body = {"rollouts": step_batch(0), "complete_steps": [0]}
        assert http.post(f"/api/v1/runs/{run_id}/rollouts", json=body).status_code == 200
        (step,) = _wait_steps(http, run_id, 1)
        names = {p["name"] for p in http.get(f"/api/v1/runs/{run_id}/metrics").json()["points"]}
    assert step["scored"] and not step["pending"]
    assert "alert evaluation failed: OverflowError" in step["last_error"]
    assert "correctness.reward_mean" in names


def test_huge_rewards_are_scored_and_evaluated(server) -> None:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        run_id = http.post("/api/v1/runs", json={"name": "huge"}).json()["id"]
        for step in range(12):
            batch = step_batch(step, n_states=2, group_size=2)
            for r in batch:
                r["reward"] = (1 + step) * 1e200
            body = {"rollouts": batch, "complete_steps": [step]}
            assert http.post(f"/api/v1/runs/{run_id}/rollouts", json=body).status_code == 200
        steps = _wait_steps(http, run_id, 12)
    assert [s["step"] for s in steps if s["scored"]] == list(range(12))
    assert all(s["last_error"] is None for s in steps)


def test_nan_trainer_metric_raises_nonfinite_on_every_backend(server) -> None:
    headers = {"Authorization": f"Bearer {server.api_key}", "content-type": "application/json"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        run_id = http.post("/api/v1/runs", json={"name": "nan"}).json()["id"]
        points = [{"step": 1, "name": "loss", "value": float("nan")}]
        resp = http.post(f"/api/v1/runs/{run_id}/metrics", content=json.dumps(points))
        assert resp.status_code < 300, resp.text
        for step in range(3):
            body = {"rollouts": step_batch(step), "complete_steps": [step]}
            http.post(f"/api/v1/runs/{run_id}/rollouts", content=json.dumps(body))
        _wait_steps(http, run_id, 3)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            alerts = http.get(f"/api/v1/runs/{run_id}/alerts").json()
            if alerts:
                break
            time.sleep(0.2)
        served = http.get(f"/api/v1/runs/{run_id}/metrics", params={"name": "trainer.loss"})
    by_rule = {a["rule"]: a for a in alerts}
    assert "trainer.loss" in json.dumps(by_rule["nonfinite"]["evidence"])
    assert served.json()["points"][0]["value"] is None  # JSON has no NaN

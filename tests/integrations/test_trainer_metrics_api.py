"""POST /api/v1/runs/{id}/metrics: trainer-reported points, stored as trainer.* series,
validated with 422s that name the field (SQLite and PostgreSQL)."""

from __future__ import annotations

import math

import httpx
import pytest

from tests.integrations.conftest import series


@pytest.fixture
def run_id(http: httpx.Client) -> int:
    resp = http.post("/api/v1/runs", json={"name": "trainer-metrics"})
    assert resp.status_code == 201, resp.text
    return int(resp.json()["id"])


def test_points_are_stored_under_the_trainer_prefix(http: httpx.Client, run_id: int) -> None:
    body = [
        {"step": 3, "name": "diversity.token_entropy", "value": 1.25},
        {"step": 3, "name": "policy.clip_ratio", "value": 0.02},
        {"step": 4, "name": "trainer.policy.kl_ref", "value": None},  # already prefixed
        {"step": 4, "name": "timing_s.gen", "value": 12},
    ]
    resp = http.post(f"/api/v1/runs/{run_id}/metrics", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"accepted": 4, "steps": [3, 4]}
    rows = series(http, run_id)
    assert rows == {
        3: {"trainer.diversity.token_entropy": 1.25, "trainer.policy.clip_ratio": 0.02},
        4: {"trainer.policy.kl_ref": None, "trainer.timing_s.gen": 12.0},
    }
    points = http.get(f"/api/v1/runs/{run_id}/metrics").json()["points"]
    assert {p["representation"] for p in points} == {None}


def test_a_point_replaces_the_same_step_and_name(http: httpx.Client, run_id: int) -> None:
    url = f"/api/v1/runs/{run_id}/metrics"
    assert http.post(url, json=[{"step": 1, "name": "policy.loss", "value": 0.5}]).is_success
    resp = http.post(
        url,
        json=[
            {"step": 1, "name": "policy.loss", "value": 0.4},
            {"step": 1, "name": "policy.loss", "value": 0.3},  # the last one wins
        ],
    )
    assert resp.json() == {"accepted": 1, "steps": [1]}
    assert series(http, run_id) == {1: {"trainer.policy.loss": 0.3}}


def test_non_finite_values_are_kept(http: httpx.Client, run_id: int) -> None:
    content = '[{"step": 0, "name": "policy.grad_norm", "value": NaN}]'
    resp = http.post(
        f"/api/v1/runs/{run_id}/metrics",
        content=content,
        headers={"Content-Type": "application/json"},
    )
    assert resp.status_code == 200, resp.text
    value = series(http, run_id)[0]["trainer.policy.grad_norm"]
    assert value is None or math.isnan(value)  # NaN as the database returns it


@pytest.mark.parametrize(
    ("point", "loc", "needle"),
    [
        ({"step": -1, "name": "a", "value": 1}, ["body", 1, "step"], "greater than or equal"),
        ({"step": 0, "name": "bad/name", "value": 1}, ["body", 1, "name"], "letters, digits"),
        ({"step": 0, "name": "x" * 121, "value": 1}, ["body", 1, "name"], "the limit is 128"),
        ({"step": 0, "name": "a", "value": "high"}, ["body", 1, "value"], "valid number"),
        ({"step": 0, "name": "a"}, ["body", 1, "value"], "Field required"),
        ({"step": 0, "name": "a", "value": 1, "unit": "s"}, ["body", 1, "unit"], "Extra"),
    ],
)
def test_invalid_points_get_422_naming_the_field(
    http: httpx.Client, run_id: int, point: dict, loc: list, needle: str
) -> None:
    good = {"step": 0, "name": "policy.loss", "value": 1.0}
    resp = http.post(f"/api/v1/runs/{run_id}/metrics", json=[good, point])
    assert resp.status_code == 422, resp.text
    problem = resp.json()
    assert problem["status"] == 422
    assert [e["loc"] for e in problem["errors"]] == [loc]
    assert needle in problem["errors"][0]["msg"]
    assert series(http, run_id) == {}  # nothing of an invalid request is stored


def test_body_must_be_a_list_of_limited_length(http: httpx.Client, run_id: int) -> None:
    url = f"/api/v1/runs/{run_id}/metrics"
    resp = http.post(url, json={"step": 0, "name": "a", "value": 1})
    assert resp.status_code == 422
    assert resp.json()["errors"][0]["loc"] == ["body"]
    too_many = [{"step": i, "name": "a", "value": 1} for i in range(10_001)]
    resp = http.post(url, json=too_many)
    assert resp.status_code == 422
    assert resp.json()["errors"][0]["loc"] == ["body"]


def test_auth_and_unknown_run(server, http: httpx.Client, run_id: int) -> None:
    body = [{"step": 0, "name": "a", "value": 1}]
    anonymous = httpx.post(f"{server.url}/api/v1/runs/{run_id}/metrics", json=body)
    assert anonymous.status_code == 401
    assert http.post("/api/v1/runs/999999/metrics", json=body).status_code == 404

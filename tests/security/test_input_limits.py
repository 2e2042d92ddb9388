"""Input the database cannot hold, and the limits tests/api does not reach.

Each case was a 500 before (found by test_fuzz.py) or a limit without a test: text with
NUL or unpaired surrogates, integers past the INTEGER columns, and the size limits on
the other text fields, on cross-scores and on endpoints other than rollouts. Every
answer is a 4xx problem document; nothing is stored.
"""

from __future__ import annotations

import json

import httpx
import pytest

from collapsewatch.server import EmbeddedServer
from tests.conftest import make_settings
from tests.factories import rollout

BIG = 2**31  # one past PostgreSQL's INTEGER


def _post(http: httpx.Client, path: str, raw: str) -> httpx.Response:
    return http.post(path, content=raw, headers={"content-type": "application/json"})


def _rollouts_body(**fields) -> str:
    return json.dumps({"rollouts": [{**rollout("bad"), **fields}]})


@pytest.fixture(scope="module")
def run_id(module_http: httpx.Client) -> int:
    return module_http.post("/api/v1/runs", json={"name": "limits"}).json()["id"]


BAD_ROLLOUTS = [
    ("NUL in reasoning", {"turns": [{"index": 0, "reasoning": "a\x00b"}]}, "turns.0.reasoning"),
    ("NUL in rollout_id", {"rollout_id": "x\x00"}, "rollouts.0.rollout_id"),
    ("NUL in metadata", {"metadata": {"k": "v\x00"}}, "rollouts.0.metadata"),
    ("NUL in a metadata key", {"metadata": {"k\x00": 1}}, "rollouts.0.metadata"),
    ("step past INTEGER", {"step": BIG}, "rollouts.0.step"),
    ("turn index past INTEGER", {"turns": [{"index": BIG}]}, "turns.0.index"),
    ("num_tokens past INTEGER", {"turns": [{"index": 0, "num_tokens": BIG}]}, "num_tokens"),
]


@pytest.mark.parametrize("name,fields,loc", BAD_ROLLOUTS, ids=[b[0] for b in BAD_ROLLOUTS])
def test_unstorable_rollouts_get_422_naming_the_field(
    module_http: httpx.Client, run_id: int, name: str, fields: dict, loc: str
) -> None:
    resp = _post(module_http, f"/api/v1/runs/{run_id}/rollouts", _rollouts_body(**fields))
    assert resp.status_code == 422, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert loc in resp.json()["detail"]


def test_unpaired_surrogates_get_422(module_http: httpx.Client, run_id: int) -> None:
    # JSON may escape a lone surrogate; it is not Unicode text and cannot be stored.
    raw = _rollouts_body(turns=[{"index": 0, "reasoning": "SURROGATE"}]).replace(
        "SURROGATE", "\\ud800"
    )
    resp = _post(module_http, f"/api/v1/runs/{run_id}/rollouts", raw)
    assert resp.status_code == 422 and "turns.0.reasoning" in resp.json()["detail"]
    resp = _post(module_http, "/api/v1/runs", '{"name": "r\\udc00"}')
    assert resp.status_code == 422 and "name" in resp.json()["detail"]
    resp = _post(module_http, "/api/v1/runs", '{"name": "c", "config": {"k": "\\ud800"}}')
    assert resp.status_code == 422 and "config" in resp.json()["detail"]
    assert module_http.get(f"/api/v1/runs/{run_id}").json()["num_rollouts"] == 0


@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", f"/api/v1/runs/{BIG}"),
        ("GET", f"/api/v1/runs/{10**40}/metrics"),
        ("POST", f"/api/v1/runs/1/steps/{BIG}/complete"),
        ("GET", f"/api/v1/runs/1/metrics?since_step={BIG}"),
        ("GET", f"/api/v1/alert-sinks/{BIG}"),
        ("GET", f"/api/v1/alert-deliveries?alert_id={BIG}"),
    ],
)
def test_ids_past_integer_are_4xx(module_http: httpx.Client, method: str, path: str) -> None:
    resp = module_http.request(method, path)
    # 422 for the out-of-range number, or 404 when the run is checked first.
    assert resp.status_code in (404, 422), resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")


def test_text_the_database_refuses_anywhere_is_4xx(module_http: httpx.Client) -> None:
    """Fields without a NUL rule of their own (sink names, query strings) still get a 4xx:
    PostgreSQL's refusal is answered as 422, SQLite stores the text as it is."""
    sink = _post(
        module_http,
        "/api/v1/alert-sinks",
        '{"name": "a\\u0000b", "kind": "slack", "url": "https://hooks.slack.com/x"}',
    )
    assert sink.status_code in (201, 422), sink.text
    assert module_http.get("/api/v1/runs", params={"name": "a\x00b"}).status_code in (200, 422)


@pytest.mark.parametrize("field", ["observation", "action"])
def test_text_length_limit_on_every_text_field(db_url: str, tmp_path, field: str) -> None:
    settings = make_settings(db_url, tmp_path, max_text_chars=100)
    with (
        EmbeddedServer(settings, workers=0) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.api_key}"}) as http,
    ):
        run = http.post("/api/v1/runs", json={"name": "t"}).json()["id"]
        body = {"rollouts": [rollout("long", turns=[{"index": 0, field: "x" * 101}])]}
        resp = http.post(f"/api/v1/runs/{run}/rollouts", json=body)
        assert resp.status_code == 422
        assert f"turns.0.{field}" in resp.json()["detail"]
        assert "COLLAPSEWATCH_MAX_TEXT_CHARS" in resp.json()["detail"]


def test_size_limits_hold_on_other_endpoints(db_url: str, tmp_path) -> None:
    settings = make_settings(db_url, tmp_path, max_request_bytes=20_000, max_batch_rollouts=3)
    with (
        EmbeddedServer(settings, workers=0) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.api_key}"}) as http,
    ):
        run = http.post("/api/v1/runs", json={"name": "s"}).json()["id"]
        big_config = {"name": "huge", "config": {"blob": "x" * 30_000}}
        resp = http.post("/api/v1/runs", json=big_config)
        assert resp.status_code == 413 and "COLLAPSEWATCH_MAX_REQUEST_BYTES" in resp.text
        points = [{"step": 0, "name": f"m{i}", "value": 1.0} for i in range(2_000)]
        assert http.post(f"/api/v1/runs/{run}/metrics", json=points).status_code == 413
        cross = {
            "step": 0,
            "rollout_ids": ["a", "b", "c", "d"],
            "state_ids": ["s"],
            "logprob_sum": [[-1.0]] * 4,
            "num_tokens": [1] * 4,
        }
        resp = http.post(f"/api/v1/runs/{run}/cross-scores", json=cross)
        assert resp.status_code == 422 and "COLLAPSEWATCH_MAX_BATCH_ROLLOUTS" in resp.text
        assert http.get("/api/v1/runs", params={"name": "huge"}).json() == []

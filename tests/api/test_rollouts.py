from __future__ import annotations

import httpx
import pytest

from tests.factories import rollout, step_batch


def _count(http: httpx.Client, run_id: int) -> int:
    return http.get(f"/api/v1/runs/{run_id}").json()["num_rollouts"]


def test_ingest_is_idempotent_on_rollout_id(http: httpx.Client, run_id: int) -> None:
    batch = {"rollouts": step_batch(0)}
    first = http.post(f"/api/v1/runs/{run_id}/rollouts", json=batch).json()
    second = http.post(f"/api/v1/runs/{run_id}/rollouts", json=batch).json()
    assert (first["accepted"], first["duplicates"]) == (16, 0)
    assert (second["accepted"], second["duplicates"]) == (0, 16)
    assert sorted(second["duplicate_rollout_ids"]) == sorted(
        r["rollout_id"] for r in batch["rollouts"]
    )
    assert _count(http, run_id) == 16
    # A batch mixing new and stored rollouts stores only the new ones.
    mixed = step_batch(0)[:3] + [rollout("fresh-1", step=0)]
    third = http.post(f"/api/v1/runs/{run_id}/rollouts", json={"rollouts": mixed}).json()
    assert (third["accepted"], third["duplicates"]) == (1, 3)
    assert _count(http, run_id) == 17


def test_turns_round_trip_into_steps_view(http: httpx.Client, run_id: int) -> None:
    r = rollout(
        "multi",
        step=3,
        turns=[
            {
                "index": 0,
                "observation": "o0",
                "reasoning": "z0",
                "action": "a0",
                "token_entropy": 1.5,
                "num_tokens": 12,
                "logprob": -3.0,
            },
            {"index": 1, "observation": "o1", "reasoning": "z1", "action": "a1", "done": True},
        ],
    )
    resp = http.post(
        f"/api/v1/runs/{run_id}/rollouts", json={"rollouts": [r], "complete_steps": [3]}
    )
    assert resp.json()["steps"] == [3]
    steps = http.get(f"/api/v1/runs/{run_id}/steps").json()
    assert [(s["step"], s["num_rollouts"], s["complete"]) for s in steps] == [(3, 1, True)]


BAD_INPUTS = [
    # (description, body or raw bytes, expected status, text that the detail must contain)
    ("malformed JSON", b'{"rollouts": [', 422, "JSON"),
    (
        "missing field",
        {"rollouts": [{"rollout_id": "x", "step": 0, "reward": 1.0, "turns": [{"index": 0}]}]},
        422,
        "rollouts.0.state_id",
    ),
    ("negative step", {"rollouts": [rollout("neg", step=-1)]}, 422, "rollouts.0.step"),
    (
        "NaN in metadata",
        {"rollouts": [rollout("m", metadata={"x": float("nan")})]},
        422,
        "rollouts.0.metadata",
    ),
    (
        "entropy below 0",
        {"rollouts": [rollout("h", turns=[{"index": 0, "token_entropy": -1}])]},
        422,
        "rollouts.0.turns.0.token_entropy",
    ),
    ("empty turns", {"rollouts": [rollout("e", turns=[])]}, 422, "rollouts.0.turns"),
    (
        "duplicate id in batch",
        {"rollouts": [rollout("d"), rollout("d")]},
        422,
        "rollouts.1.rollout_id",
    ),
    ("unknown field", {"rollouts": [rollout("u", rewrad=1.0)]}, 422, "rewrad"),
]


@pytest.mark.parametrize("name,body,status,needle", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_gets_4xx_naming_the_field_and_stores_nothing(
    http: httpx.Client, run_id: int, name: str, body: object, status: int, needle: str
) -> None:
    good = http.post(f"/api/v1/runs/{run_id}/rollouts", json={"rollouts": step_batch(0)})
    assert good.status_code == 200
    if isinstance(body, bytes):
        resp = http.post(
            f"/api/v1/runs/{run_id}/rollouts",
            content=body,
            headers={"content-type": "application/json"},
        )
    else:
        import json

        resp = http.post(
            f"/api/v1/runs/{run_id}/rollouts",
            content=json.dumps(body, allow_nan=True),
            headers={"content-type": "application/json"},
        )
    assert resp.status_code == status, resp.text
    problem = resp.json()
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert problem["status"] == status
    assert needle in problem["detail"], problem["detail"]
    assert _count(http, run_id) == 16


def test_ten_megabyte_text_field_is_rejected_by_name(http: httpx.Client, run_id: int) -> None:
    big = rollout("big", turns=[{"index": 0, "reasoning": "x" * 10_000_000}])
    resp = http.post(f"/api/v1/runs/{run_id}/rollouts", json={"rollouts": [big]})
    assert resp.status_code == 422
    assert "rollouts.0.turns.0.reasoning" in resp.json()["detail"]
    assert "COLLAPSEWATCH_MAX_TEXT_CHARS" in resp.json()["detail"]
    assert _count(http, run_id) == 0


def test_body_over_request_limit_is_413(db_url: str, tmp_path) -> None:
    from collapsewatch.server import EmbeddedServer
    from tests.conftest import make_settings

    settings = make_settings(db_url, tmp_path, max_request_bytes=50_000)
    with (
        EmbeddedServer(settings) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.api_key}"}) as http,
    ):
        run_id = http.post("/api/v1/runs", json={"name": "r"}).json()["id"]
        big = rollout("big", turns=[{"index": 0, "reasoning": "y" * 60_000}])
        resp = http.post(f"/api/v1/runs/{run_id}/rollouts", json={"rollouts": [big]})
        assert resp.status_code == 413
        assert "50000 bytes" in resp.json()["detail"]

        # Chunked upload without Content-Length is counted as it streams.
        def chunks():
            yield b'{"rollouts": [{"rollout_id": "c", "step": 0, "state_id": "s", "reward": 0,'
            yield b'"turns": [{"index": 0, "reasoning": "' + b"z" * 60_000 + b'"}]}]}'

        resp = http.post(
            f"/api/v1/runs/{run_id}/rollouts",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert resp.status_code == 413
        assert http.get(f"/api/v1/runs/{run_id}").json()["num_rollouts"] == 0


def test_batch_size_limit(db_url: str, tmp_path) -> None:
    from collapsewatch.server import EmbeddedServer
    from tests.conftest import make_settings

    with (
        EmbeddedServer(make_settings(db_url, tmp_path, max_batch_rollouts=10)) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.api_key}"}) as http,
    ):
        run_id = http.post("/api/v1/runs", json={"name": "r"}).json()["id"]
        resp = http.post(f"/api/v1/runs/{run_id}/rollouts", json={"rollouts": step_batch(0)})
        assert resp.status_code == 422
        assert "16 rollouts; the limit is 10" in resp.json()["detail"]


def test_auth_errors(server, run_id: int) -> None:
    url = f"{server.url}/api/v1/runs/{run_id}/rollouts"
    body = {"rollouts": step_batch(0)}
    no_key = httpx.post(url, json=body)
    assert no_key.status_code == 401
    assert "Missing API key" in no_key.json()["detail"]
    wrong = httpx.post(url, json=body, headers={"Authorization": "Bearer cw_wrong"})
    assert wrong.status_code == 401
    assert "Unknown" in wrong.json()["detail"]


def test_unknown_run_is_404(http: httpx.Client) -> None:
    resp = http.post("/api/v1/runs/999999/rollouts", json={"rollouts": step_batch(0)})
    assert resp.status_code == 404
    assert "Run 999999 not found" in resp.json()["detail"]
    assert http.get("/api/v1/runs/999999/metrics").status_code == 404


def test_non_finite_numbers_are_stored_as_sent(http: httpx.Client, run_id: int, server) -> None:
    """NaN/Inf from a trainer are data for the nonfinite detector, not a 422."""
    import json
    import math

    from collapsewatch.store import queries
    from collapsewatch.store.engine import make_engine, make_sessionmaker

    body = {
        "rollouts": [
            rollout(
                "nan-1",
                step=5,
                reward=float("nan"),
                turns=[
                    {
                        "index": 0,
                        "reasoning": "z",
                        "token_entropy": float("inf"),
                        "logprob": float("-inf"),
                        "reward": float("nan"),
                    }
                ],
            )
        ]
    }
    resp = http.post(
        f"/api/v1/runs/{run_id}/rollouts",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 200, resp.text
    engine = make_engine(server.settings.resolved_database_url)
    with make_sessionmaker(engine)() as session:
        (stored,) = queries.load_step_rollouts(session=session, run_id=run_id, step=5)
    engine.dispose()
    assert math.isnan(stored.reward)
    turn = stored.turns[0]
    assert math.isnan(turn.reward)
    assert turn.token_entropy == math.inf
    assert turn.logprob == -math.inf


def test_cross_scores_round_trip(http: httpx.Client, run_id: int, server) -> None:
    from collapsewatch.store import queries
    from collapsewatch.store.engine import make_engine, make_sessionmaker

    body = {
        "step": 1,
        "rollout_ids": ["a", "b", "c"],
        "state_ids": ["x", "y"],
        "logprob_sum": [[-1.0, -2.5], [-3.0, -0.5], [-7.25, -7.0]],
        "num_tokens": [2, 4, 5],
    }
    assert http.post(f"/api/v1/runs/{run_id}/cross-scores", json=body).status_code == 204
    body["logprob_sum"][0][0] = -1.5  # re-posting a step replaces its matrix
    assert http.post(f"/api/v1/runs/{run_id}/cross-scores", json=body).status_code == 204
    bad = dict(body, num_tokens=[2, 4])
    resp = http.post(f"/api/v1/runs/{run_id}/cross-scores", json=bad)
    assert resp.status_code == 422
    assert "num_tokens must have 3 entries" in resp.json()["detail"]
    engine = make_engine(server.settings.resolved_database_url)
    with make_sessionmaker(engine)() as session:
        cs = queries.load_cross_scores(session=session, run_id=run_id, step=1)
    engine.dispose()
    assert cs.logprob_sum == [[-1.5, -2.5], [-3.0, -0.5], [-7.25, -7.0]]
    assert (cs.rollout_ids, cs.state_ids, cs.num_tokens) == (["a", "b", "c"], ["x", "y"], [2, 4, 5])


def test_complete_steps_is_limited_like_a_batch(db_url: str, tmp_path) -> None:
    from collapsewatch.server import EmbeddedServer
    from tests.conftest import make_settings

    with (
        EmbeddedServer(make_settings(db_url, tmp_path, max_batch_rollouts=10)) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.api_key}"}) as http,
    ):
        run_id = http.post("/api/v1/runs", json={"name": "r"}).json()["id"]
        resp = http.post(
            f"/api/v1/runs/{run_id}/rollouts", json={"complete_steps": list(range(11))}
        )
        assert resp.status_code == 422
        assert "complete_steps: 11 steps; the limit is 10" in resp.json()["detail"]
        assert http.get(f"/api/v1/runs/{run_id}/steps").json() == []


def test_cross_scores_rows_must_be_distinct(http: httpx.Client, run_id: int) -> None:
    body = {
        "step": 0,
        "rollout_ids": ["a", "a"],
        "state_ids": ["x", "y"],
        "logprob_sum": [[-1.0, -2.0], [-1.0, -2.0]],
        "num_tokens": [1, 1],
    }
    resp = http.post(f"/api/v1/runs/{run_id}/cross-scores", json=body)
    assert resp.status_code == 422
    assert "rollout_ids must be distinct" in resp.json()["detail"]

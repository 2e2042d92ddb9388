"""The SDK against the real API: create_app under uvicorn on loopback, SQLite in tmp."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from collapsewatch import Client
from collapsewatch.server import free_port
from collapsewatch.settings import Settings
from tests.factories import step_batch, turn
from tests.servers import RestartableApi

pytestmark = pytest.mark.slow


@pytest.fixture
def api(tmp_path: Path) -> Iterator[RestartableApi]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'cw.db'}",
        project="sdk-test",
        max_text_chars=2000,
        port=free_port(),
    )
    server = RestartableApi(settings)
    server.start()
    yield server
    server.stop()


def _client(api: RestartableApi, tmp_path: Path, **kwargs) -> Client:
    options = {
        "url": api.url,
        "api_key": api.api_key,
        "spool_dir": tmp_path / "spool",
        "batch_size": 20,
        "flush_interval": 0.05,
        "retry_backoff": 0.01,
        "retry_backoff_max": 0.1,
    }
    options.update(kwargs)
    return Client("sdk-e2e", **options)


def _cross(step: int) -> dict:
    rollouts = step_batch(step)
    states = sorted({r["state_id"] for r in rollouts})
    return {
        "step": step,
        "rollout_ids": [r["rollout_id"] for r in rollouts],
        "state_ids": states,
        "logprob_sum": [[-1.0 - j for j in range(len(states))] for _ in rollouts],
        "num_tokens": [5] * len(rollouts),
    }


def test_delivery_through_an_outage_stores_everything_once(api, tmp_path):
    client = _client(api, tmp_path, config={"lr": 1e-6}, tags=["e2e"])
    for step in range(3):
        client.log_rollouts(step, step_batch(step))  # 16 rollouts per step
        client.log_cross_scores(_cross(step))
        client.complete_step(step)
    assert client.flush(timeout=20)
    run = api.get(f"/api/v1/runs/{client.run_id}").json()
    assert (run["num_rollouts"], run["num_steps"], run["config"]) == (48, 3, {"lr": 1e-6})

    api.stop()
    for step in range(3, 6):
        client.log_rollouts(step, step_batch(step))
        client.log_cross_scores(_cross(step))
        client.complete_step(step)
    assert client.flush(timeout=20)
    assert client.stats().spool_pending == 48

    api.start()
    assert client.flush(timeout=20)
    stats = client.stats()
    assert (stats.sent, stats.duplicates, stats.spool_pending, stats.logged) == (96, 0, 0, 96)
    assert (stats.cross_scores_sent, stats.cross_scores_dropped) == (6, 0)
    run = api.get(f"/api/v1/runs/{client.run_id}").json()
    assert (run["num_rollouts"], run["num_steps"], run["last_step"]) == (96, 6, 5)

    # A client that sends the same rollouts again stores nothing twice.
    again = _client(api, tmp_path / "again")
    again.log_rollouts(0, step_batch(0))
    assert again.close(timeout=20)
    assert again.run_id == client.run_id
    assert (again.stats().sent, again.stats().duplicates) == (16, 16)
    assert api.get(f"/api/v1/runs/{client.run_id}").json()["num_rollouts"] == 96
    assert client.close(timeout=10)


def test_server_refusals(api, tmp_path, caplog):
    client = _client(api, tmp_path)
    rollouts = step_batch(0, n_states=1, group_size=4)
    rollouts[2]["turns"] = [turn(reasoning="x" * 5000)]  # over max_text_chars
    with caplog.at_level("WARNING", logger="collapsewatch"):
        client.log_rollouts(0, rollouts)
        assert client.flush(timeout=20)
    stats = client.stats()
    assert (stats.sent, stats.dropped_rejected) == (3, 1)
    assert any("max_text_chars" in r.getMessage().lower() for r in caplog.records)

    wrong = _client(api, tmp_path / "wrong", api_key="not-a-key")
    wrong.log_rollouts(0, step_batch(1))
    assert wrong.close(timeout=10)
    assert wrong.stats().spool_pending == 16  # kept for a client with the right key
    assert client.close(timeout=10)

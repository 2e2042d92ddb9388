"""The server goes away while the SDK logs thousands of rollouts.

Against the real API and database (SQLite and PostgreSQL): the SDK spools to disk while
the server is down and delivers everything once it is back on the same port. The
database then holds exactly the rollout ids that were logged, each once. When the spool
is full, what is dropped is counted in ``stats()`` and said in a warning.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from collapsewatch import Client
from collapsewatch.store.engine import make_engine, make_sessionmaker
from collapsewatch.store.models import RolloutRow, Run, TurnRow
from tests.servers import RestartableApi

pytestmark = pytest.mark.slow

STEPS = 30
PER_STEP = 100


def _rollouts(step: int, prefix: str = "r") -> list[dict]:
    return [
        {
            "rollout_id": f"{prefix}{step}-{i}",
            "state_id": f"s{i % 10}",
            "reward": float(i % 2),
            "turns": [
                {"index": 0, "observation": f"obs {i}", "reasoning": f"think {step} {i}"},
                {"index": 1, "observation": "again", "action": "up", "done": True},
            ],
        }
        for i in range(PER_STEP)
    ]


def _stored(api: RestartableApi, run_name: str) -> tuple[list[str], int]:
    """(rollout ids of the run, one per stored row) and the number of turn rows."""
    engine = make_engine(api.settings.resolved_database_url, pool_size=1)
    with make_sessionmaker(engine)() as session:
        run_id = session.scalar(select(Run.id).where(Run.name == run_name))
        ids = list(
            session.scalars(select(RolloutRow.rollout_id).where(RolloutRow.run_id == run_id))
        )
        turns = session.scalar(
            select(func.count(TurnRow.id))
            .join(RolloutRow, RolloutRow.id == TurnRow.rollout_pk)
            .where(RolloutRow.run_id == run_id)
        )
    engine.dispose()
    return ids, int(turns or 0)


def _client(api: RestartableApi, tmp_path: Path, run: str, **kwargs) -> Client:
    options = {
        "url": api.url,
        "api_key": api.api_key,
        "spool_dir": tmp_path / f"spool-{run}",
        "batch_size": 100,
        "flush_interval": 0.05,
        "timeout": 5.0,
        "max_retries": 2,
        "retry_backoff": 0.01,
        "retry_backoff_max": 0.2,
    }
    options.update(kwargs)
    return Client(run, **options)


def test_outage_mid_run_spools_and_delivers_everything_once(restartable_api, tmp_path) -> None:
    api = restartable_api
    client = _client(api, tmp_path, "outage")
    expected: set[str] = set()
    for step in range(STEPS):
        if step == 5:
            assert client.flush(timeout=30)
            api.stop()  # the server goes away in the middle of the run
        if step == 20:
            api.start()  # and comes back on the same port
        batch = _rollouts(step)
        expected |= {r["rollout_id"] for r in batch}
        client.log_rollouts(step, batch)
        client.complete_step(step)
        time.sleep(0.01)  # a training step's worth of other work
    assert client.flush(timeout=60)
    assert client.flush(timeout=60)  # resends what the first flush left in the spool
    stats = client.stats()
    assert client.close(timeout=10)

    ids, turns = _stored(api, "outage")
    assert len(ids) == len(set(ids)) == STEPS * PER_STEP  # nothing doubled
    assert set(ids) == expected  # nothing lost
    assert turns == 2 * STEPS * PER_STEP
    assert stats.spooled > 0, "the outage never reached the spool"
    assert (stats.logged, stats.sent, stats.spool_pending) == (STEPS * PER_STEP,) * 2 + (0,)
    assert stats.dropped_full == stats.dropped_invalid == stats.dropped_rejected == 0
    assert list((tmp_path / "spool-outage").glob("*.jsonl")) == []


def test_full_spool_drops_are_counted_and_said(restartable_api, tmp_path, caplog) -> None:
    api = restartable_api
    api.stop()
    # Room for a few batches of 100 rollouts (about 20 KB each), not for 2,000 rollouts.
    client = _client(api, tmp_path, "full", max_spool_bytes=100_000)
    logged: set[str] = set()
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        for step in range(20):
            batch = _rollouts(step, prefix="f")
            logged |= {r["rollout_id"] for r in batch}
            client.log_rollouts(step, batch)
        assert client.flush(timeout=30)
    stats = client.stats()
    assert stats.dropped_full > 0
    assert stats.logged == stats.spool_pending + stats.dropped_full == 2000
    assert any("dropped" in r.getMessage() and "spool" in r.getMessage() for r in caplog.records)

    api.start()
    assert client.flush(timeout=60)
    after = client.stats()
    assert client.close(timeout=10)
    ids, _ = _stored(api, "full")
    assert after.spool_pending == 0
    assert len(ids) == len(set(ids)) == after.sent == 2000 - stats.dropped_full
    assert set(ids) <= logged

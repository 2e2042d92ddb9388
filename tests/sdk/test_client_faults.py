"""Client under server trouble: retries, refusals, a server that goes away, full spool/queue."""

from __future__ import annotations

import socket
import time

import pytest

from collapsewatch import Client
from tests.factories import rollout


def _ids(prefix: str, n: int, step: int = 0) -> list[dict]:
    return [rollout(f"{prefix}{i}", step=step) for i in range(n)]


@pytest.mark.parametrize("status", [503, 500, 429])
def test_retry_then_success_delivers_once(make_client, receiver, status):
    client = make_client(batch_size=100)
    receiver.cue(status, times=2)
    client.log_rollouts(0, _ids("r", 20))
    assert client.flush(timeout=5)

    attempts = receiver.batch_requests()
    assert [a.status for a in attempts] == [status, status, 200]
    assert all(a.body == attempts[0].body for a in attempts)  # the same batch each time
    assert sorted(receiver.deliveries) == sorted(f"r{i}" for i in range(20))
    stats = client.stats()
    assert (stats.sent, stats.failed_batches, stats.spooled) == (20, 0, 0)


def test_retry_after_is_honoured(make_client, receiver):
    client = make_client(retry_backoff=0.01, retry_backoff_max=0.05)
    receiver.cue(429, retry_after="1")
    client.log_rollouts(0, _ids("r", 3))
    assert client.flush(timeout=5)

    first, second = receiver.batch_requests()
    assert (first.status, second.status) == (429, 200)
    # Our own backoff would wait <= 0.06 s; the server asked for 1 s.
    assert second.at - first.at >= 0.95


def test_422_drops_batch_with_count_and_warning(make_client, receiver, caplog):
    client = make_client()
    receiver.cue(
        422,
        body={"type": "about:blank", "title": "Unprocessable", "status": 422,
              "detail": "batch holds 5000 rollouts; the limit is 4096",
              "errors": [{"loc": ["body", "rollouts"], "msg": "too many rollouts"}]},
    )  # fmt: skip
    with caplog.at_level("WARNING", logger="collapsewatch"):
        client.log_rollouts(0, _ids("r", 7))
        assert client.flush(timeout=5)

    assert len(receiver.batch_requests()) == 1  # a 422 is not retried
    assert receiver.stored == {}
    stats = client.stats()
    assert (stats.failed_batches, stats.dropped_rejected, stats.sent) == (1, 7, 0)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "the limit is 4096" in messages and "rollouts: too many rollouts" in messages


def test_422_naming_rollouts_drops_only_those(make_client, receiver):
    client = make_client()
    receiver.cue(
        422,
        body={"type": "about:blank", "title": "Unprocessable", "status": 422, "detail": "invalid",
              "errors": [{"loc": ["body", "rollouts", 1, "turns", 0, "reasoning"],
                          "msg": "longer than max_text_chars"}]},
    )  # fmt: skip
    client.log_rollouts(0, _ids("r", 4))
    assert client.flush(timeout=5)

    assert set(receiver.stored) == {"r0", "r2", "r3"}
    stats = client.stats()
    assert (stats.sent, stats.dropped_rejected, stats.failed_batches) == (3, 1, 1)


def test_413_splits_the_batch(make_client, receiver):
    receiver.max_batch_rollouts = 10
    client = make_client(batch_size=64)
    client.log_rollouts(0, _ids("r", 50))
    client.complete_step(0)
    assert client.flush(timeout=5)

    assert set(receiver.stored) == {f"r{i}" for i in range(50)}
    assert receiver.complete_steps == [0]
    assert client.stats().dropped_rejected == 0


def test_422_batch_too_long_splits_the_batch(make_client, receiver):
    receiver.max_batch_422 = 8  # the server's limit is below our batch_size
    client = make_client(batch_size=30)
    client.log_rollouts(0, _ids("r", 30))
    assert client.flush(timeout=5)
    assert set(receiver.stored) == {f"r{i}" for i in range(30)}
    assert client.stats().dropped_rejected == 0


def test_repeated_rollout_id_in_one_batch_is_sent_once(make_client, receiver):
    client = make_client()
    client.log_rollouts(0, [rollout("a"), rollout("b"), rollout("a", reward=0.0)])
    assert client.flush(timeout=5)
    assert sorted(receiver.deliveries) == ["a", "b"]
    assert receiver.stored["a"]["reward"] == 1.0  # the first copy wins, as on the server
    stats = client.stats()
    assert (stats.sent, stats.duplicates, stats.dropped_rejected) == (3, 1, 0)


def test_unknown_run_is_created_again(make_client, receiver):
    client = make_client()
    client.log_rollouts(0, _ids("a", 2))
    assert client.flush(timeout=5)
    receiver.forget_runs()  # e.g. the server's database was reset
    client.log_rollouts(1, _ids("b", 2, step=1))
    assert client.flush(timeout=5)

    assert {"b0", "b1"} <= set(receiver.stored)
    assert sum(r.path == "/api/v1/runs" for r in receiver.requests) == 2


def test_bad_api_key_keeps_rollouts_in_spool(make_client, receiver, caplog):
    client = make_client(api_key="wrong")
    with caplog.at_level("WARNING", logger="collapsewatch"):
        client.log_rollouts(0, _ids("r", 5))
        assert client.flush(timeout=5)

    assert receiver.stored == {}
    stats = client.stats()
    assert (stats.spooled, stats.spool_pending, stats.dropped_rejected) == (5, 5, 0)
    assert any("refused the API key" in r.getMessage() for r in caplog.records)


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # closed again: connections are refused


def test_dead_server_never_raises_and_does_not_block(tmp_path):
    started = time.perf_counter()
    client = Client("dead", url=_dead_url(), api_key="k", spool_dir=tmp_path / "spool")
    constructed = time.perf_counter() - started
    batches = [_ids(f"s{step}-", 100, step=step) for step in range(100)]

    started = time.perf_counter()
    for step, batch in enumerate(batches):
        client.log_rollouts(step, batch)
        client.complete_step(step)
    logged = time.perf_counter() - started

    assert constructed < 0.5
    assert logged < 1.0  # 10,000 rollouts; typically 20-70 ms (a few µs per rollout)
    assert client.close(timeout=1.0)  # cuts the retries short and spools everything
    stats = client.stats()
    assert stats.logged == stats.spool_pending == 10_000


def test_server_down_spool_then_everything_delivered_once(make_client, receiver, tmp_path):
    client = make_client(batch_size=50)
    client.log_rollouts(0, _ids("a", 30))
    assert client.flush(timeout=5)

    receiver.stop()
    for step in range(1, 6):
        client.log_rollouts(step, _ids(f"s{step}-", 40, step=step))
        client.complete_step(step)
    assert client.flush(timeout=5)  # spooled counts as handled
    stats = client.stats()
    assert stats.spool_pending == 200 and stats.queued == 0
    assert len(list((tmp_path / "spool").glob("*.jsonl"))) >= 4  # one file per batch

    receiver.start()  # same port
    client.log_rollouts(6, _ids("late", 10, step=6))
    assert client.flush(timeout=5)

    expected = {f"a{i}" for i in range(30)} | {f"late{i}" for i in range(10)}
    expected |= {f"s{s}-{i}" for s in range(1, 6) for i in range(40)}
    assert set(receiver.stored) == expected
    assert sorted(receiver.deliveries) == sorted(expected)  # nothing sent twice
    assert receiver.complete_steps == [1, 2, 3, 4, 5]
    stats = client.stats()
    assert (stats.sent, stats.spool_pending, stats.duplicates) == (240, 0, 0)
    assert list((tmp_path / "spool").glob("*.jsonl")) == []


def test_next_client_of_the_run_resends_the_spool(make_client, receiver, tmp_path):
    receiver.stop()
    first = make_client(run="resume")
    first.log_rollouts(0, _ids("old", 25))
    assert first.close(timeout=5)
    assert first.stats().spooled == 25

    receiver.start()
    second = make_client(run="resume")
    second.log_rollouts(1, _ids("new", 5, step=1))
    assert second.flush(timeout=5)

    assert set(receiver.stored) == {f"old{i}" for i in range(25)} | {f"new{i}" for i in range(5)}
    assert second.stats().sent == 30


def test_full_spool_drops_counted_and_said(make_client, receiver, caplog):
    receiver.stop()
    client = make_client(batch_size=10, max_spool_bytes=3000)  # room for one batch
    with caplog.at_level("WARNING", logger="collapsewatch"):
        client.log_rollouts(0, _ids("r", 30))
        assert client.flush(timeout=5)

    stats = client.stats()
    assert stats.spooled == 10 and stats.dropped_full == 20
    assert stats.spooled + stats.dropped_full == stats.logged
    assert any("spool cannot take them" in r.getMessage() for r in caplog.records)


def test_full_queue_spills_from_the_caller_and_loses_nothing(make_client, receiver):
    receiver.delay = 0.5  # a slow server: the sender is stuck in a request
    client = make_client(batch_size=20, max_queue_rollouts=50)
    client.log_rollouts(0, _ids("first", 20))
    time.sleep(0.1)
    started = time.perf_counter()
    for step in range(1, 11):
        client.log_rollouts(step, _ids(f"s{step}-", 20, step=step))
    assert time.perf_counter() - started < 0.5  # did not wait for the server
    assert client.stats().spooled > 0

    receiver.delay = 0.0
    assert client.flush(timeout=10)
    assert client.flush(timeout=10)  # the second drains what the first spooled
    expected = {f"first{i}" for i in range(20)}
    expected |= {f"s{s}-{i}" for s in range(1, 11) for i in range(20)}
    assert set(receiver.stored) == expected
    assert client.stats().dropped_full == 0


def test_flush_times_out_and_close_spools_the_rest(make_client, receiver):
    client = make_client(retry_backoff=0.5, retry_backoff_max=1.0, max_retries=10)
    receiver.cue(503, times=100)
    client.log_rollouts(0, _ids("r", 5))

    started = time.perf_counter()
    assert client.flush(timeout=0.2) is False
    assert 0.15 < time.perf_counter() - started < 1.0

    started = time.perf_counter()
    assert client.close(timeout=0.5)  # interrupts the backoff, spools the batch
    assert time.perf_counter() - started < 2.0
    stats = client.stats()
    assert (stats.spooled, stats.spool_pending, stats.queued) == (5, 5, 0)

    client.log_rollouts(1, _ids("after", 2, step=1))  # after close: spooled, no error
    assert client.stats().spool_pending == 7


def test_context_manager_flushes(receiver, tmp_path):
    with Client("ctx", url=receiver.url, api_key=receiver.api_key, spool_dir=tmp_path) as client:
        client.log_rollouts(0, _ids("r", 3))
    assert set(receiver.stored) == {"r0", "r1", "r2"}
    assert client.close() is True  # closing twice is harmless


def test_close_with_a_hung_request_spools_it_too(make_client, receiver):
    receiver.delay = 1.5  # longer than close() waits for the sender
    client = make_client(timeout=10.0)
    client.log_rollouts(0, _ids("r", 5))
    assert receiver.wait_for(lambda r: len(r.requests) == 2)  # run created, batch posted
    client.log_rollouts(1, _ids("q", 3, step=1))

    assert client.close(timeout=0.1) is False  # the sender is still in its request
    assert client.stats().spool_pending == 8  # the batch in flight and the queue

"""Client happy paths against the receiver: batching, step handling, input forms, threads."""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from collapsewatch import Rollout, Turn
from tests.factories import rollout, turn


def test_batches_by_count(make_client, receiver):
    client = make_client(batch_size=10, flush_interval=60.0)
    client.log_rollouts(0, [rollout(f"r{i}") for i in range(35)])

    assert receiver.wait_for(lambda r: len(r.accepted_batches()) == 3)
    time.sleep(0.1)  # the 5 left over wait for the interval (60 s) or a flush
    assert [len(b["rollouts"]) for b in receiver.accepted_batches()] == [10, 10, 10]

    assert client.flush(timeout=5)
    assert [len(b["rollouts"]) for b in receiver.accepted_batches()] == [10, 10, 10, 5]
    assert set(receiver.stored) == {f"r{i}" for i in range(35)}


def test_batches_by_interval(make_client, receiver):
    client = make_client(batch_size=1000, flush_interval=0.2)
    started = time.monotonic()
    client.log_rollouts(0, [rollout(f"r{i}") for i in range(3)])

    assert receiver.wait_for(lambda r: len(r.stored) == 3, timeout=3)
    assert time.monotonic() - started >= 0.15
    assert [len(b["rollouts"]) for b in receiver.accepted_batches()] == [3]


def test_run_created_once_with_config_and_auth(make_client, receiver):
    config = {"lr": 1e-6, "path": object(), "max_grad_norm": float("inf")}
    client = make_client(run="grpo-1", config=config, tags=["a", 1])
    client.log_rollouts(0, [rollout("r0")])
    assert client.flush(timeout=5)

    runs = [r for r in receiver.requests if r.path == "/api/v1/runs"]
    assert len(runs) == 1
    assert runs[0].body["name"] == "grpo-1"
    assert runs[0].body["config"]["lr"] == 1e-6
    assert isinstance(runs[0].body["config"]["path"], str)  # not JSON: sent as text
    assert runs[0].body["config"]["max_grad_norm"] == "inf"  # the API wants strict JSON
    assert runs[0].body["tags"] == ["a", "1"]
    assert runs[0].headers["authorization"] == "Bearer test-key"
    assert client.run_id == receiver.runs["grpo-1"]


def test_step_filled_in_and_own_step_kept(make_client, receiver):
    client = make_client()
    without_step = rollout("a")
    del without_step["step"]
    client.log_rollouts(7, [without_step, rollout("b", step=3)])
    assert client.flush(timeout=5)

    assert receiver.stored["a"]["step"] == 7
    assert receiver.stored["b"]["step"] == 3
    assert "step" not in without_step  # the caller's dict is not changed


def test_accepts_models_single_dicts_numpy_and_generates_ids(make_client, receiver):
    client = make_client()
    model = Rollout(rollout_id="m", step=1, state_id="s", reward=1.0, turns=[Turn(index=0)])
    client.log_rollouts(1, model)  # one rollout, not a list
    client.log_rollouts(1, rollout("single"))
    client.log_rollouts(
        1,
        [
            rollout(
                "np",
                reward=np.float32(0.5),
                success=np.bool_(True),
                turns=[turn(token_entropy=np.float64(1.25), num_tokens=np.int64(12))],
            )
        ],
    )
    no_id = rollout("x")
    del no_id["rollout_id"]
    client.log_rollouts(1, (r for r in [no_id]))  # any iterable
    assert client.flush(timeout=5)

    assert {"m", "single", "np"} <= set(receiver.stored)
    assert receiver.stored["np"]["reward"] == 0.5
    assert receiver.stored["np"]["turns"][0]["num_tokens"] == 12
    generated = set(receiver.stored) - {"m", "single", "np"}
    assert len(generated) == 1 and len(generated.pop()) == 32
    assert client.stats().dropped_invalid == 0


def test_complete_step_follows_its_rollouts(make_client, receiver):
    client = make_client(batch_size=4, flush_interval=60.0)
    client.log_rollouts(0, [rollout(f"a{i}", step=0) for i in range(6)])
    client.complete_step(0)
    client.log_rollouts(1, [rollout(f"b{i}", step=1) for i in range(2)])
    client.complete_step(1)
    assert client.flush(timeout=5)

    seen: set[str] = set()
    for batch in receiver.accepted_batches():
        seen |= {r["rollout_id"] for r in batch["rollouts"]}
        for step in batch["complete_steps"]:
            prefix = "ab"[step]
            assert {f"{prefix}{i}" for i in range(6 if step == 0 else 2)} <= seen
    assert receiver.complete_steps == [0, 1]


def test_thread_safety_exact_count(make_client, receiver):
    client = make_client(batch_size=64)
    n_threads, per_thread = 8, 500

    def produce(t: int) -> None:
        for i in range(0, per_thread, 10):
            client.log_rollouts(t, [rollout(f"t{t}-{i + j}", step=t) for j in range(10)])

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert client.flush(timeout=10)

    expected = {f"t{t}-{i}" for t in range(n_threads) for i in range(per_thread)}
    assert set(receiver.stored) == expected
    assert len(receiver.deliveries) == len(expected)  # each sent once
    stats = client.stats()
    assert (stats.logged, stats.sent, stats.queued, stats.duplicates) == (4000, 4000, 0, 0)


def test_invalid_rollouts_dropped_counted_and_named(make_client, receiver, caplog):
    client = make_client()
    bad_reward = {**rollout("bad-reward"), "reward": "high"}
    no_state = rollout("no-state")
    del no_state["state_id"]
    extra = rollout("extra", prompt="not a field")
    with caplog.at_level("WARNING", logger="collapsewatch"):
        client.log_rollouts(
            0,
            [rollout("ok1"), bad_reward, no_state, rollout("no-turns", turns=[]), extra, 42],
        )
        client.log_rollouts(0, None)  # not iterable: a warning, no exception
        assert client.flush(timeout=5)

    assert set(receiver.stored) == {"ok1"}
    stats = client.stats()
    assert stats.dropped_invalid == 5
    assert stats.sent == 1
    first = next(r.getMessage() for r in caplog.records if "invalid rollout" in r.getMessage())
    assert "'bad-reward'" in first and "reward: Input should be a valid number" in first
    assert any("log_rollouts(step=0)" in r.getMessage() for r in caplog.records)


def test_invalid_warnings_are_rate_limited(make_client, caplog):
    client = make_client()
    with caplog.at_level("WARNING", logger="collapsewatch"):
        client.log_rollouts(0, [{**rollout(f"r{i}"), "reward": "x"} for i in range(200)])
        assert client.flush(timeout=5)
    assert client.stats().dropped_invalid == 200
    assert sum("invalid rollout" in r.getMessage() for r in caplog.records) == 1


def test_non_finite_numbers_travel_as_json_constants(make_client, receiver):
    # The wire format lets NaN/Inf through so that the server can count them.
    client = make_client()
    client.log_rollouts(
        0, [rollout("nan", reward=float("nan"), turns=[turn(token_entropy=float("inf"))])]
    )
    assert client.flush(timeout=5)
    body = next(r for r in receiver.batch_requests() if r.status == 200)
    stored = receiver.stored["nan"]
    assert math.isnan(stored["reward"]) and math.isinf(stored["turns"][0]["token_entropy"])
    assert client.stats().dropped_invalid == 0 and body.status == 200


def test_duplicates_reported_by_server_are_counted(make_client, receiver):
    client = make_client()
    client.log_rollouts(0, [rollout("a"), rollout("b")])
    assert client.flush(timeout=5)
    client.log_rollouts(0, [rollout("a"), rollout("c")])
    assert client.flush(timeout=5)
    stats = client.stats()
    assert (stats.sent, stats.duplicates) == (4, 1)
    assert set(receiver.stored) == {"a", "b", "c"}

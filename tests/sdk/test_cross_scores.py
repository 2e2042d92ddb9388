"""log_cross_scores: the trainer's log p(z_i | x_j) matrix, sent between a step's
rollouts and its completion, spooled like rollouts while the server is away."""

from __future__ import annotations

import numpy as np

from tests.factories import rollout


def _step(step: int, n: int = 4) -> tuple[list[dict], dict]:
    rollouts = [rollout(f"s{step}-{i}", step=step, state_id=f"state-{i % 2}") for i in range(n)]
    cross = {
        "step": step,
        "rollout_ids": [r["rollout_id"] for r in rollouts],
        "state_ids": ["state-0", "state-1"],
        "logprob_sum": -np.arange(n * 2, dtype=np.float32).reshape(n, 2) - 1.0,
        "num_tokens": np.full(n, 7),
    }
    return rollouts, cross


def test_sent_after_the_rollouts_and_before_completion(make_client, receiver):
    client = make_client(batch_size=100, flush_interval=60.0)
    rollouts, cross = _step(0)
    client.log_rollouts(0, rollouts)
    client.log_cross_scores(cross)
    client.complete_step(0)
    assert client.flush(timeout=5)

    posts = [r for r in receiver.requests if r.path != "/api/v1/runs"]
    assert [p.path.rsplit("/", 1)[1] for p in posts] == ["rollouts", "cross-scores", "rollouts"]
    assert len(posts[0].body["rollouts"]) == 4 and posts[0].body["complete_steps"] == []
    assert posts[2].body == {"rollouts": [], "complete_steps": [0]}
    assert receiver.cross_scores[0]["logprob_sum"][3] == [-7.0, -8.0]
    assert client.stats().cross_scores_sent == 1


def test_spooled_while_the_server_is_down(make_client, receiver, tmp_path):
    client = make_client()
    receiver.stop()
    for step in range(2):
        rollouts, cross = _step(step)
        client.log_rollouts(step, rollouts)
        client.log_cross_scores(cross)
        client.complete_step(step)
    assert client.flush(timeout=5)
    kinds = [p.read_text().split("\n")[0] for p in sorted((tmp_path / "spool").glob("*.jsonl"))]
    assert sum('"kind":"cross_scores"' in k for k in kinds) == 2

    receiver.start()
    assert client.flush(timeout=5)
    assert sorted(receiver.cross_scores) == [0, 1]
    assert len(receiver.stored) == 8 and receiver.complete_steps == [0, 1]
    stats = client.stats()
    assert (stats.cross_scores_sent, stats.cross_scores_dropped, stats.spool_pending) == (2, 0, 0)


def test_invalid_matrix_dropped_counted_and_said(make_client, receiver, caplog):
    client = make_client()
    _, cross = _step(0)
    cross["logprob_sum"] = cross["logprob_sum"][:2]  # 2 rows for 4 rollout ids
    with caplog.at_level("WARNING", logger="collapsewatch"):
        client.log_cross_scores(cross)
        assert client.flush(timeout=5)
    assert receiver.cross_scores == {}
    assert client.stats().cross_scores_dropped == 1
    assert any("dropped cross-scores: invalid" in r.getMessage() for r in caplog.records)

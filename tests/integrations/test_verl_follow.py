"""The verl follower on a folder fed step by step, against a real server, and the
in-process reward wrapper.

The main test feeds the shared real dump (``verl_gsm8k_tool/step2.jsonl``, copied as
``2.jsonl``) and, later, a second step file made from it (its first 16 questions, as
step 3, with new request ids), plus a metrics file in verl's file-logger format; the
served series must equal what ``collapsewatch score`` computes from the same folder.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from collapsewatch.cli import app
from collapsewatch.sdk.integrations.cli import follow_app
from collapsewatch.sdk.integrations.verl import VerlFollower, stream_rewards
from tests.integrations.conftest import run_id_of, series
from tests.shared_data import shared_data

runner = CliRunner()
FAST = {"flush_interval": 0.05, "retry_backoff": 0.01, "retry_backoff_max": 0.05}
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "verl_step2_sample.jsonl"


def _step3_from(step2: Path, target: Path, questions: int = 16) -> int:
    """The first ``questions`` groups of ``step2`` as a step-3 file; returns its lines."""
    kept: list[str] = []
    inputs: list[str] = []
    for line in step2.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["input"] not in inputs:
            if len(inputs) == questions:
                continue
            inputs.append(record["input"])
        record["step"] = 3
        record["request_id"] = f"{record['request_id']}-s3"
        kept.append(json.dumps(record))
    target.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return len(kept)


def _wait_scored(http: httpx.Client, run_id: int, steps: list[int], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status = http.get(f"/api/v1/runs/{run_id}/steps").json()
        if [s["step"] for s in status] == steps and all(s["scored"] for s in status):
            return
        assert time.monotonic() < deadline, status
        time.sleep(0.3)


def _score_json(path: Path) -> dict[int, dict[str, float | None]]:
    result = runner.invoke(app, ["score", str(path), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {r["step"]: r["metrics"] for r in rows if "metrics" in r}


def _metric_line(step: int, **data: float) -> str:
    return json.dumps({"step": step, "elapsed_seconds": 1.5 * step, "data": data}) + "\n"


@pytest.mark.slow
def test_followed_run_gives_the_metrics_of_importing_the_folder(
    server: Any, http: httpx.Client, tmp_path: Path
) -> None:
    rollout_dir = tmp_path / "rollouts"
    rollout_dir.mkdir()
    shutil.copyfile(shared_data("verl_gsm8k_tool", "step2.jsonl"), rollout_dir / "2.jsonl")
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        _metric_line(2, **{"actor/entropy": 0.61, "critic/score/mean": 0.675, "timing_s/gen": 9.5})
    )
    state_file = tmp_path / "follow-state.json"
    options = {
        "run": "verl-live",
        "metrics_file": metrics,
        "url": server.url,
        "api_key": server.api_key,
        "state_file": state_file,
        "idle_seconds": 3600,
        "client_options": FAST,
    }
    follower = VerlFollower(rollout_dir, **options)

    first = follower.poll()  # 2.jsonl may still be written: no later file, not idle
    assert (first.steps_sent, first.waiting, first.metric_lines) == ([], [2], 1)

    n3 = _step3_from(rollout_dir / "2.jsonl", rollout_dir / "3.jsonl")
    with metrics.open("a") as fh:  # verl is in the middle of writing step 3's line
        fh.write(_metric_line(3, **{"actor/entropy": 0.58})[:20])
    second = follower.poll()
    assert (second.steps_sent, second.waiting, second.metric_lines) == ([2], [3], 0)
    assert second.rollouts_sent == 1024

    with metrics.open("a") as fh:
        fh.write(_metric_line(3, **{"actor/entropy": 0.58})[20:])
    third = follower.poll(final=True)  # the run is over: the last step counts as complete
    assert (third.steps_sent, third.rollouts_sent, third.metric_lines) == ([3], n3, 1)
    assert follower.close()
    assert follower.sent_steps == [2, 3]

    run_id = run_id_of(http, "verl-live")
    _wait_scored(http, run_id, [2, 3])
    served = series(http, run_id)
    offline = _score_json(rollout_dir)
    assert sorted(offline) == [2, 3]
    for step in (2, 3):
        ours = {k: v for k, v in served[step].items() if not k.startswith("trainer.")}
        assert set(ours) == set(offline[step]), step
        for name, expected in offline[step].items():
            if expected is None:
                assert ours[name] is None, (step, name)
            else:
                assert ours[name] == pytest.approx(expected, rel=1e-6, abs=1e-9), (step, name)
    assert served[2]["correctness.success_rate"] == pytest.approx(691 / 1024)
    trainer = {
        s: {k: v for k, v in m.items() if k.startswith("trainer.")} for s, m in served.items()
    }
    assert trainer == {
        2: {
            "trainer.diversity.token_entropy": 0.61,
            "trainer.correctness.reward_mean": 0.675,
            "trainer.timing_s.gen": 9.5,
        },
        3: {"trainer.diversity.token_entropy": 0.58},
    }

    # Started again with the same state file, the follower sends nothing twice.
    again = VerlFollower(rollout_dir, **options)
    result = again.poll(final=True)
    assert (result.steps_sent, result.metric_lines) == ([], 0)
    assert again.close()
    assert again.client.stats().logged == 0


def test_idle_step_file_counts_as_complete(server: Any, http: httpx.Client, tmp_path: Path) -> None:
    shutil.copyfile(FIXTURE, tmp_path / "5.jsonl")
    follower = VerlFollower(
        tmp_path,
        run="idle",
        url=server.url,
        api_key=server.api_key,
        state_file=tmp_path / "state.json",
        idle_seconds=60,
        client_options=FAST,
    )
    assert follower.poll().waiting == [5]
    past = time.time() - 120
    os.utime(tmp_path / "5.jsonl", (past, past))
    assert follower.poll().steps_sent == [5]
    assert follower.poll().steps_sent == []
    # A step file that grows after it was sent (idle, then written again) is sent again:
    # the rollouts already stored are skipped by the server.
    with (tmp_path / "5.jsonl").open("a") as fh:
        fh.write("\n")
    os.utime(tmp_path / "5.jsonl", (past, past))
    assert follower.poll().steps_sent == [5]
    assert follower.close()
    stats = follower.client.stats()
    assert (stats.sent, stats.duplicates) == (8, 4)
    steps = http.get(f"/api/v1/runs/{run_id_of(http, 'idle')}/steps").json()
    assert [(s["step"], s["num_rollouts"]) for s in steps] == [(2, 4)]  # the records' step


def test_bad_files_are_reported_and_a_truncated_metrics_file_is_read_again(
    server: Any, http: httpx.Client, tmp_path: Path
) -> None:
    rollouts = tmp_path / "rollouts"
    rollouts.mkdir()
    (rollouts / "1.jsonl").write_text('{"input": "q", "output": "a"}\n')  # no score
    (rollouts / "notes.jsonl").write_text("not a step file, ignored\n")
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(_metric_line(1, **{"actor/entropy": 1.0}) + "{broken\n")
    follower = VerlFollower(
        rollouts,
        run="bad",
        metrics_file=metrics,
        url=server.url,
        api_key=server.api_key,
        state_file=tmp_path / "state.json",
        client_options=FAST,
    )
    result = follower.poll(final=True)
    assert result.steps_sent == [] and result.metric_lines == 1
    assert len(result.errors) == 2
    assert "1.jsonl:1: field 'score': missing" in result.errors[0]
    assert "metrics.jsonl" in result.errors[1]
    # A new job truncates the metrics file (verl opens it with "wb"): read from the top.
    metrics.write_text(_metric_line(0, **{"actor/entropy": 2.0}))
    assert follower.poll(final=True).metric_lines == 1
    assert follower.close()
    run_id = run_id_of(http, "bad")
    assert series(http, run_id) == {
        0: {"trainer.diversity.token_entropy": 2.0},
        1: {"trainer.diversity.token_entropy": 1.0},
    }


def test_cli_follow_verl_once(server: Any, tmp_path: Path) -> None:
    rollouts = tmp_path / "rollouts"
    rollouts.mkdir()
    shutil.copyfile(FIXTURE, rollouts / "2.jsonl")
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(_metric_line(2, **{"actor/pg_clipfrac": 0.01}))
    args = [
        "verl",
        str(rollouts),
        "--run",
        "cli-follow",
        "--metrics",
        str(metrics),
        "--url",
        server.url,
        "--api-key",
        server.api_key,
        "--state-file",
        str(tmp_path / "state.json"),
        "--once",
    ]
    first = runner.invoke(follow_app, args)
    assert first.exit_code == 0, first.output
    assert "step 2 sent" in first.stdout and "1 metric lines sent" in first.stdout
    assert "1 steps sent so far, 4 rollouts sent now" in first.stdout
    second = runner.invoke(follow_app, args)
    assert second.exit_code == 0, second.output
    assert "step 2 sent" not in second.stdout
    assert "1 steps sent so far, 0 rollouts sent now" in second.stdout
    missing = runner.invoke(follow_app, ["verl", str(tmp_path / "nope"), "--run", "x"])
    assert missing.exit_code == 2 and "No such folder" in missing.output


def test_stream_rewards_logs_training_samples_by_step(
    server: Any, http: httpx.Client, tmp_path: Path
) -> None:
    def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):
        correct = solution_str.strip().endswith(f"#### {ground_truth}")
        return {"score": float(correct), "acc": correct} if kw.get("as_dict") else float(correct)

    from collapsewatch import Client

    client = Client("verl-stream", url=server.url, api_key=server.api_key, **FAST)
    scored = stream_rewards(compute_score, run="verl-stream", samples_per_step=8, client=client)
    assert scored.__name__ == "compute_score"
    answers = []
    for step in (1, 2):
        for question in range(4):
            for sample in range(2):
                info = {"split": "train", "index": question, "question": f"What is {question}+1?"}
                guess = question + 1 if sample == 0 else 0
                answers.append(
                    scored(
                        "openai/gsm8k",
                        f"I think.\n#### {guess}",
                        str(question + 1),
                        info,
                        as_dict=step == 2,
                    )
                )
        # validation between steps uses the same function: scored, not logged
        scored("openai/gsm8k", "#### 1", "1", {"split": "test", "index": 0})
    assert answers[0] == 1.0 and answers[8] == {"score": 1.0, "acc": True}
    assert client.flush(10)
    client.close(5)
    run_id = run_id_of(http, "verl-stream")
    _wait_scored(http, run_id, [1, 2], timeout=60)
    rows = series(http, run_id)
    for step in (1, 2):
        assert rows[step]["structure.num_rollouts"] == 8
        assert rows[step]["structure.distinct_states"] == 4
        assert rows[step]["correctness.success_rate"] == 0.5
        assert rows[step]["correctness.zero_std_fraction"] == 0.0

"""The main job end to end on real rollouts that other people recorded (issue 2).

`score` offline, and the same file through `up` + `import` on SQLite and PostgreSQL,
must agree; importing twice must store each rollout once.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from collapsewatch.cli import app
from collapsewatch.server import EmbeddedServer
from tests.conftest import make_settings
from tests.shared_data import shared_data

runner = CliRunner()


def _score_json(path: Path, *args: str) -> dict[int, dict[str, float | None]]:
    result = runner.invoke(app, ["score", str(path), "--json", *args])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {r["step"]: r["metrics"] for r in rows if "step" in r and "metrics" in r}


@pytest.fixture(scope="module")
def verl_file() -> Path:
    return shared_data() / "verl_gsm8k_tool" / "step2.jsonl"


@pytest.fixture(scope="module")
def verl_scores(verl_file: Path) -> dict[str, float | None]:
    scores = _score_json(verl_file)
    assert list(scores) == [2]
    return scores[2]


def test_score_verl_step_known_values(verl_scores: dict[str, float | None]) -> None:
    m = verl_scores
    assert m["structure.num_rollouts"] == 1024
    assert m["structure.distinct_states"] == 64
    assert m["correctness.success_rate"] == pytest.approx(691 / 1024)
    assert m["correctness.zero_std_fraction"] == pytest.approx(1 / 64)
    # 64 GSM8K questions whose solutions follow the question: far above chance (0).
    assert m["responsiveness.retrieval_embed"] > 0.8
    assert m["responsiveness.mi_embed"] > 0.5 * math.log(64)
    assert m["diversity.token_entropy"] is None  # verl's dump carries no token entropy
    assert m["correctness.valid_format_rate"] is None  # the format does not define it


def test_score_format_collapse_valid_format_rate() -> None:
    scores = _score_json(shared_data() / "trl_vqa" / "format_collapse_r2.rollout_results.md")
    rate = {s: m["correctness.valid_format_rate"] for s, m in scores.items()}
    assert sorted(rate) == list(range(1, 44))
    assert sum(rate[s] for s in range(1, 6)) / 5 > 0.5
    assert all(rate[s] == 0.0 for s in range(12, 44))


def test_score_healthy_valid_format_rate() -> None:
    scores = _score_json(shared_data() / "trl_vqa" / "healthy_r4.rollout_results.md")
    assert sorted(scores) == list(range(40))
    assert min(m["correctness.valid_format_rate"] for m in scores.values()) >= 0.6


def test_score_table_output(verl_file: Path) -> None:
    result = runner.invoke(app, ["score", str(verl_file)])
    assert result.exit_code == 0, result.output
    assert "1024 rollouts, 1 steps" in result.stdout
    assert "correctness.success_rate" in result.stdout
    assert "0.675" in result.stdout  # 691/1024


def test_score_missing_file_is_a_clear_cli_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["score", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "No such file" in result.output


@pytest.mark.slow
def test_up_import_matches_score_and_is_idempotent(
    db_url: str, tmp_path: Path, verl_file: Path, verl_scores: dict[str, float | None]
) -> None:
    settings = make_settings(db_url, tmp_path)
    with EmbeddedServer(settings) as srv:
        args = ["--run", "verl-step2", "--url", srv.url, "--api-key", srv.api_key]
        first = runner.invoke(app, ["import", str(verl_file), *args, "--wait", "--timeout", "120"])
        assert first.exit_code == 0, first.output
        assert "1024 new, 0 already stored" in first.stdout
        second = runner.invoke(app, ["import", str(verl_file), *args])
        assert second.exit_code == 0, second.output
        assert "0 new, 1024 already stored" in second.stdout

        headers = {"Authorization": f"Bearer {srv.api_key}"}
        runs = httpx.get(f"{srv.url}/api/v1/runs", headers=headers).json()
        assert [(r["name"], r["num_rollouts"], r["num_steps"]) for r in runs] == [
            ("verl-step2", 1024, 1)
        ]
        served = runner.invoke(
            app, ["metrics", "verl-step2", "--json", "--url", srv.url, "--api-key", srv.api_key]
        )
        assert served.exit_code == 0, served.output
        rows = [json.loads(line) for line in served.stdout.splitlines()]
        assert [r["step"] for r in rows] == [2]
        got = rows[0]["metrics"]
    assert set(got) == set(verl_scores)
    for name, expected in verl_scores.items():
        if expected is None:
            assert got[name] is None, name
        else:
            assert got[name] == pytest.approx(expected, rel=1e-6, abs=1e-9), name


def _score_alerts(path: Path) -> list[dict]:
    result = runner.invoke(app, ["score", str(path), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return [r for r in rows if "alert" in r]


@pytest.mark.slow
def test_served_alerts_match_offline_score_on_format_collapse(db_url: str, tmp_path: Path) -> None:
    path = shared_data() / "trl_vqa" / "format_collapse_r2.rollout_results.md"
    offline = _score_alerts(path)
    fired = [(a["alert"], a["step"]) for a in offline if a["state"] == "firing"]
    assert ("format_collapse", 12) in fired
    assert not any(rule == "template_collapse" for rule, _ in fired)
    with EmbeddedServer(make_settings(db_url, tmp_path)) as srv:
        args = ["--run", "fc", "--url", srv.url, "--api-key", srv.api_key, "--wait"]
        result = runner.invoke(app, ["import", str(path), *args])
        assert result.exit_code == 0, result.output
        headers = {"Authorization": f"Bearer {srv.api_key}"}
        run_id = httpx.get(f"{srv.url}/api/v1/runs", headers=headers).json()[0]["id"]
        # The worker replays after each step; give the last replay a moment to commit.
        deadline = __import__("time").monotonic() + 30
        while True:
            alerts = httpx.get(f"{srv.url}/api/v1/runs/{run_id}/alerts", headers=headers).json()
            if len(alerts) >= len(fired) or __import__("time").monotonic() > deadline:
                break
            __import__("time").sleep(0.2)
    served = sorted((a["rule"], a["step_fired"]) for a in alerts)
    assert served == sorted(fired)
    by_rule = {a["rule"]: a for a in alerts}
    assert by_rule["format_collapse"]["severity"] == "critical"
    assert by_rule["format_collapse"]["evidence"]["metric"] == "correctness.valid_format_rate"

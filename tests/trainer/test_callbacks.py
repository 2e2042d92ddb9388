"""The streaming hook: callbacks get every step; the collapsewatch and CSV callbacks."""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collapsewatch.schema import CrossScores, Rollout
from collapsewatch.trainer.callbacks import CollapsewatchHook, CSVCallback, TrainingHook
from collapsewatch.trainer.grpo import GRPOTrainer

Build = Callable[..., GRPOTrainer]


class Recorder:
    def __init__(self) -> None:
        self.steps: list[int] = []
        self.cross: list[CrossScores | None] = []
        self.ended = 0

    def on_step_end(
        self,
        step: int,
        rollouts: list[Rollout],
        cross_scores: CrossScores | None,
        metrics: dict[str, float],
    ) -> None:
        assert all(isinstance(r, Rollout) and r.step == step for r in rollouts)
        assert "success_rate" in metrics
        self.steps.append(step)
        self.cross.append(cross_scores)

    def on_train_end(self) -> None:
        self.ended += 1


class Broken:
    def on_step_end(self, *args: Any) -> None:
        raise RuntimeError("monitor down")

    def on_train_end(self) -> None:
        raise RuntimeError("monitor down")


class FakeClient:
    def __init__(self, with_cross: bool) -> None:
        self.calls: list[tuple[str, Any]] = []
        if with_cross:
            self.log_cross_scores = lambda cs: self.calls.append(("cross", cs.step))

    def log_rollouts(self, step: int, rollouts: list[Rollout]) -> None:
        self.calls.append(("rollouts", (step, len(rollouts))))

    def complete_step(self, step: int) -> None:
        self.calls.append(("complete", step))

    def flush(self) -> None:
        self.calls.append(("flush", None))


def test_every_step_reaches_every_callback(make_trainer: Build, tmp_path: Path) -> None:
    recorder = Recorder()
    with_cross, without = FakeClient(True), FakeClient(False)
    cw_with, cw_without = CollapsewatchHook(with_cross), CollapsewatchHook(without)
    csv_cb = CSVCallback(tmp_path / "curves.csv")
    trainer = make_trainer(
        callbacks=[Broken(), recorder, cw_with, cw_without, csv_cb], cross_score_every=2
    )
    assert isinstance(recorder, TrainingHook)
    history = trainer.train(3)
    assert recorder.steps == [0, 1, 2] and recorder.ended == 1
    assert [c is not None for c in recorder.cross] == [True, False, True]
    assert [h["step"] for h in history] == [0, 1, 2]

    n = trainer.config.num_states * trainer.config.group_size
    assert with_cross.calls == [
        ("rollouts", (0, n)), ("cross", 0), ("complete", 0),
        ("rollouts", (1, n)), ("complete", 1),
        ("rollouts", (2, n)), ("cross", 2), ("complete", 2),
        ("flush", None),
    ]  # fmt: skip
    assert ("cross", 0) not in without.calls and len(without.calls) == 7
    assert (cw_with.cross_scores_sent, cw_without.cross_scores_dropped) == (2, 2)

    rows = list(csv.DictReader((tmp_path / "curves.csv").open()))
    assert [r["step"] for r in rows] == ["0", "1", "2"]
    assert float(rows[0]["success_rate"]) >= 0
    assert rows[1]["retrieval_acc"] == ""  # no cross-scores at step 1
    assert rows[2]["retrieval_acc"] != ""


def test_cli_train_function_streams_and_writes_csv(tmp_path: Path) -> None:
    from collapsewatch.trainer.cli import train

    client = FakeClient(True)
    history = train(
        env="bandit", preset="entropy-collapse", steps=2, seed=1, client=client,
        csv=tmp_path / "run.csv", progress=False,
        overrides={"sft_steps": 10, "sft_episodes": 32, "num_states": 3, "group_size": 2},
    )  # fmt: skip
    assert len(history) == 2
    assert [c for c in client.calls if c[0] == "complete"] == [("complete", 0), ("complete", 1)]
    assert len((tmp_path / "run.csv").read_text().splitlines()) == 3


def test_light_modules_do_not_import_torch() -> None:
    import subprocess

    code = (
        "import sys, collapsewatch.trainer, collapsewatch.trainer.cli, "
        "collapsewatch.trainer.callbacks, collapsewatch.trainer.envs, "
        "collapsewatch.trainer.grpo_config, collapsewatch.trainer.format; "
        "print('torch' in sys.modules or 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_train_command_maps_options(monkeypatch: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from collapsewatch.trainer import cli

    seen: dict[str, Any] = {}

    def fake_train(**kwargs: Any) -> list[dict[str, float]]:
        seen.update(kwargs)
        return [{"success_rate": 0.5, "token_entropy": 0.2}]

    monkeypatch.setattr(cli, "train", fake_train)
    runner = CliRunner()
    args = ["--env", "sokoban", "--preset", "template-collapse", "--steps", "7", "--seed", "3",
            "--run", "r1", "--csv", str(tmp_path / "m.csv"), "--no-stream"]  # fmt: skip
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert (seen["env"], seen["preset"], seen["steps"], seen["seed"]) == (
        "sokoban", "template-collapse", 7, 3,
    )  # fmt: skip
    assert seen["stream"] is False and seen["run"] == "r1"
    assert "success 0.50" in result.output
    assert runner.invoke(cli.app, ["--preset", "nope"]).exit_code == 2

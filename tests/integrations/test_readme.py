"""README's Integrations snippets stay true: the TRL one wires the callback as the
trainer expects (run against stand-ins for TRL and datasets: no model download), the
verl ones use options and names that exist, and the chat line imports."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collapsewatch.importers import FORMATS
from collapsewatch.importers.chat import rollout_from_record
from collapsewatch.sdk.integrations.cli import follow_app

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8").split("\n## Integrations\n", 1)[1]
    text = text.split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


class _Recorder:
    """Stands in for GRPOConfig / GRPOTrainer: keeps its arguments."""

    made: list[_Recorder] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
        self.trained = False
        _Recorder.made.append(self)

    def train(self) -> None:
        self.trained = True


def test_trl_snippet_wires_the_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    (code,) = [b for b in _blocks("python") if "CollapsewatchCallback" in b]
    fake_trl = types.ModuleType("trl")
    fake_trl.GRPOConfig = _Recorder  # type: ignore[attr-defined]
    fake_trl.GRPOTrainer = _Recorder  # type: ignore[attr-defined]
    fake_datasets = types.ModuleType("datasets")
    fake_datasets.load_dataset = lambda *a, **k: ["a dataset"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trl", fake_trl)
    monkeypatch.setitem(sys.modules, "datasets", fake_datasets)
    _Recorder.made = []
    namespace: dict[str, Any] = {"__name__": "readme_snippet"}
    exec(compile(code, "README.md (TRL snippet)", "exec"), namespace)

    cw = namespace["cw"]
    trainer = namespace["trainer"]
    assert trainer.trained and trainer.kwargs["callbacks"] == [cw]
    assert cw.stop_on == ("template_collapse", "no_signal")
    (reward,) = trainer.kwargs["reward_funcs"]
    assert reward.__name__ == "near_50_chars"  # TRL names its reward metrics after it
    assert reward(prompts=["p"], completions=["x" * 50]) == [0.0]
    assert cw.client is None  # nothing is sent before the trainer starts
    assert namespace["GRPOConfig"] is _Recorder


def test_verl_reward_snippet_returns_a_wrapped_function() -> None:
    (code,) = [b for b in _blocks("python") if "stream_rewards" in b]
    namespace: dict[str, Any] = {"__name__": "my_reward"}
    exec(compile(code, "README.md (verl snippet)", "exec"), namespace)
    compute_score = namespace["compute_score"]
    assert compute_score.__name__ == "score_gsm8k"
    assert callable(compute_score.collapsewatch_client)  # made on the first call only


def test_follow_command_options_exist() -> None:
    (command,) = [b for b in _blocks("bash") if "follow verl" in b]
    used = set(re.findall(r"(--[a-z-]+)", command))
    help_text = CliRunner().invoke(follow_app, ["verl", "--help"], terminal_width=200).output
    assert used and all(option in help_text for option in used), (used, help_text)


def test_chat_example_imports() -> None:
    import json

    (line,) = _blocks("json")
    rollout = rollout_from_record(json.loads(line), line_no=1)
    assert (rollout.state_id, rollout.step, len(rollout.turns)) == ("box3", 12, 2)
    assert json.loads(rollout.turns[0].action)["arguments"] == {"dir": "east", "steps": 2}
    (command,) = [b for b in _blocks("bash") if "--format chat" in b]
    assert "chat" in FORMATS and "collapsewatch import" in command

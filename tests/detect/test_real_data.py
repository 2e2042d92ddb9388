"""The detectors on real rollouts other people recorded (tests/shared_data.py).

Each file goes through the importer, ``score_step`` (TF-IDF) and ``replay``; the scored
series is computed once per module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collapsewatch.detect import AlertEvent, DetectorSettings, replay, template_examples
from collapsewatch.detect.history import History
from collapsewatch.detect.rules import no_signal
from collapsewatch.importers import load_rollouts
from collapsewatch.scoring import score_steps
from tests.shared_data import shared_data

Series = dict[int, dict[str, float | None]]


def _series(path: Path) -> Series:
    return {s.step: s.metrics for s in score_steps(list(load_rollouts(path)))}


@pytest.fixture(scope="module")
def format_collapse() -> Series:
    return _series(shared_data("trl_vqa", "format_collapse_r2.rollout_results.md"))


@pytest.fixture(scope="module")
def healthy() -> Series:
    return _series(shared_data("trl_vqa", "healthy_r4.rollout_results.md"))


def _firing(events: list[AlertEvent], rule: str) -> list[AlertEvent]:
    return [e for e in events if e.rule == rule and e.state == "firing"]


def test_format_collapse_r2_fires_format_collapse_in_time(format_collapse: Series) -> None:
    events = replay(format_collapse)
    fmt = _firing(events, "format_collapse")
    assert len(fmt) == 1
    assert 9 <= fmt[0].step <= 13
    assert fmt[0].evidence["baseline"]["mean"] > 0.5  # about 0.74 over steps 1-5
    assert fmt[0].evidence["value"] < 0.2


def test_format_collapse_r2_raises_no_template_collapse(format_collapse: Series) -> None:
    # Responsiveness does fall when <think> vanishes (steps 13-17), but the reasoning is
    # gone, not templated: the format guard keeps template_collapse silent.
    assert _firing(replay(format_collapse), "template_collapse") == []


def test_healthy_r4_raises_at_most_a_late_saturation_warning(healthy: Series) -> None:
    events = replay(healthy)
    for e in events:
        assert e.rule == "no_signal", e.to_json()
        assert e.severity == "warning"
        assert e.step >= 20
        if e.state == "firing":
            assert e.evidence["saturated_at"] == "full_reward"


def test_real_series_replay_prefix_property(format_collapse: Series) -> None:
    full = replay(format_collapse)
    for n in (5, 11, 12, 20, 30):
        part = replay({s: m for s, m in format_collapse.items() if s <= n})
        assert part == full[: len(part)]
        assert len(part) == sum(1 for e in full if e.step <= n)


def test_template_examples_on_a_real_step() -> None:
    path = shared_data("trl_vqa", "format_collapse_r2.rollout_results.md")
    step_20 = [r for r in load_rollouts(path) if r.step == 20]
    examples = template_examples(step_20)
    # Whatever it finds comes from distinct states and is short enough for an alert.
    assert len({e["state_id"] for e in examples}) == len(examples)
    assert all(len(e["reasoning"]) <= 300 for e in examples)


def test_healthy_r4_no_signal_steps_read_as_saturated_at_full_reward(healthy: Series) -> None:
    # The no-signal condition holds at some late steps (never 10 in a row, so no alert);
    # where it does, the evidence must say the flat groups are all-success.
    h = History(healthy)
    settings = DetectorSettings()
    bad = [no_signal(h, i, settings) for i in range(len(h))]
    bad = [v for v in bad if v.status == "bad"]
    assert bad, "expected late steps with (almost) no reward variance"
    assert all(v.evidence["step"] >= 20 for v in bad)
    assert {v.evidence["saturated_at"] for v in bad} == {"full_reward"}

"""replay: deterministic, causal (a longer series has the shorter one's events as a
prefix), JSON-ready events; and the settings object."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from collapsewatch.detect import RULES, DetectorSettings, replay

from .series import make_series, step_change, wiggle


def troubled_series(steps: int = 60) -> dict[int, dict[str, float | None]]:
    """Several rules fire and resolve: template collapse (20-40), format collapse from
    45, a non-finite value at 10."""
    return make_series(
        steps,
        responsiveness__mi_embed=lambda s: (0.1 if 20 <= s < 40 else 0.6) + 0.01 * (s % 3),
        responsiveness__retrieval_embed=wiggle(0.8, 0.03),
        diversity__token_entropy=wiggle(1.0),
        correctness__valid_format_rate=step_change(0.9, 0.1, 45, 0.01),
        structure__nonfinite=lambda s: 1.0 if s == 10 else 0.0,
        correctness__reward_mean=wiggle(1.0),
        correctness__success_rate=wiggle(0.6),
    )


def test_replay_events_in_step_order_with_known_content() -> None:
    events = replay(troubled_series())
    got = [(e.step, e.rule, e.state) for e in events]
    assert got == sorted(got, key=lambda x: (x[0], RULES.index(x[1])))
    rules = {e.rule for e in events}
    assert {"template_collapse", "format_collapse", "nonfinite"} <= rules
    assert [e.state for e in events if e.rule == "template_collapse"] == ["firing", "resolved"]


def test_replay_is_deterministic() -> None:
    series = troubled_series()
    assert replay(series) == replay(series)
    assert [e.to_json() for e in replay(series)] == [e.to_json() for e in replay(dict(series))]


def test_replay_prefix_property() -> None:
    series = troubled_series()
    full = replay(series)
    for n in (0, 1, 11, 21, 22, 23, 30, 41, 45, 48, 60):
        prefix = {s: m for s, m in series.items() if s < n}
        events = replay(prefix)
        assert events == full[: len(events)], n
        assert all(e.step < n for e in events)
        # Every event of the full replay at a step inside the prefix is there.
        assert len(events) == sum(1 for e in full if e.step < n)


def test_replay_accepts_non_contiguous_unordered_steps() -> None:
    # The same run logged every 10th step.
    series = {10 * s: m for s, m in troubled_series().items()}
    shuffled = dict(reversed(list(series.items())))
    events = replay(shuffled)
    assert events == replay(series)
    assert all(e.step % 10 == 0 for e in events)
    # Counting is in scored steps: template collapse fires at the same position.
    dense = replay(troubled_series())
    first = next(e for e in dense if e.rule == "template_collapse")
    sparse = next(e for e in events if e.rule == "template_collapse")
    assert sparse.step == 10 * first.step


def test_replay_empty_and_unknown_series() -> None:
    assert replay({}) == []
    assert replay(make_series(30, some__other_metric=1.0)) == []
    assert replay(make_series(30, responsiveness__mi_embed=None)) == []


def test_to_json_shape_and_strict_json() -> None:
    events = replay(troubled_series())
    for e in events:
        obj = e.to_json()
        assert list(obj) == ["alert", "step", "state", "severity", "message", "evidence"]
        assert obj["alert"] in RULES
        assert obj["state"] in ("firing", "resolved")
        assert obj["severity"] in ("warning", "critical")
        assert obj["evidence"]["step"] == e.step
        json.dumps(obj, allow_nan=False)  # strict JSON: no NaN, no numpy types


def test_settings_change_thresholds() -> None:
    series = troubled_series()
    strict = DetectorSettings(template_fire_fraction=0.1, template_clear_fraction=0.2)
    assert not any(e.rule == "template_collapse" for e in replay(series, strict))


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLAPSEWATCH_DETECT_TEMPLATE_FIRE_FRACTION", "0.1")
    monkeypatch.setenv("COLLAPSEWATCH_DETECT_TEMPLATE_CLEAR_FRACTION", "0.2")
    assert DetectorSettings().template_fire_fraction == 0.1
    assert not any(e.rule == "template_collapse" for e in replay(troubled_series()))


def test_settings_reject_inverted_hysteresis() -> None:
    with pytest.raises(ValidationError, match="hysteresis"):
        DetectorSettings(format_fire_fraction=0.6, format_clear_fraction=0.5)

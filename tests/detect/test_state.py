"""The alert state machine on hand-made verdict sequences, with exact event lists."""

from __future__ import annotations

import pytest

from collapsewatch.detect import AlertStateMachine, Verdict

CODES = {"b": "bad", "c": "clear", "h": "hold", "u": "unknown"}


def run(codes: str, **kwargs: int) -> list[tuple[int, str]]:
    """Feed one verdict per character (b bad, c clear, h hold, u unknown) at steps 0, 1,
    ...; return the (step, state) events."""
    params = {"min_steps": 1, "clear_steps": 1, "cooldown_steps": 0, **kwargs}
    machine = AlertStateMachine("template_collapse", **params)
    events = []
    for step, code in enumerate(codes):
        event = machine.update(step, Verdict(CODES[code], "critical", f"m{step}", {"step": step}))
        if event is not None:
            events.append((event.step, event.state))
    return events


def test_min_duration_needs_consecutive_bad_steps() -> None:
    assert run("bbcbbbccc", min_steps=3, clear_steps=3) == [(5, "firing"), (8, "resolved")]


def test_min_duration_one_fires_at_once() -> None:
    assert run("cb") == [(1, "firing")]


def test_hold_resets_a_pending_alert() -> None:
    assert run("bhbhb", min_steps=2) == []


def test_unknown_neither_advances_nor_resets() -> None:
    assert run("bub", min_steps=2) == [(2, "firing")]
    assert run("bcucc", min_steps=1, clear_steps=3) == [(0, "firing"), (4, "resolved")]


def test_fires_once_per_episode() -> None:
    assert run("b" * 20, min_steps=2) == [(1, "firing")]


def test_hysteresis_hold_keeps_firing() -> None:
    # Between the thresholds ("hold") the alert stays on; only clear steps resolve it.
    assert run("bbhhhhcc", min_steps=2, clear_steps=2) == [(1, "firing"), (7, "resolved")]


def test_clear_count_resets_on_bad_or_hold() -> None:
    assert run("bcbchccc", clear_steps=2) == [(0, "firing"), (6, "resolved")]


def test_cooldown_ignores_bad_steps_after_resolve() -> None:
    # Resolved at 1; steps 2-4 are the cooldown; the bad step 5 fires again.
    assert run("bcbbbb", cooldown_steps=3) == [(0, "firing"), (1, "resolved"), (5, "firing")]


def test_cooldown_bad_steps_do_not_count_toward_min_duration() -> None:
    # Fires at 1, resolves at 2; the cooldown ignores 3-5 (they are not "pending");
    # bad steps 6 and 7 are the two the re-fire needs.
    assert run("bbcbbbbb", min_steps=2, cooldown_steps=3) == [
        (1, "firing"),
        (2, "resolved"),
        (7, "firing"),
    ]


def test_cooldown_then_min_duration() -> None:
    # min 2: fires at 1, resolves at 2; cooldown 2 ignores steps 3-4; steps 5-6 bad -> 6.
    assert run("bbcbbbb", min_steps=2, cooldown_steps=2) == [
        (1, "firing"),
        (2, "resolved"),
        (6, "firing"),
    ]


def test_events_carry_severity_message_and_evidence() -> None:
    machine = AlertStateMachine("nonfinite", min_steps=1, clear_steps=1, cooldown_steps=0)
    fire = machine.update(3, Verdict("bad", "critical", "broken", {"step": 3}))
    done = machine.update(4, Verdict("clear", "warning", "fine again", {"step": 4}))
    assert fire is not None and done is not None
    assert (fire.severity, fire.message, fire.evidence["step"]) == ("critical", "broken", 3)
    assert fire.evidence["min_steps"] == 1
    # The resolve keeps the severity the alert fired with and says when it fired.
    assert (done.severity, done.message, done.evidence["fired_step"]) == (
        "critical",
        "fine again",
        3,
    )


@pytest.mark.parametrize("kwargs", [{"min_steps": 0}, {"clear_steps": 0}, {"cooldown_steps": -1}])
def test_bad_parameters(kwargs: dict[str, int]) -> None:
    params = {"min_steps": 1, "clear_steps": 1, "cooldown_steps": 0, **kwargs}
    with pytest.raises(ValueError):
        AlertStateMachine("nonfinite", **params)

"""Replay a run's metric series through every rule's alert state machine."""

from __future__ import annotations

from .config import DetectorSettings
from .events import RULES, AlertEvent, json_safe
from .history import History, Series
from .rules import RULE_FUNCTIONS, min_steps
from .state import AlertStateMachine


def replay(series: Series, settings: DetectorSettings | None = None) -> list[AlertEvent]:
    """The alert events a run's metric series raises, evaluating its steps in order.

    Args:
        series: step -> that step's metrics (``StepScore.metrics``: name -> value, None
            where undefined). Steps may be non-contiguous; they are evaluated in
            increasing order. NaN/Inf values are treated as undefined by every rule
            but raise the ``nonfinite`` rule.
        settings: thresholds; ``DetectorSettings()`` (environment, then defaults) when
            None.

    Returns:
        The events in order of step, then of :data:`RULES`. Deterministic, and causal:
        each step's verdicts read only that step and earlier ones, so replaying a
        longer series (the same steps plus later ones) returns these events as its
        prefix. Events already stored never change when a new step arrives; the worker
        can replay the whole series and store the events it has not stored yet.
    """
    s = settings if settings is not None else DetectorSettings()
    history = History(series)
    machines = {
        rule: AlertStateMachine(
            rule,
            min_steps=min_steps(rule, s),
            clear_steps=s.clear_steps,
            cooldown_steps=s.cooldown_steps,
        )
        for rule in RULES
    }
    events: list[AlertEvent] = []
    for i, step in enumerate(history.steps):
        for rule in RULES:
            verdict = RULE_FUNCTIONS[rule](history, i, s)
            event = machines[rule].update(step, verdict)
            if event is not None:
                events.append(
                    AlertEvent(
                        event.rule,
                        event.step,
                        event.state,
                        event.severity,
                        event.message,
                        json_safe(event.evidence),
                    )
                )
    return events

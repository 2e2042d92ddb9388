"""The alert state machine of one (run, rule): ok → pending → firing → resolved.

A rule judges each scored step with a :class:`Verdict`:

- ``bad``: the fire condition holds;
- ``clear``: the clear condition holds (a separate, laxer threshold: hysteresis);
- ``hold``: between the two thresholds, or the rule is suppressed at this step (for
  example template_collapse during a format collapse);
- ``unknown``: the rule cannot judge this step (metric undefined, no baseline yet).

Transitions:

- ``ok``: a ``bad`` step starts ``pending`` (count 1), unless it falls within
  ``cooldown_steps`` steps after the last resolve, where bad steps are ignored.
- ``pending``: ``bad`` adds 1 and at ``min_steps`` the alert fires (a ``firing``
  event at that step); ``clear`` or ``hold`` go back to ``ok``; ``unknown`` keeps
  the count.
- ``firing``: ``clear`` adds 1 to the clear count and at ``clear_steps`` the alert
  resolves (a ``resolved`` event); ``bad`` or ``hold`` reset the clear count;
  ``unknown`` keeps it.
- ``resolved``: the machine is back in ``ok`` with the cooldown running.

So each episode of trouble gives exactly one ``firing`` event and, if it clears, one
``resolved`` event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .events import AlertEvent, Severity

Status = Literal["bad", "clear", "hold", "unknown"]


@dataclass(frozen=True)
class Verdict:
    """A rule's judgement of one step: its status, the severity it would fire with,
    a one-sentence message and the evidence."""

    status: Status
    severity: Severity = "warning"
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict, hash=False)


UNKNOWN = Verdict("unknown")


class AlertStateMachine:
    """Turns one rule's per-step verdicts into firing / resolved events.

    Args:
        rule: the rule name (one of :data:`~collapsewatch.detect.RULES`).
        min_steps: consecutive ``bad`` steps needed to fire (>= 1).
        clear_steps: consecutive ``clear`` steps needed to resolve (>= 1).
        cooldown_steps: steps after a resolve during which ``bad`` steps are ignored.
    """

    def __init__(self, rule: str, *, min_steps: int, clear_steps: int, cooldown_steps: int) -> None:
        if min_steps < 1 or clear_steps < 1 or cooldown_steps < 0:
            raise ValueError("min_steps and clear_steps must be >= 1, cooldown_steps >= 0")
        self.rule = rule
        self.min_steps = min_steps
        self.clear_steps = clear_steps
        self.cooldown_steps = cooldown_steps
        self.state: Literal["ok", "pending", "firing"] = "ok"
        self._bad = 0
        self._clear = 0
        self._cooldown = 0
        self._severity: Severity = "warning"
        self._fired_step: int | None = None

    def update(self, step: int, verdict: Verdict) -> AlertEvent | None:
        """Feed the verdict of the next step (steps in increasing order); returns the
        event this step raises, if any."""
        in_cooldown = self._cooldown > 0
        if in_cooldown:
            self._cooldown -= 1
        status = verdict.status

        if self.state == "firing":
            if status == "clear":
                self._clear += 1
                if self._clear >= self.clear_steps:
                    return self._resolve(step, verdict)
            elif status in ("bad", "hold"):
                self._clear = 0
            return None

        if status == "bad" and not in_cooldown:
            self._bad += 1
            self.state = "pending"
            if self._bad >= self.min_steps:
                return self._fire(step, verdict)
        elif status in ("clear", "hold") or (status == "bad" and in_cooldown):
            self._bad = 0
            self.state = "ok"
        return None

    def _fire(self, step: int, verdict: Verdict) -> AlertEvent:
        self.state = "firing"
        self._bad = 0
        self._clear = 0
        self._severity = verdict.severity
        self._fired_step = step
        evidence = {**verdict.evidence, "min_steps": self.min_steps}
        return AlertEvent(self.rule, step, "firing", verdict.severity, verdict.message, evidence)

    def _resolve(self, step: int, verdict: Verdict) -> AlertEvent:
        self.state = "ok"
        self._clear = 0
        self._cooldown = self.cooldown_steps
        evidence = {
            **verdict.evidence,
            "fired_step": self._fired_step,
            "clear_steps": self.clear_steps,
        }
        message = verdict.message or f"{self.rule} cleared at step {step}."
        return AlertEvent(self.rule, step, "resolved", self._severity, message, evidence)

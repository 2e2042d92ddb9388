"""Alert events: what a detector says, in the one shape every consumer uses.

The rule names (:data:`RULES`) are the same everywhere: API, database, dashboard,
Slack, and ``collapsewatch score --json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

RULES: tuple[str, ...] = (
    "template_collapse",
    "entropy_collapse",
    "no_signal",
    "degenerate_text",
    "format_collapse",
    "reward_hacking",
    "group_integrity",
    "nonfinite",
)
"""Every rule a detector can raise, in the order :func:`~collapsewatch.detect.replay`
evaluates them at each step."""

Severity = Literal["warning", "critical"]
State = Literal["firing", "resolved"]


@dataclass(frozen=True)
class AlertEvent:
    """One transition of one rule's alert: it started firing, or it resolved.

    ``message`` is one human sentence with the numbers; ``evidence`` holds the step,
    the values the rule read, their baseline and the thresholds (JSON-safe: finite
    floats, ints, strings, lists and dicts only).
    """

    rule: str
    step: int
    state: State
    severity: Severity
    message: str
    evidence: dict[str, Any] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        """The event as ``collapsewatch score --json`` prints it and the API stores it:
        ``{"alert", "step", "state", "severity", "message", "evidence"}``."""
        return {
            "alert": self.rule,
            "step": self.step,
            "state": self.state,
            "severity": self.severity,
            "message": self.message,
            "evidence": self.evidence,
        }


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars made Python, floats rounded to 6 significant digits
    (so stored evidence reads cleanly and compares equal across runs), and non-finite
    floats made None (strict JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if hasattr(value, "item") and not isinstance(value, (int, float)):
        value = value.item()  # numpy scalar
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.6g}")
    return str(value)

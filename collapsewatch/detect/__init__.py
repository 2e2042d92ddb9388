"""Collapse detectors: rules over a run's metric series, an alert state machine, and
example rollouts for the evidence.

Pure: no database, no HTTP. The worker and ``collapsewatch score --json`` call
:func:`replay` on a run's series (step -> ``StepScore.metrics``) and store or print
its events::

    from collapsewatch.detect import replay, template_examples

    events = replay({s.step: s.metrics for s in scores})
    for event in events:
        print(event.to_json())   # {"alert": RULE, "step": S, "state": ..., ...}

Rules (:data:`RULES`): template_collapse, entropy_collapse, no_signal,
degenerate_text, format_collapse, reward_hacking, group_integrity, nonfinite.
docs/detectors.md describes each; :class:`DetectorSettings` holds every threshold.
"""

from .config import DetectorSettings
from .events import RULES, AlertEvent
from .examples import template_examples
from .replay import replay
from .state import AlertStateMachine, Verdict

__all__ = [
    "RULES",
    "AlertEvent",
    "AlertStateMachine",
    "DetectorSettings",
    "Verdict",
    "replay",
    "template_examples",
]

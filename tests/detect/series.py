"""Hand-made metric series for the detector tests.

:func:`make_series` builds ``step -> metrics`` from per-metric lists or constants, so a
test states only the metrics its rule reads; everything else is absent (None).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Value = float | None
Spec = Value | Sequence[Value] | Callable[[int], Value]


def make_series(steps: int | Sequence[int], **metrics: Spec) -> dict[int, dict[str, Value]]:
    """``step -> {name: value}``. Metric names use ``__`` for the dot
    (``diversity__token_entropy``); a spec is a constant, a list indexed by position, or
    a function of the step."""
    step_list = list(range(steps)) if isinstance(steps, int) else list(steps)
    out: dict[int, dict[str, Value]] = {}
    for pos, step in enumerate(step_list):
        row: dict[str, Value] = {}
        for key, spec in metrics.items():
            name = key.replace("__", ".")
            if callable(spec):
                row[name] = spec(step)
            elif isinstance(spec, (list, tuple)):
                row[name] = spec[pos]
            else:
                row[name] = spec
        out[step] = row
    return out


def wiggle(level: float, amp: float = 0.02) -> Callable[[int], float]:
    """``level`` with a small deterministic wobble (+amp, -amp, +amp/2, ...), so the
    series has a non-zero spread like a real one."""
    pattern = (1.0, -1.0, 0.5, -0.5, 0.0)
    return lambda step: level + amp * pattern[step % len(pattern)]


def step_change(before: float, after: float, at: int, amp: float = 0.02) -> Callable[[int], float]:
    """``before`` (wobbling) until step ``at``, ``after`` (wobbling) from it on."""
    b, a = wiggle(before, amp), wiggle(after, amp)
    return lambda step: b(step) if step < at else a(step)


def fired(events: Sequence[object], rule: str) -> list[tuple[int, str]]:
    """``(step, state)`` of a rule's events."""
    return [(e.step, e.state) for e in events if e.rule == rule]  # type: ignore[attr-defined]

"""Metric functions: pure functions over arrays, one module per dimension.

- :mod:`.correctness`: is the task solved, is there a GRPO learning signal left.
- :mod:`.diversity`: do outputs vary (RAGEN-2's H(Z | X) side).
- :mod:`.responsiveness`: do outputs depend on the input (I(X; Z)).
- :mod:`.structure`: rollout and state counts, group codes.
- :mod:`.representation`: text -> vectors (TF-IDF default, MiniLM).
- :mod:`.masking`: take copied observation tokens out of the reasoning (copy-aware
  responsiveness).
- :mod:`.series`: metrics over a run's series of steps (EMAs).

No database, no HTTP and nothing else of collapsewatch is imported here, so the
functions can be tested and reused alone. docs/metrics.md is the catalogue.
"""

from . import (
    correctness,
    diversity,
    masking,
    representation,
    responsiveness,
    series,
    structure,
)

__all__ = [
    "correctness",
    "diversity",
    "masking",
    "representation",
    "responsiveness",
    "series",
    "structure",
]

"""Structure of a step: how many rollouts, how many states, who is in which group.

The other metric modules reuse :func:`group_codes` so that "group" means the same thing
everywhere: rollouts at one step with equal ``state_id`` (DESIGN.md §3, a GRPO group).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import NDArray


def group_codes(groups: Sequence[Hashable] | NDArray[np.generic]) -> tuple[NDArray[np.intp], int]:
    """Map group labels to dense integer codes.

    Args:
        groups: ``(M,)`` hashable labels, one per rollout (state ids).

    Returns:
        ``(codes, n)``: ``codes`` is ``(M,)`` int with values in ``[0, n)``, numbered in
        order of first appearance, and ``n`` the number of distinct labels (0 when M = 0).
    """
    index: dict[Hashable, int] = {}
    codes = np.fromiter(
        (index.setdefault(g, len(index)) for g in groups), dtype=np.intp, count=len(groups)
    )
    return codes, len(index)


def num_rollouts(groups: Sequence[Hashable] | NDArray[np.generic]) -> int:
    """Number of rollouts M of the step.

    Args:
        groups: ``(M,)`` state ids, one per rollout.

    Returns:
        M (0 for an empty step). Never undefined. Source: DESIGN.md §4.
    """
    return len(groups)


def distinct_states(groups: Sequence[Hashable] | NDArray[np.generic]) -> int:
    """Number of distinct states N of the step (the number of GRPO groups).

    Args:
        groups: ``(M,)`` state ids, one per rollout.

    Returns:
        N (0 for an empty step). Never undefined. N is also the number of columns of the
        responsiveness estimators, whose MI is bounded by log N. Source: DESIGN.md §4.
    """
    return group_codes(groups)[1]

"""Structure of a step: how many rollouts, how many states, who is in which group.

The other metric modules reuse :func:`group_codes` so that "group" means the same thing
everywhere: rollouts at one step with equal ``state_id`` (DESIGN.md §3, a GRPO group).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

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


def group_size_range(groups: Sequence[Hashable] | NDArray[np.generic]) -> tuple[int, int] | None:
    """Smallest and largest GRPO group of the step.

    Args:
        groups: ``(M,)`` state ids, one per rollout.

    Returns:
        ``(min, max)`` rollouts per state, or None for an empty step. Unequal sizes
        where the trainer samples a fixed group size mean rollouts were lost or
        duplicated on the way. Source: DESIGN.md §3 (a group = equal state_id at a step).
    """
    codes, n = group_codes(groups)
    if n == 0:
        return None
    counts = np.bincount(codes, minlength=n)
    return int(counts.min()), int(counts.max())


def duplicate_rate(
    groups: Sequence[Hashable] | NDArray[np.generic], keys: Sequence[Hashable]
) -> float | None:
    """Share of rollouts identical to an earlier rollout of the same group.

    Args:
        groups: ``(M,)`` state ids.
        keys: ``(M,)`` hashable content of each rollout; two rollouts are duplicates
            when their keys are equal (the scorer passes the reasoning and action texts
            of every turn, in turn order, so equal means byte-identical).

    Returns:
        ``sum over groups (size - distinct keys) / M`` in [0, 1): 0 when every rollout
        of a group differs, (K - 1) / K when all K rollouts of every group are the
        same; None for an empty step. Identical rollouts in *different* groups do not
        count (that is template collapse, the responsiveness metrics' job).
        Source: DESIGN.md §4 (structural checks); issue 3.
    """
    if len(keys) != len(groups):
        raise ValueError(f"groups has {len(groups)} entries but keys has {len(keys)}")
    if not len(groups):
        return None
    distinct = len(set(zip(groups, keys, strict=True)))
    return (len(groups) - distinct) / len(groups)


def nonfinite_count(*values: NDArray[np.floating] | Iterable[float | None]) -> int:
    """Number of NaN and ±Inf entries among any number of value collections.

    Args:
        values: numpy arrays of any shape (e.g. a cross-score matrix ``(M, N)``) or
            flat sequences of floats whose None entries ("not reported") are skipped
            (e.g. rewards ``(M,)``, per-turn entropies ``(T,)``).

    Returns:
        The count (>= 0); never undefined. A trainer that sends NaN or Inf is broken
        somewhere: the metrics leave such values out, and this counts them.
        Source: DESIGN.md §6; issue 3 (``structure.nonfinite``).
    """
    total = 0
    for v in values:
        if isinstance(v, np.ndarray):
            arr = v.astype(np.float64, copy=False)
        else:
            arr = np.array([x for x in v if x is not None], dtype=np.float64)
        total += int(arr.size - np.count_nonzero(np.isfinite(arr)))
    return total


def truncated_rate(truncated: Sequence[bool | None]) -> float | None:
    """Share of rollouts cut at the length cap, over those where the trainer says.

    Args:
        truncated: ``(M,)`` of True / False / None (None: the trainer did not say).

    Returns:
        A share in [0, 1], or None when no rollout has the flag. A rising share means
        responses hit the cap: runaway length, a common companion of degenerate text.
        Source: issue 3 (``structure.truncated_rate``).
    """
    defined = [bool(t) for t in truncated if t is not None]
    return sum(defined) / len(defined) if defined else None

"""Correctness: is the task being solved, and is there a learning signal left?

RAGEN-2 (arXiv 2604.06268) tracks success and the within-group reward spread: GRPO's
advantage is the reward minus its group mean, so a group whose rewards are all equal
carries no gradient, and a collapse of the group reward std is its early-stop trigger.

Non-finite rewards (NaN, ±Inf: the wire format accepts them so that a monitor sees
them) are left out of every function here, as if the rollout had not been sent; they
are counted by ``structure.nonfinite``. A group keeps its finite members.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .structure import group_codes

# Rewards within this (relative) distance count as equal: float sums such as
# 0.1 + 0.2 vs 0.3 must not look like a learning signal.
_EQUAL_RTOL = 1e-9


def _rewards(rewards: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(rewards, dtype=np.float64).reshape(-1)


def _groups_of_two_or_more(
    rewards: ArrayLike, groups: Sequence[Hashable] | NDArray[np.generic]
) -> list[NDArray[np.float64]]:
    r = _rewards(rewards)
    if len(groups) != len(r):
        raise ValueError(f"rewards has {len(r)} entries but groups has {len(groups)}")
    finite = np.isfinite(r)
    codes, n = group_codes([g for g, f in zip(groups, finite, strict=True) if f])
    r = r[finite]
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n + 1))
    members = (r[order[a:b]] for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    return [m for m in members if len(m) >= 2]


def _bool_rate(flags: Sequence[bool | None]) -> float | None:
    defined = [bool(f) for f in flags if f is not None]
    if not defined:
        return None
    return sum(defined) / len(defined)


def reward_mean(rewards: ArrayLike) -> float | None:
    """Mean total return of the step's rollouts.

    Args:
        rewards: ``(M,)`` float, one total return per rollout (the environment's units);
            NaN and ±Inf entries are left out.

    Returns:
        The mean of the finite rewards, or None when there is none.
        Source: DESIGN.md §4 (correctness).
    """
    r = _rewards(rewards)
    r = r[np.isfinite(r)]
    return float(r.mean()) if r.size else None


def success_rate(success: Sequence[bool | None]) -> float | None:
    """Share of rollouts that solved the task, over rollouts whose success is defined.

    Args:
        success: ``(M,)`` of True / False / None (None: the environment does not say).

    Returns:
        A share in [0, 1], or None when no rollout has a success label.
        Source: RAGEN-2 (arXiv 2604.06268), task success; DESIGN.md §4.
    """
    return _bool_rate(success)


def valid_format_rate(valid_format: Sequence[bool | None]) -> float | None:
    """Share of turns whose response parsed into reasoning and action.

    Args:
        valid_format: ``(T,)`` of True / False / None, one per turn of the step
            (None: the trainer's format does not define it).

    Returns:
        A share in [0, 1] over the turns where it is defined, or None when it is defined
        for no turn. Source: DESIGN.md §4 (correctness).
    """
    return _bool_rate(valid_format)


def group_reward_std(
    rewards: ArrayLike, groups: Sequence[Hashable] | NDArray[np.generic]
) -> float | None:
    """Mean over GRPO groups of the Bessel-corrected std of rollout reward in the group.

    Args:
        rewards: ``(M,)`` float total returns (non-finite ones left out).
        groups: ``(M,)`` state ids; rollouts with equal id form a group.

    Returns:
        Mean over groups of size >= 2 of ``std(rewards in group, ddof=1)`` (reward units,
        >= 0), or None when no group has two rollouts. Groups of one are left out: their
        std is undefined and GRPO gives them no advantage.
        Source: RAGEN-2 (arXiv 2604.06268), reward-variance signal (SNR) and its
        early-stop rule; DESIGN.md §4.
    """
    members = _groups_of_two_or_more(rewards, groups)
    if not members:
        return None
    return float(np.mean([m.std(ddof=1) for m in members]))


def zero_std_fraction(
    rewards: ArrayLike, groups: Sequence[Hashable] | NDArray[np.generic]
) -> float | None:
    """Share of GRPO groups whose rewards are all equal (no learning signal).

    Args:
        rewards: ``(M,)`` float total returns (non-finite ones left out).
        groups: ``(M,)`` state ids; rollouts with equal id form a group.

    Returns:
        The share in [0, 1] of groups of size >= 2 whose rewards are equal (within a
        relative tolerance of 1e-9), or None when no group has two rollouts.
        Source: RAGEN-2 (arXiv 2604.06268); DESIGN.md §4.
    """
    members = _groups_of_two_or_more(rewards, groups)
    if not members:
        return None
    flat = [float(np.ptp(m)) <= _EQUAL_RTOL * max(1.0, float(np.abs(m).max())) for m in members]
    return sum(flat) / len(flat)

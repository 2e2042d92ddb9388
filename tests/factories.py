"""Builders of wire-format objects for tests."""

from __future__ import annotations

from typing import Any


def turn(index: int = 0, **fields: Any) -> dict[str, Any]:
    base = {
        "index": index,
        "observation": "obs",
        "reasoning": "think",
        "action": "act",
        "reward": 0.0,
        "done": True,
    }
    base.update(fields)
    return base


def rollout(
    rollout_id: str, step: int = 0, state_id: str = "s0", reward: float = 1.0, **fields: Any
) -> dict[str, Any]:
    base: dict[str, Any] = {
        "rollout_id": rollout_id,
        "step": step,
        "state_id": state_id,
        "reward": reward,
        "success": reward > 0,
        "turns": [turn(reasoning=f"reasoning about {state_id}")],
    }
    base.update(fields)
    return base


def step_batch(
    step: int, n_states: int = 4, group_size: int = 4, prefix: str = "r"
) -> list[dict[str, Any]]:
    """``n_states`` groups of ``group_size`` rollouts whose reasoning names their state,
    rewards 0/1 alternating within a group."""
    out = []
    for s in range(n_states):
        for g in range(group_size):
            out.append(
                rollout(
                    f"{prefix}{step}-{s}-{g}",
                    step=step,
                    state_id=f"state-{s}",
                    reward=float(g % 2),
                    turns=[
                        turn(
                            observation=f"grid {s}",
                            reasoning=f"the goal of state {s} is at "
                            f"cell {s * 7 % 11} so move {['left', 'right', 'up', 'down'][s % 4]}",
                            action=["left", "right", "up", "down"][s % 4],
                        )
                    ],
                )
            )
    return out

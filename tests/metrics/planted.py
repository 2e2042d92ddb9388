"""Planted steps with a known answer (DESIGN.md §4): the metric validation cases.

- :func:`template_step`: reasoning drawn from a few fixed templates whatever the state
  -> responsiveness about 0, within-state diversity high.
- :func:`restating_step`: reasoning restates the state's own facts in varied wording
  -> responsiveness high.
- :func:`constant_step`: one output for every rollout -> diversity about 0.
"""

from __future__ import annotations

import random

from collapsewatch.schema import Rollout, Turn

COLORS = ["red", "blue", "green", "yellow", "purple", "orange", "white", "black"]
OBJECTS = ["key", "box", "ball", "lamp", "book", "coin", "cup", "flag"]
ROOMS = ["kitchen", "garden", "attic", "cellar", "library", "garage", "bedroom", "hallway"]

TEMPLATES = [
    "I should explore carefully and look around before acting.",
    "Moving straight ahead seems like the fastest plan right now.",
    "Let me check my inventory first and then decide what to do.",
]

PHRASINGS = [
    "The {c} {o} is in the {r}, so I will go to the {r} and take the {o}.",
    "I see that the {o} in the {r} is {c}; heading to the {r} now.",
    "Goal: the {c} {o}. Location: the {r}. Plan: walk to the {r} and pick it up.",
    "Since the {r} holds the {c} {o}, my next move is toward the {r}.",
    "To finish I need the {c} {o}, which sits in the {r}.",
]

CONSTANT = "I will think step by step and then make the best move."


def _observation(state: int) -> str:
    c, o, r = COLORS[state], OBJECTS[(state * 3) % 8], ROOMS[(state * 5) % 8]
    return f"You are in a house. A {c} {o} lies in the {r}."


def _step(reasoning: list[list[str]], step: int = 0) -> list[Rollout]:
    rollouts = []
    for s, texts in enumerate(reasoning):
        for k, text in enumerate(texts):
            rollouts.append(
                Rollout(
                    rollout_id=f"s{s}-r{k}",
                    step=step,
                    state_id=f"state-{s}",
                    reward=float(k % 2),
                    turns=[Turn(index=0, observation=_observation(s), reasoning=text, action="go")],
                )
            )
    return rollouts


def template_step(states: int = 8, per_state: int = 8, seed: int = 0) -> list[Rollout]:
    """Each rollout's reasoning is one of :data:`TEMPLATES`, chosen independently of state."""
    rng = random.Random(seed)
    return _step([[rng.choice(TEMPLATES) for _ in range(per_state)] for _ in range(states)])


def restating_step(states: int = 8, per_state: int = 8, seed: int = 0) -> list[Rollout]:
    """Each rollout restates its state's facts (colour, object, room) in a random phrasing."""
    rng = random.Random(seed)
    out = []
    for s in range(states):
        c, o, r = COLORS[s], OBJECTS[(s * 3) % 8], ROOMS[(s * 5) % 8]
        out.append([rng.choice(PHRASINGS).format(c=c, o=o, r=r) for _ in range(per_state)])
    return _step(out)


def constant_step(states: int = 8, per_state: int = 8) -> list[Rollout]:
    """Every rollout reasons with the same text."""
    return _step([[CONSTANT] * per_state for _ in range(states)])

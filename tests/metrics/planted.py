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


# --- grid navigation: copy-aware responsiveness ------------------------------------
# Each state is (position, goal) on a 10 x 10 grid. The observation lists the legal
# moves, as agent environments do: those words occur in every state's observation.

MOVES_LINE = "Legal moves: up, down, left, right."

SLOT_TEMPLATES = [
    "I am at ({r},{c}) and the goal is at ({r2},{c2}), so I move right.",
    "Given that I am at ({r},{c}) with the goal at ({r2},{c2}), going up is best.",
]

HONEST_PHRASINGS = [
    "The goal is {dr} rows {vd} and {dc} columns {hd}, so my plan is {plan}.",
    "I need {dr} moves {vd} and {dc} moves {hd}; I start with {first}: {plan}.",
    "I am at ({r},{c}) and the goal is at ({r2},{c2}), so I go {plan}.",
    "Plan: {plan}. That is {dr} {vd} then {dc} {hd}.",
]


def grid_states(states: int = 8, seed: int = 0) -> list[tuple[int, int, int, int]]:
    """``states`` (r, c, r2, c2) with distinct offsets (|r2 - r|, |c2 - c|, directions):
    two states with the same offsets would get the same honest plan, which no
    measure could tell apart."""
    rng = random.Random(seed)
    out: list[tuple[int, int, int, int]] = []
    signatures: set[tuple[int, int, bool, bool]] = set()
    while len(out) < states:
        r, c, r2, c2 = (rng.randrange(10) for _ in range(4))
        sig = (abs(r2 - r), abs(c2 - c), r2 > r, c2 > c)
        if sig[0] == 0 or sig[1] == 0 or sig in signatures:
            continue
        signatures.add(sig)
        out.append((r, c, r2, c2))
    return out


def grid_observation(state: tuple[int, int, int, int]) -> str:
    r, c, r2, c2 = state
    return f"You are at ({r},{c}). The goal is at ({r2},{c2}). {MOVES_LINE}"


def _grid_step(texts: list[list[str]], grid: list[tuple[int, int, int, int]]) -> list[Rollout]:
    return [
        Rollout(
            rollout_id=f"s{s}-r{k}",
            step=0,
            state_id=f"grid-{s}",
            reward=float(k % 2),
            turns=[Turn(index=0, observation=grid_observation(grid[s]), reasoning=t, action="x")],
        )
        for s, group in enumerate(texts)
        for k, t in enumerate(group)
    ]


def slot_template_step(
    states: int = 8, per_state: int = 8, seed: int = 0, templates: int = 2
) -> list[Rollout]:
    """A collapsed template that copies the state's coordinates into fixed slots; the
    conclusion is one of ``templates`` fixed sentences drawn regardless of state."""
    rng = random.Random(seed)
    grid = grid_states(states, seed)
    texts = [
        [
            rng.choice(SLOT_TEMPLATES[:templates]).format(r=r, c=c, r2=r2, c2=c2)
            for _ in range(per_state)
        ]
        for r, c, r2, c2 in grid
    ]
    return _grid_step(texts, grid)


def honest_grid_step(states: int = 8, per_state: int = 8, seed: int = 0) -> list[Rollout]:
    """State-dependent reasoning that derives its conclusion (offsets, directions, the
    plan of moves) from the state, in a random phrasing; one phrasing in four also
    restates the coordinates. Derived numbers may equal a coordinate by chance."""
    rng = random.Random(seed)
    grid = grid_states(states, seed)
    texts = []
    for r, c, r2, c2 in grid:
        vd, hd = ("down" if r2 > r else "up"), ("right" if c2 > c else "left")
        dr, dc = abs(r2 - r), abs(c2 - c)
        moves = [vd] * dr + [hd] * dc if dr >= dc else [hd] * dc + [vd] * dr
        fields = {"r": r, "c": c, "r2": r2, "c2": c2, "dr": dr, "dc": dc, "vd": vd, "hd": hd}
        texts.append(
            [
                rng.choice(HONEST_PHRASINGS).format(**fields, first=moves[0], plan=" ".join(moves))
                for _ in range(per_state)
            ]
        )
    return _grid_step(texts, grid)

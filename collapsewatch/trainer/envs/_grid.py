"""Grid helpers shared by the grid worlds (FrozenLake, Sokoban)."""

from __future__ import annotations

MOVES: dict[str, tuple[int, int]] = {
    "up": (-1, 0),
    "down": (1, 0),
    "left": (0, -1),
    "right": (0, 1),
}
# The order the solvers try moves in: it fixes which of several shortest paths the
# expert takes, so expert trajectories are deterministic.
MOVE_ORDER: tuple[str, ...] = ("up", "down", "left", "right")
DIGITS: tuple[str, ...] = tuple(str(d) for d in range(10))


def add(pos: tuple[int, int], move: str) -> tuple[int, int]:
    dr, dc = MOVES[move]
    return pos[0] + dr, pos[1] + dc


def inside(pos: tuple[int, int], size: int) -> bool:
    return 0 <= pos[0] < size and 0 <= pos[1] < size


def render_rows(rows: list[list[str]]) -> str:
    """Cells separated by spaces, rows by ``|``: one word per cell for the tokenizer."""
    return " | ".join(" ".join(row) for row in rows)


def where(pos: tuple[int, int]) -> str:
    return f"{pos[0]} {pos[1]}"

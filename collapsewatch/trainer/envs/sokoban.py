"""A small text Sokoban: push the one box onto the target.

The room is a ``size × size`` floor (the walls around it are implicit) with a few
inner walls, rendered one word per cell: ``P`` the player, ``X`` the box, ``O`` the
target, ``#`` a wall, ``_`` floor, ``*`` the box on the target, ``@`` the player on the
target; rows separated by ``|``. Moving into the box pushes it when the cell behind it
is free. The box on the target ends the episode with reward 1 (success); every other
move gives ``step_penalty``; after ``max_turns`` actions the episode is truncated.
Rooms are drawn from the seed and always solvable within ``max_solution`` moves.
"""

from __future__ import annotations

import random
from collections import deque

from ._grid import DIGITS, MOVE_ORDER, add, inside, render_rows, where
from .base import ExpertStep, TextEnv

Pos = tuple[int, int]


class Sokoban(TextEnv):
    env_id = "sokoban"
    actions = MOVE_ORDER
    vocabulary = (
        *("P", "X", "O", "#", "_", "*", "@", "|"),
        *("player", "box", "target", "move"),
        *MOVE_ORDER,
        *DIGITS,
    )
    instruction = (
        "Sokoban: P is you, X the box, O the target, # a wall, _ floor. Rows are "
        "separated by |, row 0 is the top. Push the box onto the target by walking into "
        "it. Answer with one move: up, down, left or right."
    )

    def __init__(
        self,
        size: int = 4,
        num_walls: int = 1,
        max_turns: int = 8,
        max_solution: int = 6,
        step_penalty: float = -0.05,
        invalid_penalty: float = -0.1,
    ) -> None:
        super().__init__(invalid_penalty=invalid_penalty)
        self.size = size
        self.num_walls = num_walls
        self.max_turns = max_turns
        self.max_solution = max_solution
        self.step_penalty = step_penalty
        self.player: Pos = (0, 0)
        self.box: Pos = (0, 0)
        self.target: Pos = (0, 0)
        self.walls: frozenset[Pos] = frozenset()

    def _free(self, pos: Pos) -> bool:
        return inside(pos, self.size) and pos not in self.walls

    def _move(self, player: Pos, box: Pos, move: str) -> tuple[Pos, Pos]:
        nxt = add(player, move)
        if not self._free(nxt):
            return player, box
        if nxt == box:
            behind = add(box, move)
            if not self._free(behind):
                return player, box
            return nxt, behind
        return nxt, box

    def _plan(self) -> list[str] | None:
        """A shortest move sequence that puts the box on the target (BFS), or None."""
        start = (self.player, self.box)
        parent: dict[tuple[Pos, Pos], tuple[tuple[Pos, Pos], str] | None] = {start: None}
        queue = deque([start])
        while queue:
            state = queue.popleft()
            if state[1] == self.target:
                moves: list[str] = []
                while parent[state] is not None:
                    state, move = parent[state]  # type: ignore[misc]
                    moves.append(move)
                return moves[::-1]
            for move in MOVE_ORDER:
                nxt = self._move(*state, move)
                if nxt not in parent:
                    parent[nxt] = (state, move)
                    queue.append(nxt)
        return None

    def _reset(self, seed: int) -> None:
        rng = random.Random(seed)
        cells = [(r, c) for r in range(self.size) for c in range(self.size)]
        while True:
            picked = rng.sample(cells, 3 + self.num_walls)
            self.player, self.box, self.target = picked[0], picked[1], picked[2]
            self.walls = frozenset(picked[3:])
            plan = self._plan()
            if plan is not None and 1 <= len(plan) <= self.max_solution:
                return

    def _apply(self, move: str) -> tuple[float, bool]:
        self.player, self.box = self._move(self.player, self.box, move)
        if self.box == self.target:
            self.success = True
            return 1.0, True
        return self.step_penalty, False

    def render(self) -> str:
        rows = [["_"] * self.size for _ in range(self.size)]
        for r, c in self.walls:
            rows[r][c] = "#"
        rows[self.target[0]][self.target[1]] = "O"
        rows[self.box[0]][self.box[1]] = "*" if self.box == self.target else "X"
        rows[self.player[0]][self.player[1]] = "@" if self.player == self.target else "P"
        return render_rows(rows)

    def solve(self) -> ExpertStep:
        plan = self._plan()
        move = plan[0] if plan else MOVE_ORDER[0]
        reasoning = (
            f"player {where(self.player)} box {where(self.box)} "
            f"target {where(self.target)} move {move}"
        )
        return ExpertStep(reasoning=reasoning, action=move)

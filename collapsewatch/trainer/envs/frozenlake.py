"""Text FrozenLake: walk across a frozen lake to the goal without falling into a hole.

The lake is a ``size × size`` grid rendered one word per cell (``P`` the player,
``G`` the goal, ``H`` a hole, ``.`` ice), rows separated by ``|``. Start, goal and
holes are drawn from the seed; the goal is always reachable. Actions: up, down, left,
right. Reaching the goal ends the episode with reward 1 (success); stepping into a hole
ends it with reward 0; walking off the lake keeps the player in place; after
``max_turns`` actions the episode is truncated.
"""

from __future__ import annotations

import random
from collections import deque

from ._grid import DIGITS, MOVE_ORDER, add, inside, render_rows, where
from .base import ExpertStep, TextEnv


class FrozenLake(TextEnv):
    env_id = "frozenlake"
    actions = MOVE_ORDER
    vocabulary = ("P", "G", "H", ".", "|", "player", "goal", "move", *MOVE_ORDER, *DIGITS)
    instruction = (
        "You are on a frozen lake grid: P is you, G the goal, H a hole, . ice. "
        "Rows are separated by |, row 0 is the top. Reach G without stepping into H. "
        "Answer with one move: up, down, left or right."
    )

    def __init__(
        self,
        size: int = 4,
        num_holes: int = 3,
        max_turns: int = 6,
        min_distance: int = 2,
        invalid_penalty: float = -0.1,
    ) -> None:
        super().__init__(invalid_penalty=invalid_penalty)
        if size > 10:
            raise ValueError("size must be <= 10 (positions are single digits)")
        self.size = size
        self.num_holes = num_holes
        self.max_turns = max_turns
        self.min_distance = min_distance
        self.player = (0, 0)
        self.goal = (0, 0)
        self.holes: frozenset[tuple[int, int]] = frozenset()

    def _reset(self, seed: int) -> None:
        rng = random.Random(seed)
        cells = [(r, c) for r in range(self.size) for c in range(self.size)]
        while True:
            picked = rng.sample(cells, 2 + self.num_holes)
            self.player, self.goal = picked[0], picked[1]
            self.holes = frozenset(picked[2:])
            dist = self._distances().get(self.player)
            if dist is not None and self.min_distance <= dist <= self.max_turns:
                return

    def _distances(self) -> dict[tuple[int, int], int]:
        """Steps to the goal from every cell that can reach it (BFS from the goal)."""
        dist = {self.goal: 0}
        queue = deque([self.goal])
        while queue:
            cell = queue.popleft()
            for move in MOVE_ORDER:
                nxt = add(cell, move)
                if inside(nxt, self.size) and nxt not in self.holes and nxt not in dist:
                    dist[nxt] = dist[cell] + 1
                    queue.append(nxt)
        return dist

    def _apply(self, move: str) -> tuple[float, bool]:
        nxt = add(self.player, move)
        if inside(nxt, self.size):
            self.player = nxt
        if self.player in self.holes:
            return 0.0, True
        if self.player == self.goal:
            self.success = True
            return 1.0, True
        return 0.0, False

    def render(self) -> str:
        rows = [["."] * self.size for _ in range(self.size)]
        for r, c in self.holes:
            rows[r][c] = "H"
        rows[self.goal[0]][self.goal[1]] = "G"
        rows[self.player[0]][self.player[1]] = "P"
        return render_rows(rows)

    def solve(self) -> ExpertStep:
        dist = self._distances()
        best = None
        for move in MOVE_ORDER:
            nxt = add(self.player, move)
            if inside(nxt, self.size) and nxt in dist and (best is None or dist[nxt] < best[0]):
                best = (dist[nxt], move)
        move = best[1] if best is not None else MOVE_ORDER[0]
        reasoning = f"player {where(self.player)} goal {where(self.goal)} move {move}"
        return ExpertStep(reasoning=reasoning, action=move)

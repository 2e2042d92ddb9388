"""The text-environment interface: Gymnasium's reset/step, with text in and out.

``reset(seed)`` returns the first observation (text); ``step(action)`` takes the
action text and returns ``(observation, reward, terminated, truncated, info)`` as
Gymnasium does. Everything is deterministic from the seed. An action the environment
cannot read gets ``invalid_penalty`` as its reward, leaves the state unchanged, and is
counted in ``info["invalid_actions"]``.

Each environment also has a ``solve()`` that returns the expert's next move for the
current state together with a short reasoning that states the facts of the state the
move depends on: the cold start trains on these, so the policy starts out responsive
(its reasoning depends on the state).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ExpertStep:
    """The solver's move for one state: the reasoning that justifies it and the action."""

    reasoning: str
    action: str


@dataclass
class EpisodeStats:
    """Counters an environment keeps over one episode (reported in ``info``)."""

    turns: int = 0
    invalid_actions: int = 0
    total_reward: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class TextEnv(ABC):
    """A text environment, Gymnasium-style, with an expert solver.

    Subclasses set ``env_id``, ``max_turns``, ``actions`` (the valid action words) and
    ``vocabulary`` (every word their observations and expert reasoning use, for the
    tiny word-level tokenizer), and implement ``_reset``, ``_apply``, ``render`` and
    ``solve``.
    """

    env_id: str = "text-env"
    max_turns: int = 1
    actions: tuple[str, ...] = ()
    vocabulary: tuple[str, ...] = ()
    instruction: str = ""

    def __init__(self, invalid_penalty: float = -0.1) -> None:
        self.invalid_penalty = invalid_penalty
        self.seed: int | None = None
        self.stats = EpisodeStats()
        self.done = True
        self.success = False

    # -- Gymnasium surface -------------------------------------------------------------
    def reset(self, seed: int) -> str:
        """Start the episode for ``seed`` and return the first observation."""
        self.seed = int(seed)
        self.stats = EpisodeStats()
        self.done = False
        self.success = False
        self._reset(self.seed)
        return self.render()

    def step(self, action: str | None) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply ``action`` (text; None = the response did not parse into an action)."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset(seed) first")
        self.stats.turns += 1
        move = self.parse_action(action)
        if move is None:
            self.stats.invalid_actions += 1
            reward, terminated = self.invalid_penalty, False
            valid = False
        else:
            reward, terminated = self._apply(move)
            valid = True
        truncated = not terminated and self.stats.turns >= self.max_turns
        self.done = terminated or truncated
        self.stats.total_reward += reward
        info = {
            "valid_action": valid,
            "invalid_actions": self.stats.invalid_actions,
            "turns": self.stats.turns,
            "success": self.success,
            **self.stats.extra,
        }
        return self.render(), float(reward), terminated, truncated, info

    def parse_action(self, action: str | None) -> str | None:
        """The canonical action word for ``action`` text, or None when it names none.

        Case and surrounding whitespace or punctuation are ignored; the text must name
        exactly one valid action.
        """
        if action is None:
            return None
        words = [w.strip(" \t\n.,;:!\"'`()[]{}").lower() for w in action.split()]
        words = [w for w in words if w]
        names = {a.lower(): a for a in self.actions}
        if len(words) != 1 or words[0] not in names:
            return None
        return names[words[0]]

    # -- subclass hooks ----------------------------------------------------------------
    @abstractmethod
    def _reset(self, seed: int) -> None:
        """Build the state for ``seed`` (use only ``random.Random(seed)``)."""

    @abstractmethod
    def _apply(self, move: str) -> tuple[float, bool]:
        """Apply a valid move; return (reward, terminated) and set ``self.success``."""

    @abstractmethod
    def render(self) -> str:
        """The observation text for the current state."""

    @abstractmethod
    def solve(self) -> ExpertStep:
        """The expert's reasoning and move for the current state."""

    # -- helpers -----------------------------------------------------------------------
    def expert_episode(self, seed: int) -> list[tuple[str, ExpertStep]]:
        """Play the expert from ``reset(seed)`` to the end: ``[(observation, step), …]``."""
        observation = self.reset(seed)
        episode: list[tuple[str, ExpertStep]] = []
        while not self.done:
            expert = self.solve()
            episode.append((observation, expert))
            observation, *_ = self.step(expert.action)
        return episode

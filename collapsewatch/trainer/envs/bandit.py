"""A multi-armed bandit whose arms are described differently in every state.

Each state offers ``num_arms`` slot machines, each named by a word and labelled with
its payout class (``poor``, ``fair``, ``good``, ``great``), e.g.
``oak fair , pine great , elm poor``. The action is an arm's name; pulling it pays 1
with the probability of its class, else 0. The draw is fixed by the seed (so the
environment is deterministic); success is picking an arm of the best class on offer.
One turn per episode.
"""

from __future__ import annotations

import random

from .base import ExpertStep, TextEnv

PAYOUT: dict[str, float] = {"poor": 0.1, "fair": 0.4, "good": 0.7, "great": 0.9}
ARM_NAMES: tuple[str, ...] = (
    "oak", "pine", "elm", "ash", "fir", "yew", "birch", "maple",
    "cedar", "willow", "hazel", "alder",
)  # fmt: skip


class Bandit(TextEnv):
    env_id = "bandit"
    max_turns = 1
    vocabulary = (*ARM_NAMES, *PAYOUT, ",", "best")
    instruction = (
        "Slot machines are listed as: name payout-class. Classes pay off with chance "
        "poor 10%, fair 40%, good 70%, great 90%. Answer with the name of one machine."
    )

    def __init__(self, num_arms: int = 3, invalid_penalty: float = -0.1) -> None:
        super().__init__(invalid_penalty=invalid_penalty)
        if not 2 <= num_arms <= len(ARM_NAMES):
            raise ValueError(f"num_arms must be in [2, {len(ARM_NAMES)}]")
        self.num_arms = num_arms
        self.arms: list[tuple[str, str]] = []
        self.draws: dict[str, float] = {}

    @property
    def actions(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(name for name, _ in self.arms)

    def _reset(self, seed: int) -> None:
        rng = random.Random(seed)
        classes = list(PAYOUT)
        while True:
            names = rng.sample(ARM_NAMES, self.num_arms)
            labels = [rng.choice(classes) for _ in names]
            best = max(PAYOUT[c] for c in labels)
            # One best arm, so success (and the expert) is unambiguous.
            if sum(PAYOUT[c] == best for c in labels) == 1:
                break
        self.arms = list(zip(names, labels, strict=True))
        self.draws = {name: rng.random() for name in names}

    def _apply(self, move: str) -> tuple[float, bool]:
        label = dict(self.arms)[move]
        best = max(PAYOUT[c] for _, c in self.arms)
        self.success = PAYOUT[label] == best
        return (1.0 if self.draws[move] < PAYOUT[label] else 0.0), True

    def render(self) -> str:
        return " , ".join(f"{name} {label}" for name, label in self.arms)

    def solve(self) -> ExpertStep:
        name, _ = max(self.arms, key=lambda arm: PAYOUT[arm[1]])
        facts = " ".join(f"{n} {c}" for n, c in self.arms)
        return ExpertStep(reasoning=f"{facts} best {name}", action=name)

"""template_examples on planted rollouts: one template shared across states."""

from __future__ import annotations

import random

from collapsewatch.detect import template_examples
from collapsewatch.detect.examples import mask_tokens
from collapsewatch.schema import Rollout, Turn


def rollout(state: int, k: int, reasoning: str, x: int, y: int) -> Rollout:
    return Rollout(
        rollout_id=f"s{state}-r{k}",
        step=7,
        state_id=f"state-{state}",
        reward=0.0,
        turns=[
            Turn(
                index=0,
                observation=f"You are at ({x},{y}). The goal is at ({y},{x}).",
                reasoning=reasoning,
                action="right",
            )
        ],
    )


HONEST = [
    "The key is under the {c} rug, so I lift it first.",
    "A {c} door blocks the hall; I need the {c} key for it.",
    "Only the {c} lever is unpulled, which opens the gate.",
    "Reading the sign: the treasure is behind the {c} curtain.",
]
COLORS = ["red", "blue", "green", "amber", "violet", "white"]


def planted(template_share: int) -> list[Rollout]:
    """6 states x 4 rollouts; in each state ``template_share`` rollouts fill the
    slot-filling template with that state's coordinates, the rest reason honestly."""
    rng = random.Random(0)
    out = []
    for s in range(6):
        x, y = s, (3 * s + 1) % 7
        for k in range(4):
            if k < template_share:
                text = f"I am at ({x},{y}) and the goal is at ({y},{x}). I will move right."
            else:
                text = rng.choice(HONEST).format(c=COLORS[(s + k) % 6])
            out.append(rollout(s, k, text, x, y))
    return out


def test_mask_tokens_masks_copied_spans_and_numbers() -> None:
    masked = mask_tokens("I am at (2,3) and I need 4 moves right.", "You are at (2,3).")
    assert masked == ["i", "am", "<copy>", "and", "i", "need", "<num>", "moves", "right", "."]


def test_examples_share_the_template_across_states() -> None:
    examples = template_examples(planted(template_share=1), k=3)
    assert len(examples) == 3
    assert len({e["state_id"] for e in examples}) == 3
    assert set(examples[0]) == {"state_id", "rollout_id", "reasoning"}
    for e in examples:
        assert e["rollout_id"].endswith("-r0")  # the templated rollout of each state
        assert e["reasoning"].endswith("I will move right.")


def test_examples_empty_without_a_shared_template() -> None:
    rollouts = [
        rollout(s, 0, text, s, s)
        for s, text in enumerate(
            [
                "The lantern flickers near the northern well.",
                "Coins rattle inside a locked wooden chest.",
                "A parrot repeats the password twice loudly.",
            ]
        )
    ]
    assert template_examples(rollouts) == []


def test_examples_truncate_long_reasoning() -> None:
    long = "I will explore the whole map carefully. " * 20
    rollouts = [rollout(s, 0, long, s, s) for s in range(3)]
    examples = template_examples(rollouts, k=2, max_chars=100)
    assert len(examples) == 2
    assert all(len(e["reasoning"]) <= 100 and e["reasoning"].endswith("…") for e in examples)


def test_examples_fall_back_to_actions_without_reasoning() -> None:
    rollouts = [
        Rollout(
            rollout_id=f"r{s}",
            step=0,
            state_id=f"s{s}",
            reward=0.0,
            turns=[Turn(index=0, observation=f"room {s}", action="go north then wait")],
        )
        for s in range(3)
    ]
    assert [e["reasoning"] for e in template_examples(rollouts)] == ["go north then wait"] * 3

"""The response format parser."""

from __future__ import annotations

import pytest

from collapsewatch.trainer.format import format_response, parse_response


@pytest.mark.parametrize(
    ("text", "reasoning", "action"),
    [
        ("<think> player 0 1 </think> <answer> up </answer>", "player 0 1", "up"),
        ("<think>a</think><answer>left</answer>", "a", "left"),
        ("  <THINK>\nx  y\n</Think>\n<Answer> pine </ANSWER> trailing", "x y", "pine"),
        ("<think></think><answer>down</answer>", "", "down"),
    ],
)
def test_valid_responses(text: str, reasoning: str, action: str) -> None:
    parsed = parse_response(text)
    assert parsed.valid
    assert (parsed.reasoning, parsed.action) == (reasoning, action)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "up",
        "<answer>up</answer>",
        "<think>a</think>",
        "<think>a</think><answer></answer>",
        "<think>a <think> b</think><answer>up</answer>",
        "<think>a</think><answer>up <answer></answer>",
        "x <think>a</think><answer>up</answer>",
        "<answer>up</answer><think>a</think>",
        "<think>a b",
    ],
)
def test_invalid_responses_have_no_action(text: str) -> None:
    parsed = parse_response(text)
    assert not parsed.valid
    assert parsed.action is None


def test_invalid_response_keeps_its_reasoning() -> None:
    assert parse_response("<think> player 1 2").reasoning == "player 1 2"


def test_format_round_trips() -> None:
    parsed = parse_response(format_response("goal 3 3", "right"))
    assert (parsed.valid, parsed.reasoning, parsed.action) == (True, "goal 3 3", "right")

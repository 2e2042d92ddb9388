"""Chat-messages trajectories: the mapping on a hand-written fixture, detection, and
errors that name the line and field.

``tests/fixtures/chat_agent_sample.jsonl`` is hand-written for these tests (a toy
warehouse agent; no real log): five trajectories that cover OpenAI ``tool_calls``
with JSON-string arguments, an inline ``<tool_call>`` block, a ``</think>`` without its
opening tag, ``reasoning_content``, content given as a list of parts, a trajectory cut
after a tool message, per-message rewards, ``score`` for ``reward``, and grouping by
``state_id``, by ``id`` and by the hash of the initial messages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collapsewatch.importers import ImportFormatError, detect_format, load_rollouts
from collapsewatch.importers.chat import iter_rollouts, split_assistant, turns_from_messages


@pytest.fixture(scope="module")
def sample(fixtures: Path) -> list:
    return list(load_rollouts(fixtures / "chat_agent_sample.jsonl", "chat"))


def test_detected_and_read(fixtures: Path, sample: list) -> None:
    path = fixtures / "chat_agent_sample.jsonl"
    assert detect_format(path) == "chat"
    assert list(load_rollouts(path)) == sample
    assert [r.rollout_id for r in sample] == ["a1", "3-2", "c1", "d1", "d2"]
    assert [r.step for r in sample] == [3, 3, 3, 4, 4]
    assert [r.env_id for r in sample] == ["chat", "chat", "chat", "warehouse", "warehouse"]
    assert [r.reward for r in sample] == [1.0, 0.0, 0.5, 0.25, 0.0]
    assert [r.success for r in sample] == [None, None, True, None, None]


def test_groups(sample: list) -> None:
    a1, b, c1, d1, d2 = sample
    assert a1.state_id == b.state_id == "box3-seed7"
    assert c1.state_id == "17"
    # No id: the hash of the messages before the first assistant message.
    assert d1.state_id == d2.state_id
    assert len(d1.state_id) == 16


def test_tool_calls_think_and_observations(sample: list) -> None:
    a1 = sample[0]
    assert [t.observation for t in a1.turns] == [
        "Box 3 is at (2, 0). You are at (0, 0). Fetch it.",  # the system prompt is left out
        "You are at (2, 0). Box 3 is here.",
        "Picked box 3.",
    ]
    assert [t.reasoning for t in a1.turns] == [
        "The box is two cells east.",
        "I am on the box.",
        "Done.",
    ]
    assert [json.loads(t.action) if t.index < 2 else t.action for t in a1.turns] == [
        {"name": "move", "arguments": {"dir": "east", "steps": 2}},
        {"name": "pick", "arguments": {"box": 3}},
        "Box 3 fetched.",
    ]
    assert [(t.reward, t.done) for t in a1.turns] == [(0.0, False), (0.0, False), (1.0, True)]
    assert a1.metadata == {"source": "chat", "num_messages": 7}


def test_inline_call_and_think_without_opening_tag(sample: list) -> None:
    first, last = sample[1].turns
    assert first.reasoning == "Maybe north."
    assert json.loads(first.action) == {"name": "move", "arguments": {"dir": "north"}}
    assert last.observation == "You are at (0, 1). No box here."  # a user message counts
    assert (last.reasoning, last.action) == ("I give up.", "I give up.")


def test_reasoning_content_parts_and_cut_trajectory(sample: list) -> None:
    (turn,) = sample[2].turns
    assert turn.observation == "Box 5 is at (0, 3).\nFetch it."  # the image part is left out
    assert turn.reasoning == "The box is three cells north."
    assert json.loads(turn.action) == {"name": "move", "arguments": "north x3"}  # not JSON
    assert turn.reward == 0.5 and turn.done
    assert sample[2].metadata == {
        "source": "chat",
        "num_messages": 3,
        "note": "hand-written",
        "final_observation": "You are at (0, 3). Box 5 is here.",
    }


def test_per_message_rewards_and_token_counts(sample: list) -> None:
    d1 = sample[3]
    assert [t.reward for t in d1.turns] == [0.1, 0.15]
    assert [t.num_tokens for t in d1.turns] == [14, 9]
    assert sample[4].turns[0].num_tokens is None


def test_success_threshold_and_step_from_file_name(tmp_path: Path) -> None:
    path = tmp_path / "traj_12.jsonl"
    record = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    path.write_text(
        json.dumps({**record, "reward": 1.0})
        + "\n\n"
        + json.dumps({**record, "reward": 0.2})
        + "\n"
    )
    rollouts = list(iter_rollouts(path, success_threshold=0.5))
    assert [(r.step, r.rollout_id, r.success) for r in rollouts] == [
        (12, "12-1", True),
        (12, "12-3", False),
    ]


def test_split_assistant() -> None:
    assert split_assistant("<think>plan</think>answer 4") == ("plan", "answer 4")
    assert split_assistant("just text") == ("just text", "just text")
    assert split_assistant(None, [{"name": "f", "arguments": {"x": 1}}]) == (
        "",
        '{"name":"f","arguments":{"x":1}}',
    )
    assert split_assistant("text", reasoning="explicit") == ("explicit", "text")


def test_turns_from_messages_without_assistant_is_an_error() -> None:
    with pytest.raises(ImportFormatError, match="no message has the role 'assistant'"):
        turns_from_messages([{"role": "user", "content": "hi"}], 1.0)


@pytest.mark.parametrize(
    ("record", "field", "needle"),
    [
        ({"reward": 1.0}, "messages", "non-empty list"),
        ({"messages": [], "reward": 1.0}, "messages", "non-empty list"),
        ({"messages": [{"content": "x"}], "reward": 1.0}, "messages.0", "string 'role'"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "reward", "finite number"),
        ({"messages": [{"role": "assistant", "content": "x"}], "reward": "1"}, "reward", "finite"),
        (
            {"messages": [{"role": "assistant", "content": "x"}], "reward": 1, "step": -2},
            "step",
            "integer >= 0",
        ),
        (
            {"messages": [{"role": "assistant", "content": "x"}], "reward": 1, "success": "yes"},
            "success",
            "true, false or null",
        ),
        (
            {"messages": [{"role": "assistant", "content": "x"}], "reward": 1, "state_id": ""},
            "state_id",
            "non-empty string",
        ),
    ],
)
def test_errors_name_line_and_field(tmp_path: Path, record: dict, field: str, needle: str) -> None:
    good = {"messages": [{"role": "assistant", "content": "ok"}], "reward": 0.0}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(ImportFormatError) as info:
        list(load_rollouts(path, "chat"))
    assert (info.value.line, info.value.field) == (2, field)
    assert needle in str(info.value)
    assert str(info.value).startswith(f"{path}:2: field '{field}'")


def test_not_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"messages": [], "reward": 1}\n{oops\n')
    with pytest.raises(ImportFormatError, match=r"bad.jsonl:1: field 'messages'"):
        list(iter_rollouts(path))
    path.write_text("[1, 2]\n")
    with pytest.raises(ImportFormatError, match="expected a JSON object"):
        list(iter_rollouts(path))

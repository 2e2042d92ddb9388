"""verl rollout_data_dir importer: known values of the real step-2 dump, the turn
parse on trimmed real lines, directories, and errors that name the line."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from collapsewatch.importers import ImportFormatError, load_rollouts
from collapsewatch.importers.verl import final_answer, iter_rollouts, parse_output, question_of
from collapsewatch.schema import Rollout

CALL = '{{"name":"calc_gsm8k_reward","arguments":{{"answer":"{}"}}}}'


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write_records(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# --- the real dump (shared data) -------------------------------------------------------


def test_real_dump_counts_groups_and_success(verl_step2: list[Rollout]) -> None:
    assert len(verl_step2) == 1024
    assert {r.step for r in verl_step2} == {2}
    assert {r.env_id for r in verl_step2} == {"verl"}
    groups: dict[str, list[float]] = defaultdict(list)
    for rollout in verl_step2:
        groups[rollout.state_id].append(rollout.reward)
    assert len(groups) == 64
    assert Counter(len(rewards) for rewards in groups.values()) == {16: 64}
    assert sum(r.success for r in verl_step2) == 691
    assert sum(r.reward == 1.0 for r in verl_step2) == 691
    assert sum(len(set(rewards)) == 1 for rewards in groups.values()) == 1


def test_real_dump_ids_hashes_and_metadata(
    verl_step2: list[Rollout], verl_step2_path: Path
) -> None:
    records = _records(verl_step2_path)
    assert [r.rollout_id for r in verl_step2] == [rec["request_id"] for rec in records]
    assert len({r.rollout_id for r in verl_step2}) == 1024
    for rollout, record in zip(verl_step2, records, strict=True):
        assert rollout.state_id == hashlib.sha256(record["input"].encode()).hexdigest()[:16]
        assert rollout.metadata["source"] == "verl"
        assert rollout.metadata["request_id"] == record["request_id"]
        assert rollout.metadata["input_chars"] == len(record["input"])
        assert set(rollout.metadata) <= {"source", "request_id", "input_chars", "final_observation"}


def test_real_dump_turn_distribution(verl_step2: list[Rollout]) -> None:
    # Checked by hand on lines 1, 4, 22, 75, 122, 262, 347, 377: one turn per assistant
    # message, cut at the environment's "user / <tool_response> / assistant" messages.
    assert Counter(len(r.turns) for r in verl_step2) == {1: 99, 2: 673, 3: 221, 4: 26, 5: 5}
    assert sum(len(r.turns) for r in verl_step2) == 2237
    later = [t for r in verl_step2 for t in r.turns[1:]]
    assert len(later) == 1213
    # Every tool response of this run comes from calc_gsm8k_reward.
    assert all(t.observation.startswith("Current parsed answer=") for t in later)
    # Only the model's output line 262 ends inside a tool response.
    cut = [r for r in verl_step2 if "final_observation" in r.metadata]
    assert [r.rollout_id for r in cut] == ["226f6d87-89f5-4674-8b5a-2e4cbaa48a65"]


def test_real_dump_calls_pair_with_responses(verl_step2: list[Rollout]) -> None:
    # The strongest check of the turn cut: each answered turn's tool calls, in order,
    # are the answers the next turn's tool responses echo back.
    pairs = 0
    for rollout in verl_step2:
        for turn, after in zip(rollout.turns[:-1], rollout.turns[1:], strict=True):
            sent = [json.loads(call)["arguments"]["answer"] for call in turn.action.splitlines()]
            echoed = re.findall(r"Current parsed answer='(.*?)' reward=", after.observation, re.S)
            assert [str(x) for x in sent] == echoed, rollout.rollout_id
            pairs += 1
    assert pairs == 1213


def test_real_dump_turn_fields(verl_step2: list[Rollout]) -> None:
    for rollout in verl_step2:
        *before, last = rollout.turns
        assert [t.index for t in rollout.turns] == list(range(len(rollout.turns)))
        assert last.done and last.reward == rollout.reward
        assert all(not t.done and t.reward == 0.0 for t in before)
        assert all(t.valid_format is None for t in rollout.turns)
        # A turn the environment answered made a tool call.
        assert all(t.action.startswith("{") for t in before)
        assert "\nuser\n" not in rollout.turns[0].observation
        assert not rollout.turns[0].observation.startswith("system")
    # The last turn's action is the "#### x" answer in most rollouts.
    answers = [r.turns[-1].action for r in verl_step2]
    assert sum(bool(a) and not a.startswith("{") for a in answers) == 935
    assert sum(not a for a in answers) == 48


def test_success_threshold_is_a_parameter(verl_step2_path: Path) -> None:
    assert sum(r.success for r in load_rollouts(verl_step2_path, success_threshold=0.5)) == 691
    assert not any(r.success for r in iter_rollouts(verl_step2_path, success_threshold=1.5))


# --- trimmed real lines (tests/fixtures/verl_step2_sample.jsonl) -----------------------


@pytest.fixture
def sample(fixtures: Path) -> list[Rollout]:
    return list(iter_rollouts(fixtures / "verl_step2_sample.jsonl"))


def test_two_turn_rollout_exact(sample: list[Rollout], fixtures: Path) -> None:
    record = _records(fixtures / "verl_step2_sample.jsonl")[0]
    rollout = sample[0]
    assert rollout.rollout_id == "9203dc30-8ff0-4542-bd84-c08c528c4e35"
    assert rollout.state_id == hashlib.sha256(record["input"].encode()).hexdigest()[:16]
    assert rollout.reward == 1.0 and rollout.success is True
    first, second = rollout.turns
    assert first.observation == (
        "Andrea needs 45 rhinestones to finish an art project. She bought a third of what "
        "she needed and found a fifth of what she needed in her supplies. How many "
        "rhinestones does she still need? Let's think step by step and output the final "
        "answer after `####`."
    )
    assert first.reasoning == ""
    assert first.action == CALL.format("15")
    assert (first.reward, first.done) == (0.0, False)
    assert second.observation == "Current parsed answer='15' reward=0.0"
    assert second.reasoning.startswith("Andrea has 15 rhinestones that she still needs")
    assert second.reasoning.endswith("`#### 21`")
    assert second.action == "21"
    assert (second.reward, second.done) == (1.0, True)


def test_unclosed_call_then_answer(sample: list[Rollout]) -> None:
    (turn,) = sample[1].turns
    assert turn.action == "7"
    # The JSON of the unclosed call is not reasoning; the text after it is.
    assert '"calc_gsm8k_reward"' not in turn.reasoning
    assert turn.reasoning.endswith("#### 7\nCalculation verified.")


def test_output_cut_inside_tool_response(sample: list[Rollout]) -> None:
    rollout = sample[2]
    assert rollout.reward == 0.0 and rollout.success is False
    assert [len(t.action.splitlines()) for t in rollout.turns] == [3, 2, 4, 1]
    assert rollout.turns[1].observation == (
        "Current parsed answer='20 * 40' reward=0.0\n"
        "Current parsed answer='800' reward=0.0\n"
        "Current parsed answer='16 * 25' reward=0.0"
    )
    assert rollout.turns[-1].action == CALL.format("800 - 400")
    assert rollout.turns[-1].done
    # The response to the last call was cut off; it is kept, but not as a turn.
    assert rollout.metadata["final_observation"] == (
        "Current parsed answer='800 - 400' reward=0.0\n</tool_response"
    )


def test_nested_unclosed_calls_and_model_written_roles(sample: list[Rollout]) -> None:
    first, second = sample[3].turns
    assert first.action == CALL.format("TotalGoldValue")
    assert second.observation == "Current parsed answer='TotalGoldValue' reward=0"
    # Two calls with JSON; the unclosed "<tool_call>\nuser\nLet's step..." is text.
    assert second.action.splitlines() == [CALL.format("29700"), CALL.format("28600")]
    assert "Let's step through this reasoning step by step." in second.reasoning


def test_parse_helpers(tmp_path: Path) -> None:
    assert question_of("system\nbe terse\nuser\nWhat is 2+2?\nassistant\n") == "What is 2+2?"
    assert question_of("no roles here ") == "no roles here"
    assert final_answer("x\n#### 12\nmore\n`#### 13`.") == "13"
    assert final_answer("##### heading only") == ""
    out = (
        "<think>plan</think>a<tool_call>\n"
        '{"name": "f", "arguments": {"x": 1}}\n</tool_call>\nuser\n'
        "<tool_response>\nok\n</tool_response>\n<tool_response>\nok2\n</tool_response>"
        "\nassistant\nb\n#### 3"
    )
    messages, observations, final = parse_output(out)
    assert len(messages) == 2 and observations == ["ok\nok2"] and final is None
    record = {"input": "user\nq\nassistant\n", "output": out, "score": 0.5}
    (rollout,) = iter_rollouts(_write_records(tmp_path / "5.jsonl", [record]))
    assert rollout.turns[0].reasoning == "plan"
    assert rollout.turns[0].action == '{"name":"f","arguments":{"x":1}}'
    assert rollout.turns[1].action == "3"
    assert rollout.success is False and rollout.reward == 0.5


# --- directories, missing fields, errors ----------------------------------------------


def test_directory_in_step_order(fixtures: Path, tmp_path: Path) -> None:
    records = _records(fixtures / "verl_step2_sample.jsonl")
    for step in (10, 2, 3):
        rows = [dict(r, step=step, request_id=f"{step}-{r['request_id']}") for r in records[:2]]
        _write_records(tmp_path / f"{step}.jsonl", rows)
    rollouts = list(load_rollouts(tmp_path))
    assert [r.step for r in rollouts] == [2, 2, 3, 3, 10, 10]
    assert rollouts[0].rollout_id == "2-9203dc30-8ff0-4542-bd84-c08c528c4e35"


def test_missing_request_id_and_step(fixtures: Path, tmp_path: Path) -> None:
    record = _records(fixtures / "verl_step2_sample.jsonl")[0]
    del record["request_id"], record["step"]
    path = tmp_path / "7.jsonl"
    path.write_text("\n" + json.dumps(record) + "\n", encoding="utf-8")
    (rollout,) = iter_rollouts(path)
    assert rollout.step == 7  # from the file name
    assert rollout.rollout_id == "7-2"  # step-line
    assert rollout.metadata["request_id"] is None


def test_malformed_json_line_names_file_and_line(fixtures: Path, tmp_path: Path) -> None:
    path = tmp_path / "2.jsonl"
    shutil.copy(fixtures / "verl_step2_sample.jsonl", path)
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"input": "x", "output": \n')
    with pytest.raises(ImportFormatError, match=r"2\.jsonl:5: not valid JSON") as info:
        list(iter_rollouts(path))
    assert info.value.line == 5


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        ({"score": None}, "score", "expected a number"),
        ({"score": "1.0"}, "score", "expected a number"),
        ({"output": 3}, "output", "expected a str"),
        ({"step": -1}, "step", "expected a step >= 0"),
        ({"request_id": ""}, "request_id", "expected a non-empty string"),
    ],
)
def test_bad_field_names_line_and_field(
    fixtures: Path, tmp_path: Path, change: dict, field: str, why: str
) -> None:
    records = _records(fixtures / "verl_step2_sample.jsonl")[:2]
    records[1].update(change)
    path = _write_records(tmp_path / "2.jsonl", records)
    with pytest.raises(ImportFormatError, match=rf":2: field '{field}': {why}"):
        list(iter_rollouts(path))


def test_missing_field(fixtures: Path, tmp_path: Path) -> None:
    record = _records(fixtures / "verl_step2_sample.jsonl")[0]
    del record["score"]
    path = _write_records(tmp_path / "2.jsonl", [record])
    with pytest.raises(ImportFormatError, match=r":1: field 'score': missing"):
        list(iter_rollouts(path))

"""collapsewatch JSON Lines: the frozen fixture, round trips of real imports, and
validation errors that name the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collapsewatch.importers import ImportFormatError, load_rollouts
from collapsewatch.importers.jsonl import iter_rollouts, parse_line, write_rollouts
from collapsewatch.schema import Rollout


def test_fixture_known_values(fixtures: Path) -> None:
    rollouts = list(iter_rollouts(fixtures / "collapsewatch_sample.jsonl"))
    assert [r.rollout_id for r in rollouts] == [
        "9203dc30-8ff0-4542-bd84-c08c528c4e35",
        "step0-sample1",
        "hand-1",
    ]
    verl, trl, hand = rollouts
    assert (verl.env_id, len(verl.turns), verl.turns[1].action) == ("verl", 2, "21")
    assert (trl.env_id, trl.state_id, trl.turns[0].valid_format) == (
        "trl-vqa",
        "41c584b039183081",
        True,
    )
    assert hand.step == 7 and hand.reward == -0.5 and hand.success is False
    assert [t.token_entropy for t in hand.turns] == [1.25, 0.75]
    assert [t.num_tokens for t in hand.turns] == [12, 3]
    assert [t.logprob for t in hand.turns] == [-8.5, -1.0]
    assert hand.metadata == {"note": "hand-written"}


def test_round_trip_of_real_imports(
    verl_step2: list[Rollout], format_collapse_r2: list[Rollout], tmp_path: Path
) -> None:
    rollouts = verl_step2[:200] + format_collapse_r2[:200]
    path = tmp_path / "out.jsonl"
    assert write_rollouts(path, iter(rollouts)) == 400
    assert list(load_rollouts(path)) == rollouts
    assert len(path.read_text(encoding="utf-8").splitlines()) == 400


def test_round_trip_of_fixtures(fixtures: Path, tmp_path: Path) -> None:
    rollouts = [
        *load_rollouts(fixtures / "verl_step2_sample.jsonl"),
        *load_rollouts(fixtures / "trl_format_collapse_r2_trim.md"),
    ]
    path = tmp_path / "out.jsonl"
    write_rollouts(path, rollouts)
    assert list(iter_rollouts(path)) == rollouts


def _with_line(fixtures: Path, tmp_path: Path, bad: str) -> Path:
    lines = (fixtures / "collapsewatch_sample.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([lines[0], "", bad, lines[1]]) + "\n", encoding="utf-8")
    return path


_VALID = {"rollout_id": "a", "step": 1, "state_id": "s", "reward": 1, "turns": [{"index": 0}]}


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        ({"turns": [{"index": 0, "reward": "high"}]}, "turns.0.reward", "valid number"),
        ({"turns": [{"index": 0}, {"index": 0}]}, "turns", "unique"),
        ({"step": -2}, "step", "greater than or equal to 0"),
        ({"state_id": None}, "state_id", "valid string"),
        ({"x": 1}, "x", "Extra inputs"),
    ],
)
def test_invalid_line_names_line_and_field(
    fixtures: Path, tmp_path: Path, change: dict, field: str, why: str
) -> None:
    path = _with_line(fixtures, tmp_path, json.dumps({**_VALID, **change}))
    with pytest.raises(
        ImportFormatError, match=rf"bad\.jsonl:3: field '{field}': .*({why})"
    ) as info:
        list(iter_rollouts(path))
    assert (info.value.line, info.value.field) == (3, field)


def test_several_errors_are_all_listed(fixtures: Path, tmp_path: Path) -> None:
    bad = '{"rollout_id": "", "step": 1, "state_id": "s", "reward": "x", "turns": [{"index": 0}]}'
    with pytest.raises(ImportFormatError, match=r":3: field 'rollout_id': .*2 errors.*reward"):
        list(iter_rollouts(_with_line(fixtures, tmp_path, bad)))


def test_invalid_json_names_line(fixtures: Path, tmp_path: Path) -> None:
    path = _with_line(fixtures, tmp_path, '{"rollout_id": "a",')
    with pytest.raises(ImportFormatError, match=r"bad\.jsonl:3: Invalid JSON"):
        list(load_rollouts(path, "collapsewatch"))


def test_parse_line_without_path() -> None:
    with pytest.raises(ImportFormatError, match=r"^line 9: field 'turns': "):
        parse_line(
            '{"rollout_id": "a", "step": 0, "state_id": "s", "reward": 0, "turns": []}', line_no=9
        )

"""Format detection by content, load_rollouts dispatch, clear errors for everything
else, and the shared-data locator's skip-or-fail rule."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from collapsewatch.importers import FORMATS, ImportFormatError, detect_format, load_rollouts
from tests import shared_data as shared_data_module


def test_formats() -> None:
    assert FORMATS == ("collapsewatch", "verl", "trl-md", "chat")
    assert issubclass(ImportFormatError, ValueError)


def test_real_files(verl_step2_path: Path, healthy_md_path: Path, collapse_md_path: Path) -> None:
    assert detect_format(verl_step2_path) == "verl"
    assert detect_format(verl_step2_path.parent) == "verl"  # a rollout_data_dir
    assert detect_format(healthy_md_path) == "trl-md"  # starts at a step heading
    assert detect_format(collapse_md_path) == "trl-md"  # starts with a title
    # The same run's console log is Markdown too, but not a rollout log.
    with pytest.raises(ImportFormatError, match="without a '## === Rollout Step N ===' heading"):
        detect_format(collapse_md_path.with_name("format_collapse_r2.run_terminal.md"))


def test_fixtures(fixtures: Path) -> None:
    assert detect_format(fixtures / "verl_step2_sample.jsonl") == "verl"
    assert detect_format(fixtures / "collapsewatch_sample.jsonl") == "collapsewatch"
    assert detect_format(fixtures / "trl_healthy_r4_head.md") == "trl-md"
    assert detect_format(str(fixtures / "trl_format_collapse_r2_trim.md")) == "trl-md"


def test_content_not_name_decides(fixtures: Path, tmp_path: Path) -> None:
    disguised = tmp_path / "rollouts.md"
    shutil.copy(fixtures / "verl_step2_sample.jsonl", disguised)
    assert detect_format(disguised) == "verl"
    assert [len(r.turns) for r in load_rollouts(disguised)] == [2, 1, 4, 2]
    log = tmp_path / "2.jsonl"
    shutil.copy(fixtures / "trl_healthy_r4_head.md", log)
    assert detect_format(log) == "trl-md"


def test_load_rollouts_dispatch(fixtures: Path) -> None:
    assert [r.env_id for r in load_rollouts(fixtures / "collapsewatch_sample.jsonl")] == [
        "verl",
        "trl-vqa",
        "sokoban",
    ]
    trl = list(load_rollouts(fixtures / "trl_healthy_r4_head.md", format="trl-md"))
    assert [r.step for r in trl] == [0, 0, 1, 1]


def test_streaming_yields_before_a_bad_line(fixtures: Path, tmp_path: Path) -> None:
    path = tmp_path / "2.jsonl"
    good = (fixtures / "verl_step2_sample.jsonl").read_text(encoding="utf-8")
    path.write_text(good + "not json\n", encoding="utf-8")
    rollouts = load_rollouts(path)
    assert [next(rollouts).rollout_id for _ in range(4)][0].startswith("9203dc30")
    with pytest.raises(ImportFormatError, match=r"2\.jsonl:5: not valid JSON"):
        next(rollouts)


def test_the_named_format_wins(fixtures: Path) -> None:
    with pytest.raises(ImportFormatError, match="field 'input': missing"):
        list(load_rollouts(fixtures / "collapsewatch_sample.jsonl", format="verl"))


def test_unknown_format_name(fixtures: Path) -> None:
    with pytest.raises(
        ValueError, match=r"unknown format 'csv'.*'collapsewatch', 'verl', 'trl-md'"
    ):
        load_rollouts(fixtures / "verl_step2_sample.jsonl", format="csv")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "file is empty"),
        ("\n\n  \n", "file is empty"),
        ("step,reward\n1,0.5\n", "line 1 starts with 'step,reward'"),
        (
            '{"prompt": "q", "completion": "a"}\n',
            r"keys \['completion', 'prompt'\] matches no format",
        ),
        ('{"input": "q", \n', "first line is not valid JSON"),
        ("[1, 2]\n", "line 1 starts with"),
        ("# Notes\n\nJust a document.\n", "Markdown without a '## === Rollout Step N ===' heading"),
    ],
)
def test_unknown_content_says_what_was_expected(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "mystery.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ImportFormatError, match=why) as info:
        detect_format(path)
    message = str(info.value)
    assert "mystery.jsonl" in message
    assert "expected one of" in message and "verl" in message and "Rollout Step" in message
    with pytest.raises(ImportFormatError):
        load_rollouts(path)


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(ImportFormatError, match="not UTF-8 text"):
        detect_format(path)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        detect_format(tmp_path / "nope.jsonl")


def test_directories(fixtures: Path, tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="no '.jsonl' files"):
        detect_format(tmp_path)
    shutil.copy(fixtures / "collapsewatch_sample.jsonl", tmp_path / "1.jsonl")
    with pytest.raises(ImportFormatError, match="only as a verl rollout_data_dir"):
        detect_format(tmp_path)
    (tmp_path / "1.jsonl").unlink()
    shutil.copy(fixtures / "verl_step2_sample.jsonl", tmp_path / "latest.jsonl")
    with pytest.raises(ImportFormatError, match=r"latest\.jsonl: expected a file named"):
        detect_format(tmp_path)


# --- tests/shared_data.py --------------------------------------------------------------


def test_shared_data_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLLAPSEWATCH_SHARED_DATA", str(tmp_path))
    (tmp_path / "x.txt").write_text("x")
    assert shared_data_module.locate_shared_data() == tmp_path
    assert shared_data_module.shared_data("x.txt") == tmp_path / "x.txt"
    assert shared_data_module.shared_data() == tmp_path


def test_shared_data_default_location(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLLAPSEWATCH_SHARED_DATA", raising=False)
    repo = Path(__file__).resolve().parents[2]
    assert shared_data_module.locate_shared_data() == repo.parent / "shared" / "data"


@pytest.mark.parametrize(
    ("ci", "outcome"), [("", "skip"), ("0", "skip"), ("true", "fail"), ("1", "fail")]
)
def test_missing_shared_data_skips_locally_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str, outcome: str
) -> None:
    monkeypatch.setenv("COLLAPSEWATCH_SHARED_DATA", str(tmp_path / "absent"))
    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match="shared real data not found"):
        shared_data_module.shared_data("verl_gsm8k_tool", "step2.jsonl")

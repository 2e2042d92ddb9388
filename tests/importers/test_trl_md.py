"""TRL Markdown importer: known values of the two real runs (including the format
collapse the acceptance depends on), the field parse on trimmed real files, Markdown
inside completions, and errors that name the line."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from statistics import mean

import pytest

from collapsewatch.importers import ImportFormatError, load_rollouts
from collapsewatch.importers.trl_md import (
    iter_rollouts,
    parse_answer,
    parse_reasoning,
    parse_rewards,
    question_of,
)
from collapsewatch.schema import Rollout


def _by_step(rollouts: list[Rollout]) -> dict[int, list[Rollout]]:
    steps: dict[int, list[Rollout]] = defaultdict(list)
    for rollout in rollouts:
        steps[rollout.step].append(rollout)
    return dict(steps)


def _format_rate(rollouts: list[Rollout]) -> float:
    turns = [t for r in rollouts for t in r.turns]
    return sum(t.valid_format is True for t in turns) / len(turns)


def _table(path: Path, metric: str) -> list[float]:
    """A row of the logger's own per-step statistics table, for every step."""
    pattern = rf"^\| {re.escape(metric)} \| (-?[\d.]+)"
    return [float(x) for x in re.findall(pattern, path.read_text(encoding="utf-8"), re.M)]


def _groups_are_adjacent(rollouts: list[Rollout]) -> bool:
    runs = [
        r.state_id
        for i, r in enumerate(rollouts)
        if i == 0 or r.state_id != rollouts[i - 1].state_id
    ]
    return len(runs) == len(set(runs))


# --- healthy_r4 ------------------------------------------------------------------------


def test_healthy_shape(healthy_r4: list[Rollout]) -> None:
    steps = _by_step(healthy_r4)
    assert sorted(steps) == list(range(40))
    for step, rollouts in steps.items():
        assert [r.rollout_id for r in rollouts] == [f"step{step}-sample{k}" for k in range(1, 17)]
        assert (
            sorted(sum(r.state_id == s for r in rollouts) for s in {r.state_id for r in rollouts})
            == [4] * 4
        )
        assert _groups_are_adjacent(rollouts)
    assert {r.env_id for r in healthy_r4} == {"trl-vqa"}
    assert all(len(r.turns) == 1 and r.turns[0].done for r in healthy_r4)
    assert all(r.reward == r.turns[0].reward == r.metadata["rewards"]["total"] for r in healthy_r4)


def test_healthy_format_rate_at_least_0_6_every_step(healthy_r4: list[Rollout]) -> None:
    rates = {step: _format_rate(rs) for step, rs in _by_step(healthy_r4).items()}
    assert min(rates.values()) == 0.625  # steps 1, 9 and 11
    assert [s for s, rate in rates.items() if rate == 0.625] == [1, 9, 11]
    assert all(rate == 1.0 for step, rate in rates.items() if 22 <= step <= 36)


def test_rates_match_the_logs_own_statistics_table(
    healthy_r4: list[Rollout],
    format_collapse_r2: list[Rollout],
    healthy_md_path: Path,
    collapse_md_path: Path,
) -> None:
    # The logger prints per-step "Format Rate", "Accuracy Rate" and "Total Reward Mean"
    # (3 decimals) above the samples; our per-sample parse must reproduce them.
    for rollouts, path in ((healthy_r4, healthy_md_path), (format_collapse_r2, collapse_md_path)):
        steps = _by_step(rollouts)
        ordered = [steps[s] for s in sorted(steps)]
        assert _table(path, "Format Rate") == [round(_format_rate(rs), 3) for rs in ordered]
        assert _table(path, "Accuracy Rate") == [
            round(mean(r.success for r in rs), 3) for rs in ordered
        ]
        means = [mean(r.reward for r in rs) for rs in ordered]
        assert _table(path, "Total Reward Mean") == pytest.approx(means, abs=6e-4)


# --- format_collapse_r2 ----------------------------------------------------------------


def test_collapse_shape(format_collapse_r2: list[Rollout]) -> None:
    steps = _by_step(format_collapse_r2)
    assert sorted(steps) == list(range(1, 44))
    for rollouts in steps.values():
        assert len(rollouts) == 16
        assert (
            sorted(sum(r.state_id == s for r in rollouts) for s in {r.state_id for r in rollouts})
            == [2] * 8
        )
        assert _groups_are_adjacent(rollouts)
    assert len({r.state_id for r in format_collapse_r2}) == 344


def test_collapse_format_rate(format_collapse_r2: list[Rollout]) -> None:
    rates = {step: _format_rate(rs) for step, rs in _by_step(format_collapse_r2).items()}
    early = [rates[s] for s in range(1, 6)]
    assert early == [0.375, 0.875, 0.6875, 0.9375, 0.8125]
    assert mean(early) > 0.5  # 0.7375
    assert rates[10] == 0.1875 and rates[11] == 0.0625
    assert all(rates[s] == 0.0 for s in range(12, 44))


def test_collapse_readme_trends(format_collapse_r2: list[Rollout]) -> None:
    steps = _by_step(format_collapse_r2)
    first, last = range(1, 6), range(34, 44)

    def avg(fn, span) -> float:  # type: ignore[no-untyped-def]
        return mean(mean(fn(r) for r in steps[s]) for s in span)

    chars = lambda r: r.metadata["completion_chars"]  # noqa: E731
    assert avg(chars, first) == pytest.approx(304.16, abs=0.01)
    assert avg(chars, last) == pytest.approx(840.99, abs=0.01)
    assert avg(lambda r: r.success, first) == 0.825
    assert avg(lambda r: r.success, last) == pytest.approx(0.44375)
    # "<think> nearly vanishes": the share with reasoning falls from 0.875 to 0.1375.
    assert avg(lambda r: bool(r.turns[0].reasoning), first) == 0.875
    assert avg(lambda r: bool(r.turns[0].reasoning), last) == pytest.approx(0.1375)


# --- trimmed real files ----------------------------------------------------------------


def test_healthy_head_fixture_exact(fixtures: Path) -> None:
    rollouts = list(iter_rollouts(fixtures / "trl_healthy_r4_head.md"))
    assert [r.rollout_id for r in rollouts] == [
        "step0-sample1",
        "step0-sample2",
        "step1-sample1",
        "step1-sample2",
    ]
    first = rollouts[0]
    assert first.state_id == rollouts[1].state_id != rollouts[2].state_id
    assert first.reward == 3.0 and first.success is True
    assert first.metadata == {
        "source": "trl-md",
        "rewards": {
            "accuracy": 1.0,
            "format": 1.0,
            "length": 0.0,
            "mdi_add": 0.991,
            "mdi": 5.469,
            "total": 3.0,
        },
        "solution": "C",
        "completion_chars": 402,
    }
    (turn,) = first.turns
    assert (
        turn.observation
        == "What kind of food is this?\nA: pescatarian\nB: vegan\nC: meat\nD: vegetarian"
    )
    assert turn.reasoning.startswith("The food in the image consists of multiple cooked")
    assert turn.reasoning.endswith("further supports the meat category.")
    assert turn.action == "C"
    assert turn.valid_format is True and turn.reward == 3.0
    assert rollouts[2].reward == 0.5 and rollouts[2].turns[0].valid_format is False
    assert rollouts[3].metadata["completion_chars"] == 18


def test_collapse_trim_fixture_exact(fixtures: Path) -> None:
    rollouts = list(iter_rollouts(fixtures / "trl_format_collapse_r2_trim.md"))
    assert [r.rollout_id for r in rollouts] == [
        "step1-sample1",
        "step1-sample2",
        "step20-sample1",
        "step20-sample2",
    ]
    assert rollouts[0].turns[0].observation == (
        "Question: What body of water is this?\nChoices:\nA. pool\nB. pond\nC. ocean\n"
        "D. swamp\nPlease select the correct answer (A/B/C/D)."
    )
    assert rollouts[0].metadata["rewards"] == {
        "accuracy": 1.0,
        "format": 0.0,
        "mdi": -1.0,
        "total": 3.0,
    }
    assert [r.turns[0].action for r in rollouts] == ["B. pond", "B. pond", "C. atomic", "C. atomic"]
    assert [r.metadata["completion_chars"] for r in rollouts] == [206, 597, 747, 841]
    assert all(r.turns[0].valid_format is False for r in rollouts)
    # Step 20, sample 1 is tag soup with no think span.
    assert rollouts[2].turns[0].reasoning == ""


def test_prompt_and_completion_read_back_exactly(fixtures: Path) -> None:
    text = (fixtures / "trl_healthy_r4_head.md").read_text(encoding="utf-8")
    prompt = text.split("**Prompt:** ", 1)[1].split("\n\n**Completion:** ", 1)[0]
    completion = text.split("**Completion:** ", 1)[1].split("\n\n**Solution:** ", 1)[0]
    first = next(iter(iter_rollouts(fixtures / "trl_healthy_r4_head.md")))
    import hashlib

    assert first.state_id == hashlib.sha256(prompt.encode()).hexdigest()[:16]
    assert first.metadata["completion_chars"] == len(completion)


# --- Markdown inside completions, and errors ------------------------------------------

_SAMPLE = """### Sample {k}

**Prompt:** system
Answer with a letter.
user
{question}
assistant


**Completion:** {completion}

**Solution:** B

**Rewards:** {rewards}

**Detailed Metrics:**

```json
{{"rewards": {{"total": 1.0}}}}
```

---

"""


def _log(tmp_path: Path, samples: list[dict], step: int = 3, name: str = "log.md") -> Path:
    parts = [f"# Rollout Results Log\n\n## === Rollout Step {step} === | 2025-10-27\n\n"]
    for k, sample in enumerate(samples, 1):
        values = {"question": "Q?", "completion": "<answer>B</answer>"}
        values["rewards"] = "accuracy=1.000, format=1.000, total=2.000"
        values.update(sample)
        parts.append(_SAMPLE.format(k=k, **values))
    path = tmp_path / name
    path.write_text("".join(parts), encoding="utf-8", newline="")
    return path


def test_markdown_inside_a_completion_stays_in_it(tmp_path: Path) -> None:
    tricky = (
        "<think>\n## === Rollout Step 99 ===\n### Sample 7\n---\n**Prompt:** fake\r\n</think>"
        "\n<answer>B</answer>\n\n\n"
    )
    path = _log(tmp_path, [{"completion": tricky}, {}])
    first, second = iter_rollouts(path)
    assert (first.step, second.step) == (3, 3)
    assert [first.rollout_id, second.rollout_id] == ["step3-sample1", "step3-sample2"]
    assert first.metadata["completion_chars"] == len(tricky)
    assert (
        first.turns[0].reasoning
        == "## === Rollout Step 99 ===\n### Sample 7\n---\n**Prompt:** fake"
    )
    assert first.turns[0].action == "B"


def test_no_format_or_accuracy_reward_gives_none(tmp_path: Path) -> None:
    path = _log(tmp_path, [{"rewards": "total=0.250"}])
    (rollout,) = iter_rollouts(path)
    assert rollout.success is None and rollout.turns[0].valid_format is None
    assert rollout.reward == 0.25


def test_missing_rewards_names_the_sample_line(tmp_path: Path) -> None:
    path = _log(tmp_path, [{}, {}])
    text = path.read_text(encoding="utf-8")
    cut = text.rindex("**Rewards:**")
    path.write_text(text[:cut] + text[cut:].replace("**Rewards:**", "Rewards:", 1))
    sample_2_line = text[: text.index("### Sample 2")].count("\n") + 1
    with pytest.raises(
        ImportFormatError, match=rf"log\.md:{sample_2_line}: field 'rewards': "
    ) as info:
        list(iter_rollouts(path))
    assert "sample 2 of step 3" in str(info.value)


def test_bad_reward_value_names_its_line(tmp_path: Path) -> None:
    path = _log(tmp_path, [{"rewards": "accuracy=1.000, format=oops, total=1.0"}])
    line = (
        path.read_text(encoding="utf-8")
        .split("\n")
        .index("**Rewards:** accuracy=1.000, format=oops, total=1.0")
        + 1
    )
    with pytest.raises(ImportFormatError, match=rf":{line}: field 'rewards': .*'format=oops'"):
        list(iter_rollouts(path))


def test_missing_total_reward(tmp_path: Path) -> None:
    path = _log(tmp_path, [{"rewards": "accuracy=1.000"}])
    with pytest.raises(ImportFormatError, match=r"field 'rewards\.total'"):
        list(load_rollouts(path, "trl-md"))


def test_sample_before_any_step(tmp_path: Path) -> None:
    path = tmp_path / "x.md"
    path.write_text("# Log\n\n### Sample 1\n\n**Prompt:** p\n", encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"x\.md:3: '### Sample' before any"):
        list(iter_rollouts(path))


def test_parse_helpers() -> None:
    assert parse_rewards("accuracy=1.000, format=0.000, total=-0.5") == {
        "accuracy": 1.0,
        "format": 0.0,
        "total": -0.5,
    }
    with pytest.raises(ValueError, match="'mdi=nan'"):
        parse_rewards("mdi=nan, total=1")
    assert question_of("system\nS\nuser\nQ?\nA. x\nassistant\n") == "Q?\nA. x"
    assert parse_reasoning("<think> a </think><answer>B</answer>") == "a"
    assert parse_reasoning("<think> unclosed <answer>B</answer>") == "unclosed"
    assert parse_reasoning("opened by the template </think> B") == "opened by the template"
    assert parse_reasoning("B") == ""
    assert parse_answer("<answer>\n<correct>\n<answer>\nC. atomic\n</answer>") == "C. atomic"
    assert parse_answer("<think>x</think>\n<answer>A") == "A"
    assert parse_answer("<think>x</think>\nAnswer: D. swamp\n") == "D. swamp"
    assert parse_answer("<think>x</think> A.\nmore") == "A."
    assert parse_answer("D") == ""

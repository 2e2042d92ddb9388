"""Import the Markdown rollout log of a TRL GRPO fork (``*.rollout_results.md``).

The log is a sequence of steps, each a heading, a statistics table, and one section
per rollout::

    ## === Rollout Step 3 === | 2025-10-27 18:47:30
    ### Overall Statistics
    | Metric | Value | ...
    ### Sample 1

    **Prompt:** system
    ...chat-templated prompt...
    user
    <question and choices>
    assistant


    **Completion:** <think>...</think>
    <answer>C</answer>

    **Solution:** C

    **Rewards:** accuracy=1.000, format=1.000, length=0.000, mdi_add=0.991, total=3.000

    **Detailed Metrics:**

    ```json
    {...attention metrics...}
    ```

    ---

The logger writes each field as ``**Name:** <value>\\n\\n``, so a value is read back
exactly: a field runs until the next field's line. A completion may hold Markdown of
its own (headings, rules, even ``### Sample``), so it ends only at the
``**Solution:**`` line. A sample ends at ``---``, the next ``### Sample`` or a step
heading once its fields are read. Everything outside samples (title, tables, the
``Step: i/n`` line) is skipped.

Mapping to :class:`~collapsewatch.schema.Rollout` (one turn per rollout):

============== ==============================================================
ours           TRL Markdown
============== ==============================================================
rollout_id     ``f"step{N}-sample{k}"``
step           ``N`` of ``## === Rollout Step N ===``
env_id         ``"trl-vqa"``
state_id       :func:`~collapsewatch.importers.state_hash` of the exact prompt
               (samples of one group are adjacent and share it)
reward         the ``total`` reward
success        ``accuracy == 1.0``; None without an accuracy reward
metadata       ``{"source": "trl-md", "rewards": {name: value}, "solution",
               "completion_chars"}``; the JSON block is not kept
turn           observation: the user message of the prompt (the question and
               its choices; the system prompt is the same for every state, so it
               says nothing about the input); reasoning: the text inside
               ``<think>...</think>``; action: the answer (below); reward: total;
               done: True; valid_format: ``format >= 1.0`` when a ``format``
               reward is logged, else None
============== ==============================================================

Reasoning: the inner text of the first ``<think>`` span, stripped. An unclosed
``<think>`` runs to ``<answer>`` or the end; a ``</think>`` with no opening tag (some
chat templates open it in the prompt) takes the text before it. Empty without either.

Action: the inner text of the first closed ``<answer>...</answer>`` (the innermost one
when they nest), stripped; an ``<answer>`` cut off before its closing tag gives the
text after it. Without the tag: the first line after the last ``Answer:`` (for
prompts that ask for ``Answer: X``), else the first line after the last ``</think>``,
else empty. The fallbacks go beyond the ``<answer>`` tag because the
format-collapse run's prompt asks for ``Answer: X``, not the tag.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collapsewatch.importers import ImportFormatError, state_hash
from collapsewatch.schema import Rollout, Turn

__all__ = ["iter_rollouts", "parse_answer", "parse_reasoning", "parse_rewards", "question_of"]

ENV_ID = "trl-vqa"

_STEP_HEADING = re.compile(r"^## === Rollout Step (\d+) ===")
_SAMPLE_HEADING = re.compile(r"^### Sample (\d+)\s*$")
_FIELD = re.compile(r"^\*\*(Prompt|Completion|Solution|Rewards|Detailed Metrics):\*\* ?")
_REQUIRED = ("Prompt", "Completion", "Solution", "Rewards")
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
# The innermost span: nested tags ("<answer><correct><answer>B</answer>") are common
# in collapsed completions.
_ANSWER = re.compile(r"<answer>((?:(?!<answer>).)*?)</answer>", re.DOTALL)
_ANSWER_LINE = re.compile(r"Answer:[ \t]*\n?[ \t]*([^\n]*)")


def question_of(prompt: str) -> str:
    """The user message of a chat-templated prompt (between the last ``user`` line
    and the closing ``assistant`` line), stripped; the whole prompt, stripped, when it
    has no ``user`` line."""
    start = prompt.rfind("\nuser\n")
    if start < 0:
        return prompt.strip()
    text = prompt[start + len("\nuser\n") :]
    end = text.rfind("\nassistant\n")
    if end >= 0:
        text = text[:end]
    return text.strip()


def parse_reasoning(completion: str) -> str:
    """The text inside the completion's think span (see the module docstring)."""
    match = _THINK.search(completion)
    if match is not None:
        return match.group(1).strip()
    opened = completion.find("<think>")
    if opened >= 0:
        rest = completion[opened + len("<think>") :]
        answer = rest.find("<answer>")
        return (rest if answer < 0 else rest[:answer]).strip()
    closed = completion.find("</think>")
    if closed >= 0:
        return completion[:closed].strip()
    return ""


def parse_answer(completion: str) -> str:
    """The completion's answer (see the module docstring)."""
    match = _ANSWER.search(completion)
    if match is not None:
        return match.group(1).strip()
    opened = completion.rfind("<answer>")
    if opened >= 0:
        return completion[opened + len("<answer>") :].strip()
    lines = _ANSWER_LINE.findall(completion)
    if lines:
        return lines[-1].strip()
    closed = completion.rfind("</think>")
    if closed >= 0:
        rest = completion[closed + len("</think>") :].strip()
        return rest.split("\n", 1)[0].strip()
    return ""


def parse_rewards(text: str) -> dict[str, float]:
    """``"accuracy=1.000, format=0.000, total=3.000"`` -> ``{"accuracy": 1.0, ...}``.
    Raises ValueError naming the entry that is not ``name=number``."""
    rewards: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not name or not math.isfinite(number):
            raise ValueError(f"expected 'name=number', got {item.strip()!r}")
        rewards[name] = number
    return rewards


@dataclass
class _Sample:
    step: int
    index: int
    line: int
    fields: dict[str, list[str]] = field(default_factory=dict)
    field_lines: dict[str, int] = field(default_factory=dict)
    current: str | None = None

    def value(self, name: str) -> str:
        # The logger writes "<value>\n\n" before the next field: drop those two breaks.
        text = "".join(self.fields[name])
        return text[:-2] if text.endswith("\n\n") else text.rstrip("\n")


def _rollout(sample: _Sample, path: Path) -> Rollout:
    where = {"path": path, "line": sample.line}
    for name in _REQUIRED:
        if name not in sample.fields:
            raise ImportFormatError(
                f"sample {sample.index} of step {sample.step} has no '**{name}:**' line",
                field=name.lower(),
                **where,
            )
    prompt = sample.value("Prompt")
    completion = sample.value("Completion")
    solution = sample.value("Solution").strip()
    try:
        rewards = parse_rewards(sample.value("Rewards"))
    except ValueError as exc:
        raise ImportFormatError(
            str(exc), path=path, line=sample.field_lines["Rewards"], field="rewards"
        ) from exc
    if "total" not in rewards:
        raise ImportFormatError(
            f"no 'total' among {sorted(rewards)}",
            path=path,
            line=sample.field_lines["Rewards"],
            field="rewards.total",
        )
    accuracy = rewards.get("accuracy")
    fmt = rewards.get("format")
    turn = Turn(
        index=0,
        observation=question_of(prompt),
        reasoning=parse_reasoning(completion),
        action=parse_answer(completion),
        reward=rewards["total"],
        done=True,
        valid_format=None if fmt is None else fmt >= 1.0,
    )
    metadata: dict[str, Any] = {
        "source": "trl-md",
        "rewards": rewards,
        "solution": solution,
        "completion_chars": len(completion),
    }
    return Rollout(
        rollout_id=f"step{sample.step}-sample{sample.index}",
        step=sample.step,
        env_id=ENV_ID,
        state_id=state_hash(prompt),
        reward=rewards["total"],
        success=None if accuracy is None else accuracy == 1.0,
        turns=[turn],
        metadata=metadata,
    )


def iter_rollouts(path: str | Path) -> Iterator[Rollout]:
    """Stream the rollouts of a TRL Markdown rollout log, in file order.

    Raises :class:`ImportFormatError` naming the file and line when a sample comes
    before any step heading, lacks a ``Prompt``/``Completion``/``Solution``/``Rewards``
    field, or has a rewards line that is not ``name=number, ...`` with a ``total``.
    """
    path = Path(path)
    step: int | None = None
    sample: _Sample | None = None
    # newline="" keeps "\r" inside completions as written.
    with path.open(encoding="utf-8", newline="") as fh:
        for line_no, raw in enumerate(fh, 1):
            line = raw.rstrip("\r\n")
            in_completion = sample is not None and sample.current == "Completion"
            field_match = _FIELD.match(line) if sample is not None else None
            if (
                sample is not None
                and field_match is not None
                and (not in_completion or field_match.group(1) == "Solution")
            ):
                name = field_match.group(1)
                if name in sample.fields:
                    raise ImportFormatError(
                        f"second '**{name}:**' line in sample {sample.index} of step {step}",
                        path=path,
                        line=line_no,
                        field=name.lower(),
                    )
                sample.current = name
                sample.fields[name] = [raw[field_match.end() :]]
                sample.field_lines[name] = line_no
                continue
            if not in_completion and (sample is None or sample.current != "Prompt"):
                step_match = _STEP_HEADING.match(line)
                sample_match = _SAMPLE_HEADING.match(line)
                if step_match or sample_match or (sample is not None and line == "---"):
                    if sample is not None:
                        yield _rollout(sample, path)
                        sample = None
                    if step_match:
                        step = int(step_match.group(1))
                    elif sample_match:
                        if step is None:
                            raise ImportFormatError(
                                "'### Sample' before any '## === Rollout Step N ===' heading",
                                path=path,
                                line=line_no,
                            )
                        sample = _Sample(step=step, index=int(sample_match.group(1)), line=line_no)
                    continue
            if sample is not None and sample.current is not None:
                sample.fields[sample.current].append(raw)
    if sample is not None:
        yield _rollout(sample, path)

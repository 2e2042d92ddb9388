"""Import verl's ``trainer.rollout_data_dir`` dumps.

verl writes one JSON Lines file per training step (``{step}.jsonl``), one object per
rollout::

    {"input": "<chat-templated prompt>", "output": "<multi-turn continuation>",
     "score": 1.0, "step": 2, "request_id": "9203dc30-..."}

The chat template's special tokens are stripped, so a role change shows only as a
bare role line. A multi-turn, tool-calling ``output`` reads::

    <assistant text> <tool_call>{json}</tool_call>
    user
    <tool_response>
    ...
    </tool_response>
    assistant
    <assistant text> ... #### 21

Mapping to :class:`~collapsewatch.schema.Rollout`:

============== ==============================================================
ours           verl
============== ==============================================================
rollout_id     ``request_id``; ``f"{step}-{line_no}"`` when it is missing
step           ``step`` (else the number in the file name)
env_id         ``"verl"``
state_id       :func:`~collapsewatch.importers.state_hash` of the exact ``input``:
               a GRPO group is the rollouts that share the prompt
reward         ``score``
success        ``score >= success_threshold`` (default 1.0)
turns          one per assistant message of ``output`` (see below)
metadata       ``{"source": "verl", "request_id", "input_chars"}``, plus
               ``"final_observation"`` when ``output`` ends in a tool response
               that no assistant message followed (the rollout was cut off)
============== ==============================================================

Turns. ``output`` is cut at the environment's messages: a ``user`` line followed by
one or more ``<tool_response>`` blocks and an ``assistant`` line. Role lines that the
model wrote itself (``user`` followed by anything but a tool response) are not turn
boundaries; they stay in the assistant text, as the model produced them. For turn *t*:

- ``observation``: turn 0, the last user message of ``input`` (the question, without
  the system prompt and tool list); later turns, the text inside the tool-response
  blocks that came before, joined by newlines.
- ``reasoning``: the text inside ``<think>`` spans if there are any, else the
  assistant text outside tool calls, stripped.
- ``action``: the tool calls, each as compact JSON, one per line. The last turn's
  action is the final answer (the text after the last ``####``, as in verl's GSM8K
  scorer) when there is one, else its tool calls, else empty. A ``<tool_call>`` that is
  never closed ends at the next ``<tool_call>`` or at the end of the message. A JSON
  object in a call body is the call and the text around it is reasoning; a closed
  call without one keeps its raw body (the environment got it as written); an unclosed
  one without one is not a call, its body is reasoning.
- ``reward``: ``score`` on the last turn, 0 before it (the dump keeps no per-turn
  reward); ``done`` is True on the last turn; ``valid_format`` is None (this format
  does not define one).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collapsewatch.importers import ImportFormatError, json_objects, state_hash, step_files
from collapsewatch.schema import Rollout, Turn

__all__ = ["final_answer", "iter_rollouts", "parse_output", "question_of", "rollout_from_record"]

ENV_ID = "verl"

# The environment's message between two assistant messages: only tool responses.
_ENV_MESSAGE = re.compile(
    r"\nuser\n(<tool_response>.*?</tool_response>)\nassistant\n",
    re.DOTALL,
)
# An environment message that no assistant message followed (output cut off).
_TRAILING_ENV_MESSAGE = re.compile(r"\nuser\n(<tool_response>(?:(?!\nassistant\n).)*)\Z", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"<tool_response>(.*?)(?:</tool_response>|\Z)", re.DOTALL)
# A closed call, or an unclosed one up to the next call or the end of the message.
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|(?=<tool_call>)|\Z)", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)
_FINAL_ANSWER = re.compile(r"(?<!#)####(?!#)[ \t]*([^\n`]*)")
_JUNK_PREFIX = re.compile(r"[^\w\"']*")
_JSON = json.JSONDecoder()


def question_of(prompt: str) -> str:
    """The last user message of a chat-templated prompt (``...\\nuser\\n<question>
    \\nassistant\\n``), stripped; the whole prompt, stripped, when it has no user line."""
    start = prompt.rfind("\nuser\n")
    if start < 0:
        return prompt.strip()
    text = prompt[start + len("\nuser\n") :]
    if text.endswith("\nassistant\n"):
        text = text[: -len("\nassistant\n")]
    return text.strip()


def _tool_responses(message: str) -> str:
    return "\n".join(m.group(1).strip() for m in _TOOL_RESPONSE.finditer(message))


def _read_call(body: str, closed: bool) -> tuple[str, str]:
    """(call, leftover text) of one tool-call body. A JSON object that opens the body
    is the call, in compact form, and the text after it is left over (it is reasoning).
    Without one, a closed call keeps its raw stripped body (the environment got it as
    written), while an unclosed one was never a call: its whole body is left over."""
    start = body.find("{")
    # Only stray punctuation (a ">" typo) may come before the object; a body such as
    # '"name": ..., "arguments": {...}' is a broken call, not the inner object.
    if start >= 0 and _JUNK_PREFIX.fullmatch(body[:start]):
        try:
            value, end = _JSON.raw_decode(body, start)
        except json.JSONDecodeError:
            pass
        else:
            call = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            return call, body[end:]
    if closed:
        return body.strip(), ""
    return "", body


def _split_assistant(text: str) -> tuple[str, list[str]]:
    """(reasoning, tool calls) of one assistant message."""
    calls: list[str] = []
    outside: list[str] = []
    pos = 0
    for match in _TOOL_CALL.finditer(text):
        outside.append(text[pos : match.start()])
        call, leftover = _read_call(match.group(1), closed=bool(match.group(2)))
        if call:
            calls.append(call)
        outside.append(leftover)
        pos = match.end()
    outside.append(text[pos:])
    thinks = [m.group(1).strip() for m in _THINK.finditer(text)]
    reasoning = "\n".join(thinks) if thinks else "".join(outside).strip()
    return reasoning, calls


def final_answer(text: str) -> str:
    """The text after the last ``####`` marker (verl's GSM8K answer format) up to the
    end of its line or a backtick, without surrounding spaces or a closing period;
    empty when there is none."""
    answers = _FINAL_ANSWER.findall(text)
    return answers[-1].strip().rstrip(".").strip() if answers else ""


def parse_output(output: str) -> tuple[list[str], list[str], str | None]:
    """Split a multi-turn continuation into its assistant messages and the
    environment's tool responses between them.

    Returns ``(assistant_messages, tool_observations, final_observation)``:
    ``len(tool_observations) == len(assistant_messages) - 1``, and
    ``final_observation`` is the tool response that ends ``output`` with no assistant
    message after it (``None`` when there is none).
    """
    parts = _ENV_MESSAGE.split(output)
    assistant = parts[0::2]
    observations = [_tool_responses(message) for message in parts[1::2]]
    final_observation = None
    trailing = _TRAILING_ENV_MESSAGE.search(assistant[-1])
    if trailing is not None:
        assistant[-1] = assistant[-1][: trailing.start()]
        final_observation = _tool_responses(trailing.group(1))
    return assistant, observations, final_observation


def _turns(question: str, output: str, score: float) -> tuple[list[Turn], str | None]:
    messages, observations, final_observation = parse_output(output)
    seen = [question, *observations]
    turns = []
    last = len(messages) - 1
    for index, (message, observation) in enumerate(zip(messages, seen, strict=True)):
        reasoning, calls = _split_assistant(message)
        action = "\n".join(calls)
        if index == last:
            action = final_answer(message) or action
        turns.append(
            Turn(
                index=index,
                observation=observation,
                reasoning=reasoning,
                action=action,
                reward=score if index == last else 0.0,
                done=index == last,
            )
        )
    return turns, final_observation


def _field(record: dict[str, Any], name: str, kind: type | tuple[type, ...], **where: Any) -> Any:
    if name not in record:
        raise ImportFormatError("missing", field=name, **where)
    value = record[name]
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = "a number" if kind == (int, float) else f"a {kind.__name__}"
        raise ImportFormatError(f"expected {expected}, got {value!r:.60}", field=name, **where)
    return value


def rollout_from_record(
    record: dict[str, Any],
    *,
    line_no: int,
    path: str | Path | None = None,
    default_step: int | None = None,
    success_threshold: float = 1.0,
) -> Rollout:
    """Map one verl record (a parsed JSON line) to a :class:`Rollout` (see the module
    docstring). ``default_step`` is used when the record has no ``step``. Raises
    :class:`ImportFormatError` naming ``path``, ``line_no`` and the field."""
    where = {"path": path, "line": line_no}
    prompt = _field(record, "input", str, **where)
    output = _field(record, "output", str, **where)
    score = float(_field(record, "score", (int, float), **where))
    if not math.isfinite(score):
        raise ImportFormatError(f"expected a finite number, got {score}", field="score", **where)
    if "step" in record or default_step is None:
        step = _field(record, "step", int, **where)
        if step < 0:
            raise ImportFormatError(f"expected a step >= 0, got {step}", field="step", **where)
    else:
        step = default_step
    request_id = record.get("request_id")
    if request_id is not None and (not isinstance(request_id, str) or not request_id):
        raise ImportFormatError(
            f"expected a non-empty string, got {request_id!r:.60}", field="request_id", **where
        )
    turns, final_observation = _turns(question_of(prompt), output, score)
    metadata: dict[str, Any] = {
        "source": "verl",
        "request_id": request_id,
        "input_chars": len(prompt),
    }
    if final_observation is not None:
        metadata["final_observation"] = final_observation
    return Rollout(
        rollout_id=request_id or f"{step}-{line_no}",
        step=step,
        env_id=ENV_ID,
        state_id=state_hash(prompt),
        reward=score,
        success=score >= success_threshold,
        turns=turns,
        metadata=metadata,
    )


def _iter_file(
    path: Path, *, default_step: int | None, success_threshold: float
) -> Iterator[Rollout]:
    for line_no, record in json_objects(path):
        yield rollout_from_record(
            record,
            line_no=line_no,
            path=path,
            default_step=default_step,
            success_threshold=success_threshold,
        )


def iter_rollouts(path: str | Path, *, success_threshold: float = 1.0) -> Iterator[Rollout]:
    """Stream the rollouts of a verl ``rollout_data_dir`` file, or of a directory of
    ``{step}.jsonl`` files in step order.

    ``success_threshold``: a rollout counts as a success when its ``score`` is at least
    this (GSM8K scores are 0 or 1, hence 1.0). Blank lines are skipped. A line that is
    not a JSON object, or lacks ``input``/``output``/``score`` or has them of the wrong
    type, raises :class:`ImportFormatError` naming the file, line and field.
    """
    path = Path(path)
    if path.is_dir():
        for step, file in step_files(path):
            yield from _iter_file(file, default_step=step, success_threshold=success_threshold)
    else:
        match = re.search(r"(\d+)$", path.stem)
        default_step = int(match.group(1)) if match else None
        yield from _iter_file(path, default_step=default_step, success_threshold=success_threshold)

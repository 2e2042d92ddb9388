"""Import multi-turn agent trajectories in the chat-messages shape.

Many agent frameworks and trainers keep a trajectory as the conversation itself: a
list of ``{"role", "content"}`` messages, with the model's tool calls on its assistant
messages and the environment's answers as ``tool`` (or ``user``) messages. One JSON
object per line::

    {"messages": [
        {"role": "system", "content": "You are a warehouse agent."},
        {"role": "user", "content": "Box 3 is at (2, 5). Fetch it."},
        {"role": "assistant", "content": "<think>Go east first.</think>",
         "tool_calls": [{"type": "function",
                         "function": {"name": "move", "arguments": "{\\"dir\\": \\"east\\"}"}}]},
        {"role": "tool", "content": "You are at (1, 0)."},
        {"role": "assistant", "content": "<think>Now north.</think>Done."}
     ],
     "reward": 1.0, "state_id": "box3-seed7", "step": 12}

Mapping to :class:`~collapsewatch.schema.Rollout`:

============== ==============================================================
ours           chat record
============== ==============================================================
rollout_id     ``rollout_id``; ``f"{step}-{line_no}"`` when it is missing
step           ``step``; else the number that ends the file name
               (``traj_12.jsonl`` -> 12); else 0
env_id         ``env_id``; else ``"chat"``
state_id       ``state_id``; else ``id``; else
               :func:`~collapsewatch.importers.state_hash` of the messages
               before the first assistant message (the initial state: same
               system prompt and question -> one GRPO group)
reward         ``reward`` (or ``score``), a finite number
success        ``success`` when it is a boolean; else ``reward >=
               success_threshold`` when a threshold is given; else null
turns          one per assistant message (see below)
metadata       ``{"source": "chat", "num_messages"}``, plus the record's own
               ``metadata`` object, plus ``"final_observation"`` when messages
               follow the last assistant message (the environment answered and
               the trajectory was cut there)
============== ==============================================================

Turns. Turn *t* is the *t*-th assistant message:

- ``observation``: the non-system messages since the previous assistant message
  (for turn 0, since the start: the user's request; later, the tool results),
  their text joined by newlines. System messages are left out: they are the same for
  every state and would only blur what the state is.
- ``reasoning``: the message's ``reasoning_content`` (or ``reasoning``) field when it
  has one (OpenAI-compatible servers put a thinking model's reasoning there); else the
  text inside its ``<think>`` spans (a ``</think>`` without an opening tag closes a
  span that began at the start: chat templates put ``<think>`` in the prompt); else
  the message text outside tool calls.
- ``action``: the tool calls, each as compact JSON ``{"name", "arguments"}`` (the
  ``arguments`` string parsed when it is JSON), one per line: first the message's
  ``tool_calls`` field, then ``<tool_call>{...}</tool_call>`` blocks written in the
  text (Qwen, Hermes). Without calls, the final content: the text outside ``<think>``
  spans, stripped.
- ``reward``: the assistant message's own ``reward`` when any assistant message has
  one (0 for those without); else the trajectory reward on the last turn and 0 before
  it. ``done`` is True on the last turn; ``valid_format`` is null (this shape does not
  define a format); ``num_tokens`` is the message's ``num_tokens`` when given.

``content`` may be a string, null, or a list of parts (``{"type": "text", "text"}``;
other parts, such as images, are left out).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from collapsewatch.importers import ImportFormatError, json_objects, state_hash
from collapsewatch.importers.verl import _split_assistant
from collapsewatch.schema import Rollout, Turn

__all__ = [
    "ENV_ID",
    "initial_state",
    "iter_rollouts",
    "message_text",
    "rollout_from_record",
    "split_assistant",
    "turns_from_messages",
]

ENV_ID = "chat"

_THINK_SPAN = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_TOOL_CALL_SPAN = re.compile(r"<tool_call>.*?(?:</tool_call>|(?=<tool_call>)|\Z)", re.DOTALL)


def message_text(content: Any) -> str:
    """The text of a message's ``content``: a string as is, null as "", a list of
    parts as its text parts joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def _call_json(call: Any) -> str:
    """One tool call as compact JSON ``{"name", "arguments"}``."""
    if isinstance(call, Mapping):
        inner = call.get("function") if isinstance(call.get("function"), Mapping) else call
        if "name" in inner:
            arguments = inner.get("arguments", {})
            if isinstance(arguments, str):
                # Not JSON: keep the raw string, as the environment got it.
                with contextlib.suppress(json.JSONDecodeError):
                    arguments = json.loads(arguments)
            call = {"name": inner["name"], "arguments": arguments}
    return json.dumps(call, separators=(",", ":"), ensure_ascii=False, default=str)


def split_assistant(
    content: Any, tool_calls: Sequence[Any] | None = None, reasoning: str | None = None
) -> tuple[str, str]:
    """(reasoning, action) of one assistant message, as the module docstring says."""
    text = message_text(content)
    if "</think>" in text and "<think>" not in text:
        text = "<think>" + text
    parsed_reasoning, inline_calls = _split_assistant(text)
    calls = [_call_json(c) for c in tool_calls or ()] + inline_calls
    if calls:
        action = "\n".join(calls)
    else:
        action = _TOOL_CALL_SPAN.sub("", _THINK_SPAN.sub("", text)).strip()
    if reasoning is not None and reasoning.strip():
        parsed_reasoning = reasoning.strip()
    return parsed_reasoning, action


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def turns_from_messages(
    messages: Sequence[Mapping[str, Any]],
    reward: float,
    *,
    path: str | Path | None = None,
    line: int | None = None,
) -> tuple[list[Turn], str | None]:
    """The turns of a conversation and the observation left after its last turn
    (``None`` when the last message is the assistant's).

    Raises :class:`ImportFormatError` when no message has the role ``assistant`` or a
    message is not an object with a string ``role``.
    """
    where = {"path": path, "line": line}
    seen: list[str] = []
    pending: list[tuple[Mapping[str, Any], list[str]]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ImportFormatError(
                f"expected an object with a string 'role', got {message!r:.60}",
                field=f"messages.{i}",
                **where,
            )
        role = message["role"]
        if role == "assistant":
            pending.append((message, seen))
            seen = []
        elif role not in ("system", "developer"):
            text = message_text(message.get("content")).strip()
            if text:
                seen.append(text)
    if not pending:
        raise ImportFormatError("no message has the role 'assistant'", field="messages", **where)
    own_rewards = [_number(m.get("reward")) for m, _ in pending]
    per_turn = any(r is not None for r in own_rewards)
    last = len(pending) - 1
    turns = []
    for index, (message, observation) in enumerate(pending):
        tool_calls = message.get("tool_calls")
        if not isinstance(tool_calls, Sequence) or isinstance(tool_calls, str):
            tool_calls = None
        explicit = message.get("reasoning_content") or message.get("reasoning")
        think, action = split_assistant(
            message.get("content"),
            tool_calls,
            explicit if isinstance(explicit, str) else None,
        )
        own = own_rewards[index]
        if per_turn:
            turn_reward = own if own is not None else 0.0
        else:
            turn_reward = reward if index == last else 0.0
        num_tokens = message.get("num_tokens")
        turns.append(
            Turn(
                index=index,
                observation="\n".join(observation),
                reasoning=think,
                action=action,
                reward=turn_reward,
                done=index == last,
                num_tokens=num_tokens if isinstance(num_tokens, int) and num_tokens >= 0 else None,
            )
        )
    final_observation = "\n".join(seen) if seen else None
    return turns, final_observation


def initial_state(messages: Sequence[Mapping[str, Any]]) -> str:
    """The messages before the first assistant message, as canonical JSON (role and
    text only): what identifies the initial state of a conversation."""
    head = []
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            break
        if isinstance(message, Mapping):
            head.append([str(message.get("role")), message_text(message.get("content"))])
    return json.dumps(head, ensure_ascii=False, separators=(",", ":"))


def _identifier(record: Mapping[str, Any], name: str, where: dict[str, Any]) -> str | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise ImportFormatError(
            f"expected a non-empty string or an integer, got {value!r:.60}", field=name, **where
        )
    return str(value)


def rollout_from_record(
    record: Mapping[str, Any],
    *,
    line_no: int,
    path: str | Path | None = None,
    default_step: int | None = None,
    success_threshold: float | None = None,
) -> Rollout:
    """Map one chat record (a parsed JSON line) to a :class:`Rollout` (see the module
    docstring). Raises :class:`ImportFormatError` naming ``path``, ``line_no`` and the
    field."""
    where: dict[str, Any] = {"path": path, "line": line_no}
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ImportFormatError(
            f"expected a non-empty list of messages, got {messages!r:.60}",
            field="messages",
            **where,
        )
    key = "score" if "reward" not in record and "score" in record else "reward"
    reward = _number(record.get(key))
    if reward is None or not math.isfinite(reward):
        raise ImportFormatError(
            f"expected a finite number, got {record.get(key)!r:.60}", field=key, **where
        )
    step = record.get("step", default_step if default_step is not None else 0)
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ImportFormatError(
            f"expected an integer >= 0, got {step!r:.60}", field="step", **where
        )
    success = record.get("success")
    if success is not None and not isinstance(success, bool):
        raise ImportFormatError(
            f"expected true, false or null, got {success!r:.60}", field="success", **where
        )
    if success is None and success_threshold is not None:
        success = reward >= success_threshold
    env_id = record.get("env_id", ENV_ID)
    if not isinstance(env_id, str) or not env_id:
        raise ImportFormatError(
            f"expected a non-empty string, got {env_id!r:.60}", field="env_id", **where
        )
    extra = record.get("metadata")
    if extra is not None and not isinstance(extra, Mapping):
        raise ImportFormatError(f"expected an object, got {extra!r:.60}", field="metadata", **where)
    turns, final_observation = turns_from_messages(messages, reward, **where)
    state_id = (
        _identifier(record, "state_id", where)
        or _identifier(record, "id", where)
        or state_hash(initial_state(messages))
    )
    metadata: dict[str, Any] = {"source": "chat", "num_messages": len(messages), **(extra or {})}
    if final_observation is not None:
        metadata["final_observation"] = final_observation
    try:
        return Rollout(
            rollout_id=_identifier(record, "rollout_id", where) or f"{step}-{line_no}",
            step=step,
            env_id=env_id,
            state_id=state_id,
            reward=reward,
            success=success,
            turns=turns,
            metadata=metadata,
        )
    except ValueError as exc:  # pydantic: an over-long id, metadata that is not JSON
        raise ImportFormatError(str(exc).splitlines()[0], **where) from exc


def iter_rollouts(path: str | Path, *, success_threshold: float | None = None) -> Iterator[Rollout]:
    """Stream the rollouts of a chat-messages JSON Lines file, one per non-blank line.

    ``success_threshold``: for records without a boolean ``success``, a rollout counts as
    a success when its reward is at least this; None (the default) leaves success
    unknown. A line that is not a JSON object or breaks the mapping raises
    :class:`ImportFormatError` naming the file, line and field.
    """
    path = Path(path)
    match = re.search(r"(\d+)$", path.stem)
    default_step = int(match.group(1)) if match else None
    for line_no, record in json_objects(path):
        yield rollout_from_record(
            record,
            line_no=line_no,
            path=path,
            default_step=default_step,
            success_threshold=success_threshold,
        )

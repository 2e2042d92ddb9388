"""The response format ``<think>…</think><answer>…</answer>`` and its parser.

A response is valid when, after optional leading whitespace, it holds exactly one
think span followed by one answer span with a non-empty answer; tags are matched
case-insensitively and whitespace around them is ignored. Text after ``</answer>`` is
ignored (generation stops there). An invalid response still yields whatever reasoning
it has, but no action: the environment then counts an invalid action.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)

_RESPONSE = re.compile(
    r"^\s*<think>(?P<reasoning>.*?)</think>\s*<answer>(?P<answer>.*?)</answer>",
    re.IGNORECASE | re.DOTALL,
)
_THINK = re.compile(r"<think>(?P<reasoning>.*?)(?:</think>|$)", re.IGNORECASE | re.DOTALL)
_ANY_TAG = re.compile(r"</?(?:think|answer)>", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedResponse:
    """What a response says: its reasoning, its action (None if invalid), validity."""

    reasoning: str
    action: str | None
    valid: bool


def _clean(text: str) -> str:
    return " ".join(text.split())


def parse_response(text: str) -> ParsedResponse:
    """Split a response into reasoning and action.

    Returns ``valid=False`` and ``action=None`` when the think or answer span is
    missing, out of order, nested or repeated before ``</answer>``, or the answer is
    empty. ``reasoning`` is the think span's text with whitespace collapsed (empty when
    there is none).
    """
    match = _RESPONSE.match(text)
    if match is None:
        think = _THINK.search(text)
        reasoning = _clean(_ANY_TAG.sub(" ", think.group("reasoning"))) if think else ""
        return ParsedResponse(reasoning=reasoning, action=None, valid=False)
    reasoning, answer = match.group("reasoning"), match.group("answer")
    if _ANY_TAG.search(reasoning) or _ANY_TAG.search(answer) or not answer.strip():
        return ParsedResponse(
            reasoning=_clean(_ANY_TAG.sub(" ", reasoning)), action=None, valid=False
        )
    return ParsedResponse(reasoning=_clean(reasoning), action=_clean(answer), valid=True)


def format_response(reasoning: str, action: str) -> str:
    """The response text for a reasoning and an action (what the cold start imitates)."""
    return f"{THINK_OPEN} {reasoning} {THINK_CLOSE} {ANSWER_OPEN} {action} {ANSWER_CLOSE}"

"""Wire format shared by the SDK and the ingestion API (DESIGN.md §3).

One vocabulary everywhere: a **run** holds **rollouts** (trajectories); a rollout is
one episode at a training **step**, made of **turns**. Rollouts at one step that share
a ``state_id`` form a GRPO **group**. Entropies and log-probabilities are in nats,
timestamps are UTC.

These are pydantic v2 models. The API validates request bodies with them, so a body
that breaks the format gets HTTP 422 whose ``errors[].loc`` names the field.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

INT32_MAX = 2**31 - 1
"""Largest step, turn index or count the store holds (a PostgreSQL INTEGER column)."""

# Text is stored as UTF-8 and PostgreSQL's text cannot hold NUL, so text fields refuse
# NUL (U+0000); the pattern also makes pydantic refuse unpaired surrogates (not Unicode
# text). Both are a 422 naming the field instead of a database error.
TEXT_PATTERN = r"^[^\x00]*$"

Identifier = Annotated[
    str,
    Field(
        min_length=1,
        max_length=256,
        pattern=TEXT_PATTERN,
        description="Client-chosen identifier (1-256 chars, no NUL).",
    ),
]
Text = Annotated[str, Field(pattern=TEXT_PATTERN)]
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]


def _storable_text(value: str) -> bool:
    """No NUL and no unpaired surrogate: text PostgreSQL (and UTF-8) can hold."""
    if "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain_json(value: Any) -> bool | None:
    """True: plain JSON values only, numbers finite, text storable; False: a NaN/±Inf
    float or a string with NUL or an unpaired surrogate in it; None: a value that is not
    plain JSON (``json.dumps`` judges it)."""
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, str):
        return _storable_text(value)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        if not all(isinstance(k, str) and _storable_text(k) for k in value):
            return False if all(isinstance(k, str) for k in value) else None
        items = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return None
    verdict: bool | None = True
    for item in items:
        found = _plain_json(item)
        if found is False:
            return False
        if found is None:
            verdict = None
    return verdict


def _strict_json(value: Any, name: str) -> Any:
    """Reject what PostgreSQL's JSON cannot hold inside free-form JSON: NaN/Infinity,
    and text with NUL or unpaired surrogates."""
    if value is None:
        return value
    # The walk costs a fraction of json.dumps, once per rollout on the ingestion path.
    verdict = _plain_json(value)
    if verdict is None:
        try:
            json.dumps(value, allow_nan=False)
            verdict = True
        except ValueError:
            verdict = False
    if not verdict:
        raise ValueError(
            f"{name} must be strict JSON (no NaN or Infinity, no NUL or unpaired surrogates)"
        )
    return value


def _in_range(
    value: float | None, name: str, *, low: float | None = None, high: float | None = None
) -> float | None:
    """Range check that lets NaN/Inf through: a monitor must see non-finite values the
    trainer produced (they raise the ``nonfinite`` alert), not reject them."""
    if value is None or not math.isfinite(value):
        return value
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}")
    return value


class Turn(BaseModel):
    """One turn of a trajectory: what the policy saw, thought and did.

    ``token_entropy`` is the mean per-token entropy of the policy over this turn's
    response tokens (nats/token), ``logprob`` the summed log-probability of the
    response (nats, <= 0), ``num_tokens`` the response length in tokens; all three are
    optional and come from the trainer. ``valid_format`` says whether the response
    parsed into reasoning and action under the trainer's format (null when the format
    does not define it).
    """

    model_config = ConfigDict(extra="forbid")

    index: Count = Field(description="Position of the turn in the trajectory, from 0.")
    observation: Text = Field(default="", description="Text the policy saw before acting.")
    reasoning: Text = Field(default="", description="Text inside the think span (may be empty).")
    action: Text = Field(default="", description="The action text the environment received.")
    reward: float = Field(default=0.0, description="Reward the environment gave for this turn.")
    done: bool = Field(default=False, description="True when the episode ended after this turn.")
    token_entropy: float | None = Field(
        default=None, description="Mean per-token entropy of the response (nats, >= 0)."
    )
    num_tokens: Count | None = Field(default=None, description="Response length (tokens).")
    logprob: float | None = Field(
        default=None, description="Summed log-probability of the response (nats, <= 0)."
    )
    valid_format: bool | None = Field(
        default=None, description="Whether the response parsed as reasoning + action."
    )

    @field_validator("token_entropy")
    @classmethod
    def _check_entropy(cls, value: float | None) -> float | None:
        return _in_range(value, "token_entropy", low=0.0)

    @field_validator("logprob")
    @classmethod
    def _check_logprob(cls, value: float | None) -> float | None:
        return _in_range(value, "logprob", high=0.0)


class Rollout(BaseModel):
    """One trajectory of the policy in an environment at a training step.

    ``rollout_id`` is made by the client and unique within the run: it is the
    idempotency key, so re-sending a rollout stores nothing twice. ``state_id``
    identifies the initial environment state (seed, prompt hash); rollouts with equal
    ``state_id`` at one step form a GRPO group.

    Numbers may be NaN or ±Inf (JSON ``NaN``/``Infinity``): they are stored as sent and
    counted by ``structure.nonfinite``, because a trainer emitting them is exactly what
    a monitor must report.
    """

    model_config = ConfigDict(extra="forbid")

    rollout_id: Identifier
    step: Count = Field(description="Training step (optimizer update index), >= 0.")
    env_id: str = Field(default="default", min_length=1, max_length=256, pattern=TEXT_PATTERN)
    state_id: Identifier
    reward: float = Field(description="Total return of the trajectory.")
    success: bool | None = Field(default=None, description="Task solved; null if undefined.")
    truncated: bool | None = Field(
        default=None, description="The response was cut at the length cap (null: unknown)."
    )
    turns: list[Turn] = Field(min_length=1, description="The trajectory's turns, in order.")
    metadata: dict[str, Any] | None = Field(default=None, description="Free-form JSON.")

    @field_validator("metadata")
    @classmethod
    def _check_metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return _strict_json(value, "metadata")

    @field_validator("turns")
    @classmethod
    def _check_turn_order(cls, turns: list[Turn]) -> list[Turn]:
        indices = [t.index for t in turns]
        if len(set(indices)) != len(indices):
            raise ValueError("turn indices must be unique within a rollout")
        return turns


class CrossScores(BaseModel):
    """The policy's cross-scores for one step: reasoning i scored under input j.

    ``logprob_sum[i][j] = log p_θ(z_i | x_j)`` summed over the tokens of reasoning z_i
    (nats), for M rows (``rollout_ids``, rollouts of this step) and N columns
    (``state_ids``, distinct inputs of this step). ``num_tokens[i]`` is the length of
    z_i in tokens, so ``logprob_sum[i][j] / num_tokens[i]`` is the per-token variant.
    Only the trainer, which holds the model, can compute this; it is what RAGEN-2's
    log-prob mutual-information estimator needs (arXiv 2604.06268, diagnostics).
    """

    model_config = ConfigDict(extra="forbid")

    step: Count
    rollout_ids: list[Identifier] = Field(min_length=1, description="Row ids (M).")
    state_ids: list[Identifier] = Field(min_length=1, description="Column ids (N).")
    logprob_sum: list[list[float]] = Field(
        description="M×N summed log-probs (nats, <= 0); non-finite entries are counted "
        "by structure.nonfinite and their rows left out of the log-prob metrics."
    )
    num_tokens: list[Annotated[int, Field(ge=1, le=INT32_MAX)]] = Field(
        description="(M,) tokens per row."
    )

    @model_validator(mode="after")
    def _check_shape(self) -> CrossScores:
        m, n = len(self.rollout_ids), len(self.state_ids)
        if len(self.logprob_sum) != m or any(len(row) != n for row in self.logprob_sum):
            raise ValueError(f"logprob_sum must be {m}×{n} (rollout_ids × state_ids)")
        if len(self.num_tokens) != m:
            raise ValueError(f"num_tokens must have {m} entries, one per rollout_id")
        if len(set(self.state_ids)) != n:
            raise ValueError("state_ids must be distinct")
        if len(set(self.rollout_ids)) != m:
            raise ValueError("rollout_ids must be distinct (one row per rollout)")
        return self


class RunCreate(BaseModel):
    """Body of ``POST /api/v1/runs``: create a run, or get it if the name exists."""

    model_config = ConfigDict(extra="forbid")

    name: Identifier
    config: dict[str, Any] = Field(default_factory=dict, description="Trainer settings (JSON).")
    tags: list[Annotated[str, Field(max_length=128, pattern=TEXT_PATTERN)]] = Field(
        default_factory=list
    )

    @field_validator("config")
    @classmethod
    def _check_config(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _strict_json(value, "config")


class RunOut(BaseModel):
    """A run as the API returns it, with its ingestion counts."""

    id: int
    project: str
    name: str
    config: dict[str, Any]
    tags: list[str]
    created_at: datetime
    num_rollouts: int = 0
    num_steps: int = 0
    last_step: int | None = None


class RolloutBatch(BaseModel):
    """Body of ``POST /api/v1/runs/{run_id}/rollouts``.

    ``complete_steps`` lists steps the client has finished sending: the worker may
    score them at once instead of waiting for a newer step or the idle timeout.
    """

    model_config = ConfigDict(extra="forbid")

    rollouts: list[Rollout] = Field(default_factory=list)
    complete_steps: list[Count] = Field(default_factory=list)


class IngestResult(BaseModel):
    """What a rollout batch did: how many were new, how many were already stored."""

    accepted: int = Field(description="Rollouts stored by this request.")
    duplicates: int = Field(description="Rollouts already stored (same rollout_id); skipped.")
    duplicate_rollout_ids: list[str] = Field(
        default_factory=list, description="Up to 100 of the skipped rollout ids."
    )
    steps: list[int] = Field(default_factory=list, description="Steps this batch touched.")


class MetricPoint(BaseModel):
    """One metric value of one step. ``value`` is null when the metric is undefined
    for that step (for example responsiveness with a single state)."""

    step: int
    name: str
    value: float | None
    representation: str | None = None


class MetricSeries(BaseModel):
    """A run's metric series, ordered by step."""

    run_id: int
    run: str
    points: list[MetricPoint]


class AlertOut(BaseModel):
    """An alert raised by a detector for a run."""

    id: int
    run_id: int
    rule: str
    severity: str
    state: str
    step_fired: int
    step_resolved: int | None = None
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime

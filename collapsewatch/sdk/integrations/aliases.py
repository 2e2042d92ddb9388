"""Trainer metric names -> collapsewatch names (the alias table of docs/integrations.md).

TRL and verl log their own numbers under their own names (``entropy``,
``actor/pg_clipfrac``). :func:`alias_metrics` renames the ones that mean what one of
our metrics means to our name (``diversity.token_entropy``), keeps the others under a
cleaned form of their own name, and drops what is not a number. The server stores all
of them under the ``trainer.`` prefix, so ``trainer.diversity.token_entropy`` (what the
trainer measured over every token) sits beside ``diversity.token_entropy`` (what the
worker computes from the rollouts) without overwriting it.

Nothing here raises on a missing or odd key: a trainer that logs fewer or other metrics
just yields fewer points.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "SKIPPED",
    "TRL_ALIASES",
    "TRL_PATTERNS",
    "VERL_ALIASES",
    "alias_metrics",
    "clean_name",
]

MAX_NAME_CHARS = 120
"""Longest name we send: the server adds ``trainer.`` and stores at most 128."""

TRL_ALIASES: dict[str, str] = {
    # name in TRL's GRPOTrainer logs -> ours
    "entropy": "diversity.token_entropy",
    "reward": "correctness.reward_mean",
    "reward_std": "correctness.reward_std",
    "frac_reward_zero_std": "correctness.zero_std_fraction",
    "completions/mean_length": "structure.response_tokens_mean",
    "completions/min_length": "structure.response_tokens_min",
    "completions/max_length": "structure.response_tokens_max",
    "completions/clipped_ratio": "structure.truncated_rate",
    "completions/mean_terminated_length": "structure.response_tokens_terminated_mean",
    "completions/min_terminated_length": "structure.response_tokens_terminated_min",
    "completions/max_terminated_length": "structure.response_tokens_terminated_max",
    "clip_ratio/region_mean": "policy.clip_ratio",
    "clip_ratio/low_mean": "policy.clip_ratio_low",
    "clip_ratio/high_mean": "policy.clip_ratio_high",
    "clip_ratio/low_min": "policy.clip_ratio_low_min",
    "clip_ratio/high_max": "policy.clip_ratio_high_max",
    "kl": "policy.kl_ref",
    "loss": "policy.loss",
    "grad_norm": "policy.grad_norm",
    "learning_rate": "policy.learning_rate",
    "num_tokens": "structure.tokens_seen",
    "step_time": "timing.step_seconds",
    "epoch": "progress.epoch",
}

TRL_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # per-reward-function statistics: rewards/<function name>/mean|std
    (re.compile(r"rewards/(.+)/(mean|std)"), r"correctness.reward.\1.\2"),
]

VERL_ALIASES: dict[str, str] = {
    # name in verl's metrics (the file logger's "data") -> ours
    "actor/entropy": "diversity.token_entropy",
    "critic/score/mean": "correctness.reward_mean",
    "critic/score/max": "correctness.reward_max",
    "critic/score/min": "correctness.reward_min",
    "critic/rewards/mean": "correctness.reward_shaped_mean",
    "response_length/mean": "structure.response_tokens_mean",
    "response_length/min": "structure.response_tokens_min",
    "response_length/max": "structure.response_tokens_max",
    "response_length/clip_ratio": "structure.truncated_rate",
    "num_turns/mean": "structure.num_turns_mean",
    "actor/pg_clipfrac": "policy.clip_ratio",
    "actor/pg_clipfrac_lower": "policy.clip_ratio_low",
    "actor/ppo_kl": "policy.kl_old",
    "actor/kl_loss": "policy.kl_ref",
    "actor/pg_loss": "policy.loss",
    "actor/grad_norm": "policy.grad_norm",
    "actor/lr": "policy.learning_rate",
    "timing_s/step": "timing.step_seconds",
    "training/epoch": "progress.epoch",
}

SKIPPED: dict[str, tuple[str, ...]] = {
    # TRL's end-of-training summary describes the whole run, not a step.
    "trl": (
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "train_loss",
        "total_flos",
    ),
    "verl": (),
}

_TABLES = {"trl": (TRL_ALIASES, TRL_PATTERNS), "verl": (VERL_ALIASES, [])}
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_.\-]+")
_DOTS = re.compile(r"\.{2,}")


def clean_name(name: str) -> str:
    """A name the API takes: ``/`` becomes ``.``, other characters outside letters,
    digits, ``_ - .`` become ``_``, at most 120 characters; "" when nothing is left."""
    text = _BAD_CHARS.sub("_", str(name).replace("/", "."))
    text = _DOTS.sub(".", text).strip(".-")
    return text[:MAX_NAME_CHARS].rstrip(".")


_NOT_A_NUMBER = object()


def _number(value: Any) -> Any:
    """The value as a float (NaN/Inf kept), None for None, else ``_NOT_A_NUMBER``."""
    if value is None:
        return None
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, bool):
        try:  # numpy and torch scalars
            value = value.item()
        except (ValueError, TypeError):
            return _NOT_A_NUMBER
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return _NOT_A_NUMBER


def alias_metrics(
    logs: Mapping[str, Any], source: str, *, passthrough: bool = True
) -> dict[str, float | None]:
    """Rename one step's trainer logs to collapsewatch names (without the ``trainer.``
    prefix, which the server adds).

    Args:
        logs: name -> value as the trainer logged it (``{"entropy": 2.1, ...}``).
        source: ``"trl"`` or ``"verl"``: which alias table to use.
        passthrough: keep names that have no alias, cleaned (``timing_s/gen`` ->
            ``timing_s.gen``); False keeps only aliased names.

    Returns:
        name -> float or None. Values that are not numbers (strings, lists, bools) are
        left out; NaN and ±Inf are kept (the server reports them). TRL's ``eval_*``
        keys and end-of-training summary are left out: they do not describe a step.
    """
    if source not in _TABLES:
        raise ValueError(f"unknown source {source!r}; expected 'trl' or 'verl'")
    aliases, patterns = _TABLES[source]
    skipped = SKIPPED[source]
    out: dict[str, float | None] = {}
    for key, raw in logs.items():
        key = str(key)
        if key in skipped or (source == "trl" and key.startswith("eval_")):
            continue
        value = _number(raw)
        if value is _NOT_A_NUMBER:
            continue
        name = aliases.get(key)
        if name is None:
            for pattern, template in patterns:
                if pattern.fullmatch(key):
                    name = clean_name(pattern.sub(template, key))
                    break
        if name is None:
            if not passthrough:
                continue
            name = clean_name(key)
        if name:
            out[name] = value
    return out

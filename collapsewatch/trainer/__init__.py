"""The reference GRPO trainer: text environments, a tiny (or real) causal-LM policy,
a cold start on expert trajectories, and GRPO that can be healthy or collapse on
purpose, streaming every step to collapsewatch.

Quickstart::

    from collapsewatch.trainer import GRPOTrainer, preset, CSVCallback
    trainer = GRPOTrainer(preset("template-collapse", env="frozenlake"),
                          callbacks=[CSVCallback("run.csv")])
    trainer.train(num_steps=60)

Importing this package is light; torch and transformers load on first use of a name
that needs them (GRPOTrainer, Policy, …). See docs/trainer.md.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GRPOConfig": "grpo_config",
    "PRESETS": "grpo_config",
    "preset": "grpo_config",
    "GRPOTrainer": "grpo",
    "group_advantages": "grpo",
    "snr_keep": "grpo",
    "Policy": "policy",
    "tiny_policy": "policy",
    "load_policy": "policy",
    "TrainingHook": "callbacks",
    "CollapsewatchHook": "callbacks",
    "CSVCallback": "callbacks",
    "make_env": "envs",
    "parse_response": "format",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

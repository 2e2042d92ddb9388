"""A tiny trainer, cold-started once per module (a second or two on one core)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from collapsewatch.trainer.grpo import GRPOTrainer
from collapsewatch.trainer.grpo_config import preset

SMALL: dict[str, Any] = {
    "sft_steps": 40,
    "sft_episodes": 64,
    "sft_batch_size": 32,
    "num_states": 4,
    "group_size": 4,
}


@pytest.fixture(scope="module")
def make_trainer() -> Callable[..., GRPOTrainer]:
    def build(name: str = "healthy", callbacks: Any = (), **overrides: Any) -> GRPOTrainer:
        trainer = GRPOTrainer(preset(name, **{**SMALL, **overrides}), callbacks=callbacks)
        trainer.cold_start()
        return trainer

    return build

"""The alias table: TRL and verl metric names -> ours; a missing or odd key never fails."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from collapsewatch.sdk.integrations.aliases import (
    TRL_ALIASES,
    VERL_ALIASES,
    alias_metrics,
    clean_name,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"

# One real TRL 1.16 GRPOTrainer log (a tiny CPU run) and a verl file-logger "data".
TRL_LOG = {
    "loss": -0.2025,
    "grad_norm": 1.844,
    "learning_rate": 1e-06,
    "num_tokens": 51.0,
    "completions/mean_length": 4.375,
    "completions/min_length": 1.0,
    "completions/max_length": 6.0,
    "completions/clipped_ratio": 0.625,
    "completions/mean_terminated_length": 1.667,
    "rewards/length_reward/mean": 3.625,
    "rewards/length_reward/std": 2.56,
    "reward": 3.625,
    "reward_std": 2.56,
    "frac_reward_zero_std": 0.0,
    "entropy": 2.88,
    "clip_ratio/low_mean": 0.0,
    "clip_ratio/region_mean": 0.0,
    "step_time": 0.83,
    "epoch": 0.5,
}


def test_trl_log_maps_onto_our_names() -> None:
    out = alias_metrics(TRL_LOG, "trl")
    assert out["diversity.token_entropy"] == 2.88
    assert out["correctness.reward_mean"] == 3.625
    assert out["correctness.reward_std"] == 2.56
    assert out["correctness.zero_std_fraction"] == 0.0
    assert out["structure.truncated_rate"] == 0.625
    assert out["structure.response_tokens_mean"] == 4.375
    assert out["policy.clip_ratio"] == 0.0
    assert out["policy.clip_ratio_low"] == 0.0
    assert out["correctness.reward.length_reward.mean"] == 3.625
    assert out["correctness.reward.length_reward.std"] == 2.56
    assert len(out) == len(TRL_LOG)


def test_missing_and_odd_keys_never_fail() -> None:
    assert alias_metrics({}, "trl") == {}
    out = alias_metrics(
        {
            "entropy": None,  # TRL logs None when every value of a window was NaN
            "reward": float("nan"),
            "kl": np.float32(0.5),
            "note": "text",
            "flags": [1, 2],
            "done": True,
            "eval_reward": 1.0,
            "train_runtime": 7.5,
            "weird key (%)": 3,
        },
        "trl",
    )
    assert out["diversity.token_entropy"] is None
    assert math.isnan(out["correctness.reward_mean"])
    assert out["policy.kl_ref"] == 0.5
    assert out["weird_key_"] == 3.0
    assert set(out) == {
        "diversity.token_entropy",
        "correctness.reward_mean",
        "policy.kl_ref",
        "weird_key_",
    }


def test_verl_metrics_map_and_unknown_names_pass_through_cleaned() -> None:
    data = {
        "actor/entropy": 0.61,
        "actor/pg_clipfrac": 0.01,
        "critic/score/mean": 0.675,
        "response_length/clip_ratio": 0.05,
        "timing_s/gen": 12.5,
        "val-core/openai/gsm8k/reward/mean@1": 0.7,
    }
    out = alias_metrics(data, "verl")
    assert out == {
        "diversity.token_entropy": 0.61,
        "policy.clip_ratio": 0.01,
        "correctness.reward_mean": 0.675,
        "structure.truncated_rate": 0.05,
        "timing_s.gen": 12.5,
        "val-core.openai.gsm8k.reward.mean_1": 0.7,
    }
    assert alias_metrics(data, "verl", passthrough=False) == {
        k: v for k, v in out.items() if k in VERL_ALIASES.values()
    }
    with pytest.raises(ValueError, match="unknown source"):
        alias_metrics(data, "openrlhf")


def test_clean_name() -> None:
    assert clean_name("a//b/c") == "a.b.c"
    assert clean_name("/lead/") == "lead"
    assert clean_name("x" * 300) == "x" * 120
    assert clean_name("é") == "_"
    assert re.fullmatch(r"[A-Za-z0-9_.\-]+", clean_name("mean@1 (tok/s)"))


def test_every_alias_is_in_the_integrations_doc() -> None:
    doc = DOC.read_text(encoding="utf-8").split("## Metric-name aliases", 1)[1]
    trl_doc, verl_doc = doc.split("### verl", 1)
    for table, text in ((TRL_ALIASES, trl_doc), (VERL_ALIASES, verl_doc)):
        for theirs, ours in table.items():
            row = next((line for line in text.splitlines() if f"| `{theirs}` |" in line), None)
            assert row is not None, theirs
            assert f"`trainer.{ours}`" in row, (theirs, row)

"""A real TRL GRPOTrainer run on CPU with the callback attached, against a real server.

The policy is a 2-layer GPT-2 built from a config over a 20-word vocabulary with a
word-level tokenizer made here (nothing is downloaded). 4 prompts, 2 per step, 4
completions each. The reward is the completion's word count until step 2; from step 2
on the reward function returns None (TRL makes that NaN), the server's ``nonfinite``
detector fires at step 2, and the kill switch stops training a few steps later.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integrations.conftest import run_id_of, series
from tests.shared_data import in_ci

try:
    import trl  # noqa: F401
except ImportError:  # pragma: no cover - CI installs the [trl] extra
    if in_ci():
        raise
    pytest.skip("TRL is not installed (pip install -e '.[trl]')", allow_module_level=True)

WORDS = ["<pad>", "<eos>", "<unk>", "red", "green", "blue", "left", "right", "up", "down"]
WORDS += ["go", "stop", "think", "answer", "a", "b", "c", "d"]
PROMPTS = ["red left", "blue up", "green down", "red right"]
NUM_GENERATIONS = 4
BATCH = 8  # completions per step: 2 prompts x 4
MAX_STEPS = 20
NAN_FROM_STEP = 2


def _tiny_policy() -> tuple[Any, Any]:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(WORDS)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    config = GPT2Config(
        vocab_size=len(WORDS),
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=1,
        eos_token_id=1,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    return GPT2LMHeadModel(config), fast


def word_count(completions: list[str], trainer_state: Any, **kwargs: Any) -> list[float | None]:
    if trainer_state.global_step >= NAN_FROM_STEP:
        return [None] * len(completions)
    return [float(len(c.split())) for c in completions]


def _wait_scored(http: httpx.Client, run_id: int, steps: int, timeout: float = 30) -> list:
    deadline = time.monotonic() + timeout
    while True:
        status = http.get(f"/api/v1/runs/{run_id}/steps").json()
        if len(status) >= steps and all(s["scored"] for s in status):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


@pytest.mark.slow
def test_grpo_run_is_monitored_and_the_kill_switch_stops_it(
    server: Any, http: httpx.Client, tmp_path: Path
) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from collapsewatch.sdk.integrations.trl import CollapsewatchCallback

    model, tokenizer = _tiny_policy()
    cw = CollapsewatchCallback(
        run="trl-grpo-cpu",
        url=server.url,
        api_key=server.api_key,
        stop_on=["nonfinite"],
        poll_every=1,
        client_options={"flush_interval": 0.05},
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        max_steps=MAX_STEPS,
        per_device_train_batch_size=BATCH,
        num_generations=NUM_GENERATIONS,
        max_completion_length=6,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=cw.wrap_rewards([word_count]),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tokenizer,
        callbacks=[cw],
    )
    trainer.train()

    # The kill switch: the nonfinite alert of step 2 stopped the run early.
    assert cw.stopped_by is not None
    assert (cw.stopped_by["rule"], cw.stopped_by["step_fired"]) == ("nonfinite", NAN_FROM_STEP)
    last = trainer.state.global_step
    assert NAN_FROM_STEP < last < MAX_STEPS

    # Rollouts: steps 0 .. last-1, one generation batch each, in groups of num_generations.
    run_id = run_id_of(http, "trl-grpo-cpu")
    status = _wait_scored(http, run_id, last)
    assert [(s["step"], s["num_rollouts"], s["complete"]) for s in status] == [
        (step, BATCH, True) for step in range(last)
    ]
    rows = series(http, run_id)
    for step in range(last):
        m = rows[step]
        assert m["structure.distinct_states"] == BATCH // NUM_GENERATIONS, step
        assert m["structure.group_size_min"] == m["structure.group_size_max"] == NUM_GENERATIONS
        assert (m["structure.nonfinite"] > 0) == (step >= NAN_FROM_STEP)

    # TRL's own metrics arrive as trainer.* at the step of the rollouts they describe.
    logged = {entry["step"] - 1: entry for entry in trainer.state.log_history if "entropy" in entry}
    for step in (0, 1):
        served = rows[step]
        assert served["trainer.diversity.token_entropy"] == pytest.approx(logged[step]["entropy"])
        assert served["trainer.correctness.reward_mean"] == pytest.approx(logged[step]["reward"])
        assert served["trainer.correctness.reward_mean"] == pytest.approx(
            served["correctness.reward_mean"]
        )  # TRL's mean reward of the step = ours from the rollouts it sent
        assert served["trainer.structure.truncated_rate"] == pytest.approx(
            logged[step]["completions/clipped_ratio"]
        )
    assert rows[NAN_FROM_STEP]["trainer.correctness.reward_mean"] is None  # TRL logs None

    # The rollouts themselves: the prompt is the observation, the group its state.
    from collapsewatch.store.engine import make_engine, make_sessionmaker, session_scope
    from collapsewatch.store.queries import load_step_rollouts

    engine = make_engine(server.settings.resolved_database_url, pool_size=1)
    with session_scope(make_sessionmaker(engine)) as session:
        rollouts = load_step_rollouts(session=session, run_id=run_id, step=0)
    engine.dispose()
    groups: dict[str, set[str]] = {}
    for r in rollouts:
        groups.setdefault(r.state_id, set()).add(r.turns[0].observation)
        assert r.reward == float(len(r.turns[0].action.split()))
    assert len(groups) == 2 and all(len(obs) == 1 for obs in groups.values())
    assert {obs for group in groups.values() for obs in group} <= set(PROMPTS)

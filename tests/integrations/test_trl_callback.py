"""The TRL callback without a trainer: what the wrapped reward functions record, how it
becomes rollouts, and the kill switch against a real server (an alert row inserted
through the store plays the detector). The real GRPOTrainer run is test_trl_grpo.py."""

from __future__ import annotations

import asyncio
import json
import math
import time
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from collapsewatch.importers import state_hash
from collapsewatch.sdk.integrations.trl import CollapsewatchCallback
from collapsewatch.server import free_port
from collapsewatch.store.engine import make_engine, make_sessionmaker, session_scope
from collapsewatch.store.models import AlertRow
from collapsewatch.store.queries import load_step_rollouts
from tests.integrations.conftest import run_id_of

FAST = {"flush_interval": 0.05, "retry_backoff": 0.01, "retry_backoff_max": 0.05}


def _args(**overrides: Any) -> SimpleNamespace:
    values = {
        "output_dir": "/tmp/out/grpo-run",
        "run_name": None,
        "process_index": 0,
        "reward_weights": None,
        "max_completion_length": 4,
    }
    values.update(overrides)
    return SimpleNamespace(**values)


def _state(step: int) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, is_world_process_zero=True)


class _Model:
    training = True


def _generate(cb: CollapsewatchCallback, funcs: list, step: int, n_prompts: int = 2) -> None:
    """Call the wrapped reward functions as GRPOTrainer does for one generation batch."""
    prompts = [f"state {p}" for p in range(n_prompts) for _ in range(2)]
    completions = [f"<think>go {i}</think>move {i % 3}" for i in range(len(prompts))]
    ids = [[5] * (i % 2 + 3) + ([1] if i % 2 else []) for i in range(len(prompts))]
    kwargs = {
        "prompts": prompts,
        "completions": completions,
        "completion_ids": ids,
        "trainer_state": _state(step),
        "task": [f"task-{p}" for p in range(n_prompts) for _ in range(2)],
    }
    for func in funcs:
        func(**kwargs)


def accuracy(completions: list[str], **kw: Any) -> list[float | None]:
    return [1.0 if c.endswith("0") else 0.0 for c in completions]


def fmt(completions: list[str], **kw: Any) -> list[float | None]:
    return [None if i == 1 else 0.5 for i in range(len(completions))]


def _store_rollouts(server: Any, run_id: int, step: int) -> list:
    engine = make_engine(server.settings.resolved_database_url, pool_size=1)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            return load_step_rollouts(session=session, run_id=run_id, step=step)
    finally:
        engine.dispose()


def test_wrapped_rewards_become_rollouts(server: Any, http: httpx.Client) -> None:
    cb = CollapsewatchCallback(
        url=server.url,
        api_key=server.api_key,
        success_threshold=1.0,
        client_options=FAST,
    )
    funcs = cb.wrap_rewards([accuracy, fmt])
    assert [f.__name__ for f in funcs] == ["accuracy", "fmt"]
    assert funcs[0](completions=["a0"], prompts=["p"]) == [1.0]  # unchanged return value
    cb._pending.clear()  # that call had no trainer; start clean
    tokenizer = SimpleNamespace(eos_token_id=1)
    cb.on_train_begin(
        _args(reward_weights=[1.0, 2.0]),
        _state(0),
        None,
        model=_Model(),
        processing_class=tokenizer,
    )
    _generate(cb, funcs, step=0)
    _generate(cb, funcs, step=1)
    cb.on_step_end(_args(), _state(1), SimpleNamespace(should_training_stop=False))
    assert sorted(g.step for g in cb._pending.values()) == [1]  # step 1 not finished yet
    cb.on_train_end(_args(), _state(2), None)
    stats = cb.client.stats()
    assert (stats.sent, stats.dropped_invalid) == (8, 0)

    run_id = run_id_of(http, "grpo-run")  # the output folder's name
    rollouts = sorted(_store_rollouts(server, run_id, 0), key=lambda r: r.rollout_id)
    assert [r.rollout_id for r in rollouts] == ["0-0-0-0", "0-0-0-1", "0-0-0-2", "0-0-0-3"]
    assert [r.state_id for r in rollouts] == [state_hash("state 0")] * 2 + [
        state_hash("state 1")
    ] * 2
    # reward = accuracy + 2 * fmt, skipping fmt's None (TRL's nansum)
    assert [r.reward for r in rollouts] == [2.0, 0.0, 1.0, 2.0]
    assert [r.success for r in rollouts] == [True, False, True, True]
    turn = rollouts[0].turns[0]
    assert (turn.observation, turn.reasoning, turn.action) == ("state 0", "go 0", "move 0")
    assert [r.turns[0].num_tokens for r in rollouts] == [3, 5, 3, 5]
    # max_completion_length 4: a cut is 4+ tokens without the eos token (id 1)
    assert [cb._truncated(ids) for ids in ([5] * 3, [5] * 4, [5, 5, 5, 1])] == [False, True, False]
    assert [r.metadata["rewards"] for r in rollouts][:2] == [
        {"accuracy": 1.0, "fmt": 0.5},
        {"accuracy": 0.0, "fmt": None},
    ]
    steps = http.get(f"/api/v1/runs/{run_id}/steps").json()
    assert [(s["step"], s["num_rollouts"], s["complete"]) for s in steps] == [
        (0, 4, True),
        (1, 4, True),
    ]
    config = http.get(f"/api/v1/runs/{run_id}").json()["config"]
    assert config["output_dir"] == "/tmp/out/grpo-run"  # the trainer's arguments


def test_state_id_column_eval_batches_and_conversational_prompts() -> None:
    cb = CollapsewatchCallback(run="r", state_id_column="task", send_metrics=False)
    cb.client = SimpleNamespace(run_id=None)  # nothing is sent in this test
    (func,) = cb.wrap_rewards([accuracy])
    model = _Model()
    cb._model = model
    _generate(cb, [func], step=0)
    (gen,) = cb._pending.values()
    assert gen.states == ["task-0", "task-0", "task-1", "task-1"]
    model.training = False
    _generate(cb, [func], step=0)
    assert len(cb._pending) == 1  # evaluation batches are not rollouts

    cb._weights = {"accuracy": 1.0}
    prompt = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    completion = [
        {
            "role": "assistant",
            "content": "<think>t</think>",
            "tool_calls": [
                {"type": "function", "function": {"name": "move", "arguments": '{"d": 1}'}}
            ],
        }
    ]
    gen.prompts, gen.completions = [prompt], [completion]
    gen.completion_ids, gen.states, gen.rewards = None, None, {"accuracy": [0.5]}
    (rollout,) = cb._rollouts(gen, 0)
    assert rollout["state_id"] == state_hash(
        json.dumps([["system", "sys"], ["user", "go"]], separators=(",", ":"))
    )
    (turn,) = rollout["turns"]
    assert (turn["observation"], turn["reasoning"]) == ("go", "t")
    assert json.loads(turn["action"]) == {"name": "move", "arguments": {"d": 1}}
    assert turn["reward"] == 0.5


def test_async_reward_functions_are_wrapped() -> None:
    cb = CollapsewatchCallback(run="r", send_metrics=False)

    async def judge(completions: list[str], **kw: Any) -> list[float]:
        return [0.25] * len(completions)

    (wrapped,) = cb.wrap_rewards([judge])
    out = asyncio.run(wrapped(prompts=["p"], completions=["c"], trainer_state=_state(3)))
    assert out == [0.25]
    (gen,) = cb._pending.values()
    assert (gen.step, gen.rewards) == (3, {"judge": [0.25]})


def test_a_reward_function_that_raises_still_raises_and_nan_rewards_are_kept() -> None:
    cb = CollapsewatchCallback(run="r", send_metrics=False)

    def broken(**kw: Any) -> list[float]:
        raise RuntimeError("boom")

    def none(completions: list[str], **kw: Any) -> list[None]:
        return [None] * len(completions)

    wrapped_broken, wrapped_none = cb.wrap_rewards([broken, none])
    with pytest.raises(RuntimeError, match="boom"):
        wrapped_broken(prompts=["p"], completions=["c"])
    wrapped_none(prompts=["p"], completions=["c"], trainer_state=_state(0))
    cb._weights = {"broken": 1.0, "none": 1.0}
    (gen,) = cb._pending.values()
    (rollout,) = cb._rollouts(gen, 0)
    assert math.isnan(rollout["reward"]) and "success" not in rollout


def _insert_alert(server: Any, run_id: int, rule: str, state: str = "firing") -> None:
    engine = make_engine(server.settings.resolved_database_url, pool_size=1)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            session.add(
                AlertRow(
                    run_id=run_id,
                    rule=rule,
                    severity="critical",
                    state=state,
                    step_fired=0,
                    message=f"test alert {rule}",
                    evidence={},
                )
            )
    finally:
        engine.dispose()


def test_kill_switch_stops_on_a_chosen_firing_alert(server: Any, http: httpx.Client) -> None:
    cb = CollapsewatchCallback(
        run="kill-switch",
        url=server.url,
        api_key=server.api_key,
        stop_on=["template_collapse", "no_signal"],
        poll_every=2,
        client_options=FAST,
    )
    funcs = cb.wrap_rewards([accuracy])
    cb.on_train_begin(_args(), _state(0), None, model=_Model())
    _generate(cb, funcs, step=0)
    control = SimpleNamespace(should_training_stop=False)
    cb.on_step_end(_args(), _state(1), control)
    assert cb.client.flush(10)
    run_id = run_id_of(http, "kill-switch")
    assert cb.client.run_id == run_id

    _insert_alert(server, run_id, "entropy_collapse")  # not a chosen rule
    _insert_alert(server, run_id, "no_signal", state="resolved")  # not firing any more
    cb.on_step_end(_args(), _state(2), control)
    assert control.should_training_stop is False
    assert cb.watcher is not None and cb.watcher.polls == 1

    _insert_alert(server, run_id, "template_collapse")
    cb.on_step_end(_args(), _state(3), control)  # not a polling step
    assert control.should_training_stop is False and cb.watcher.polls == 1
    cb.on_step_end(_args(), _state(4), control)
    assert control.should_training_stop is True
    assert cb.stopped_by is not None and cb.stopped_by["rule"] == "template_collapse"
    cb.on_train_end(_args(), _state(4), None)


def test_kill_switch_never_raises_when_the_server_is_away() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    cb = CollapsewatchCallback(
        run="away",
        url=url,
        api_key="k",
        stop_on=["*"],
        poll_every=1,
        poll_timeout=0.5,
        send_metrics=False,
        client_options={**FAST, "max_retries": 0},
    )
    cb.on_train_begin(_args(), _state(0), None)
    cb.client._run_id = 1  # as if the run had been created before the server went away
    control = SimpleNamespace(should_training_stop=False)
    t0 = time.monotonic()
    for step in range(1, 6):
        cb.on_step_end(_args(), _state(step), control)
    assert time.monotonic() - t0 < 3
    assert control.should_training_stop is False
    assert cb.watcher is not None and cb.watcher.polls == 1  # then paused for 30 s
    cb.client.close(0.5)

"""TRL ``GRPOTrainer`` integration: rollouts, trainer metrics and a kill switch.

A ``TrainerCallback`` never sees rollout text: ``GRPOTrainer`` hands prompts and
completions only to its reward functions (once per generation batch, with the
``trainer_state`` and the dataset's other columns as keyword arguments). So the
callback wraps the reward functions: each wrapped function returns exactly what the
original returns, and records the prompts, completions and its rewards on the side.
At the end of each optimizer step the callback turns what was recorded into rollouts
and logs them through the SDK's :class:`~collapsewatch.Client`::

    from collapsewatch.sdk.integrations.trl import CollapsewatchCallback

    cw = CollapsewatchCallback(run="grpo-gsm8k-1", stop_on=["template_collapse"])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=cw.wrap_rewards([accuracy_reward, format_reward]),
        args=GRPOConfig(..., num_generations=8),
        train_dataset=dataset,
        callbacks=[cw],
    )
    trainer.train()

Mapping (one rollout per completion):

- ``step``: ``state.global_step`` when the completions were generated, i.e. the number
  of optimizer updates behind the policy that wrote them (0 for the first batch).
- ``state_id``: the dataset column ``state_id_column`` when given, else a hash of the
  prompt. ``GRPOTrainer`` samples ``num_generations`` completions of each prompt, so
  the rollouts of one prompt at one step form one group of that size.
- ``reward``: the weighted sum of the wrapped functions' rewards, with
  ``GRPOConfig.reward_weights`` (1 each by default), NaN-skipping like TRL's own
  ``reward`` metric; NaN when every function returned None. The per-function rewards
  are in ``metadata["rewards"]``.
- ``success``: ``reward >= success_threshold`` when a threshold is given, else null.
- ``truncated``: the completion is ``max_completion_length`` tokens long without an
  end-of-sequence token (TRL's ``completions/clipped_ratio``).
- ``turns``: for text prompts, one turn: ``observation`` the prompt, ``reasoning``
  and ``action`` split from the completion as the ``chat`` importer splits an assistant
  message (``<think>`` spans; tool calls; else the completion is both), ``num_tokens``
  its length. For conversational prompts, prompt + completion messages are mapped as
  the ``chat`` importer maps a trajectory (one turn per assistant message).

Trainer metrics: each ``on_log`` is renamed with :data:`~.aliases.TRL_ALIASES` and sent
to ``POST /api/v1/runs/{id}/metrics`` (stored as ``trainer.*``) at step
``global_step - 1``: TRL logs after the optimizer step, and what it logs (reward,
entropy, clip ratios) describes the completions generated at the step before, so the
two line up with the rollouts' step.

Kill switch: every ``poll_every`` steps the callback reads the run's alerts; when one
whose rule is in ``stop_on`` is firing, it sets ``control.should_training_stop``. The
check never raises; a server that cannot be reached costs at most ``poll_timeout``
seconds, then the check pauses for 30 s.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from collapsewatch.importers import state_hash
from collapsewatch.importers.chat import initial_state, split_assistant, turns_from_messages
from collapsewatch.schema import Turn
from collapsewatch.sdk._client import Client
from collapsewatch.sdk._warn import RateLimitedWarnings, logger
from collapsewatch.sdk.integrations import _connect
from collapsewatch.sdk.integrations._alerts import AlertWatcher
from collapsewatch.sdk.integrations._metrics import MetricsSender
from collapsewatch.sdk.integrations.aliases import alias_metrics

__all__ = ["CollapsewatchCallback"]

ENV_ID = "trl"


@dataclass
class _Generation:
    """What the wrapped reward functions saw of one generation batch."""

    step: int
    prompts: list[Any]
    completions: list[Any]
    completion_ids: list[Any] | None
    states: list[str] | None
    rewards: dict[str, list[Any]] = field(default_factory=dict)


class CollapsewatchCallback(TrainerCallback):
    """Sends a ``GRPOTrainer`` run to collapsewatch; see the module docstring.

    Args:
        run: run name; default ``GRPOConfig.run_name``, else the output folder's name.
        client: an SDK ``Client`` to log through (then ``url``, ``api_key``, ``config``,
            ``tags`` and ``client_options`` are ignored, and the callback does not close
            it); default: the callback makes one at ``on_train_begin``.
        url, api_key: the server (default ``COLLAPSEWATCH_URL``/``COLLAPSEWATCH_API_KEY``).
        config: run settings to store; default the ``GRPOConfig`` (as a flat dict).
        tags: run labels.
        stop_on: alert rules that stop training when they fire (``"*"``: any rule);
            empty: no kill switch.
        poll_every: steps between two alert checks.
        poll_timeout: seconds one alert check may take.
        state_id_column: a dataset column that identifies the initial state (e.g. a
            task id); default: a hash of the prompt.
        success_threshold: a rollout succeeds when its reward is at least this; None
            leaves success unknown.
        send_metrics: send TRL's logged metrics (``trainer.*`` series).
        flush_timeout: seconds ``on_train_end`` waits for delivery before closing the
            callback's own client (what is left is spooled by the client).
        client_options: more keyword arguments for the ``Client`` it makes.
    """

    def __init__(
        self,
        run: str | None = None,
        *,
        client: Client | None = None,
        url: str | None = None,
        api_key: str | None = None,
        config: Any = None,
        tags: Iterable[str] | None = None,
        stop_on: Iterable[str] = (),
        poll_every: int = 10,
        poll_timeout: float = 2.0,
        state_id_column: str | None = None,
        success_threshold: float | None = None,
        send_metrics: bool = True,
        flush_timeout: float = 30.0,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self.run = run
        self.client = client
        self._owns_client = client is None
        self._url = url
        self._api_key = api_key
        self._config = config
        self._tags = list(tags or [])
        self.stop_on = tuple(stop_on)
        self.poll_every = max(1, int(poll_every))
        self._poll_timeout = poll_timeout
        self.state_id_column = state_id_column
        self.success_threshold = success_threshold
        self._send_metrics = send_metrics
        self._flush_timeout = flush_timeout
        self._client_options = dict(client_options or {})
        self.metrics: MetricsSender | None = None
        self.watcher: AlertWatcher | None = None
        self.stopped_by: dict[str, Any] | None = None
        """The alert that stopped training, once the kill switch has fired."""
        self._names: list[str] = []
        self._weights: dict[str, float] = {}
        self._pending: dict[tuple[int, int], _Generation] = {}
        self._batches: dict[int, int] = {}
        self._lock = threading.Lock()
        self._model: Any = None
        self._rank = 0
        self._main_process = True
        self._max_len: int | None = None
        self._eos: int | None = None
        self._warnings = RateLimitedWarnings()

    # -- reward functions -------------------------------------------------------------
    def wrap_rewards(self, reward_funcs: Any) -> Any:
        """Wrap every callable of ``reward_funcs`` (a function or a list, as
        ``GRPOTrainer`` takes it); reward models (``nn.Module``) and model names pass
        through unchanged, and their scores are not seen. Wrap the whole list you give
        the trainer, in order, so that ``reward_weights`` line up."""
        if isinstance(reward_funcs, (list, tuple)):
            return [self.wrap_reward(f) for f in reward_funcs]
        return self.wrap_reward(reward_funcs)

    def wrap_reward(self, func: Any) -> Any:
        """One reward function, wrapped (same name, same return value)."""
        if isinstance(func, str) or not callable(func) or _is_module(func):
            logger.warning(
                "collapsewatch: reward %r is not a plain function; its scores are not "
                "included in the rollouts' rewards",
                getattr(func, "__name__", func),
            )
            self._names.append(_name_of(func))
            return func
        name = _name_of(func)
        self._names.append(name)
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
                rewards = await func(*args, **kwargs)
                self._record(name, rewards, kwargs)
                return rewards

            return wrapped_async

        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            rewards = func(*args, **kwargs)
            self._record(name, rewards, kwargs)
            return rewards

        return wrapped

    def _record(self, name: str, rewards: Any, kwargs: dict[str, Any]) -> None:
        """Keep one reward function's view of a generation batch; never raises."""
        try:
            if self._model is not None and not getattr(self._model, "training", True):
                return  # evaluation: not a training step's rollouts
            prompts = kwargs.get("prompts")
            completions = kwargs.get("completions")
            if prompts is None or completions is None:
                return
            state = kwargs.get("trainer_state")
            step = int(getattr(state, "global_step", 0) or 0)
            key = (step, id(completions))
            with self._lock:
                gen = self._pending.get(key)
                if gen is None:
                    column = kwargs.get(self.state_id_column) if self.state_id_column else None
                    gen = _Generation(
                        step=step,
                        prompts=list(prompts),
                        completions=list(completions),
                        completion_ids=_as_list(kwargs.get("completion_ids")),
                        states=[str(v) for v in column] if column is not None else None,
                    )
                    self._pending[key] = gen
                gen.rewards[name] = list(rewards)
        except Exception as exc:
            self._warnings.warn(
                "record",
                "collapsewatch: could not record a reward batch (%s: %s)",
                type(exc).__name__,
                exc,
            )

    # -- trainer events ---------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            self._begin(args, state, kwargs)
        except Exception as exc:  # a monitor must never stop training from starting
            logger.exception("collapsewatch: the TRL callback could not start: %s", exc)

    def _begin(self, args: Any, state: Any, kwargs: dict[str, Any]) -> None:
        self._model = kwargs.get("model")
        self._rank = int(getattr(args, "process_index", 0) or 0)
        self._main_process = bool(getattr(state, "is_world_process_zero", True))
        self._max_len = getattr(args, "max_completion_length", None)
        tokenizer = kwargs.get("processing_class") or kwargs.get("tokenizer")
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's tokenizer
        self._eos = getattr(tokenizer, "eos_token_id", None)
        weights = getattr(args, "reward_weights", None)
        if weights is not None and len(weights) != len(self._names):
            self._warnings.warn(
                "weights",
                "collapsewatch: %d reward_weights for %d wrapped reward functions; "
                "summing the rewards with weight 1",
                len(weights),
                len(self._names),
            )
            weights = None
        weights = weights or [1.0] * len(self._names)
        self._weights = {n: float(w) for n, w in zip(self._names, weights, strict=True)}
        if self.client is None or (self._owns_client and getattr(self.client, "_closed", False)):
            run = self.run or getattr(args, "run_name", None) or Path(args.output_dir).name
            config = self._config
            if config is None:
                sanitized = getattr(args, "to_sanitized_dict", None)
                config = sanitized() if callable(sanitized) else args
            self.client = Client(
                run,
                url=self._url,
                api_key=self._api_key,
                config=config,
                tags=self._tags,
                **self._client_options,
            )
            self._owns_client = True
        connection = _connect.of_client(self.client)
        if self._send_metrics and self._main_process and self.metrics is None:
            self.metrics = MetricsSender(connection)
        if self.stop_on and self.watcher is None:
            self.watcher = AlertWatcher(connection, self.stop_on, timeout=self._poll_timeout)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._log_generations(before=state.global_step)
        if self.watcher is not None and state.global_step % self.poll_every == 0:
            self._check_alerts(control)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if self.metrics is None or not logs:
            return
        try:
            points = alias_metrics(logs, "trl")
            if points:
                self.metrics.log_metrics(max(0, int(state.global_step) - 1), points)
        except Exception as exc:
            self._warnings.warn("on_log", "collapsewatch: could not send TRL's metrics (%s)", exc)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._log_generations(before=None)
        if self.metrics is not None:
            self.metrics.close(timeout=self._flush_timeout)
            self.metrics = None
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
        if self.client is not None and self._owns_client:
            self.client.close(timeout=self._flush_timeout)

    # -- internals --------------------------------------------------------------------
    def _log_generations(self, before: int | None) -> None:
        """Log the recorded generations of steps ``< before`` (all when None) and mark
        those steps complete."""
        if self.client is None:
            return
        with self._lock:
            ready = sorted(
                (k for k, g in self._pending.items() if before is None or g.step < before),
                key=lambda k: k[0],
            )
            generations = [self._pending.pop(k) for k in ready]
        steps: list[int] = []
        for gen in generations:
            try:
                batch = self._batches.get(gen.step, 0)
                self._batches[gen.step] = batch + 1
                self.client.log_rollouts(gen.step, self._rollouts(gen, batch))
                if gen.step not in steps:
                    steps.append(gen.step)
            except Exception as exc:
                self._warnings.warn(
                    "rollouts",
                    "collapsewatch: could not build the rollouts of step %s (%s: %s)",
                    gen.step,
                    type(exc).__name__,
                    exc,
                )
        for step in steps:
            self.client.complete_step(step)
            self._batches.pop(step, None)

    def _rollouts(self, gen: _Generation, batch: int) -> list[dict[str, Any]]:
        names = [n for n in self._names if n in gen.rewards] or list(gen.rewards)
        out = []
        for i, (prompt, completion) in enumerate(zip(gen.prompts, gen.completions, strict=True)):
            per_func = {n: _float(gen.rewards[n][i]) for n in names}
            reward = _weighted(per_func, self._weights)
            ids = gen.completion_ids[i] if gen.completion_ids is not None else None
            turns = _turns(prompt, completion, reward, ids)
            key = gen.states[i] if gen.states is not None else None
            state_id = key or state_hash(_prompt_key(prompt))
            rollout: dict[str, Any] = {
                "rollout_id": f"{gen.step}-{self._rank}-{batch}-{i}",
                "env_id": ENV_ID,
                "state_id": state_id,
                "reward": reward,
                "turns": turns,
                "metadata": {
                    "source": "trl",
                    "rank": self._rank,
                    "rewards": {n: (v if math.isfinite(v) else None) for n, v in per_func.items()},
                },
            }
            if self.success_threshold is not None and math.isfinite(reward):
                rollout["success"] = reward >= self.success_threshold
            truncated = self._truncated(ids)
            if truncated is not None:
                rollout["truncated"] = truncated
            out.append(rollout)
        return out

    def _truncated(self, ids: Any) -> bool | None:
        if ids is None or not self._max_len:
            return None
        ids = list(ids)
        if len(ids) < self._max_len:
            return False
        return self._eos is None or int(ids[-1]) != self._eos

    def _check_alerts(self, control: Any) -> None:
        """Set ``control.should_training_stop`` when a chosen alert fires; never raises.

        With several processes, the main one asks the server and its answer is
        broadcast, so that every process stops at the same step."""
        try:
            alert = None
            if self._main_process and self.watcher is not None and self.client is not None:
                alert = self.watcher.firing(self.client.run_id)
            alert = _broadcast(alert)
            if alert is None:
                return
            self.stopped_by = alert
            control.should_training_stop = True
            logger.warning(
                "collapsewatch: stopping training: alert %r fired at step %s: %s",
                alert.get("rule"),
                alert.get("step_fired"),
                alert.get("message"),
            )
        except Exception as exc:
            self._warnings.warn("kill_switch", "collapsewatch: alert check failed (%s)", exc)


# -- helpers ---------------------------------------------------------------------------
def _is_module(func: Any) -> bool:
    try:
        import torch

        return isinstance(func, torch.nn.Module)
    except ImportError:
        return False


def _name_of(func: Any) -> str:
    if isinstance(func, str):
        return func.split("/")[-1]
    return getattr(func, "__name__", None) or type(func).__name__


def _as_list(value: Any) -> list[Any] | None:
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    return [list(v) if not isinstance(v, (int, float)) else v for v in value]


def _float(value: Any) -> float:
    if value is None:
        return math.nan
    if hasattr(value, "item"):
        value = value.item()
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _weighted(per_func: dict[str, float], weights: dict[str, float]) -> float:
    """Weighted sum skipping NaN (TRL's ``nansum``); NaN when every value is NaN."""
    values = [(v, weights.get(n, 1.0)) for n, v in per_func.items() if not math.isnan(v)]
    if not values:
        return math.nan
    return float(sum(v * w for v, w in values))


def _prompt_key(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        return initial_state(prompt)
    return json.dumps(prompt, sort_keys=True, default=str)


def _turns(prompt: Any, completion: Any, reward: float, ids: Any) -> list[dict[str, Any]]:
    conversational = isinstance(prompt, list) and (not prompt or isinstance(prompt[0], dict))
    if conversational:
        messages = list(prompt) + (list(completion) if isinstance(completion, list) else [])
        turns, _final = turns_from_messages(messages, reward)
        return [t.model_dump(exclude_none=True) for t in turns]
    reasoning, action = split_assistant(completion if isinstance(completion, str) else "")
    turn = Turn(
        index=0,
        observation=prompt if isinstance(prompt, str) else str(prompt),
        reasoning=reasoning,
        action=action,
        reward=reward,
        done=True,
        num_tokens=len(ids) if ids is not None else None,
    )
    return [turn.model_dump(exclude_none=True)]


def _broadcast(alert: dict[str, Any] | None) -> dict[str, Any] | None:
    """The main process's answer on every process (a no-op in a single process)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return alert
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return alert
    box = [alert]
    dist.broadcast_object_list(box, src=0)
    return box[0]

"""The hook any training loop calls once per step (the reference trainer calls it too).

A training loop that owns its own generation code calls, after every optimizer step::

    hook = collapsewatch.CollapsewatchHook(run="grpo-frozenlake-1", config=cfg)
    for step in range(num_steps):
        rollouts, cross_scores, metrics = train_one_step(step)    # your code
        hook.on_step_end(step, rollouts, cross_scores, metrics)
    hook.on_train_end()

``rollouts`` are wire-format rollouts (dicts or :class:`collapsewatch.schema.Rollout`);
``cross_scores`` is the step's :class:`collapsewatch.schema.CrossScores` (the policy's
log p(z_i | x_j), for RAGEN-2's log-prob mutual information) or None; ``metrics`` are
the trainer's own numbers (loss, KL, …), stored as ``trainer.<name>`` series. Every call
returns at once and never raises into the loop: delivery runs on background threads
with the :class:`collapsewatch.Client` guarantees (batching, retries, disk spool).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from collapsewatch.schema import CrossScores, Rollout

log = logging.getLogger("collapsewatch")


@runtime_checkable
class TrainingHook(Protocol):
    """What a training loop calls: ``on_step_end`` after each step, ``on_train_end``
    once at the end. Implementations must be cheap and must not raise."""

    def on_step_end(
        self,
        step: int,
        rollouts: Sequence[Rollout | Mapping[str, Any]],
        cross_scores: CrossScores | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> None: ...

    def on_train_end(self) -> None: ...


class CollapsewatchHook:
    """Streams each step to a collapsewatch server.

    Args:
        client: a :class:`collapsewatch.Client` (or an object with its methods:
            ``log_rollouts``, ``complete_step``, optionally ``log_cross_scores``,
            ``flush``, ``close``); made from ``run`` and ``client_options`` if omitted.
        run: run name, when no client is given.
        send_metrics: store the loop's ``metrics`` as ``trainer.<name>`` series (through
            ``POST /api/v1/runs/{id}/metrics``; no disk spool for these).
        close_client: close the client at ``on_train_end`` (default: only a client this
            hook made).
        **client_options: passed to :class:`collapsewatch.Client` (url, api_key, config,
            tags, …).

    Raises:
        ValueError: neither ``client`` nor ``run`` is given.
    """

    def __init__(
        self,
        client: Any = None,
        *,
        run: str | None = None,
        send_metrics: bool = True,
        close_client: bool | None = None,
        **client_options: Any,
    ) -> None:
        owns = client is None
        if client is None:
            if not run:
                raise ValueError("CollapsewatchHook needs a client or a run name")
            from collapsewatch.sdk._client import Client

            client = Client(run, **client_options)
        self.client = client
        self.close_client = owns if close_client is None else close_client
        self.cross_scores_sent = 0
        self.cross_scores_dropped = 0
        self.metrics_sender: Any = None
        if send_metrics and hasattr(client, "run") and hasattr(client, "url"):
            from collapsewatch.sdk.integrations import _connect
            from collapsewatch.sdk.integrations._metrics import MetricsSender

            self.metrics_sender = MetricsSender(_connect.of_client(client))

    def on_step_end(
        self,
        step: int,
        rollouts: Sequence[Rollout | Mapping[str, Any]],
        cross_scores: CrossScores | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> None:
        """Queue the step's rollouts, cross-scores and metrics, then mark it complete
        so the server scores it at once. Returns at once; never raises."""
        try:
            self.client.log_rollouts(step, list(rollouts))
            if cross_scores is not None:
                log_cross_scores = getattr(self.client, "log_cross_scores", None)
                if callable(log_cross_scores):
                    log_cross_scores(cross_scores)
                    self.cross_scores_sent += 1
                else:
                    self.cross_scores_dropped += 1
            if metrics and self.metrics_sender is not None:
                self.metrics_sender.log_metrics(step, metrics)
            self.client.complete_step(step)
        except Exception:  # the monitor must never stop training
            log.exception("collapsewatch hook failed at step %s; training continues", step)

    def on_train_end(self) -> None:
        """Flush what is queued (and close the client if this hook owns it)."""
        try:
            if self.metrics_sender is not None:
                self.metrics_sender.close()
            flush = getattr(self.client, "flush", None)
            if callable(flush):
                flush()
            if self.close_client:
                close = getattr(self.client, "close", None)
                if callable(close):
                    close()
        except Exception:
            log.exception("collapsewatch hook failed to flush at the end of training")

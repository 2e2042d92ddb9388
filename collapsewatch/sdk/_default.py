"""The process-wide client behind ``collapsewatch.init`` and the module-level helpers."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from collapsewatch.schema import Rollout
from collapsewatch.sdk._client import Client
from collapsewatch.sdk._warn import RateLimitedWarnings

_client: Client | None = None
_lock = threading.Lock()
_warnings = RateLimitedWarnings()


def init(run: str, **kwargs: Any) -> Client:
    """Start the process-wide client for ``run`` (closing an earlier one) and return it.

    Takes the same keyword arguments as ``Client``; never raises for a dead server.
    """
    global _client
    with _lock:
        previous, _client = _client, None
    if previous is not None:
        previous.close()
    client = Client(run, **kwargs)
    with _lock:
        _client = client
    return client


def get_client() -> Client | None:
    """The client that ``init`` started, or None."""
    return _client


def _current(what: str) -> Client | None:
    client = _client
    if client is None:
        _warnings.warn(
            "no_client", "collapsewatch.%s called before collapsewatch.init(); ignored", what
        )
    return client


def log_rollouts(step: int, rollouts: Iterable[Any] | Mapping[str, Any] | Rollout) -> None:
    """``Client.log_rollouts`` on the process-wide client (a warning if there is none)."""
    client = _current("log_rollouts")
    if client is not None:
        client.log_rollouts(step, rollouts)


def complete_step(step: int) -> None:
    """``Client.complete_step`` on the process-wide client."""
    client = _current("complete_step")
    if client is not None:
        client.complete_step(step)


def log_cross_scores(cross_scores: Any) -> None:
    """``Client.log_cross_scores`` on the process-wide client."""
    client = _current("log_cross_scores")
    if client is not None:
        client.log_cross_scores(cross_scores)


def flush(timeout: float | None = None) -> bool:
    """``Client.flush`` on the process-wide client; True if there is none."""
    client = _client
    return True if client is None else client.flush(timeout)


def finish(timeout: float | None = 10.0) -> bool:
    """Close the process-wide client (flush, spool the rest, stop its thread)."""
    global _client
    with _lock:
        client, _client = _client, None
    return True if client is None else client.close(timeout)

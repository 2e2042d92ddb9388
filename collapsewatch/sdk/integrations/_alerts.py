"""The kill switch's eyes: ask the server whether a chosen alert is firing for a run."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import httpx

from collapsewatch.sdk._warn import RateLimitedWarnings
from collapsewatch.sdk.integrations._connect import Connection

__all__ = ["ANY_RULE", "AlertWatcher"]

ANY_RULE = "*"
"""In ``rules``: every rule counts."""


class AlertWatcher:
    """Polls ``GET /api/v1/runs/{run_id}/alerts`` for a firing alert of chosen rules.

    :meth:`firing` never raises: a server that is down, slow or refusing the key gives
    None and a (rate-limited) warning, and polls are then skipped for ``backoff``
    seconds so that a dead server costs the training loop at most one ``timeout`` per
    ``backoff``.
    """

    def __init__(
        self,
        connection: Connection,
        rules: Iterable[str],
        *,
        timeout: float = 2.0,
        backoff: float = 30.0,
    ) -> None:
        self.rules = frozenset(str(r) for r in rules)
        self._connection = connection
        self._timeout = timeout
        self._backoff = backoff
        self._paused_until = 0.0
        self._http: httpx.Client | None = None
        self._warnings = RateLimitedWarnings()
        self.polls = 0
        """Requests made (for tests and overhead checks)."""

    def matches(self, alert: dict[str, Any]) -> bool:
        """A firing alert of one of the chosen rules."""
        return alert.get("state") == "firing" and (
            ANY_RULE in self.rules or alert.get("rule") in self.rules
        )

    def firing(self, run_id: int | None) -> dict[str, Any] | None:
        """The newest firing alert of a chosen rule for ``run_id``, or None (also when
        the run is not created yet, no rule is chosen, or the server cannot be asked)."""
        if not self.rules or run_id is None or time.monotonic() < self._paused_until:
            return None
        try:
            if self._http is None:
                headers = {}
                if self._connection.api_key:
                    headers["Authorization"] = f"Bearer {self._connection.api_key}"
                self._http = httpx.Client(
                    base_url=self._connection.url, headers=headers, timeout=self._timeout
                )
            self.polls += 1
            response = self._http.get(f"/api/v1/runs/{run_id}/alerts")
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
            alerts = response.json()
            if not isinstance(alerts, list):
                raise RuntimeError("the alerts endpoint did not return a list")
        except Exception as exc:  # never raise into the training loop
            self._paused_until = time.monotonic() + self._backoff
            self._warnings.warn(
                "alerts",
                "collapsewatch: cannot read the alerts of run %s from %s (%s: %s); the kill "
                "switch checks again in %.0f s",
                run_id,
                self._connection.url,
                type(exc).__name__,
                exc,
                self._backoff,
                level=logging.WARNING,
            )
            return None
        return next((a for a in alerts if isinstance(a, dict) and self.matches(a)), None)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

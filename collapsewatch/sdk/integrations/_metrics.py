"""Trainer-reported metrics to the server, in the background.

``MetricsSender.log_metrics(step, {name: value})`` appends to a bounded in-memory queue
and returns; a background thread posts batches to ``POST /api/v1/runs/{id}/metrics``.

Why this is not ``Client.log_metrics``: the Client's sender is a state machine around
rollout batches (spool files, complete_steps ordering, cross-score documents); a new
kind of document would thread through most of it (take, cycle, spill, spool drain,
reply handling, stats), which is not the small, separate addition that module can take
without its owner. What this sender keeps of the Client's guarantees, and what not:

- kept: never raises and never blocks the training thread (one lock and a deque
  append); batches by count (``batch_size``) or age (``flush_interval``); retries
  429/5xx/network errors with exponential backoff and jitter through the SDK's own
  ``Transport`` (honouring ``Retry-After``); a 422 drops only the points it names; a
  404 for the run creates the run again; an exit hook flushes; every point lost is
  counted in :meth:`stats` and said in a rate-limited warning.
- not kept: **no disk spool.** While the server is away, points wait in memory, up to
  ``max_points`` (the oldest are dropped beyond that, counted in
  ``dropped_overflow``); points still in memory when the sender closes are lost
  (``dropped_unsent``). Metric points are small, and the server replaces a (step,
  name) point on resend, so a caller that can re-read its source (the verl follower
  re-reads the metrics file from its last delivered offset) loses nothing.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import httpx

from collapsewatch.sdk._encode import jsonable_config
from collapsewatch.sdk._transport import Interrupted, Reply, RetryableError, Transport
from collapsewatch.sdk._warn import RateLimitedWarnings, logger
from collapsewatch.sdk.integrations._connect import Connection
from collapsewatch.sdk.integrations.aliases import clean_name

__all__ = ["MetricsSender", "MetricsStats"]

EXIT_FLUSH_TIMEOUT = 5.0


@dataclasses.dataclass(frozen=True)
class MetricsStats:
    """Counts of metric points since the sender started.

    Once :meth:`MetricsSender.close` has returned: ``logged == sent + dropped_invalid +
    dropped_rejected + dropped_overflow + dropped_unsent``.
    """

    logged: int = 0
    """Points handed to ``log_metrics`` (one per name and step)."""
    sent: int = 0
    """Points the server stored."""
    queued: int = 0
    """Points in memory now, waiting or in a request."""
    dropped_invalid: int = 0
    """Points with a bad step or name, or a value that is not a number."""
    dropped_rejected: int = 0
    """Points the server refused with a final 4xx."""
    dropped_overflow: int = 0
    """Oldest points dropped because ``max_points`` were already waiting."""
    dropped_unsent: int = 0
    """Points still in memory when the sender closed (no disk spool)."""
    failed_requests: int = 0
    """Requests whose retries ran out (their points were kept and tried again)."""


class _Refused(Exception):
    """The server answers but will not take points from us now (key, run)."""


_live: set[MetricsSender] = set()
_live_lock = threading.Lock()


def _close_all_at_exit() -> None:
    with _live_lock:
        senders = list(_live)
    for sender in senders:
        try:
            sender.close(timeout=EXIT_FLUSH_TIMEOUT)
        except Exception:  # an exit hook must not raise
            logger.exception("collapsewatch: error while closing a metrics sender at exit")


atexit.register(_close_all_at_exit)


class MetricsSender:
    """Sends one run's trainer metrics to a collapsewatch server (see the module doc).

    Args:
        connection: server, key and run (``_connect.resolve`` or ``_connect.of_client``).
        batch_size: most points in one request.
        flush_interval: seconds a logged point waits at most for its batch to fill.
        max_points: points held in memory; beyond it the oldest are dropped (counted).
        timeout: seconds per HTTP request.
        max_retries: retries of a request after 429/5xx/network errors.
        retry_backoff: first wait between attempts (s), doubling per retry.
        retry_backoff_max: longest wait, and the pause after the key was refused.
        enabled: False makes every method a no-op (non-zero ranks).
    """

    def __init__(
        self,
        connection: Connection,
        *,
        batch_size: int = 1000,
        flush_interval: float = 1.0,
        max_points: int = 100_000,
        timeout: float = 10.0,
        max_retries: int = 5,
        retry_backoff: float = 0.5,
        retry_backoff_max: float = 30.0,
        enabled: bool = True,
    ) -> None:
        self.connection = connection
        self._enabled = bool(enabled)
        self._batch_size = max(1, int(batch_size))
        self._interval = max(0.001, float(flush_interval))
        self._max_points = max(1, int(max_points))
        self._timeout = float(timeout)
        self._max_retries = max(0, int(max_retries))
        self._backoff = max(0.0, float(retry_backoff))
        self._backoff_max = max(self._backoff, float(retry_backoff_max))
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._queue: deque[tuple[int, int, int, str, float | None]] = deque()
        self._seq = 0
        self._inflight = 0
        self._inflight_first = 0
        self._flush_wanted = False
        self._failures = 0
        self._c = {f.name: 0 for f in dataclasses.fields(MetricsStats) if f.name != "queued"}
        self._warnings = RateLimitedWarnings()
        self._wakeup = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._run_id: int | None = None
        self._offline = False
        self._retry_at = 0.0
        self._probe_wait = self._backoff

    # -- training-thread side ---------------------------------------------------------
    @property
    def run_id(self) -> int | None:
        """The server's id of the run, once the sender has created (or found) it."""
        return self._run_id

    def log_metrics(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Queue ``metrics`` (name -> number or None) of ``step``; returns at once and
        never raises. Names are cleaned for the API (``/`` -> ``.``); values that are
        not numbers are dropped and counted."""
        if not self._enabled:
            return
        try:
            items = list(metrics.items())
        except Exception:
            items = []
        now = time.monotonic_ns()
        points: list[tuple[str, float | None]] = []
        invalid = 0
        valid_step = isinstance(step, int) and not isinstance(step, bool) and step >= 0
        for name, value in items:
            number = _as_number(value)
            clean = clean_name(name) if isinstance(name, str) else ""
            if not valid_step or number is _INVALID or not clean:
                invalid += 1
                continue
            points.append((clean, number))
        with self._lock:
            self._c["logged"] += len(items)
            self._c["dropped_invalid"] += invalid
            if self._closed:
                self._c["dropped_unsent"] += len(points)
                points = []
            for name, value in points:
                self._seq += 1
                self._queue.append((self._seq, now, step, name, value))
            overflow = len(self._queue) - self._max_points
            for _ in range(max(0, overflow)):
                self._queue.popleft()
            if overflow > 0:
                self._c["dropped_overflow"] += overflow
            full = len(self._queue) >= self._batch_size
            start = self._thread is None and not self._closed and bool(self._queue)
        if invalid:
            self._warnings.warn(
                "invalid",
                "collapsewatch: dropped %d metric values of step %r that are not numbers "
                "(or a bad step or name)",
                invalid,
                step,
            )
        if overflow > 0:
            self._warnings.warn(
                "overflow",
                "collapsewatch: %d metric points are waiting for %s; dropped the %d oldest",
                self._max_points,
                self.connection.url,
                overflow,
            )
        if start:
            self._start()
        if full:
            self._wakeup.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every point logged before the call is stored or dropped.

        Returns False when ``timeout`` (seconds) ran out first, or when the server could
        not be reached (then the points stay queued and are tried again later).
        """
        if not self._enabled:
            return True
        with self._lock:
            target = self._seq
            failures = self._failures
            self._flush_wanted = True
            thread = self._thread
        if thread is None or not thread.is_alive():
            with self._lock:
                return self._floor() >= target
        self._wakeup.set()
        with self._cv:
            self._cv.wait_for(
                lambda: (
                    self._floor() >= target or self._failures > failures or not thread.is_alive()
                ),
                timeout,
            )
            return self._floor() >= target

    def close(self, timeout: float | None = 10.0) -> bool:
        """Flush for up to ``timeout`` seconds, then stop the thread. Points still in
        memory are lost (no spool) and counted in ``dropped_unsent``. Returns True when
        none were."""
        if not self._enabled:
            return True
        with self._lock:
            if self._closed:
                return not self._queue
        self.flush(timeout)
        with self._lock:
            self._closed = True
        self._stop.set()
        self._wakeup.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(1.0, self._timeout) if timeout is None else max(1.0, timeout))
        with self._lock:
            lost = len(self._queue) + self._inflight
            self._c["dropped_unsent"] += lost
            self._queue.clear()
            self._inflight = 0
        with _live_lock:
            _live.discard(self)
        if lost:
            logger.warning(
                "collapsewatch: %d trainer metric points of run %r were not delivered to %s "
                "before close and are lost (metrics are not spooled to disk)",
                lost,
                self.connection.run,
                self.connection.url,
            )
        self._warnings.report_suppressed()
        return lost == 0

    def stats(self) -> MetricsStats:
        """A snapshot of the counts."""
        if not self._enabled:
            return MetricsStats()
        with self._lock:
            return MetricsStats(queued=len(self._queue) + self._inflight, **self._c)

    # -- sender thread ----------------------------------------------------------------
    def _floor(self) -> int:
        """The highest sequence number up to which every point is stored or dropped
        (call with the lock held)."""
        waiting = [self._queue[0][0]] if self._queue else []
        if self._inflight:
            waiting.append(self._inflight_first)
        return min(waiting) - 1 if waiting else self._seq

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._main,
                name=f"collapsewatch-metrics[{self.connection.run}]",
                daemon=True,
            )
        with _live_lock:
            _live.add(self)
        self._thread.start()

    def _main(self) -> None:
        from collapsewatch import __version__

        transport = Transport(
            self.connection.url,
            self.connection.api_key,
            timeout=self._timeout,
            backoff=self._backoff,
            backoff_max=self._backoff_max,
            user_agent=f"collapsewatch-python/{__version__}",
        )
        try:
            while True:
                self._wakeup.wait(self._wait_time())
                self._wakeup.clear()
                stopping = self._stop.is_set()
                try:
                    self._cycle(transport)
                except Exception:
                    logger.exception("collapsewatch: unexpected error in the metrics sender")
                if stopping:
                    break
        finally:
            transport.close()
            with self._cv:
                self._cv.notify_all()

    def _wait_time(self) -> float:
        with self._lock:
            if not self._queue:
                return self._interval
            oldest = self._queue[0][1]
        due = (oldest / 1e9 + self._interval) - time.monotonic()
        if self._offline:
            due = max(due, self._retry_at - time.monotonic())
        return max(0.001, due)

    def _cycle(self, transport: Transport) -> None:
        with self._lock:
            forced = self._flush_wanted or self._stop.is_set()
            self._flush_wanted = False
        if self._offline and not forced and time.monotonic() < self._retry_at:
            return
        while not self._stop.is_set() or forced:
            with self._lock:
                if not self._queue:
                    break
                aged = time.monotonic_ns() - self._queue[0][1] >= self._interval * 1e9
                if not (forced or aged or len(self._queue) >= self._batch_size):
                    break
                n = min(self._batch_size, len(self._queue))
                batch = [self._queue.popleft() for _ in range(n)]
                self._inflight = n
                self._inflight_first = batch[0][0]
            try:
                delivered = self._send(transport, batch, retried=False)
            finally:
                with self._lock:
                    self._inflight = 0
            with self._cv:
                self._cv.notify_all()
            if not delivered:
                break

    def _send(self, transport: Transport, batch: list[Any], *, retried: bool) -> bool:
        """Post ``batch``; False when it was put back (server unreachable or refusing)."""
        try:
            run_id = self._ensure_run(transport)
            body = json.dumps(
                [{"step": p[2], "name": p[3], "value": p[4]} for p in batch], allow_nan=True
            ).encode()
            attempts = 1 if self._offline else self._max_retries + 1
            reply = transport.post(
                f"/api/v1/runs/{run_id}/metrics", body, attempts=attempts, sleep=self._sleep
            )
        except (Interrupted, _Refused):
            self._put_back(batch, failed=True)
            return False
        except (RetryableError, httpx.TransportError) as exc:
            self._count(failed_requests=1)
            self._go_offline(str(exc) or type(exc).__name__)
            self._put_back(batch, failed=True)
            return False
        if reply.status in (401, 403):
            self._refused(reply, "the server refused the API key")
            self._put_back(batch, failed=True)
            return False
        self._went_online()
        if reply.ok:
            self._done(batch, sent=len(batch))
            return True
        if reply.status == 404 and not retried:
            self._run_id = None  # the server lost the run (database reset?): create it again
            return self._send(transport, batch, retried=True)
        if reply.status == 413 and len(batch) > 1:
            half = len(batch) // 2
            return self._send(transport, batch[:half], retried=retried) and self._send(
                transport, batch[half:], retried=retried
            )
        bad = _rejected_indices(reply, len(batch)) if reply.status == 422 else set()
        if bad and len(bad) < len(batch) and not retried:
            self._done([p for i, p in enumerate(batch) if i in bad], rejected=len(bad))
            self._warn_rejected(len(bad), len(batch), reply)
            return self._send(
                transport, [p for i, p in enumerate(batch) if i not in bad], retried=True
            )
        self._done(batch, rejected=len(batch))
        self._warn_rejected(len(batch), len(batch), reply)
        return True

    def _ensure_run(self, transport: Transport) -> int:
        if self._run_id is not None:
            return self._run_id
        body = {
            "name": self.connection.run,
            "config": jsonable_config(self.connection.config),
            "tags": list(self.connection.tags),
        }
        reply = transport.post(
            "/api/v1/runs",
            json.dumps(body, default=str).encode(),
            attempts=1 if self._offline else self._max_retries + 1,
            sleep=self._sleep,
        )
        body_out = reply.body
        if reply.ok and isinstance(body_out, dict) and isinstance(body_out.get("id"), int):
            self._run_id = body_out["id"]
            return self._run_id
        what = (
            "the server refused the API key"
            if reply.status in (401, 403)
            else f"the server did not create run {self.connection.run!r}"
        )
        self._refused(reply, what)
        raise _Refused(reply.describe())

    def _refused(self, reply: Reply, what: str) -> None:
        self._warnings.warn(
            "refused",
            "collapsewatch: %s (%s); trainer metrics wait in memory and are tried again later",
            what,
            reply.describe(),
            level=logging.ERROR,
        )
        self._count(failed_requests=1)
        self._offline = True
        self._retry_at = time.monotonic() + self._backoff_max

    def _go_offline(self, reason: str) -> None:
        if not self._offline:
            self._warnings.warn(
                "offline",
                "collapsewatch: cannot deliver trainer metrics to %s (%s); they wait in "
                "memory and are tried again",
                self.connection.url,
                reason,
            )
        self._offline = True
        self._retry_at = time.monotonic() + self._probe_wait
        self._probe_wait = min(max(self._probe_wait * 2, 0.001), self._backoff_max)

    def _went_online(self) -> None:
        self._offline = False
        self._probe_wait = self._backoff

    def _sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise Interrupted

    def _put_back(self, batch: list[Any], *, failed: bool) -> None:
        with self._cv:
            self._queue.extendleft(reversed(batch))
            if failed:
                self._failures += 1
            self._cv.notify_all()

    def _done(self, batch: list[Any], *, sent: int = 0, rejected: int = 0) -> None:
        with self._cv:
            self._c["sent"] += sent
            self._c["dropped_rejected"] += rejected
            self._cv.notify_all()

    def _warn_rejected(self, n: int, total: int, reply: Reply) -> None:
        self._warnings.warn(
            "rejected",
            "collapsewatch: the server refused %d of %d trainer metric points (%s); dropped them",
            n,
            total,
            reply.describe(),
        )

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for key, value in deltas.items():
                self._c[key] += value


_INVALID = object()


def _as_number(value: Any) -> Any:
    """A float (NaN/Inf kept) or None; ``_INVALID`` for what is not a number."""
    if value is None:
        return None
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, bool):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return _INVALID
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _INVALID
    return float(value)


def _rejected_indices(reply: Reply, n: int) -> set[int]:
    """Indices a 422 names (``loc = ["body", i, ...]``); empty when it names the whole
    body."""
    bad: set[int] = set()
    for error in reply.problem_errors():
        loc = error.get("loc")
        if not isinstance(loc, list) or len(loc) < 2 or loc[0] != "body":
            return set()
        index = loc[1]
        if isinstance(index, str) and index.isdigit():
            index = int(index)
        if not isinstance(index, int) or not 0 <= index < n:
            return set()
        bad.add(index)
    return bad

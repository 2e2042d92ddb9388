"""The collapsewatch client: log rollouts from a training loop, deliver them in the background.

The training thread only copies each rollout dict and appends it to a bounded queue.
One background thread validates, batches (by count or by interval) and posts the
batches, retrying 429/5xx/network errors with exponential backoff. What it cannot
deliver goes to a disk spool and is resent, oldest first, once the server answers.
Nothing is dropped without being counted in ``stats()`` and said in a warning.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from collapsewatch.schema import CrossScores, Rollout, RunCreate
from collapsewatch.sdk._encode import (
    encode,
    encode_cross,
    field_of,
    jsonable_config,
    prepare,
    raw_json,
)
from collapsewatch.sdk._spool import Spool, SpooledBatch, SpoolFullError
from collapsewatch.sdk._transport import Interrupted, Reply, RetryableError, Transport, format_loc
from collapsewatch.sdk._warn import RateLimitedWarnings, logger

DEFAULT_MAX_SPOOL_BYTES = 1 << 30
EXIT_FLUSH_TIMEOUT = 5.0
"""Seconds the exit hook waits for delivery before spooling what is left."""

_ROLLOUTS = 0
_COMPLETE = 1
_CROSS = 2
_STAT_FIELDS = (
    "logged",
    "sent",
    "duplicates",
    "spooled",
    "dropped_invalid",
    "dropped_rejected",
    "dropped_full",
    "failed_batches",
    "cross_scores_sent",
    "cross_scores_dropped",
)


@dataclasses.dataclass(frozen=True)
class ClientStats:
    """Counts of rollouts (and batches) since the client started.

    When ``flush()`` has returned True and the spool held nothing from an earlier
    process, ``logged == sent + spool_pending + dropped_invalid + dropped_rejected +
    dropped_full``: nothing is lost without being counted.
    """

    logged: int = 0
    """Rollouts handed to ``log_rollouts``."""
    queued: int = 0
    """Rollouts in memory now, not yet delivered or spooled."""
    sent: int = 0
    """Rollouts the server acknowledged (stored now or already stored), spool resends included."""
    duplicates: int = 0
    """Of ``sent``, rollouts not stored again: the server already had the rollout_id,
    or it repeated within one batch (only the first copy is sent)."""
    spooled: int = 0
    """Rollouts written to the disk spool (cumulative)."""
    spool_pending: int = 0
    """Rollouts on disk now, waiting to be resent (including earlier processes')."""
    dropped_invalid: int = 0
    """Rollouts that failed validation in the SDK."""
    dropped_rejected: int = 0
    """Rollouts the server refused with a non-retryable 4xx (422, 413 for one rollout, ...)."""
    dropped_full: int = 0
    """Rollouts lost because the spool was full or could not be written."""
    failed_batches: int = 0
    """Batch requests that failed: retries ran out (batch spooled) or the server refused it."""
    cross_scores_sent: int = 0
    """Cross-score matrices the server acknowledged."""
    cross_scores_dropped: int = 0
    """Cross-score matrices dropped: invalid, refused by the server, or no spool room."""


@dataclasses.dataclass
class _Batch:
    """Validated rollouts (one JSON document each) and the steps they complete."""

    parts: list[bytes]
    complete_steps: list[int]
    order_ns: int = 0
    recreated: bool = False
    filtered: bool = False
    cross: bytes | None = None
    """A step's CrossScores JSON instead of rollouts (its own endpoint)."""


class _Unavailable(Exception):
    """The server answers but will not take rollouts from us now (auth, run refused)."""


_live_clients: set[Client] = set()
_live_lock = threading.Lock()


def _close_all_at_exit() -> None:
    with _live_lock:
        clients = list(_live_clients)
    for client in clients:
        try:
            client.close(timeout=EXIT_FLUSH_TIMEOUT)
        except Exception:  # an exit hook must not raise
            logger.exception("collapsewatch: error while closing a client at exit")


def _reset_clients_after_fork() -> None:
    global _live_lock
    _live_lock = threading.Lock()  # another thread may have held it at fork time
    for client in list(_live_clients):
        client._reset_after_fork()


atexit.register(_close_all_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_clients_after_fork)


class Client:
    """Sends rollouts of one training run to a collapsewatch server.

    ``log_rollouts`` returns at once and never raises for server trouble; a background
    thread delivers. See docs/sdk.md for every argument and the delivery guarantees.

    Args:
        run: Run name; created on the server if new, reused if it exists.
        url: API base URL; default ``COLLAPSEWATCH_URL`` (``http://127.0.0.1:8423``).
        api_key: Bearer key; default ``COLLAPSEWATCH_API_KEY``, else the key file that
            ``collapsewatch up`` writes (``<COLLAPSEWATCH_DATA_DIR>/api_key``).
        config: Trainer settings stored with the run (dict, dataclass or pydantic model;
            values that are not JSON become strings).
        tags: Labels stored with the run.
        batch_size: Most rollouts in one request.
        flush_interval: Seconds a logged rollout waits at most for its batch to fill.
        max_queue_rollouts: Rollouts held in memory; beyond that the training thread
            writes its rollouts straight to the spool.
        spool_dir: Folder of the disk spool; default ``<data_dir>/spool/<run>``.
        max_spool_bytes: Size limit of the spool; past it rollouts are dropped (counted).
        timeout: Seconds per HTTP request.
        max_retries: Retries of a request after 429/5xx/network errors (so up to
            ``max_retries + 1`` attempts) before its batch is spooled.
        retry_backoff: First backoff wait (s); doubles per retry, plus jitter.
        retry_backoff_max: Longest backoff wait (s), and the longest pause between
            attempts to reach a server that is down.
        enabled: False makes every method a no-op (e.g. on non-zero ranks).
    """

    def __init__(
        self,
        run: str,
        *,
        url: str | None = None,
        api_key: str | None = None,
        config: Any = None,
        tags: Iterable[str] | None = None,
        batch_size: int = 256,
        flush_interval: float = 1.0,
        max_queue_rollouts: int = 100_000,
        spool_dir: str | os.PathLike[str] | None = None,
        max_spool_bytes: int = DEFAULT_MAX_SPOOL_BYTES,
        timeout: float = 10.0,
        max_retries: int = 5,
        retry_backoff: float = 0.5,
        retry_backoff_max: float = 30.0,
        enabled: bool = True,
    ) -> None:
        self.run = str(run)
        self._enabled = bool(enabled)
        self._warnings = RateLimitedWarnings()
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._c = dict.fromkeys(_STAT_FIELDS, 0)
        self._queue: deque[list[Any]] = deque()
        self._queued = 0
        self._inflight = 0
        self._current: _Batch | None = None
        self._seq = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._run_id: int | None = None
        self.url = ""
        self.spool_dir: Path | None = None
        if not self._enabled:
            return

        settings = _load_settings()
        self.url = str(url or settings.url).rstrip("/")
        self._api_key = api_key or settings.api_key or _read_key_file(settings.api_key_file)
        self._config = config
        self._tags = [str(t) for t in (tags or [])]
        self._batch_size = _at_least("batch_size", batch_size, 1, 256)
        self._interval = _at_least("flush_interval", flush_interval, 0.001, 1.0)
        self._max_queue = _at_least("max_queue_rollouts", max_queue_rollouts, 1, 100_000)
        self._high_water = max(1, self._max_queue // 2)
        self._timeout = _at_least("timeout", timeout, 0.001, 10.0)
        self._max_retries = int(_at_least("max_retries", max_retries, 0, 5))
        self._backoff = _at_least("retry_backoff", retry_backoff, 0.0, 0.5)
        self._backoff_max = max(
            self._backoff, _at_least("retry_backoff_max", retry_backoff_max, 0.0, 30.0)
        )
        self.spool_dir = (
            Path(spool_dir)
            if spool_dir
            else Path(settings.data_dir) / "spool" / _safe_dirname(self.run)
        )
        self._spool = Spool(
            self.spool_dir,
            int(_at_least("max_spool_bytes", max_spool_bytes, 1, DEFAULT_MAX_SPOOL_BYTES)),
            self.run,
        )
        self._broken = _url_problem(self.url)
        if self._broken:
            logger.error(
                "collapsewatch: %s; rollouts go to the spool at %s", self._broken, self.spool_dir
            )
        if not self._api_key:
            logger.warning(
                "collapsewatch: no API key (set COLLAPSEWATCH_API_KEY or pass api_key=); "
                "the server will likely answer 401"
            )

        # Sender-thread state.
        self._mono0 = time.monotonic_ns()
        self._wall0 = time.time_ns()
        self._interval_ns = int(self._interval * 1e9)
        self._reset_sync()
        self._start_worker()
        with _live_lock:
            _live_clients.add(self)

    def _reset_sync(self) -> None:
        self._wakeup = threading.Event()
        self._interrupt = threading.Event()
        self._stop = threading.Event()
        self._flush_gen = 0
        self._flush_done = 0
        self._worker_running = False
        self._needs_start = False
        self._transport: Transport | None = None
        self._offline = False
        self._probing = False
        self._probe_wait = self._backoff
        self._next_probe = 0.0

    def _start_worker(self) -> None:
        self._needs_start = False
        self._worker_running = True
        self._thread = threading.Thread(
            target=self._worker_main, name=f"collapsewatch-sender[{self.run}]", daemon=True
        )
        self._thread.start()

    def _reset_after_fork(self) -> None:
        """In a forked child: fresh locks and no thread; the parent delivers its queue."""
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._queue = deque()
        self._queued = self._inflight = 0
        self._current = None
        self._reset_sync()
        self._thread = None
        self._needs_start = not self._closed
        self._spool._lock = threading.Lock()
        self._warnings = RateLimitedWarnings()

    # -- public API ------------------------------------------------------------------
    @property
    def run_id(self) -> int | None:
        """The server's id of the run, once the background thread has created it."""
        return self._run_id

    def log_rollouts(
        self, step: int, rollouts: Iterable[Any] | Mapping[str, Any] | Rollout
    ) -> None:
        """Queue rollouts of ``step`` for delivery; returns at once, never raises.

        ``rollouts`` are dicts in the wire format (``collapsewatch.schema.Rollout``
        fields) or ``Rollout`` objects; a dict without ``step`` gets ``step``, and one
        without ``rollout_id`` gets a random one. Dicts are copied one level deep, so
        do not mutate their nested lists (turns) after logging. Invalid rollouts are
        dropped in the background with a warning naming the rollout and field.
        """
        if not self._enabled:
            return
        try:
            if isinstance(rollouts, (Mapping, Rollout)):
                rollouts = (rollouts,)
            items = [{"step": step, **r} if type(r) is dict else prepare(r, step) for r in rollouts]
            self._enqueue(_ROLLOUTS, items, len(items))
        except Exception as exc:
            self._warnings.warn(
                "log_input",
                "collapsewatch: log_rollouts(step=%r) could not read its input (%s: %s); "
                "pass a list of rollout dicts",
                step,
                type(exc).__name__,
                exc,
            )

    def complete_step(self, step: int) -> None:
        """Say that all rollouts of ``step`` are logged: the server may score it now.

        Sent with the next batch, after the rollouts logged before this call.
        """
        if not self._enabled:
            return
        try:
            value = int(step)
            if value < 0:
                raise ValueError("step must be >= 0")
        except (TypeError, ValueError) as exc:
            self._warnings.warn(
                "complete_step", "collapsewatch: complete_step(%r) ignored: %s", step, exc
            )
            return
        self._enqueue(_COMPLETE, value, 0)

    def log_cross_scores(self, cross_scores: CrossScores | Mapping[str, Any]) -> None:
        """Queue a step's cross-score matrix ``log p(z_i | x_j)`` for delivery.

        ``cross_scores`` is a ``collapsewatch.schema.CrossScores`` or a dict of its
        fields (numpy arrays are fine). It is sent after the rollouts logged before
        this call and before a later ``complete_step``; the server replaces an earlier
        matrix of the same step. Returns at once, never raises.
        """
        if not self._enabled:
            return
        if isinstance(cross_scores, Mapping):
            cross_scores = dict(cross_scores)
        self._enqueue(_CROSS, cross_scores, 0)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything logged before this call is delivered or spooled.

        If the server was unreachable, it is tried again at once, and spooled batches
        are resent first when it answers. Returns False if ``timeout`` (seconds) ran
        out first or the client is closed with rollouts still in memory.
        """
        if not self._enabled:
            return True
        thread = self._thread
        if thread is None or not thread.is_alive() or thread is threading.current_thread():
            with self._lock:
                return not self._queue
        with self._lock:
            self._flush_gen += 1
            gen = self._flush_gen
        self._wakeup.set()
        with self._cv:
            self._cv.wait_for(lambda: self._flush_done >= gen or not self._worker_running, timeout)
            return self._flush_done >= gen

    def close(self, timeout: float | None = 10.0) -> bool:
        """Flush for up to ``timeout`` seconds, spool what is left, stop the thread.

        Returns True when nothing is left in memory: every rollout was delivered,
        spooled or counted as dropped. Rollouts logged after close go to the spool.
        """
        if not self._enabled:
            return True
        with self._lock:
            if self._closed:
                return not self._queue
            self._closed = True
        deadline = None if timeout is None else time.monotonic() + timeout
        self.flush(timeout)
        self._stop.set()
        self._interrupt.set()
        self._wakeup.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            left = None if deadline is None else max(1.0, deadline - time.monotonic())
            thread.join(left)
        ok = True
        if thread is not None and thread.is_alive():
            # The sender is stuck in a request: keep what is still in memory. The batch
            # in that request is spooled too; if it also arrives, the server skips the
            # copy (at-least-once).
            with self._lock:
                entries = list(self._queue)
                self._queue.clear()
                self._queued = 0
                current = self._current
            if current is not None:
                self._to_spool(current)
            if entries:
                self._spill(entries, "the sender thread did not stop in time")
            ok = False
        with _live_lock:
            _live_clients.discard(self)
        self._warnings.report_suppressed()
        return ok

    def stats(self) -> ClientStats:
        """A snapshot of the counts (see ``ClientStats``)."""
        if not self._enabled:
            return ClientStats()
        with self._lock:
            counts = dict(self._c)
            queued = self._queued + self._inflight
        return ClientStats(queued=queued, spool_pending=self._spool.pending_rollouts, **counts)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "disabled" if not self._enabled else "closed" if self._closed else "open"
        return f"<collapsewatch.Client run={self.run!r} url={self.url!r} {state}>"

    # -- training-thread side ----------------------------------------------------------
    def _enqueue(self, kind: int, payload: Any, n: int) -> None:
        if self._needs_start:
            self._restart_in_child()
        t = time.monotonic_ns()
        with self._lock:
            if self._closed or (n and self._queued + n > self._max_queue):
                overflow = True
                self._c["logged"] += n
            else:
                overflow = False
                self._seq += 1
                self._queue.append([self._seq, t, kind, payload])
                self._queued += n
                self._c["logged"] += n
                full = self._queued >= self._batch_size
                high = self._queued >= self._high_water
        if overflow:
            if kind != _COMPLETE:
                reason = (
                    "the client is closed"
                    if self._closed
                    else f"the queue is full ({self._max_queue} rollouts; the server is slow "
                    "or down)"
                )
                self._spill([[0, t, kind, payload]], reason)
            return
        if full and not self._wakeup.is_set():
            self._wakeup.set()
        if high and not self._interrupt.is_set():
            self._interrupt.set()

    def _restart_in_child(self) -> None:
        with self._lock:
            if not self._needs_start:
                return
            self._start_worker()

    def _spill(self, entries: list[list[Any]], reason: str) -> None:
        """Write queue entries to the spool unvalidated, one file per batch_size rollouts."""
        chunk: list[Any] = []
        steps: list[int] = []
        t0: int | None = None
        total = 0
        for _seq, t, kind, payload in entries:
            if t0 is None:
                t0 = t
            if kind == _COMPLETE:
                steps.append(payload)
                continue
            if kind == _CROSS:  # its own file, after the rollouts logged before it
                if chunk or steps:
                    total += self._write_raw(chunk, steps, t0)
                    chunk, steps = [], []
                self._write_raw_cross(payload, t)
                t0 = None
                continue
            for item in payload:
                chunk.append(item)
                if len(chunk) >= self._batch_size:
                    total += self._write_raw(chunk, steps, t0)
                    chunk, steps, t0 = [], [], t
        if chunk or steps:
            total += self._write_raw(chunk, steps, t0 or time.monotonic_ns())
        if total:
            self._warnings.warn(
                "spill",
                "collapsewatch: %s: wrote %d rollouts to the spool at %s; they are sent "
                "when the server keeps up",
                reason,
                total,
                self.spool_dir,
            )

    def _write_raw(self, items: list[Any], steps: list[int], t: int) -> int:
        lines = []
        for item in items:
            try:
                lines.append(raw_json(item))
            except (TypeError, ValueError) as exc:
                self._drop_invalid(item, exc)
        if not lines and not steps:
            return 0
        try:
            self._spool.write(lines, steps, validated=False, order_ns=self._wall_ns(t))
        except (SpoolFullError, OSError) as exc:
            self._lost(len(lines), exc)
            return 0
        self._count(spooled=len(lines))
        return len(lines)

    def _write_raw_cross(self, payload: Any, t: int) -> None:
        try:
            line = raw_json(payload)
        except (TypeError, ValueError) as exc:
            self._drop_cross(f"not JSON: {exc}")
            return
        try:
            self._spool.write(
                [line], [], validated=False, order_ns=self._wall_ns(t), kind="cross_scores"
            )
        except (SpoolFullError, OSError) as exc:
            self._drop_cross(f"the spool cannot take it: {exc}")

    def _drop_cross(self, why: str) -> None:
        self._count(cross_scores_dropped=1)
        self._warnings.warn("cross_scores", "collapsewatch: dropped cross-scores: %s", why)

    # -- sender thread -----------------------------------------------------------------
    def _worker_main(self) -> None:
        try:
            try:
                self._spool.scan()
            except OSError as exc:
                logger.warning(
                    "collapsewatch: cannot read the spool at %s: %s", self.spool_dir, exc
                )
            if self._spool.pending_rollouts:
                logger.info(
                    "collapsewatch: %d spooled rollouts of run %r in %s will be resent",
                    self._spool.pending_rollouts,
                    self.run,
                    self.spool_dir,
                )
            if self._broken is None:
                self._transport = Transport(
                    self.url,
                    self._api_key,
                    timeout=self._timeout,
                    backoff=self._backoff,
                    backoff_max=self._backoff_max,
                    user_agent=f"collapsewatch-python/{_version()}",
                )
            self._run_body = self._make_run_body()
            while True:
                stopping = self._stop.is_set()
                try:
                    self._cycle(final=stopping)
                except Exception:
                    logger.exception("collapsewatch: unexpected error in the sender thread")
                if stopping:
                    break
                self._wakeup.wait(self._wait_time())
                self._wakeup.clear()
        except Exception:
            logger.exception("collapsewatch: the sender thread failed; rollouts stay queued")
        finally:
            if self._transport is not None:
                self._transport.close()
            with self._cv:
                self._worker_running = False
                self._cv.notify_all()

    def _wait_time(self) -> float:
        wait = self._interval
        with self._lock:
            if self._queue:
                wait = (self._queue[0][1] + self._interval_ns - time.monotonic_ns()) / 1e9
        if self._offline and self._spool.pending_files > 0:
            wait = min(wait, self._next_probe - time.monotonic())
        return max(wait, 0.001)

    def _cycle(self, final: bool) -> None:
        with self._lock:
            gen = self._flush_gen
            limit = self._seq
        forced = final or gen > self._flush_done
        try:
            if final:  # closing: keep the rest on disk fast; it is validated when resent
                with self._lock:
                    entries = list(self._queue)
                    self._queue.clear()
                    self._queued = 0
                if entries:
                    self._spill(entries, "the client closed before the server took them")
                return
            if self._offline and (forced or time.monotonic() >= self._next_probe):
                self._probing = True
            self._drain_spool()
            while not self._stop.is_set():  # once closing, the final cycle spills the rest
                taken = self._take(forced, limit)
                if taken is None:
                    break
                kind, payload, steps, t = taken
                try:
                    if kind == _CROSS:
                        batch = self._current = self._cross_batch(payload, self._wall_ns(t))
                        if batch is None:
                            continue
                    else:
                        batch = self._current = _Batch(
                            self._encode_all(payload), steps, self._wall_ns(t)
                        )
                    self._drain_spool()  # the training thread may have spilled meanwhile
                    if not self._can_send():
                        self._to_spool(batch)
                    else:
                        for piece in self._send(batch):
                            self._to_spool(piece)
                finally:
                    with self._lock:
                        self._inflight = 0
                        self._current = None
        finally:
            with self._cv:
                self._flush_done = max(self._flush_done, gen)
                self._cv.notify_all()

    def _take(self, forced: bool, limit: int) -> tuple[int, Any, list[int], int] | None:
        """Pop the next batch if one is due: full, older than flush_interval, or forced.

        Returns (kind, rollouts or a CrossScores payload, complete_steps, monotonic ns).
        A cross-score entry travels alone, so it stays between what was logged around it.
        """
        with self._lock:
            queue = self._queue
            if not queue:
                return None
            head = queue[0]
            due = (
                self._queued >= self._batch_size
                or (forced and head[0] <= limit)
                or time.monotonic_ns() - head[1] >= self._interval_ns
            )
            if not due:
                return None
            if head[2] == _CROSS:
                queue.popleft()
                return _CROSS, head[3], [], head[1]
            items: list[Any] = []
            steps: list[int] = []
            t = head[1]
            room = self._batch_size
            while queue and room > 0:
                entry = queue[0]
                if entry[2] == _CROSS:
                    break
                if entry[2] == _COMPLETE:
                    steps.append(entry[3])
                    queue.popleft()
                    continue
                payload = entry[3]
                if len(payload) <= room:
                    items.extend(payload)
                    room -= len(payload)
                    queue.popleft()
                else:
                    items.extend(payload[:room])
                    entry[3] = payload[room:]
                    room = 0
            while queue and queue[0][2] == _COMPLETE:
                steps.append(queue.popleft()[3])
            self._queued -= len(items)
            self._inflight = len(items)
            return _ROLLOUTS, items, steps, t

    def _can_send(self) -> bool:
        return (
            self._broken is None
            and self._transport is not None
            and not self._stop.is_set()
            and (not self._offline or self._probing)
        )

    def _attempts(self) -> int:
        return 1 if self._offline else self._max_retries + 1

    def _send(self, batch: _Batch) -> list[_Batch]:
        """Deliver ``batch``; returns the pieces that could not be delivered now."""
        pending = [batch]
        deferred: list[_Batch] = []
        while pending:
            b = pending.pop(0)
            if deferred or not self._can_send():
                deferred.append(b)
                continue
            probe = self._offline
            try:
                reply = self._post_batch(b)
            except (Interrupted, _Unavailable):
                deferred.append(b)
                continue
            except (RetryableError, httpx.TransportError) as exc:
                if not probe:  # a failed probe of a dead server is not news
                    self._count(failed_batches=1)
                self._go_offline(_describe(exc))
                deferred.append(b)
                continue
            except Exception:
                logger.exception("collapsewatch: unexpected error while sending a batch")
                deferred.append(b)
                continue
            pending[:0] = self._handle_reply(b, reply)
        return deferred

    def _post_batch(self, b: _Batch) -> Reply:
        run_id = self._ensure_run()
        if b.cross is not None:
            path, body = f"/api/v1/runs/{run_id}/cross-scores", b.cross
        else:
            path, body = f"/api/v1/runs/{run_id}/rollouts", self._batch_body(b)
        assert self._transport is not None
        reply = self._transport.post(path, body, attempts=self._attempts(), sleep=self._sleep)
        if reply.status in (401, 403):
            raise self._refused(reply, "the server refused the API key")
        self._went_online()
        return reply

    @staticmethod
    def _batch_body(b: _Batch) -> bytes:
        return b"".join(
            (
                b'{"rollouts":[',
                b",".join(b.parts),
                b'],"complete_steps":',
                json.dumps(b.complete_steps).encode(),
                b"}",
            )
        )

    def _ensure_run(self) -> int:
        if self._run_id is not None:
            return self._run_id
        assert self._transport is not None
        reply = self._transport.post(
            "/api/v1/runs", self._run_body, attempts=self._attempts(), sleep=self._sleep
        )
        body = reply.body
        if reply.ok and isinstance(body, dict) and isinstance(body.get("id"), int):
            self._went_online()
            self._run_id = body["id"]
            logger.info(
                "collapsewatch: logging run %r (id %d) to %s", self.run, self._run_id, self.url
            )
            return self._run_id
        if reply.status in (401, 403):
            raise self._refused(reply, "the server refused the API key")
        raise self._refused(reply, f"the server did not create run {self.run!r}")

    def _refused(self, reply: Reply, what: str) -> _Unavailable:
        """Keep rollouts in the spool and ask again only after retry_backoff_max."""
        self._warnings.warn(
            "refused",
            "collapsewatch: %s (%s); rollouts go to the spool at %s and are resent later",
            what,
            reply.describe(),
            self.spool_dir,
            level=logging.ERROR,
        )
        self._go_offline(reply.describe(), long=True, quiet=True)
        return _Unavailable(reply.describe())

    def _handle_reply(self, b: _Batch, reply: Reply) -> list[_Batch]:
        """Account for one reply; returns batches to send again now."""
        if b.cross is not None:
            if reply.ok:
                self._count(cross_scores_sent=1)
                return []
            if reply.status == 404 and not b.recreated:
                self._run_id = None
                return [dataclasses.replace(b, recreated=True)]
            self._count(failed_batches=1)
            self._drop_cross(f"the server refused them ({reply.describe()})")
            return []
        n = len(b.parts)
        if reply.ok:
            body = reply.body if isinstance(reply.body, dict) else {}
            duplicates = body.get("duplicates", 0)
            self._count(sent=n, duplicates=duplicates if isinstance(duplicates, int) else 0)
            return []
        if reply.status == 404 and not b.recreated:
            self._run_id = None  # the server lost the run (database reset?): create it again
            return [dataclasses.replace(b, recreated=True)]
        if (reply.status == 413 or _batch_too_long(reply)) and n > 1:
            half = n // 2
            return [
                dataclasses.replace(b, parts=b.parts[:half], complete_steps=[]),
                dataclasses.replace(b, parts=b.parts[half:]),
            ]
        if reply.status == 422 and not b.filtered:
            bad = _rejected_indices(reply, n)
            if bad and len(bad) < n:
                self._count(failed_batches=1, dropped_rejected=len(bad))
                self._warnings.warn(
                    "rejected",
                    "collapsewatch: the server refused %d of %d rollouts in a batch (%s); "
                    "dropped those, resending the rest",
                    len(bad),
                    n,
                    reply.describe(),
                )
                keep = [p for i, p in enumerate(b.parts) if i not in bad]
                return [dataclasses.replace(b, parts=keep, filtered=True)]
        self._count(failed_batches=1, dropped_rejected=n)
        self._warnings.warn(
            "rejected",
            "collapsewatch: the server refused a batch of %d rollouts (%s); dropped it",
            n,
            reply.describe(),
        )
        return []

    def _go_offline(self, reason: str, *, long: bool = False, quiet: bool = False) -> None:
        was_offline = self._offline
        self._offline = True
        self._probing = False
        self._next_probe = time.monotonic() + (self._backoff_max if long else self._probe_wait)
        self._probe_wait = min(max(self._probe_wait * 2, 0.001), self._backoff_max)
        if not was_offline and not quiet:
            self._warnings.warn(
                "offline",
                "collapsewatch: cannot deliver to %s (%s); spooling rollouts to %s and "
                "retrying in the background",
                self.url,
                reason,
                self.spool_dir,
            )

    def _went_online(self) -> None:
        if self._offline:
            logger.info(
                "collapsewatch: %s answers again; resending %d spooled rollouts",
                self.url,
                self._spool.pending_rollouts,
            )
        self._offline = False
        self._probing = False
        self._probe_wait = self._backoff

    def _sleep(self, seconds: float) -> None:
        """Backoff wait that a close interrupts and that keeps the queue from filling."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._interrupt.wait(left)
            if self._stop.is_set():
                raise Interrupted
            if self._interrupt.is_set():
                self._interrupt.clear()
                with self._lock:
                    if self._queued < self._high_water:
                        continue
                    entries = list(self._queue)
                    self._queue.clear()
                    self._queued = 0
                self._spill(entries, "the server is not answering while rollouts pile up")

    def _drain_spool(self) -> None:
        if self._spool.pending_files <= 0 or not self._can_send():
            return
        for path in self._spool.paths():
            if not self._can_send():
                return
            try:
                spooled = self._spool.read(path)
            except ValueError as exc:
                self._warnings.warn("spool_bad", "collapsewatch: %s", exc)
                continue
            if spooled is None:
                continue
            if spooled.kind == "cross_scores":
                self._drain_cross(spooled)
                if self._spool.pending_files and not self._can_send():
                    return
                continue
            if spooled.kind != "rollouts":
                self._warnings.warn(
                    "spool_bad", "collapsewatch: %s holds an unknown kind of batch", path
                )
                continue
            parts = spooled.rollouts if spooled.validated else self._encode_all(spooled.rollouts)
            if not parts and not spooled.complete_steps:  # nothing valid was left in it
                self._spool.remove(spooled)
                continue
            batch = _Batch(parts, spooled.complete_steps)
            deferred = self._send(batch)
            if not deferred:
                self._spool.remove(spooled)
                continue
            if not (len(deferred) == 1 and deferred[0] is batch) or not spooled.validated:
                self._spool.replace(
                    spooled,
                    [p for d in deferred for p in d.parts],
                    sorted({s for d in deferred for s in d.complete_steps}),
                )
            return
        self._spool.reconcile()  # another process may have sent some of our files

    def _drain_cross(self, spooled: SpooledBatch) -> None:
        if spooled.validated:
            batch: _Batch | None = _Batch([], [], cross=spooled.rollouts[0])
        else:
            batch = self._cross_batch(spooled.rollouts[0] if spooled.rollouts else b"", 0)
        if batch is None or not self._send(batch):
            self._spool.remove(spooled)  # delivered, refused or invalid (counted)
        elif not spooled.validated:
            self._spool.replace(spooled, [batch.cross or b""], [])

    def _cross_batch(self, payload: Any, order_ns: int) -> _Batch | None:
        try:
            return _Batch([], [], order_ns, cross=encode_cross(payload))
        except (ValidationError, TypeError, ValueError) as exc:
            why = _describe(exc) if isinstance(exc, ValidationError) else str(exc)
            self._drop_cross(f"invalid ({why})")
            return None

    def _to_spool(self, batch: _Batch) -> None:
        if batch.cross is not None:
            try:
                self._spool.write(
                    [batch.cross],
                    [],
                    validated=True,
                    order_ns=batch.order_ns,
                    kind="cross_scores",
                )
            except (SpoolFullError, OSError) as exc:
                self._drop_cross(f"the spool cannot take it: {exc}")
            return
        if not batch.parts and not batch.complete_steps:
            return
        try:
            self._spool.write(
                batch.parts, batch.complete_steps, validated=True, order_ns=batch.order_ns
            )
        except (SpoolFullError, OSError) as exc:
            self._lost(len(batch.parts), exc)
            return
        self._count(spooled=len(batch.parts))

    def _lost(self, n: int, exc: Exception) -> None:
        self._count(dropped_full=n)
        self._warnings.warn(
            "spool_full",
            "collapsewatch: dropped %d rollouts, the spool cannot take them: %s",
            n,
            exc,
        )

    # -- validation --------------------------------------------------------------------
    def _encode_all(self, items: list[Any]) -> list[bytes]:
        """Validated JSON of each rollout; invalid ones dropped, repeated ids sent once.

        The API refuses a batch that holds one rollout_id twice, and would skip the
        second copy anyway, so a repeat counts as sent and duplicate right here.
        """
        parts = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            if i % 16 == 15:
                # Let training threads have the GIL now, not after the 5 ms switch
                # interval: log_rollouts must stay quick while we validate.
                time.sleep(0)
            try:
                rollout_id, part = encode(item)
            except (ValidationError, TypeError, ValueError) as exc:
                self._drop_invalid(item, exc)
                continue
            if rollout_id in seen:
                self._count(sent=1, duplicates=1)
                continue
            seen.add(rollout_id)
            parts.append(part)
        return parts

    def _drop_invalid(self, item: Any, exc: Exception) -> None:
        self._count(dropped_invalid=1)
        if isinstance(item, bytes):
            with contextlib.suppress(ValueError):
                item = json.loads(item)
        if isinstance(exc, ValidationError):
            errors = exc.errors()
            why = "; ".join(
                f"{format_loc(e.get('loc')) or '<rollout>'}: {e.get('msg')}"
                + (
                    " (put free-form fields in metadata)"
                    if e.get("type") == "extra_forbidden"
                    else ""
                )
                for e in errors[:3]
            )
            if len(errors) > 3:
                why += f"; +{len(errors) - 3} more"
        else:
            why = str(exc)
        rid = field_of(item, "rollout_id")
        step = field_of(item, "step")
        self._warnings.warn(
            "invalid",
            "collapsewatch: dropped invalid rollout %s at step %s: %s",
            repr(rid) if rid is not None else "(no rollout_id)",
            step,
            why,
        )

    # -- small helpers -----------------------------------------------------------------
    def _count(self, **deltas: int) -> None:
        with self._lock:
            for key, value in deltas.items():
                self._c[key] += value

    def _wall_ns(self, mono_ns: int) -> int:
        return self._wall0 + (mono_ns - self._mono0)

    def _make_run_body(self) -> bytes:
        body = {"name": self.run, "config": jsonable_config(self._config), "tags": self._tags}
        try:
            RunCreate.model_validate(body)
        except ValidationError as exc:
            logger.error("collapsewatch: the run settings are invalid: %s", _describe(exc))
        return json.dumps(body, default=str).encode()


# -- module helpers --------------------------------------------------------------------
def _rejected_indices(reply: Reply, n: int) -> set[int]:
    """Indices of the rollouts a 422 names (``loc = [body, rollouts, i, ...]``)."""
    bad: set[int] = set()
    for error in reply.problem_errors():
        loc = error.get("loc")
        if not isinstance(loc, list) or "rollouts" not in loc:
            return set()
        i = loc.index("rollouts")
        index = loc[i + 1] if i + 1 < len(loc) else None
        if isinstance(index, str) and index.isdigit():
            index = int(index)
        if not isinstance(index, int) or not 0 <= index < n:
            return set()  # the batch as a whole is wrong
        bad.add(index)
    return bad


def _batch_too_long(reply: Reply) -> bool:
    """A 422 that says the batch holds too many rollouts (a server limit): split it."""
    return reply.status == 422 and any(
        e.get("loc") == ["body", "rollouts"] and e.get("type") == "too_long"
        for e in reply.problem_errors()
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, httpx.TransportError):
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, ValidationError):
        return "; ".join(f"{format_loc(e.get('loc'))}: {e.get('msg')}" for e in exc.errors()[:3])
    return str(exc)


def _at_least(name: str, value: Any, minimum: float, default: float) -> Any:
    try:
        if value >= minimum:
            return value
    except TypeError:
        pass
    logger.warning(
        "collapsewatch: %s=%r is invalid (must be >= %s); using %s", name, value, minimum, default
    )
    return default


def _url_problem(url: str) -> str | None:
    try:
        parsed = httpx.URL(url)
    except Exception as exc:
        return f"invalid COLLAPSEWATCH_URL {url!r} ({exc})"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return f"invalid COLLAPSEWATCH_URL {url!r} (need http(s)://host:port)"
    return None


def _safe_dirname(run: str) -> str:
    """A folder name for ``run``: itself if safe, else a cleaned form plus a hash."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run)[:100].lstrip(".")
    if safe == run and safe:
        return safe
    digest = hashlib.sha1(run.encode()).hexdigest()[:10]
    return f"{safe or 'run'}-{digest}"


def _load_settings() -> Any:
    from collapsewatch.settings import Settings

    try:
        return Settings()
    except Exception as exc:
        logger.warning(
            "collapsewatch: ignoring invalid COLLAPSEWATCH_* settings (%s); using defaults", exc
        )
        return Settings.model_construct()


def _read_key_file(path: Path) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def _version() -> str:
    from collapsewatch import __version__

    return __version__

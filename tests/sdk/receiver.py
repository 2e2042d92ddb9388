"""A programmable stand-in for the ingestion API, for testing the SDK over real HTTP.

It speaks the API's contract (runs, rollout batches, problem JSON), validates bodies
with the wire-format models, stores rollouts deduplicated by rollout_id like the real
API, records every request, and answers with errors on cue. It can be stopped and
started again on the same port to play a server that goes away and comes back.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ValidationError

from collapsewatch.schema import CrossScores, RolloutBatch, RunCreate

_BATCH_PATH = re.compile(r"^/api/v1/runs/(\d+)/rollouts$")
_COMPLETE_PATH = re.compile(r"^/api/v1/runs/(\d+)/steps/(\d+)/complete$")
_CROSS_PATH = re.compile(r"^/api/v1/runs/(\d+)/cross-scores$")


@dataclass
class Recorded:
    """One request as the receiver saw it, and what it answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float
    status: int = 0


@dataclass
class Cue:
    """A scripted answer for the next matching request."""

    status: int
    retry_after: str | None = None
    body: dict[str, Any] | None = None
    path_endswith: str = "/rollouts"


@dataclass
class Receiver:
    api_key: str = "test-key"
    port: int = 0
    delay: float = 0.0
    """Seconds to hold each rollout batch before answering (a slow server)."""
    max_batch_rollouts: int | None = None
    """Answer 413 to batches with more rollouts than this."""
    max_batch_422: int | None = None
    """Answer 422 (loc ["body", "rollouts"], too_long) to batches larger than this, as
    the real API does past COLLAPSEWATCH_MAX_BATCH_ROLLOUTS."""
    requests: list[Recorded] = field(default_factory=list)
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Rollouts stored, by rollout_id (what the real API would hold)."""
    deliveries: list[str] = field(default_factory=list)
    """Every rollout_id received in an accepted batch, repeats included."""
    complete_steps: list[int] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)
    cross_scores: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Cross-score matrices by step (a later one replaces an earlier one)."""

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self._cues: deque[Cue] = deque()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Receiver:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the port: clients now get 'connection refused'."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def cue(self, status: int, times: int = 1, **kwargs: Any) -> None:
        """Answer the next ``times`` matching requests with ``status``."""
        with self.lock:
            self._cues.extend(Cue(status, **kwargs) for _ in range(times))

    def forget_runs(self) -> None:
        """Lose all runs, like a reset database: batches for old run ids get 404."""
        with self.lock:
            self.runs.clear()

    # -- views -----------------------------------------------------------------------
    def batch_requests(self) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.path.endswith("/rollouts")]

    def accepted_batches(self) -> list[dict[str, Any]]:
        return [r.body for r in self.batch_requests() if r.status == 200]

    def wait_for(self, predicate: Any, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self):
                    return True
            time.sleep(0.01)
        return False

    # -- the API ---------------------------------------------------------------------
    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        record = Recorded(method, path, headers, body, time.monotonic())
        with self.lock:
            self.requests.append(record)
            cue = next((c for c in self._cues if path.endswith(c.path_endswith)), None)
            if cue is not None:
                self._cues.remove(cue)
        if cue is not None:
            extra = {"Retry-After": cue.retry_after} if cue.retry_after else {}
            answer = (cue.status, cue.body or _problem(cue.status, "scripted failure"), extra)
        elif headers.get("authorization") != f"Bearer {self.api_key}":
            answer = (401, _problem(401, "invalid API key"), {})
        elif method == "POST" and path == "/api/v1/runs":
            answer = self._create_run(body)
        elif method == "POST" and (m := _BATCH_PATH.match(path)):
            if self.delay:
                time.sleep(self.delay)
            answer = self._ingest(int(m.group(1)), body)
        elif method == "POST" and (m := _CROSS_PATH.match(path)):
            answer = self._store_cross(body)
        elif method == "POST" and (m := _COMPLETE_PATH.match(path)):
            with self.lock:
                self.complete_steps.append(int(m.group(2)))
            answer = (204, None, {})
        else:
            answer = (404, _problem(404, f"no route {method} {path}"), {})
        record.status = answer[0]
        return answer

    def _create_run(self, body: Any) -> tuple:
        try:
            run = RunCreate.model_validate(body)
        except ValidationError as exc:
            return _invalid(exc)
        with self.lock:
            created = run.name not in self.runs
            if created:
                self.runs[run.name] = len(self.runs) + 100
            run_id = self.runs[run.name]
        out = {
            "id": run_id,
            "project": "default",
            "name": run.name,
            "config": run.config,
            "tags": run.tags,
            "created_at": "2025-01-01T00:00:00Z",
        }
        return (201 if created else 200, out, {})

    def _ingest(self, run_id: int, body: Any) -> tuple:
        with self.lock:
            if run_id not in self.runs.values():
                return (404, _problem(404, f"run {run_id} not found"), {})
        try:
            batch = RolloutBatch.model_validate(body)
        except ValidationError as exc:
            return _invalid(exc)
        n = len(batch.rollouts)
        if self.max_batch_rollouts is not None and n > self.max_batch_rollouts:
            return (413, _problem(413, "request too large"), {})
        errors = []
        if self.max_batch_422 is not None and n > self.max_batch_422:
            errors.append({"loc": ["body", "rollouts"], "msg": "too many", "type": "too_long"})
        ids = [r.rollout_id for r in batch.rollouts]
        errors += [
            {"loc": ["body", "rollouts", i, "rollout_id"], "msg": "repeats", "type": "duplicate"}
            for i, rid in enumerate(ids)
            if rid in ids[:i]
        ]
        if errors:  # like the API: the whole batch is refused, nothing stored
            return (422, _problem(422, "invalid batch", errors), {})
        accepted, duplicates = 0, []
        with self.lock:
            for rollout in batch.rollouts:
                self.deliveries.append(rollout.rollout_id)
                if rollout.rollout_id in self.stored:
                    duplicates.append(rollout.rollout_id)
                else:
                    self.stored[rollout.rollout_id] = rollout.model_dump()
                    accepted += 1
            self.complete_steps.extend(batch.complete_steps)
        out = {
            "accepted": accepted,
            "duplicates": len(duplicates),
            "duplicate_rollout_ids": duplicates[:100],
            "steps": sorted({r.step for r in batch.rollouts}),
        }
        return (200, out, {})

    def _store_cross(self, body: Any) -> tuple:
        try:
            cross = CrossScores.model_validate(body)
        except ValidationError as exc:
            return _invalid(exc)
        with self.lock:
            self.cross_scores[cross.step] = cross.model_dump()
        return (204, None, {})


def _problem(status: int, detail: str, errors: list[dict[str, Any]] | None = None) -> dict:
    body: dict[str, Any] = {"type": "about:blank", "title": f"HTTP {status}", "status": status}
    body["detail"] = detail
    if errors is not None:
        body["errors"] = errors
    return body


def _invalid(exc: ValidationError) -> tuple:
    errors = [
        {"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in exc.errors()
    ]
    return (422, _problem(422, "request body does not match the wire format", errors), {})


def _handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: a stop closes the port

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, body, extra = receiver.handle("POST", self.path, headers, raw)
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            ctype = "application/problem+json" if status >= 400 else "application/json"
            if data:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler

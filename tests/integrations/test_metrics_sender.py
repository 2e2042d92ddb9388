"""The trainer-metrics sender: delivery to a real server, a dead server, and answers
that refuse some points (a scripted stub)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from collapsewatch.sdk.integrations._connect import Connection
from collapsewatch.sdk.integrations._metrics import MetricsSender
from collapsewatch.server import free_port
from tests.integrations.conftest import run_id_of, series

FAST = {"flush_interval": 0.05, "retry_backoff": 0.01, "retry_backoff_max": 0.05, "timeout": 2.0}


def test_delivers_to_the_server(server: Any, http: httpx.Client) -> None:
    sender = MetricsSender(Connection("m-run", server.url, server.api_key, {"lr": 1}), **FAST)
    sender.log_metrics(0, {"diversity.token_entropy": 2.5, "policy/loss": 0.1, "bad": "x"})
    sender.log_metrics(1, {"diversity.token_entropy": None})
    sender.log_metrics(-1, {"policy.loss": 1.0})
    assert sender.flush(10)
    assert sender.close(5)
    stats = sender.stats()
    assert (stats.logged, stats.sent, stats.dropped_invalid) == (5, 3, 2)
    run_id = run_id_of(http, "m-run")
    assert sender.run_id == run_id
    assert series(http, run_id) == {
        0: {"trainer.diversity.token_entropy": 2.5, "trainer.policy.loss": 0.1},
        1: {"trainer.diversity.token_entropy": None},
    }
    assert http.get(f"/api/v1/runs/{run_id}").json()["config"] == {"lr": 1}


def test_a_dead_server_keeps_points_in_memory_and_counts_what_close_loses() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    sender = MetricsSender(Connection("dead", url, "k"), max_points=3, **FAST)
    t0 = time.monotonic()
    sender.log_metrics(0, {"a": 1.0, "b": 2.0})
    sender.log_metrics(1, {"a": 1.0, "b": 2.0})  # 4 > max_points: the oldest goes
    assert not sender.flush(5)  # returns once the server could not be reached
    assert time.monotonic() - t0 < 4
    assert sender.stats().queued == 3
    assert sender.stats().dropped_overflow == 1
    assert not sender.close(0.2)
    stats = sender.stats()
    assert stats.logged == stats.sent + stats.dropped_overflow + stats.dropped_unsent == 4
    assert stats.failed_requests >= 1


class _Stub(BaseHTTPRequestHandler):
    """Creates run 7; refuses metric point 1 of the first batch with 422."""

    answers: list[tuple[int, Any]] = []
    bodies: list[Any] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/api/v1/runs":
            status, answer = 201, {"id": 7}
        else:
            _Stub.bodies.append(body)
            status, answer = _Stub.answers.pop(0) if _Stub.answers else (200, {})
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def stub() -> Iterator[str]:
    _Stub.answers, _Stub.bodies = [], []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_a_422_drops_only_the_points_it_names(stub: str) -> None:
    problem = {"status": 422, "errors": [{"loc": ["body", 1, "name"], "msg": "bad"}]}
    _Stub.answers = [(422, problem)]
    sender = MetricsSender(Connection("r", stub, "k"), **FAST)
    sender.log_metrics(0, {"a": 1.0, "b": 2.0, "c": 3.0})
    assert sender.flush(5)
    sender.close(1)
    assert [[p["name"] for p in body] for body in _Stub.bodies] == [["a", "b", "c"], ["a", "c"]]
    stats = sender.stats()
    assert (stats.sent, stats.dropped_rejected) == (2, 1)


def test_5xx_is_retried_and_a_final_4xx_drops_the_batch(stub: str) -> None:
    _Stub.answers = [(503, {}), (200, {}), (400, {"detail": "no"})]
    sender = MetricsSender(Connection("r", stub, "k"), **FAST)
    sender.log_metrics(0, {"a": 1.0})
    assert sender.flush(5)
    sender.log_metrics(1, {"a": 1.0})
    assert sender.flush(5)
    sender.close(1)
    stats = sender.stats()
    assert (stats.sent, stats.dropped_rejected, len(_Stub.bodies)) == (1, 1, 3)


def test_disabled_is_a_no_op() -> None:
    sender = MetricsSender(Connection("r", "http://127.0.0.1:9", None), enabled=False)
    sender.log_metrics(0, {"a": 1.0})
    assert sender.flush(0.1) and sender.close(0.1)
    assert sender.stats().logged == 0

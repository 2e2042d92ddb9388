"""A real HTTP receiver on loopback for alert delivery tests (http.server in a thread).

It records every request (path, headers, raw body) and answers with scripted statuses:
``cue(503, times=2)`` makes the next two requests fail, then it answers 200 again.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    requests: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self._cues: deque[tuple[int, dict[str, str]]] = deque()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cue(self, status: int, times: int = 1, headers: dict[str, str] | None = None) -> None:
        with self.lock:
            self._cues.extend((status, headers or {}) for _ in range(times))

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                with receiver.lock:
                    status, extra = receiver._cues.popleft() if receiver._cues else (200, {})
                    receiver.requests.append(
                        Received(
                            self.path, {k.lower(): v for k, v in self.headers.items()}, body, status
                        )
                    )
                payload = b"ok" if status < 400 else b"temporarily unavailable"
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def on(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

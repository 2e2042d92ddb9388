"""Serving: the API under uvicorn plus the worker, in one process (`collapsewatch up`).

:class:`EmbeddedServer` is also what `collapsewatch quickstart` and the end-to-end
tests use: a real HTTP server on loopback, started in a background thread.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from collapsewatch.settings import Settings
from collapsewatch.store import keys
from collapsewatch.store.engine import make_engine, make_sessionmaker, session_scope
from collapsewatch.store.migrate import upgrade

log = logging.getLogger("collapsewatch.server")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ensure_api_key(settings: Settings) -> tuple[str, bool]:
    """Make sure the project has a usable key and return (key, newly_generated).

    ``settings.api_key`` (from --api-key or COLLAPSEWATCH_API_KEY) is registered if
    given. Otherwise the key in ``<data_dir>/api_key`` is reused when it is still
    registered, else a new one is generated, stored hashed, and written to that file
    (mode 0600) so local clients find it.
    """
    engine = make_engine(settings.resolved_database_url, pool_size=1)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            if settings.api_key:
                keys.register_key(session, project=settings.project, key=settings.api_key)
                return settings.api_key, False
            key_file = settings.api_key_file
            if key_file.exists():
                key = key_file.read_text().strip()
                project = keys.project_for_key(session, key)
                if project is not None and project.name == settings.project:
                    return key, False
            key = keys.generate_key()
            keys.register_key(session, project=settings.project, key=key, name="local")
        _write_key_file(settings.api_key_file, key)
        return key, True
    finally:
        engine.dispose()


def _write_key_file(path: Path, key: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key + "\n")


class EmbeddedServer:
    """API (uvicorn, background thread) + ``workers`` scoring threads on one database.

    Use as a context manager; ``url`` and ``api_key`` are set once started. The schema
    is upgraded to Alembic head before serving.

    Raises:
        RuntimeError: the server did not start within ``start_timeout`` seconds.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        workers: int = 1,
        start_timeout: float = 30.0,
        log_level: str = "warning",
        dashboard: bool = False,
    ) -> None:
        self.settings = settings
        self.dashboard = dashboard
        self._dashboard: Any = None
        self.workers = workers
        self.start_timeout = start_timeout
        self.log_level = log_level
        self.api_key: str | None = None
        self.key_generated = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: uvicorn.Server | None = None

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.port}"

    @property
    def dashboard_url(self) -> str | None:
        """The dashboard's URL when it is served (``dashboard=True``), else None."""
        return self._dashboard.url if self._dashboard is not None else None

    def start(self) -> EmbeddedServer:
        from collapsewatch.api.app import create_app
        from collapsewatch.worker import Worker

        upgrade(self.settings.resolved_database_url)
        self.api_key, self.key_generated = ensure_api_key(self.settings)
        app = create_app(self.settings)
        config = uvicorn.Config(
            app,
            host=self.settings.host,
            port=self.settings.port,
            log_level=self.log_level,
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        thread = threading.Thread(target=self._server.run, name="collapsewatch-api", daemon=True)
        thread.start()
        self._threads.append(thread)
        for i in range(self.workers):
            worker = Worker(self.settings, sessionmaker=app.state.sessionmaker)
            t = threading.Thread(
                target=worker.run_forever,
                args=(self._stop,),
                name=f"collapsewatch-worker-{i}",
                daemon=True,
            )
            t.start()
            self._threads.append(t)
        if self.dashboard:
            from dashboard.server import DashboardServer

            self._dashboard = DashboardServer(self.settings, factory=app.state.sessionmaker)
            try:
                self._dashboard.start()
            except OSError as exc:  # port taken: say so instead of a half-started server
                url, self._dashboard = self._dashboard.url, None
                self.stop()
                raise RuntimeError(f"dashboard could not listen on {url}: {exc}") from exc
        deadline = time.monotonic() + self.start_timeout
        while not self._server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                self.stop()
                raise RuntimeError(f"API server did not start on {self.url}")
            time.sleep(0.02)
        return self

    def wait(self) -> None:
        """Block until the API thread ends (Ctrl-C in `collapsewatch up`)."""
        try:
            while self._threads and self._threads[0].is_alive():
                self._threads[0].join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def stop(self) -> None:
        if self._dashboard is not None:
            self._dashboard.stop()
            self._dashboard = None
        self._stop.set()
        if self._server is not None:
            self._server.should_exit = True
        for t in self._threads:
            t.join(timeout=10)
        self._threads.clear()

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

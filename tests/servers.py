"""A real API server on loopback that a test can stop and start again on the same port
(server outages), shared by the SDK and reliability tests."""

from __future__ import annotations

import threading
import time

import httpx
import uvicorn

from collapsewatch.settings import Settings


class RestartableApi:
    """The API (create_app under uvicorn) in a thread, stoppable and restartable on the
    same port; the schema is migrated and a key registered once."""

    def __init__(self, settings: Settings) -> None:
        from collapsewatch.server import ensure_api_key
        from collapsewatch.store.migrate import upgrade

        self.settings = settings
        upgrade(settings.resolved_database_url)
        self.api_key, _ = ensure_api_key(settings)
        self.url = f"http://127.0.0.1:{settings.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> RestartableApi:
        from collapsewatch.api.app import create_app

        config = uvicorn.Config(
            create_app(self.settings),
            host="127.0.0.1",
            port=self.settings.port,
            log_level="warning",
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            assert self._thread.is_alive() and time.monotonic() < deadline, "API did not start"
            time.sleep(0.02)
        return self

    def get(self, path: str) -> httpx.Response:
        """An authenticated GET on the API."""
        headers = {"Authorization": f"Bearer {self.api_key}"}
        return httpx.get(self.url + path, headers=headers, timeout=10)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(15)
            self._server = None

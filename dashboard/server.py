"""Serving the dashboard: a threaded WSGI server on its own port.

The dashboard runs on its own port rather than mounted inside the API app, so the two
can bind differently: the API may listen on every interface for trainers while the
dashboard, which has no login, stays on loopback. The server is Werkzeug's threaded
WSGI server (Flask's own, already installed with Dash), enough for the few people
who look at a run; for more, serve ``dashboard.wsgi:application`` with any WSGI
server (gunicorn, waitress) behind an authenticating proxy.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy.orm import Session, sessionmaker
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from collapsewatch.settings import Settings
from dashboard.settings import DashboardSettings

log = logging.getLogger("collapsewatch.dashboard")

LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts local connections."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LoopbackHostGuard:
    """WSGI middleware: answer 421 to a request whose Host header is not a loopback
    name. A server bound to loopback is still reachable from a web page the user
    opens, through DNS rebinding (evil.example resolving to 127.0.0.1); the Host
    header is what gives that away."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]):
        host = environ.get("HTTP_HOST", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        name = name.strip("[]").lower()
        if name and not is_loopback(name):
            start_response("421 Misdirected Request", [("Content-Type", "text/plain")])
            return [b"This dashboard only answers requests addressed to localhost.\n"]
        return self.app(environ, start_response)


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug("%s %s %s", self.command, self.path, code)


class DashboardServer:
    """The dashboard on ``host:port`` in a background thread; ``port=0`` picks a free
    one (``url`` tells which once started)."""

    def __init__(
        self,
        settings: Settings | None = None,
        dashboard_settings: DashboardSettings | None = None,
        *,
        factory: sessionmaker[Session] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.dashboard_settings = dashboard_settings or DashboardSettings()
        self.factory = factory
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return self.dashboard_settings.host

    @property
    def url(self) -> str:
        port = self._server.server_port if self._server else self.dashboard_settings.port
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}"

    def wsgi_app(self) -> Callable[..., Iterable[bytes]]:
        from dashboard.app import create_dashboard

        app = create_dashboard(self.settings, self.dashboard_settings, factory=self.factory)
        if is_loopback(self.host):
            return LoopbackHostGuard(app.server)
        log.warning(
            "the dashboard listens on %s: it has no login, so anyone who reaches this "
            "address reads every run it shows; put it behind an authenticating proxy",
            self.host,
        )
        return app.server

    def start(self) -> DashboardServer:
        self._server = make_server(
            self.host,
            self.dashboard_settings.port,
            self.wsgi_app(),
            threaded=True,
            request_handler=_QuietHandler,
        )
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="collapsewatch-dashboard", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (`collapsewatch dashboard`)."""
        self.start()
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

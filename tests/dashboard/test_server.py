"""Serving: the loopback Host guard, `collapsewatch up` serving the dashboard too."""

from __future__ import annotations

import httpx

from collapsewatch.server import EmbeddedServer, free_port
from dashboard.server import DashboardServer, LoopbackHostGuard, is_loopback
from dashboard.settings import DashboardSettings
from tests.conftest import make_settings


def test_loopback_guard_refuses_foreign_host_headers() -> None:
    calls = []

    def app(environ, start_response):
        calls.append(environ["HTTP_HOST"])
        start_response("200 OK", [])
        return [b"ok"]

    guard = LoopbackHostGuard(app)
    statuses = []
    for host in ("127.0.0.1:8424", "localhost", "[::1]:8424", "evil.example", "evil.example:80"):
        guard({"HTTP_HOST": host}, lambda status, headers: statuses.append(status[:3]))
    assert statuses == ["200", "200", "200", "421", "421"]
    assert is_loopback("127.0.0.2") and not is_loopback("0.0.0.0")


def test_up_serves_api_worker_and_dashboard(sqlite_url, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COLLAPSEWATCH_DASHBOARD_PORT", str(free_port()))
    with EmbeddedServer(make_settings(sqlite_url, tmp_path), dashboard=True) as srv:
        assert srv.dashboard_url is not None
        page = httpx.get(srv.dashboard_url + "/", timeout=30)
        assert page.status_code == 200 and "collapsewatch" in page.text
        layout = httpx.get(srv.dashboard_url + "/_dash-layout", timeout=30)
        assert layout.status_code == 200 and '"url"' in layout.text
        foreign = httpx.get(srv.dashboard_url + "/", headers={"Host": "evil.example"})
        assert foreign.status_code == 421
        assert httpx.get(srv.url + "/healthz", timeout=10).status_code == 200
    assert srv.dashboard_url is None


def test_dashboard_server_on_a_free_port(sqlite_url) -> None:
    from collapsewatch.settings import Settings

    settings = Settings(database_url=sqlite_url)
    with DashboardServer(settings, DashboardSettings(port=0)) as server:
        assert not server.url.endswith(":0")
        assert httpx.get(server.url + "/compare", timeout=30).status_code == 200

"""Fixtures of the integration tests: an isolated SDK environment, a real server, and
an authenticated HTTP client for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import make_settings


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's COLLAPSEWATCH_* settings or writes to the cwd."""
    for name in ("COLLAPSEWATCH_URL", "COLLAPSEWATCH_API_KEY", "VERL_FILE_LOGGER_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLLAPSEWATCH_DATA_DIR", str(tmp_path / "sdk-data"))


@pytest.fixture
def server(db_url: str, tmp_path: Path) -> Iterator[Any]:
    """A real API + worker on loopback over ``db_url`` (SQLite and PostgreSQL)."""
    from collapsewatch.server import EmbeddedServer

    with EmbeddedServer(make_settings(db_url, tmp_path)) as srv:
        yield srv


@pytest.fixture
def http(server: Any) -> Iterator[httpx.Client]:
    """An authenticated HTTP client for the test server."""
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30
    ) as client:
        yield client


def run_id_of(http: httpx.Client, name: str) -> int:
    runs = http.get("/api/v1/runs", params={"name": name}).json()
    assert runs, f"no run {name!r}"
    return int(runs[0]["id"])


def series(http: httpx.Client, run_id: int) -> dict[int, dict[str, float | None]]:
    """The run's served metrics as {step: {name: value}}."""
    points = http.get(f"/api/v1/runs/{run_id}/metrics").json()["points"]
    rows: dict[int, dict[str, float | None]] = {}
    for p in points:
        rows.setdefault(p["step"], {})[p["name"]] = p["value"]
    return rows

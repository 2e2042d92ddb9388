"""Fixtures of the security tests: real servers on loopback with a valid key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from collapsewatch.server import EmbeddedServer
from tests.conftest import make_settings


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def module_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedServer]:
    """One API (no scoring worker) per test module and backend, on a free loopback port."""
    tmp: Path = tmp_path_factory.mktemp(f"server-{request.param}")
    if request.param == "sqlite":
        from collapsewatch.store.migrate import upgrade

        url = f"sqlite:///{tmp / 'cw.db'}"
        upgrade(url)
    else:
        url = request.getfixturevalue("pg_migrated")
    with EmbeddedServer(make_settings(url, tmp), workers=0) as server:
        yield server


@pytest.fixture(scope="module")
def module_http(module_server: EmbeddedServer) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=module_server.url,
        headers={"Authorization": f"Bearer {module_server.api_key}"},
        timeout=30,
    ) as client:
        yield client

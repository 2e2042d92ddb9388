"""Shared fixtures: databases (a fresh PostgreSQL database per session, and SQLite),
and a real API server on loopback.

PostgreSQL tests skip when no server answers at COLLAPSEWATCH_TEST_PG (default
postgresql://postgres@127.0.0.1:5432/postgres), except when COLLAPSEWATCH_REQUIRE_POSTGRES=1
(set by .ci/run), where a missing server is an error.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from collapsewatch.settings import Settings

PG_ADMIN_URL = os.environ.get(
    "COLLAPSEWATCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _pg_available() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except Exception as exc:  # any connection failure means "no server"
        return str(exc)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test session, dropped afterwards."""
    import psycopg

    problem = _pg_available()
    if problem is not None:
        if os.environ.get("COLLAPSEWATCH_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL required but unavailable: {problem}")
        pytest.skip(f"PostgreSQL unavailable: {problem}")
    name = f"cw_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    yield base.replace("postgresql://", "postgresql+psycopg://", 1) + "/" + name
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_migrated(pg_url: str) -> str:
    from collapsewatch.store.migrate import upgrade

    upgrade(pg_url)
    return pg_url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    from collapsewatch.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'cw.db'}"
    upgrade(url)
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test using this runs twice: on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_migrated")


def make_settings(db_url: str, tmp_path: Path, **overrides: object) -> Settings:
    """Settings for a test server: its own data dir, a free port, fast worker polling."""
    from collapsewatch.server import free_port

    values: dict[str, object] = {
        "database_url": db_url,
        "data_dir": tmp_path / "data",
        "port": free_port(),
        "project": f"p_{uuid.uuid4().hex[:8]}",
        "step_idle_seconds": 0.5,
        "poll_interval": 0.05,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def server(db_url: str, tmp_path: Path) -> Iterator[object]:
    """A real API + worker on loopback (uvicorn thread) over ``db_url``."""
    from collapsewatch.server import EmbeddedServer

    with EmbeddedServer(make_settings(db_url, tmp_path)) as srv:
        yield srv

"""Fixtures of the reliability tests: databases of their own, real processes, real servers.

Each fixture cleans up in a finalizer, so a failing test leaves no process, database or
PostgreSQL instance behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import PG_ADMIN_URL, _pg_available
from tests.servers import RestartableApi


def require_or_skip(reason: str) -> None:
    """Skip, except where PostgreSQL tests are required (CI): there, fail."""
    if os.environ.get("COLLAPSEWATCH_REQUIRE_POSTGRES") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def fresh_pg_url() -> Iterator[str]:
    """A new PostgreSQL database at Alembic head for one test, dropped afterwards.

    Not the session's shared test database: worker processes claim every ready step
    they can see, and must see only this test's.
    """
    import psycopg

    from collapsewatch.store.migrate import upgrade

    problem = _pg_available()
    if problem is not None:
        require_or_skip(f"PostgreSQL unavailable: {problem}")
    name = f"cw_rel_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    url = f"{base}/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start `collapsewatch ARGS…` subprocesses (output in tmp_path/<name>.log); any still
    running at the end of the test is killed."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str, name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"{name}.log").open("wb")
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
        proc = subprocess.Popen(
            [sys.executable, "-m", "collapsewatch.cli", *args],
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def restartable_api(db_url: str, tmp_path: Path) -> Iterator[RestartableApi]:
    """The API over ``db_url`` (SQLite and PostgreSQL), running; stopped at the end."""
    from tests.conftest import make_settings

    api = RestartableApi(make_settings(db_url, tmp_path)).start()
    yield api
    api.stop()

"""Engine and session factory for SQLite (embedded default) and PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str, *, pool_size: int = 10) -> Engine:
    """Create an engine for ``url``.

    SQLite gets WAL journaling, a 30 s busy timeout and enforced foreign keys, so the
    API thread and the worker thread of `collapsewatch up` can write to one file. The
    folder of a SQLite file is created if missing (mode 0700, the file 0600). PostgreSQL
    gets a pre-pinged pool so connections broken by a server restart are replaced
    instead of failing a request.

    Raises:
        sqlalchemy.exc.ArgumentError: the URL cannot be parsed.
    """
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if path and path != ":memory:":
            # Owner-only: the file holds every rollout and the alert sinks' secrets.
            Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not Path(path).exists():
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # pragma: no cover - trivial
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=pool_size)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """A session factory whose objects stay readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A transaction: commit on success, roll back on any exception."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from collapsewatch.store.engine import make_engine, make_sessionmaker
from collapsewatch.store.models import Project
from tests.dashboard.seed import Seeded, seed_run


@dataclass
class SeededDb:
    url: str
    factory: sessionmaker[Session]
    run: Seeded
    other: Seeded


@pytest.fixture
def seeded(db_url: str) -> Iterator[SeededDb]:
    """The planted collapse run in a fresh project, plus a healthy run in another."""
    engine = make_engine(db_url)
    factory = make_sessionmaker(engine)
    tag = uuid.uuid4().hex[:8]
    run = seed_run(factory, project=f"dash_{tag}", name=f"collapse-{tag}")
    other = seed_run(
        factory, project=f"other_{tag}", name=f"healthy-{tag}", steps=6, collapse_at=99
    )
    yield SeededDb(url=db_url, factory=factory, run=run, other=other)
    with factory() as session:  # PostgreSQL's test database is shared by the session
        session.execute(delete(Project).where(Project.name.in_([run.project, other.project])))
        session.commit()
    engine.dispose()

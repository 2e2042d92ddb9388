from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from collapsewatch.store import keys, queries
from collapsewatch.store.engine import make_engine, make_sessionmaker
from collapsewatch.store.models import AlertRow, Project, Run
from tests.alerts.receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.stop()


@dataclass
class Store:
    factory: sessionmaker[Session]
    project_id: int
    project: str
    run: Run

    def add_alert(self, rule: str = "template_collapse", severity: str = "critical", **kw) -> int:
        """An alert row as the detectors store it; returns its id."""
        values = {
            "run_id": self.run.id,
            "rule": rule,
            "severity": severity,
            "state": "firing",
            "step_fired": 40,
            "message": "responsiveness fell to 5% of its baseline while diversity held",
            "evidence": {
                "mi_embed": 0.031,
                "baseline": 0.62,
                "token_entropy": 2.1,
                "examples": [
                    {
                        "state_id": "s3",
                        "rollout_id": "r-40-3-1",
                        "reasoning": "let me think step by step <about> the grid & move",
                    }
                ],
            },
        }
        values.update(kw)
        with self.factory() as session:
            alert = AlertRow(**values)
            session.add(alert)
            session.commit()
            return alert.id


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    engine = make_engine(db_url)
    factory = make_sessionmaker(engine)
    with factory() as session:
        project = keys.get_or_create_project(session, f"p_{uuid.uuid4().hex[:8]}")
        run, _ = queries.get_or_create_run(
            session=session, project=project, name="grpo-sokoban", config={}, tags=[]
        )
        session.commit()
        project_id = project.id
        yield Store(factory=factory, project_id=project_id, project=project.name, run=run)
    # PostgreSQL's test database is shared by the session: drop this test's rows (the
    # project cascades to its runs, alerts and deliveries) so no pending delivery of it
    # is due in another test's deliver_due.
    with factory() as session:
        session.execute(delete(Project).where(Project.id == project_id))
        session.commit()
    engine.dispose()

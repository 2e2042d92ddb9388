"""The worker's work queue: when a step is ready, and that claims are exclusive and fenced."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select

from collapsewatch.schema import Rollout
from collapsewatch.store import keys, queries
from collapsewatch.store.engine import make_engine, make_sessionmaker
from collapsewatch.store.models import MetricPointRow, Step, utcnow
from tests.factories import step_batch


@pytest.fixture
def store(db_url: str):
    engine = make_engine(db_url)
    factory = make_sessionmaker(engine)
    with factory() as session:
        project = keys.get_or_create_project(session, f"p_{uuid.uuid4().hex[:8]}")
        run, _ = queries.get_or_create_run(
            session=session, project=project, name="r", config={}, tags=[]
        )
        session.commit()
    yield factory, run
    engine.dispose()


def _ingest(factory, run, step, complete=(), now=None, prefix="r"):
    with factory() as session:
        queries.ingest_rollouts(
            session=session,
            run=run,
            rollouts=[Rollout.model_validate(r) for r in step_batch(step, prefix=prefix)],
            complete_steps=complete,
            now=now,
        )
        session.commit()


def _claim(factory, *, idle=60.0, lease=60.0, now=None, worker="w"):
    with factory() as session:
        return queries.claim_step(
            session=session,
            worker_id=worker,
            token=uuid.uuid4().hex,
            idle_seconds=idle,
            lease_seconds=lease,
            now=now,
        )


def test_open_step_is_not_ready_until_settled(store) -> None:
    factory, run = store
    _ingest(factory, run, 0)
    assert _claim(factory) is None  # still receiving, not complete, not idle
    later = utcnow() + timedelta(seconds=120)
    claim = _claim(factory, now=later)  # idle for longer than 60 s
    assert claim is not None and claim.step == 0


def test_complete_or_newer_step_makes_a_step_ready(store) -> None:
    factory, run = store
    _ingest(factory, run, 0)
    _ingest(factory, run, 1)  # a newer step settles step 0
    first = _claim(factory)
    assert (first.run_id, first.step) == (run.id, 0)
    assert _claim(factory) is None  # step 1 is neither complete nor followed
    _ingest(factory, run, 2, complete=[1, 2])
    assert {_claim(factory).step, _claim(factory).step} == {1, 2}
    assert _claim(factory) is None  # step 0 is still claimed; nothing else is ready


def test_expired_claim_is_taken_over_and_the_stale_worker_is_fenced(store) -> None:
    factory, run = store
    _ingest(factory, run, 0, complete=[0])
    stale = _claim(factory, lease=5, worker="dies")
    assert _claim(factory) is None
    fresh = _claim(factory, now=utcnow() + timedelta(seconds=10), worker="rescuer")
    assert fresh is not None and fresh.step_pk == stale.step_pk
    with factory() as session:
        assert not queries.finish_step(
            session=session, claim=stale, metrics={"x": 1.0}, representation=None
        )
        assert queries.finish_step(
            session=session, claim=fresh, metrics={"x": 2.0}, representation="tfidf"
        )
    with factory() as session:
        values = (
            session.execute(select(MetricPointRow.value).where(MetricPointRow.run_id == run.id))
            .scalars()
            .all()
        )
        step = session.scalar(select(Step).where(Step.id == fresh.step_pk))
    assert values == [2.0]
    assert step.score_count == 1 and step.claim_token is None and not step.dirty


def test_late_rollouts_cause_a_rescore(store) -> None:
    factory, run = store
    _ingest(factory, run, 0, complete=[0])
    claim = _claim(factory)
    with factory() as session:
        queries.finish_step(session=session, claim=claim, metrics={"m": 1.0}, representation=None)
    assert _claim(factory) is None
    _ingest(factory, run, 0, prefix="late")  # new rollout ids at the same step
    again = _claim(factory)
    assert again is not None and again.step == 0


def test_concurrent_claimers_never_share_a_step(store) -> None:
    factory, run = store
    for step in range(12):
        _ingest(factory, run, step, complete=[step])
    claims: list = []
    lock = threading.Lock()

    def claimer(name: str) -> None:
        while True:
            c = _claim(factory, worker=name)
            if c is None:
                return
            with lock:
                claims.append(c)

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(c.step for c in claims) == list(range(12))

"""A worker killed in the middle of scoring: another takes the claim over, and every step
is scored exactly once.

Real `collapsewatch worker` processes on a PostgreSQL database of the test's own, with a
short claim lease. Each round starts a worker, waits until it holds a claim (it is then
importing the scorer or scoring), waits a seeded random moment more and SIGKILLs it.
Later workers take the abandoned claims over once their lease expires.
"""

from __future__ import annotations

import random
import signal
import time
import uuid
from collections.abc import Callable

import pytest
from sqlalchemy import func, select

from collapsewatch.schema import Rollout
from collapsewatch.store import keys, queries
from collapsewatch.store.engine import make_engine, make_sessionmaker
from collapsewatch.store.models import MetricPointRow, Step

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

STEPS = 8
ROLLOUTS_PER_STEP = 160
LEASE_SECONDS = 3
# Names every scored step must carry once (a subset of score_step's output).
CORE_METRICS = {
    "correctness.reward_mean",
    "correctness.success_rate",
    "diversity.distinct_2",
    "responsiveness.mi_embed",
    "structure.num_rollouts",
}


def _rollouts(step: int, rng: random.Random) -> list[Rollout]:
    words = ("left", "right", "up", "down", "box", "goal", "wall", "push", "key", "door")
    out = []
    for i in range(ROLLOUTS_PER_STEP):
        state = f"s{i % 16}"
        reasoning = f"state {state}: " + " ".join(rng.choice(words) for _ in range(60))
        out.append(
            Rollout.model_validate(
                {
                    "rollout_id": f"{step}-{i}",
                    "step": step,
                    "state_id": state,
                    "reward": float(rng.random() < 0.5),
                    "turns": [
                        {
                            "index": 0,
                            "observation": f"grid {state}",
                            "reasoning": reasoning,
                            "action": rng.choice(words[:4]),
                        }
                    ],
                }
            )
        )
    return out


def _wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def test_killed_worker_steps_are_taken_over_and_scored_once(fresh_pg_url, spawn) -> None:
    rng = random.Random(20260601)
    engine = make_engine(fresh_pg_url, pool_size=2)
    factory = make_sessionmaker(engine)
    with factory() as session:
        project = keys.get_or_create_project(session, f"p_{uuid.uuid4().hex[:6]}")
        run, _ = queries.get_or_create_run(
            session=session, project=project, name="kill", config={}, tags=[]
        )
        for step in range(STEPS):
            queries.ingest_rollouts(
                session=session, run=run, rollouts=_rollouts(step, rng), complete_steps=[step]
            )
        session.commit()
    env = {
        "DATABASE_URL": fresh_pg_url,
        "COLLAPSEWATCH_CLAIM_LEASE_SECONDS": str(LEASE_SECONDS),
        "COLLAPSEWATCH_POLL_INTERVAL": "0.1",
        "COLLAPSEWATCH_STEP_IDLE_SECONDS": "3600",
    }

    def claims_of(pid: int) -> list[int]:
        with factory() as session:
            return list(
                session.scalars(
                    select(Step.step).where(
                        Step.run_id == run.id,
                        Step.claim_token.is_not(None),
                        Step.claimed_by.like(f"%:{pid}:%"),
                    )
                )
            )

    killed_holding: list[int] = []
    for round_ in range(3):
        victim = spawn("worker", name=f"victim{round_}", env=env)
        _wait_until(lambda v=victim: bool(claims_of(v.pid)), 90, f"victim {round_} to claim")
        time.sleep(rng.uniform(0.0, 0.6))
        held = claims_of(victim.pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed_holding += held

    # Killed mid-claim at least once, or the test proved nothing.
    assert killed_holding, "no worker was killed while it held a claim"

    for i in range(2):
        spawn("worker", name=f"survivor{i}", env=env)

    def all_scored() -> bool:
        with factory() as session:
            rows = session.execute(
                select(Step.scored_at, Step.claim_token, Step.dirty).where(Step.run_id == run.id)
            ).all()
        return len(rows) == STEPS and all(
            s is not None and token is None and not dirty for s, token, dirty in rows
        )

    _wait_until(all_scored, 180, "every step to be scored")

    with factory() as session:
        counts = dict(
            session.execute(select(Step.step, Step.score_count).where(Step.run_id == run.id)).all()
        )
        repeated = session.execute(
            select(MetricPointRow.step, MetricPointRow.name, func.count())
            .where(MetricPointRow.run_id == run.id)
            .group_by(MetricPointRow.step, MetricPointRow.name)
            .having(func.count() > 1)
        ).all()
        names: dict[int, set[str]] = {}
        for step, name in session.execute(
            select(MetricPointRow.step, MetricPointRow.name).where(MetricPointRow.run_id == run.id)
        ):
            names.setdefault(step, set()).add(name)
    engine.dispose()

    assert counts == dict.fromkeys(range(STEPS), 1), f"score counts {counts}"
    assert repeated == []
    for step in range(STEPS):
        assert names.get(step, set()) >= CORE_METRICS, f"step {step} lacks metrics"

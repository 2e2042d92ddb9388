"""Benchmark: how ingestion, the scoring claim and the read queries scale.

Two axes, in a scratch PostgreSQL database:

- **steps stored**: one run grows to each of ``--sizes`` steps (default 1k, 10k, 100k),
  seeded with COPY (``--rollouts-per-step`` rollouts of one turn and ``--metrics``
  metric points per step, all scored), beside a second run of the same project. At each
  size it times, median of ``--repeat``: ingesting a 256-rollout batch into a new step
  (``queries.ingest_rollouts``), claiming a ready step (``queries.claim_step``, one
  ready among all), and the read queries (runs list, one metric's series, step status,
  the settled series the detectors replay);
- **rollouts per step**: ingesting one step of 64 … 4,096 rollouts (3 turns) and loading
  it back for scoring (``queries.load_step_rollouts``), per rollout.

At the largest size it prints the PostgreSQL plan of every statement those query
functions send (captured as they run, explained with the same parameters, inside a
transaction that is rolled back) and flags a sequential scan of a growing table.
``--plans FILE`` writes the plans as Markdown. The scratch database is dropped.

    python benchmarks/growth.py                         # 1k, 10k, 100k steps: ~3 min
    python benchmarks/growth.py --sizes 1000,10000 --plans /tmp/plans.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from sqlalchemy import event  # noqa: E402

from benchmarks.ingestion import make_rollouts  # noqa: E402
from collapsewatch.schema import Rollout  # noqa: E402
from collapsewatch.store import keys, queries  # noqa: E402
from collapsewatch.store.engine import make_engine, make_sessionmaker  # noqa: E402
from collapsewatch.store.migrate import upgrade  # noqa: E402

GROWING = ("step", "rollout", "turn", "metric_point")
SMALL_RUNS = 5
NEIGHBOUR_STEPS = 200  # steps in each small run
METRIC_NAMES = [
    "correctness.reward_mean",
    "correctness.success_rate",
    "correctness.group_reward_std",
    "correctness.zero_std_fraction",
    "diversity.token_entropy",
    "diversity.distinct_2",
    "diversity.within_state",
    "responsiveness.mi_embed",
    "responsiveness.retrieval_embed",
    "structure.num_rollouts",
    "structure.distinct_states",
    "responsiveness.action_mi",
]


def median_time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


class Store:
    """The scratch database, a project with the big run and a small neighbour."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.name = f"cw_growth_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.pg_url = f"{admin_url.rsplit('/', 1)[0]}/{self.name}"
        self.url = self.pg_url.replace("postgresql://", "postgresql+psycopg://", 1)
        upgrade(self.url)
        self.engine = make_engine(self.url, pool_size=2)
        self.factory = make_sessionmaker(self.engine)
        with self.factory() as session:
            self.project = keys.get_or_create_project(session, "growth")
            self.run, _ = queries.get_or_create_run(
                session=session, project=self.project, name="big", config={}, tags=[]
            )
            # Another team's project in the same database: a few small runs.
            self.small_project = keys.get_or_create_project(session, "neighbours")
            self.small_runs = [
                queries.get_or_create_run(
                    session=session,
                    project=self.small_project,
                    name=f"small-{i}",
                    config={},
                    tags=[],
                )[0]
                for i in range(SMALL_RUNS)
            ]
            self.other = self.small_runs[0]
            session.commit()
        self.steps = 0  # steps stored in the big run (seeded ones)
        self.next_step = 10**8  # steps the measurements add, far past the seeded ones

    def close(self) -> None:
        self.engine.dispose()
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def seed(self, upto: int, rollouts_per_step: int, run: Any = None) -> float:
        """COPY scored steps [self.steps, upto) into the big run (or steps [0, upto) into
        ``run``); returns seconds."""
        t0 = time.perf_counter()
        now = datetime.now(timezone.utc)
        run_id = (run or self.run).id
        steps = range(self.steps if run is None else 0, upto)
        n = len(steps) * rollouts_per_step
        with psycopg.connect(self.pg_url) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT nextval(pg_get_serial_sequence('rollout', 'id')) "
                "FROM generate_series(1, %s)",
                (n,),
            )
            pks = iter([r[0] for r in cur.fetchall()])
            with cur.copy(
                "COPY step (run_id, step, num_rollouts, dirty, completed_at, last_rollout_at, "
                "scored_at, score_count) FROM STDIN"
            ) as copy:
                for s in steps:
                    copy.write_row((run_id, s, rollouts_per_step, False, now, now, now, 1))
            turn_rows = []
            with cur.copy(
                "COPY rollout (id, run_id, rollout_id, step, env_id, state_id, reward, "
                "success, num_turns, metadata, created_at) FROM STDIN"
            ) as copy:
                for s in steps:
                    for i in range(rollouts_per_step):
                        pk = next(pks)
                        copy.write_row(
                            (pk, run_id, f"{s}-{i}", s, "env", f"s{i % 4}", 1.0, True, 1,
                             None, now)
                        )  # fmt: skip
                        turn_rows.append((pk, f"state s{i % 4} step {s}"))
            with cur.copy(
                'COPY turn (rollout_pk, "index", observation, reasoning, action, reward, done) '
                "FROM STDIN"
            ) as copy:
                for pk, text in turn_rows:
                    copy.write_row((pk, 0, text, "think " + text, "up", 0.0, True))
            with cur.copy(
                "COPY metric_point (run_id, step, name, value, representation, created_at) "
                "FROM STDIN"
            ) as copy:
                for s in steps:
                    for k, name in enumerate(METRIC_NAMES):
                        copy.write_row((run_id, s, name, (s % 97) / 97 + k, "tfidf", now))
            conn.commit()
            conn.autocommit = True
            cur.execute("ANALYZE")
        if run is None:
            self.steps = upto
        return time.perf_counter() - t0

    # -- what is timed ------------------------------------------------------------------
    def ingest(self, rollouts: list[Rollout]) -> None:
        step = self.next_step
        self.next_step += 1
        batch = [
            r.model_copy(update={"step": step, "rollout_id": f"{step}-{i}"})
            for i, r in enumerate(rollouts)
        ]
        with self.factory() as session:
            queries.ingest_rollouts(session=session, run=self.run, rollouts=batch)
            session.commit()

    def ready_step(self, template: list[Rollout]) -> None:
        """A new complete step, the only one ready to claim."""
        step = self.next_step
        self.next_step += 1
        batch = [
            r.model_copy(update={"step": step, "rollout_id": f"{step}-{i}"})
            for i, r in enumerate(template[:8])
        ]
        with self.factory() as session:
            queries.ingest_rollouts(
                session=session, run=self.run, rollouts=batch, complete_steps=[step]
            )
            session.commit()

    def claim(self) -> queries.Claim:
        with self.factory() as session:
            claim = queries.claim_step(
                session=session,
                worker_id="bench",
                token=uuid.uuid4().hex,
                idle_seconds=30,
                lease_seconds=300,
            )
        assert claim is not None, "no step was ready"
        return claim

    def finish(self, claim: queries.Claim) -> None:
        with self.factory() as session:
            queries.finish_step(
                session=session, claim=claim, metrics={"structure.num_rollouts": 8.0},
                representation="tfidf",
            )  # fmt: skip

    def reads(self, run: Any = None) -> dict[str, Callable[[], Any]]:
        run_id = (run or self.run).id
        last = self.steps if run is None else NEIGHBOUR_STEPS
        project = self.project if run is None else self.small_project

        def runs() -> Any:
            with self.factory() as s:
                return queries.list_runs(session=s, project=project)

        def series() -> Any:
            with self.factory() as s:
                return queries.metric_series(
                    session=s, run_id=run_id, names=["responsiveness.mi_embed"]
                )

        def series_recent() -> Any:
            with self.factory() as s:
                return queries.metric_series(
                    session=s,
                    run_id=run_id,
                    names=["responsiveness.mi_embed"],
                    since_step=max(0, last - 100),
                )

        def steps() -> Any:
            with self.factory() as s:
                return queries.step_status(session=s, run_id=run_id)

        def settled() -> Any:
            with self.factory() as s:
                return queries.settled_series(session=s, run_id=run_id)

        return {
            "runs list": runs,
            "metric series (1 name)": series,
            "metric series, last 100 steps": series_recent,
            "step status": steps,
            "settled series": settled,
        }


def captured(engine: Any, fn: Callable[[], Any]) -> list[tuple[str, Any]]:
    """The statements (and parameters) ``fn`` sends through ``engine``."""
    seen: list[tuple[str, Any]] = []

    def grab(conn, cursor, statement, parameters, context, executemany) -> None:
        if not executemany:
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", grab)
    try:
        fn()
    finally:
        event.remove(engine, "before_cursor_execute", grab)
    return seen


def explain(store: Store, statement: str, parameters: Any) -> str:
    with psycopg.connect(store.pg_url) as conn:
        try:
            rows = conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + statement, parameters
            ).fetchall()
        finally:
            conn.rollback()
    return "\n".join(r[0] for r in rows)


def seq_scans(plan: str) -> list[str]:
    return [t for t in GROWING if f"Seq Scan on {t} " in plan + " " or f"Seq Scan on {t}\n" in plan]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rollouts-per-step", type=int, default=4)
    parser.add_argument("--per-step-sizes", default="64,256,1024,4096")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plans", type=Path, help="write the plans here (Markdown)")
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "COLLAPSEWATCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    batch = [Rollout.model_validate(r) for r in make_rollouts(256, 3, 8, 256, seed=1)]
    print(f"{platform.node()}: {os.cpu_count()} cpus, python {platform.python_version()}")

    store = Store(args.admin_url)
    plans: list[tuple[str, str, str]] = []
    try:
        with psycopg.connect(store.pg_url) as conn:
            v = conn.info.server_version
        print(f"PostgreSQL {v // 10000}.{v % 10000}; scratch database {store.name}")
        print()
        print(
            f"{'steps stored':>12} {'seed s':>7} {'ingest 256':>11} {'claim':>8} "
            + " ".join(f"{name:>16}" for name in store.reads())
        )
        for size in sizes:
            seeded = store.seed(size, args.rollouts_per_step)
            t_ingest, _ = median_time(lambda: store.ingest(batch), args.repeat)

            claim_times = []
            for _ in range(args.repeat):
                store.ready_step(batch)
                t0 = time.perf_counter()
                claim = store.claim()
                claim_times.append(time.perf_counter() - t0)
                store.finish(claim)
            cells = []
            for fn in store.reads().values():
                t, out = median_time(fn, args.repeat)
                cells.append(f"{t * 1e3:9.1f} ms/{len(out):<6}")
            print(
                f"{size:>12} {seeded:7.1f} {t_ingest * 1e3:8.1f} ms "
                f"{statistics.median(claim_times) * 1e3:5.1f} ms " + " ".join(cells)
            )
        print("(read cells: median time / rows returned)")

        # Plans at the largest size, of every statement each query function sends. The
        # reads run twice: on the big run (they read most of the table, so a sequential
        # scan can be the best plan) and on a small run of another project, where a
        # sequential scan would mean a missing index: those, the claim and the ingest
        # must use indexes.
        for small in store.small_runs:
            store.seed(NEIGHBOUR_STEPS, args.rollouts_per_step, run=small)
        store.ready_step(batch)
        targets: list[tuple[str, Callable[[], Any], bool]] = [
            ("ingest_rollouts (256 rollouts)", lambda: store.ingest(batch), True),
            ("claim_step", store.claim, True),
            *((f"{k}, small run", fn, True) for k, fn in store.reads(store.other).items()),
            *((f"{k}, big run", fn, False) for k, fn in store.reads().items()),
            ("load_step_rollouts", lambda: _load(store), True),
        ]
        print()
        print(
            f"Plans with {store.steps} steps in the big run and, in another project, "
            f"{SMALL_RUNS} small runs of {NEIGHBOUR_STEPS} steps:"
        )
        flagged = []
        for label, fn, must_index in targets:
            for statement, params in captured(store.engine, fn):
                verb = statement.lstrip().split(None, 1)[0].upper()
                if verb not in ("SELECT", "UPDATE", "INSERT", "WITH"):
                    continue
                if "pg_catalog" in statement:
                    continue
                plan = explain(store, statement, params)
                bad = seq_scans(plan)
                plans.append((label, statement, plan))
                note = ""
                if bad:
                    note = ("  SEQ SCAN: " if must_index else "  (reads most of: ") + ", ".join(bad)
                    note += "" if must_index else ")"
                print(f"\n-- {label}{note}")
                print(statement.strip())
                print(plan)
                if must_index:
                    flagged += [(label, t) for t in bad]
        _rollouts_per_step(store, args)
    finally:
        store.close()

    if args.plans:
        _write_plans(args.plans, plans, sizes[-1])
    print()
    if flagged:
        print("FAIL: sequential scans of growing tables: " + json.dumps(flagged))
        return 1
    print("PASS: every query reaches the growing tables through an index")
    return 0


def _load(store: Store) -> Any:
    with store.factory() as session:
        return queries.load_step_rollouts(session=session, run_id=store.run.id, step=5)


def _rollouts_per_step(store: Store, args: argparse.Namespace) -> None:
    print()
    print(
        f"{'rollouts/step':>13} {'ingest':>10} {'µs/rollout':>11} {'load':>10} {'µs/rollout':>11}"
    )
    for n in (int(s) for s in args.per_step_sizes.split(",")):
        rollouts = [Rollout.model_validate(r) for r in make_rollouts(n, 3, 8, n, seed=n)]
        steps: list[int] = []

        def ingest(rollouts: list[Rollout] = rollouts, steps: list[int] = steps) -> None:
            steps.append(store.next_step)
            store.ingest(rollouts)

        t_in, _ = median_time(ingest, 3)

        def load(step: int = steps[-1]) -> Any:
            with store.factory() as session:
                return queries.load_step_rollouts(session=session, run_id=store.run.id, step=step)

        t_load, out = median_time(load, 3)
        assert len(out) == n
        print(
            f"{n:>13} {t_in * 1e3:7.1f} ms {t_in / n * 1e6:11.1f} {t_load * 1e3:7.1f} ms "
            f"{t_load / n * 1e6:11.1f}"
        )


def _write_plans(path: Path, plans: list[tuple[str, str, str]], size: int) -> None:
    lines = [f"### Query plans with {size:,} steps stored", ""]
    for label, statement, plan in plans:
        lines += [f"**{label}**", "", "```sql", statement.strip(), "```", "```", plan, "```", ""]
    path.write_text("\n".join(lines))
    print(f"plans written to {path}")


if __name__ == "__main__":
    sys.exit(main())

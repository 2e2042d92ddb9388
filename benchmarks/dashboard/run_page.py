"""Benchmark: the run page's data callback on 1,000 steps × 20 metrics in PostgreSQL.

Creates a scratch database, stores one run with 1,000 scored steps of 20 metrics
(20,000 metric points, some undefined) and a few alerts, then times:

- ``select``: the bare ``SELECT step, name, value … ORDER BY name, step`` of those rows;
- ``callback``: the run page's data callback (``dashboard.app.run_page_outputs``) on a
  first load: queries, the figure, the alerts table, and the JSON Dash sends;
- ``refresh``: the same callback when nothing changed (what a live page costs every
  few seconds);

and prints the medians, the ratio callback / select, and whether the callback stays
under 1 s. The scratch database is dropped afterwards.

    python benchmarks/dashboard/run_page.py
    python benchmarks/dashboard/run_page.py --steps 5000 --repeat 7
    COLLAPSEWATCH_TEST_PG=postgresql://u@host:5432/postgres python benchmarks/dashboard/run_page.py
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from sqlalchemy import insert, text  # noqa: E402

from collapsewatch.store import keys, queries  # noqa: E402
from collapsewatch.store.engine import make_engine, make_sessionmaker  # noqa: E402
from collapsewatch.store.migrate import upgrade  # noqa: E402
from collapsewatch.store.models import AlertRow, MetricPointRow, Step, utcnow  # noqa: E402

METRICS = [
    "diversity.token_entropy",
    "diversity.within_state",
    "diversity.distinct_2",
    "diversity.vendi",
    "responsiveness.mi_embed",
    "responsiveness.retrieval_embed",
    "responsiveness.mi_logprob",
    "responsiveness.retrieval_acc",
    "responsiveness.mi_zscore",
    "responsiveness.action_mi",
    "correctness.reward_mean",
    "correctness.success_rate",
    "correctness.valid_format_rate",
    "correctness.group_reward_std",
    "correctness.zero_std_fraction",
    "structure.num_rollouts",
    "structure.distinct_states",
    "diversity.distinct_1",
    "responsiveness.mi_ema_z",
    "correctness.reward_std",
]
SELECT = text("SELECT step, name, value FROM metric_point WHERE run_id = :run ORDER BY name, step")


def seed(factory, steps: int) -> int:
    now = utcnow()
    with factory() as session:
        project = keys.get_or_create_project(session, f"bench_{uuid.uuid4().hex[:6]}")
        run, _ = queries.get_or_create_run(
            session=session, project=project, name="bench", config={}, tags=[]
        )
        session.execute(
            insert(Step.__table__),
            [
                {
                    "run_id": run.id,
                    "step": s,
                    "num_rollouts": 64,
                    "dirty": False,
                    "last_rollout_at": now,
                    "score_count": 1,
                }
                for s in range(steps)
            ],
        )
        rows = []
        for s in range(steps):
            for k, name in enumerate(METRICS):
                # Every 17th point undefined, as real series have gaps.
                value = None if (s + k) % 17 == 0 else math.sin(s / 50 + k) + k / 10
                rows.append(
                    {
                        "run_id": run.id,
                        "step": s,
                        "name": name,
                        "value": value,
                        "representation": "tfidf",
                        "created_at": now,
                    }
                )
        session.execute(insert(MetricPointRow.__table__), rows)
        for k, rule in enumerate(["template_collapse", "entropy_collapse", "no_signal"] * 2):
            fired = 100 + 150 * k
            session.add(
                AlertRow(
                    run_id=run.id,
                    rule=rule,
                    severity="critical" if k % 2 else "warning",
                    state="resolved" if k < 5 else "firing",
                    step_fired=fired,
                    step_resolved=fired + 40 if k < 5 else None,
                    message=f"{rule} at step {fired}",
                    evidence={"value": 0.1},
                )
            )
        session.commit()
        return run.id


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "COLLAPSEWATCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="A PostgreSQL URL allowed to CREATE DATABASE.",
    )
    args = parser.parse_args()

    from dash._utils import to_json

    from dashboard.app import DashboardData, run_page_outputs
    from dashboard.settings import DashboardSettings

    name = f"cw_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = args.admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    url = f"{base}/{name}"
    engine = None
    try:
        upgrade(url)
        engine = make_engine(url)
        factory = make_sessionmaker(engine)
        started = time.perf_counter()
        run_id = seed(factory, args.steps)
        print(
            f"seeded {args.steps} steps × {len(METRICS)} metrics = "
            f"{args.steps * len(METRICS)} points in {time.perf_counter() - started:.1f} s"
        )
        data = DashboardData(factory, DashboardSettings())

        def bare_select() -> None:
            with factory() as session:
                rows = session.execute(SELECT, {"run": run_id}).all()
            assert len(rows) == args.steps * len(METRICS)

        def callback() -> None:
            out = run_page_outputs(data, run_id, None, 5.0, 60.0)
            to_json(list(out))  # what Dash sends to the browser

        signature = data.run_page(run_id).signature

        def refresh() -> None:
            to_json(list(run_page_outputs(data, run_id, signature, 5.0, 60.0)))

        callback()  # warm: imports, connection pool, plotly validators
        bare_select()
        t_select = timed(bare_select, args.repeat)
        t_callback = timed(callback, args.repeat)
        t_refresh = timed(refresh, args.repeat)
        payload = len(to_json(list(run_page_outputs(data, run_id, None, 5.0, 60.0))))
    finally:
        if engine is not None:
            engine.dispose()
        with psycopg.connect(args.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    med = statistics.median
    for label, times in (
        ("bare SELECT of the rows", t_select),
        ("run page data callback", t_callback),
        ("refresh, nothing changed", t_refresh),
    ):
        print(f"{label:<26}median {med(times) * 1000:8.1f} ms  (min {min(times) * 1000:.1f})")
    print(f"ratio callback / SELECT   {med(t_callback) / med(t_select):.1f}×")
    print(f"response size             {payload / 1024:.0f} KiB")
    ok = med(t_callback) < 1.0
    print(("PASS" if ok else "FAIL") + f": callback {'under' if ok else 'over'} 1 s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

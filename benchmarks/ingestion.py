"""Benchmark: rollouts/s through the HTTP batch API into PostgreSQL, against COPY.

Creates a scratch PostgreSQL database, migrates it, starts the API as its own process
(``collapsewatch api``, as in production), and in the same run writes the same
rollouts two ways:

- ``http``: several concurrent clients POST batches to ``/api/v1/runs/{id}/rollouts``
  (each client its own run, so batches do not wait on each other's step row). With
  ``--via httpx`` the bodies are encoded before the clock starts, so the figure is the
  server's; with ``--via sdk`` each client is a ``collapsewatch.Client`` in this
  process (validation and encoding in its sender thread count too);
- ``copy``: the raw limit: the same rows (rollout, turn and the step upsert) written
  by PostgreSQL ``COPY`` through psycopg's ``cursor.copy``, from as many concurrent
  connections, in the same batch size, one transaction per batch.

The two alternate ``--repeat`` times into fresh runs (so neither always meets the
bigger tables), every run is checked to hold exactly the rows sent, and the medians
are printed with the ratio http / copy. The target is at least 0.5. The scratch
database is dropped afterwards.

    python benchmarks/ingestion.py                          # 4 clients, 8,192 rollouts
    python benchmarks/ingestion.py --via sdk
    python benchmarks/ingestion.py --rollouts 16384 --turns 5 --clients 8 --repeat 3
    COLLAPSEWATCH_TEST_PG=postgresql://u@host:5432/postgres python benchmarks/ingestion.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import psycopg  # noqa: E402

from collapsewatch.server import free_port  # noqa: E402
from collapsewatch.store import keys  # noqa: E402
from collapsewatch.store.engine import make_engine, make_sessionmaker, session_scope  # noqa: E402
from collapsewatch.store.migrate import upgrade  # noqa: E402

_TEXT = (
    "the agent box goal wall left right up down move push cell grid key door step plan "
    "check state next reach avoid target path blocked open near far first then because"
)
WORDS = _TEXT.split()
ROLLOUT_COLUMNS = (
    "id, run_id, rollout_id, step, env_id, state_id, reward, success, truncated, num_turns, "
    "metadata, created_at"
)
TURN_COLUMNS = (
    'rollout_pk, "index", observation, reasoning, action, reward, done, token_entropy, '
    "num_tokens, logprob, valid_format"
)
STEP_UPSERT = """
INSERT INTO step (run_id, step, num_rollouts, dirty, last_rollout_at, score_count)
VALUES (%s, %s, %s, true, %s, 0)
ON CONFLICT (run_id, step) DO UPDATE SET dirty = true,
    last_rollout_at = excluded.last_rollout_at,
    num_rollouts = step.num_rollouts + excluded.num_rollouts
"""


# -- data ------------------------------------------------------------------------------


def make_rollouts(n: int, turns: int, group: int, per_step: int, seed: int) -> list[dict]:
    """``n`` wire-format rollouts shaped like an agent's: ``turns`` turns each with a
    ~400-character observation, ~250-character reasoning and a short action."""
    rng = random.Random(seed)

    def text(words: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(words))

    out = []
    for i in range(n):
        step, k = divmod(i, per_step)
        state = f"s{step}-{k // group}"
        out.append(
            {
                "rollout_id": f"r{i}",
                "step": step,
                "env_id": "sokoban",
                "state_id": state,
                "reward": float(rng.random() < 0.4),
                "success": rng.random() < 0.4,
                "turns": [
                    {
                        "index": t,
                        "observation": f"[{state}] " + text(80),
                        "reasoning": text(50),
                        "action": rng.choice(["left", "right", "up", "down"]),
                        "reward": 0.0,
                        "done": t == turns - 1,
                        "token_entropy": round(rng.uniform(0.2, 2.0), 4),
                        "num_tokens": 60 + t,
                        "logprob": -round(rng.uniform(5, 40), 3),
                    }
                    for t in range(turns)
                ],
                "metadata": {"seed": i % 997},
            }
        )
    return out


def batches(rollouts: list[dict], size: int) -> list[list[dict]]:
    return [rollouts[i : i + size] for i in range(0, len(rollouts), size)]


# -- the scratch database and the API process -------------------------------------------


class Scratch:
    """A fresh database with the schema at head, one project and key, and the API."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.name = f"cw_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        base = admin_url.rsplit("/", 1)[0]
        self.pg_url = f"{base}/{self.name}"
        self.url = self.pg_url.replace("postgresql://", "postgresql+psycopg://", 1)
        self.apis: list[subprocess.Popen[bytes]] = []
        self._logs: list[Any] = []
        upgrade(self.url)
        self.key = keys.generate_key()
        engine = make_engine(self.url, pool_size=1)
        with session_scope(make_sessionmaker(engine)) as session:
            keys.register_key(session, project="bench", key=self.key)
        engine.dispose()

    def start_api(self, log: Path) -> str:
        """One more `collapsewatch api` process on its own port; returns its URL."""
        port = free_port()
        env = {**os.environ, "DATABASE_URL": self.url, "COLLAPSEWATCH_PORT": str(port)}
        log = log.with_name(f"{log.stem}{len(self.apis)}{log.suffix}")
        self._logs.append(log.open("wb"))
        api = subprocess.Popen(
            [sys.executable, "-m", "collapsewatch.cli", "api"],
            env=env,
            stdout=self._logs[-1],
            stderr=subprocess.STDOUT,
        )
        self.apis.append(api)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if api.poll() is not None:
                raise RuntimeError(f"the API exited; see {log}")
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    return base
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the API did not start; see {log}")

    def close(self) -> None:
        for api in self.apis:
            api.terminate()
            try:
                api.wait(10)
            except subprocess.TimeoutExpired:
                api.kill()
        for log in self._logs:
            log.close()
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (Linux /proc; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def backend_pids(pg_url: str, database: str) -> list[int]:
    """PostgreSQL server processes connected to ``database`` now (not this query's)."""
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return [r[0] for r in rows]


def create_runs(base: str, key: str, names: list[str]) -> list[int]:
    headers = {"Authorization": f"Bearer {key}"}
    ids = []
    for name in names:
        resp = httpx.post(f"{base}/api/v1/runs", json={"name": name}, headers=headers, timeout=30)
        resp.raise_for_status()
        ids.append(resp.json()["id"])
    return ids


def stored(pg_url: str, run_ids: list[int]) -> tuple[int, int]:
    """(rollouts, turns) stored in these runs."""
    with psycopg.connect(pg_url) as conn:
        return conn.execute(
            "SELECT count(DISTINCT r.id), count(t.id) FROM rollout r "
            "JOIN turn t ON t.rollout_pk = r.id WHERE r.run_id = ANY(%s)",
            (run_ids,),
        ).fetchone()


# -- the two writers -------------------------------------------------------------------


def in_threads(work: list[Callable[[], None]]) -> float:
    """Run each callable in its own thread; wall seconds until all are done."""
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported after the join
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(fn)) for fn in work]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed


def http_writer(base: str, key: str, run_id: int, parts: list[list[dict]]) -> Callable[[], None]:
    bodies = [json.dumps({"rollouts": b}).encode() for b in parts]
    client = httpx.Client(
        base_url=base,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=120,
    )

    def send() -> None:
        with client:
            for body in bodies:
                resp = client.post(f"/api/v1/runs/{run_id}/rollouts", content=body)
                if resp.status_code != 200:
                    raise RuntimeError(f"{resp.status_code}: {resp.text[:300]}")
                assert resp.json()["accepted"] > 0

    return send


def sdk_writer(base: str, key: str, run: str, parts: list[list[dict]], spool: Path):
    from collapsewatch import Client

    client = Client(
        run, url=base, api_key=key, spool_dir=spool, batch_size=len(parts[0]), timeout=120
    )

    def send() -> None:
        for b in parts:
            client.log_rollouts(b[0]["step"], b)
        if not client.flush(timeout=600):
            raise RuntimeError("the SDK did not deliver within 600 s")
        stats = client.stats()
        client.close()
        if stats.sent != sum(map(len, parts)) or stats.spooled:
            raise RuntimeError(f"the SDK did not deliver everything: {stats}")

    return send


copy_conns: list[psycopg.Connection] = []


def copy_writer(pg_url: str, run_id: int, parts: list[list[dict]]) -> Callable[[], None]:
    """COPY the same rows, one transaction per batch. Rollout ids come from the table's
    sequence first, so the turn rows can name their rollout."""
    conn = psycopg.connect(pg_url)
    copy_conns.append(conn)  # closed after the CPU of its server process is read

    def send() -> None:
        for part in parts:
            now = datetime.now(timezone.utc)
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(
                    "SELECT nextval(pg_get_serial_sequence('rollout', 'id')) "
                    "FROM generate_series(1, %s)",
                    (len(part),),
                )
                pks = [row[0] for row in cur.fetchall()]
                with cur.copy(f"COPY rollout ({ROLLOUT_COLUMNS}) FROM STDIN") as copy:
                    for pk, r in zip(pks, part, strict=True):
                        copy.write_row(
                            (
                                pk,
                                run_id,
                                r["rollout_id"],
                                r["step"],
                                r["env_id"],
                                r["state_id"],
                                r["reward"],
                                r["success"],
                                None,
                                len(r["turns"]),
                                json.dumps(r["metadata"]),
                                now,
                            )
                        )
                with cur.copy(f"COPY turn ({TURN_COLUMNS}) FROM STDIN") as copy:
                    for pk, r in zip(pks, part, strict=True):
                        for t in r["turns"]:
                            copy.write_row(
                                (
                                    pk,
                                    t["index"],
                                    t["observation"],
                                    t["reasoning"],
                                    t["action"],
                                    t["reward"],
                                    t["done"],
                                    t["token_entropy"],
                                    t["num_tokens"],
                                    t["logprob"],
                                    None,
                                )
                            )
                per_step: dict[int, int] = {}
                for r in part:
                    per_step[r["step"]] = per_step.get(r["step"], 0) + 1
                cur.executemany(
                    STEP_UPSERT, [(run_id, s, n, now) for s, n in sorted(per_step.items())]
                )

    return send


# -- main ------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=8192, help="per writer and repeat")
    parser.add_argument("--turns", type=int, default=3, help="turns per rollout")
    parser.add_argument("--batch", type=int, default=256, help="rollouts per request")
    parser.add_argument("--per-step", type=int, default=512, help="rollouts per step")
    parser.add_argument("--group", type=int, default=8, help="rollouts per state")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--via", choices=["httpx", "sdk"], default="httpx")
    parser.add_argument(
        "--api-procs",
        type=int,
        default=1,
        help="API processes (as replicas behind a proxy); clients are spread over them",
    )
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "COLLAPSEWATCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="A PostgreSQL URL allowed to CREATE DATABASE.",
    )
    parser.add_argument("--api-log", type=Path, default=Path("/tmp/cw_bench_ingestion_api.log"))
    args = parser.parse_args()

    data = make_rollouts(args.rollouts, args.turns, args.group, args.per_step, seed=0)
    parts = batches(data, args.batch)
    share = [parts[i :: args.clients] for i in range(args.clients)]
    n_rollouts = len(data)
    n_turns = n_rollouts * args.turns
    body_mb = sum(len(json.dumps({"rollouts": p})) for p in parts) / 1e6
    print(
        f"{platform.node()}: {os.cpu_count()} cpus, python {platform.python_version()}, "
        f"psycopg {psycopg.__version__}"
    )
    print(
        f"{n_rollouts} rollouts × {args.turns} turns ({n_turns} turns, {body_mb:.1f} MB of "
        f"JSON) in batches of {args.batch}, {args.clients} concurrent {args.via} clients, "
        f"{args.api_procs} API process(es), {args.repeat} repeats"
    )
    scratch = Scratch(args.admin_url)
    times: dict[str, list[float]] = {"http": [], "copy": []}
    cpu: dict[str, list[tuple[float, ...]]] = {"http": [], "copy": []}
    try:
        bases = [scratch.start_api(args.api_log) for _ in range(args.api_procs)]
        base = bases[0]
        with psycopg.connect(scratch.pg_url) as conn:
            server_version = conn.info.server_version
        print(
            f"PostgreSQL {server_version // 10000}.{server_version % 10000}, "
            f"API at {', '.join(bases)}"
        )
        # Warm up: imports, the connection pool, plans.
        (warm,) = create_runs(base, scratch.key, ["warm-up"])
        http_writer(base, scratch.key, warm, batches(make_rollouts(64, 1, 8, 64, 1), 32))()
        for rep in range(args.repeat):
            names = [f"rep{rep}-{k}-{c}" for k in ("http", "copy") for c in range(args.clients)]
            ids = create_runs(base, scratch.key, names)
            http_ids, copy_ids = ids[: args.clients], ids[args.clients :]
            if args.via == "httpx":
                work = [
                    http_writer(bases[c % len(bases)], scratch.key, rid, share[c])
                    for c, rid in enumerate(http_ids)
                ]
            else:
                work = [
                    sdk_writer(
                        bases[c % len(bases)],
                        scratch.key,
                        names[c],
                        share[c],
                        Path(f"/tmp/cw_bench_spool_{scratch.name}_{rep}_{c}"),
                    )
                    for c in range(args.clients)
                ]
            copies = [copy_writer(scratch.pg_url, rid, share[c]) for c, rid in enumerate(copy_ids)]
            order = [("http", work), ("copy", copies)]
            if rep % 2:
                order.reverse()
            for kind, writers in order:
                api = [a.pid for a in scratch.apis] if kind == "http" else []
                pg = (
                    backend_pids(scratch.pg_url, scratch.name)
                    if kind == "http"
                    else [c.info.backend_pid for c in copy_conns]
                )
                before = (cpu_seconds(api), cpu_seconds(pg), time.process_time())
                elapsed = in_threads(writers)
                after = (cpu_seconds(api), cpu_seconds(pg), time.process_time())
                cpu[kind].append(tuple(b - a for a, b in zip(before, after, strict=True)))
                while kind == "copy" and copy_conns:
                    copy_conns.pop().close()
                times[kind].append(elapsed)
                got = stored(scratch.pg_url, http_ids if kind == "http" else copy_ids)
                if got != (n_rollouts, n_turns):
                    raise RuntimeError(f"{kind}: stored {got}, expected {(n_rollouts, n_turns)}")
                api_cpu, pg_cpu, own_cpu = cpu[kind][-1]
                print(
                    f"  repeat {rep} {kind:<4} {elapsed:6.2f} s  "
                    f"{n_rollouts / elapsed:8.0f} rollouts/s  {n_turns / elapsed:8.0f} turns/s  "
                    f"cpu s: API {api_cpu:5.2f}  PostgreSQL {pg_cpu:5.2f}  clients {own_cpu:5.2f}"
                )
    finally:
        scratch.close()

    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print(f"{'writer':<24}{'rollouts/s':>12}{'turns/s':>12}{'MB/s':>8}")
    procs = f", {args.api_procs} procs" if args.api_procs > 1 else ""
    for kind, label in (("http", f"HTTP API ({args.via}{procs})"), ("copy", "COPY (raw limit)")):
        t = med[kind]
        print(f"{label:<24}{n_rollouts / t:12.0f}{n_turns / t:12.0f}{body_mb / t:8.1f}")
    ratio = med["copy"] / med["http"]
    print(f"ratio HTTP / COPY        {ratio:.2f}  (target >= 0.50)")
    ok = ratio >= 0.5
    print(("PASS" if ok else "FAIL") + f": the API ingests at {ratio:.0%} of the COPY rate")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

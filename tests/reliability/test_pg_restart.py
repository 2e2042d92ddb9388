"""PostgreSQL restarted under load: the API answers 503 while it is gone, recovers by
itself, and loses no acknowledged rollout.

The database is a private PostgreSQL instance made for this test (initdb in a temporary
folder, its own port, its socket in that folder), never the shared server: stopping and
starting it disturbs nobody. It is stopped and removed in a finalizer, even on failure.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from collapsewatch.server import EmbeddedServer, free_port
from collapsewatch.store.engine import make_engine, make_sessionmaker
from collapsewatch.store.models import RolloutRow
from tests.conftest import make_settings
from tests.reliability.conftest import require_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _pg_bin() -> Path | None:
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return versions[-1] if versions else None


class PrivatePostgres:
    """A throwaway PostgreSQL cluster: ``initdb`` + ``pg_ctl`` as the postgres user."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="cw_pg_restart_"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._prefix = ["runuser", "-u", "postgres", "--"]
        else:
            self._prefix = []
        self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
            "--no-sync",
        )  # fmt: skip

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._prefix, str(self.bin / tool), *args],
            check=True,
            capture_output=True,
            timeout=120,
        )

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.dir} -c fsync=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.SubprocessError):
                self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    bin_dir = _pg_bin()
    if bin_dir is None:
        require_or_skip("no PostgreSQL server binaries (initdb) under /usr/lib/postgresql")
    if os.geteuid() != 0 and pwd.getpwuid(os.geteuid()).pw_name != "postgres":
        require_or_skip("a private PostgreSQL instance needs root (runuser) or the postgres user")
    pg = PrivatePostgres(bin_dir)
    try:
        pg.start()
        yield pg
    finally:
        pg.remove()


@dataclass
class Load:
    """A client thread that posts small batches of new rollouts as fast as it is answered."""

    url: str
    key: str
    run_id: int
    acked: set[str] = field(default_factory=set)
    replies: list[tuple[float, int, str, str | None]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        n = 0
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as http:
            while not self.stop.is_set():
                ids = [f"r{n + i}" for i in range(20)]
                n += 20
                body = {
                    "rollouts": [
                        {
                            "rollout_id": rid,
                            "step": n // 200,
                            "state_id": f"s{i % 4}",
                            "reward": 1.0,
                            "turns": [{"index": 0, "reasoning": f"think {rid}"}],
                        }
                        for i, rid in enumerate(ids)
                    ]
                }
                try:
                    resp = http.post(f"/api/v1/runs/{self.run_id}/rollouts", json=body)
                except httpx.TransportError as exc:  # the API itself must not go away
                    self.replies.append((time.monotonic(), -1, type(exc).__name__, None))
                    continue
                self.replies.append(
                    (
                        time.monotonic(),
                        resp.status_code,
                        resp.headers.get("content-type", ""),
                        resp.headers.get("retry-after"),
                    )
                )
                if 200 <= resp.status_code < 300:
                    self.acked.update(ids)
                time.sleep(0.005)

    def count(self, since: float, status: int) -> int:
        return sum(1 for t, s, _, _ in self.replies if t >= since and s == status)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_api_answers_503_while_postgres_is_down_and_recovers(private_pg, tmp_path, mode) -> None:
    """``fast`` ends open sessions cleanly; ``immediate`` is a crash (recovery on start)."""
    import psycopg

    with psycopg.connect(private_pg.admin_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE cw")
    url = f"postgresql+psycopg://postgres@127.0.0.1:{private_pg.port}/cw"
    settings = make_settings(url, tmp_path)
    with EmbeddedServer(settings, workers=0) as server:
        headers = {"Authorization": f"Bearer {server.api_key}"}
        run_id = httpx.post(
            f"{server.url}/api/v1/runs", json={"name": "restart"}, headers=headers
        ).json()["id"]
        load = Load(server.url, server.api_key, run_id)
        thread = threading.Thread(target=load.run, daemon=True)
        thread.start()
        try:
            _wait(lambda: len(load.acked) >= 200, 30, "acknowledged rollouts before the stop")
            private_pg.stop(mode)
            stopped = time.monotonic()
            _wait(lambda: load.count(stopped, 503) >= 5, 30, "503 answers while PostgreSQL is down")
            health = httpx.get(f"{server.url}/healthz", timeout=10)
            acked_while_down = len(load.acked)
            private_pg.start()
            restarted = time.monotonic()
            _wait(lambda: load.count(restarted, 200) >= 20, 60, "the API to recover by itself")
            after = httpx.get(f"{server.url}/healthz", timeout=10)
        finally:
            load.stop.set()
            thread.join(30)

    statuses = {s for _, s, _, _ in load.replies}
    assert statuses <= {200, 503}, f"unexpected answers: {sorted(statuses)}"
    down = [(ctype, retry) for t, s, ctype, retry in load.replies if s == 503]
    assert all(ctype.startswith("application/problem+json") and retry for ctype, retry in down)
    assert health.status_code == 503 and health.headers.get("retry-after")
    assert after.status_code == 200
    assert len(load.acked) > acked_while_down  # acknowledged again after the restart

    engine = make_engine(url, pool_size=1)
    with make_sessionmaker(engine)() as session:
        stored = set(
            session.scalars(select(RolloutRow.rollout_id).where(RolloutRow.run_id == run_id))
        )
    engine.dispose()
    assert load.acked <= stored, f"{len(load.acked - stored)} acknowledged rollouts lost"

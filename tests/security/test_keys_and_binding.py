"""API keys are stored only as hashes, and every server binds to loopback by default."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select

from collapsewatch.server import free_port
from collapsewatch.store.engine import make_engine

pytestmark = pytest.mark.slow


def _everything_stored(url: str) -> str:
    """Every row of every table, as text."""
    engine = make_engine(url, pool_size=1)
    meta = MetaData()
    meta.reflect(engine)
    parts = []
    with engine.connect() as conn:
        for table in meta.sorted_tables:
            parts += [repr(tuple(row)) for row in conn.execute(select(table))]
    engine.dispose()
    return "\n".join(parts)


def test_api_keys_are_stored_hashed_only(module_server, tmp_path: Path) -> None:
    url = module_server.settings.resolved_database_url
    served = module_server.api_key
    env = {**os.environ, "DATABASE_URL": url, "COLLAPSEWATCH_DATA_DIR": str(tmp_path)}
    created = subprocess.run(
        [sys.executable, "-m", "collapsewatch.cli", "keys", "create", "--project", "cli-made"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    assert created.startswith("cw_") and len(created) > 40

    dump = _everything_stored(url)
    for key in (served, created):
        assert key not in dump
        assert key[3:] not in dump  # nor its random part
        assert hashlib.sha256(key.encode()).hexdigest() in dump


def _listening(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp* shows them) that listen on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
def test_api_and_dashboard_bind_loopback_by_default(tmp_path: Path) -> None:
    from collapsewatch.store.migrate import upgrade

    db = f"sqlite:///{tmp_path / 'cw.db'}"
    upgrade(db)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLAPSEWATCH_")}
    env.pop("DATABASE_URL", None)
    ports = {name: free_port() for name in ("up_api", "up_dash", "api", "dash")}
    commands = {
        "up": (
            ["up", "--data-dir", str(tmp_path / "up"), "--port", str(ports["up_api"])],
            {"COLLAPSEWATCH_DASHBOARD_PORT": str(ports["up_dash"])},
        ),
        "api": (["api"], {"DATABASE_URL": db, "COLLAPSEWATCH_PORT": str(ports["api"])}),
        "dashboard": (
            ["dashboard"],
            {"DATABASE_URL": db, "COLLAPSEWATCH_DASHBOARD_PORT": str(ports["dash"])},
        ),
    }
    procs = []
    try:
        for name, (args, extra) in commands.items():
            log = (tmp_path / f"{name}.log").open("wb")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "collapsewatch.cli", *args],
                    env={**env, **extra, "COLLAPSEWATCH_DATA_DIR": str(tmp_path / name)},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            log.close()
        deadline = time.monotonic() + 90
        while not all(_listening(p) for p in ports.values()):
            dead = [p.args for p in procs if p.poll() is not None]
            assert not dead, f"exited early: {dead}; see {tmp_path}/*.log"
            assert time.monotonic() < deadline, f"not listening: {ports}"
            time.sleep(0.2)
        for name, port in ports.items():
            assert _listening(port) <= LOOPBACK, f"{name} listens on {_listening(port)}"
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()

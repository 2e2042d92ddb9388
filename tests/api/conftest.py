from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest


@pytest.fixture
def http(server) -> Iterator[httpx.Client]:
    """An authenticated HTTP client for the test server."""
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30
    ) as c:
        yield c


@pytest.fixture
def run_id(http: httpx.Client) -> int:
    resp = http.post("/api/v1/runs", json={"name": "run-a", "config": {"lr": 1e-6}})
    assert resp.status_code == 201, resp.text
    return int(resp.json()["id"])

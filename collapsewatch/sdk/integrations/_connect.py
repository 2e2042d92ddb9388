"""Where the server is and who we are: the URL, key, run settings shared by an
integration's rollout client, metrics sender and alert watcher."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collapsewatch.sdk._client import Client, _load_settings, _read_key_file


@dataclass(frozen=True)
class Connection:
    """Everything needed to reach one run on one server, resolved once."""

    run: str
    url: str
    api_key: str | None
    config: Any = None
    tags: list[str] = field(default_factory=list)


def resolve(
    run: str,
    *,
    url: str | None = None,
    api_key: str | None = None,
    config: Any = None,
    tags: list[str] | None = None,
) -> Connection:
    """The connection the SDK's ``Client`` would use for these arguments: ``url`` or
    ``COLLAPSEWATCH_URL``; ``api_key`` or ``COLLAPSEWATCH_API_KEY`` or the key file of
    ``collapsewatch up``."""
    settings = _load_settings()
    key = api_key or settings.api_key or _read_key_file(settings.api_key_file)
    return Connection(
        run=str(run),
        url=str(url or settings.url).rstrip("/"),
        api_key=key,
        config=config,
        tags=[str(t) for t in tags or []],
    )


def of_client(client: Client) -> Connection:
    """The connection of an existing client, so that what an integration sends beside
    it (metrics, alert polls) goes to the same run with the same key and run settings.

    Reads the client's private fields: this module is part of the SDK and moves with it.
    """
    return Connection(
        run=client.run,
        url=client.url,
        api_key=getattr(client, "_api_key", None),
        config=getattr(client, "_config", None),
        tags=list(getattr(client, "_tags", []) or []),
    )

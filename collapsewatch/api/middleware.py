"""ASGI middleware: a request body size limit (413) that holds for chunked uploads too."""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class _TooLarge(HTTPException):
    """Raised from ``receive`` mid-body; FastAPI re-raises HTTPExceptions unchanged."""


class BodySizeLimit:
    """Reject request bodies over ``max_bytes`` with a 413 problem response.

    The Content-Length header is checked first; bodies without one are counted as they
    stream in, so nothing over the limit is ever buffered whole.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge(413, self._detail())
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject(send)

    def _detail(self) -> str:
        return (
            f"Request body exceeds the limit of {self.max_bytes} bytes "
            "(COLLAPSEWATCH_MAX_REQUEST_BYTES); send smaller batches."
        )

    async def _reject(self, send: Send) -> None:
        body: dict[str, Any] = {
            "type": "https://collapsewatch.dev/problems/content-too-large",
            "title": "Content Too Large",
            "status": 413,
            "detail": self._detail(),
        }
        raw = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(raw)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": raw})

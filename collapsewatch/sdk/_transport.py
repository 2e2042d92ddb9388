"""HTTP to the collapsewatch API: one request with retries on 429/5xx/network errors.

Everything else (4xx) is returned to the caller as a ``Reply`` to decide on: those
answers will not change by asking again.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

# A server may ask for a long pause; we honour it, but not past this (seconds).
MAX_RETRY_AFTER = 600.0


class RetryableError(Exception):
    """The server answered 429 or 5xx: worth asking again later."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.describe())
        self.reply = reply


class Interrupted(Exception):
    """The client is closing: stop waiting between attempts."""


@dataclass
class Reply:
    """A response, reduced to what the SDK uses."""

    status: int
    body: Any
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def problem_errors(self) -> list[dict[str, Any]]:
        """``errors`` of an RFC 9457 problem body (pydantic-style loc/msg), if any."""
        errors = self.body.get("errors") if isinstance(self.body, dict) else None
        return [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []

    def describe(self, max_errors: int = 5) -> str:
        """``HTTP 422: detail (field: msg; ...)`` from a problem body, or the raw text."""
        text = f"HTTP {self.status}"
        if isinstance(self.body, dict):
            detail = self.body.get("detail") or self.body.get("title")
            if isinstance(detail, str) and detail:
                text += f": {detail}"
            elif detail is not None:
                text += f": {json.dumps(detail)[:500]}"
            errors = self.problem_errors()
            if errors and str(errors[0].get("msg")) not in text:  # detail may list them
                shown = "; ".join(
                    f"{format_loc(e.get('loc'))}: {e.get('msg', '')}" for e in errors[:max_errors]
                )
                more = f"; +{len(errors) - max_errors} more" if len(errors) > max_errors else ""
                text += f" ({shown}{more})"
        elif self.body:
            text += f": {str(self.body)[:500]}"
        return text


def format_loc(loc: Any) -> str:
    """``["body", "rollouts", 3, "reward"]`` -> ``rollouts.3.reward``."""
    if not isinstance(loc, (list, tuple)):
        return str(loc)
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(parts) or "body"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date), capped."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class _WaitRetryAfter:
    """Exponential backoff with jitter, or the server's Retry-After if that is longer."""

    def __init__(self, initial: float, maximum: float) -> None:
        self._backoff = wait_exponential(multiplier=initial, max=maximum) + wait_random(0, initial)

    def __call__(self, retry_state: RetryCallState) -> float:
        wait = self._backoff(retry_state)
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, RetryableError) and exc.reply.retry_after is not None:
            wait = max(wait, exc.reply.retry_after)
        return wait


class Transport:
    """An httpx client aimed at one API, with the SDK's retry policy."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        *,
        timeout: float,
        backoff: float,
        backoff_max: float,
        user_agent: str,
    ) -> None:
        headers = {"User-Agent": user_agent, "Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(base_url=url, headers=headers, timeout=timeout)
        self._backoff = backoff
        self._backoff_max = backoff_max

    def close(self) -> None:
        self._http.close()

    def post(
        self,
        path: str,
        content: bytes,
        *,
        attempts: int,
        sleep: Callable[[float], None],
    ) -> Reply:
        """POST with up to ``attempts`` tries; returns any non-retryable reply.

        Raises:
            RetryableError: the last attempt got 429/5xx.
            httpx.TransportError: the last attempt could not reach the server.
            Interrupted: ``sleep`` was interrupted (the client is closing).
        """
        retrying = Retrying(
            stop=stop_after_attempt(max(1, attempts)),
            wait=_WaitRetryAfter(self._backoff, self._backoff_max),
            retry=retry_if_exception_type((RetryableError, httpx.TransportError)),
            sleep=sleep,
            reraise=True,
        )
        return retrying(self._post_once, path, content)

    def _post_once(self, path: str, content: bytes) -> Reply:
        response = self._http.post(path, content=content)
        body: Any
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = response.text[:2000]
        reply = Reply(
            response.status_code, body, parse_retry_after(response.headers.get("Retry-After"))
        )
        if reply.status == 429 or reply.status >= 500:
            raise RetryableError(reply)
        return reply

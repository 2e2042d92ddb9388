"""Error bodies in one shape everywhere: RFC 9457 problem details.

``{"type", "title", "status", "detail"}`` plus, for validation errors, ``errors``: a
list of ``{"loc", "msg", "type"}`` whose ``loc`` names the offending field
(e.g. ``["body", "rollouts", 3, "step"]``).
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("collapsewatch.api")

PROBLEM_JSON = "application/problem+json"


def problem(
    status: int,
    detail: str,
    *,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A problem-details response for ``status`` with a human-readable ``detail``."""
    phrase = HTTPStatus(status).phrase
    body: dict[str, Any] = {
        "type": f"https://collapsewatch.dev/problems/{phrase.lower().replace(' ', '-')}",
        "title": phrase,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _clean_errors(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for err in raw[:50]:
        out.append(
            {
                "loc": list(err.get("loc", ())),
                "msg": err.get("msg", ""),
                "type": err.get("type", ""),
            }
        )
    return out


def _describe(errors: list[dict[str, Any]]) -> str:
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err["loc"] if p != "body") or "body"
        parts.append(f"{loc}: {err['msg']}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


def validation_problem(errors: list[dict[str, Any]]) -> JSONResponse:
    """422 naming each invalid field."""
    errors = _clean_errors(errors)
    return problem(422, "Invalid request: " + _describe(errors), errors=errors)


def install_error_handlers(app: FastAPI) -> None:
    """Route every error through :func:`problem`."""

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_problem(list(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return problem(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(OperationalError)
    async def _db_down(_: Request, exc: OperationalError) -> JSONResponse:
        log.warning("database unavailable: %s", exc.orig)
        return problem(
            503, "The database is unavailable; retry later.", headers={"Retry-After": "2"}
        )

    # Input the schemas let through but the database cannot hold (say NUL in a text
    # column, or text that is not Unicode): the request is at fault, not the server.
    @app.exception_handler(DataError)
    async def _unstorable(_: Request, exc: DataError) -> JSONResponse:
        reason = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else ""
        log.info("request refused by the database: %s", reason)
        return problem(422, f"A value in the request cannot be stored: {reason}")

    @app.exception_handler(UnicodeEncodeError)
    async def _not_unicode(_: Request, exc: UnicodeEncodeError) -> JSONResponse:
        return problem(
            422, "A text value in the request is not valid Unicode (an unpaired surrogate)."
        )

    @app.exception_handler(PoolTimeoutError)
    async def _pool(_: Request, exc: PoolTimeoutError) -> JSONResponse:
        return problem(503, "The server is overloaded; retry later.", headers={"Retry-After": "2"})

"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from collapsewatch.api.deps import SessionDep
from collapsewatch.api.errors import problem

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=None)
def healthz(session: SessionDep) -> dict[str, str] | JSONResponse:
    """Health check: 200 when the API can reach its database, 503 otherwise."""
    try:
        session.execute(text("SELECT 1"))
    except Exception:
        return problem(503, "The database is unreachable.", headers={"Retry-After": "2"})
    return {"status": "ok", "database": session.get_bind().dialect.name}

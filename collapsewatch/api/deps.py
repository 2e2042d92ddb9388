"""FastAPI dependencies, exposed as ``Annotated`` aliases (SessionDep, ProjectDep, …)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from collapsewatch.schema import INT32_MAX
from collapsewatch.settings import Settings
from collapsewatch.store import keys, queries
from collapsewatch.store.models import Project, Run

_bearer = HTTPBearer(auto_error=False, description="API key of a project: `Bearer cw_…`")


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """A session per request; committed by the handler, rolled back on error."""
    session = request.app.state.sessionmaker()
    try:
        yield session
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]


def get_project(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Project:
    """The project of the bearer key; 401 when the key is missing or unknown."""
    if credentials is None or not credentials.credentials:
        raise HTTPException(
            401,
            "Missing API key: send 'Authorization: Bearer <key>'.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    project = keys.project_for_key(session, credentials.credentials)
    if project is None:
        raise HTTPException(
            401, "Unknown or revoked API key.", headers={"WWW-Authenticate": "Bearer"}
        )
    return project


ProjectDep = Annotated[Project, Depends(get_project)]


def get_run(
    session: SessionDep,
    project: ProjectDep,
    run_id: Annotated[int, Path(ge=1, le=INT32_MAX, description="Run id from POST /api/v1/runs.")],
) -> Run:
    """The run ``run_id`` of the caller's project; 404 otherwise (other projects' runs
    are indistinguishable from missing ones)."""
    run = queries.get_run(session=session, project=project, run_id=run_id)
    if run is None:
        raise HTTPException(404, f"Run {run_id} not found in project '{project.name}'.")
    return run


RunDep = Annotated[Run, Depends(get_run)]

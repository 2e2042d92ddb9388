"""Runs: create-or-get by name, list, read one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from collapsewatch.api.deps import ProjectDep, RunDep, SessionDep
from collapsewatch.schema import RunCreate, RunOut
from collapsewatch.store import queries

router = APIRouter(prefix="/api/v1/runs", tags=["runs"])


@router.post("", response_model=RunOut, status_code=status.HTTP_201_CREATED)
def create_run(
    body: RunCreate, session: SessionDep, project: ProjectDep, response: Response
) -> RunOut:
    """Create the run ``name`` in the key's project, or return it if it exists (200).

    An existing run keeps the config and tags it was created with.
    """
    run, created = queries.get_or_create_run(
        session=session, project=project, name=body.name, config=body.config, tags=body.tags
    )
    session.commit()
    if not created:
        response.status_code = status.HTTP_200_OK
    return queries.run_out(session=session, project=project, run=run)


@router.get("", response_model=list[RunOut])
def list_runs(
    session: SessionDep,
    project: ProjectDep,
    name: Annotated[str | None, Query(description="Only the run with this name.")] = None,
) -> list[RunOut]:
    """The project's runs, newest first, with rollout and step counts."""
    return queries.list_runs(session=session, project=project, name=name)


@router.get("/{run_id}", response_model=RunOut)
def get_run(run: RunDep, session: SessionDep, project: ProjectDep) -> RunOut:
    """One run with its counts."""
    return queries.run_out(session=session, project=project, run=run)

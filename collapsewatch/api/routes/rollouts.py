"""Rollout ingestion and step completion."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import ValidationError

from collapsewatch.api.deps import RunDep, SessionDep, SettingsDep
from collapsewatch.schema import INT32_MAX, CrossScores, IngestResult, RolloutBatch
from collapsewatch.settings import Settings
from collapsewatch.store import queries


class _BatchRequest(Request):
    """A request whose JSON body is parsed and validated as a RolloutBatch in one step.

    pydantic validates the raw bytes (``model_validate_json``, in Rust) about twice as
    fast as ``json.loads`` followed by validation of the Python objects, which is what
    FastAPI does; benchmarks/ingestion.py showed that step as the API's largest cost.
    FastAPI then receives the model instance and keeps it as it is. A body that is not a
    valid batch is handed over as plain JSON, so FastAPI reports it as usual (the same
    422 naming each field, or the JSON decode error).
    """

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = RolloutBatch.model_validate_json(body)
            except ValidationError:
                self._json = json.loads(body)
        return self._json


class _BatchRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None or self.body_field.field_info.annotation is not RolloutBatch:
            return handler

        async def batch_handler(request: Request) -> Response:
            return await handler(_BatchRequest(request.scope, request.receive))

        return batch_handler


router = APIRouter(prefix="/api/v1/runs/{run_id}", tags=["rollouts"], route_class=_BatchRoute)

_TEXT_FIELDS = ("observation", "reasoning", "action")


def _check_limits(batch: RolloutBatch, settings: Settings) -> None:
    """Limits that depend on settings, reported like schema errors (422, field named)."""
    errors = []
    if len(batch.rollouts) > settings.max_batch_rollouts:
        errors.append(
            {
                "loc": ("body", "rollouts"),
                "type": "too_long",
                "msg": f"batch has {len(batch.rollouts)} rollouts; the limit is "
                f"{settings.max_batch_rollouts} (COLLAPSEWATCH_MAX_BATCH_ROLLOUTS)",
            }
        )
    if len(batch.complete_steps) > settings.max_batch_rollouts:
        errors.append(
            {
                "loc": ("body", "complete_steps"),
                "type": "too_long",
                "msg": f"{len(batch.complete_steps)} steps; the limit is "
                f"{settings.max_batch_rollouts} (COLLAPSEWATCH_MAX_BATCH_ROLLOUTS)",
            }
        )
    seen: dict[str, int] = {}
    for i, rollout in enumerate(batch.rollouts):
        if rollout.rollout_id in seen:
            errors.append(
                {
                    "loc": ("body", "rollouts", i, "rollout_id"),
                    "type": "duplicate",
                    "msg": f"rollout_id {rollout.rollout_id!r} repeats "
                    f"rollouts[{seen[rollout.rollout_id]}] in the same batch",
                }
            )
        seen.setdefault(rollout.rollout_id, i)
        for j, turn in enumerate(rollout.turns):
            for field in _TEXT_FIELDS:
                size = len(getattr(turn, field))
                if size > settings.max_text_chars:
                    errors.append(
                        {
                            "loc": ("body", "rollouts", i, "turns", j, field),
                            "type": "too_long",
                            "msg": f"text has {size} characters; the limit is "
                            f"{settings.max_text_chars} (COLLAPSEWATCH_MAX_TEXT_CHARS)",
                        }
                    )
        if len(errors) >= 50:
            break
    if errors:
        raise RequestValidationError(errors)


@router.post("/rollouts", response_model=IngestResult)
def post_rollouts(
    batch: RolloutBatch, run: RunDep, session: SessionDep, settings: SettingsDep
) -> IngestResult:
    """Store a batch of rollouts. Idempotent on ``rollout_id``: rollouts already stored
    are skipped and counted in ``duplicates``. The whole batch is validated first and
    stored in one transaction, so an invalid batch stores nothing."""
    _check_limits(batch, settings)
    result = queries.ingest_rollouts(
        session=session, run=run, rollouts=batch.rollouts, complete_steps=batch.complete_steps
    )
    session.commit()
    return result


@router.post("/steps/{step}/complete", status_code=status.HTTP_204_NO_CONTENT)
def complete_step(
    run: RunDep,
    session: SessionDep,
    step: Annotated[int, Path(ge=0, le=INT32_MAX, description="Training step.")],
) -> Response:
    """Mark a step as fully sent: the worker scores it without waiting for more."""
    queries.mark_steps_complete(session=session, run=run, steps=[step])
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/cross-scores", status_code=status.HTTP_204_NO_CONTENT)
def post_cross_scores(
    body: CrossScores, run: RunDep, session: SessionDep, settings: SettingsDep
) -> Response:
    """Store a step's cross-score matrix log p(z_i | x_j) (replaces an earlier one for
    the same step) and queue the step for rescoring with the log-prob metrics."""
    if len(body.rollout_ids) > settings.max_batch_rollouts:
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "rollout_ids"),
                    "type": "too_long",
                    "msg": f"{len(body.rollout_ids)} rows; the limit is "
                    f"{settings.max_batch_rollouts} (COLLAPSEWATCH_MAX_BATCH_ROLLOUTS)",
                }
            ]
        )
    queries.store_cross_scores(session=session, run=run, cross_scores=body)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)

"""Rollout ingestion and step completion."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status
from fastapi.exceptions import RequestValidationError

from collapsewatch.api.deps import RunDep, SessionDep, SettingsDep
from collapsewatch.schema import CrossScores, IngestResult, RolloutBatch
from collapsewatch.settings import Settings
from collapsewatch.store import queries

router = APIRouter(prefix="/api/v1/runs/{run_id}", tags=["rollouts"])

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
    run: RunDep, session: SessionDep, step: Annotated[int, Path(ge=0, description="Training step.")]
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

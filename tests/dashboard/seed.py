"""A planted run for the dashboard tests: healthy, then template collapse.

Steps 0..``collapse_at - 1``: each state's reasoning names its own state (responsive).
From ``collapse_at`` on: every rollout says one of two fixed templates whatever its
state (diversity holds, responsiveness falls), like RAGEN-2's template collapse.
Metric points are written directly (with a few undefined values), and two alerts:
``no_signal`` fired and resolved, ``template_collapse`` firing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from collapsewatch.schema import Rollout
from collapsewatch.store import keys, queries
from collapsewatch.store.models import AlertRow, Step, utcnow

TEMPLATES = [
    "let me think step by step about the grid and pick the best move to reach the goal",
    "first i check the walls then i move toward the target carefully and stay on track",
]
MOVES = ["left", "right", "up", "down"]


@dataclass(frozen=True)
class Seeded:
    run_id: int
    project: str
    name: str
    steps: int
    collapse_at: int
    gap_step: int
    firing_alert_id: int
    resolved_alert_id: int


def _rollouts(step: int, *, n_states: int, group: int, collapsed: bool) -> list[Rollout]:
    out = []
    for s in range(n_states):
        for g in range(group):
            if collapsed:
                reasoning = TEMPLATES[(s + g) % 2]
            else:
                reasoning = (
                    f"state {s} has its goal at cell {s * 7 % 11} behind wall {s + 3}, "
                    f"so from row {s} i go {MOVES[s % 4]} then {MOVES[(s + 1) % 4]} (try {g})"
                )
            out.append(
                Rollout.model_validate(
                    {
                        "rollout_id": f"r{step}-{s}-{g}",
                        "step": step,
                        "state_id": f"state-{s}",
                        "reward": float((g + s) % 2),
                        "success": (g + s) % 2 == 1,
                        "turns": [
                            {
                                "index": 0,
                                "observation": f"grid {s}",
                                "reasoning": reasoning,
                                "action": MOVES[(s + g) % 4],
                                "done": True,
                            }
                        ],
                    }
                )
            )
    return out


def _metrics(step: int, collapse_at: int, gap_step: int) -> dict[str, float | None]:
    collapsed = step >= collapse_at
    t = step / 10
    return {
        "diversity.token_entropy": 0.6 + 0.05 * step,
        "diversity.within_state": 0.35 + (0.1 if collapsed else 0.0),
        "diversity.distinct_2": 0.7 - 0.01 * step,
        "responsiveness.mi_embed": 0.05 if collapsed else 1.2 - 0.02 * step,
        "responsiveness.retrieval_embed": 0.02 if collapsed else 0.9,
        "correctness.reward_mean": 0.4 + 0.02 * t,
        "correctness.success_rate": None if step == gap_step else 0.5 + 0.01 * step,
        "correctness.group_reward_std": 0.5,
        "correctness.zero_std_fraction": 0.0,
        "structure.num_rollouts": 16.0,
    }


def seed_run(
    factory: sessionmaker[Session],
    *,
    project: str,
    name: str = "collapse-demo",
    steps: int = 30,
    collapse_at: int = 18,
    gap_step: int = 7,
    n_states: int = 4,
    group: int = 4,
) -> Seeded:
    """Store the planted run through the store's own write path; returns its ids."""
    with factory() as session:
        proj = keys.get_or_create_project(session, project)
        run, _ = queries.get_or_create_run(
            session=session, project=proj, name=name, config={"seeded": True}, tags=[]
        )
        for step in range(steps):
            queries.ingest_rollouts(
                session=session,
                run=run,
                rollouts=_rollouts(
                    step, n_states=n_states, group=group, collapsed=step >= collapse_at
                ),
                complete_steps=[step],
            )
            queries.write_metric_points(
                session=session,
                run_id=run.id,
                step=step,
                metrics=_metrics(step, collapse_at, gap_step),
                representation="tfidf",
            )
        # Mark the steps scored, as the worker leaves them: a worker sharing this
        # database (another test's server) must not rescore the planted series.
        session.execute(
            update(Step).where(Step.run_id == run.id).values(dirty=False, scored_at=utcnow())
        )
        resolved = AlertRow(
            run_id=run.id,
            rule="no_signal",
            severity="warning",
            state="resolved",
            step_fired=4,
            step_resolved=9,
            message="zero_std_fraction rose to 0.8",
            evidence={"zero_std_fraction": 0.8},
        )
        firing = AlertRow(
            run_id=run.id,
            rule="template_collapse",
            severity="critical",
            state="firing",
            step_fired=collapse_at + 2,
            message="responsiveness fell to 4% of its baseline while diversity held",
            evidence={
                "mi_embed": 0.05,
                "baseline": 1.1,
                "examples": [
                    {"state_id": "state-0", "rollout_id": "r20-0-0", "reasoning": TEMPLATES[0]}
                ],
            },
        )
        session.add_all([resolved, firing])
        session.commit()
        return Seeded(
            run_id=run.id,
            project=project,
            name=name,
            steps=steps,
            collapse_at=collapse_at,
            gap_step=gap_step,
            firing_alert_id=firing.id,
            resolved_alert_id=resolved.id,
        )

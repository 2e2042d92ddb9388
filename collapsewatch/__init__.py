"""collapsewatch: a training-health monitor for RL of LLM agents.

It watches diversity, responsiveness (does reasoning depend on the input?) and
correctness of a training run, and alerts on template collapse before the success
rate falls. Quickstart, with a server running (``collapsewatch up``)::

    import collapsewatch

    cw = collapsewatch.init(run="grpo-sokoban-1", config={"lr": 1e-6, "group_size": 8})
    for step in range(num_steps):
        rollouts = trainer.generate(step)          # your code
        cw.log_rollouts(step, [
            {
                "rollout_id": f"{step}-{i}",        # unique within the run
                "state_id": r.seed,                 # equal state_id = one GRPO group
                "reward": r.total_reward,
                "success": r.solved,
                "turns": [
                    {"index": t, "observation": obs, "reasoning": think, "action": act,
                     "reward": rew, "token_entropy": ent}
                    for t, (obs, think, act, rew, ent) in enumerate(r.turns)
                ],
            }
            for i, r in enumerate(rollouts)
        ])
        cw.complete_step(step)                      # optional: score this step now
        # Trainers that hold the policy can also send RAGEN-2's cross-scores
        # log p(z_i | x_j): cw.log_cross_scores({"step": step, "rollout_ids": ...}).
    collapsewatch.finish()                          # flush and stop (also run at exit)

``log_rollouts`` returns at once and never raises for server trouble: a background
thread sends batches, retries, and spools to disk while the server is away. The URL
and API key come from ``COLLAPSEWATCH_URL`` and ``COLLAPSEWATCH_API_KEY`` (or the key
file that ``collapsewatch up`` writes). ``Client(run, ...)`` is the same without the
process-wide instance; ``client.stats()`` counts what was sent, spooled and dropped.
See docs/sdk.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Names load on first use, so that `import collapsewatch` stays light (no httpx,
# no server or model dependencies) for the CLI and for workers.
_LAZY = {
    "Client": "collapsewatch.sdk",
    "ClientStats": "collapsewatch.sdk",
    "CollapsewatchHook": "collapsewatch.sdk",
    "TrainingHook": "collapsewatch.sdk",
    "init": "collapsewatch.sdk",
    "get_client": "collapsewatch.sdk",
    "log_rollouts": "collapsewatch.sdk",
    "log_cross_scores": "collapsewatch.sdk",
    "complete_step": "collapsewatch.sdk",
    "flush": "collapsewatch.sdk",
    "finish": "collapsewatch.sdk",
    "Rollout": "collapsewatch.schema",
    "CrossScores": "collapsewatch.schema",
    "Turn": "collapsewatch.schema",
}

__all__ = [
    "Client",
    "ClientStats",
    "CollapsewatchHook",
    "TrainingHook",
    "CrossScores",
    "Rollout",
    "Turn",
    "__version__",
    "complete_step",
    "finish",
    "flush",
    "get_client",
    "init",
    "log_cross_scores",
    "log_rollouts",
]

if TYPE_CHECKING:
    from collapsewatch.schema import CrossScores, Rollout, Turn
    from collapsewatch.sdk import (
        Client,
        ClientStats,
        CollapsewatchHook,
        TrainingHook,
        complete_step,
        finish,
        flush,
        get_client,
        init,
        log_cross_scores,
        log_rollouts,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'collapsewatch' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])

"""The public training hook against the real API on loopback."""

from __future__ import annotations

import httpx

import collapsewatch
from collapsewatch.schema import CrossScores
from tests.factories import step_batch


def test_hook_streams_rollouts_cross_scores_and_metrics(server) -> None:
    hook = collapsewatch.CollapsewatchHook(
        run="hooked", url=server.url, api_key=server.api_key, flush_interval=0.05
    )
    assert isinstance(hook, collapsewatch.TrainingHook)
    for step in range(3):
        rollouts = step_batch(step, n_states=2, group_size=2)
        cross = CrossScores(
            step=step,
            rollout_ids=[r["rollout_id"] for r in rollouts],
            state_ids=["state-0", "state-1"],
            logprob_sum=[[-1.0, -5.0], [-1.5, -6.0], [-5.0, -1.0], [-6.0, -2.0]],
            num_tokens=[2, 2, 2, 2],
        )
        hook.on_step_end(step, rollouts, cross, {"loss": 0.5 - 0.1 * step})
    hook.on_train_end()
    assert hook.cross_scores_sent == 3

    headers = {"Authorization": f"Bearer {server.api_key}"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        (run,) = http.get("/api/v1/runs", params={"name": "hooked"}).json()
        assert (run["num_rollouts"], run["num_steps"]) == (12, 3)
        points = http.get(
            f"/api/v1/runs/{run['id']}/metrics", params={"name": "trainer.loss"}
        ).json()["points"]
    assert [(p["step"], round(p["value"], 6)) for p in points] == [(0, 0.5), (1, 0.4), (2, 0.3)]


def test_hook_never_raises_into_the_loop() -> None:
    class Broken:
        def log_rollouts(self, step, rollouts):
            raise RuntimeError("disk on fire")

        def complete_step(self, step):
            raise RuntimeError("still on fire")

    hook = collapsewatch.CollapsewatchHook(Broken(), send_metrics=False)
    hook.on_step_end(0, [], None, {"loss": 1.0})  # must not raise
    hook.on_train_end()

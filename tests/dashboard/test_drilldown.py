"""Step drill-down analysis on planted steps: templates found under collapse, none
when reasoning depends on the state."""

from __future__ import annotations

import numpy as np

from dashboard.drilldown import analyse_step, sample_per_state, template_clusters
from tests.dashboard.seed import _rollouts


def test_collapsed_step_shows_templates_spanning_every_state() -> None:
    a = analyse_step(_rollouts(20, n_states=4, group=4, collapsed=True))
    templates = [c for c in a.clusters if c.is_template]
    assert len(templates) == 2
    assert all(c.num_states == 4 and c.size == 8 for c in templates)
    assert a.template_share == 1.0
    # Off-diagonal state similarity as high as the diagonal: input-agnostic reasoning.
    diag = np.diag(a.state_sim).mean()
    off = a.state_sim[~np.eye(4, dtype=bool)].mean()
    assert off >= diag * 0.9


def test_responsive_step_has_no_templates_and_a_bright_diagonal() -> None:
    a = analyse_step(_rollouts(3, n_states=4, group=4, collapsed=False))
    assert [c for c in a.clusters if c.is_template] == []
    assert a.template_share == 0.0
    assert a.state_order == ["state-0", "state-1", "state-2", "state-3"]
    assert [r.state_id for r in a.rollouts] == sorted(r.state_id for r in a.rollouts)
    diag = np.diag(a.state_sim).mean()
    off = a.state_sim[~np.eye(4, dtype=bool)].mean()
    assert diag > 2 * off


def test_empty_texts_join_no_cluster_and_sampling_keeps_every_state() -> None:
    sim = np.ones((3, 3))
    assert template_clusters(sim, ["a", "b", "c"], ["", " ", "x"]) == []
    picked = sample_per_state(["a"] * 10 + ["b"] * 2 + ["c"] * 10, 9)
    states = ["a"] * 10 + ["b"] * 2 + ["c"] * 10
    assert len(picked) == 9 and {states[i] for i in picked} == {"a", "b", "c"}
    assert picked == sorted(picked)
    assert analyse_step([]).clusters == []

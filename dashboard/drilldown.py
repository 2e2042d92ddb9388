"""What the step drill-down computes from one step's rollouts: similarity between
reasonings and the clusters of near-identical reasoning across states (templates).

Pure functions over rollouts and arrays. Similarity is the cosine of the same TF-IDF
representation the metrics use (collapsewatch.metrics.representation), so what the
heatmap shows is what ``diversity.within_state`` and ``responsiveness.mi_embed`` saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.sparse.csgraph import connected_components

from collapsewatch.metrics.representation import tfidf
from collapsewatch.schema import Rollout
from collapsewatch.scoring import rollout_text

# Above this many rollouts a step is sampled (per state) before the M×M similarity:
# 2,048² float64 is 32 MiB, the most a dashboard request should allocate.
MAX_SIMILARITY_ROLLOUTS = 2048


def order_by_state(rollouts: Sequence[Rollout]) -> list[Rollout]:
    """Rollouts grouped by state (states in order of first appearance), arrival order
    kept within a state."""
    first: dict[str, int] = {}
    for i, r in enumerate(rollouts):
        first.setdefault(r.state_id, i)
    return sorted(rollouts, key=lambda r: first[r.state_id])


def sample_per_state(states: Sequence[str], limit: int) -> list[int]:
    """Indices of at most ``limit`` items, taken round-robin across states so every
    state keeps its share; order preserved."""
    if len(states) <= limit:
        return list(range(len(states)))
    by_state: dict[str, list[int]] = {}
    for i, s in enumerate(states):
        by_state.setdefault(s, []).append(i)
    picked: list[int] = []
    depth = 0
    while len(picked) < limit:
        added = False
        for members in by_state.values():
            if depth < len(members) and len(picked) < limit:
                picked.append(members[depth])
                added = True
        if not added:
            break
        depth += 1
    return sorted(picked)


def similarity_matrix(texts: Sequence[str]) -> NDArray[np.float64]:
    """``(M, M)`` cosine similarity of the texts' TF-IDF rows; 0 for any pair with an
    empty text (an empty text resembles nothing, itself included)."""
    x = tfidf(list(texts))
    if x.shape[1] == 0:
        return np.zeros((len(texts), len(texts)))
    sim = np.asarray((x @ x.T).todense(), dtype=np.float64)
    return np.clip(sim, 0.0, 1.0)


def state_similarity(
    sim: NDArray[np.float64], states: Sequence[str], state_order: Sequence[str]
) -> NDArray[np.float64]:
    """``(N, N)`` mean similarity between the rollouts of state a and of state b
    (a rollout's similarity to itself left out); NaN where a state pair has no pair.

    Healthy, state-dependent reasoning shows a bright diagonal; template collapse
    shows off-diagonal cells as bright as the diagonal.
    """
    index = {s: k for k, s in enumerate(state_order)}
    onehot = np.zeros((len(states), len(state_order)))
    onehot[np.arange(len(states)), [index[s] for s in states]] = 1.0
    off_diag = 1.0 - np.eye(len(states))
    sums = onehot.T @ (sim * off_diag) @ onehot
    counts = onehot.T @ off_diag @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1.0), np.nan)


@dataclass(frozen=True)
class TemplateCluster:
    """Rollouts whose reasoning is near-identical (linked by similarity ≥ threshold).

    ``members`` index the rollouts passed in; ``representative`` is the member most
    similar to the others; ``share`` is size / rollouts with text. A cluster spanning
    two or more states is a template: the same reasoning whatever the input.
    """

    members: list[int]
    states: list[str]
    representative: int
    mean_similarity: float
    share: float

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def num_states(self) -> int:
        return len(self.states)

    @property
    def is_template(self) -> bool:
        return self.num_states >= 2


def template_clusters(
    sim: NDArray[np.float64],
    states: Sequence[str],
    texts: Sequence[str],
    *,
    threshold: float = 0.9,
) -> list[TemplateCluster]:
    """Clusters of near-identical reasoning: connected components of the graph whose
    edges are pairs with similarity ≥ ``threshold`` (single linkage), size ≥ 2, most
    states first, then largest. Rollouts with empty text take no part."""
    has_text = np.array([bool(t.strip()) for t in texts])
    n_text = int(has_text.sum())
    if n_text < 2:
        return []
    adjacency = (sim >= threshold) & has_text[:, None] & has_text[None, :]
    _, labels = connected_components(adjacency, directed=False)
    clusters = []
    for label in np.unique(labels[has_text]):
        members = [int(i) for i in np.flatnonzero((labels == label) & has_text)]
        if len(members) < 2:
            continue
        block = sim[np.ix_(members, members)]
        np.fill_diagonal(block, np.nan)
        per_member = np.nanmean(block, axis=1)
        clusters.append(
            TemplateCluster(
                members=members,
                states=sorted({states[i] for i in members}),
                representative=members[int(np.nanargmax(per_member))],
                mean_similarity=float(np.nanmean(block)),
                share=len(members) / n_text,
            )
        )
    clusters.sort(key=lambda c: (-c.num_states, -c.size, c.members[0]))
    return clusters


@dataclass(frozen=True)
class StepAnalysis:
    """Everything the drill-down shows about one step, rollouts ordered by state."""

    rollouts: list[Rollout]
    texts: list[str]
    states: list[str]
    state_order: list[str]
    sim: NDArray[np.float64]
    state_sim: NDArray[np.float64]
    clusters: list[TemplateCluster]
    sampled: bool

    @property
    def template_share(self) -> float:
        """Share of rollouts (with text) in a cluster that spans several states."""
        n_text = sum(1 for t in self.texts if t.strip())
        if not n_text:
            return 0.0
        return sum(c.size for c in self.clusters if c.is_template) / n_text


def analyse_step(rollouts: Sequence[Rollout], *, threshold: float = 0.9) -> StepAnalysis:
    """Order the step's rollouts by state, compute similarities and template clusters."""
    ordered = order_by_state(rollouts)
    states_all = [r.state_id for r in ordered]
    keep = sample_per_state(states_all, MAX_SIMILARITY_ROLLOUTS)
    ordered = [ordered[i] for i in keep]
    texts = [rollout_text(r) for r in ordered]
    states = [r.state_id for r in ordered]
    state_order = list(dict.fromkeys(states))
    sim = similarity_matrix(texts) if ordered else np.zeros((0, 0))
    return StepAnalysis(
        rollouts=ordered,
        texts=texts,
        states=states,
        state_order=state_order,
        sim=sim,
        state_sim=state_similarity(sim, states, state_order) if ordered else sim,
        clusters=template_clusters(sim, states, texts, threshold=threshold),
        sampled=len(keep) < len(states_all),
    )

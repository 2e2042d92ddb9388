"""Score one training step: rollouts in, every metric of DESIGN.md §4 out.

This is the glue between the wire format (:mod:`collapsewatch.schema`) and the pure
metric functions (:mod:`collapsewatch.metrics`); the worker and ``collapsewatch score``
call it. It fits one text representation per step and reuses it for every metric that
needs one.

The text of a rollout is the reasoning of its turns, in turn order, joined by "\\n".
A rollout with no reasoning in any turn (a trainer without a think span) is
represented by its actions joined the same way, so that diversity and responsiveness
still see what the policy produced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collapsewatch.metrics import correctness, diversity, responsiveness, structure
from collapsewatch.metrics import representation as rep
from collapsewatch.schema import Rollout

METRIC_NAMES: tuple[str, ...] = (
    "structure.num_rollouts",
    "structure.distinct_states",
    "correctness.reward_mean",
    "correctness.success_rate",
    "correctness.group_reward_std",
    "correctness.zero_std_fraction",
    "correctness.valid_format_rate",
    "diversity.distinct_2",
    "diversity.within_state",
    "diversity.token_entropy",
    "responsiveness.mi_embed",
    "responsiveness.retrieval_embed",
)
"""Every metric :func:`score_step` returns, in catalogue order (docs/metrics.md)."""

_SAMPLE_SEED = 0
_NULL_SEED = 0


@dataclass(frozen=True)
class StepScore:
    """The metrics of one step.

    ``metrics`` maps every name of :data:`METRIC_NAMES` to its value, None where the
    metric is undefined for this step; ``representation`` is the text representation
    the embedding-based metrics used ("tfidf" or "minilm").
    """

    step: int
    metrics: dict[str, float | None]
    representation: str


def rollout_segments(rollout: Rollout) -> list[str]:
    """The texts that stand for a rollout's reasoning, one per turn that has one.

    The non-empty reasoning of each turn in turn order; if no turn has reasoning, the
    non-empty actions instead.
    """
    turns = sorted(rollout.turns, key=lambda t: t.index)
    reasoning = [t.reasoning for t in turns if t.reasoning.strip()]
    return reasoning or [t.action for t in turns if t.action.strip()]


def rollout_text(rollout: Rollout) -> str:
    """The rollout's reasoning text: :func:`rollout_segments` joined by "\\n"."""
    return "\n".join(rollout_segments(rollout))


def score_step(
    rollouts: Sequence[Rollout],
    *,
    representation: str = "tfidf",
    embed_max_texts: int = 256,
    embed_max_tokens: int = 128,
    mi_temperature: float = 0.2,
) -> StepScore:
    """Compute every metric of one step.

    Args:
        rollouts: the step's rollouts (all with the same ``step``).
        representation: "tfidf" (every rollout, fit on this step) or "minilm" (at most
            ``embed_max_texts`` rollouts, sampled stratified by state with a fixed seed,
            truncated to ``embed_max_tokens`` word pieces). Correctness, structure,
            ``diversity.distinct_2`` and ``diversity.token_entropy`` always use every
            rollout.
        embed_max_texts: MiniLM budget per step.
        embed_max_tokens: MiniLM truncation.
        mi_temperature: kernel temperature of ``responsiveness.mi_embed``.

    Returns:
        A :class:`StepScore` with every name of :data:`METRIC_NAMES`.

    Raises:
        ValueError: no rollouts, rollouts from several steps, or an unknown
            representation.
    """
    if not rollouts:
        raise ValueError("score_step needs at least one rollout")
    steps = {r.step for r in rollouts}
    if len(steps) != 1:
        raise ValueError(f"rollouts span several steps: {sorted(steps)}")
    if representation not in ("tfidf", "minilm"):
        raise ValueError(f"unknown representation {representation!r}: use 'tfidf' or 'minilm'")

    state_ids = [r.state_id for r in rollouts]
    rewards = [r.reward for r in rollouts]
    turns = [t for r in rollouts for t in r.turns]
    segments = [rollout_segments(r) for r in rollouts]
    texts = ["\n".join(s) for s in segments]

    if representation == "tfidf":
        groups = state_ids
        embeddings: rep.Embeddings = rep.tfidf(texts)
    else:
        sample = rep.stratified_sample(state_ids, embed_max_texts, seed=_SAMPLE_SEED)
        groups = [state_ids[i] for i in sample]
        embeddings = rep.minilm([texts[i] for i in sample], max_tokens=embed_max_tokens)

    metrics: dict[str, float | None] = {
        "structure.num_rollouts": float(structure.num_rollouts(state_ids)),
        "structure.distinct_states": float(structure.distinct_states(state_ids)),
        "correctness.reward_mean": correctness.reward_mean(rewards),
        "correctness.success_rate": correctness.success_rate([r.success for r in rollouts]),
        "correctness.group_reward_std": correctness.group_reward_std(rewards, state_ids),
        "correctness.zero_std_fraction": correctness.zero_std_fraction(rewards, state_ids),
        "correctness.valid_format_rate": correctness.valid_format_rate(
            [t.valid_format for t in turns]
        ),
        "diversity.distinct_2": diversity.distinct_2([s for seg in segments for s in seg]),
        "diversity.within_state": diversity.within_state(embeddings, groups),
        "diversity.token_entropy": diversity.token_entropy(
            [t.token_entropy for t in turns], [t.num_tokens for t in turns]
        ),
        "responsiveness.mi_embed": responsiveness.mi_embed(
            embeddings, groups, temperature=mi_temperature, seed=_NULL_SEED
        ),
        "responsiveness.retrieval_embed": responsiveness.retrieval_embed(embeddings, groups),
    }
    return StepScore(step=steps.pop(), metrics=metrics, representation=representation)


def score_steps(
    rollouts: Sequence[Rollout],
    *,
    representation: str = "tfidf",
    embed_max_texts: int = 256,
    embed_max_tokens: int = 128,
    mi_temperature: float = 0.2,
) -> list[StepScore]:
    """Score rollouts of any number of steps: one :class:`StepScore` per step, by step.

    Keyword arguments as in :func:`score_step`. An empty input gives an empty list.
    """
    by_step: dict[int, list[Rollout]] = {}
    for r in rollouts:
        by_step.setdefault(r.step, []).append(r)
    return [
        score_step(
            by_step[s],
            representation=representation,
            embed_max_texts=embed_max_texts,
            embed_max_tokens=embed_max_tokens,
            mi_temperature=mi_temperature,
        )
        for s in sorted(by_step)
    ]

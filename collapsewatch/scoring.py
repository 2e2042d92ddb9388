"""Score one training step: rollouts in, every metric of DESIGN.md §4 out.

This is the glue between the wire format (:mod:`collapsewatch.schema`) and the pure
metric functions (:mod:`collapsewatch.metrics`); the worker and ``collapsewatch score``
call it. It fits one text representation per step and reuses it for every metric that
needs one, plus a second one of the copy-masked texts for the ``*_masked`` metrics.

The text of a rollout is the reasoning of its turns, in turn order, joined by "\\n".
A rollout with no reasoning in any turn (a trainer without a think span) is
represented by its actions joined the same way, so that diversity and responsiveness
still see what the policy produced.

Metrics that need earlier steps (the EMA z-score) are not here: see
:func:`collapsewatch.metrics.series.series_metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from collapsewatch.metrics import correctness, diversity, masking, responsiveness, structure
from collapsewatch.metrics import representation as rep
from collapsewatch.schema import CrossScores, Rollout, Turn


def metric_names(retrieval_k: int = 3) -> tuple[str, ...]:
    """Every metric :func:`score_step` returns for a top-k of ``retrieval_k``, in
    catalogue order (docs/metrics.md)."""
    return (
        "structure.num_rollouts",
        "structure.distinct_states",
        "structure.group_size_min",
        "structure.group_size_max",
        "structure.duplicate_rate",
        "structure.nonfinite",
        "structure.truncated_rate",
        "structure.cross_rows_scored",
        "structure.cross_rows_dropped",
        "correctness.reward_mean",
        "correctness.success_rate",
        "correctness.group_reward_std",
        "correctness.zero_std_fraction",
        "correctness.valid_format_rate",
        "diversity.distinct_2",
        "diversity.within_state",
        "diversity.token_entropy",
        "diversity.vendi",
        "diversity.char_entropy",
        "diversity.char_entropy_min",
        "responsiveness.mi_embed",
        "responsiveness.retrieval_embed",
        "responsiveness.mi_embed_masked",
        "responsiveness.retrieval_embed_masked",
        "responsiveness.action_mi",
        "responsiveness.action_mi_pvalue",
        "responsiveness.mi_logprob",
        "responsiveness.mi_logprob_seq",
        "responsiveness.cond_entropy",
        "responsiveness.marginal_entropy",
        "responsiveness.marginal_std",
        "responsiveness.mi_zscore",
        "responsiveness.retrieval_acc",
        f"responsiveness.retrieval_acc_top{retrieval_k}",
        "responsiveness.retrieval_chance",
        f"responsiveness.retrieval_chance_top{retrieval_k}",
    )


METRIC_NAMES: tuple[str, ...] = metric_names()
"""Every metric :func:`score_step` returns with the default top-3, in catalogue order."""

_SAMPLE_SEED = 0
_NULL_SEED = 0
_ACTION_SEED = 0


@dataclass(frozen=True)
class StepScore:
    """The metrics of one step.

    ``metrics`` maps every name of :func:`metric_names` to its value, None where the
    metric is undefined for this step; ``representation`` is the text representation
    the embedding-based metrics used ("tfidf" or "minilm").
    """

    step: int
    metrics: dict[str, float | None]
    representation: str


def _turns(rollout: Rollout) -> list[Turn]:
    return sorted(rollout.turns, key=lambda t: t.index)


def rollout_segments(rollout: Rollout) -> list[str]:
    """The texts that stand for a rollout's reasoning, one per turn that has one.

    The non-empty reasoning of each turn in turn order; if no turn has reasoning, the
    non-empty actions instead.
    """
    turns = _turns(rollout)
    reasoning = [t.reasoning for t in turns if t.reasoning.strip()]
    return reasoning or [t.action for t in turns if t.action.strip()]


def masked_segments(rollout: Rollout, keep: frozenset[str] = frozenset()) -> list[str]:
    """:func:`rollout_segments` with the tokens copied from the observations masked.

    Each turn's text is masked against the observations of that turn and the turns
    before it (:func:`collapsewatch.metrics.masking.mask_turns`), keeping ``keep``.
    """
    turns = _turns(rollout)
    use_reasoning = any(t.reasoning.strip() for t in turns)
    texts = [t.reasoning if use_reasoning else t.action for t in turns]
    masked = masking.mask_turns(texts, [t.observation for t in turns], keep=keep)
    return [m for m, t in zip(masked, texts, strict=True) if t.strip()]


def rollout_text(rollout: Rollout) -> str:
    """The rollout's reasoning text: :func:`rollout_segments` joined by "\\n"."""
    return "\n".join(rollout_segments(rollout))


def _first_observations(rollouts: Sequence[Rollout]) -> dict[str, str]:
    """The first-turn observation of each state (of its first rollout)."""
    out: dict[str, str] = {}
    for r in rollouts:
        if r.state_id not in out:
            out[r.state_id] = _turns(r)[0].observation
    return out


def _nonfinite(rollouts: Sequence[Rollout], cross_scores: CrossScores | None) -> int:
    turns = [t for r in rollouts for t in r.turns]
    matrix = (
        np.asarray(cross_scores.logprob_sum, dtype=np.float64)
        if cross_scores is not None
        else np.zeros(0)
    )
    return structure.nonfinite_count(
        [r.reward for r in rollouts],
        [t.reward for t in turns],
        [t.token_entropy for t in turns],
        [t.logprob for t in turns],
        matrix,
    )


def _logprob_metrics(
    rollouts: Sequence[Rollout],
    cross_scores: CrossScores | None,
    first_obs: dict[str, str],
    retrieval_k: int,
) -> dict[str, float | None]:
    """The cross-score metrics, and how many rows they used and left out.

    A row is used when its rollout is one of ``rollouts``, that rollout's state is a
    column, and the row is finite; every column is an input (also one no rollout of
    the step has). Columns whose state has the same non-empty first-turn observation
    are one input (:func:`responsiveness.merge_columns`).
    """
    names = metric_names(retrieval_k)
    first = names.index("responsiveness.mi_logprob")
    out: dict[str, float | None] = dict.fromkeys(
        ("structure.cross_rows_scored", "structure.cross_rows_dropped", *names[first:])
    )
    if cross_scores is None:
        return out
    step = rollouts[0].step
    if cross_scores.step != step:
        raise ValueError(f"cross_scores are for step {cross_scores.step}, rollouts for {step}")
    summed = np.asarray(cross_scores.logprob_sum, dtype=np.float64)
    ntok = np.asarray(cross_scores.num_tokens, dtype=np.float64)
    column = {sid: j for j, sid in enumerate(cross_scores.state_ids)}
    state_of = {r.rollout_id: r.state_id for r in rollouts}
    own_state = [state_of.get(rid) for rid in cross_scores.rollout_ids]
    matched = np.array([s is not None and s in column for s in own_state], dtype=bool)
    used = matched & np.all(np.isfinite(summed), axis=1)
    out["structure.cross_rows_scored"] = float(used.sum())
    out["structure.cross_rows_dropped"] = float(len(used) - used.sum())
    keys = [
        ("observation", first_obs[sid]) if first_obs.get(sid, "").strip() else ("state_id", sid)
        for sid in cross_scores.state_ids
    ]
    rows = np.flatnonzero(used)
    own_original = np.array([column[own_state[i]] for i in rows], dtype=np.intp)
    per_token, column_of = responsiveness.merge_columns(summed[rows] / ntok[rows, None], keys)
    seq, _ = responsiveness.merge_columns(summed[rows], keys)
    own = column_of[own_original]
    n = per_token.shape[1]
    # One input among the rows: the uniform mixture is not the rows' input
    # distribution, and "responsiveness with one state" is undefined, never 0.
    if len(rows) == 0 or n < 2 or len(np.unique(own)) < 2:
        return out
    out.update(
        {
            "responsiveness.mi_logprob": responsiveness.mi_from_scores(per_token, own),
            "responsiveness.mi_logprob_seq": responsiveness.mi_from_scores(seq, own),
            "responsiveness.cond_entropy": responsiveness.conditional_entropy_from_scores(
                per_token, own
            ),
            "responsiveness.marginal_entropy": responsiveness.marginal_entropy_from_scores(
                per_token
            ),
            "responsiveness.marginal_std": responsiveness.marginal_std_from_scores(per_token),
            "responsiveness.mi_zscore": responsiveness.mi_zscore_from_scores(per_token, own),
            "responsiveness.retrieval_acc": responsiveness.retrieval_from_scores(
                per_token, own, chance_corrected=False
            ),
            f"responsiveness.retrieval_acc_top{retrieval_k}": responsiveness.retrieval_from_scores(
                per_token, own, k=retrieval_k, chance_corrected=False
            ),
            "responsiveness.retrieval_chance": responsiveness.retrieval_chance(n),
            f"responsiveness.retrieval_chance_top{retrieval_k}": responsiveness.retrieval_chance(
                n, retrieval_k
            ),
        }
    )
    return out


def score_step(
    rollouts: Sequence[Rollout],
    *,
    cross_scores: CrossScores | None = None,
    representation: str = "tfidf",
    embed_max_texts: int = 256,
    embed_max_tokens: int = 128,
    mi_temperature: float = 0.2,
    retrieval_k: int = 3,
    action_permutations: int = 200,
) -> StepScore:
    """Compute every metric of one step.

    Args:
        rollouts: the step's rollouts (all with the same ``step``).
        cross_scores: the trainer's cross-score matrix for this step, or None. Without
            it every log-prob metric (``responsiveness.mi_logprob`` … ``retrieval_chance*``,
            ``structure.cross_rows_*``) is None. Its rows are matched to ``rollouts`` by
            rollout id; rows of other rollouts, rows whose state is no column and rows
            with a non-finite entry are left out (``structure.cross_rows_dropped``).
        representation: "tfidf" (every rollout, fit on this step) or "minilm" (at most
            ``embed_max_texts`` rollouts, sampled stratified by state with a fixed seed,
            truncated to ``embed_max_tokens`` word pieces). Correctness, structure,
            ``diversity.distinct_2``, ``diversity.token_entropy``, the character
            entropies and ``responsiveness.action_mi`` always use every rollout.
        embed_max_texts: MiniLM budget per step.
        embed_max_tokens: MiniLM truncation.
        mi_temperature: kernel temperature of ``responsiveness.mi_embed`` (and its
            masked variant).
        retrieval_k: the k of ``responsiveness.retrieval_acc_top{k}`` (>= 2; the
            top-1 accuracy is always reported as ``retrieval_acc``).
        action_permutations: shuffles of the ``responsiveness.action_mi`` p-value.

    Returns:
        A :class:`StepScore` with every name of :func:`metric_names(retrieval_k)
        <metric_names>`, None where undefined.

    Raises:
        ValueError: no rollouts, rollouts from several steps, cross-scores of another
            step, retrieval_k < 2, or an unknown representation.
    """
    if not rollouts:
        raise ValueError("score_step needs at least one rollout")
    steps = {r.step for r in rollouts}
    if len(steps) != 1:
        raise ValueError(f"rollouts span several steps: {sorted(steps)}")
    if representation not in ("tfidf", "minilm"):
        raise ValueError(f"unknown representation {representation!r}: use 'tfidf' or 'minilm'")
    if retrieval_k < 2:
        raise ValueError("retrieval_k must be >= 2 (top-1 is retrieval_acc)")

    state_ids = [r.state_id for r in rollouts]
    rewards = [r.reward for r in rollouts]
    turns = [t for r in rollouts for t in r.turns]
    segments = [rollout_segments(r) for r in rollouts]
    texts = ["\n".join(s) for s in segments]
    first_obs = _first_observations(rollouts)
    keep = masking.shared_tokens(first_obs.values())
    masked = ["\n".join(masked_segments(r, keep)) for r in rollouts]

    # Nothing copied (the common case for reasoning that does not restate its input):
    # the masked representation is the plain one, and is not fit twice.
    if representation == "tfidf":
        groups = state_ids
        embeddings: rep.Embeddings = rep.tfidf(texts)
        masked_embeddings: rep.Embeddings = embeddings if masked == texts else rep.tfidf(masked)
    else:
        sample = rep.stratified_sample(state_ids, embed_max_texts, seed=_SAMPLE_SEED)
        groups = [state_ids[i] for i in sample]
        embeddings = rep.minilm([texts[i] for i in sample], max_tokens=embed_max_tokens)
        # MiniLM embeds each text alone: only the texts that masking changed are embedded.
        changed = [k for k, i in enumerate(sample) if masked[i] != texts[i]]
        masked_embeddings = np.array(embeddings, copy=True)
        if changed:
            masked_embeddings[changed] = rep.minilm(
                [masked[sample[k]] for k in changed], max_tokens=embed_max_tokens
            )

    sizes = structure.group_size_range(state_ids)
    char_mean, char_min = diversity.char_entropy_stats(texts)
    action_mi, action_p = responsiveness.action_mi(
        state_ids,
        [responsiveness.normalise_action(_turns(r)[0].action) for r in rollouts],
        permutations=action_permutations,
        seed=_ACTION_SEED,
    )
    metrics: dict[str, float | None] = {
        "structure.num_rollouts": float(structure.num_rollouts(state_ids)),
        "structure.distinct_states": float(structure.distinct_states(state_ids)),
        "structure.group_size_min": None if sizes is None else float(sizes[0]),
        "structure.group_size_max": None if sizes is None else float(sizes[1]),
        "structure.duplicate_rate": structure.duplicate_rate(
            state_ids, [tuple((t.reasoning, t.action) for t in _turns(r)) for r in rollouts]
        ),
        "structure.nonfinite": float(_nonfinite(rollouts, cross_scores)),
        "structure.truncated_rate": structure.truncated_rate([r.truncated for r in rollouts]),
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
        "diversity.vendi": diversity.vendi(embeddings),
        "diversity.char_entropy": char_mean,
        "diversity.char_entropy_min": char_min,
        "responsiveness.mi_embed": responsiveness.mi_embed(
            embeddings, groups, temperature=mi_temperature, seed=_NULL_SEED
        ),
        "responsiveness.retrieval_embed": responsiveness.retrieval_embed(embeddings, groups),
        "responsiveness.mi_embed_masked": responsiveness.mi_embed(
            masked_embeddings, groups, temperature=mi_temperature, seed=_NULL_SEED
        ),
        "responsiveness.retrieval_embed_masked": responsiveness.retrieval_embed(
            masked_embeddings, groups
        ),
        "responsiveness.action_mi": action_mi,
        "responsiveness.action_mi_pvalue": action_p,
    }
    metrics.update(_logprob_metrics(rollouts, cross_scores, first_obs, retrieval_k))
    names = metric_names(retrieval_k)
    return StepScore(
        step=steps.pop(), metrics={n: metrics[n] for n in names}, representation=representation
    )


def score_steps(
    rollouts: Sequence[Rollout],
    *,
    cross_scores: Mapping[int, CrossScores] | None = None,
    representation: str = "tfidf",
    embed_max_texts: int = 256,
    embed_max_tokens: int = 128,
    mi_temperature: float = 0.2,
    retrieval_k: int = 3,
    action_permutations: int = 200,
) -> list[StepScore]:
    """Score rollouts of any number of steps: one :class:`StepScore` per step, by step.

    ``cross_scores`` maps a step to its cross-score matrix (steps without one get None
    log-prob metrics); other keyword arguments as in :func:`score_step`. An empty input
    gives an empty list. The series metrics (EMAs) are not included: apply
    :func:`collapsewatch.metrics.series.series_metrics` to the result.
    """
    by_step: dict[int, list[Rollout]] = {}
    for r in rollouts:
        by_step.setdefault(r.step, []).append(r)
    cross = cross_scores or {}
    return [
        score_step(
            by_step[s],
            cross_scores=cross.get(s),
            representation=representation,
            embed_max_texts=embed_max_texts,
            embed_max_tokens=embed_max_tokens,
            mi_temperature=mi_temperature,
            retrieval_k=retrieval_k,
            action_permutations=action_permutations,
        )
        for s in sorted(by_step)
    ]

"""Settings of the reference GRPO trainer: one dataclass, a help string per field.

Presets (:data:`PRESETS`, :func:`preset`) are named sets of overrides that make a run
healthy, or make it collapse in one of the two ways collapsewatch watches for. What
each one measurably does on the tiny CPU policy is in docs/trainer.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal


def _f(default: Any, help: str, **kw: Any) -> Any:
    return field(default=default, metadata={"help": help}, **kw)


@dataclass
class GRPOConfig:
    """Everything a GRPO run needs; ``GRPOConfig.help(name)`` gives a field's help."""

    # -- task --------------------------------------------------------------------------
    env: str = _f("frozenlake", "Environment: frozenlake, bandit or sokoban.")
    env_options: dict[str, Any] = _f(
        None,
        "Keyword options for the environment's constructor (e.g. size, max_turns).",
    )
    seed: int = _f(0, "Seed of everything: model init, state draws, sampling.")

    # -- policy ------------------------------------------------------------------------
    model_path: str | None = _f(
        None,
        "Local checkpoint directory of a causal LM; None builds the tiny CPU policy.",
    )
    device: str = _f("cpu", "Torch device: cpu or cuda.")
    dtype: str = _f("bfloat16", "Weight dtype of a checkpoint model (the tiny one is fp32).")
    n_layer: int = _f(2, "Tiny policy: transformer layers.")
    n_embd: int = _f(64, "Tiny policy: hidden size.")
    n_head: int = _f(4, "Tiny policy: attention heads.")
    max_new_tokens: int = _f(24, "Longest response, in tokens (raise it for real models).")
    history_turns: int = _f(
        0,
        "Earlier (observation, response) pairs shown in each turn's context; 0 = only "
        "the current observation.",
    )
    score_batch_size: int = _f(
        256,
        "Sequences per no-grad scoring forward pass (old log-probs, cross-scores); "
        "lower it for real models (logits are batch × length × vocabulary).",
    )
    num_threads: int = _f(1, "torch CPU threads (the tiny policy gains nothing from more).")

    # -- cold start (supervised phase on the solver's expert trajectories) -------------
    sft_steps: int = _f(300, "Supervised steps on expert trajectories before GRPO (0 = none).")
    sft_batch_size: int = _f(64, "Expert turns per supervised step.")
    sft_lr: float = _f(3e-3, "Learning rate of the supervised phase.")
    sft_episodes: int = _f(512, "Expert episodes (distinct seeds) in the supervised data.")

    # -- rollouts ----------------------------------------------------------------------
    num_states: int = _f(8, "Distinct initial states per step (the number of groups).")
    group_size: int = _f(8, "Rollouts per state: G, the GRPO group.")
    temperature: float = _f(1.0, "Sampling temperature; the policy is softmax(logits / T).")

    # -- reward ------------------------------------------------------------------------
    reward_noise: float = _f(
        0.0,
        "Probability that a trajectory's training reward is replaced by a coin flip "
        "(0 or 1) that ignores the state: a reward that does not look at the state's "
        "specifics. The logged reward stays the environment's.",
    )

    # -- GRPO objective (DeepSeekMath, arXiv 2402.03300) --------------------------------
    lr: float = _f(1e-3, "Learning rate of the GRPO updates (AdamW).")
    warmup_steps: int = _f(
        10,
        "GRPO steps over which the learning rate ramps up linearly from lr / warmup_steps "
        "to lr (a fresh AdamW's first updates move every weight by about lr).",
    )
    weight_decay: float = _f(0.0, "AdamW weight decay.")
    max_grad_norm: float = _f(1.0, "Gradient clipping norm (0 = off).")
    ppo_epochs: int = _f(1, "Passes over each step's rollouts (μ in GRPO).")
    num_minibatches: int = _f(1, "Optimizer updates per pass (the rollouts are split).")
    clip_eps: float = _f(0.2, "PPO clip range ε of the importance ratio.")
    scale_advantages: bool = _f(
        True,
        "Divide group-centred returns by the group's reward std (GRPO); False keeps "
        "only the mean-centring (Dr. GRPO).",
    )
    loss_aggregation: Literal["token_mean", "sequence_mean"] = _f(
        "token_mean",
        "token_mean: average over all policy tokens of the batch; "
        "sequence_mean: average per response, then over responses (the GRPO paper).",
    )
    kl_coef: float = _f(
        0.0,
        "β: weight of the KL penalty to the reference (cold-started) policy, k3 "
        "estimator; 0 = no reference model.",
    )
    entropy_coef: float = _f(
        0.0,
        "Weight of the token-entropy bonus (added to the objective); negative = an "
        "entropy penalty (sharpening, entropy minimisation).",
    )
    entropy_on: Literal["reasoning", "response"] = _f(
        "response",
        "Tokens the entropy bonus covers: 'reasoning' = inside <think> only, "
        "'response' = all of the policy's tokens.",
    )
    entropy_target: float | None = _f(
        None,
        "Adaptive entropy control: the entropy term acts in a step only while the "
        "mean entropy (nats/token) of the tokens it covers, measured on the step's "
        "rollouts, is below this target (above it, for a negative coefficient); None = "
        "always on.",
    )
    snr_filter_top_p: float = _f(
        1.0,
        "RAGEN-2 SNR-aware filtering: keep this fraction of the step's groups, those "
        "with the highest reward std; 1.0 = keep all.",
    )

    # -- monitoring --------------------------------------------------------------------
    cross_score_every: int = _f(
        1, "Compute the cross-score matrix log p(z_i | x_j) every k steps (0 = never)."
    )
    env_id: str | None = _f(None, "env_id written on rollouts (default: the env name).")
    run_name: str | None = _f(None, "Run name (rollout ids are prefixed with it).")

    def __post_init__(self) -> None:
        if self.env_options is None:
            self.env_options = {}
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2 (advantages are relative to the group)")
        if not 0.0 < self.snr_filter_top_p <= 1.0:
            raise ValueError("snr_filter_top_p must be in (0, 1]")
        if not 0.0 <= self.reward_noise <= 1.0:
            raise ValueError("reward_noise must be in [0, 1]")

    @classmethod
    def help(cls, name: str) -> str:
        """The help string of field ``name``."""
        return next(f.metadata["help"] for f in fields(cls) if f.name == name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Presets: overrides on top of the defaults. The comments say why each knob is there.
PRESETS: dict[str, dict[str, Any]] = {
    # Moderate steps (two passes of four minibatches over each step's rollouts),
    # anchored to the cold-started policy by a KL term, and RAGEN-2's SNR filter (learn
    # only from the half of the groups with the most reward spread), so regularisation
    # never acts alone on zero-signal groups: reasoning keeps naming the state.
    "healthy": {
        "lr": 5e-4,
        "kl_coef": 0.05,
        "entropy_coef": 0.0,
        "snr_filter_top_p": 0.5,
        "ppo_epochs": 2,
        "num_minibatches": 4,
    },
    # RAGEN-2's template collapse: an entropy bonus on the reasoning tokens only, no KL,
    # no filter, and an entropy target that keeps the reasoning "healthy-looking" (about
    # 1 nat/token). In groups whose rewards are all equal the task gradient is zero and
    # the input-agnostic bonus acts alone: reasoning stays varied while it stops
    # depending on the state. Without the target the bonus ran away in 1 seed of 3
    # (token entropy 3.1 nats, 32 % valid format; docs/trainer.md).
    "template-collapse": {
        "lr": 1e-3,
        "kl_coef": 0.0,
        "entropy_coef": 0.05,
        "entropy_on": "reasoning",
        "entropy_target": 1.0,
        "snr_filter_top_p": 1.0,
    },
    # Entropy collapse by sharpening: a negative entropy coefficient (entropy
    # minimisation) on every response token and no KL. Measured: plain GRPO at a high
    # learning rate (3e-3, 4 epochs) made the tiny policy's entropy *rise*, so the
    # sharpening term is what makes this preset collapse (docs/trainer.md).
    "entropy-collapse": {
        "lr": 1e-3,
        "kl_coef": 0.0,
        "entropy_coef": -0.1,
        "entropy_on": "response",
        "snr_filter_top_p": 1.0,
    },
}


def preset(name: str, **overrides: Any) -> GRPOConfig:
    """The config of preset ``name`` (healthy, template-collapse, entropy-collapse),
    with ``overrides`` applied last."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(GRPOConfig(), **{**PRESETS[name], **overrides})

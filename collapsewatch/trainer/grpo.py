"""The reference GRPO trainer for multi-turn text agents (DeepSeekMath, arXiv 2402.03300).

One step:

1. Draw ``num_states`` initial states (env seeds with distinct first observations) and
   run ``group_size`` episodes from each: a group. All episodes advance in lockstep, one
   batched generation per turn. Each turn's context is the current observation (plus
   ``history_turns`` earlier turns); the response is parsed as
   ``<think>…</think><answer>…</answer>`` and the answer goes to the environment.
2. Score every response under the current policy (old log-probs, token entropies) and,
   with ``kl_coef > 0``, under the reference (the cold-started policy). Every
   ``cross_score_every`` steps, score each episode's first reasoning under every
   state's first observation: the cross-score matrix of RAGEN-2 (arXiv 2604.06268).
3. Group-relative advantages: each trajectory's return minus its group's mean,
   optionally divided by the group's std; every token of every turn of the trajectory
   gets it. RAGEN-2's SNR filter keeps only the groups with the highest reward std.
4. Clipped policy-gradient objective on the policy's own tokens only (observations are
   context, never targets), plus ``kl_coef`` × k3 KL to the reference and minus
   ``entropy_coef`` × token entropy (on reasoning tokens or the whole response).
5. Emit the step's rollouts (wire format), cross-scores and metrics to the callbacks.

Everything is seeded from ``config.seed``; on CPU two runs with one seed are equal.
"""

from __future__ import annotations

import copy
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from collapsewatch.schema import CrossScores, Rollout, Turn

from .callbacks import TrainingHook
from .envs import make_env, vocabulary
from .envs.base import TextEnv
from .format import ParsedResponse, format_response, parse_response
from .grpo_config import GRPOConfig
from .policy import Policy, load_policy, tiny_policy, token_stats

logger = logging.getLogger(__name__)


@dataclass
class TurnRecord:
    """One policy response inside an episode: a training sample."""

    observation: str
    prompt_ids: list[int]
    response_ids: list[int]
    parsed: ParsedResponse
    reasoning_span: tuple[int, int]
    reward: float = 0.0
    done: bool = False
    old_logprobs: Tensor | None = None  # (R,) under the policy that sampled it
    ref_logprobs: Tensor | None = None  # (R,) under the reference policy
    entropies: Tensor | None = None  # (R,) per-token entropy, nats


@dataclass
class Episode:
    """One trajectory: a rollout of the group ``group`` started from ``seed``."""

    group: int
    member: int
    seed: int
    turns: list[TurnRecord] = field(default_factory=list)
    env_reward: float = 0.0
    train_reward: float = 0.0
    success: bool = False
    invalid_actions: int = 0
    advantage: float = 0.0


def group_advantages(rewards: Tensor, groups: Tensor, scale: bool, eps: float = 1e-6) -> Tensor:
    """GRPO advantages: each reward minus its group's mean, divided by the group's
    (population) std when ``scale``. ``rewards``, ``groups``: ``(M,)``; returns ``(M,)``,
    summing to 0 within every group. A group of equal rewards gets zeros."""
    out = torch.zeros_like(rewards, dtype=torch.float64)
    for g in torch.unique(groups):
        idx = groups == g
        r = rewards[idx].double()
        centred = r - r.mean()
        if scale:
            centred = centred / (r.std(unbiased=False) + eps)
        out[idx] = centred
    return out.to(rewards.dtype)


def snr_keep(rewards: Tensor, groups: Tensor, top_p: float) -> set[int]:
    """RAGEN-2's SNR-aware filter: the ``ceil(top_p · N)`` groups with the highest
    reward std (ties: lower group index first). ``top_p = 1`` keeps all."""
    ids = sorted(int(g) for g in torch.unique(groups))
    if top_p >= 1.0:
        return set(ids)
    stds = {g: float(rewards[groups == g].double().std(unbiased=False)) for g in ids}
    ranked = sorted(ids, key=lambda g: (-stds[g], g))
    return set(ranked[: max(1, math.ceil(top_p * len(ids)))])


def _pad(rows: Sequence[Tensor], width: int) -> Tensor:
    out = torch.zeros((len(rows), width), dtype=rows[0].dtype, device=rows[0].device)
    for i, row in enumerate(rows):
        out[i, : row.shape[0]] = row
    return out


class GRPOTrainer:
    """GRPO with multi-turn episodes, a cold start, and collapsewatch streaming.

    Typical use::

        trainer = GRPOTrainer(preset("healthy", env="frozenlake"), callbacks=[...])
        trainer.train(num_steps=60)
    """

    def __init__(
        self,
        config: GRPOConfig,
        policy: Policy | None = None,
        callbacks: Sequence[TrainingHook] = (),
    ) -> None:
        self.config = config
        if config.device == "cpu":
            torch.set_num_threads(max(1, config.num_threads))
        torch.manual_seed(config.seed)
        if policy is None:
            if config.model_path:
                policy = load_policy(
                    config.model_path, config.device, config.dtype, config.max_new_tokens
                )
            else:
                policy = tiny_policy(
                    vocabulary(),
                    n_layer=config.n_layer,
                    n_embd=config.n_embd,
                    n_head=config.n_head,
                    seed=config.seed,
                    max_new_tokens=config.max_new_tokens,
                )
                policy.model.to(config.device)
        self.policy = policy
        self.model = policy.model
        self.callbacks = list(callbacks)
        probe = self.make_env()
        self.env_id = config.env_id or config.env
        self.instruction = probe.instruction
        self.run_name = config.run_name or f"{config.env}-seed{config.seed}"
        self.rng = random.Random(config.seed)
        self.shuffle_gen = torch.Generator().manual_seed(config.seed)
        self.ref_model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.cold_started = False
        self.step = 0

    # -- setup -------------------------------------------------------------------------
    def make_env(self) -> TextEnv:
        return make_env(self.config.env, **self.config.env_options)

    def _prompt(self, observation: str, history: Sequence[tuple[str, str]]) -> list[int]:
        h = self.config.history_turns
        return self.policy.prompt_ids(observation, self.instruction, history[-h:] if h else ())

    def expert_examples(self, num_episodes: int, seed: int) -> list[tuple[list[int], list[int]]]:
        """(prompt ids, response ids) of every turn of ``num_episodes`` expert episodes."""
        env, rng = self.make_env(), random.Random(seed)
        examples = []
        for _ in range(num_episodes):
            history: list[tuple[str, str]] = []
            for observation, expert in env.expert_episode(rng.randrange(2**31)):
                response = format_response(expert.reasoning, expert.action)
                examples.append(
                    (self._prompt(observation, history), self.policy.response_ids(response))
                )
                history.append((observation, response))
        return examples

    def cold_start(self) -> dict[str, float]:
        """The supervised phase: imitate the solver's responses (loss on response
        tokens only). Then freeze a copy as the KL reference, when one is needed."""
        cfg = self.config
        t0 = time.perf_counter()
        loss_value = float("nan")
        if cfg.sft_steps > 0:
            examples = self.expert_examples(cfg.sft_episodes, seed=cfg.seed + 7919)
            opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.sft_lr)
            rng = random.Random(cfg.seed + 104729)
            for _ in range(cfg.sft_steps):
                batch = [examples[rng.randrange(len(examples))] for _ in range(cfg.sft_batch_size)]
                logp, _, mask = token_stats(
                    self.model,
                    [p + r for p, r in batch],
                    [len(p) for p, _ in batch],
                    1.0,
                    self.policy.tokenizer.pad_token_id,
                    with_entropy=False,
                )
                loss = -(logp.sum() / mask.sum())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss_value = float(loss.detach())
        if cfg.kl_coef > 0:
            self.ref_model = copy.deepcopy(self.model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay
        )
        self.cold_started = True
        return {"sft_loss": loss_value, "sft_time_s": time.perf_counter() - t0}

    # -- rollouts ----------------------------------------------------------------------
    def sample_seeds(self) -> list[int]:
        """``num_states`` env seeds whose first observations are all distinct."""
        env, seeds, seen = self.make_env(), [], set()
        while len(seeds) < self.config.num_states:
            seed = self.rng.randrange(2**31)
            observation = env.reset(seed)
            if observation not in seen:
                seen.add(observation)
                seeds.append(seed)
        return seeds

    @torch.no_grad()
    def rollout(self, seeds: Sequence[int]) -> list[Episode]:
        """Play ``group_size`` episodes from each seed, all in lockstep."""
        cfg = self.config
        episodes, envs, observations, histories = [], [], [], []
        for g, seed in enumerate(seeds):
            for k in range(cfg.group_size):
                env = self.make_env()
                observations.append(env.reset(seed))
                envs.append(env)
                episodes.append(Episode(group=g, member=k, seed=seed))
                histories.append([])
        active = list(range(len(episodes)))
        while active:
            prompts = [self._prompt(observations[i], histories[i]) for i in active]
            responses = self.policy.generate(prompts, cfg.temperature)
            still = []
            for i, prompt, ids in zip(active, prompts, responses, strict=True):
                text = self.policy.decode(ids)
                parsed = parse_response(text)
                obs_before = observations[i]
                obs, reward, terminated, truncated, info = envs[i].step(
                    parsed.action if parsed.valid else None
                )
                done = terminated or truncated
                episodes[i].turns.append(
                    TurnRecord(
                        observation=obs_before,
                        prompt_ids=prompt,
                        response_ids=ids,
                        parsed=parsed,
                        reasoning_span=self.policy.reasoning_span(ids),
                        reward=reward,
                        done=done,
                    )
                )
                histories[i].append((obs_before, text))
                observations[i] = obs
                if done:
                    ep = episodes[i]
                    ep.env_reward = sum(t.reward for t in ep.turns)
                    ep.success = bool(info.get("success", False))
                    ep.invalid_actions = int(info.get("invalid_actions", 0))
                else:
                    still.append(i)
            active = still
        for ep in episodes:
            noisy = cfg.reward_noise > 0 and self.rng.random() < cfg.reward_noise
            ep.train_reward = float(self.rng.random() < 0.5) if noisy else ep.env_reward
        return episodes

    @torch.no_grad()
    def score(self, episodes: Sequence[Episode]) -> None:
        """Fill old log-probs, entropies (and reference log-probs) of every turn."""
        chunk = self.config.score_batch_size
        turns = [t for ep in episodes for t in ep.turns]
        pad = self.policy.tokenizer.pad_token_id
        for lo in range(0, len(turns), chunk):
            part = turns[lo : lo + chunk]
            seqs = [t.prompt_ids + t.response_ids for t in part]
            starts = [len(t.prompt_ids) for t in part]
            logp, ent, _ = token_stats(self.model, seqs, starts, self.config.temperature, pad)
            ref = None
            if self.ref_model is not None:
                ref, _, _ = token_stats(
                    self.ref_model, seqs, starts, self.config.temperature, pad, with_entropy=False
                )
            for row, t in enumerate(part):
                n = len(t.response_ids)
                t.old_logprobs = logp[row, :n].float().cpu()
                t.entropies = ent[row, :n].float().cpu()  # type: ignore[index]
                if ref is not None:
                    t.ref_logprobs = ref[row, :n].float().cpu()

    @torch.no_grad()
    def cross_scores(
        self, step: int, episodes: Sequence[Episode]
    ) -> tuple[CrossScores | None, Tensor | None, list[int]]:
        """RAGEN-2's cross-score matrix for this step's first turns.

        Row i: the reasoning tokens z_i of episode i's first response (episodes without
        any are left out). Column j: state j's first observation x_j. Entry:
        ``log p(z_i | x_j)`` summed over z_i's tokens, where the context is x_j's prompt
        followed by episode i's own response up to the reasoning (the ``<think>`` tag).
        Returns the wire object, the ``(M, N)`` matrix and each row's own column.
        """
        groups = sorted({ep.group for ep in episodes})
        first_of = {g: next(ep for ep in episodes if ep.group == g) for g in groups}
        rows = [ep for ep in episodes if ep.turns and _span_len(ep.turns[0]) > 0]
        if not rows:
            return None, None, []
        seqs, starts = [], []
        for ep in rows:
            t = ep.turns[0]
            s, e = t.reasoning_span
            for g in groups:
                prompt = first_of[g].turns[0].prompt_ids
                seqs.append(prompt + t.response_ids[:e])
                starts.append(len(prompt) + s)
        sums = []
        chunk = self.config.score_batch_size
        pad = self.policy.tokenizer.pad_token_id
        for lo in range(0, len(seqs), chunk):
            logp, _, _ = token_stats(
                self.model,
                seqs[lo : lo + chunk],
                starts[lo : lo + chunk],
                self.config.temperature,
                pad,
                with_entropy=False,
            )
            sums.append(logp.sum(1).double().cpu())
        matrix = torch.cat(sums).reshape(len(rows), len(groups)).clamp(max=0.0)
        col = {g: j for j, g in enumerate(groups)}
        own = [col[ep.group] for ep in rows]
        wire = CrossScores(
            step=step,
            rollout_ids=[self.rollout_id(step, ep) for ep in rows],
            state_ids=[str(first_of[g].seed) for g in groups],
            logprob_sum=matrix.tolist(),
            num_tokens=[_span_len(ep.turns[0]) for ep in rows],
        )
        return wire, matrix, own

    # -- the update --------------------------------------------------------------------
    def loss(
        self, samples: Sequence[tuple[TurnRecord, float]], entropy_coef: float | None = None
    ) -> tuple[Tensor, dict[str, float]]:
        """The GRPO objective (to minimise) on (turn, advantage) samples;
        ``entropy_coef`` overrides the config's (the adaptive control sets it)."""
        cfg = self.config
        coef = cfg.entropy_coef if entropy_coef is None else entropy_coef
        pad = self.policy.tokenizer.pad_token_id
        turns = [t for t, _ in samples]
        want_entropy = coef != 0
        logp, ent, mask = token_stats(
            self.model,
            [t.prompt_ids + t.response_ids for t in turns],
            [len(t.prompt_ids) for t in turns],
            cfg.temperature,
            pad,
            with_entropy=want_entropy,
        )
        width = logp.shape[1]
        device = logp.device
        maskf = mask.float()
        old = _pad([t.old_logprobs for t in turns], width).to(device)  # type: ignore[misc]
        adv = torch.tensor([a for _, a in samples], dtype=torch.float32, device=device)[:, None]
        ratio = torch.exp(logp - old)
        clipped = torch.clamp(ratio, 1.0 - cfg.clip_eps, 1.0 + cfg.clip_eps)
        pg_tok = -torch.minimum(ratio * adv, clipped * adv)
        kl_tok = torch.zeros_like(pg_tok)
        if self.ref_model is not None and cfg.kl_coef > 0:
            ref = _pad([t.ref_logprobs for t in turns], width).to(device)  # type: ignore[misc]
            delta = ref - logp
            kl_tok = torch.exp(delta) - delta - 1.0
        if want_entropy and cfg.entropy_on == "reasoning":
            emask = torch.zeros_like(maskf)
            for row, t in enumerate(turns):
                s, e = t.reasoning_span
                emask[row, s:e] = 1.0
        else:
            emask = maskf

        def agg(values: Tensor, m: Tensor) -> Tensor:
            if cfg.loss_aggregation == "sequence_mean":
                per_seq = (values * m).sum(1) / m.sum(1).clamp(min=1.0)
                return per_seq.mean()
            return (values * m).sum() / m.sum().clamp(min=1.0)

        pg = agg(pg_tok, maskf)
        kl = agg(kl_tok, maskf)
        loss = pg + cfg.kl_coef * kl
        entropy = torch.zeros((), device=device)
        if want_entropy:
            entropy = agg(ent, emask)  # type: ignore[arg-type]
            loss = loss - coef * entropy
        with torch.no_grad():
            clip_frac = agg(((ratio - clipped).abs() > 1e-6).float(), maskf)
        stats = {
            "loss": float(loss.detach()),
            "pg_loss": float(pg.detach()),
            "kl": float(kl.detach()),
            "entropy_term": float(entropy.detach()),
            "clip_frac": float(clip_frac),
        }
        return loss, stats

    def entropy_coef_now(self, episodes: Sequence[Episode]) -> float:
        """The entropy coefficient for this step: the config's, switched off while the
        covered tokens' mean entropy is past ``entropy_target``."""
        cfg = self.config
        if cfg.entropy_target is None or cfg.entropy_coef == 0:
            return cfg.entropy_coef
        parts = []
        for t in (t for ep in episodes for t in ep.turns):
            s, e = t.reasoning_span if cfg.entropy_on == "reasoning" else (0, len(t.response_ids))
            parts.append(t.entropies[s:e])  # type: ignore[index]
        values = torch.cat(parts) if parts else torch.zeros(0)
        current = float(values.mean()) if values.numel() else 0.0
        below = current < cfg.entropy_target
        return cfg.entropy_coef if below == (cfg.entropy_coef > 0) else 0.0

    def update(
        self, samples: Sequence[tuple[TurnRecord, float]], entropy_coef: float | None = None
    ) -> dict[str, float]:
        """``ppo_epochs`` passes of ``num_minibatches`` optimizer steps over ``samples``.
        Returns the mean of the minibatch stats (plus the last grad norm)."""
        cfg = self.config
        if self.optimizer is None:
            raise RuntimeError("call cold_start() first (it also creates the optimizer)")
        totals: dict[str, float] = {}
        count = 0
        grad_norm = 0.0
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(len(samples), generator=self.shuffle_gen).tolist()
            size = math.ceil(len(samples) / cfg.num_minibatches)
            for lo in range(0, len(order), size):
                batch = [samples[i] for i in order[lo : lo + size]]
                loss, stats = self.loss(batch, entropy_coef)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.max_grad_norm > 0:
                    grad_norm = float(
                        torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                    )
                self.optimizer.step()
                for k, v in stats.items():
                    totals[k] = totals.get(k, 0.0) + v
                count += 1
        out = {k: v / max(count, 1) for k, v in totals.items()}
        out["grad_norm"] = grad_norm
        return out

    def samples(self, episodes: Sequence[Episode]) -> tuple[list[tuple[TurnRecord, float]], int]:
        """Set advantages, apply the SNR filter; returns the training samples and the
        number of groups kept."""
        rewards = torch.tensor([ep.train_reward for ep in episodes], dtype=torch.float64)
        groups = torch.tensor([ep.group for ep in episodes])
        adv = group_advantages(rewards, groups, self.config.scale_advantages)
        keep = snr_keep(rewards, groups, self.config.snr_filter_top_p)
        out = []
        for ep, a in zip(episodes, adv.tolist(), strict=True):
            ep.advantage = a
            if ep.group in keep:
                out.extend((t, a) for t in ep.turns)
        return out, len(keep)

    # -- the loop ----------------------------------------------------------------------
    def rollout_id(self, step: int, ep: Episode) -> str:
        return f"{self.run_name}-s{step}-g{ep.group}-r{ep.member}"

    def to_rollouts(self, step: int, episodes: Sequence[Episode]) -> list[Rollout]:
        """The step's episodes in the wire format."""
        out = []
        for ep in episodes:
            turns = []
            for index, t in enumerate(ep.turns):
                n = len(t.response_ids)
                turns.append(
                    Turn(
                        index=index,
                        observation=t.observation,
                        reasoning=t.parsed.reasoning,
                        action=t.parsed.action or "",
                        reward=t.reward,
                        done=t.done,
                        token_entropy=max(0.0, float(t.entropies.mean())) if n else 0.0,  # type: ignore[union-attr]
                        num_tokens=n,
                        logprob=min(0.0, float(t.old_logprobs.sum())) if n else 0.0,  # type: ignore[union-attr]
                        valid_format=t.parsed.valid,
                    )
                )
            out.append(
                Rollout(
                    rollout_id=self.rollout_id(step, ep),
                    step=step,
                    env_id=self.env_id,
                    state_id=str(ep.seed),
                    reward=ep.env_reward,
                    success=ep.success,
                    turns=turns,
                    metadata={
                        "group": ep.group,
                        "train_reward": ep.train_reward,
                        "advantage": ep.advantage,
                        "invalid_actions": ep.invalid_actions,
                    },
                )
            )
        return out

    def train_step(self) -> tuple[list[Rollout], CrossScores | None, dict[str, float]]:
        """One GRPO step; returns what the callbacks get."""
        cfg = self.config
        if not self.cold_started:
            self.cold_start()
        step = self.step
        t0 = time.perf_counter()
        episodes = self.rollout(self.sample_seeds())
        t1 = time.perf_counter()
        self.score(episodes)
        wire, matrix, own = (None, None, [])
        if cfg.cross_score_every > 0 and step % cfg.cross_score_every == 0:
            wire, matrix, own = self.cross_scores(step, episodes)
        samples, kept = self.samples(episodes)
        t2 = time.perf_counter()
        coef = self.entropy_coef_now(episodes)
        lr = cfg.lr * min(1.0, (step + 1) / max(1, cfg.warmup_steps))
        for group in self.optimizer.param_groups:  # type: ignore[union-attr]
            group["lr"] = lr
        stats = self.update(samples, coef) if samples else {}
        stats["entropy_coef"] = coef
        stats["lr"] = lr
        t3 = time.perf_counter()
        metrics = self._metrics(episodes, matrix, own)
        metrics.update(stats)
        metrics.update(
            kept_groups=float(kept),
            rollout_time_s=t1 - t0,
            update_time_s=t3 - t2,
            step_time_s=t3 - t0,
        )
        rollouts = self.to_rollouts(step, episodes)
        self.step += 1
        return rollouts, wire, metrics

    def train(
        self, num_steps: int, on_step: Callable[[int, dict[str, float]], None] | None = None
    ) -> list[dict[str, float]]:
        """Cold start (once), then ``num_steps`` GRPO steps, streaming each to the
        callbacks. Returns the per-step metrics."""
        history = []
        if not self.cold_started:
            history_sft = self.cold_start()
            logger.info("cold start: %s", history_sft)
        try:
            for _ in range(num_steps):
                step = self.step
                rollouts, wire, metrics = self.train_step()
                history.append({"step": float(step), **metrics})
                for cb in self.callbacks:
                    try:
                        cb.on_step_end(step, rollouts, wire, metrics)
                    except Exception:  # a monitor must never stop training
                        logger.exception("callback %r failed at step %d", cb, step)
                if on_step is not None:
                    on_step(step, metrics)
        finally:
            for cb in self.callbacks:
                try:
                    cb.on_train_end()
                except Exception:
                    logger.exception("callback %r failed at the end of training", cb)
        return history

    # -- metrics -----------------------------------------------------------------------
    def _metrics(
        self, episodes: Sequence[Episode], matrix: Tensor | None, own: Sequence[int]
    ) -> dict[str, float]:
        turns = [t for ep in episodes for t in ep.turns]
        n_tok = sum(len(t.response_ids) for t in turns)
        reasoning_ent = [
            t.entropies[t.reasoning_span[0] : t.reasoning_span[1]]  # type: ignore[index]
            for t in turns
            if _span_len(t) > 0
        ]
        rewards = torch.tensor([ep.env_reward for ep in episodes], dtype=torch.float64)
        groups = torch.tensor([ep.group for ep in episodes])
        stds = [float(rewards[groups == g].std(unbiased=True)) for g in torch.unique(groups)]
        first_reasonings = [ep.turns[0].parsed.reasoning for ep in episodes]
        m: dict[str, float] = {
            "success_rate": sum(ep.success for ep in episodes) / len(episodes),
            "reward_mean": float(rewards.mean()),
            "train_reward_mean": sum(ep.train_reward for ep in episodes) / len(episodes),
            "token_entropy": sum(float(t.entropies.mean()) for t in turns) / len(turns),  # type: ignore[union-attr]
            "reasoning_entropy": (
                float(torch.cat(reasoning_ent).mean()) if reasoning_ent else float("nan")
            ),
            "valid_format_rate": sum(t.parsed.valid for t in turns) / len(turns),
            "invalid_action_rate": sum(ep.invalid_actions for ep in episodes) / len(turns),
            "turns_mean": len(turns) / len(episodes),
            "response_tokens_mean": n_tok / len(turns),
            "group_reward_std": sum(stds) / len(stds),
            "zero_std_fraction": sum(s < 1e-9 for s in stds) / len(stds),
            "distinct_reasoning": len(set(first_reasonings)) / len(first_reasonings),
            "retrieval_acc": float("nan"),
            "mi_logprob": float("nan"),
        }
        if matrix is not None and matrix.shape[1] >= 2:
            own_t = torch.tensor(own)
            rows = torch.arange(matrix.shape[0])
            m["retrieval_acc"] = float((matrix.argmax(1) == own_t).double().mean())
            marginal = torch.logsumexp(matrix, 1) - math.log(matrix.shape[1])
            m["mi_logprob"] = float((matrix[rows, own_t] - marginal).mean())
        return m


def _span_len(t: TurnRecord) -> int:
    return t.reasoning_span[1] - t.reasoning_span[0]

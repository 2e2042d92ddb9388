"""A short real-model GRPO job on a GPU: the reference trainer's production path.

Loads a local causal-LM checkpoint (e.g. Qwen2.5-0.5B-Instruct) in bf16 on CUDA,
cold-starts it for a few supervised steps on expert FrozenLake turns, runs a few GRPO
steps with cross-scores, and prints (and writes, with --out) steps/s, peak GPU memory
and the per-step metrics. Nothing is downloaded: the path must be a checkpoint folder.

    python benchmarks/trainer/gpu_smoke.py /models/Qwen2.5-0.5B-Instruct --steps 5 --out smoke.json

Sized to finish in a few minutes on one H100/H200-class GPU: 4 states × 4 rollouts per
step, responses up to 128 tokens. Exits with status 2 and a one-line reason when CUDA
or the checkpoint is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def fail(message: str) -> None:
    print(f"gpu_smoke: {message}", file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path, help="local checkpoint directory (config.json inside)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--env", default="frozenlake", choices=["frozenlake", "bandit", "sokoban"])
    ap.add_argument(
        "--preset", default="healthy", choices=["healthy", "template-collapse", "entropy-collapse"]
    )
    ap.add_argument("--num-states", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--sft-steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write the summary JSON here")
    args = ap.parse_args()

    if not args.model.is_dir() or not (args.model / "config.json").is_file():
        fail(
            f"{args.model} is not a local checkpoint directory (no config.json); "
            "pass the folder of a downloaded causal LM, e.g. Qwen2.5-0.5B-Instruct"
        )
    import torch

    if not torch.cuda.is_available():
        fail("CUDA is not available to torch (no GPU, or a CPU-only torch build)")

    import transformers

    from collapsewatch.trainer.cli import REAL_MODEL_OVERRIDES
    from collapsewatch.trainer.grpo import GRPOTrainer
    from collapsewatch.trainer.grpo_config import preset

    transformers.logging.set_verbosity_error()
    config = preset(
        args.preset,
        **{
            **REAL_MODEL_OVERRIDES,
            "env": args.env,
            "seed": args.seed,
            "model_path": str(args.model),
            "device": "cuda",
            "dtype": "bfloat16",
            "num_states": args.num_states,
            "group_size": args.group_size,
            "max_new_tokens": args.max_new_tokens,
            "sft_steps": args.sft_steps,
        },
    )
    t0 = time.perf_counter()
    trainer = GRPOTrainer(config)
    load_s = time.perf_counter() - t0
    sft = trainer.cold_start()
    torch.cuda.synchronize()
    steps = []
    t1 = time.perf_counter()
    for _ in range(args.steps):
        rollouts, cross, metrics = trainer.train_step()
        metrics["cross_rows"] = float(len(cross.rollout_ids)) if cross else 0.0
        steps.append(metrics)
        print(
            f"step {len(steps) - 1}: {metrics['step_time_s']:.1f}s success "
            f"{metrics['success_rate']:.2f} valid {metrics['valid_format_rate']:.2f} entropy "
            f"{metrics['token_entropy']:.3f} retrieval {metrics['retrieval_acc']:.2f} "
            f"tokens/turn {metrics['response_tokens_mean']:.0f}",
            flush=True,
        )
        if len(steps) == 1:
            sample = rollouts[0].turns[0]
            print(f"  sample reasoning: {sample.reasoning[:160]!r} action: {sample.action!r}")
    torch.cuda.synchronize()
    grpo_s = time.perf_counter() - t1
    summary = {
        "model": str(args.model),
        "gpu": torch.cuda.get_device_name(0),
        "load_s": load_s,
        "cold_start": sft,
        "grpo_steps": args.steps,
        "grpo_s": grpo_s,
        "steps_per_s": args.steps / grpo_s if grpo_s > 0 else None,
        "rollouts_per_step": args.num_states * args.group_size,
        "peak_gpu_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
        "steps": steps,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "steps"}, indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

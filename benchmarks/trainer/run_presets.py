"""Run the reference trainer's three presets on CPU and record their curves.

For each preset and seed: one GRPO run (cold start + ``--steps`` steps) on FrozenLake,
its per-step metrics in ``results/<preset>-seed<seed>.csv``; then one plot of all runs
(``presets.png``) and a summary table (``results/summary.csv``): start = mean of the
first ``--window`` steps, end = mean of the last ``--window`` steps.

Besides the trainer's own metrics, ``mi_embed`` (text-only responsiveness, what the
server computes without cross-scores: MiniLM embeddings of each rollout's first
reasoning, RAGEN-2's in-batch estimator, shuffle-corrected) is added per step from the
rollouts, with collapsewatch.metrics; skipped with a note when MiniLM cannot load.

    python benchmarks/trainer/run_presets.py --seeds 0 1 2 --steps 60
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PRESETS = ("healthy", "template-collapse", "entropy-collapse")
COLUMNS = (
    "success_rate", "reward_mean", "token_entropy", "reasoning_entropy", "valid_format_rate",
    "retrieval_acc", "mi_logprob", "distinct_reasoning", "group_reward_std",
    "zero_std_fraction", "kept_groups", "loss", "pg_loss", "kl", "entropy_coef", "lr",
    "step_time_s",
)  # fmt: skip


class FirstReasonings:
    """Keeps (state_id, first-turn reasoning) of every rollout, per step."""

    def __init__(self) -> None:
        self.steps: dict[int, list[tuple[str, str]]] = {}

    def on_step_end(self, step: int, rollouts: list[Any], cross: Any, metrics: Any) -> None:
        self.steps[step] = [(r.state_id, r.turns[0].reasoning) for r in rollouts]

    def on_train_end(self) -> None:
        pass


def text_mi(steps: dict[int, list[tuple[str, str]]]) -> dict[int, float] | None:
    try:
        from collapsewatch.metrics.representation import minilm
        from collapsewatch.metrics.responsiveness import mi_embed
    except Exception as exc:  # the metrics package is optional for this script
        print(f"note: no text-only MI ({exc})", file=sys.stderr)
        return None
    out = {}
    for step, pairs in steps.items():
        texts = [t for _, t in pairs]
        groups = [s for s, _ in pairs]
        value = mi_embed(minilm(texts), groups)
        out[step] = float("nan") if value is None else value
    return out


def run_one(preset: str, seed: int, steps: int, env: str, results: Path) -> list[dict[str, float]]:
    from collapsewatch.trainer.grpo import GRPOTrainer
    from collapsewatch.trainer.grpo_config import preset as make_preset

    keeper = FirstReasonings()
    trainer = GRPOTrainer(make_preset(preset, env=env, seed=seed), callbacks=[keeper])
    t0 = time.perf_counter()
    sft = trainer.cold_start()
    history = trainer.train(steps)
    wall = time.perf_counter() - t0
    mi = text_mi(keeper.steps)
    path = results / f"{preset}-seed{seed}.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", *COLUMNS, "mi_embed", "wall_s", "sft_time_s"])
        for h in history:
            row = [int(h["step"])] + [h.get(c, float("nan")) for c in COLUMNS]
            row.append(mi[int(h["step"])] if mi else float("nan"))
            row += [wall, sft["sft_time_s"]]
            writer.writerow([_fmt(v) for v in row])
    print(f"{preset} seed {seed}: {wall:.0f}s (cold start {sft['sft_time_s']:.0f}s) -> {path}")
    return history


def load_runs(results: Path) -> dict[tuple[str, int], list[dict[str, float]]]:
    """Every ``<preset>-seed<n>.csv`` in ``results``, as lists of per-step dicts."""
    runs = {}
    for preset in PRESETS:
        for path in sorted(results.glob(f"{preset}-seed*.csv")):
            seed = int(path.stem.rsplit("seed", 1)[1])
            with path.open() as f:
                rows = [
                    {k: float(v) if v != "" else float("nan") for k, v in row.items()}
                    for row in csv.DictReader(f)
                ]
            runs[(preset, seed)] = rows
    return runs


def _fmt(v: Any) -> str:
    if isinstance(v, int):
        return str(v)
    return "" if v is None or not math.isfinite(v) else f"{v:.4g}"


def _mean(values: list[float]) -> float:
    vals = [v for v in values if math.isfinite(v)]
    return sum(vals) / len(vals) if vals else float("nan")


def summarise(runs: dict[tuple[str, int], list[dict[str, float]]], window: int, path: Path) -> None:
    names = (
        "success_rate",
        "token_entropy",
        "retrieval_acc",
        "mi_logprob",
        "mi_embed",
        "valid_format_rate",
    )
    header = ["preset", "seed", "wall_s"]
    for n in names:
        header += [f"{n}_start", f"{n}_end"]
    lines = [header]
    for (preset, seed), hist in runs.items():
        row: list[Any] = [preset, seed, f"{hist[0].get('wall_s', float('nan')):.0f}"]
        for n in names:
            row += [
                _fmt(_mean([h[n] for h in hist[:window]])),
                _fmt(_mean([h[n] for h in hist[-window:]])),
            ]
        lines.append(row)
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(lines)
    for line in lines:
        print(" ".join(f"{str(v):>10}" for v in line))


def smooth(values: list[float], k: int) -> list[float]:
    out = []
    for i in range(len(values)):
        out.append(_mean(values[max(0, i - k + 1) : i + 1]))
    return out


def plot(runs: dict[tuple[str, int], list[dict[str, float]]], path: Path, k: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("success_rate", "success rate"),
        ("token_entropy", "token entropy (nats/token)"),
        ("retrieval_acc", "reasoning→state retrieval (cross-scores)"),
        ("mi_logprob", "log-prob MI (nats, max log 8)"),
        ("mi_embed", "text-only MI (MiniLM, nats)"),
        ("valid_format_rate", "valid format rate"),
    ]
    colors = {
        "healthy": "tab:green",
        "template-collapse": "tab:red",
        "entropy-collapse": "tab:blue",
    }
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5), sharex=True)
    for ax, (name, title) in zip(axes.flat, panels, strict=True):
        for (preset, seed), hist in runs.items():
            steps = [h["step"] for h in hist]
            label = preset if seed == min(s for p, s in runs if p == preset) else None
            ax.plot(
                steps,
                smooth([h[name] for h in hist], k),
                color=colors[preset],
                alpha=0.85,
                lw=1.3,
                label=label,
            )
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("GRPO step")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(
        f"reference GRPO trainer, FrozenLake, tiny CPU policy; one line per seed, "
        f"trailing mean over {k} steps",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--env", default="frozenlake")
    ap.add_argument("--window", type=int, default=10, help="steps averaged for start/end")
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--plot-only", action="store_true", help="only re-plot the CSVs")
    args = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    results = args.out / "results"
    results.mkdir(parents=True, exist_ok=True)
    if not args.plot_only:
        for preset in args.presets:
            for seed in args.seeds:
                run_one(preset, seed, args.steps, args.env, results)
    runs = load_runs(results)  # every run recorded so far, also from other invocations
    summarise(runs, args.window, results / "summary.csv")
    plot(runs, args.out / "presets.png", k=5)


if __name__ == "__main__":
    main()

"""``collapsewatch train``: run the reference GRPO trainer and stream it to a server.

Register on the main app with ``app.command("train")(train_command)`` (collapsewatch/cli.py);
or run this module on its own: ``python -m collapsewatch.trainer.cli --help``.
Importing this module is light: torch and transformers load inside the command.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Any

import typer

ENV_NAMES = ("frozenlake", "bandit", "sokoban")
PRESET_NAMES = ("healthy", "template-collapse", "entropy-collapse")
# With --model: longer responses, gentler updates, a short cold start, and small scoring
# and update batches (a real vocabulary makes logits large).
REAL_MODEL_OVERRIDES: dict[str, Any] = {
    "max_new_tokens": 160,
    "lr": 1e-6,
    "sft_lr": 1e-5,
    "sft_steps": 20,
    "sft_batch_size": 8,
    "sft_episodes": 64,
    "score_batch_size": 8,
    "num_minibatches": 8,
    "num_threads": 4,
}


def train(
    env: str = "frozenlake",
    preset: str = "healthy",
    steps: int = 60,
    seed: int = 0,
    device: str = "cpu",
    model: str | None = None,
    url: str | None = None,
    api_key: str | None = None,
    run: str | None = None,
    csv: str | Path | None = None,
    stream: bool = True,
    progress: bool = True,
    client: Any = None,
    overrides: dict[str, Any] | None = None,
) -> list[dict[str, float]]:
    """Run one GRPO job; returns its per-step metrics.

    With ``stream`` the rollouts (and cross-scores, if the client can take them) go to
    a collapsewatch server through ``client``, or a new ``collapsewatch.Client`` for
    ``url`` / ``api_key`` / ``run``. ``overrides`` are GRPOConfig fields applied last.
    """
    import torch  # noqa: F401  (heavy: only when a job runs)

    from .callbacks import CollapsewatchHook, CSVCallback, TrainingHook
    from .grpo import GRPOTrainer
    from .grpo_config import preset as make_preset

    if env not in ENV_NAMES:
        raise ValueError(f"unknown env {env!r}; choose from {', '.join(ENV_NAMES)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
    run_name = run or f"{env}-{preset}-seed{seed}"
    fields: dict[str, Any] = {"env": env, "seed": seed, "device": device, "run_name": run_name}
    if model:
        # A real model: longer responses, gentler updates, a short cold start.
        fields.update(REAL_MODEL_OVERRIDES, model_path=model)
    config = make_preset(preset, **{**fields, **(overrides or {})})

    callbacks: list[TrainingHook] = []
    own_client = False
    if stream:
        if client is None:
            from collapsewatch import Client

            client = Client(
                run_name,
                url=url,
                api_key=api_key,
                config=config.to_dict(),
                tags=[f"env:{env}", f"preset:{preset}", "reference-trainer"],
            )
            own_client = True
        callbacks.append(CollapsewatchHook(client, close_client=own_client))
    if csv is not None:
        callbacks.append(CSVCallback(csv))

    import transformers

    transformers.logging.set_verbosity_error()
    trainer = GRPOTrainer(config, callbacks=callbacks)
    if not progress:
        trainer.cold_start()
        return trainer.train(steps)

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    def fmt(value: float | None) -> str:
        return "—" if value is None or not math.isfinite(value) else f"{value:.2f}"

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns) as bar:
        task = bar.add_task(f"{run_name}: cold start", total=steps, info="")
        t0 = time.perf_counter()
        sft = trainer.cold_start()
        bar.update(
            task,
            description=run_name,
            info=f"cold start {time.perf_counter() - t0:.0f}s, loss {fmt(sft['sft_loss'])}",
        )

        def on_step(step: int, m: dict[str, float]) -> None:
            info = (
                f"success {fmt(m.get('success_rate'))}  entropy {fmt(m.get('token_entropy'))}"
                f"  retrieval {fmt(m.get('retrieval_acc'))}"
            )
            bar.update(task, advance=1, info=info)

        return trainer.train(steps, on_step=on_step)


def train_command(
    env: Annotated[
        str, typer.Option(help="Environment: frozenlake, bandit or sokoban.")
    ] = "frozenlake",
    preset: Annotated[
        str, typer.Option(help="healthy, template-collapse or entropy-collapse.")
    ] = "healthy",
    steps: Annotated[int, typer.Option(help="GRPO steps (after the cold start).")] = 60,
    seed: Annotated[int, typer.Option(help="Seed of everything.")] = 0,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    model: Annotated[
        str | None, typer.Option(help="Local checkpoint directory (bf16, use with --device cuda).")
    ] = None,
    url: Annotated[str | None, typer.Option(help="Server URL (default COLLAPSEWATCH_URL).")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key (default COLLAPSEWATCH_API_KEY / key file).")
    ] = None,
    run: Annotated[str | None, typer.Option(help="Run name (default ENV-PRESET-seedSEED).")] = None,
    csv: Annotated[Path | None, typer.Option(help="Write per-step metrics to this CSV.")] = None,
    no_stream: Annotated[
        bool, typer.Option("--no-stream", help="Do not send to a server.")
    ] = False,
) -> None:
    """Train the reference GRPO policy on a text environment with a preset that is
    healthy or collapses on purpose, streaming every step to collapsewatch."""
    if preset not in PRESET_NAMES:
        raise typer.BadParameter(f"choose from {', '.join(PRESET_NAMES)}", param_hint="--preset")
    if env not in ENV_NAMES:
        raise typer.BadParameter(f"choose from {', '.join(ENV_NAMES)}", param_hint="--env")
    try:
        history = train(
            env=env,
            preset=preset,
            steps=steps,
            seed=seed,
            device=device,
            model=model,
            url=url,
            api_key=api_key,
            run=run,
            csv=csv,
            stream=not no_stream,
        )
    except (FileNotFoundError, RuntimeError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if history:
        first, last = history[0], history[-1]
        typer.echo(
            f"done: {len(history)} steps; success {first['success_rate']:.2f} -> "
            f"{last['success_rate']:.2f}, token entropy {first['token_entropy']:.2f} -> "
            f"{last['token_entropy']:.2f}"
        )


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command()(train_command)

if __name__ == "__main__":
    app()

"""``collapsewatch follow``: stream a live training run from the files its trainer writes.

Registered in ``collapsewatch/cli.py`` as a sub-app (``app.add_typer(follow_app,
name="follow")``).
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["follow_app"]

follow_app = typer.Typer(
    help="Follow a live training run through the files its trainer writes.",
    no_args_is_help=True,
)

console = Console()
err = Console(stderr=True)


@follow_app.callback()
def _follow() -> None:
    """Follow a live training run through the files its trainer writes."""
    # A callback keeps `follow` a group (`follow verl ...`) while it has one command.


@follow_app.command("verl")
def follow_verl(
    directory: Annotated[
        Path, typer.Argument(help="verl's trainer.rollout_data_dir ({step}.jsonl files).")
    ],
    run: Annotated[str, typer.Option("--run", help="Run name (created if missing).")],
    metrics: Annotated[
        Path | None,
        typer.Option(
            "--metrics",
            envvar="VERL_FILE_LOGGER_PATH",
            help="verl's file-logger metrics JSONL.",
        ),
    ] = None,
    url: Annotated[str | None, typer.Option(help="API URL (else COLLAPSEWATCH_URL).")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key (else COLLAPSEWATCH_API_KEY or the key file).")
    ] = None,
    once: Annotated[
        bool,
        typer.Option(
            help="Send everything there is now, every step file counted complete, and exit "
            "(for a finished run)."
        ),
    ] = False,
    idle_seconds: Annotated[
        float,
        typer.Option(
            help="A step file unchanged this long counts as complete (the run's last step)."
        ),
    ] = 120.0,
    poll_interval: Annotated[float, typer.Option(help="Seconds between two looks.")] = 5.0,
    state_file: Annotated[
        Path | None,
        typer.Option(
            help="Where delivered steps are remembered "
            "(default: <COLLAPSEWATCH_DATA_DIR>/follow/<run>-<hash>.json)."
        ),
    ] = None,
    success_threshold: Annotated[
        float, typer.Option(help="A rollout succeeds when its score is at least this.")
    ] = 1.0,
) -> None:
    """Tail a verl run: send each {step}.jsonl once it is complete (the next step's file
    exists, or it has been idle --idle-seconds), and the metrics file's new lines as
    trainer.* series. Remembers what it sent, so it can be stopped and started again.
    Ctrl-C stops it.
    """
    from collapsewatch.sdk.integrations.verl import FollowResult, VerlFollower
    from collapsewatch.settings import Settings

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = Settings(**{k: v for k, v in {"url": url, "api_key": api_key}.items() if v})
    except Exception as exc:
        err.print(f"[red]Invalid configuration:[/red] {exc}")
        raise typer.Exit(2) from exc
    if not directory.is_dir():
        err.print(f"[red]No such folder:[/red] {directory}")
        raise typer.Exit(2)

    def report(result: FollowResult) -> None:
        for step in result.steps_sent:
            console.print(f"step {step} sent")
        if result.metric_lines:
            console.print(f"{result.metric_lines} metric lines sent")
        for problem in result.errors:
            err.print(f"[yellow]{problem}[/yellow]")

    follower = VerlFollower(
        directory,
        run=run,
        metrics_file=metrics,
        url=settings.url,
        api_key=api_key or settings.api_key,
        state_file=state_file,
        idle_seconds=idle_seconds,
        success_threshold=success_threshold,
    )
    console.print(f"following {directory} into run '{run}' at {settings.url}")
    try:
        if once:
            result = follower.poll(final=True)
            report(result)
        else:
            follower.follow(poll_interval=poll_interval, stop=threading.Event(), on_poll=report)
            result = None
    finally:
        delivered = follower.close()
    stats = follower.client.stats()
    console.print(
        f"run '{run}': {len(follower.sent_steps)} steps sent so far, {stats.sent} rollouts "
        f"sent now ({stats.duplicates} already stored), {stats.spooled} spooled"
    )
    if result is not None and result.errors:
        raise typer.Exit(1)
    if not delivered:
        err.print("[red]Not everything was delivered[/red] (spooled rollouts are resent later).")
        sys.exit(1)

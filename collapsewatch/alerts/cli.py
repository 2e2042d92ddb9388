"""`collapsewatch alerts …`: send a test message, make a secret, run or read deliveries.

Registered in collapsewatch/cli.py; imports stay inside commands so `collapsewatch
--help` stays fast.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.table import Table

alerts_app = typer.Typer(
    help="Alert delivery: test a sink, make a webhook secret, send or list deliveries.",
    no_args_is_help=True,
)
console = Console()
err = Console(stderr=True)

SinkKind = Literal["slack", "webhook"]


def _alert_settings():
    from collapsewatch.alerts.settings import AlertSettings

    try:
        return AlertSettings()
    except Exception as exc:  # pydantic ValidationError: say which setting is wrong
        err.print(f"[red]Invalid alert configuration:[/red] {exc}")
        raise typer.Exit(2) from exc


@alerts_app.command("test")
def test_send(
    sink: Annotated[
        str | None,
        typer.Option(help="Sink kind: slack or webhook (default: every configured sink)."),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(help="Send here instead of the configured URL (needs --sink)."),
    ] = None,
    secret: Annotated[
        str | None,
        typer.Option(help="Webhook secret for --url (env: COLLAPSEWATCH_WEBHOOK_SECRET)."),
    ] = None,
) -> None:
    """Send a test message to the configured sinks (or to --url) and print the outcome.

    Without --url the sinks come from COLLAPSEWATCH_SLACK_WEBHOOK_URL and
    COLLAPSEWATCH_WEBHOOK_URL/COLLAPSEWATCH_WEBHOOK_SECRET. Exits 1 if a send failed.
    """
    from collapsewatch.alerts.notification import sample_notification
    from collapsewatch.alerts.outbox import sink_from_config

    settings = _alert_settings()
    if sink not in (None, "slack", "webhook"):
        err.print(f"[red]--sink must be slack or webhook, not {sink!r}[/red]")
        raise typer.Exit(2)
    targets: list[tuple[str, str, str | None]] = []
    if url:
        if sink is None:
            err.print("[red]--url needs --sink slack or --sink webhook[/red]")
            raise typer.Exit(2)
        targets.append((sink, url, secret or settings.webhook_secret))
    else:
        if sink in (None, "slack") and settings.slack_webhook_url:
            targets.append(("slack", settings.slack_webhook_url, None))
        if sink in (None, "webhook") and settings.webhook_url:
            targets.append(("webhook", settings.webhook_url, settings.webhook_secret))
    if not targets:
        err.print(
            "[red]No sink configured:[/red] set COLLAPSEWATCH_SLACK_WEBHOOK_URL or "
            "COLLAPSEWATCH_WEBHOOK_URL (+ COLLAPSEWATCH_WEBHOOK_SECRET), or pass --sink and --url."
        )
        raise typer.Exit(2)
    notification = sample_notification(dashboard_url=settings.dashboard_url)
    failed = False
    for kind, target_url, target_secret in targets:
        try:
            sink_obj = sink_from_config(
                kind, target_url, target_secret, timeout=settings.delivery_timeout_seconds
            )
        except ValueError as exc:
            err.print(f"[red]{kind}: {exc}[/red]")
            failed = True
            continue
        result = sink_obj.deliver(notification, message_id=f"msg_test_{uuid.uuid4().hex[:16]}")
        # Only the host: a Slack webhook URL's path is itself a credential.
        where = urlsplit(target_url).netloc or target_url
        if result.ok:
            console.print(
                f"[green]{kind}: delivered[/green] to {where} (HTTP {result.status_code})"
            )
        else:
            failed = True
            err.print(f"[red]{kind}: {result.outcome}[/red] to {where}: {result.error}")
    if failed:
        raise typer.Exit(1)


@alerts_app.command("secret")
def new_secret() -> None:
    """Print a new webhook signing secret (whsec_…) for COLLAPSEWATCH_WEBHOOK_SECRET."""
    from collapsewatch.alerts.webhook import generate_secret

    print(generate_secret())


@alerts_app.command("deliver")
def deliver(
    limit: Annotated[int, typer.Option(min=1, help="Most deliveries to attempt.")] = 100,
) -> None:
    """Send the deliveries that are due now (what the worker does on its loop)."""
    from collapsewatch.alerts.outbox import deliver_due
    from collapsewatch.settings import Settings
    from collapsewatch.store.engine import make_engine, make_sessionmaker

    engine = make_engine(Settings().resolved_database_url, pool_size=1)
    try:
        n = deliver_due(make_sessionmaker(engine), _alert_settings(), limit=limit)
    finally:
        engine.dispose()
    console.print(f"attempted {n} deliveries")


@alerts_app.command("log")
def log(
    status: Annotated[str | None, typer.Option(help="Only pending, delivered or failed.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Most rows.")] = 50,
) -> None:
    """Print the delivery log (newest first) from DATABASE_URL."""
    from collapsewatch.alerts.outbox import list_deliveries
    from collapsewatch.settings import Settings
    from collapsewatch.store.engine import make_engine, make_sessionmaker

    engine = make_engine(Settings().resolved_database_url, pool_size=1)
    try:
        with make_sessionmaker(engine)() as session:
            rows = list_deliveries(session, status=status, limit=limit)
    finally:
        engine.dispose()
    table = Table(title="alert deliveries", header_style="bold")
    for col in ("id", "alert", "transition", "sink", "status", "attempts", "last error"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            str(r.id),
            str(r.alert_id),
            r.transition,
            r.sink_key,
            r.status,
            str(r.attempts),
            (r.last_error or "")[:80],
        )
    console.print(table)

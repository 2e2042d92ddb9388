"""`collapsewatch dashboard`: serve the dashboard alone (registered in collapsewatch/cli.py)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

console = Console()


def dashboard(
    host: Annotated[
        str | None,
        typer.Option(help="Bind address (default: 127.0.0.1; env: COLLAPSEWATCH_DASHBOARD_HOST)."),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(help="Port (default: 8424; env: COLLAPSEWATCH_DASHBOARD_PORT)."),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(
            help="Show only this project's runs (default: every project; "
            "env: COLLAPSEWATCH_DASHBOARD_PROJECT)."
        ),
    ] = None,
) -> None:
    """Serve the dashboard alone against DATABASE_URL (or the embedded SQLite).

    It has no login: it binds loopback by default, and --host 0.0.0.0 exposes every
    run it shows to whoever reaches the port (docs/dashboard.md: trust model).
    """
    import logging

    from collapsewatch.settings import Settings
    from collapsewatch.store.migrate import is_at_head
    from dashboard.server import DashboardServer
    from dashboard.settings import DashboardSettings

    settings = Settings()
    overrides = {k: v for k, v in {"host": host, "port": port, "project": project}.items() if v}
    dash_settings = DashboardSettings(**overrides)
    if not is_at_head(settings.resolved_database_url):
        console.print(
            "[red]The database schema is not at the newest revision:[/red] "
            "run `collapsewatch db upgrade` first."
        )
        raise typer.Exit(2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    server = DashboardServer(settings, dash_settings)
    console.print(
        f"[bold green]collapsewatch[/bold green] dashboard on {server.url} "
        f"({dash_settings.project or 'all projects'}; database: "
        f"{settings.resolved_database_url.split('@')[-1]}). Ctrl-C stops."
    )
    server.serve_forever()

"""The `collapsewatch` command line (typer)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from collapsewatch.alerts.cli import alerts_app
from collapsewatch.sdk.integrations.cli import follow_app
from collapsewatch.settings import Settings
from collapsewatch.trainer.cli import train_command
from dashboard.cli import dashboard as dashboard_command

app = typer.Typer(
    help="collapsewatch: watch RL training runs of LLM agents for template collapse.\n\n"
    "Offline: `score` a rollout log. Served: `up` runs API + worker on embedded SQLite; "
    "`import` sends logs to it; `metrics` reads a run's series.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
keys_app = typer.Typer(help="API keys.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(keys_app, name="keys")
app.add_typer(alerts_app, name="alerts")
app.add_typer(follow_app, name="follow")
app.command("train")(train_command)

console = Console()
err = Console(stderr=True)

FORMAT_HELP = (
    "Log format: auto, collapsewatch (our JSONL), verl (rollout_data_dir JSONL), trl-md, "
    "chat (chat-messages trajectories)."
)

# Columns of the step table, in the order of DESIGN.md §4's three dimensions.
# Rows of the few-steps table come first in this order (DESIGN.md §4's three
# dimensions); the many-steps table shows only the columns of SHORT_NAMES.
TABLE_METRICS = [
    "structure.num_rollouts",
    "structure.distinct_states",
    "diversity.token_entropy",
    "diversity.distinct_2",
    "diversity.within_state",
    "responsiveness.mi_embed",
    "responsiveness.retrieval_embed",
    "responsiveness.retrieval_embed_masked",
    "responsiveness.mi_logprob",
    "correctness.reward_mean",
    "correctness.success_rate",
    "correctness.group_reward_std",
    "correctness.zero_std_fraction",
    "correctness.valid_format_rate",
]


def _settings(**overrides: Any) -> Settings:
    values = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**values)
    except Exception as exc:  # pydantic ValidationError: say which setting is wrong
        err.print(f"[red]Invalid configuration:[/red] {exc}")
        raise typer.Exit(2) from exc


def _client_key(settings: Settings) -> str | None:
    if settings.api_key:
        return settings.api_key
    if settings.api_key_file.exists():
        return settings.api_key_file.read_text().strip()
    return None


# Short headers for the one-row-per-step table, so it fits a terminal.
SHORT_NAMES = {
    "structure.num_rollouts": "n",
    "structure.distinct_states": "N",
    "diversity.token_entropy": "tok_H",
    "diversity.within_state": "within",
    "responsiveness.mi_embed": "MI",
    "responsiveness.retrieval_embed_masked": "retr_m",
    "responsiveness.mi_logprob": "MI_lp",
    "correctness.reward_mean": "reward",
    "correctness.success_rate": "succ",
    "correctness.zero_std_fraction": "0std",
    "correctness.valid_format_rate": "fmt",
}


def _fmt(value: float | None, name: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if name.startswith("structure."):
        return f"{value:g}"
    return f"{value:.3f}"


def _step_table(title: str, rows: dict[int, dict[str, float | None]]) -> Table:
    """Metrics of each step: one column per step when there are few steps (reads well
    in a narrow terminal), else one row per step."""
    names = [m for m in TABLE_METRICS if any(m in r for r in rows.values())]
    names += sorted({n for r in rows.values() for n in r} - set(names))
    steps = sorted(rows)
    table = Table(
        title=title, header_style="bold", padding=(0, 1), pad_edge=False, collapse_padding=True
    )
    if len(steps) <= 6:
        table.add_column("metric", overflow="fold")
        for step in steps:
            table.add_column(f"step {step}", justify="right")
        for name in names:
            table.add_row(name, *(_fmt(rows[s].get(name), name) for s in steps))
        return table
    # The main columns only, and not those undefined at every step: a terminal is narrow.
    names = [n for n in SHORT_NAMES if any(rows[s].get(n) is not None for s in steps)]
    table.box = box.SIMPLE_HEAD
    table.add_column("step", justify="right")
    for name in names:
        table.add_column(SHORT_NAMES.get(name, name.split(".", 1)[-1]), justify="right")
    for step in steps:
        table.add_row(str(step), *(_fmt(rows[step].get(n), n) for n in names))
    legend = "  ".join(f"{short}={name}" for name, short in SHORT_NAMES.items() if name in names)
    total = len({n for r in rows.values() for n in r})
    table.caption = f"{legend}\n({len(names)} of {total} metrics; --json prints all)"
    return table


def _load(path: Path, fmt: str) -> list[Any]:
    from collapsewatch.importers import FORMATS, load_rollouts

    if fmt != "auto" and fmt not in FORMATS:
        err.print(f"[red]Unknown format {fmt!r}:[/red] choose auto, {', '.join(FORMATS)}.")
        raise typer.Exit(2)
    if not path.exists():
        err.print(f"[red]No such file or folder:[/red] {path}")
        raise typer.Exit(2)
    try:
        return list(load_rollouts(path, format=fmt))
    except UnicodeDecodeError as exc:
        err.print(
            f"[red]Cannot read {path}:[/red] not UTF-8 text ({exc.reason} at byte "
            f"{exc.start}); is it a rollout log?"
        )
        raise typer.Exit(2) from exc
    except (ValueError, OSError) as exc:  # ImportFormatError is a ValueError
        err.print(f"[red]Cannot read {path}:[/red] {exc}")
        raise typer.Exit(2) from exc


@contextlib.contextmanager
def _clean_errors(action: str) -> Any:
    """Turn the setup errors a user can cause (bad database URL, unreachable database,
    port in use, a key of another project, an unknown revision) into one red line."""
    from alembic.util import CommandError
    from sqlalchemy.exc import ArgumentError, OperationalError

    try:
        yield
    except OperationalError as exc:
        err.print(f"[red]Cannot {action}:[/red] the database is unreachable: {exc.orig}")
        raise typer.Exit(2) from exc
    except (ArgumentError, CommandError, RuntimeError, ValueError, OSError) as exc:
        err.print(f"[red]Cannot {action}:[/red] {exc}")
        raise typer.Exit(2) from exc


# -- offline --------------------------------------------------------------------------


@app.command()
def score(
    file: Annotated[Path, typer.Argument(help="Rollout log file (or verl rollout dir).")],
    format: Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per step.")] = False,
    representation: Annotated[
        str | None, typer.Option(help="Text representation: tfidf (default) or minilm.")
    ] = None,
) -> None:
    """Score a rollout log offline (no server): per-step metrics and alerts.

    With --json each step is one line {"step": S, "metrics": {name: value}} (null where
    a metric is undefined for that step), followed by one line per alert state change
    the detectors raise: {"alert": RULE, "step": S, "state": "firing"|"resolved",
    "severity": ..., "message": ..., "evidence": {...}}.
    """
    from collapsewatch.detect import replay
    from collapsewatch.scoring import score_steps
    from collapsewatch.worker import EXAMPLE_RULES

    settings = _settings(representation=representation)
    rollouts = _load(file, format)
    if not rollouts:
        err.print(f"[yellow]{file} holds no rollouts.[/yellow]")
        raise typer.Exit(1)
    scores = score_steps(
        rollouts,
        representation=settings.representation,
        embed_max_texts=settings.embed_max_texts,
        embed_max_tokens=settings.embed_max_tokens,
        mi_temperature=settings.mi_temperature,
    )
    rows = _with_series_metrics({s.step: dict(s.metrics) for s in scores})
    events = [e.to_json() for e in replay(rows)]
    for event in events:
        if event["state"] == "firing" and event["alert"] in EXAMPLE_RULES:
            event["evidence"]["examples"] = _examples(rollouts, event["step"])
    if as_json:
        for s in scores:
            line = {"step": s.step, "metrics": rows[s.step], "representation": s.representation}
            print(json.dumps(line))
        for event in events:
            print(json.dumps(event))
        return
    console.print(_step_table(f"{file.name}: {len(rollouts)} rollouts, {len(rows)} steps", rows))
    _print_alerts(events)


def _with_series_metrics(
    rows: dict[int, dict[str, float | None]],
) -> dict[int, dict[str, float | None]]:
    """Add the metrics that depend on earlier steps (EMA z-score), as the worker does."""
    from collapsewatch.metrics.series import series_metrics

    for step, derived in series_metrics(rows).items():
        rows[step].update(derived)
    return rows


def _examples(rollouts: list[Any], step: int) -> list[dict[str, str]]:
    from collapsewatch.detect import template_examples

    return template_examples([r for r in rollouts if r.step == step])


def _print_served_alerts(settings: Settings, run: str) -> None:
    """The alerts a server stored for a run, in the offline `score` table's shape."""
    with _http(settings) as client:
        run_id = _run_id(client, run)
        alerts = _get(client, f"/api/v1/runs/{run_id}/alerts")
    events = []
    for a in sorted(alerts, key=lambda a: (a["step_fired"], a["rule"])):
        events.append(
            {
                "step": a["step_fired"],
                "alert": a["rule"],
                "state": "firing",
                "severity": a["severity"],
                "message": a["message"],
            }
        )
        if a["step_resolved"] is not None:
            events.append(
                {
                    "step": a["step_resolved"],
                    "alert": a["rule"],
                    "state": "resolved",
                    "severity": a["severity"],
                    "message": "",
                }
            )
    _print_alerts(events, title=f"Alerts of '{run}'")


def _print_alerts(events: list[dict[str, Any]], title: str = "Alerts") -> None:
    if not events:
        console.print("No alerts.")
        return
    table = Table(title=title, header_style="bold")
    for col in ("step", "alert", "state", "severity", "message"):
        table.add_column(col, overflow="fold")
    for e in events:
        color = "red" if e["state"] == "firing" else "green"
        table.add_row(
            str(e["step"]),
            e["alert"],
            f"[{color}]{e['state']}[/{color}]",
            e["severity"],
            e["message"],
        )
    console.print(table)


# -- serving --------------------------------------------------------------------------


@app.command()
def up(
    host: Annotated[str | None, typer.Option(help="Bind address (default: 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="API port (default: 8423).")] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Folder of the SQLite database (default: .collapsewatch).")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="Register this API key instead of generating one (env: COLLAPSEWATCH_API_KEY)."
        ),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="Scoring worker threads.")] = 1,
    dashboard: Annotated[
        bool, typer.Option(help="Serve the dashboard too (COLLAPSEWATCH_DASHBOARD_HOST/PORT).")
    ] = True,
) -> None:
    """Run API + worker (+ dashboard) in one process on the embedded SQLite default.

    Set DATABASE_URL to use PostgreSQL instead. On first start a local API key is
    generated, printed, and saved to <data-dir>/api_key for local clients.
    """
    from collapsewatch.server import EmbeddedServer

    settings = _settings(host=host, port=port, data_dir=data_dir, api_key=api_key)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    server = EmbeddedServer(settings, workers=workers, log_level="info", dashboard=dashboard)
    with _clean_errors("start"):
        server.start()
    db = settings.resolved_database_url.split("@")[-1]
    console.print(f"[bold green]collapsewatch[/bold green] API on {server.url}  (database: {db})")
    if server.dashboard_url:
        console.print(f"dashboard on {server.dashboard_url}")
    if server.key_generated:
        console.print(
            f"API key (project '{settings.project}'): [bold]{server.api_key}[/bold]"
            f"  saved to {settings.api_key_file}"
        )
    console.print("Ctrl-C stops.")
    server.wait()


@app.command()
def api(
    host: Annotated[str | None, typer.Option(help="Bind address (default: 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="API port (default: 8423).")] = None,
) -> None:
    """Serve the ingestion API alone (production: run `db upgrade` first)."""
    import uvicorn

    from collapsewatch.api.app import create_app
    from collapsewatch.store.migrate import is_at_head

    settings = _settings(host=host, port=port)
    if not is_at_head(settings.resolved_database_url):
        err.print(
            "[red]The database schema is not at the newest revision:[/red] "
            "run `collapsewatch db upgrade` first."
        )
        raise typer.Exit(2)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port)


@app.command()
def worker(
    once: Annotated[bool, typer.Option(help="Score what is ready, then exit.")] = False,
) -> None:
    """Run a scoring worker against DATABASE_URL (any number may run at once)."""
    from collapsewatch.worker import Worker

    settings = _settings()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    w = Worker(settings)
    if once:
        while w.run_once():
            pass
        console.print(f"scored {w.steps_scored} steps")
        return
    with contextlib.suppress(KeyboardInterrupt):
        w.run_forever()


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Create or migrate the schema (SQLite default, or DATABASE_URL)."""
    from collapsewatch.store.migrate import upgrade as do_upgrade

    settings = _settings()
    with _clean_errors("upgrade the database"):
        do_upgrade(settings.resolved_database_url, revision)
    console.print(
        f"database at revision {revision}: {settings.resolved_database_url.split('@')[-1]}"
    )


@keys_app.command("create")
def keys_create(
    project: Annotated[str, typer.Option(help="Project the key may read and write.")] = "default",
    name: Annotated[str, typer.Option(help="A label for the key.")] = "cli",
) -> None:
    """Create an API key for a project and print it (it is stored only hashed)."""
    from collapsewatch.store import keys
    from collapsewatch.store.engine import make_engine, make_sessionmaker, session_scope

    settings = _settings()
    key = keys.generate_key()
    engine = make_engine(settings.resolved_database_url, pool_size=1)
    with session_scope(make_sessionmaker(engine)) as session:
        keys.register_key(session, project=project, key=key, name=name)
    engine.dispose()
    print(key)


# -- client ---------------------------------------------------------------------------


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="Rollout log file (or verl rollout dir).")],
    run: Annotated[str, typer.Option("--run", help="Run name (created if missing).")],
    format: Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)] = "auto",
    url: Annotated[str | None, typer.Option(help="API URL (env: COLLAPSEWATCH_URL).")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key (env: COLLAPSEWATCH_API_KEY).")
    ] = None,
    wait: Annotated[bool, typer.Option(help="Wait until the worker scored every step.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for delivery/scoring.")] = 300,
) -> None:
    """Send a rollout log to a running server through the SDK, with a progress bar.

    Every step is marked complete after its rollouts, so the worker scores it at once.
    Re-importing a file stores nothing twice (rollout ids are idempotency keys).
    """
    from rich.progress import Progress

    from collapsewatch.sdk import Client

    settings = _settings(url=url, api_key=api_key)
    rollouts = _load(file, format)
    by_step: dict[int, list[Any]] = defaultdict(list)
    for r in rollouts:
        by_step[r.step].append(r)
    client = Client(
        run,
        url=settings.url,
        api_key=_client_key(settings),
        config={"source": str(file)},
        tags=["import"],
        max_retries=3,
    )
    with Progress(console=err) as progress:
        task = progress.add_task(f"importing {file.name}", total=len(rollouts))
        for step in sorted(by_step):
            client.log_rollouts(step, by_step[step])
            client.complete_step(step)
            progress.advance(task, len(by_step[step]))
        delivered = client.flush(timeout=timeout)
    stats = client.stats()
    client.close(timeout=5)
    console.print(
        f"run '{run}': {stats.sent} rollouts sent, {stats.sent - stats.duplicates} new, "
        f"{stats.duplicates} already stored, {stats.spooled} spooled, "
        f"{stats.dropped_invalid + stats.dropped_full + stats.dropped_rejected} dropped"
    )
    if not delivered or stats.failed_batches or stats.spooled:
        err.print(
            f"[red]Not everything was delivered to {settings.url}[/red] "
            "(spooled batches are resent by the next client of this run)."
        )
        raise typer.Exit(1)
    if wait:
        _wait_scored(settings, run, timeout)


def _http(settings: Settings) -> Any:
    import httpx

    key = _client_key(settings)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=settings.url, headers=headers, timeout=30)


def _get(client: Any, path: str, **params: Any) -> Any:
    import httpx

    try:
        resp = client.get(path, params=params)
    except httpx.HTTPError as exc:
        err.print(f"[red]Cannot reach {client.base_url}:[/red] {exc}")
        raise typer.Exit(2) from exc
    if resp.status_code >= 400:
        try:
            detail = resp.json().get("detail", resp.text)
        except ValueError:
            detail = resp.text
        err.print(f"[red]HTTP {resp.status_code}:[/red] {detail}")
        raise typer.Exit(2)
    return resp.json()


def _run_id(client: Any, run: str) -> int:
    runs = _get(client, "/api/v1/runs", name=run)
    if not runs:
        err.print(f"[red]No run named '{run}' in this key's project.[/red]")
        raise typer.Exit(2)
    return int(runs[0]["id"])


def _wait_scored(settings: Settings, run: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with _http(settings) as client:
        run_id = _run_id(client, run)
        while True:
            steps = _get(client, f"/api/v1/runs/{run_id}/steps")
            if steps and all(s["scored"] for s in steps if s["num_rollouts"]):
                console.print(f"all {len(steps)} steps of '{run}' scored")
                return
            if time.monotonic() > deadline:
                err.print("[red]Timed out waiting for the worker.[/red]")
                raise typer.Exit(1)
            time.sleep(0.5)


@app.command()
def metrics(
    run: Annotated[str, typer.Argument(help="Run name.")],
    url: Annotated[str | None, typer.Option(help="API URL (env: COLLAPSEWATCH_URL).")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key (env: COLLAPSEWATCH_API_KEY).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per step.")] = False,
) -> None:
    """Print a run's metric series from a running server."""
    settings = _settings(url=url, api_key=api_key)
    with _http(settings) as client:
        run_id = _run_id(client, run)
        series = _get(client, f"/api/v1/runs/{run_id}/metrics")
    rows: dict[int, dict[str, float | None]] = defaultdict(dict)
    for p in series["points"]:
        rows[p["step"]][p["name"]] = p["value"]
    if as_json:
        for step in sorted(rows):
            print(json.dumps({"step": step, "metrics": rows[step]}))
        return
    if not rows:
        console.print(f"run '{run}' has no scored steps yet")
        return
    console.print(_step_table(f"run '{run}'", rows))


@app.command()
def quickstart(
    data: Annotated[Path, typer.Argument(help="Folder of the shared real rollout logs.")] = Path(
        "../shared/data"
    ),
    data_dir: Annotated[
        Path | None, typer.Option(help="Folder of the SQLite database (default: .collapsewatch).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="API port (default: a free one).")] = None,
) -> None:
    """Run the main job on the shared real logs, end to end on embedded SQLite.

    Starts API + worker on SQLite, imports the real rollout logs through the SDK, waits
    for scoring, and prints each run's metrics. The database stays in --data-dir, so
    `collapsewatch up` serves it again afterwards.
    """
    from collapsewatch.server import EmbeddedServer, free_port

    logs = [
        ("verl-gsm8k-step2", data / "verl_gsm8k_tool" / "step2.jsonl"),
        ("trl-vqa-healthy-r4", data / "trl_vqa" / "healthy_r4.rollout_results.md"),
        ("trl-vqa-format-collapse-r2", data / "trl_vqa" / "format_collapse_r2.rollout_results.md"),
    ]
    missing = [str(p) for _, p in logs if not p.exists()]
    if missing:
        err.print(f"[red]Missing real logs:[/red] {', '.join(missing)}")
        raise typer.Exit(2)
    settings = _settings(
        data_dir=data_dir, port=port or free_port(), step_idle_seconds=1.0, poll_interval=0.2
    )
    with EmbeddedServer(settings) as server:
        console.print(
            f"[bold green]collapsewatch[/bold green] API + worker on {server.url} "
            f"(SQLite: {settings.resolved_database_url.split(':///')[-1]})"
        )
        for run, path in logs:
            import_(
                path,
                run=run,
                format="auto",
                url=server.url,
                api_key=server.api_key,
                wait=True,
                timeout=600,
            )
        for run, _ in logs:
            metrics(run, url=server.url, api_key=server.api_key, as_json=False)
            _print_served_alerts(
                settings.model_copy(update={"url": server.url, "api_key": server.api_key}), run
            )
    console.print(
        "Done. `collapsewatch up` serves this database again; `collapsewatch metrics RUN` reads it."
    )


app.command("dashboard")(dashboard_command)


@app.command()
def demo(
    steps: Annotated[int, typer.Option(help="GRPO steps per run (after the cold start).")] = 60,
    seed: Annotated[int, typer.Option(help="Seed of both runs.")] = 0,
    data_dir: Annotated[
        Path | None, typer.Option(help="Folder of the SQLite database (default: .collapsewatch).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="API port (default: a free one).")] = None,
) -> None:
    """Train a collapsing and a healthy policy live and show where the alerts fire.

    Starts API + worker on embedded SQLite, trains the reference GRPO policy on
    FrozenLake with the template-collapse preset and then the healthy preset (same
    seed), streaming every step, and prints where the alerts fired against what token
    entropy showed. About 3-6 minutes on 2 CPU cores.
    """
    from collapsewatch.server import free_port
    from collapsewatch.trainer.demo import run_demo

    settings = _settings(data_dir=data_dir, port=port or free_port(), poll_interval=0.2)
    run_demo(settings, steps=steps, seed=seed, console=console)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

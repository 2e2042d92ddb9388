"""The Dash application: runs, run, step drill-down and compare pages.

``create_dashboard`` builds it against a database; callbacks are thin and call the
methods of :class:`DashboardData`, which own the queries and the figures (and are what
the benchmark times). Pages are routed by URL:

- ``/``: every run with its status, last step, rollouts and firing alerts;
- ``/runs/<id>``: the three dimensions on one step axis, alert markers, live refresh;
- ``/runs/<id>/steps/<step>``: states side by side, similarity heatmap, templates;
- ``/compare?runs=1,2&metric=name``: one metric overlaid across runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import plotly.graph_objects as go
from dash import Dash, Input, Output, State, dcc, html, no_update
from sqlalchemy.orm import Session, sessionmaker

from collapsewatch.settings import Settings
from collapsewatch.store import queries as store_queries
from collapsewatch.store.engine import make_engine, make_sessionmaker
from collapsewatch.store.models import AlertRow, utcnow
from dashboard import queries
from dashboard.drilldown import StepAnalysis, analyse_step, sample_per_state
from dashboard.figures import (
    compare_figure,
    panel_names,
    rollout_heatmap,
    run_figure,
    state_heatmap,
)
from dashboard.settings import DashboardSettings

ASSETS = Path(__file__).resolve().parent / "assets"
DEFAULT_COMPARE_METRIC = "responsiveness.mi_embed"
MAX_TEXT_CHARS = 600

_RUN_PATH = re.compile(r"^/runs/(\d+)/?$")
_STEP_PATH = re.compile(r"^/runs/(\d+)/steps/(\d+)/?$")


@dataclass(frozen=True)
class RunPageUpdate:
    """What one refresh of the run page produces; ``changed`` is False when nothing
    new was scored since ``signature`` (the page then keeps what it shows)."""

    found: bool
    live: bool
    signature: list[str]
    changed: bool
    figure: go.Figure | None = None
    alerts: list[AlertRow] | None = None
    steps: list[int] | None = None
    last_rollout_at: datetime | None = None


class DashboardData:
    """The dashboard's read side: one session per call, scoped to ``project``."""

    def __init__(
        self, factory: sessionmaker[Session], settings: DashboardSettings | None = None
    ) -> None:
        self.factory = factory
        self.settings = settings or DashboardSettings()
        self.project = self.settings.project

    def runs(self) -> list[queries.RunSummary]:
        with self.factory() as session:
            return queries.list_run_summaries(
                session=session, project=self.project, live_seconds=self.settings.live_seconds
            )

    def run(self, run_id: int) -> queries.RunRef | None:
        with self.factory() as session:
            return queries.get_run(session=session, run_id=run_id, project=self.project)

    def is_live(self, run: queries.RunRef) -> bool:
        if run.last_rollout_at is None:
            return False
        return (utcnow() - run.last_rollout_at).total_seconds() <= self.settings.live_seconds

    def run_page(self, run_id: int, signature: list[str] | None = None) -> RunPageUpdate:
        """The run page's data: the figure, alerts and steps, unless nothing changed
        since ``signature``."""
        with self.factory() as session:
            run = queries.get_run(session=session, run_id=run_id, project=self.project)
            if run is None:
                return RunPageUpdate(found=False, live=False, signature=[], changed=False)
            live = self.is_live(run)
            current = queries.run_signature(session=session, run_id=run_id)
            if signature is not None and current == signature:
                return RunPageUpdate(
                    found=True,
                    live=live,
                    signature=current,
                    changed=False,
                    last_rollout_at=run.last_rollout_at,
                )
            rows = queries.metric_rows(session=session, run_id=run_id)
            alerts = queries.run_alerts(session=session, run_id=run_id)
            steps = queries.run_steps(session=session, run_id=run_id)
        return RunPageUpdate(
            found=True,
            live=live,
            signature=current,
            changed=True,
            figure=run_figure(rows, alerts, uirevision=run_id),
            alerts=alerts,
            steps=steps,
            last_rollout_at=run.last_rollout_at,
        )

    def step_page(self, run_id: int, step: int) -> dict[str, Any] | None:
        """Everything the drill-down of (run, step) shows, or None if out of scope."""
        with self.factory() as session:
            run = queries.get_run(session=session, run_id=run_id, project=self.project)
            if run is None:
                return None
            rollouts = store_queries.load_step_rollouts(session=session, run_id=run_id, step=step)
            metrics = queries.step_metrics(session=session, run_id=run_id, step=step)
            alerts = queries.run_alerts(session=session, run_id=run_id)
            steps = queries.run_steps(session=session, run_id=run_id)
        analysis = analyse_step(rollouts, threshold=self.settings.template_similarity)
        active = [
            a
            for a in alerts
            if a.step_fired <= step and (a.step_resolved is None or a.step_resolved > step)
        ]
        return {
            "run": run,
            "step": step,
            "steps": steps,
            "metrics": metrics,
            "alerts": active,
            "analysis": analysis,
            "num_rollouts": len(rollouts),
        }

    def heatmap(self, analysis: StepAnalysis, mode: str) -> go.Figure:
        if mode == "rollouts":
            keep = sample_per_state(analysis.states, self.settings.max_heatmap_rollouts)
            labels = [f"{analysis.states[i]} / {analysis.rollouts[i].rollout_id}" for i in keep]
            return rollout_heatmap(
                analysis.sim[keep][:, keep], labels, [analysis.states[i] for i in keep]
            )
        return state_heatmap(analysis.state_sim, analysis.state_order)

    def step_heatmap(self, run_id: int, step: int, mode: str) -> go.Figure | None:
        page = self.step_page(run_id, step)
        if page is None:
            return None
        return self.heatmap(page["analysis"], mode)

    def run_options(self) -> list[dict[str, Any]]:
        with self.factory() as session:
            return [
                {"label": label, "value": i}
                for i, label in queries.list_runs_brief(session=session, project=self.project)
            ]

    def metric_names(self, run_ids: list[int]) -> list[str]:
        in_scope = {o["value"] for o in self.run_options()}
        with self.factory() as session:
            return queries.metric_names(
                session=session, run_ids=[r for r in run_ids if r in in_scope]
            )

    def compare(self, run_ids: list[int], name: str) -> go.Figure:
        labels = {o["value"]: o["label"] for o in self.run_options()}
        with self.factory() as session:
            rows = queries.compare_rows(
                session=session, run_ids=run_ids, name=name, project=self.project
            )
        return compare_figure(rows, labels, name)


# -- rendering helpers ----------------------------------------------------------------


def _ago(when: datetime | None) -> str:
    if when is None:
        return "—"
    seconds = max(0.0, (utcnow() - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}"


def _success_mark(success: bool | None) -> str:
    if success is None:
        return ""
    return " ✓" if success else " ✗"


def _badge(text: str, kind: str) -> html.Span:
    return html.Span(text, className=f"badge badge-{kind}")


def _not_found(what: str) -> html.Div:
    return html.Div(
        [html.H1("Not found"), html.P(what), dcc.Link("← all runs", href="/")],
        className="not-found",
    )


def _runs_table(runs: list[queries.RunSummary]) -> html.Div:
    if not runs:
        return html.P(
            "No runs yet. Send rollouts with the SDK or `collapsewatch import`.", className="muted"
        )
    header = html.Tr(
        [
            html.Th(h)
            for h in (
                "run",
                "project",
                "status",
                "last step",
                "steps",
                "rollouts",
                "open alerts",
                "last rollout",
            )
        ]
    )
    rows = []
    for r in runs:
        alerts: Any = (
            [_badge(rule, "critical") for rule in r.open_rules]
            if r.open_rules
            else html.Span("none", className="muted")
        )
        rows.append(
            html.Tr(
                [
                    html.Td(dcc.Link(r.name, href=f"/runs/{r.id}", className="run-link")),
                    html.Td(r.project),
                    html.Td(_badge(r.status, r.status)),
                    html.Td("—" if r.last_step is None else str(r.last_step)),
                    html.Td(str(r.num_steps)),
                    html.Td(str(r.num_rollouts)),
                    html.Td(alerts, className="open-alerts"),
                    html.Td(_ago(r.last_rollout_at)),
                ],
                id={"type": "run-row", "index": r.id},
            )
        )
    return html.Table([html.Thead(header), html.Tbody(rows)], className="table", id="runs")


def _alerts_table(alerts: list[AlertRow], run_id: int) -> Any:
    if not alerts:
        return html.P("No alerts for this run.", className="muted", id="no-alerts")
    rows = []
    for a in sorted(alerts, key=lambda a: (-a.step_fired, a.id)):
        resolved = (
            dcc.Link(str(a.step_resolved), href=f"/runs/{run_id}/steps/{a.step_resolved}")
            if a.step_resolved is not None
            else "—"
        )
        rows.append(
            html.Tr(
                [
                    html.Td(html.Code(a.rule)),
                    html.Td(_badge(a.severity, a.severity)),
                    html.Td(_badge(a.state, a.state)),
                    html.Td(
                        dcc.Link(
                            str(a.step_fired),
                            href=f"/runs/{run_id}/steps/{a.step_fired}",
                            className="alert-step-link",
                        )
                    ),
                    html.Td(resolved),
                    html.Td(a.message),
                ],
                className=f"alert-row alert-{a.state}",
            )
        )
    header = html.Tr(
        [html.Th(h) for h in ("rule", "severity", "state", "fired", "resolved", "message")]
    )
    return html.Table([html.Thead(header), html.Tbody(rows)], className="table", id="alerts")


def _status_line(update: RunPageUpdate, refresh: float) -> list[Any]:
    status = "live" if update.live else "idle"
    note = (
        f"refreshing every {refresh:g} s"
        if update.live
        else f"no rollout for a while; checking every {refresh:g} s"
    )
    return [
        _badge(status, status),
        html.Span(f" last rollout {_ago(update.last_rollout_at)} · {note}", className="muted"),
    ]


def _truncated(text: str, cls: str) -> Any:
    if len(text) <= MAX_TEXT_CHARS:
        return html.Pre(text or "(empty)", className=cls)
    return html.Details(
        [
            html.Summary(html.Pre(text[:MAX_TEXT_CHARS] + "…", className=cls)),
            html.Pre(text, className=cls),
        ]
    )


# -- pages ----------------------------------------------------------------------------


class Pages:
    def __init__(self, data: DashboardData) -> None:
        self.data = data
        self.settings = data.settings

    def runs(self) -> html.Div:
        scope = f"project '{self.data.project}'" if self.data.project else "all projects"
        return html.Div(
            [
                html.H1("Runs"),
                html.P(f"Showing {scope}.", className="muted"),
                dcc.Interval(
                    id="runs-interval", interval=int(self.settings.refresh_seconds * 1000)
                ),
                html.Div(_runs_table(self.data.runs()), id="runs-table"),
            ]
        )

    def run(self, run_id: int) -> html.Div:
        run = self.data.run(run_id)
        if run is None:
            return _not_found(f"Run {run_id} is not in this dashboard's scope.")
        return html.Div(
            [
                dcc.Store(id="run-id", data=run_id),
                dcc.Store(id="run-signature"),
                dcc.Interval(id="run-interval", interval=int(self.settings.refresh_seconds * 1000)),
                html.Div(
                    [dcc.Link("Runs", href="/"), " › ", html.Span(run.name)],
                    className="crumbs",
                ),
                html.H1([run.name, html.Span(f" {run.project}", className="muted small")]),
                html.Div(id="run-status", className="status-line"),
                dcc.Loading(
                    dcc.Graph(
                        id="run-graph",
                        config={"displaylogo": False, "responsive": True},
                        className="run-graph",
                    ),
                    type="dot",
                    delay_show=400,
                ),
                html.P(
                    "Click a point to open that step's drill-down. Dashed lines: an alert "
                    "fired; dotted: it resolved. Gaps: the metric is undefined at that step.",
                    className="muted small",
                ),
                html.H2("Alerts"),
                html.Div(id="run-alerts"),
                html.H2("Step drill-down"),
                html.Div(
                    [
                        dcc.Dropdown(id="step-picker", placeholder="pick a step…", clearable=False),
                        dcc.Link("", id="step-link", href="", className="button"),
                    ],
                    className="step-pick",
                ),
                html.Div(
                    dcc.Link(
                        "Compare this run with others",
                        href="/compare?" + urlencode({"runs": run_id}),
                    ),
                    className="small",
                ),
            ]
        )

    def step(self, run_id: int, step: int) -> html.Div:
        page = self.data.step_page(run_id, step)
        if page is None:
            return _not_found(f"Run {run_id} is not in this dashboard's scope.")
        run = page["run"]
        analysis: StepAnalysis = page["analysis"]
        steps: list[int] = page["steps"]
        prev_step = max((s for s in steps if s < step), default=None)
        next_step = min((s for s in steps if s > step), default=None)
        nav = [
            dcc.Link("‹ previous step", href=f"/runs/{run_id}/steps/{prev_step}")
            if prev_step is not None
            else html.Span("‹ previous step", className="muted"),
            " · ",
            dcc.Link("next step ›", href=f"/runs/{run_id}/steps/{next_step}")
            if next_step is not None
            else html.Span("next step ›", className="muted"),
        ]
        head = [
            dcc.Store(id="drill-ref", data={"run_id": run_id, "step": step}),
            html.Div(
                [
                    dcc.Link("Runs", href="/"),
                    " › ",
                    dcc.Link(run.name, href=f"/runs/{run_id}"),
                    f" › step {step}",
                ],
                className="crumbs",
            ),
            html.H1(f"{run.name}: step {step}"),
            html.Div(nav, className="step-nav"),
        ]
        if not analysis.rollouts:
            return html.Div(head + [html.P("This step has no rollouts.", className="muted")])
        return html.Div(
            head
            + [
                self._step_summary(page),
                html.H2("Templates: near-identical reasoning across states"),
                self._templates(analysis),
                html.H2("Similarity of reasoning"),
                dcc.RadioItems(
                    id="heatmap-mode",
                    options=[
                        {"label": " state × state (mean)", "value": "states"},
                        {"label": " rollout × rollout (ordered by state)", "value": "rollouts"},
                    ],
                    value="states",
                    inline=True,
                    className="radio",
                ),
                dcc.Graph(
                    id="heatmap",
                    figure=self.data.heatmap(analysis, "states"),
                    config={"displaylogo": False},
                ),
                html.H2("States side by side"),
                self._states(analysis),
            ],
            id="drilldown",
        )

    def _step_summary(self, page: dict[str, Any]) -> html.Div:
        analysis: StepAnalysis = page["analysis"]
        metrics: dict[str, float | None] = page["metrics"]
        chips = []
        for key, names in panel_names(metrics).items():
            for name in names:
                chips.append(
                    html.Span(
                        [html.Span(name, className="chip-name"), " ", _fmt(metrics[name])],
                        className=f"chip chip-{key}",
                    )
                )
        alerts = [
            html.Span(
                [html.Code(a.rule), f" since step {a.step_fired}"],
                className="badge badge-critical"
                if a.severity == "critical"
                else "badge badge-warning",
            )
            for a in page["alerts"]
        ]
        sampled = (
            f" (similarity on a per-state sample of {len(analysis.rollouts)})"
            if analysis.sampled
            else ""
        )
        return html.Div(
            [
                html.P(
                    f"{page['num_rollouts']} rollouts in {len(analysis.state_order)} states"
                    f"{sampled}.",
                ),
                html.Div(chips or [html.Span("not scored yet", className="muted")]),
                html.Div(
                    [html.Span("Alerts firing at this step: "), *alerts]
                    if alerts
                    else [html.Span("No alert firing at this step.", className="muted")],
                    className="step-alerts",
                ),
            ],
            className="step-summary",
        )

    def _templates(self, analysis: StepAnalysis) -> html.Div:
        templates = [c for c in analysis.clusters if c.is_template]
        within = [c for c in analysis.clusters if not c.is_template]
        threshold = self.settings.template_similarity
        summary = html.P(
            [
                html.Strong(f"{analysis.template_share:.0%}"),
                " of this step's rollouts share near-identical reasoning (cosine ≥ "
                f"{threshold:g}) with rollouts of other states: ",
                html.Strong(f"{len(templates)} template(s)"),
                f". {len(within)} cluster(s) repeat within a single state only.",
            ],
            id="template-summary",
        )
        cards = []
        for k, c in enumerate(templates[:12], start=1):
            r = analysis.rollouts[c.representative]
            cards.append(
                html.Div(
                    [
                        html.Div(
                            [
                                html.Strong(f"T{k}"),
                                f" · {c.size} rollouts across {c.num_states} states "
                                f"({c.share:.0%} of the step) · mean similarity "
                                f"{c.mean_similarity:.2f}",
                            ],
                            className="template-head",
                        ),
                        _truncated(analysis.texts[c.representative], "reasoning"),
                        html.Div(
                            f"example: state {r.state_id}, rollout {r.rollout_id}; states: "
                            + ", ".join(c.states[:20])
                            + (" …" if len(c.states) > 20 else ""),
                            className="muted small",
                        ),
                    ],
                    className="template",
                )
            )
        if not cards:
            cards = [
                html.P(
                    "No reasoning is repeated across states: the reasoning depends on the input.",
                    className="muted",
                )
            ]
        return html.Div([summary, *cards], id="templates")

    def _states(self, analysis: StepAnalysis) -> html.Div:
        template_of: dict[int, str] = {}
        for k, c in enumerate([c for c in analysis.clusters if c.is_template], start=1):
            for i in c.members:
                template_of[i] = f"T{k}"
        by_state: dict[str, list[int]] = {}
        for i, s in enumerate(analysis.states):
            by_state.setdefault(s, []).append(i)
        columns = []
        shown_states = analysis.state_order[: self.settings.max_states_shown]
        for state in shown_states:
            members = by_state[state]
            rewards = [analysis.rollouts[i].reward for i in members]
            successes = [analysis.rollouts[i].success for i in members]
            known = [s for s in successes if s is not None]
            head = f"{len(members)} rollouts · reward {sum(rewards) / len(rewards):.3g}" + (
                f" · success {sum(known)}/{len(known)}" if known else ""
            )
            cards = []
            for i in members[: self.settings.max_rollouts_per_state]:
                r = analysis.rollouts[i]
                turns = sorted(r.turns, key=lambda t: t.index)
                actions = " → ".join(t.action for t in turns if t.action) or "(no action)"
                tag = template_of.get(i)
                cards.append(
                    html.Div(
                        [
                            html.Div(
                                [
                                    html.Span(r.rollout_id, className="rid"),
                                    _badge(tag, "template") if tag else None,
                                    html.Span(
                                        f"reward {r.reward:.3g}{_success_mark(r.success)}",
                                        className="muted",
                                    ),
                                ],
                                className="rollout-head",
                            ),
                            _truncated(analysis.texts[i], "reasoning"),
                            html.Div(
                                [html.Span("action: ", className="muted"), actions],
                                className="action",
                            ),
                        ],
                        className="rollout",
                    )
                )
            more = len(members) - len(cards)
            if more > 0:
                cards.append(html.P(f"… {more} more", className="muted small"))
            columns.append(
                html.Div(
                    [html.H3(state), html.Div(head, className="muted small"), *cards],
                    className="state-col",
                )
            )
        hidden = len(analysis.state_order) - len(shown_states)
        note = (
            [html.P(f"{hidden} more states not shown.", className="muted small")]
            if hidden > 0
            else []
        )
        return html.Div([html.Div(columns, className="states", id="states"), *note])

    def compare(self, search: str | None) -> html.Div:
        params = parse_qs((search or "").lstrip("?"))
        options = self.data.run_options()
        valid = {o["value"] for o in options}
        chosen = []
        for part in ",".join(params.get("runs", [])).split(","):
            if part.strip().isdigit() and int(part) in valid:
                chosen.append(int(part))
        if not chosen:
            chosen = [o["value"] for o in options[:3]]
        metric = (params.get("metric") or [DEFAULT_COMPARE_METRIC])[0]
        return html.Div(
            [
                html.H1("Compare runs"),
                html.Div(
                    [
                        dcc.Dropdown(
                            id="compare-runs",
                            options=options,
                            value=chosen,
                            multi=True,
                            placeholder="runs…",
                        ),
                        dcc.Dropdown(id="compare-metric", value=metric, clearable=False),
                    ],
                    className="compare-controls",
                ),
                dcc.Graph(id="compare-graph", config={"displaylogo": False}),
            ]
        )


# -- the app --------------------------------------------------------------------------


def create_dashboard(
    settings: Settings | None = None,
    dashboard_settings: DashboardSettings | None = None,
    *,
    factory: sessionmaker[Session] | None = None,
) -> Dash:
    """The Dash app over ``settings.resolved_database_url`` (or ``factory``).

    The schema must be at Alembic head. The app is a Flask (WSGI) app at ``.server``;
    :mod:`dashboard.server` serves it.
    """
    dashboard_settings = dashboard_settings or DashboardSettings()
    if factory is None:
        settings = settings or Settings()
        factory = make_sessionmaker(make_engine(settings.resolved_database_url, pool_size=4))
    data = DashboardData(factory, dashboard_settings)
    pages = Pages(data)
    app = Dash(
        __name__,
        title="collapsewatch",
        assets_folder=str(ASSETS),
        suppress_callback_exceptions=True,
        update_title=None,
    )
    app.dashboard_data = data  # type: ignore[attr-defined]
    scope = data.project or "all projects"
    app.layout = html.Div(
        [
            dcc.Location(id="url", refresh="callback-nav"),
            html.Header(
                [
                    dcc.Link("collapsewatch", href="/", className="brand"),
                    dcc.Link("Runs", href="/"),
                    dcc.Link("Compare", href="/compare"),
                    html.Span(scope, className="scope"),
                ],
                className="topbar",
            ),
            html.Main(id="page"),
        ]
    )
    _register_callbacks(app, data, pages)
    return app


def _register_callbacks(app: Dash, data: DashboardData, pages: Pages) -> None:
    refresh = data.settings.refresh_seconds
    idle_refresh = data.settings.idle_refresh_seconds

    @app.callback(Output("page", "children"), Input("url", "pathname"), State("url", "search"))
    def route(pathname: str | None, search: str | None) -> Any:
        path = pathname or "/"
        if path in ("/", "/runs", "/runs/"):
            return pages.runs()
        if m := _RUN_PATH.match(path):
            return pages.run(int(m.group(1)))
        if m := _STEP_PATH.match(path):
            return pages.step(int(m.group(1)), int(m.group(2)))
        if path.rstrip("/") == "/compare":
            return pages.compare(search)
        return _not_found(f"No page at {path}.")

    @app.callback(Output("runs-table", "children"), Input("runs-interval", "n_intervals"))
    def refresh_runs(_: int | None) -> Any:
        return _runs_table(data.runs())

    @app.callback(
        Output("run-graph", "figure"),
        Output("run-alerts", "children"),
        Output("step-picker", "options"),
        Output("run-status", "children"),
        Output("run-interval", "interval"),
        Output("run-signature", "data"),
        Input("run-interval", "n_intervals"),
        State("run-id", "data"),
        State("run-signature", "data"),
    )
    def refresh_run(_: int | None, run_id: int, signature: list[str] | None) -> tuple:
        return run_page_outputs(data, run_id, signature, refresh, idle_refresh)

    @app.callback(
        Output("url", "pathname"),
        Input("run-graph", "clickData"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    def open_clicked_step(click: dict[str, Any] | None, run_id: int) -> Any:
        points = (click or {}).get("points") or []
        if not points or points[0].get("x") is None:
            return no_update
        return f"/runs/{run_id}/steps/{int(points[0]['x'])}"

    @app.callback(
        Output("step-link", "href"),
        Output("step-link", "children"),
        Input("step-picker", "value"),
        State("run-id", "data"),
    )
    def pick_step(step: int | None, run_id: int) -> tuple[str, str]:
        if step is None:
            return "", ""
        return f"/runs/{run_id}/steps/{step}", f"Open step {step} →"

    @app.callback(
        Output("heatmap", "figure"),
        Input("heatmap-mode", "value"),
        State("drill-ref", "data"),
        prevent_initial_call=True,
    )
    def switch_heatmap(mode: str, ref: dict[str, int]) -> Any:
        figure = data.step_heatmap(ref["run_id"], ref["step"], mode)
        return no_update if figure is None else figure

    @app.callback(
        Output("compare-metric", "options"),
        Output("compare-metric", "value"),
        Input("compare-runs", "value"),
        State("compare-metric", "value"),
    )
    def compare_metrics(run_ids: list[int] | None, current: str | None) -> tuple:
        names = data.metric_names(list(run_ids or []))
        if current in names:
            return names, current
        preferred = DEFAULT_COMPARE_METRIC if DEFAULT_COMPARE_METRIC in names else None
        return names, preferred or (names[0] if names else None)

    @app.callback(
        Output("compare-graph", "figure"),
        Input("compare-runs", "value"),
        Input("compare-metric", "value"),
    )
    def compare_graph(run_ids: list[int] | None, name: str | None) -> Any:
        if not run_ids or not name:
            return go.Figure().update_layout(template="plotly_white", height=520)
        return data.compare(list(run_ids), name)


def run_page_outputs(
    data: DashboardData,
    run_id: int,
    signature: list[str] | None,
    refresh: float,
    idle_refresh: float,
) -> tuple:
    """The run page's data callback: (figure, alerts, step options, status, refresh
    period in ms, signature). Parts that did not change come back as ``no_update``."""
    update = data.run_page(run_id, signature)
    if not update.found:
        return no_update, _not_found("This run is gone."), [], "", 3_600_000, None
    period = refresh if update.live else idle_refresh
    status = _status_line(update, period)
    if not update.changed:
        return no_update, no_update, no_update, status, int(period * 1000), update.signature
    options = [{"label": f"step {s}", "value": s} for s in reversed(update.steps or [])]
    return (
        update.figure,
        _alerts_table(update.alerts or [], run_id),
        options,
        status,
        int(period * 1000),
        update.signature,
    )

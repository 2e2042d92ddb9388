"""Plotly figures of the dashboard, built from plain rows (no database, no Dash).

Undefined metric values (NULL in the store, or non-finite) are drawn as gaps, never
as 0: each series is laid on the run's own step axis with ``None`` where the value is
missing, and lines do not connect across gaps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

# The three dimensions of DESIGN.md §4, in the order the run page stacks them. Names
# not listed but carrying a panel's prefix join that panel after these.
PANELS: list[tuple[str, str, list[str]]] = [
    (
        "diversity",
        "Diversity: do outputs vary?",
        [
            "diversity.token_entropy",
            "diversity.within_state",
            "diversity.distinct_2",
            "diversity.vendi",
        ],
    ),
    (
        "responsiveness",
        "Responsiveness: do outputs depend on the input?",
        [
            "responsiveness.mi_embed",
            "responsiveness.retrieval_embed",
            "responsiveness.mi_logprob",
            "responsiveness.retrieval_acc",
            "responsiveness.mi_zscore",
            "responsiveness.action_mi",
        ],
    ),
    (
        "correctness",
        "Correctness: is the task being solved?",
        [
            "correctness.success_rate",
            "correctness.reward_mean",
            "correctness.valid_format_rate",
            "correctness.group_reward_std",
            "correctness.zero_std_fraction",
        ],
    ),
]
# Drawn at first; a panel's other metrics are listed in its legend, one click away
# (responsiveness alone has over a dozen, on scales from p-values to z-scores).
PRIMARY = {
    "diversity.token_entropy",
    "diversity.within_state",
    "diversity.distinct_2",
    "responsiveness.mi_embed",
    "responsiveness.retrieval_embed",
    "responsiveness.mi_logprob",
    "responsiveness.retrieval_acc",
    "correctness.success_rate",
    "correctness.reward_mean",
    "correctness.valid_format_rate",
    "correctness.group_reward_std",
    "correctness.zero_std_fraction",
}
# Token entropy is in nats per token, on another scale than the unitless diversity
# measures, and is the signal entropy-based monitoring watches: its own right axis.
SECONDARY = {"diversity.token_entropy"}

SEVERITY_COLOURS = {"critical": "#d62728", "warning": "#ff7f0e"}
RESOLVED_COLOUR = "#2ca02c"
PALETTE = [
    "#1f77b4",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#393b79",
]


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def series_by_name(
    rows: Iterable[tuple[int, str, float | None]],
) -> tuple[list[int], dict[str, list[float | None]]]:
    """Rows of (step, name, value) as one shared step axis and, per name, values on
    that axis (None where undefined or missing)."""
    rows = list(rows)
    steps = sorted({s for s, _, _ in rows})
    pos = {s: i for i, s in enumerate(steps)}
    out: dict[str, list[float | None]] = {}
    for step, name, value in rows:
        values = out.get(name)
        if values is None:
            values = out[name] = [None] * len(steps)
        values[pos[step]] = _finite(value)
    return steps, out


def panel_names(available: Iterable[str]) -> dict[str, list[str]]:
    """The metric names each panel shows, known ones first, then others by prefix."""
    available = set(available)
    out = {}
    for key, _, known in PANELS:
        names = [n for n in known if n in available]
        names += sorted(n for n in available if n.startswith(key + ".") and n not in known)
        out[key] = names
    return out


def _short(name: str) -> str:
    return name.split(".", 1)[-1]


def run_figure(
    rows: Iterable[tuple[int, str, float | None]],
    alerts: Sequence[Any],
    *,
    uirevision: Any = None,
) -> go.Figure:
    """The run page's figure: diversity, responsiveness and correctness stacked on one
    step axis, plus an alert lane; alert episodes are also marked across every panel
    (dashed line at the step fired, dotted at the step resolved)."""
    steps, series = series_by_name(rows)
    panels = panel_names(series)
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.045,
        row_heights=[0.3, 0.3, 0.3, 0.1],
        subplot_titles=[title for _, title, _ in PANELS] + ["Alerts"],
        specs=[[{"secondary_y": True}], [{}], [{}], [{}]],
    )
    for row, (key, _, _) in enumerate(PANELS, start=1):
        shown = [n for n in panels[key] if n in PRIMARY] or panels[key][:1]
        for k, name in enumerate(panels[key]):
            secondary = name in SECONDARY
            trace = go.Scatter(
                x=steps,
                y=series[name],
                name=_short(name),
                legendgroup=key,
                legendgrouptitle_text=key if k == 0 else None,
                mode="lines+markers" if len(steps) <= 60 else "lines",
                marker={"size": 4},
                line={"width": 2.5 if secondary else 1.6, "color": PALETTE[k % len(PALETTE)]},
                connectgaps=False,
                visible=True if name in shown else "legendonly",
                hovertemplate=f"{name}<br>step %{{x}}: %{{y:.4g}}<extra></extra>",
                meta=name,
            )
            if row == 1:
                fig.add_trace(trace, row=1, col=1, secondary_y=secondary)
            else:
                fig.add_trace(trace, row=row, col=1)
        if not panels[key]:
            fig.add_annotation(
                text="no metric of this dimension yet",
                showarrow=False,
                xref=f"x{'' if row == 1 else row} domain",
                yref=f"y{'' if row == 1 else (row + 1)} domain",
                x=0.5,
                y=0.5,
                font={"color": "#888"},
            )
    _add_alerts(fig, alerts, last_step=steps[-1] if steps else None)
    fig.update_yaxes(title_text="nats/token", row=1, col=1, secondary_y=True, showgrid=False)
    fig.update_yaxes(row=4, col=1, type="category", showgrid=False)
    fig.update_xaxes(title_text="step", row=4, col=1)
    fig.update_layout(
        height=860,
        margin={"l": 60, "r": 30, "t": 40, "b": 40},
        hovermode="x unified",
        legend={"groupclick": "toggleitem", "tracegroupgap": 120},
        uirevision=uirevision,
        template="plotly_white",
    )
    return fig


def _vline(fig: go.Figure, x: float, colour: str, dash: str) -> None:
    # One line through every panel: the x axes are shared, so "x" places it for all.
    fig.add_shape(
        type="line",
        xref="x",
        yref="paper",
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        line={"color": colour, "width": 1, "dash": dash},
        opacity=0.6,
        layer="above",
    )


def _add_alerts(fig: go.Figure, alerts: Sequence[Any], *, last_step: int | None) -> None:
    if not alerts:
        fig.add_trace(
            go.Scatter(x=[], y=[], name="alert fired", mode="markers", showlegend=False),
            row=4,
            col=1,
        )
        return
    fired_x, fired_y, fired_colour, fired_text = [], [], [], []
    res_x, res_y, res_text = [], [], []
    span_x: list[float | None] = []
    span_y: list[str | None] = []
    for a in alerts:
        colour = SEVERITY_COLOURS.get(a.severity, SEVERITY_COLOURS["warning"])
        label = f"{a.rule} ({a.severity}, {a.state})<br>{(a.message or '')[:200]}"
        fired_x.append(a.step_fired)
        fired_y.append(a.rule)
        fired_colour.append(colour)
        fired_text.append(label)
        end = a.step_resolved if a.step_resolved is not None else last_step
        if end is not None and end >= a.step_fired:
            span_x += [a.step_fired, end, None]
            span_y += [a.rule, a.rule, None]
        _vline(fig, a.step_fired, colour, "dash")
        if a.step_resolved is not None:
            res_x.append(a.step_resolved)
            res_y.append(a.rule)
            res_text.append(f"{a.rule} resolved<br>fired at step {a.step_fired}")
            _vline(fig, a.step_resolved, RESOLVED_COLOUR, "dot")
    fig.add_trace(
        go.Scatter(
            x=span_x,
            y=span_y,
            mode="lines",
            line={"color": "#bbb", "width": 6},
            name="alert episode",
            hoverinfo="skip",
            showlegend=False,
        ),
        row=4,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=fired_x,
            y=fired_y,
            mode="markers",
            name="alert fired",
            marker={"symbol": "triangle-up", "size": 13, "color": fired_colour},
            text=fired_text,
            hovertemplate="step %{x}: %{text}<extra>fired</extra>",
        ),
        row=4,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=res_x,
            y=res_y,
            mode="markers",
            name="alert resolved",
            marker={
                "symbol": "circle-open",
                "size": 11,
                "color": RESOLVED_COLOUR,
                "line": {"width": 2},
            },
            text=res_text,
            hovertemplate="step %{x}: %{text}<extra>resolved</extra>",
        ),
        row=4,
        col=1,
    )


def compare_figure(
    rows: Iterable[tuple[int, int, float | None]], labels: dict[int, str], name: str
) -> go.Figure:
    """One metric overlaid across runs (rows of run_id, step, value; gaps kept)."""
    by_run: dict[int, tuple[list[int], list[float | None]]] = {}
    for run_id, step, value in rows:
        xs, ys = by_run.setdefault(run_id, ([], []))
        xs.append(step)
        ys.append(_finite(value))
    fig = go.Figure()
    for k, (run_id, (xs, ys)) in enumerate(by_run.items()):
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=labels.get(run_id, str(run_id)),
                mode="lines+markers" if len(xs) <= 60 else "lines",
                line={"color": PALETTE[k % len(PALETTE)]},
                connectgaps=False,
            )
        )
    fig.update_layout(
        title=name,
        xaxis_title="step",
        yaxis_title=name,
        height=520,
        template="plotly_white",
        margin={"l": 60, "r": 30, "t": 50, "b": 40},
    )
    return fig


def state_heatmap(state_sim: np.ndarray, state_order: Sequence[str]) -> go.Figure:
    """State-by-state mean reasoning similarity."""
    z = [[None if math.isnan(v) else round(float(v), 4) for v in row] for row in state_sim]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(state_order),
            y=list(state_order),
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            colorbar={"title": "cosine"},
            hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title="Mean reasoning similarity between states (TF-IDF cosine)",
        xaxis={"type": "category", "title": "state"},
        yaxis={"type": "category", "autorange": "reversed", "title": "state"},
        height=560,
        margin={"l": 80, "r": 20, "t": 50, "b": 60},
    )
    return fig


def rollout_heatmap(sim: np.ndarray, labels: Sequence[str], states: Sequence[str]) -> go.Figure:
    """Rollout-by-rollout similarity, rollouts ordered by state; lines mark where one
    state's rollouts end and the next begin."""
    idx = list(range(len(labels)))
    fig = go.Figure(
        go.Heatmap(
            z=np.round(sim, 4),
            x=idx,
            y=idx,
            customdata=[[f"{labels[i]} | {labels[j]}" for j in idx] for i in idx],
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            colorbar={"title": "cosine"},
            hovertemplate="%{customdata}: %{z:.3f}<extra></extra>",
        )
    )
    for k in range(1, len(states)):
        if states[k] != states[k - 1]:
            for axis in ("x", "y"):
                fig.add_shape(
                    type="line",
                    xref="x" if axis == "x" else "paper",
                    yref="paper" if axis == "x" else "y",
                    x0=k - 0.5 if axis == "x" else 0,
                    x1=k - 0.5 if axis == "x" else 1,
                    y0=0 if axis == "x" else k - 0.5,
                    y1=1 if axis == "x" else k - 0.5,
                    line={"color": "white", "width": 0.6},
                )
    fig.update_layout(
        title="Reasoning similarity between rollouts, ordered by state (TF-IDF cosine)",
        xaxis={"title": "rollout", "showticklabels": False},
        yaxis={"title": "rollout", "autorange": "reversed", "showticklabels": False},
        height=560,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
    )
    return fig

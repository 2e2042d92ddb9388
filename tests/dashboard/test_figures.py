"""The run page's figure: three aligned panels, gaps for undefined values, alert marks."""

from __future__ import annotations

from types import SimpleNamespace

from dashboard.figures import compare_figure, panel_names, run_figure, series_by_name


def _alert(rule, severity, state, fired, resolved=None):
    return SimpleNamespace(
        rule=rule,
        severity=severity,
        state=state,
        step_fired=fired,
        step_resolved=resolved,
        message="m",
    )


ROWS = [
    (0, "responsiveness.mi_embed", 1.0),
    (1, "responsiveness.mi_embed", None),  # undefined: a gap, not 0
    (2, "responsiveness.mi_embed", float("nan")),  # non-finite: a gap too
    (3, "responsiveness.mi_embed", 0.1),
    (0, "diversity.token_entropy", 0.5),
    (1, "diversity.token_entropy", 0.7),
    (2, "diversity.token_entropy", 0.9),
    (3, "diversity.token_entropy", 1.1),
    (0, "correctness.success_rate", 0.5),
    (3, "correctness.success_rate", 0.6),  # steps 1-2 missing: gaps
    (0, "diversity.new_measure", 0.3),
    (0, "structure.num_rollouts", 64.0),
]


def _trace(fig, meta):
    return next(t for t in fig.data if getattr(t, "meta", None) == meta)


def test_undefined_values_are_gaps_never_zero() -> None:
    fig = run_figure(ROWS, [])
    mi = _trace(fig, "responsiveness.mi_embed")
    assert list(mi.x) == [0, 1, 2, 3]
    assert list(mi.y) == [1.0, None, None, 0.1]
    assert mi.connectgaps is False
    assert list(_trace(fig, "correctness.success_rate").y) == [0.5, None, None, 0.6]


def test_panels_share_one_step_axis_and_entropy_has_its_own_scale() -> None:
    fig = run_figure(ROWS, [])
    assert _trace(fig, "diversity.token_entropy").yaxis == "y2"  # secondary axis, row 1
    assert _trace(fig, "diversity.new_measure").yaxis == "y"  # unknown names join by prefix
    assert _trace(fig, "responsiveness.mi_embed").yaxis == "y3"
    assert _trace(fig, "correctness.success_rate").yaxis == "y4"
    assert fig.layout.xaxis.matches == fig.layout.xaxis2.matches == "x4"
    assert all(getattr(t, "meta", None) != "structure.num_rollouts" for t in fig.data)
    # Known primary metrics are drawn; others wait in the legend.
    assert _trace(fig, "diversity.token_entropy").visible is True
    assert _trace(fig, "diversity.new_measure").visible == "legendonly"
    assert panel_names(["correctness.reward_mean", "correctness.success_rate"])["correctness"] == [
        "correctness.success_rate",
        "correctness.reward_mean",
    ]


def test_alert_markers_for_fired_and_resolved() -> None:
    alerts = [
        _alert("no_signal", "warning", "resolved", 1, 2),
        _alert("template_collapse", "critical", "firing", 3),
    ]
    fig = run_figure(ROWS, alerts)
    fired = next(t for t in fig.data if t.name == "alert fired")
    resolved = next(t for t in fig.data if t.name == "alert resolved")
    assert list(fired.x) == [1, 3] and list(fired.y) == ["no_signal", "template_collapse"]
    assert list(fired.marker.color) == ["#ff7f0e", "#d62728"]
    assert list(resolved.x) == [2] and fired.yaxis == "y5"
    lines = [(s.x0, s.line.dash) for s in fig.layout.shapes]
    assert sorted(lines) == [(1, "dash"), (2, "dot"), (3, "dash")]
    assert all(s.yref == "paper" for s in fig.layout.shapes)  # through every panel


def test_series_and_compare_keep_gaps() -> None:
    steps, series = series_by_name([(5, "a", 1.0), (9, "a", None), (7, "b", 2.0)])
    assert steps == [5, 7, 9]
    assert series == {"a": [1.0, None, None], "b": [None, 2.0, None]}
    fig = compare_figure([(1, 0, 0.5), (1, 1, None), (2, 0, 0.7)], {1: "p / a", 2: "p / b"}, "m")
    assert [t.name for t in fig.data] == ["p / a", "p / b"]
    assert list(fig.data[0].y) == [0.5, None]

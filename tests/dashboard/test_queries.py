"""The dashboard's read side over a seeded store (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

from collapsewatch.store.models import utcnow
from dashboard import queries
from dashboard.app import DashboardData, run_page_outputs
from dashboard.settings import DashboardSettings


def test_runs_page_rows(seeded) -> None:
    with seeded.factory() as session:
        rows = queries.list_run_summaries(session=session, project=seeded.run.project)
        (row,) = rows
        assert (row.id, row.name, row.project) == (
            seeded.run.run_id,
            seeded.run.name,
            seeded.run.project,
        )
        assert (row.last_step, row.num_steps, row.num_rollouts) == (29, 30, 480)
        assert row.status == "live" and row.open_alerts == 1
        assert row.open_rules == ["template_collapse"]
        later = utcnow() + timedelta(minutes=10)
        (idle,) = queries.list_run_summaries(
            session=session, project=seeded.run.project, now=later, live_seconds=120
        )
        assert idle.status == "idle"
        everyone = queries.list_run_summaries(session=session)
        assert {seeded.run.run_id, seeded.other.run_id} <= {r.id for r in everyone}


def test_project_scope_hides_other_projects_runs(seeded) -> None:
    data = DashboardData(seeded.factory, DashboardSettings(project=seeded.run.project))
    assert [r.id for r in data.runs()] == [seeded.run.run_id]
    assert data.run(seeded.other.run_id) is None
    assert data.step_page(seeded.other.run_id, 0) is None
    assert not data.run_page(seeded.other.run_id).found
    assert [o["value"] for o in data.run_options()] == [seeded.run.run_id]
    assert data.metric_names([seeded.other.run_id]) == []
    assert data.compare([seeded.other.run_id], "responsiveness.mi_embed").data == ()


def test_run_page_data_and_unchanged_refresh(seeded) -> None:
    data = DashboardData(seeded.factory, DashboardSettings())
    first = data.run_page(seeded.run.run_id)
    assert first.found and first.changed and first.live
    assert first.steps == list(range(30))
    assert [a.rule for a in first.alerts] == ["no_signal", "template_collapse"]
    names = {t.meta for t in first.figure.data if t.meta}
    assert "responsiveness.mi_embed" in names and "diversity.token_entropy" in names
    again = data.run_page(seeded.run.run_id, first.signature)
    assert not again.changed and again.figure is None
    # A newly scored step changes the signature, so the page redraws.
    from collapsewatch.store import queries as store_queries

    with seeded.factory() as session:
        store_queries.write_metric_points(
            session=session,
            run_id=seeded.run.run_id,
            step=30,
            metrics={"responsiveness.mi_embed": 0.01},
            representation="tfidf",
        )
        session.commit()
    assert data.run_page(seeded.run.run_id, first.signature).changed

    out = run_page_outputs(data, seeded.run.run_id, None, 5.0, 60.0)
    figure, alerts, options, status, period, signature = out
    assert period == 5000 and options[0] == {"label": "step 29", "value": 29}
    assert signature == data.run_page(seeded.run.run_id).signature


def test_step_page(seeded) -> None:
    data = DashboardData(seeded.factory, DashboardSettings())
    page = data.step_page(seeded.run.run_id, 25)
    assert page["num_rollouts"] == 16 and page["steps"][-1] == 29
    assert [a.rule for a in page["alerts"]] == ["template_collapse"]
    assert page["metrics"]["responsiveness.mi_embed"] == 0.05
    assert page["analysis"].template_share == 1.0
    assert data.step_page(seeded.run.run_id, 5)["alerts"][0].rule == "no_signal"
    assert data.step_page(seeded.run.run_id, 9)["alerts"] == []  # resolved at 9
    heat = data.step_heatmap(seeded.run.run_id, 25, "rollouts")
    assert len(heat.data[0].z) == 16

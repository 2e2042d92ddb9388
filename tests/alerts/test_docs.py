"""docs/alerts.md and docs/dashboard.md document every setting with its default."""

from __future__ import annotations

from pathlib import Path

import pytest

from collapsewatch.alerts import AlertSettings
from dashboard.settings import DashboardSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("doc", "model", "prefix"),
    [
        ("alerts.md", AlertSettings, "COLLAPSEWATCH_"),
        ("dashboard.md", DashboardSettings, "COLLAPSEWATCH_DASHBOARD_"),
    ],
)
def test_every_setting_is_documented_with_its_default(doc, model, prefix) -> None:
    text = (ROOT / "docs" / doc).read_text()
    for name, field in model.model_fields.items():
        env = f"`{prefix}{name.upper()}`"
        rows = [line for line in text.splitlines() if line.startswith("|") and env in line]
        assert rows, f"{env} missing from docs/{doc}"
        expected = "unset" if field.default is None else f"`{field.default}`"
        assert expected in rows[0], (name, rows[0])

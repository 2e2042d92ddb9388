"""Docs stay true to the code: every setting is documented, every CLI command has help."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from collapsewatch.cli import app
from collapsewatch.detect import DetectorSettings
from collapsewatch.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_every_setting_is_in_the_configuration_doc() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"COLLAPSEWATCH_{name.upper()}"
        for name in Settings.model_fields
        if f"`COLLAPSEWATCH_{name.upper()}`" not in doc
    ]
    assert missing == []


def test_configuration_doc_defaults_match_the_code() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for name, field in Settings.model_fields.items():
        row = next(line for line in doc.splitlines() if f"`COLLAPSEWATCH_{name.upper()}`" in line)
        expected = "unset" if field.default is None else f"`{field.default}`"
        assert expected in row, (name, row)


def test_every_detector_setting_is_in_the_configuration_doc() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"COLLAPSEWATCH_DETECT_{name.upper()}"
        for name in DetectorSettings.model_fields
        if f"`COLLAPSEWATCH_DETECT_{name.upper()}`" not in doc
    ]
    assert missing == []


def test_detector_setting_defaults_match_the_code() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for name, field in DetectorSettings.model_fields.items():
        row = next(
            line for line in doc.splitlines() if f"`COLLAPSEWATCH_DETECT_{name.upper()}`" in line
        )
        assert f"`{field.default}`" in row, (name, row)
        assert field.description, name  # every threshold says why


def test_every_command_has_help() -> None:
    runner = CliRunner()
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0
    for command in (
        "score",
        "up",
        "api",
        "worker",
        "import",
        "metrics",
        "quickstart",
        "db",
        "keys",
        "alerts",
        "dashboard",
    ):
        assert command in top.stdout
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0, (command, result.output)
        assert "Usage" in result.stdout

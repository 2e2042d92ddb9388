"""`collapsewatch alerts …` against a real receiver on loopback."""

from __future__ import annotations

from typer.testing import CliRunner

from collapsewatch.alerts import generate_secret, verify
from collapsewatch.cli import app

runner = CliRunner()


def test_alerts_test_sends_a_signed_message_to_url(receiver, monkeypatch) -> None:
    for name in ("SLACK_WEBHOOK_URL", "WEBHOOK_URL", "WEBHOOK_SECRET"):
        monkeypatch.delenv(f"COLLAPSEWATCH_{name}", raising=False)
    secret = generate_secret()
    result = runner.invoke(
        app,
        ["alerts", "test", "--sink", "webhook", "--url", receiver.url + "/h", "--secret", secret],
    )
    assert result.exit_code == 0, result.output
    assert "webhook: delivered" in result.output
    (hit,) = receiver.on("/h")
    assert verify(secret, hit.headers, hit.body)["type"] == "alert.test"


def test_alerts_test_uses_configured_sinks_and_reports_failure(receiver, monkeypatch) -> None:
    monkeypatch.setenv("COLLAPSEWATCH_SLACK_WEBHOOK_URL", receiver.url + "/services/T/B/secret")
    monkeypatch.delenv("COLLAPSEWATCH_WEBHOOK_URL", raising=False)
    result = runner.invoke(app, ["alerts", "test"])
    assert result.exit_code == 0, result.output
    assert "secret" not in result.output  # a Slack URL's path is a credential
    assert "test message" in receiver.on("/services/T/B/secret")[0].json()["text"]
    receiver.cue(410)
    result = runner.invoke(app, ["alerts", "test", "--sink", "slack"])
    assert result.exit_code == 1 and "HTTP 410" in result.output


def test_alerts_test_without_a_sink_says_what_to_set(monkeypatch) -> None:
    for name in ("SLACK_WEBHOOK_URL", "WEBHOOK_URL", "WEBHOOK_SECRET"):
        monkeypatch.delenv(f"COLLAPSEWATCH_{name}", raising=False)
    result = runner.invoke(app, ["alerts", "test"])
    assert result.exit_code == 2 and "COLLAPSEWATCH_SLACK_WEBHOOK_URL" in result.output
    result = runner.invoke(app, ["alerts", "test", "--url", "http://127.0.0.1:9/"])
    assert result.exit_code == 2 and "--sink" in result.output
    monkeypatch.setenv("COLLAPSEWATCH_WEBHOOK_URL", "http://127.0.0.1:9/")
    result = runner.invoke(app, ["alerts", "test"])
    assert result.exit_code == 2 and "COLLAPSEWATCH_WEBHOOK_SECRET" in result.output


def test_alerts_secret_and_help() -> None:
    result = runner.invoke(app, ["alerts", "secret"])
    assert result.exit_code == 0 and result.stdout.strip().startswith("whsec_")
    for command in (["alerts", "--help"], ["alerts", "test", "--help"], ["dashboard", "--help"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0 and "Usage" in result.stdout, command

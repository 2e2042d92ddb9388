"""Alert delivery settings (pydantic-settings, environment ``COLLAPSEWATCH_<FIELD>``).

docs/alerts.md lists every field with its default. Sinks given here apply to every
project; sinks per project are configured through the API (``/api/v1/alert-sinks``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Severity = Literal["warning", "critical"]


class AlertSettings(BaseSettings):
    """Where alerts go and how delivery retries."""

    model_config = SettingsConfigDict(
        env_prefix="COLLAPSEWATCH_", env_file=None, extra="ignore", populate_by_name=True
    )

    slack_webhook_url: str | None = Field(
        default=None,
        description="Slack incoming-webhook URL; every project's alerts are posted there.",
    )
    webhook_url: str | None = Field(
        default=None,
        description="Generic webhook URL; every project's alerts are POSTed there, signed.",
    )
    webhook_secret: str | None = Field(
        default=None,
        description="Signing secret (whsec_<base64>) of webhook_url; required with it.",
    )
    alerts_min_severity: Severity = Field(
        default="warning",
        description="Least severity the settings sinks receive ('warning' or 'critical').",
    )
    dashboard_url: str = Field(
        default="http://127.0.0.1:8424",
        description="Base URL of the dashboard, for the run links in messages.",
    )
    delivery_timeout_seconds: float = Field(
        default=10.0, gt=0, description="HTTP timeout of one delivery attempt (s)."
    )
    delivery_max_attempts: int = Field(
        default=8, ge=1, description="Attempts before a delivery is marked failed."
    )
    delivery_backoff_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Wait after the first failed attempt; doubles after each further one.",
    )
    delivery_backoff_max_seconds: float = Field(
        default=900.0,
        gt=0,
        description="Longest wait between attempts, Retry-After included.",
    )
    delivery_lease_seconds: float = Field(
        default=120.0,
        gt=0,
        description="A delivery taken by a worker is retried by another after this long "
        "(covers a worker that died mid-send).",
    )

    @field_validator("slack_webhook_url", "webhook_url", "webhook_secret")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return value.strip()

    @field_validator("webhook_secret")
    @classmethod
    def _secret_format(cls, value: str | None) -> str | None:
        if value is not None:
            from collapsewatch.alerts.webhook import secret_key

            secret_key(value)
        return value

    @model_validator(mode="after")
    def _secret_with_url(self) -> AlertSettings:
        if self.webhook_url and not self.webhook_secret:
            raise ValueError(
                "COLLAPSEWATCH_WEBHOOK_SECRET is required with COLLAPSEWATCH_WEBHOOK_URL "
                "(make one with `collapsewatch alerts secret`)"
            )
        return self

    @field_validator("dashboard_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.strip().rstrip("/")

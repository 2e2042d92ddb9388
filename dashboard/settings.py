"""Dashboard settings (pydantic-settings, environment ``COLLAPSEWATCH_DASHBOARD_<FIELD>``).

docs/dashboard.md lists them with their defaults; the database is the one of
:class:`collapsewatch.settings.Settings` (``DATABASE_URL``).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class DashboardSettings(BaseSettings):
    """Where the dashboard listens and how it refreshes."""

    model_config = SettingsConfigDict(
        env_prefix="COLLAPSEWATCH_DASHBOARD_", env_file=None, extra="ignore"
    )

    host: str = Field(
        default="127.0.0.1",
        description="Bind address. Loopback by default: the dashboard has no login.",
    )
    port: int = Field(default=8424, ge=0, le=65535, description="Dashboard port (0: any free one).")
    project: str | None = Field(
        default=None, description="Show only this project's runs; unset: every project."
    )
    refresh_seconds: float = Field(
        default=5.0, gt=0, description="Refresh period of a live run's page (s)."
    )
    idle_refresh_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Refresh period of an idle run's page (s): notices a run that resumes.",
    )
    live_seconds: float = Field(
        default=120.0,
        gt=0,
        description="A run is 'live' while its last rollout is younger than this (s).",
    )
    template_similarity: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="Cosine similarity (TF-IDF) above which two reasonings count as "
        "near-identical in the step drill-down's template clusters.",
    )
    max_heatmap_rollouts: int = Field(
        default=256,
        ge=8,
        description="Most rollouts in the rollout-by-rollout heatmap (sampled per state).",
    )
    max_states_shown: int = Field(
        default=16, ge=1, description="Most states shown side by side in a drill-down."
    )
    max_rollouts_per_state: int = Field(
        default=8, ge=1, description="Most rollouts shown per state in a drill-down."
    )

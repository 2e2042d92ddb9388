"""All configuration in one place (pydantic-settings).

Every field is read from an environment variable named ``COLLAPSEWATCH_<FIELD>``
(upper case); the database URL also accepts plain ``DATABASE_URL``. docs/configuration.md
lists them with their defaults.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Representation = Literal["tfidf", "minilm"]


class Settings(BaseSettings):
    """collapsewatch settings; see docs/configuration.md for the reasons behind defaults."""

    model_config = SettingsConfigDict(
        env_prefix="COLLAPSEWATCH_", env_file=None, extra="ignore", populate_by_name=True
    )

    # -- storage ---------------------------------------------------------------------
    data_dir: Path = Field(
        default=Path(".collapsewatch"),
        description="Folder of the embedded SQLite database and the local API key file.",
    )
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("COLLAPSEWATCH_DATABASE_URL", "DATABASE_URL"),
        description="SQLAlchemy URL; unset means SQLite at <data_dir>/collapsewatch.db.",
    )

    # -- server ----------------------------------------------------------------------
    host: str = Field(default="127.0.0.1", description="Bind address (loopback by default).")
    port: int = Field(default=8423, ge=1, le=65535, description="API port.")
    api_key: str | None = Field(
        default=None, description="API key: `up` registers it, the SDK and CLI send it."
    )
    url: str = Field(default="http://127.0.0.1:8423", description="API base URL for clients.")
    project: str = Field(default="default", description="Project that `up` creates a key for.")

    # -- limits ----------------------------------------------------------------------
    max_request_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1024, description="Largest request body (bytes) -> 413."
    )
    max_batch_rollouts: int = Field(
        default=4096, ge=1, description="Most rollouts in one batch request -> 422."
    )
    max_text_chars: int = Field(
        default=1_000_000,
        ge=1,
        description="Longest observation/reasoning/action text (characters) -> 422.",
    )

    # -- worker ----------------------------------------------------------------------
    step_idle_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A step with no new rollouts for this long is scored even if not "
        "marked complete.",
    )
    claim_lease_seconds: float = Field(
        default=300.0, gt=0, description="A claim older than this is taken over."
    )
    poll_interval: float = Field(default=1.0, gt=0, description="Worker idle poll (s).")

    # -- scoring ---------------------------------------------------------------------
    representation: Representation = Field(
        default="tfidf",
        description="Text representation for diversity/responsiveness: 'tfidf' "
        "(lexical, ~ms per 1k texts) or 'minilm' (all-MiniLM-L6-v2, ~40 texts/s on 2 cores).",
    )
    embed_max_texts: int = Field(
        default=256,
        ge=8,
        description="With 'minilm', at most this many rollouts per step are embedded "
        "(stratified by state).",
    )
    embed_max_tokens: int = Field(default=128, ge=16, le=512, description="MiniLM truncation.")
    mi_temperature: float = Field(
        default=0.2,
        gt=0,
        description="Kernel temperature of responsiveness.mi_embed (0.2 separated "
        "state-dependent reasoning from the shuffled null best in our planted tests).",
    )

    @field_validator("database_url")
    @classmethod
    def _normalise_url(cls, url: str | None) -> str | None:
        """Accept postgres:// and postgresql:// and use the psycopg 3 driver."""
        if url is None or not url.strip():
            return None
        url = url.strip()
        for prefix in ("postgres://", "postgresql://"):
            if url.startswith(prefix):
                return "postgresql+psycopg://" + url[len(prefix) :]
        return url

    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one, else embedded SQLite."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'collapsewatch.db').resolve()}"

    @property
    def api_key_file(self) -> Path:
        """Where `up` writes the key it generated, so local clients can find it."""
        return self.data_dir / "api_key"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()

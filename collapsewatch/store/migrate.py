"""Run the Alembic migrations in migrations/ programmatically (`collapsewatch db upgrade`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine


def migrations_dir() -> Path:
    """The Alembic script folder: packaged with a wheel, or migrations/ in a checkout.

    Raises:
        FileNotFoundError: neither location holds an env.py.
    """
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_migrations", here.parent / "migrations"):
        if (candidate / "env.py").exists():
            return candidate
    raise FileNotFoundError("collapsewatch migrations folder not found")


def alembic_config(url: str) -> Config:
    """An Alembic Config aimed at ``url``, with no alembic.ini needed."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (default: the newest)."""
    if url.startswith("sqlite:///"):
        Path(url.split(":///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Take the database at ``url`` back to ``revision`` ("base" drops everything)."""
    command.downgrade(alembic_config(url), revision)


def is_at_head(url: str) -> bool:
    """Whether the database at ``url`` is at the newest revision (False if never migrated)."""
    heads = set(ScriptDirectory.from_config(alembic_config(url)).get_heads())
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            current = set(MigrationContext.configure(conn).get_current_heads())
    finally:
        engine.dispose()
    return current == heads

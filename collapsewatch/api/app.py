"""The ingestion API: ``create_app(settings)`` builds the FastAPI application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from collapsewatch import __version__
from collapsewatch.api.errors import install_error_handlers
from collapsewatch.api.middleware import BodySizeLimit
from collapsewatch.api.routes import alert_sinks, health, metrics, rollouts, runs, trainer_metrics
from collapsewatch.settings import Settings, get_settings
from collapsewatch.store.engine import make_engine, make_sessionmaker


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API against ``settings.resolved_database_url``.

    The schema must already be at Alembic head (`collapsewatch db upgrade`); the app
    never creates tables itself.
    """
    settings = settings or get_settings()
    engine = make_engine(settings.resolved_database_url)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        engine.dispose()

    app = FastAPI(
        lifespan=lifespan,
        title="collapsewatch",
        version=__version__,
        summary="Training-health monitor for RL of LLM agents (RAGEN-2 decomposition).",
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine)
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    for module in (health, runs, rollouts, metrics, trainer_metrics, alert_sinks):
        app.include_router(module.router)

    return app

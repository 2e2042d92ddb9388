"""WSGI entry point for production servers: ``gunicorn 'dashboard.wsgi:application'``.

Reads DATABASE_URL and COLLAPSEWATCH_DASHBOARD_* from the environment. It has no login
of its own: serve it behind a proxy that authenticates (see docs/dashboard.md).
"""

from dashboard.app import create_dashboard

application = create_dashboard().server

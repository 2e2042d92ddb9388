"""The collapsewatch dashboard (Plotly Dash): runs, a run's three dimensions over
steps with its alerts, a step's drill-down (states side by side, similarity heatmap,
templates), and runs compared.

Serve it alone with ``collapsewatch dashboard`` or together with the API and worker
with ``collapsewatch up``; in code::

    from dashboard.server import DashboardServer

    with DashboardServer() as server:  # DATABASE_URL, COLLAPSEWATCH_DASHBOARD_*
        print(server.url)

It reads the store only (``dashboard.queries``); it never writes. See docs/dashboard.md.
Dash is imported only when the app is built, so importing this package is cheap.
"""

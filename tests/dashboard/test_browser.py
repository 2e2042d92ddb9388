"""The dashboard in headless Chromium: runs page → run page (series and alert
markers) → a step's drill-down → compare, on SQLite and PostgreSQL. Screenshots go to
test-artifacts/dashboard/<database>/.

Needs Debian's chromium and chromium-driver and the selenium package. Without them
the test skips on a developer machine and fails in CI (CI is set), so a browser
missing from CI cannot pass unnoticed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from collapsewatch.settings import Settings
from dashboard.server import DashboardServer
from dashboard.settings import DashboardSettings

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("COLLAPSEWATCH_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("COLLAPSEWATCH_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
WAIT = 30


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package is not installed (pip install selenium)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).exists() or shutil.which(path)):
            return f"{path} not found (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    problem = _missing()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests need Chromium in CI: {problem}")
        pytest.skip(problem)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--window-size=1400,1700",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT)
    yield driver
    driver.quit()


def _wait(driver, condition, timeout: float = WAIT):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)


def _css(driver, selector: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return _wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, selector)))


def _click(driver, selector: str, text: str | None = None) -> None:
    """Click the first element matching ``selector`` (and ``text``), retrying while a
    refresh callback replaces it (the runs table re-renders every refresh)."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt(d) -> bool:
        try:
            for element in d.find_elements("css selector", selector):
                if text is None or element.text == text:
                    element.click()
                    return True
        except StaleElementReferenceException:
            pass
        return False

    _wait(driver, attempt)


def _text(driver, selector: str) -> str:
    """The text of an element, read again if a refresh replaced it meanwhile."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt(d) -> str | None:
        try:
            return _css(d, selector).text or None
        except StaleElementReferenceException:
            return None

    return _wait(driver, attempt)


def _graph_data(driver, graph_id: str):
    """The traces Plotly drew in a dcc.Graph (read from the page, not from Python)."""
    script = (
        f"const gd = document.querySelector('#{graph_id} .js-plotly-plot');"
        "return gd && gd.data ? gd.data.map(t => ({name: t.name, meta: t.meta || null,"
        " x: Array.from(t.x || []), y: Array.from(t.y || [])})) : null;"
    )
    return _wait(driver, lambda d: d.execute_script(script) or None)


def test_runs_run_and_step_pages_in_chromium(browser, seeded, request) -> None:
    driver = browser
    db = request.node.callspec.params["db_url"]
    shots = ARTIFACTS / db
    shots.mkdir(parents=True, exist_ok=True)
    run = seeded.run
    settings = Settings(database_url=seeded.url)
    dash_settings = DashboardSettings(port=0, project=run.project, refresh_seconds=2)
    with DashboardServer(settings, dash_settings, factory=seeded.factory) as server:
        try:
            _walk_through(driver, server.url, seeded, shots)
        except Exception:
            driver.save_screenshot(str(shots / "failure.png"))
            (shots / "failure.html").write_text(driver.page_source)
            raise


def _walk_through(driver, base: str, seeded, shots: Path) -> None:
    run = seeded.run
    # Runs page: the project's run, live, with its firing alert; the other
    # project's run is not shown.
    driver.get(base + "/")
    table = _text(driver, "#runs")
    assert run.name in table and seeded.other.name not in table
    assert "live" in table and "template_collapse" in table
    assert "480" in table  # rollouts
    driver.save_screenshot(str(shots / "01-runs.png"))

    # Run page, reached by clicking the run.
    _click(driver, "a.run-link")
    _wait(driver, lambda d: d.current_url.endswith(f"/runs/{run.run_id}"))
    traces = _graph_data(driver, "run-graph")
    by_meta = {t["meta"]: t for t in traces if t["meta"]}
    for name in (
        "diversity.token_entropy",
        "responsiveness.mi_embed",
        "correctness.success_rate",
    ):
        assert by_meta[name]["x"] == list(range(run.steps)), name
    # The undefined value is a gap in the drawn series, not a 0.
    assert by_meta["correctness.success_rate"]["y"][run.gap_step] is None
    fired = next(t for t in traces if t["name"] == "alert fired")
    resolved = next(t for t in traces if t["name"] == "alert resolved")
    assert fired["x"] == [4, run.collapse_at + 2]
    assert fired["y"] == ["no_signal", "template_collapse"]
    assert resolved["x"] == [9]
    markers = driver.find_elements("css selector", "#run-graph .scatterlayer .point")
    assert len(markers) > 0
    alerts = _text(driver, "#alerts")
    assert "template_collapse" in alerts and "resolved" in alerts
    _wait(driver, lambda d: "live" in _text(d, "#run-status"))
    driver.save_screenshot(str(shots / "02-run.png"))

    # Step drill-down, from the firing alert's step link.
    step = run.collapse_at + 2
    _click(driver, "a.alert-step-link", text=str(step))
    _css(driver, "#drilldown")
    assert driver.current_url.endswith(f"/runs/{run.run_id}/steps/{step}")
    summary = _text(driver, "#template-summary")
    assert "100%" in summary and "2 template(s)" in summary
    assert len(driver.find_elements("css selector", "#templates .template")) == 2
    assert len(driver.find_elements("css selector", "#states .state-col")) == 4
    assert "let me think step by step" in _text(driver, "#states")
    heat = _graph_data(driver, "heatmap")
    assert len(heat[0]["y"]) == 4  # state × state
    driver.save_screenshot(str(shots / "03-step-drilldown.png"))

    # The rollout-by-rollout heatmap, on request.
    _click(driver, "#heatmap-mode input[value=rollouts]")
    _wait(driver, lambda d: len(_graph_data(d, "heatmap")[0]["y"]) == 16)
    heatmap = driver.find_element("id", "heatmap")
    driver.execute_script("arguments[0].scrollIntoView();", heatmap)
    driver.save_screenshot(str(shots / "04-rollout-heatmap.png"))

    # A healthy step, for contrast: no templates.
    driver.get(f"{base}/runs/{run.run_id}/steps/3")
    assert "0 template(s)" in _text(driver, "#template-summary")

    # Compare: one metric across runs.
    driver.get(f"{base}/compare?runs={run.run_id}&metric=responsiveness.mi_embed")
    compare = _graph_data(driver, "compare-graph")
    assert compare[0]["name"].endswith(run.name) and len(compare[0]["x"]) == run.steps
    driver.save_screenshot(str(shots / "05-compare.png"))

    # Out of scope: another project's run is not found.
    driver.get(f"{base}/runs/{seeded.other.run_id}")
    assert "Not found" in _text(driver, ".not-found")

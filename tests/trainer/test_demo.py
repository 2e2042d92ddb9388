"""`collapsewatch demo` end to end: real GRPO training streamed to a real server."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from collapsewatch.server import free_port
from collapsewatch.settings import Settings
from collapsewatch.trainer.demo import run_demo


@pytest.mark.slow
def test_demo_catches_template_collapse_that_entropy_misses(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", port=free_port(), poll_interval=0.2)
    console = Console(record=True, width=120)
    collapse, healthy = run_demo(settings, steps=60, seed=0, console=console)

    assert (collapse.preset, healthy.preset) == ("template-collapse", "healthy")
    # The collapse run: template collapse fires, while token entropy never falls below
    # 80% of its start (it rises), so an entropy-drop rule has nothing to see.
    assert collapse.first("template_collapse") is not None
    assert collapse.first("entropy_collapse") is None
    assert collapse.entropy_min_ratio >= 0.8
    assert collapse.entropy_last > collapse.entropy_first
    assert collapse.responsiveness_last < 0.5 * collapse.responsiveness_first
    # The healthy run, same seed and states: no template-collapse alert.
    assert healthy.first("template_collapse") is None
    text = console.export_text()
    assert f"Template collapse caught at step {collapse.first('template_collapse')}" in text

"""Where the shared real-data folder is (``/work/shared/data`` in this checkout layout).

The folder holds real rollout logs from other people's training runs (see its
README.md). It is found at ``$COLLAPSEWATCH_SHARED_DATA`` when that is set, else at
``<repo>/../shared/data``. Tests that need it skip when it is missing, except under CI
(``CI`` set to anything but ``""``, ``0``, ``false`` or ``no``), where a missing folder
or file fails the test: CI must never pass by skipping the real-data checks.

Two ways in: call :func:`shared_data` (``shared_data("trl_vqa", "x.md")``) inside a
test or fixture, or request the ``shared_data_dir`` fixture (a :class:`~pathlib.Path`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV_VAR = "COLLAPSEWATCH_SHARED_DATA"
REPO_ROOT = Path(__file__).resolve().parents[1]


def locate_shared_data() -> Path:
    """The shared data folder's expected location (it may not exist)."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "data"


def in_ci() -> bool:
    """True when the environment says this is a CI run."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def shared_data(*parts: str) -> Path:
    """The path ``parts`` inside the shared data folder (the folder itself without
    ``parts``). When it does not exist the calling test is skipped, or failed under CI.
    Call it from inside a test or fixture, never at import time."""
    path = locate_shared_data().joinpath(*parts)
    if not path.exists():
        why = f"shared real data not found at {path} (set {ENV_VAR} to its folder)"
        if in_ci():
            pytest.fail(f"{why}; CI must not skip real-data tests")
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The shared data folder (skip when missing; fail under CI)."""
    return shared_data()

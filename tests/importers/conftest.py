"""Fixtures for the importer tests: the fixture folder, and the shared real logs
parsed once per session (each parses in well under a second)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collapsewatch.importers import load_rollouts
from collapsewatch.schema import Rollout
from tests.shared_data import shared_data, shared_data_dir  # noqa: F401

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def verl_step2_path() -> Path:
    return shared_data("verl_gsm8k_tool", "step2.jsonl")


@pytest.fixture(scope="session")
def healthy_md_path() -> Path:
    return shared_data("trl_vqa", "healthy_r4.rollout_results.md")


@pytest.fixture(scope="session")
def collapse_md_path() -> Path:
    return shared_data("trl_vqa", "format_collapse_r2.rollout_results.md")


@pytest.fixture(scope="session")
def verl_step2(verl_step2_path: Path) -> list[Rollout]:
    return list(load_rollouts(verl_step2_path, "verl"))


@pytest.fixture(scope="session")
def healthy_r4(healthy_md_path: Path) -> list[Rollout]:
    return list(load_rollouts(healthy_md_path, "trl-md"))


@pytest.fixture(scope="session")
def format_collapse_r2(collapse_md_path: Path) -> list[Rollout]:
    return list(load_rollouts(collapse_md_path, "trl-md"))

"""scripts/fault_suite.py's kill series judges a resumed run against an uninterrupted one of the same script: its
reference run must pass its own check in the default protocol (one model call per step), or no kill is ever tried."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from fault_kills import reference_seconds, run_kills  # noqa: E402

pytestmark = pytest.mark.slow


def test_the_kill_series_reference_run_and_its_kills_pass_their_checks() -> None:
    assert reference_seconds([]) > 0  # raises SystemExit with the run's output when its check fails
    said: list[tuple[str, str, bool, str]] = []
    run_kills(random.Random(3), {"local": 2, "postgres": 0, "docker": 0, "batch": 0}, lambda *r: said.append(r), None)
    assert [(category, ok, problem) for category, _, ok, problem in said] == [("kills", True, "")] * 2

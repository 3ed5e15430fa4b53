"""The guard that keeps the suite fast (tests/README.md): a test outside `slow` over --cpu-limit fails with its name
and figure, a `slow` one does not, and --cpu-durations lists the dearest. A pytest of its own, with this conftest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
BURN = """
import time

import pytest


def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_dear():
    burn(0.6)


@pytest.mark.slow
def test_dear_but_slow():
    burn(0.6)


def test_cheap():
    pass
"""


def test_a_test_over_the_cpu_limit_fails_with_its_name_unless_slow(tmp_path: Path) -> None:
    (tmp_path / "test_burn.py").write_text(BURN)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    argv = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "test_burn.py"]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [*argv, "--cpu-limit=0.3", "--cpu-durations=2"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    [failed] = [line for line in lines if line.startswith("ERROR ") or line.startswith("FAILED ")]
    assert failed.startswith("ERROR test_burn.py::test_dear - ") or failed.startswith("FAILED test_burn.py::test_dear")
    assert "test_burn.py::test_dear used " in done.stdout and "over --cpu-limit=0.3" in done.stdout
    assert "test_dear_but_slow used" not in done.stdout
    listed = lines[lines.index(next(line for line in lines if "2 tests that used most CPU" in line)) + 1 :][:2]
    assert sorted(line.split()[-1] for line in listed) == [
        "test_burn.py::test_dear",
        "test_burn.py::test_dear_but_slow",
    ]
    unguarded = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert unguarded.returncode == 0 and "3 passed" in unguarded.stdout, unguarded.stdout + unguarded.stderr

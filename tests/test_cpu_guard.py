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
    burn(0.25)


@pytest.mark.slow
def test_dear_but_slow():
    burn(0.25)


def test_cheap():
    pass
"""


def test_a_test_over_the_cpu_limit_fails_with_its_name_unless_slow(tmp_path: Path) -> None:
    (tmp_path / "test_burn.py").write_text(BURN)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    argv = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "test_burn.py"]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    runs = [  # side by side: each burns its own CPU
        subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for command in ([*argv, "--cpu-limit=0.1", "--cpu-durations=3"], argv)
    ]
    (stdout, stderr), (unguarded_out, unguarded_err) = (run.communicate(timeout=300) for run in runs)
    assert runs[0].returncode == 1, stdout + stderr
    lines = stdout.splitlines()
    [failed] = [line for line in lines if line.startswith("ERROR ") or line.startswith("FAILED ")]
    assert failed.startswith("ERROR test_burn.py::test_dear - ") or failed.startswith("FAILED test_burn.py::test_dear")
    assert "test_burn.py::test_dear used " in stdout and "over --cpu-limit=0.1" in stdout
    assert "test_dear_but_slow used" not in stdout
    listed = lines[lines.index(next(line for line in lines if "3 tests that used most CPU" in line)) + 1 :][:3]
    names = [line.split()[-1] for line in listed]
    assert sorted(names[:2]) == ["test_burn.py::test_dear", "test_burn.py::test_dear_but_slow"], stdout
    assert names[2] == "test_burn.py::test_cheap", stdout  # under the limit: it passed
    assert runs[1].returncode == 0 and "3 passed" in unguarded_out, unguarded_out + unguarded_err

"""The debugger tool driven as the agent drives it: separate `debugger` processes against one live session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llm_ide.tools.config import TOOLS_DIR

DEBUGGER_SRC = TOOLS_DIR / "packages" / "debugger" / "src"
HIDDEN = r"  \[\.\.\. \d+ frame\(s\) of pdb/pytest/unittest internals \.\.\.\]\n"

APP = """\
def compute(values):
    total = 0
    for value in values:
        total += value * 2
    return total


def main():
    data = [1, 2, 3]
    print("starting")
    result = compute(data)
    print("result", result)


main()
"""
CALC = """\
def double_all(values):
    out = []
    for v in values:
        out.append(v * 2)
    return out
"""
TESTS = """\
from calc import double_all


def test_double():
    \"\"\"Doubles.\"\"\"
    values = [1, 2]
    result = double_all(values)
    assert result == [2, 4]


class TestMore:
    def test_broken(self):
        values = [3]
        result = double_all(values)
        assert result == [7]
"""

Debugger = Callable[..., tuple[str, int]]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "app.py").write_text(APP)
    (folder / "calc.py").write_text(CALC)
    (folder / "tests" / "test_calc.py").write_text(TESTS)
    return folder


@pytest.fixture
def debugger(project: Path, tmp_path: Path) -> Iterator[Debugger]:
    env = {
        **os.environ,
        "PYTHONPATH": str(DEBUGGER_SRC),
        "DEBUGGER_STATE_DIR": str(tmp_path / "state"),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # the target pytest: no host plugins, a faster start
    }

    def run(*args: str) -> tuple[str, int]:
        """`debugger ARGS` (or `debugger-commands ...` as `debugger commands ...`): its output and exit status."""
        done = subprocess.run(
            [sys.executable, "-m", "llm_ide_debugger", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        return done.stdout + done.stderr, done.returncode

    yield run
    run("stop")


def started(output: str, target: str) -> str:
    """The start output without its first line, after checking that line."""
    first, _, rest = output.partition("\n")
    assert re.fullmatch(rf"\[debugger\] Started {re.escape(target)} \(pid \d+\)\.", first), first
    return rest


def test_script_session_keeps_state_across_calls(debugger: Debugger, project: Path) -> None:
    output, status = debugger("start", "app.py")
    assert (started(output, "app.py"), status) == ("> app.py:1 in <module>()\n-> def compute(values):\n", 0)

    assert debugger("commands", "b app.py:11", "c") == (
        f"(Pdb) b app.py:11\nBreakpoint 1 at {project}/app.py:11\n"
        "(Pdb) c\nstarting\n> app.py:11 in main()\n-> result = compute(data)\n",
        0,
    )
    assert debugger("commands", "p data") == ("(Pdb) p data\n[1, 2, 3]\n", 0)
    assert debugger("commands", "s") == ("(Pdb) s\n--Call--\n> app.py:1 in compute()\n-> def compute(values):\n", 0)
    assert debugger("commands", "n", "n", "n", "p total, value") == (
        "(Pdb) n\n> app.py:2 in compute()\n-> total = 0\n"
        "(Pdb) n\n> app.py:3 in compute()\n-> for value in values:\n"
        "(Pdb) n\n> app.py:4 in compute()\n-> total += value * 2\n"
        "(Pdb) p total, value\n(0, 1)\n",
        0,
    )
    output, status = debugger("commands", "where")
    assert status == 0
    assert re.fullmatch(
        r"\(Pdb\) where\n" + HIDDEN + r"  app\.py:15 in <module>\(\)\n-> main\(\)\n"
        r"  app\.py:11 in main\(\)\n-> result = compute\(data\)\n"
        r"> app\.py:4 in compute\(\)\n-> total \+= value \* 2\n",
        output,
    ), output
    # state set in one call is seen by the next: 100 + 2 + 4 + 6
    assert debugger("commands", "!total = 100", "cl", "c") == (
        f"(Pdb) !total = 100\n(Pdb) cl\nDeleted breakpoint 1 at {project}/app.py:11\n"
        "(Pdb) c\nresult 112\n[debugger] The program finished (exit status 0); the session has ended.\n",
        0,
    )
    output, status = debugger("commands", "p 1")
    assert (output.startswith("[debugger] No debugging session is running."), status) == (True, 1)


def test_pytest_node_id_stops_at_the_test_and_steps_into_the_code(debugger: Debugger, project: Path) -> None:
    output, status = debugger("start", "tests/test_calc.py::test_double")
    assert status == 0
    assert started(output, "tests/test_calc.py::test_double").endswith(
        "collected 1 item\n\ntests/test_calc.py > tests/test_calc.py:6 in test_double()\n-> values = [1, 2]\n"
    )
    assert debugger("commands", "b calc.py:4", "c", "p v, out") == (
        f"(Pdb) b calc.py:4\nBreakpoint 2 at {project}/calc.py:4\n"
        "(Pdb) c\n> calc.py:4 in double_all()\n-> out.append(v * 2)\n(Pdb) p v, out\n(1, [])\n",
        0,
    )
    output, _ = debugger("commands", "where")
    assert re.fullmatch(
        r"\(Pdb\) where\n" + HIDDEN + r"  tests/test_calc\.py:7 in test_double\(\)\n-> result = double_all\(values\)\n"
        r"> calc\.py:4 in double_all\(\)\n-> out\.append\(v \* 2\)\n",
        output,
    ), output
    output, _ = debugger("commands", "cl", "c")
    assert output.startswith(f"(Pdb) cl\nDeleted breakpoint 2 at {project}/calc.py:4\n(Pdb) c\n")
    assert " 1 passed in " in output
    assert output.endswith("[debugger] The program exited with status 0; the session has ended.\n")


def test_failing_test_enters_post_mortem(debugger: Debugger) -> None:
    output, _ = debugger("start", "tests/test_calc.py::TestMore::test_broken")
    assert output.endswith("> tests/test_calc.py:13 in test_broken()\n-> values = [3]\n")
    output, _ = debugger("commands", "c", "p result", "up")
    assert output.startswith("(Pdb) c\nF\nAssertionError: assert [6] == [7]\n")
    assert (
        "[debugger] tests/test_calc.py::TestMore::test_broken failed in call: post-mortem debugging at the frame that"
        " raised (`where`, `up`, `down`, `p EXPR`); `c` lets the program go on.\n"
        "> tests/test_calc.py:15 in test_broken()\n-> assert result == [7]\n(Pdb) p result\n[6]\n(Pdb) up\n"
    ) in output
    output, _ = debugger("commands", "c")
    assert "FAILED tests/test_calc.py::TestMore::test_broken - assert [6] == [7]" in output
    assert output.endswith("[debugger] The program exited with status 1; the session has ended.\n")


def test_uncaught_exception_shows_the_traceback_and_debugs_post_mortem(debugger: Debugger, project: Path) -> None:
    (project / "boom.py").write_text(
        textwrap.dedent(
            """\
            def divide(a, b):
                return a / b


            for b in (2, 0):
                print(divide(10, b))
            """
        )
    )
    debugger("start", "boom.py")
    output, status = debugger("commands", "c", "p a, b", "up", "p b")
    assert status == 0
    assert output == (
        "(Pdb) c\n5.0\nTraceback (most recent call last):\n"
        f'  File "{project}/boom.py", line 6, in <module>\n    print(divide(10, b))\n'
        + ("          ^^^^^^^^^^^^^\n" if sys.version_info >= (3, 11) else "")
        + f'  File "{project}/boom.py", line 2, in divide\n    return a / b\n'
        + ("           ~~^~~\n" if sys.version_info >= (3, 11) else "")
        + "ZeroDivisionError: division by zero\n"
        "[debugger] The program raised ZeroDivisionError: post-mortem debugging at the frame that raised (`where`,"
        " `up`, `down`, `p EXPR`); `c` lets the program go on.\n"
        "> boom.py:2 in divide()\n-> return a / b\n(Pdb) p a, b\n(10, 0)\n"
        "(Pdb) up\n> boom.py:6 in <module>()\n-> print(divide(10, b))\n(Pdb) p b\n0\n"
    )
    assert debugger("commands", "c") == (
        "(Pdb) c\n[debugger] Post-mortem debugging finished; the session has ended.\n",
        0,
    )


def test_exit_status_module_target_and_child_process_output(debugger: Debugger, project: Path) -> None:
    (project / "tool").mkdir()
    (project / "tool" / "__init__.py").write_text("")
    (project / "tool" / "__main__.py").write_text(
        "import os\nimport sys\n\nos.system('echo from a child process')\nprint('args', sys.argv[1:])\nsys.exit(3)\n"
    )
    output, _ = debugger("start", "-m", "tool", "--flag", "x")
    assert started(output, "-m tool --flag x").startswith("> tool/__main__.py:1 in <module>()\n-> import os\n")
    assert debugger("commands", "c") == (
        "(Pdb) c\nfrom a child process\nargs ['--flag', 'x']\n"
        "[debugger] The program exited with status 3; the session has ended.\n",
        0,
    )


def test_a_command_that_runs_forever_is_interrupted(debugger: Debugger, project: Path) -> None:
    (project / "spin.py").write_text("def spin():\n    n = 0\n    while True:\n        n += 1\n\n\nspin()\n")
    debugger("start", "spin.py")
    output, status = debugger("commands", "--timeout", "1", "c", "p n > 0")
    assert status == 0
    assert re.fullmatch(
        r"\(Pdb\) c\nProgram interrupted\. \(Use 'cont' to resume\)\.\n> spin\.py:[34] in spin\(\)\n-> .*\n"
        r"\[debugger\] `c` did not stop within 1s: the program was interrupted where it was \(above\)\.\n"
        r"\(Pdb\) p n > 0\nTrue\n",
        output,
    ), output
    output, status = debugger("status")
    assert status == 0
    assert re.fullmatch(
        r"\[debugger\] Session of spin\.py \(pid \d+\): paused\n> spin\.py:[34] in spin\(\)\n-> .*\n", output
    )
    output, status = debugger("stop")
    assert status == 0
    assert re.fullmatch(r"\[debugger\] Stopped the session of spin\.py \(pid \d+\)\.\n", output), output
    assert debugger("stop") == ("[debugger] No debugging session is running.\n", 0)


def test_no_session_and_bad_targets(debugger: Debugger) -> None:
    output, status = debugger("commands", "where")
    assert (output, status) == (
        "[debugger] No debugging session is running. Start one with `debugger start TARGET` (a script path with its"
        " arguments, a pytest node id such as tests/test_x.py::test_y, or -m module).\n",
        1,
    )
    assert debugger("start", "missing.py") == ("[debugger] no such script: missing.py\n", 2)
    assert debugger("start") == (
        "[debugger] no target: give a script path, `-m module`, or a pytest node id (tests/test_x.py::test_y)\n",
        2,
    )


def test_starting_again_replaces_the_session(debugger: Debugger) -> None:
    debugger("start", "app.py")
    debugger("commands", "b compute", "c")
    output, _ = debugger("start", "app.py")
    lines = output.splitlines()
    assert lines[0] == "[debugger] Stopped the previous session (app.py)."
    assert lines[2:] == ["> app.py:1 in <module>()", "-> def compute(values):"]
    assert debugger("commands", "p 'fresh'", "c") == (
        "(Pdb) p 'fresh'\n'fresh'\n(Pdb) c\nstarting\nresult 12\n"
        "[debugger] The program finished (exit status 0); the session has ended.\n",
        0,
    )


def test_a_start_that_does_not_reach_the_test_in_time_is_interrupted(debugger: Debugger, project: Path) -> None:
    (project / "tests" / "test_slow.py").write_text(
        "import time\n\n\ndef wait():\n    for _ in range(600):\n        time.sleep(0.05)\n\n\nwait()\n\n\n"
        "def test_never_reached_in_time():\n    assert True\n"
    )
    output, status = debugger("start", "--timeout", "1", "tests/test_slow.py::test_never_reached_in_time")
    assert status == 0
    assert re.search(
        r"Program interrupted\. \(Use 'cont' to resume\)\.\n> tests/test_slow\.py:[56] in wait\(\)\n-> .*\n"
        r"\[debugger\] the program did not stop within 1s: the program was interrupted where it was \(above\)\.\n$",
        output,
    ), output
    assert debugger("commands", "up", "p wait.__name__") == (
        "(Pdb) up\n> tests/test_slow.py:9 in <module>()\n-> wait()\n(Pdb) p wait.__name__\n'wait'\n",
        0,
    )

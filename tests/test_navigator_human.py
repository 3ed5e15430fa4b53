"""A human navigator: LangGraph `interrupt()` in the permission and review nodes, answered from Python (the run returns
the pending question, a resume call carries the answer) or on a terminal (`llm-ide run --navigator human`, driven
here through a pseudo-terminal)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from agent_script import BUGGY_FILES, TEST_COMMAND, reflect, single_call, write_script
from agent_script import CART_FIX as FIX
from agent_script import CART_SUBMIT as SUBMIT
from agent_script import CART_TESTS as TESTS
from conftest import git, make_git_repo
from navigator_support import CHEAT

from llm_ide.config import load_config
from llm_ide.errors import UsageError
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

DRIVER = [CHEAT, FIX, reflect(False, "fixed"), TESTS, reflect(False, "tests pass"), SUBMIT]


def test_python_api_returns_the_pending_question_and_resumes_with_the_answer(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "driver.yaml", DRIVER)
    settings = load_config("default", environment={"tools": []}, navigator={"mode": "human", "review_on_submit": True})

    def step(resume: object = None):
        return run_task(
            "Cart.total ignores quantities.",
            model=model,
            settings=settings,
            output_dir=tmp_path / "out",
            run_id="human",
            repo=repo,
            resume=resume,
        )

    first = step()
    assert first.exit_status == "awaiting_navigator"
    question = first.interrupt
    assert question["kind"] == "permission" and question["timeout"] == 15.0
    assert question["action"].startswith('edit {"path": "tests/test_cart.py"')
    assert (
        "-        self.assertEqual(cart.total(), 16.0)\n+        self.assertEqual(cart.total(), 11.5)"
        in (question["diff"])
    )
    assert question["thought"].startswith("Make the test expect")

    for wrong in ({"approved": "false", "reason": "NO"}, {"approve": True}, "yes"):  # approved once, or denied
        asked = step(wrong)  # the same question again, saying why
        assert asked.exit_status == "awaiting_navigator" and asked.interrupt == {**question, "refused": (
            "the answer to the navigator's permission question takes {approved: true or false, reason: text, "
            f"timeout: true or false}}, not {wrong if isinstance(wrong, dict) else {'approved': wrong}!r}"
        )}  # fmt: skip
    assert "16.0" in (repo / "tests/test_cart.py").read_text()  # nothing applied
    second = step({"approved": False, "reason": "The test is right; fix the code."})
    assert second.exit_status == "awaiting_navigator"
    assert second.interrupt["action"].startswith('edit {"path": "shop/cart.py"')
    assert "16.0" in (repo / "tests/test_cart.py").read_text()

    third = step({"approved": True, "reason": "That is the bug."})
    assert third.interrupt["action"] == f"bash {TEST_COMMAND}"  # a command is shown bare
    fourth = step({"approved": True})
    assert fourth.interrupt["kind"] == "review"
    assert "+            total += price * quantity" in fourth.interrupt["patch"]
    done = step({"passed": True, "comment": "Good."})

    assert done.exit_status == "submitted" and done.interrupt is None
    assert "+            total += price * quantity" in done.submission
    traj = load_trajectory(done.trajectory_path)
    ops = traj["operations"]
    assert [(o["id"], o["parent_id"], o["action_type"]) for o in ops] == [
        (0, None, "edit"), (1, None, "edit"), (2, 1, "bash"), (3, 2, "submit")
    ]  # fmt: skip
    assert ops[0]["denied"] == {"reason": "The test is right; fix the code.", "by": "human"}
    record = traj["info"]["navigator"]
    decisions = [(d["approved"], d["by"]) for d in record["decisions"]]
    assert decisions == [(False, "human"), (True, "human"), (True, "human")]
    assert record["reviews"][0] | {"cost": 0} == {  # operation 3: step 4
        "step": 4, "action": "submit", "round": 1, "passed": True, "comment": "Good.", "by": "human", "cost": 0
    }  # fmt: skip
    assert record["usage"]["api_calls"] == 0 and record["turns"] == 4
    assert traj["info"]["model_stats"]["api_calls"] == len(single_call(DRIVER))  # one call per step


class Terminal:
    """A child process on a pseudo-terminal: what it printed, waited for by pattern; lines typed into it."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
        self.process = subprocess.Popen(args, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env)
        os.close(slave)
        self.output = ""

    def expect(self, pattern: str, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds  # a failsafe: the assertion is on what is printed
        start = len(self.output)
        while not re.search(pattern, self.output[start:]):
            assert time.monotonic() < deadline, f"{pattern!r} never printed:\n{self.output[-3000:]}"
            ready, _, _ = select.select([self.master], [], [], 1)
            if ready:
                try:
                    self.output += os.read(self.master, 65536).decode("utf-8", errors="replace")
                except OSError:  # the child closed the terminal
                    assert re.search(pattern, self.output[start:]), f"{pattern!r} never printed:\n{self.output}"
                    return

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def finish(self) -> int:
        self.expect(r"trajectory: ")
        return self.process.wait(timeout=60)


def test_an_answer_to_a_run_that_is_not_saved_starts_nothing(tmp_path: Path) -> None:
    """`resume=` with a mistyped run id: one line, no new run started in its place (it asked its model, then the
    same first question again, the answer dropped)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "driver.yaml", DRIVER)
    settings = load_config("default", environment={"tools": []}, navigator={"mode": "human"})
    with pytest.raises(UsageError, match=r"^run hmuan: no saved run in .*out awaits the answer given \(resume\)$"):
        run_task("Cart.total ignores quantities.", model=model, settings=settings, output_dir=tmp_path / "out",
                 run_id="hmuan", repo=repo, resume={"approved": True})  # fmt: skip
    assert not list((tmp_path / "out").glob("*.traj.json")) and git(repo, "status", "--porcelain") == ""


def test_cli_human_navigator_on_a_terminal(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "driver.yaml", [CHEAT, FIX, reflect(False, "fixed"), TESTS, SUBMIT])
    config = tmp_path / "navigator.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}, "navigator": {"permission_timeout": 1}}))
    args = [sys.executable, "-c", "from llm_ide.cli import app; app()", "run", "--repo", str(repo), "--model", model]
    args += ["--task", "Cart.total ignores quantities.", "--config", str(config), "--navigator", "human"]
    args += ["--output", str(tmp_path / "out"), "--thread-id", "tty"]
    terminal = Terminal(args, tmp_path)

    terminal.expect(r"approve\? \[y/n\]")
    assert "+        self.assertEqual(cart.total(), 11.5)" in terminal.output  # the diff is shown
    terminal.type("n")
    terminal.expect(r"reason \(Enter: none\): ")
    terminal.type("The test is right; fix the code.")
    terminal.expect(r"approve\? \[y/n\]")
    assert "+            total += price * quantity" in terminal.output.rsplit("navigator: permission", 1)[1]
    terminal.type("y")
    terminal.expect(r"reason \(Enter: none\): ")
    terminal.type("")
    terminal.expect(r"approve\? \[y/n\]")  # the tests: left unanswered, timeout_decision (deny) applies
    terminal.expect("no answer in time")
    assert terminal.finish() == 0
    assert "submitted" in terminal.output

    traj = load_trajectory(tmp_path / "out" / "tty.traj.json")
    decisions = traj["info"]["navigator"]["decisions"]
    assert [(d["approved"], d["by"]) for d in decisions] == [(False, "human"), (True, "human"), (False, "timeout")]
    assert decisions[0]["reason"] == "The test is right; fix the code."
    assert "applied timeout_decision: deny" in decisions[2]["reason"]
    assert [o["action_type"] for o in traj["operations"]] == ["edit", "edit", "bash", "submit"]
    assert traj["operations"][2]["denied"]["by"] == "timeout"

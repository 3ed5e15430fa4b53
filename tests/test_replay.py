"""`llm-ide replay`: a real shared trajectory replayed end to end (the same tree as its submission, the bench's
figures), bad input refused in one line, a failing command recorded, the environment's changes, an interrupted replay
and the loopback endpoint's failed requests (the metrics on hand-made runs: test_replay_metrics.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import require_bwrap
from replay_support import INSTANCE, PATH, STEPS, cli, fingerprint, git, make_repo, mini_trajectory, report_of

from llm_ide.environments.bwrap import bwrap_path
from llm_ide.replay.endpoint import LoopbackEndpoint
from llm_ide.replay.formats import load
from llm_ide.replay.model import AGENTS, HISTORY
from llm_ide.replay.tree import environment_changes, tracked_sections

ROOT = Path(__file__).resolve().parents[1]


def test_a_failing_command_is_recorded_and_the_replay_goes_on(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [
        ("Try the module.", "python3 -c 'import module_missing_here_xyz'", 0, "ok\n"),
        ("Edit it anyway.", "sed -i 's/alpha_value = 1/alpha_value = 3/' m.py", 0, ""),
    ]
    trajectory = mini_trajectory(tmp_path / "t.traj.json", steps)
    done = cli("replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(tmp_path / "out")
    assert report.differing_returncodes == [1]
    assert (report.steps[0].returncode, report.steps[0].original_returncode) == (1, 0)
    assert report.steps[1].edited == ["m.py"] and report.exit_status == "submitted" and len(report.steps) == 3
    assert "1 replayed commands ended with another return code than in the original (steps 1)" in done.stdout
    operations = json.loads(Path(report.run_trajectory).read_text())["operations"]
    assert "ModuleNotFoundError" in operations[0]["observation"]
    # full history on the replay's outputs: the traceback where the original's request held "ok", rendered alike
    grown = len(f"<returncode>1</returncode>\n<output>\n{operations[0]['observation']}\n</output>") - len(
        "<returncode>0</returncode>\n<output>\nok\n</output>"
    )
    original, history = ([(s.agents[a].raw, s.agents[a].cached) for s in report.steps] for a in ("original", HISTORY))
    assert history == [
        original[0],
        (original[1][0] + grown, original[1][1]),
        (original[2][0] + grown, original[2][1] + grown),
    ]
    assert report.bill_ratio(None, HISTORY) < report.bill_ratio() and grown > 0
    assert "bill of full history on the replay's outputs" in done.stdout


def test_files_the_original_found_changed_are_changed_before_the_first_step(tmp_path: Path) -> None:
    """SWE-bench's environment pins a dependency in setup.py before the agent starts: the submission holds that
    change though no command made it. The replay starts from it, so the commands print what they printed then and
    the tree ends as submitted."""
    repo = make_repo(tmp_path / "repo")
    (repo / "setup.py").write_text("install_requires = ['Jinja2']\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--amend", "-m", "base")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    (work / "setup.py").write_text("install_requires = ['Jinja2<3.0']\n")
    steps = [
        ("Which Jinja2?", "cat setup.py", 0, "install_requires = ['Jinja2<3.0']\n"),
        ("Raise it.", "sed -i 's/alpha_value = 1/alpha_value = 10/' m.py", 0, ""),
    ]
    subprocess.run(steps[1][1], shell=True, cwd=work, check=True)
    trajectory = mini_trajectory(tmp_path / "t.traj.json", steps, git(work, "diff"))
    done = cli("replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(tmp_path / "out")
    assert (report.same_as_submission, report.environment_changes) == (True, ["setup.py"])
    assert [step.edited for step in report.steps] == [[], ["m.py"], []]  # the pin is no edit of a step
    operations = json.loads(Path(report.run_trajectory).read_text())["operations"]
    assert operations[0]["observation"].strip() == "install_requires = ['Jinja2<3.0']"
    assert (
        "as the original's environment had them (its submission changes them, no command of it writes them): "
        "setup.py" in " ".join(done.stdout.split())
    )


@pytest.mark.parametrize(
    ("instance", "extra", "expected"),
    [
        ("sphinx-doc__sphinx-8120", [], {"setup.py", "tox.ini"}),  # `grep "Babel" setup.py` only reads it
        ("sphinx-doc__sphinx-8120", ["sed -i 's/pytest/pytest -rA/' tox.ini"], {"setup.py"}),
        ("astropy__astropy-13453", ["cat pyproject.toml | head"], {"pyproject.toml"}),
        ("psf__requests-1766", [], set()),
    ],
)
def test_the_environment_s_changes_are_those_no_command_could_write(
    shared_dir: Path, instance: str, extra: list[str], expected: set[str]
) -> None:
    trajectory = load(shared_dir / "data" / "trajectories" / "mini-swe-agent" / f"{instance}.traj.json")
    commands = [str(step.params.get("command") or "") for step in trajectory.steps] + extra
    tracked = set(
        tracked_sections(
            trajectory.submission,
            {
                "setup.py",
                "tox.ini",
                "pyproject.toml",
                "requests/auth.py",
                "sphinx/application.py",
                "astropy/io/ascii/html.py",
            },
        )
    )
    assert set(environment_changes(trajectory.submission, tracked, commands)) == expected


def test_the_report_names_the_python3_the_commands_found(tmp_path: Path) -> None:
    """What a replayed command prints depends on the `python3` it finds on the caller's PATH and what it has installed
    (a pytest plugin changes a failing pytest's traceback): the report names it, as the command itself saw it, with
    its distributions' count and digest, and says so."""
    repo = make_repo(tmp_path / "repo")
    which = "python3 -c 'import platform, sys; print(platform.python_version(), sys.executable)'"
    trajectory = mini_trajectory(tmp_path / "t.traj.json", [("Which Python?", which, 0, "3.9.0 /usr/bin/python3\n")])
    done = cli("replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(tmp_path / "out")
    version, executable = json.loads(Path(report.run_trajectory).read_text())["operations"][0]["observation"].split()
    named = rf"{re.escape(version)} at {re.escape(executable)} \((\d+) distributions, [0-9a-f]{{12}}\)"
    found = re.fullmatch(named, report.commands_python)
    assert found and int(found[1]) > 10 and executable == shutil.which("python3")
    assert f"the commands' python3: {report.commands_python} (what they print depends on it)" in done.stdout


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_the_commands_find_the_repository_at_testbed(sandbox: str, tmp_path: Path) -> None:
    """mini-swe-agent's commands ran in /testbed: bubblewrap shows the checkout there (tracebacks read as they did);
    without it the path in the commands is the checkout's."""
    if sandbox == "bwrap":
        require_bwrap()
    repo = make_repo(tmp_path / "repo")
    steps = [("Look.", "grep -n alpha_value /testbed/m.py && cd /testbed && pwd", 0, "15:alpha_value = 1\n/testbed\n")]
    trajectory = mini_trajectory(tmp_path / "t.traj.json", steps)
    (tmp_path / "c.yaml").write_text(f"environment: {{sandbox: {sandbox}}}\n")
    args = ["--repo", str(repo), "--out", str(tmp_path / "out"), "--config", str(tmp_path / "c.yaml")]
    args += [] if sandbox == "bwrap" else ["--unsandboxed"]  # another's commands, as the user: said explicitly
    assert cli("replay", str(trajectory), *args, cwd=tmp_path).returncode == 0
    report = report_of(tmp_path / "out")
    assert (report.mounted_at, report.workdir_rewritten) == (
        ("/testbed", False) if sandbox == "bwrap" else (None, True)
    )
    observation = json.loads(Path(report.run_trajectory).read_text())["operations"][0]["observation"]
    assert observation.startswith("15:alpha_value = 1\n") and report.steps[0].returncode == 0
    assert observation.endswith("/testbed" if sandbox == "bwrap" else "/repo")
    assert report.diverged == ""


def test_an_interrupted_replay_says_so_and_the_same_command_replays_it_again(tmp_path: Path) -> None:
    """Ctrl-C while a replayed command runs: one message (the steps done, the command again), exit 130, no report;
    the same command then replays it from the start (its unfinished run/ folder is its own)."""
    go = tmp_path / "go"  # the first run's command waits for it (cut by the Ctrl-C), the second's finds it
    waiting = [("Wait a little.", f"test -e {go} || sleep 300", 0, ""), *STEPS[3:]]
    trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", [STEPS[0], *waiting])
    repo, out = make_repo(tmp_path / "repo"), tmp_path / "out"
    args = ["replay", str(trajectory), "--repo", str(repo), "--out", str(out)]
    args += [] if bwrap_path() else ["--unsandboxed"]
    environ = {**os.environ, "COLUMNS": "200", "PATH": PATH}
    process = subprocess.Popen([sys.executable, "-m", "llm_ide", *args], cwd=tmp_path, env=environ, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    wire = out / "wire.jsonl"
    _, stderr = interrupt_when_lines(wire, 2, process)  # the second request: its command is about to run
    assert process.returncode == 130
    assert stderr.endswith(  # after the warning a machine without bubblewrap gives (--unsandboxed)
        f"interrupted after 1 of {len(waiting) + 2} steps: no report written (the run so far: {out / 'run'}); the "
        f"same command replays it from the start:\nllm-ide {shlex.join(args)}\n"
    )
    assert stderr.count("\n") == 2 + (bwrap_path() is None), stderr
    assert not (out / "replay.json").exists()
    go.touch()
    again = cli(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert report_of(out).exit_status == "submitted"


def interrupt_when_lines(path: Path, lines: int, process: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C to `process` once `path` holds `lines` lines."""
    deadline = time.monotonic() + 120
    while not path.exists() or path.read_text().count("\n") < lines:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    return process.communicate(timeout=120)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unknown format", "not a trajectory of a known format"),
        ("no commit", "the repository has no commit 0123456789abcdef"),
        ("bundle without the branch", "the bundle has no branch demo__demo-1"),
        ("clone without the branch", "the repository has no branch demo__demo-1"),
        ("a readable path not there", "environment.readable: /nope/llm-ide: no such file or folder"),
        ("a writable path not there", "environment.writable: /nope/llm-ide: no such file or folder (make it first)"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_written(case: str, expected: str, tmp_path: Path) -> None:
    trajectory = mini_trajectory(tmp_path / "t.traj.json", STEPS[:1])
    repo = make_repo(tmp_path / "repo", branch="other" if "without" in case else INSTANCE)
    args = ["--repo", str(repo)]
    if case == "unknown format":
        trajectory.write_text(json.dumps({"messages": [], "info": {}}))
    elif case == "no commit":
        args += ["--commit", "0123456789abcdef"]
    elif case == "bundle without the branch":
        git(repo, "bundle", "create", "-q", str(tmp_path / "repo.bundle"), "other")
        args = ["--repo", str(tmp_path / "repo.bundle")]
    elif "path not there" in case:  # (the replay ran without it, its commands found nothing there, without a word)
        (config := tmp_path / "c.yaml").write_text(json.dumps({"environment": {case.split()[1]: ["/nope/llm-ide"]}}))
        args += ["-c", str(config)]
    source = Path(args[1])
    before = fingerprint(source)
    done = cli("replay", str(trajectory), *args, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and expected in done.stderr and done.stderr.startswith("error:")
    assert fingerprint(source) == before
    assert not (tmp_path / "out" / "replay.json").exists()


@pytest.mark.slow
def test_a_real_trajectory_replays_to_its_submission_with_the_bench_figures(shared_dir: Path, tmp_path: Path) -> None:
    instance = "pylint-dev__pylint-6903"
    trajectory = shared_dir / "data" / "trajectories" / "mini-swe-agent" / f"{instance}.traj.json"
    bundle = shared_dir / "data" / "repos" / "pylint-dev__pylint.bundle"
    before = fingerprint(bundle)
    done = cli("replay", str(trajectory), "--repo", str(bundle), "--out", str(tmp_path / "one"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fingerprint(bundle) == before
    report = report_of(tmp_path / "one")
    assert (report.same_as_submission, report.diverged, len(report.steps)) == (True, "", 16)
    git(tmp_path, "clone", "-q", str(bundle), "base", "-b", instance)
    tracked = set(git(tmp_path / "base", "ls-tree", "-r", "--name-only", "HEAD").split())
    original = json.loads(trajectory.read_text())["info"]["submission"]
    ours = json.loads(Path(report.run_trajectory).read_text())["info"]["submission"]  # llm-ide's own patch
    assert "avail_cpu = int(cpu_shares / 1024) or 1" in ours
    assert tracked_sections(ours, tracked) == tracked_sections(original, tracked) != {}
    script = [sys.executable, str(ROOT / "scripts" / "bench_replay.py"), "--only", instance, "--profile", "gpt"]
    bench = subprocess.run(
        [*script, "--out", str(tmp_path / "b"), "--json", str(tmp_path / "b.json")],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PATH": PATH},
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    benched = report_of(tmp_path / "b" / "default@gpt" / instance)  # the replay's default profile: the same run
    for agent in AGENTS:
        assert benched.totals(agent) == report.totals(agent)
    figures = json.loads((tmp_path / "b.json").read_text())["default@gpt"]
    assert figures["bill_end"] == pytest.approx(report.bill_ratio())
    assert figures["edit_grounding"] == report.totals("llm-ide").pre_image.value
    assert figures["mini_reference_recall"] == report.totals("original").references.value == 1.0
    assert bench.stdout.strip().splitlines()[-1].startswith("RESULT gpt_bill_10=")


@pytest.mark.parametrize("how", ["answer fails", "client leaves"])
def test_the_loopback_endpoint_says_a_failed_request_in_a_log_line_not_a_traceback(
    how: str, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Ctrl-C during a replay's request printed socketserver's traceback (`Exception occurred during processing of
    request from …`) among the replay's own lines."""
    answered = threading.Event()

    def answer(body: dict) -> tuple[int, dict]:
        answered.set()
        if how == "answer fails":
            raise ValueError("no such step")
        raise ConnectionResetError("the client left")

    with LoopbackEndpoint(answer, ["m"]) as endpoint:
        host, port = endpoint.httpd.server_address[:2]
        with socket.create_connection((host, port), timeout=10) as client:
            client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}")
            assert answered.wait(10)
            client.settimeout(10)
            assert client.recv(100) == b""  # the request ended without an answer, the connection closed
    said = [record.getMessage() for record in caplog.records if record.name == "llm_ide.replay"]
    expected = ["the loopback endpoint could not answer a request: ValueError: no such step"]
    assert said == (expected if how == "answer fails" else [])
    assert "Traceback" not in capfd.readouterr().err

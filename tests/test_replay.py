"""`llm-ide replay`: a real shared trajectory replayed end to end (the same tree as its submission, the bench's
figures), bad input refused in one line, a failing command recorded, and the metrics on hand-made runs whose prompts
we know."""

from __future__ import annotations

import hashlib
import json
import os
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
from in_process import invoke

from llm_ide.environments.bwrap import bwrap_path
from llm_ide.replay.endpoint import LoopbackEndpoint
from llm_ide.replay.formats import Request, Trajectory, load
from llm_ide.replay.measure import full_history_calls
from llm_ide.replay.metrics import Text, edit_lines, occurs, references
from llm_ide.replay.model import AGENTS, HISTORY, ReplayReport
from llm_ide.replay.tree import FileChange, environment_changes, tracked_sections

ROOT = Path(__file__).resolve().parents[1]
INSTANCE = "demo__demo-1"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
MODULE = "".join(
    "alpha_value = 1\n" if n == 15 else "omega_value = 2\n" if n == 25 else f"filler_line_{n} = {n}\n"
    for n in range(1, 31)
)


PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the replayed commands' python: ours


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    if args[:1] == ("replay",) and bwrap_path() is None and "--unsandboxed" not in args:
        args = (*args, "--unsandboxed")  # no bubblewrap here: the tests' own trajectories, run as the user on purpose
    return invoke(*args, cwd=cwd, env={**os.environ, "COLUMNS": "200", "PATH": PATH})


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    return subprocess.run(["git", *identity, *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def make_repo(path: Path, branch: str = INSTANCE) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", branch)
    (path / "m.py").write_text(MODULE)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


OBSERVATION = "<returncode>{{ output.returncode }}</returncode>\n<output>\n{{ output.output }}</output>"


def mini_trajectory(path: Path, steps: list[tuple[str, str, int, str]], submission: str = "") -> Path:
    """A mini-swe-agent-1 trajectory: each step (thought, command, return code, output), then the submit."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer shell."},
        {"role": "user", "content": "<pr_description>\nConsider the following PR description:\nRaise the values.\n"
         "</pr_description>\n<instructions>Fix it; submit with COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT.</instructions>"},
    ]  # fmt: skip
    for thought, command, returncode, output in [*steps, ("Done. I submit.", SUBMIT, 0, submission)]:
        messages.append({"role": "assistant", "content": f"THOUGHT: {thought}\n\n```bash\n{command}\n```"})
        text = (
            submission if command == SUBMIT else f"<returncode>{returncode}</returncode>\n<output>\n{output}</output>"
        )
        messages.append({"role": "user", "content": text})
    config = {"environment": {"timeout": 60}, "agent": {"action_observation_template": OBSERVATION}}
    info = {"exit_status": "Submitted", "submission": submission, "config": config}
    data = {"trajectory_format": "mini-swe-agent-1", "instance_id": INSTANCE, "info": info, "messages": messages}
    path.write_text(json.dumps(data))
    return path


def fingerprint(path: Path) -> dict[str, str]:
    """Every file under `path` (or `path` itself) with its content's hash and mtime: what a write would change."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(f): f"{hashlib.sha256(f.read_bytes()).hexdigest()} {f.stat().st_mtime_ns}" for f in files}


def report_of(out: Path) -> ReplayReport:
    return ReplayReport.model_validate_json((out / "replay.json").read_text())


STEPS = [
    ("Where is alpha_value set?", "grep -n alpha_value m.py", 0, "15:alpha_value = 1\n"),
    ("Line 15 sets it: raise it.", "sed -i 's/alpha_value = 1/alpha_value = 10/' m.py", 0, ""),
    ("Raise omega_value too.", "sed -i 's/omega_value = 2/omega_value = 20/' m.py", 0, ""),
    ("Look at lines 15 and 16.", "sed -n '15,16p' m.py", 0, "alpha_value = 10\nfiller_line_16 = 16\n"),
    ("Check a name of my own.", "python3 -c \"print('invented_token_xyz')\"", 0, "invented_token_xyz\n"),
]


@pytest.fixture
def demo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository and a trajectory whose submission is what its two edits make of it."""
    repo = make_repo(tmp_path / "repo")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    for _, command, _, _ in STEPS[1:3]:
        subprocess.run(command, shell=True, cwd=work, check=True)
    return repo, mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", STEPS, git(work, "diff"))


def test_a_hand_made_run_measures_what_each_prompt_held(demo: tuple[Path, Path], tmp_path: Path) -> None:
    repo, trajectory = demo
    before = fingerprint(repo)
    done = cli("replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "out"), "--html", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fingerprint(repo) == before  # the replay worked in its own checkout
    report = report_of(tmp_path / "out")
    assert (report.exit_status, report.same_as_submission, report.diverged) == ("submitted", True, "")
    assert [step.action for step in report.steps][-1] == "submit" and len(report.steps) == 6
    # step 2: the grep showed the line sed replaced; step 3: nobody showed omega_value's line
    assert report.steps[1].edited == ["m.py"] == report.steps[2].edited
    for agent in AGENTS:
        second, third = report.steps[1].agents[agent], report.steps[2].agents[agent]
        assert (second.pre_image.present, second.pre_image.total, second.edits_grounded) == (1, 1, 1)
        assert (third.pre_image.present, third.pre_image.total, third.edits_grounded) == (0, 1, 0)
        assert third.context.total == 6 and third.context.present == 0  # lines 22-24 and 26-28, never shown
    missed = {(m.agent, m.step, m.kind, m.what) for m in report.misses}
    assert {(agent, 3, "pre-image", "m.py:25: omega_value = 2") for agent in AGENTS} <= missed
    # step 4: 15 came from the grep's output, 16 from nowhere; step 5: a name the model invented is no reference
    assert report.steps[3].references == ["15"] and report.steps[4].references == []
    assert all(report.steps[3].agents[agent].references.present == 1 for agent in AGENTS)
    assert "omega_value = 2" in done.stdout and "the final tracked files are equal" in done.stdout
    # every replayed output is the original's: full history on them is the original, request for request
    billed = [[(s.agents[a].raw, s.agents[a].cached, s.agents[a].bill) for s in report.steps] for a in AGENTS[1:]]
    assert billed == [[(s.agents[HISTORY].raw, s.agents[HISTORY].cached, s.agents[HISTORY].bill) for s in report.steps]]
    page = (tmp_path / "out" / f"{INSTANCE}.html").read_text()
    assert 'id="replay-misses"' in page and "m.py:25: omega_value = 2" in page
    wire = [json.loads(line) for line in (tmp_path / "out" / "wire.jsonl").read_text().splitlines()]
    assert [(call["step"], call["kind"]) for call in wire[:3]] == [(1, "act"), (2, "act"), (3, "act")]  # single-call
    # the verdict, then the thought whose first sentence is the reflection's summary, then the bare command
    sed = STEPS[1][1]
    assert wire[1]["response"] == f"good\nLine 15 sets it: raise it.\n<bash>{sed}</bash>"
    run = json.loads(Path(report.run_trajectory).read_text())
    assert run["operations"][0]["summary"] == "Line 15 sets it: raise it."
    assert run["operations"][1]["action_params"] == {"command": sed}


def test_the_replay_answers_with_tool_calls_in_tools_format(demo: tuple[Path, Path], tmp_path: Path) -> None:
    """`--action-format tools`: llm-ide's requests carry the actions as tools (the same list in each), the loopback
    answers each act call with the action as a tool call in OpenAI's wire format, the run does what the text format's
    does, and both bills count what was sent (the tools, the calls' arguments) and written."""
    repo, trajectory = demo
    for kind in ("text", "tools"):
        args = ["replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / kind), "--action-format", kind]
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"llm-ide's actions as {kind}" in done.stdout
    text, tools = report_of(tmp_path / "text"), report_of(tmp_path / "tools")
    assert (tools.action_format, tools.exit_status, tools.same_as_submission) == ("tools", "submitted", True)
    assert tools.diverged == "" and text.action_format == "text"
    operations = [json.loads(Path(r.run_trajectory).read_text())["operations"] for r in (text, tools)]
    assert [(o["action_type"], o["action_params"]) for o in operations[0]] == [
        (o["action_type"], o["action_params"]) for o in operations[1]
    ]
    wire = [json.loads(line) for line in (tmp_path / "tools" / "wire.jsonl").read_text().splitlines()]
    listed = {json.dumps(call["request"]["tools"]) for call in wire}
    assert len(listed) == 1 and all(call["raw"] > len(next(iter(listed))) for call in wire)
    sed = STEPS[1][1]
    assert wire[1]["response"] == "good\nLine 15 sets it: raise it."
    assert wire[1]["tool_call"] == {"name": "bash", "arguments": json.dumps({"command": sed})}
    assert wire[-1]["tool_call"] == {"name": "submit", "arguments": "{}"}
    history = wire[2]["request"]["messages"]
    assert history[-3]["tool_calls"][0]["function"]["arguments"] == json.dumps({"command": sed})
    assert history[-2]["role"] == "tool" and history[-1]["role"] == "user"
    assert text.totals("original") == tools.totals("original")
    ours = [r.totals("llm-ide") for r in (text, tools)]
    assert ours[0].calls == ours[1].calls == 6 and ours[0].raw != ours[1].raw and ours[1].output > 0


@pytest.mark.parametrize("flag", [[], ["--action-format", "text"]])
def test_our_own_run_with_tool_calls_replays_in_its_format_or_the_one_asked(
    flag: list[str], demo: tuple[Path, Path], tmp_path: Path
) -> None:
    """A run of ours that acted by tool calls replays as tools without the flag, each reply its own word for word
    (text and call: both sides' outputs equal), and with tags when asked; either way to the same tree."""
    repo, trajectory = demo
    args = ["--repo", str(repo), "-o", str(tmp_path / "a"), "--action-format", "tools"]
    first = cli("replay", str(trajectory), *args, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    ran = report_of(tmp_path / "a").run_trajectory
    done = cli("replay", ran, "--repo", str(repo), "--output", str(tmp_path / "b"), *flag, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(tmp_path / "b")
    assert (report.exit_status, report.same_as_submission, report.diverged) == ("submitted", True, "")
    assert [step.action for step in report.steps] == [step.action for step in report_of(tmp_path / "a").steps]
    wire = [json.loads(line) for line in (tmp_path / "b" / "wire.jsonl").read_text().splitlines()]
    recorded = [
        (c["response"], c.get("tool_calls", [{}])[0].get("arguments"))
        for c in json.loads(Path(ran).read_text())["model_calls"]
    ]
    if flag:
        assert report.action_format == "text" and all("tool_call" not in call for call in wire)
        assert "<bash>" in wire[1]["response"]
    else:
        assert report.action_format == "tools" and "without the tool list" in done.stdout
        assert [(c["response"], c["tool_call"]["arguments"]) for c in wire] == recorded
        assert report.totals("llm-ide").output == report.totals("original").output


RAISED = MODULE.replace("alpha_value = 1\n", "alpha_value = 10\n").replace("omega_value = 2\n", "omega_value = 20\n")
REWRITE = [
    ("Read the whole module.", "cat m.py", 0, MODULE),
    ("Write it anew, both values raised.", f"cat <<'EOF' > m.py\n{RAISED}EOF", 0, ""),
    ("Note it at the end.", "cat <<'EOF' >> m.py\n# values raised\nEOF", 0, ""),
]


def test_a_file_written_whole_replaces_every_line_billed_at_the_profile_s_prices(tmp_path: Path) -> None:
    """`cat > f <<EOF` rewrites f from the model's memory: the edit replaced each of its lines (an append replaced
    none). The replay bills both agents at the profile's prices and gives them to llm-ide's model, which weighs them."""
    repo = make_repo(tmp_path / "repo")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    for _, command, _, _ in REWRITE[1:]:
        subprocess.run(command, shell=True, cwd=work, check=True)
    trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", REWRITE, git(work, "diff"))
    out = tmp_path / "out"
    done = cli("replay", str(trajectory), "--repo", str(repo), "--out", str(out), "--profile", "claude55", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(out)
    assert report.same_as_submission and (report.prices.profile, report.prices.cache_write) == ("claude55", 1.25)
    rewrite, append = report.steps[1], report.steps[2]
    for agent in AGENTS:
        whole = rewrite.agents[agent]
        assert (whole.pre_image.total, whole.pre_image.present, whole.context.total) == (
            30,
            30,
            0,
        )  # the cat showed all
        assert append.agents[agent].pre_image.total == 0 and append.edited == ["m.py"]
        for step in report.steps:
            figures = step.agents[agent]
            assert figures.bill == pytest.approx(
                (figures.raw - figures.cached) * 1.25 + figures.cached * 0.05 + figures.output * 5
            )
    config = json.loads(Path(report.run_trajectory).read_text())["info"]["config"]
    assert config["model"]["prices"]["replay"] == {"input": 1.0, "output": 5.0, "cache_read": 0.05, "cache_write": 1.25}
    assert "claude55: uncached × 1.25" in " ".join(done.stdout.split())  # the totals' title says the prices


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


def test_our_own_trajectory_replays_to_the_same_bill(demo: tuple[Path, Path], tmp_path: Path) -> None:
    """A run of ours replayed on the same checkout asks the same prompts: every figure of both sides is equal."""
    repo, trajectory = demo
    assert (
        cli("replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "a"), cwd=tmp_path).returncode == 0
    )
    first = report_of(tmp_path / "a")
    done = cli("replay", first.run_trajectory, "--repo", str(repo), "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    second = report_of(tmp_path / "b")
    assert second.format == "llm-ide-1" and second.same_as_submission is True
    ours, theirs = second.totals("llm-ide"), second.totals("original")
    assert ours == theirs == first.totals("llm-ide")


def test_our_own_run_with_an_edit_action_replays_word_for_word(tmp_path: Path) -> None:
    """The demo's run (view, run, `edit`, test, submit) replayed on its base: the edited file is not put changed
    before the first step (the edit writes it), the edit applies, and both sides' every figure is equal."""
    demo = ROOT / "llm_ide" / "demo"
    project = tmp_path / "project"
    shutil.copytree(demo / "project", project)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "base")
    base = git(project, "rev-parse", "HEAD").strip()
    config = ["--config", str(demo / "config.yaml")]
    ran = cli("run", "--repo", str(project), "--task-file", str(demo / "task.md"), "--model",
              f"scripted:{demo / 'script.yaml'}", *config, "--output", str(tmp_path / "run"), "--thread-id", "d",
              cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    git(project, "checkout", "-q", ".")
    done = cli("replay", str(tmp_path / "run" / "d.traj.json"), "--repo", str(project), "--commit", base, *config,
               "--out", str(tmp_path / "replay"), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(tmp_path / "replay")
    assert report.environment_changes == [] and report.differing_returncodes == []
    assert [step.action for step in report.steps][2].startswith("edit calc/stats.py")
    assert report.totals("llm-ide") == report.totals("original") and report.same_as_submission is True


def test_an_interrupted_replay_says_so_and_the_same_command_replays_it_again(tmp_path: Path) -> None:
    """Ctrl-C while a replayed command runs: one message (the steps done, the command again), exit 130, no report;
    the same command then replays it from the start (its unfinished run/ folder is its own)."""
    waiting = [("Wait a little.", "sleep 4", 0, ""), *STEPS[3:]]
    trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", [STEPS[0], *waiting])
    repo, out = make_repo(tmp_path / "repo"), tmp_path / "out"
    args = ["replay", str(trajectory), "--repo", str(repo), "--out", str(out)]
    args += [] if bwrap_path() else ["--unsandboxed"]
    environ = {**os.environ, "COLUMNS": "200", "PATH": PATH}
    process = subprocess.Popen([sys.executable, "-m", "llm_ide", *args], cwd=tmp_path, env=environ, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    wire = out / "wire.jsonl"
    _, stderr = interrupt_when_lines(wire, 2, process)  # the second request: `sleep 4` is running
    assert process.returncode == 130
    assert stderr.endswith(  # after the warning a machine without bubblewrap gives (--unsandboxed)
        f"interrupted after 1 of {len(waiting) + 2} steps: no report written (the run so far: {out / 'run'}); the "
        f"same command replays it from the start:\nllm-ide {shlex.join(args)}\n"
    )
    assert stderr.count("\n") == 2 + (bwrap_path() is None), stderr
    assert not (out / "replay.json").exists()
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


@pytest.mark.parametrize(
    ("line", "prompt", "present"),
    [
        ("x = 1", "  445\t    x = 1", True),
        ("x = 1", "max = 10", False),
        ("return a  +  b", "    return a + b  # sum", True),
        ("def run(self):", "def run(self, other):", False),
    ],
)
def test_a_line_is_present_inside_a_line_of_the_prompt(line: str, prompt: str, present: bool) -> None:
    assert Text(prompt).holds_line(" ".join(line.split())) is present
    assert occurs("abc", "xabc") is False and occurs("abc", "x.abc(") is True


def test_edits_references_and_matching_on_small_cases() -> None:
    old = "".join(f"line number {n}\n" for n in range(1, 21))
    new = old.replace("line number 10\n", "line number ten\n").replace("line number 11\n", "")
    edit = edit_lines([FileChange("f.py", old, new)])
    assert [(n, text) for _, n, text in edit.removed] == [(10, "line number 10"), (11, "line number 11")]
    assert [n for _, n, _ in edit.context] == [7, 8, 9, 12, 13, 14]
    seen = [Text("12:def compute_total(items):\n  File '/testbed/pkg/core.py', line 88\n")] * 2
    command = "sed -n '88,95p' /testbed/pkg/core.py && grep -n compute_total pkg/other.py | invented_name -n 12"
    expected = ["88", "pkg/core.py", "compute_total", "pkg", "12"]  # pkg/other.py: its known parts
    assert references(command, seen, Text("the task mentions nothing")) == expected
    assert references(command, seen, Text("compute_total is in the task")) == ["88", "pkg/core.py", "pkg", "12"]
    diff = "diff --git a/a.py b/a.py\nindex 1..2 100644\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    new_file = (
        "diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0..1\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+z\n"
    )
    assert tracked_sections(diff + new_file, {"a.py"}) == tracked_sections(diff.replace("1..2", "3..4"), {"a.py"})


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


@pytest.mark.parametrize(
    ("template", "shown"),
    [
        ("{{ output.returncode }}: {{ output.output | length }}", "0: 6"),  # the output ended as a shell prints it
        ("{{ ''.__class__ }}{{ output.output }}", "hello\n"),  # sandboxed: no attribute of Python's own
        ("{{ output.returncode + 'x' }}", None),  # a template that fails leaves the side out, the replay goes on
        ("{% for i in range(10**9) %}x{% endfor %}", None),
        ("{{ output", None),
    ],
)
def test_full_history_renders_the_replayed_output_with_the_trajectory_s_own_template(
    template: str, shown: str | None
) -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    messages += [{"role": "assistant", "content": "a"}, {"role": "user", "content": "the original's output"}]
    requests = [Request(1, messages[:2], "a"), Request(2, messages, "b")]
    trajectory = Trajectory(
        "mini-swe-agent-1", "task", [], requests, "", observation_template=template, observed={3: 0}
    )
    calls = full_history_calls(trajectory, [{"returncode": 0, "observation": "hello"}])
    if shown is None:
        assert calls is None
        return
    assert calls is not None and [call.messages for call in calls] == [
        messages[:2],
        [*messages[:3], {"role": "user", "content": shown}],
    ]
    assert [(call.raw, call.cached) for call in calls] == [(5, 0), (6 + len(shown), 5)]


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

"""Reproduction first (issue 25) in the local environment: a given script run on the original code, by `reproduce` and
at submit; agent-written tests validated (and dropped); a hanging reproduction cut at its timeout; a kill during
the writing phase; attempts chosen by execution. Real runs, scripted models."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect, write_script
from attempts_scripts import choice, review, scripts
from conftest import make_git_repo
from in_process import invoke
from reproduction_scripts import (
    FILES,
    HARDCODED,
    REGRESSION,
    REPRO,
    RIGHT,
    TASK,
    WRONG,
    config,
    fix_script,
    repro_in,
    written,
)
from swebench_fixtures import FIX_COMMAND, build_dataset
from swebench_fixtures import script as batch_script

from llm_ide import run_attempts
from llm_ide.errors import UsageError
from llm_ide.inspector.load import load_run
from llm_ide.inspector.page import run_page
from llm_ide.reproduction.script import script
from llm_ide.reproduction.variant import Reproduction
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory
from llm_ide.swebench.batch import BatchOptions, run_swebench
from llm_ide.swebench.dataset import load_dataset

CLI = [sys.executable, "-c", "from llm_ide.cli import app; app()"]


def first_prompt(traj: dict) -> str:
    return next(call["prompt"] for call in traj["model_calls"] if call["kind"] in ("act", "reflect"))


def test_a_given_script_runs_on_the_original_code_by_the_action_and_at_submit(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = write_script(tmp_path / "model.yaml", fix_script(RIGHT))
    no_tools = tmp_path / "c.yaml"
    no_tools.write_text(yaml.safe_dump({"environment": {"tools": []}}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--config", str(no_tools)]
    done = invoke(*args, "--reproduction", str(repro_in(tmp_path)), "--output", str(tmp_path / "out"),
                  "--thread-id", "R", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduction reproduce_double.py: reproduced on the original code, resolved at submit\n" in done.stdout
    lines = done.stdout.splitlines()  # each result told live too, as it happens (was: only in the end summary)
    steps = [index for index, line in enumerate(lines) if line.startswith("step ")]
    start = lines.index("… reproduction reproduce_double.py on the original code: reproduced (exit 0)")
    submit = lines.index("… reproduction reproduce_double.py at submit: resolved (exit 0)")
    assert start < steps[0] and steps[-2] < submit < steps[-1] and "submit" in lines[steps[-1]], done.stdout
    traj = load_trajectory(tmp_path / "out" / "R.traj.json")
    (given,) = traj["info"]["reproduction"]["scripts"]
    assert (given["name"], given["source"], given["content"]) == ("reproduce_double.py", "given", REPRO)
    before, after = given["before"], traj["info"]["reproduction"]["after"]["reproduce_double.py"]
    assert (before["verdict"], before["returncode"], before["output"]) == (
        "reproduced", 0, "double(2) = 5\nIssue reproduced"
    )  # fmt: skip
    assert (after["verdict"], after["output"]) == ("resolved", "double(2) = 4\nIssue resolved")
    system = first_prompt(traj).split("## Tool Usage")[0]
    task = system.split("## Task Description\n")[1]
    assert task.startswith(TASK + "\n\n## Reproduction\n`/")  # in the Task section, after the task
    assert (
        "reproduction/reproduce_double.py` (given with the task) printed on the original code (reproduced, exit 0)"
        in task
    )
    assert "```\ndouble(2) = 5\nIssue reproduced\n```" in task
    assert "- `<reproduce></reproduce>`: run the reproduction(s)" in system
    check = next(op for op in traj["operations"] if op["action_type"] == "reproduce")
    assert check["returncode"] == 0 and check["observation"].endswith(
        "reproduce_double.py: resolved (exit 0)\n```\ndouble(2) = 4\nIssue resolved\n```"
    )
    assert traj["info"]["facts"] == {
        "reproduction reproduce_double.py on the original code": "reproduced (exit 0)",
        "reproduction reproduce_double.py at submit": "resolved (exit 0)",
    }
    patch = (tmp_path / "out" / "R.patch").read_text()
    assert "+    return x + x\n" in patch and "reproduce" not in patch  # beside the tools, not in the repository
    page = run_page(load_run(tmp_path / "out" / "R.traj.json"))
    assert "reproduce_double.py (given): reproduced (exit 0) on the original code → resolved (exit 0) at submit" in page


def test_without_the_variant_reproduce_says_so(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "m.yaml", [act("Check.", "reproduce"), reflect(False, "none"), act("Done.", "submit")]
    )
    result = run_task(TASK, model=model, settings=config(), output_dir=tmp_path / "out", run_id="N",
                      repo=make_git_repo(tmp_path / "repo", FILES))  # fmt: skip
    traj = load_trajectory(result.trajectory_path)
    assert (traj["operations"][0]["observation"], traj["operations"][0]["returncode"]) == (
        "This run has no reproduction: `reproduce` does nothing here.", 1
    )  # fmt: skip
    assert "reproduction" not in traj["info"] and "<reproduce>" not in first_prompt(traj)


LISTS_ITS_FOLDER = "import os\nprint(sorted(os.listdir(os.path.dirname(os.path.abspath(__file__)))))\n"
SHOWS_NOTHING = "import calc\nprint('double(1) =', calc.double(1))\nprint('Issue resolved')\n"  # wrong: no issue here
SHOWS_IT = REPRO + LISTS_ITS_FOLDER


def test_a_written_test_that_fails_validation_is_dropped_and_the_next_one_kept(tmp_path: Path) -> None:
    model = write_script(tmp_path / "m.yaml", [written(SHOWS_NOTHING), written(SHOWS_IT), *fix_script(RIGHT)])
    result = run_task(TASK, model=model, settings=config(generate=True), output_dir=tmp_path / "out", run_id="G",
                      repo=make_git_repo(tmp_path / "repo", FILES))  # fmt: skip
    assert result.exit_status == "submitted"
    traj = load_trajectory(result.trajectory_path)
    record = traj["info"]["reproduction"]
    dropped, kept = record["candidates"]
    assert (dropped["name"], dropped["kept"], dropped["reason"]) == (
        "reproduce_1.py", False, "did not show the issue (resolved, exit 0)"
    )  # fmt: skip
    assert (kept["name"], kept["kept"], kept["run"]["verdict"]) == ("reproduce_2.py", True, "reproduced")
    assert [(s["name"], s["source"]) for s in record["scripts"]] == [("reproduce_2.py", "generated")]
    # the dropped test was removed from beside the tools before the kept one ran: it lists its own folder
    assert kept["run"]["output"] == "double(2) = 5\nIssue reproduced\n['reproduce_2.py']"
    assert record["after"]["reproduce_2.py"]["verdict"] == "resolved"
    writes = [call for call in traj["model_calls"] if call["kind"] == "write_reproduction"]
    assert len(writes) == 2 and "Tests written before, dropped" not in writes[0]["prompt"]
    assert "### Test 1\n```python\n" + SHOWS_NOTHING in writes[1]["prompt"]
    assert "On the original code it did not show the issue (resolved, exit 0); its output:" in writes[1]["prompt"]
    assert "## Files of the repository\nREADME.md\ncalc.py\ntests/test_calc.py" in writes[0]["prompt"]
    task = first_prompt(traj).split("## Task Description\n")[1]
    assert "reproduce_2.py` (written before the first step, validated on the original code)" in task
    assert "reproduce_1.py" not in task
    assert (
        traj["info"]["model_stats"]["api_calls"] == 2 + 3
    )  # two tests written, then the agent's 3 steps (one call each)


@pytest.mark.parametrize("entry", [run_task, run_attempts])
@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("reproduce.py", "Reproduction takes scripts (script(text, name)), not str 'reproduce.py'"),
        (Path("reproduce.py"), "Reproduction takes scripts (script(text, name)), not PosixPath"),
        ([script(REPRO)], "Reproduction takes scripts (script(text, name)), not list"),
        (script("  \n", "check.py"), "reproduction script check.py is empty: it would show nothing of the issue"),
    ],
)
def test_a_given_script_that_is_no_script_is_one_line_before_the_run(
    tmp_path: Path, entry: object, given: object, message: str
) -> None:
    model = write_script(tmp_path / "m.yaml", fix_script(RIGHT))
    repo = make_git_repo(tmp_path / "repo", FILES)
    with pytest.raises(UsageError) as error:
        entry(TASK, model=model, settings=config(), output_dir=tmp_path / "out", run_id="G", repo=repo,
              variants=[Reproduction(given)])  # fmt: skip
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert not (tmp_path / "out").exists() and subprocess.run(["git", "status", "--short"], cwd=repo,
        capture_output=True, text=True, check=True).stdout == ""  # fmt: skip


def test_a_hanging_reproduction_is_cut_at_its_timeout_and_the_run_goes_on(tmp_path: Path) -> None:
    hangs = "import threading\n\nprint('waiting for ever', flush=True)\nthreading.Event().wait()\n"
    model = write_script(tmp_path / "m.yaml", fix_script(RIGHT))
    result = run_task(TASK, model=model, settings=config(timeout=1), output_dir=tmp_path / "out", run_id="H",
                      repo=make_git_repo(tmp_path / "repo", FILES), variants=[Reproduction(script(hangs))])  # fmt: skip
    assert result.exit_status == "submitted" and "+    return x + x\n" in result.submission
    traj = load_trajectory(result.trajectory_path)
    record = traj["info"]["reproduction"]
    before, after = record["scripts"][0]["before"], record["after"]["reproduce.py"]
    for run in (before, after):
        assert (run["timed_out"], run["verdict"], run["returncode"]) == (True, "timed out", 137)
        assert run["output"].startswith("waiting for ever\n[command timed out after 1 s")
    assert "printed on the original code (timed out, exit 137, cut at its timeout)" in first_prompt(traj)
    check = next(op for op in traj["operations"] if op["action_type"] == "reproduce")
    assert check["returncode"] == 1 and "reproduce.py: timed out (exit 137, cut at its timeout)" in check["observation"]


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT])
def test_a_kill_during_the_writing_phase_resumes_without_validating_a_test_again(tmp_path: Path, signum: int) -> None:
    """Test 1 is validated and kept; test 2's validation waits on a file while the whole run is SIGKILLed (or
    Ctrl-C'd: the run saves and prunes its checkpoints, the phase's own kept beside the graph's); the run again
    validates test 2 only, writes nothing twice, and goes on to the agent's steps."""
    trail, waiting, go = tmp_path / "trail.txt", tmp_path / "waiting", tmp_path / "go"
    first = REPRO + f"open({str(trail)!r}, 'a').write('test 1 ran\\n')\n"
    second = REPRO + (
        f"import os, time\nopen({str(trail)!r}, 'a').write('test 2 ran\\n')\nopen({str(waiting)!r}, 'w').close()\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
    )
    model = write_script(tmp_path / "m.yaml", [written(first), written(second), *fix_script(RIGHT, check=False)])
    settings = {
        "environment": {"tools": [], "writable": [str(tmp_path)]},
        "reproduction": {"generate": True, "keep": 2},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(settings))
    repo = make_git_repo(tmp_path / "repo", FILES)
    args = [*CLI, "run", "--repo", str(repo), "--task", TASK, "--model", model, "--config", str(tmp_path / "c.yaml"),
            "--output", str(tmp_path / "out"), "--thread-id", "K"]  # fmt: skip
    killed = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not waiting.exists():
        assert killed.poll() is None, killed.stdout.read().decode() if killed.stdout else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(killed.pid, signum)
    assert killed.wait() == (-signal.SIGKILL if signum == signal.SIGKILL else 130)
    assert trail.read_text() == "test 1 ran\ntest 2 ran\n"

    go.touch()
    resumed = invoke(*args[len(CLI) :], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # test 1's finished validation is not repeated, test 2's (killed) is; then both run at submit
    assert trail.read_text() == "test 1 ran\ntest 2 ran\ntest 2 ran\ntest 1 ran\ntest 2 ran\n"
    traj = json.loads((tmp_path / "out" / "K.traj.json").read_text())
    record = traj["info"]["reproduction"]
    assert [(c["name"], c["kept"]) for c in record["candidates"]] == [
        ("reproduce_1.py", True),
        ("reproduce_2.py", True),
    ]
    assert [s["name"] for s in record["scripts"]] == ["reproduce_1.py", "reproduce_2.py"]
    assert traj["info"]["model_stats"]["api_calls"] == 2 + 2  # no test written twice; two steps, one call each
    assert [op["action_type"] for op in traj["operations"]] == ["bash", "submit"]
    assert {run["verdict"] for run in record["after"].values()} == {"resolved"}


def test_execution_overrules_the_reviews_and_the_chooser(tmp_path: Path) -> None:
    """The reviewer scores the two wrong patches 9 (enough to accept them) and the right one 5; the chooser would pick
    the first. Running them: the README change does not resolve the reproduction, the hard-coded 4 does but breaks a
    test that passed before; the right one is chosen by execution, without a chooser call."""
    reviews = [review(9, "Documents the issue."), review(9, "double(2) is 4 now."), review(5, "Maybe.")]
    attempts = [fix_script(WRONG, check=False), fix_script(HARDCODED, check=False), fix_script(RIGHT, check=False)]
    model = scripts(tmp_path / "scripts", attempts, reviews, [choice(1, "The first.")])
    settings = config().merged({"attempts": {"max": 3}})
    repo = make_git_repo(tmp_path / "repo", FILES)
    result = run_attempts(TASK, model=model, settings=settings, output_dir=tmp_path / "out", run_id="T", repo=repo,
                          variants=[Reproduction(script(REPRO))])  # fmt: skip
    assert (result.exit_status, result.chosen) == ("submitted", 3)
    assert "+    return x + x\n" in result.submission
    traj = load_trajectory(result.trajectory_path)
    assert traj["info"]["choice"] == {"attempt": 3, "by": "execution", "execution": [3],
                                      "reasons": "the only patch ranked best by running it"}  # fmt: skip
    infos = {a["index"]: a for a in traj["info"]["attempts"]}
    assert [infos[i]["rank"] for i in (1, 2, 3)] == [[0, 1, 0], [0, 0, 1], [0, 0, 0]]  # nothing unverified
    assert infos[1]["checks"]["reproductions not resolved"] == "reproduce.py (reproduced, exit 0)"
    assert infos[2]["checks"]["regressions (clean run)"] == (
        "1 of 2 tests that passed before (tests/test_calc.py): tests/test_calc.py::test_double_keeps_floats"
    )
    assert infos[3]["checks"] == {
        "reproductions resolved (clean run)": "1 of 1",
        "regressions (clean run)": "0 of 2 tests that passed before (tests/test_calc.py)",
    }
    reviewed = [call["prompt"] for call in traj["model_calls"] if call["kind"] == "review"]
    assert len(reviewed) == 3 and "- reproductions not resolved: reproduce.py (reproduced, exit 0)" in reviewed[0]
    assert "- regressions (clean run): 1 of 2 tests that passed before" in reviewed[1]
    assert [call["kind"] for call in traj["model_calls"]].count("choose") == 0
    assert not (tmp_path / "out" / "verify").exists() or not any((tmp_path / "out" / "verify").iterdir())
    page = run_page(load_run(result.trajectory_path))
    assert "attempt 3 · score 5.0 · execution rank 0,0,0 · chosen" in page and "regressions (clean run): 1 of 2" in page


SCANS_FOR = (
    "import os\n\nmarker = ''.join({parts!r})\nroots = [os.getcwd(), os.path.dirname(os.path.dirname(__file__))]\n"
    "leaks = []\nfor root in roots:\n    for folder, _, names in os.walk(root):\n        for name in names:\n"
    "            path = os.path.join(folder, name)\n            with open(path, 'rb') as handle:\n"
    "                if marker.encode() in handle.read():\n                    leaks.append(path)\n"
    "print('leaks:', leaks)\nfrom calc.stats import mean\n"
    "print('Issue resolved' if mean([1, 2, 3]) == 2 else 'Issue reproduced')\n"
)


def test_nothing_of_the_hidden_tests_reaches_a_prompt_a_file_or_a_reproduction(tmp_path: Path) -> None:
    """A dataset row whose fix, hidden tests and their names all hold a unique marker, run through the batch with
    written reproductions and two attempts verified by execution: the marker is in no prompt, no reproduction, no
    file the agent's environment holds (the written test scans the repository and the tools folder for it), no
    file of the run's output (trajectories, calls logs, checkpoints, the checkout)."""
    marker = f"HIDDEN-{uuid.uuid4().hex}"
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    hidden = {
        "test_patch": row["test_patch"] + f"# {marker}\n",
        "patch": row["patch"].replace("\n+", f"\n+# {marker}\n+", 1),
        "FAIL_TO_PASS": [f"tests/test_stats.py::test_mean_{marker}"],
        "PASS_TO_PASS": [f"tests/test_stats.py::test_total_{marker}"],
        "eval_script": f"echo {marker}",
    }
    dataset.write_text(json.dumps({**row, **hidden}) + "\n")
    assert not {
        key for key, value in load_dataset(str(dataset)).instances[0].task_vars().items() if marker in str(value)
    }
    test = SCANS_FOR.format(parts=(marker[:7], marker[7:]))
    agent = [written(test), *batch_script([FIX_COMMAND])]
    folder = tmp_path / "scripts"
    scripts(folder, [agent, agent], [review(5, "Plausible."), review(5, "Plausible.")])
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({
        "environment": {"tools": []}, "attempts": {"max": 2},
        "reproduction": {"generate": True, "regression_command": REGRESSION},
    }))  # fmt: skip
    options = BatchOptions(model=f"scripted:{folder}/attempt{{attempt}}.yaml", output=tmp_path / "out",
                           environment="local", config_files=[config])  # fmt: skip
    assert run_swebench(str(dataset), "test", options).counts() == {"submitted": 1}
    run = tmp_path / "out" / row["instance_id"]
    traj = load_trajectory(run / f"{row['instance_id']}.traj.json")
    assert traj["info"]["choice"]["by"] == "only"  # the two attempts made one patch
    for index in (1, 2):
        record = load_trajectory(run / f"attempt{index}" / f"{row['instance_id']}-attempt{index}.traj.json")
        (kept,) = record["info"]["reproduction"]["scripts"]
        assert kept["before"]["output"] == "leaks: []\nIssue reproduced"
        assert "leaks: []" in record["model_calls"][1]["prompt"]  # the agent read it in its task
        assert marker not in json.dumps(record["info"]["reproduction"])
    prompts = [call["prompt"] for call in traj["model_calls"]]
    assert len(prompts) == 2 * (1 + 2) + 2 and all(marker not in prompt for prompt in prompts)
    assert not [path for path in (tmp_path / "out").rglob("*") if path.is_file() and marker.encode() in
                (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())]  # fmt: skip

"""Attempts at one task (issue 11), driven by the scripted model in the local environment (a git worktree each)."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect
from attempts_scripts import FILES, RIGHT, TASK, TEST, WRONG, attempt_script, choice, review, scripts, write
from conftest import killed_in_command, make_git_repo
from in_process import invoke
from openai_server import OpenAIServer, Reply

from llm_ide import run_attempts, run_task  # the Python API
from llm_ide.attempts.context import worktree
from llm_ide.config import load_config
from llm_ide.errors import UsageError
from llm_ide.inspector.load import load_run
from llm_ide.inspector.page import run_page
from llm_ide.swebench.attempts import AttemptsReport

NO_TOOLS = {"environment": {"tools": []}}


def settings(**attempts):
    return load_config("default", **NO_TOOLS, attempts=attempts)


def llm_ide(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from llm_ide.cli import app; app()", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def prompts(output: Path, index: int) -> list[str]:
    path = output / f"attempt{index}" / f"T-attempt{index}.calls.jsonl.gz"
    with gzip.open(path, "rt") as log:
        return [json.loads(line)["prompt"] for line in log if line.strip()]


def test_the_reviewer_stops_at_the_accepted_attempt_and_its_critique_reaches_the_next(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(
        tmp_path / "scripts",
        [attempt_script(WRONG, "The README is not the code."), attempt_script(RIGHT), attempt_script(RIGHT)],
        [review(2, "The patch only edits the README; calc.double still adds 1."), review(9, "Removes the + 1.")],
    )
    result = run_attempts(TASK, model=model, settings=settings(max=3), output_dir=tmp_path / "out", run_id="T",
                          repo=repo)  # fmt: skip
    assert result.exit_status == "submitted"
    assert [a["index"] for a in result.attempts] == [1, 2]  # accepted at 2: no third attempt
    assert [a["score"] for a in result.attempts] == [2.0, 9.0]
    assert result.chosen == 2
    assert "-    return x + x + 1  # BUG\n+    return x + x" in result.submission
    assert "README" not in result.submission
    assert (repo / "calc.py").read_text() == FILES["calc.py"]  # each attempt worked in its own worktree

    second = prompts(tmp_path / "out", 2)[0]
    lessons = second.split("## Lessons Learned", 1)[1]
    assert "Attempt 1 (submitted, review score 2/10) was not accepted: The patch only edits the README" in lessons
    assert "- The README is not the code." in lessons
    assert "Lessons Learned" in prompts(tmp_path / "out", 1)[0]
    assert "The README is not the code" not in prompts(tmp_path / "out", 1)[0]

    traj = json.loads(result.trajectory_path.read_text())
    outcomes = [(a["index"], a["chosen"], a["score"]) for a in traj["info"]["attempts"]]
    assert outcomes == [(1, False, 2.0), (2, True, 9.0)]
    assert traj["info"]["choice"]["by"] == "accept_score"
    assert {op["attempt"] for op in traj["operations"]} == {1, 2}
    assert [c["kind"] for c in traj["model_calls"] if c["kind"] in ("review", "choose")] == ["review", "review"]
    review_prompt = next(c["prompt"] for c in traj["model_calls"] if c["kind"] == "review")
    assert "double(2) = 5" in review_prompt  # the attempt's test output reached the reviewer
    assert "README.md" in review_prompt and "The README is not the code." in review_prompt
    with gzip.open(tmp_path / "out" / "T.calls.jsonl.gz", "rt") as log:  # complete: a plain gzip reader reads it
        assert [json.loads(line)["kind"] for line in log] == ["review", "review"]

    run = load_run(result.trajectory_path)  # the inspector's view: a band per attempt, scores, the choice
    assert [(a.index, a.chosen, a.score) for a in run.attempts] == [(1, False, 2.0), (2, True, 9.0)]
    assert [(n.attempt, n.id) for n in run.nodes] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert all("chain" in n.marks for n in run.nodes)
    page = run_page(run)
    assert 'title="The patch only edits the README; calc.double still adds 1."' in page
    assert "attempt 2 · score 9.0 · chosen" in page

    logged = [
        line.split(" INFO llm_ide.attempts: ")[1] for line in (tmp_path / "out" / "T.log").read_text().splitlines()
    ]
    assert logged == [  # the run's own log was empty: what each attempt did, the reviews, the choice and why
        "attempt 1 of 3",
        f"attempt 1: submitted — 7 patch lines, $0.0000, 3 calls; its log: {tmp_path}/out/attempt1/T-attempt1.log",
        "review: attempt 1 scored 2 — The patch only edits the README; calc.double still adds 1.",
        "attempt 2 of 3",
        f"attempt 2: submitted — 8 patch lines, $0.0000, 3 calls; its log: {tmp_path}/out/attempt2/T-attempt2.log",
        "review: attempt 2 scored 9 — Removes the + 1.",
        "chosen: attempt 2 (accept_score) — Removes the + 1.",
    ]
    assert all((tmp_path / "out" / f"attempt{i}" / f"T-attempt{i}.log").is_file() for i in (1, 2))


@pytest.mark.parametrize(("mode", "choices", "by"), [("model", [choice(2, "Only candidate 2 fixes calc.")], "chooser"),
                                                     ("best_score", [], "best_score")])  # fmt: skip
def test_the_chooser_picks_the_right_one_of_the_distinct_patches(tmp_path: Path, mode: str, choices, by: str) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(
        tmp_path / "scripts",
        [attempt_script(WRONG), attempt_script(WRONG), attempt_script(RIGHT)],
        [review(3, "README only."), review(3, "README only."), review(6, "Plausible.")],
        [choice(1, "the agent's chooser file: not used when attempts.chooser.model is set")],
    )
    chooser = write(tmp_path / "elsewhere", "chooser.yaml", choices or ["unused"])  # a model of its own
    config = settings(max=3, choose=mode, chooser={"model": f"scripted:{chooser}"})
    result = run_attempts(TASK, model=model, settings=config, output_dir=tmp_path / "out", run_id="T", repo=repo)
    assert [a["index"] for a in result.attempts] == [1, 2, 3]
    assert result.chosen == 3
    assert "+    return x + x\n" in result.submission
    traj = json.loads(result.trajectory_path.read_text())
    assert traj["info"]["choice"]["by"] == by
    chooser = [c for c in traj["model_calls"] if c["kind"] == "choose"]
    if mode == "model":
        assert traj["info"]["choice"]["reasons"] == "Only candidate 2 fixes calc."
        (call,) = chooser
        assert "## Candidate 1 (attempts 1, 2" in call["prompt"]  # attempts 1 and 2 made the same patch: one candidate
        assert "## Candidate 2 (attempts 3" in call["prompt"]
        assert "## Candidate 3" not in call["prompt"]
        assert "[1] bash: Applied." in call["prompt"]  # each candidate's reasoning summary
    else:
        assert chooser == []
    inspected = invoke("inspect", str(result.trajectory_path))
    assert inspected.returncode == 0, inspected.stderr
    shown = inspected.stdout
    assert "attempt 1: submitted, score 3" in shown and "attempt 3: submitted, score 6 (chosen)" in shown
    assert f"chosen: attempt 3 ({by}) — " in shown


def test_inspect_says_the_choice_as_the_run_said_it(tmp_path: Path) -> None:
    """No attempt changed a file: the run said `chosen: none (no patch) — no attempt changed a file`, inspect
    `chosen: no attempt (none) no attempt changed a file` (the reasons without their dash elsewhere too)."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script("true")] * 2, [review(3, "No change."), review(4, "None.")])
    argv = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--output", "out", "--thread-id", "T"]
    config = tmp_path / "attempts.yaml"
    config.write_text(yaml.safe_dump({"attempts": {"max": 2}, **NO_TOOLS}))
    done = invoke(*argv, "-c", str(config), cwd=tmp_path)
    line = "chosen: none (no patch) — no attempt changed a file\n"
    assert done.returncode == 0 and f"… {line}" in done.stdout, done.stdout + done.stderr
    inspected = invoke("inspect", "out/T.traj.json", cwd=tmp_path)
    assert inspected.returncode == 0 and line in inspected.stdout, inspected.stdout


def test_inspect_says_which_attempt_each_model_call_is_of(tmp_path: Path) -> None:
    """The calls table of a run of attempts had no attempt column: its two `review` rows (and each attempt's `act`
    rows) could not be told apart. The chooser's call, of them all, is `—`."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(
        tmp_path / "scripts", [attempt_script(WRONG), attempt_script(RIGHT)], [review(3, "No."), review(4, "So so.")]
    )
    config = settings(max=2, choose="model")
    result = run_attempts(TASK, model=model, settings=config, output_dir=tmp_path / "out", run_id="T", repo=repo)
    inspected = invoke("inspect", str(result.trajectory_path))
    assert inspected.returncode == 0, inspected.stderr
    table = inspected.stdout.partition("┃ call")[2].splitlines()  # (the tree above draws │ too)
    rows = [[cell.strip() for cell in line.split("│")[1:4]] for line in table if line.startswith("│")]
    assert rows == [
        *([str(n), "1", "act"] for n in range(3)),
        *([str(n), "2", "act"] for n in range(3, 6)),
        ["6", "1", "review"],
        ["7", "2", "review"],
        ["8", "—", "choose"],
    ]


def test_the_console_names_each_attempts_log_where_it_is(tmp_path: Path) -> None:
    """`--output out`: the console said `its log: attempt1/T-attempt1.log`, relative to the output folder, a path
    that is not there from where the command ran."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)] * 2, [review(3, "Hm."), review(4, "Hm.")])
    (config := tmp_path / "attempts.yaml").write_text(yaml.safe_dump({"attempts": {"max": 2}, **NO_TOOLS}))
    argv = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "-c", str(config), "--output", "out"]
    done = invoke(*argv, "--thread-id", "T", cwd=tmp_path)
    logs = [line.split("; its log: ")[1] for line in done.stdout.splitlines() if "; its log: " in line]
    assert logs == ["out/attempt1/T-attempt1.log", "out/attempt2/T-attempt2.log"], done.stdout + done.stderr
    assert all((tmp_path / log).is_file() for log in logs)


@pytest.mark.slow
def test_a_kill_during_attempt_2_resumes_it_with_attempt_1_kept_and_the_command_run_again(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    trail, waiting, go = tmp_path / "trail.txt", tmp_path / "waiting", tmp_path / "go"
    wait = f"echo a2-wait-start >> {trail}; touch {waiting}; while [ ! -f {go} ]; do sleep 0.05; done; "
    wait += f"echo a2-wait-end >> {trail}"
    second = [
        act("Record.", "bash", command=f"echo a2-first >> {trail}"),
        reflect(False, "recorded"),
        act("Wait.", "bash", command=wait),
        reflect(False, "waited"),
        act("Fix.", "bash", command=RIGHT),
        reflect(False, "fixed"),
        act("Done.", "submit"),
    ]
    first = [act("Record.", "bash", command=f"echo a1 >> {trail}"), reflect(False, "recorded"),
             *attempt_script(WRONG)[2:]]  # fmt: skip
    tries = [first, second, attempt_script(RIGHT)]  # the third is never run
    model = scripts(tmp_path / "scripts", tries, [review(2, "README only."), review(9, "Fixed.")])
    config = tmp_path / "config.yaml"
    mark = f"{tmp_path.name}-{os.getpid()}"  # in the environment of the run's commands
    # the trail and the signal files are beside the worktrees
    environment = {"tools": [], "writable": [str(tmp_path)], "env": {"LLM_IDE_TEST_MARK": mark}}
    config.write_text(yaml.safe_dump({"environment": environment, "attempts": {"max": 3}}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--thread-id", "T"]
    args += ["--output", str(tmp_path / "out"), "--config", str(config)]
    killed = llm_ide(*args, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not waiting.exists():
        assert killed.poll() is None, killed.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    killed_in_command(killed, mark)
    first_traj = (tmp_path / "out" / "attempt1" / "T-attempt1.traj.json").read_bytes()

    go.touch()
    resumed = invoke(*args, cwd=tmp_path)
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output
    assert "resuming run T: attempts [1] finished are kept" in output
    # the trail is outside the worktree: the killed command's first half is there twice (it ran again, as its
    # observation says); every other command once
    assert trail.read_text() == "a1\na2-first\na2-wait-start\na2-wait-start\na2-wait-end\n"
    assert (tmp_path / "out" / "attempt1" / "T-attempt1.traj.json").read_bytes() == first_traj
    traj = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert [(a["index"], a["score"], a["chosen"]) for a in traj["info"]["attempts"]] == [
        (1, 2.0, False),
        (2, 9.0, True),
    ]
    assert [c["attempt"] for c in traj["model_calls"] if c["kind"] == "review"] == [1, 2]
    second_ops = [op for op in traj["operations"] if op["attempt"] == 2]
    assert [op["thought"] for op in second_ops] == ["Record.", "Wait.", "Fix.", "Done."]
    assert second_ops[1]["observation"].startswith("[The run was stopped while this command ran.")
    assert "+    return x + x\n" in traj["info"]["submission"]
    assert "attempt 2: submitted, score 9, $0.0000 (chosen)" in output


def test_a_run_stopped_before_it_chose_says_so_not_an_empty_patch(tmp_path: Path) -> None:
    """The reviewer failed after both attempts submitted: the run printed `(empty patch)`, as if they found nothing."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(RIGHT)], [review(5, "Fixed.")])
    (config := tmp_path / "config.yaml").write_text(
        yaml.safe_dump({"environment": {"tools": []}, "attempts": {"max": 2}})
    )
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--thread-id", "T"]
    done = invoke(*args, "--output", str(tmp_path / "out"), "--config", str(config), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "patch: none chosen yet: the run stopped before it chose among its attempts (2 submitted)" in done.stdout
    assert "(empty patch)" not in done.stdout and not (tmp_path / "out" / "T.patch").exists()
    assert "the run goes on where it stopped (model_error) with:" in done.stderr


def test_an_attempts_thread_resumed_in_another_repository_is_refused(tmp_path: Path) -> None:
    """As a run's (tests/test_resume.py): `--thread-id T --repo OTHER`, T's attempts begun in another repository."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(RIGHT)], [review(5, "Fixed.")])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"environment": {"tools": []}, "attempts": {"max": 2}}))
    args = ["run", "--task", TASK, "--model", model, "--thread-id", "T", "--output", "out", "--config", "config.yaml"]
    stopped = invoke(*args, "--repo", str(repo), cwd=tmp_path)  # the reviewer's script ran out: it goes on
    assert stopped.returncode == 1 and "goes on where it stopped" in stopped.stderr, stopped.stdout + stopped.stderr
    other = make_git_repo(tmp_path / "other", {"b.py": "y = 1\n"})
    refused = invoke(*args, "--repo", str(other), cwd=tmp_path)
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1), refused.stdout + refused.stderr
    assert refused.stderr.startswith(f"error: thread T started in {repo}; --repo {other} is another repository (no")
    assert sorted(path.name for path in other.iterdir()) == [".git", "b.py"]


@pytest.mark.parametrize(
    ("how", "status", "error", "resumed"),
    [
        ("ctrl-c", "interrupted", "interrupted by the user", "submitted"),
        ("step limit", "step_limit", "attempt 2: the run's step limit (1) is reached", "step_limit"),
    ],
)
def test_an_attempts_run_stopped_says_how_in_its_trajectory_and_inspect(
    tmp_path: Path, how: str, status: str, error: str, resumed: str
) -> None:
    """Ctrl-C left the combined trajectory without an exit status (`inspect`: `None`, `chosen: no attempt ()`), and a
    run whose attempts all reached a limit did not say which."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    attempts, reviews = [attempt_script(RIGHT), attempt_script(RIGHT)], [review(2, "x"), review(2, "y")]
    model = scripts(tmp_path / "scripts", attempts, reviews)
    limits = {"agent": {"step_limit": 1}} if how == "step limit" else {}
    run = {"model": model, "settings": settings(max=2).merged(limits), "output_dir": tmp_path / "out", "run_id": "T"}

    def ctrl_c_at_the_second_step(event) -> None:
        if how == "ctrl-c" and event.kind == "step" and event.step == 2:
            raise KeyboardInterrupt

    try:
        result = run_attempts(TASK, repo=repo, on_event=ctrl_c_at_the_second_step, **run)
    except KeyboardInterrupt:
        result = None
    assert (how == "ctrl-c") == (result is None)
    info = json.loads((tmp_path / "out" / "T.traj.json").read_text())["info"]
    assert (info["exit_status"], info["error"]) == (status, error)
    shown = invoke("inspect", str(tmp_path / "out" / "T.traj.json"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"T: {status} — ") and f"ended: {error}" in shown.stdout
    assert ("chosen:" in shown.stdout) == (how != "ctrl-c")  # no choice made yet: none shown
    assert status in run_page(load_run(tmp_path / "out" / "T.traj.json"))
    again = run_attempts(TASK, repo=repo, **run)  # the interrupted run resumes; the limited one is its result again
    assert again.exit_status == resumed


@pytest.mark.parametrize("parallel", [False, True])
def test_attempts_stopped_at_their_step_limit_go_on_when_the_run_is_given_a_higher_one(
    tmp_path: Path, parallel: bool
) -> None:
    """A finished run whose attempts reached their step limit was its result again whatever limit it was given: the
    attempts go on from their last step (not anew), are reviewed and chosen among again; one after the other, the
    first accepted stops the rest, as in a fresh run. All at once, a higher attempts.max adds none, and the attempts
    say how many there are (they said "attempt 1 of 3")."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    reviews = [review(3, "Unfinished."), review(1, "Unfinished."), review(9, "Removes the + 1."), review(2, "README.")]
    attempts = [attempt_script(RIGHT), attempt_script(WRONG), attempt_script(WRONG)]  # (the third never runs)
    model = scripts(tmp_path / "scripts", attempts, reviews)
    events: list[str] = []

    def run(step_limit: int, most: int = 2):
        given = settings(max=most, parallel=parallel).merged({"agent": {"step_limit": step_limit}})
        return run_attempts(TASK, model=model, settings=given, output_dir=tmp_path / "out", run_id="T", repo=repo,
                            on_event=lambda event: events.append(event.phase))  # fmt: skip

    first = run(2)
    assert (first.exit_status, [(a["exit_status"], a["score"]) for a in first.attempts]) == (
        "step_limit",
        [("step_limit", 3.0), ("step_limit", 1.0)],
    )
    events.clear()
    assert run(2).attempts == first.attempts  # the same limit: its result again, nothing run
    more = "" if parallel else "a higher attempts.max adds attempts, "  # (none accepted)
    assert events == ["run T had already finished (step_limit): its result again; a higher limit continues the "
                      f"attempts stopped at one, {more}a new `run_id` or `output_dir` runs the task "
                      "anew"]  # fmt: skip
    events.clear()
    going = run(0, most=3)  # all at once, the attempts run are all there are: no third one, none said
    assert (
        "run T had stopped at a limit: 2 attempts (1, 2) going on from their last step, under the limits given now"
        in events
    )
    assert sorted(e for e in events if e.startswith("attempt ") and " of " in e) == (  # (at once: in any order)
        ["attempt 1 of 2", "attempt 2 of 2"] if parallel else ["attempt 1 of 3"]
    )
    went_on = [("submitted", 9.0), ("submitted", 2.0)] if parallel else [("submitted", 9.0), ("step_limit", 1.0)]
    assert [(a["exit_status"], a["score"]) for a in going.attempts] == went_on  # sequential: 1 accepted, 2 left
    assert (going.exit_status, going.chosen) == ("submitted", 1)
    assert "-    return x + x + 1  # BUG\n+    return x + x" in going.submission
    assert len(prompts(tmp_path / "out", 1)) == 3  # 2 steps, then the third: from its last step, not anew
    assert len(prompts(tmp_path / "out", 2)) == (3 if parallel else 2)
    assert (repo / "calc.py").read_text() == FILES["calc.py"]
    traj = json.loads(going.trajectory_path.read_text())
    assert [c["kind"] for c in traj["model_calls"] if c["kind"] == "review"] == ["review"] * (4 if parallel else 3)


@pytest.mark.parametrize("parallel", [False, True])
def test_a_finished_run_given_a_higher_attempts_max_adds_attempts_unless_one_was_accepted(
    tmp_path: Path, parallel: bool
) -> None:
    """Two attempts, none accepted: given `attempts.max: 3` the run said "already finished" and ran nothing. One after
    another, attempt 3 now runs and the choice is made among the three; all at once, the attempts run are all there
    are. An accepted attempt stays the result whatever the maximum."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    attempts = [attempt_script(WRONG), attempt_script(WRONG), attempt_script(RIGHT), attempt_script(WRONG)]
    reviews = [review(3, "No."), review(2, "No."), review(9, "Fixes it.")]
    model = scripts(tmp_path / "scripts", attempts, reviews)  # (the fourth never runs)
    events: list[str] = []

    def run(most: int):
        given = settings(max=most, parallel=parallel, accept_score=8)
        return run_attempts(TASK, model=model, settings=given, output_dir=tmp_path / "out", run_id="T", repo=repo,
                            on_event=lambda event: events.append(event.phase))  # fmt: skip

    first = run(2)
    assert [(a["index"], a["score"]) for a in first.attempts] == [(1, 3.0), (2, 2.0)]
    events.clear()
    assert run(2).attempts == first.attempts
    hint = "" if parallel else "a higher attempts.max adds attempts, "
    assert events == [f"run T had already finished (submitted): its result again; {hint}a new `run_id` or "
                      "`output_dir` runs the task anew"]  # fmt: skip
    events.clear()
    more = run(3)
    if parallel:
        assert more.attempts == first.attempts and events[0].startswith("run T had already finished (submitted)")
        return
    assert "run T had finished: none of its 2 accepted, attempts to 3 follow" in events
    assert [(a["index"], a["score"]) for a in more.attempts] == [(1, 3.0), (2, 2.0), (3, 9.0)]
    assert (more.exit_status, more.chosen) == ("submitted", 3)
    assert "-    return x + x + 1  # BUG\n+    return x + x" in more.submission
    assert (repo / "calc.py").read_text() == FILES["calc.py"]
    events.clear()
    assert run(4).attempts == more.attempts  # attempt 3 accepted: the result again
    assert events[0].startswith("run T had already finished (submitted): its result again")


def test_an_attempts_run_stopped_at_its_step_limit_prints_the_command_that_goes_on_and_it_does(tmp_path: Path) -> None:
    """`run` with attempts printed nothing after a step limit (a single run prints the command that goes on)."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    reviews = [review(2, "Unfinished.")] * 4 + [review(9, "Fixed.")]
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(WRONG)], reviews)
    (config := tmp_path / "config.yaml").write_text(yaml.safe_dump({**NO_TOOLS, "attempts": {"max": 2}}))
    args = [
        "run",
        "--repo",
        str(repo),
        "--task",
        TASK,
        "--model",
        model,
        "--thread-id",
        "T",
        "-o",
        str(tmp_path / "out"),
    ]
    stopped = invoke(*args, "-c", str(config), "--step-limit", "1", cwd=tmp_path)
    said = stopped.stderr.splitlines()
    assert stopped.returncode == 1 and said[-2] == "it goes on from its last step with a higher step limit:", said
    again = shlex.split(said[-1])
    assert again == ["llm-ide", *args, "-c", str(config), "--step-limit", "2"]
    went_on = invoke(*again[1:], cwd=tmp_path)
    assert went_on.returncode == 1 and shlex.split(went_on.stderr.splitlines()[-1])[-1] == "4"  # at 2: on again
    done = invoke(*again[1:-1], "0", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "attempt 1: submitted, score 9, $0.0000 (chosen)" in done.stdout
    assert "… review: attempt 1 scored 9 — Fixed.\n… chosen: attempt 1 (accept_score) — Fixed.\n" in done.stdout
    assert "attempt 2: step_limit, score 2" in done.stdout  # attempt 1 accepted: the second stays where it was
    assert len(prompts(tmp_path / "out", 1)) == 3 and len(prompts(tmp_path / "out", 2)) == 2


@pytest.mark.parametrize("dirty", [False, True])
def test_attempts_warn_that_uncommitted_changes_are_not_theirs(tmp_path: Path, dirty: bool) -> None:
    """A plain run warns that uncommitted changes go into its patch; attempts start from the commit without them, and
    said nothing."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    if dirty:
        (repo / "README.md").write_text("calc, work in progress\n")
        (repo / "notes.txt").write_text("todo\n")
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)] * 2, [review(9, "Fixed.")])  # the second never runs
    (config := tmp_path / "config.yaml").write_text(yaml.safe_dump({**NO_TOOLS, "attempts": {"max": 2}}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--thread-id", "T", "--config", str(config)]
    done = invoke(*args, "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout[:12]
    warning = (
        "… warning: the repository has uncommitted changes (README.md, notes.txt): each attempt starts from commit "
        f"{head} without them; commit them for the attempts to have them"
    )
    assert (warning in done.stdout.splitlines()) == dirty, done.stdout
    assert "uncommitted" not in done.stdout.replace(warning, "")  # the attempts' own worktrees are clean
    patch = (tmp_path / "out" / "T.patch").read_text()
    assert "+    return x + x\n" in patch and "todo" not in patch and "work in progress" not in patch


@pytest.mark.parametrize("attempts", [1, 2])
def test_run_attempts_tells_each_listener_run_task_does(tmp_path: Path, attempts: int) -> None:
    """`run_attempts(on_model_call=…)` was refused ("the run takes no argument"), and the command line's live status
    (the model's call, the command under way) saw nothing of an attempt's."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)] * 2, [review(9, "Fixed.")])  # the second never runs
    calls, commands, events = [], [], []
    model = model if attempts > 1 else model.replace("{attempt}", "1")  # one attempt: the agent's run itself
    run = {"model": model, "settings": settings(max=attempts), "repo": repo, "run_id": "T"}
    told = {"on_model_call": calls.append, "on_command": commands.append, "on_event": events.append}
    result = run_attempts(TASK, output_dir=tmp_path / "out", **run, **told)
    assert result.exit_status == "submitted"
    own = tmp_path / "out" / ("attempt1/T-attempt1.traj.json" if attempts > 1 else "T.traj.json")
    asked = len(json.loads(own.read_text())["model_calls"])
    assert [c.kind for c in calls if c.kind != "text"] == ["start", "end"] * asked and asked == 3
    ran = [(c.command, c.returncode) for c in commands if c.kind == "end"]
    assert ran == [(TEST, 1), (RIGHT, 0)]
    assert [e.command.command for e in events if e.kind == "command" and e.command.kind == "end"] == [TEST, RIGHT]
    with pytest.raises(UsageError, match="; it takes .*, on_event, on_model_call, ask, on_command$"):
        run_attempts(TASK, output_dir=tmp_path / "o", on_call=print, **run)


def test_one_cost_budget_for_the_task_stops_the_attempt_under_way_and_the_next_ones(tmp_path: Path) -> None:
    """gpt-5-mini prices, 100k prompt tokens a call ($0.025): the task's $0.08 have room for three calls, not a
    fourth (a call starts only when one more call as dear as the dearest so far still fits)."""
    replies = [Reply(text, input_tokens=100_000, output_tokens=10) for text in attempt_script(RIGHT)]
    with OpenAIServer(replies=replies) as server:
        result = run_attempts(
            TASK,
            model="gpt-5-mini",
            base_url=server.url,
            output_dir=tmp_path / "out",
            run_id="T",
            settings=settings(max=3, cost_limit=0.08).merged({"agent": {"single_call": False}}),
            repo=make_git_repo(tmp_path / "repo", FILES),
        )
        requests = len(server.requests)  # fmt: skip
    assert requests == 3  # act, reflect, act: no fourth agent call, no review, no second attempt
    assert result.exit_status == "cost_limit"
    assert [(a["index"], a["exit_status"], a["score"]) for a in result.attempts] == [(1, "cost_limit", None)]
    assert result.chosen == 1 and "+    return x + x\n" in result.submission  # its patch is still the task's
    assert result.model_stats["cost"] == pytest.approx(3 * (100_000 * 0.25 + 10 * 2.0) / 1e6)
    assert result.model_stats["cost"] <= 0.08


def test_a_reviewers_call_cut_off_before_its_node_saved_stays_in_the_runs_cost(tmp_path: Path) -> None:
    """Ctrl-C as the reviewer's paid reply is told, before the review is saved: the resumed run asks the reviewer
    again, and the first call's $1 was in no total (the run's cost, its trajectory, the task's budget)."""
    dollar = {"input_tokens": 1_000_000, "output_tokens": 0}
    attempt, reviewed = [Reply(text, **dollar) for text in attempt_script(RIGHT)], Reply(review(9, "Fixed."), **dollar)
    prices = {"gpt-test": {"input": 1.0, "output": 0.0}}
    config = settings(max=2, accept_score=8).merged(
        {"agent": {"single_call": False, "cost_limit": 0}, "model": {"prices": prices}}
    )
    run = {"model": "gpt-test", "output_dir": tmp_path / "out", "run_id": "T", "settings": config}
    repo = make_git_repo(tmp_path / "repo", FILES)

    def ctrl_c_at_the_score(event) -> None:
        if event.kind == "phase" and event.phase.startswith("review: attempt 1 scored"):
            raise KeyboardInterrupt

    with OpenAIServer(replies=[*attempt, reviewed]) as server, pytest.raises(KeyboardInterrupt):
        run_attempts(TASK, base_url=server.url, repo=repo, on_event=ctrl_c_at_the_score, **run)
    with OpenAIServer(replies=[reviewed]) as server:  # the resumed run: the review again (the attempt is kept)
        result = run_attempts(TASK, base_url=server.url, repo=repo, **run)
        hits = server.hits
    assert (hits, result.exit_status, result.chosen) == (1, "submitted", 1)
    paid = len(attempt) + 2
    assert (result.model_stats["cost"], result.model_stats["discarded_calls"]) == (paid, 1)
    traj = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert traj["info"]["model_stats"]["cost"] == paid
    assert [c["kind"] for c in traj["model_calls"]].count("review") == 1  # the history: the review that was saved


@pytest.mark.slow
def test_ctrl_c_stops_parallel_attempts_and_the_rerun_resumes_both(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    go = tmp_path / "go"

    def waiting(number: int) -> list[str]:
        started = tmp_path / f"started{number}"
        command = f"echo {number} >> {tmp_path}/trail; touch {started}; while [ ! -f {go} ]; do sleep 0.05; done"
        return [act("Wait.", "bash", command=command), reflect(False, "waited"), *attempt_script(RIGHT)]

    model = scripts(tmp_path / "scripts", [waiting(1), waiting(2)], [review(5, "Fine."), review(5, "Fine.")])
    config = tmp_path / "config.yaml"
    environment = {"tools": [], "writable": [str(tmp_path)]}
    config.write_text(yaml.safe_dump({"environment": environment, "attempts": {"max": 2, "parallel": True}}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--thread-id", "P"]
    args += ["--output", str(tmp_path / "out"), "--config", str(config)]
    first = llm_ide(*args, cwd=tmp_path)
    deadline = time.monotonic() + 300
    while not all((tmp_path / f"started{n}").exists() for n in (1, 2)):  # both attempts at once
        assert first.poll() is None, first.stdout.read().decode()
        if time.monotonic() > deadline:  # what each attempt got instead, for the failure's message
            first.kill()
            trajectories = {p.name: p.read_text()[-2000:] for p in (tmp_path / "out").rglob("*.traj.json")}
            pytest.fail(f"not both started in 300 s: {first.communicate()[0].decode()}\n{trajectories}")
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGINT)
    output = first.communicate(timeout=60)[0].decode()  # their silent commands ended with it: the gate still shut
    assert first.returncode == 130, output
    for number in (1, 2):
        killed = json.loads((tmp_path / "out" / f"attempt{number}" / f"P-attempt{number}.traj.json").read_text())
        assert (killed["info"]["exit_status"], killed["operations"]) == ("interrupted", [])

    go.touch()
    rerun = invoke(*args, cwd=tmp_path)
    output = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, output
    traj = json.loads((tmp_path / "out" / "P.traj.json").read_text())
    assert [(a["index"], a["exit_status"]) for a in traj["info"]["attempts"]] == [(1, "submitted"), (2, "submitted")]
    assert sorted((tmp_path / "trail").read_text().split()) == ["1", "1", "2", "2"]  # each cut command again
    waits = [op for op in traj["operations"] if op["thought"] == "Wait."]
    assert [op["observation"].startswith("[The run was stopped while this command ran.") for op in waits] == [True] * 2
    assert traj["info"]["choice"]["by"] == "only"  # the same fix twice: one distinct patch


def test_the_graph_streams_each_attempts_steps_to_its_custom_stream(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from llm_ide.attempts.context import AttemptsContext
    from llm_ide.attempts.graph import build_attempts_graph
    from llm_ide.run.request import RunRequest

    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(WRONG), attempt_script(RIGHT)],
                    [review(1, "README only."), review(9, "Fixed.")])  # fmt: skip
    request = RunRequest(TASK, model, settings(max=2), tmp_path / "out", "S", repo=repo, environment="local")
    ctx = AttemptsContext(request)
    inputs = {"task": TASK, "repo": str(repo), "model": model}
    graph = build_attempts_graph(InMemorySaver())
    chunks = list(graph.stream(inputs, {"configurable": {"thread_id": "S"}}, context=ctx, stream_mode="custom"))
    assert [(c["attempt"], c["kind"], c["step"]) for c in chunks] == [
        (1, "step", 1), (1, "step", 2), (1, "step", 3), (1, "end", 3),
        (2, "step", 1), (2, "step", 2), (2, "step", 3), (2, "end", 3),
    ]  # fmt: skip
    assert chunks[5]["action"] == f"bash: {RIGHT}" and chunks[-1]["exit_status"] == "submitted"
    assert graph.get_state({"configurable": {"thread_id": "S"}}).values["chosen"] == 2


def test_an_attempt_stopped_by_a_model_error_stops_the_run_and_the_rerun_resumes_it(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    second = attempt_script(RIGHT)
    folder = tmp_path / "scripts"
    tries = [attempt_script(WRONG), second[:3], attempt_script(RIGHT)]  # the third is never run
    model = scripts(folder, tries, [review(2, "README only."), review(9, "Fixed.")])
    run = dict(model=model, settings=settings(max=3), output_dir=tmp_path / "out", run_id="T", repo=repo)
    stopped = run_attempts(TASK, **run)
    assert stopped.exit_status == "model_error"  # the script ran out during attempt 2
    assert "attempt 2 stopped with model_error" in stopped.error
    assert [a["index"] for a in stopped.attempts] == [1]

    write(folder, "attempt2.yaml", second)  # the model answers again
    resumed = run_attempts(TASK, **run)
    assert resumed.exit_status == "submitted" and resumed.chosen == 2
    assert [(a["index"], a["score"]) for a in resumed.attempts] == [(1, 2.0), (2, 9.0)]
    traj = json.loads(resumed.trajectory_path.read_text())
    assert [op["thought"] for op in traj["operations"] if op["attempt"] == 2] == [
        "Check what double(2) gives; run the test.",
        "Apply the fix.",
        "Done.",
    ]
    assert [c["attempt"] for c in traj["model_calls"] if c["kind"] == "review"] == [1, 2]


def test_parallel_attempts_add_their_worktrees_one_at_a_time(tmp_path: Path) -> None:
    """`git worktree add` of several attempts at once in one repository races on .git/worktrees ("failed to read
    .git/worktrees/repo3/commondir", 7 of 80 here without the lock): each attempt's worktree is added, whole."""
    repo = make_git_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})
    paths = [tmp_path / f"round{n // 8}" / f"attempt{n % 8}" / "repo" for n in range(24)]
    for path in paths:
        path.parent.mkdir(parents=True)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda path: worktree(repo, "add", "--detach", "-f", str(path), "HEAD"), paths))
    heads = {subprocess.run(["git", "rev-parse", "HEAD"], cwd=p, capture_output=True, text=True).stdout for p in paths}
    assert len(heads) == 1 and len(next(iter(heads)).strip()) == 40
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True).stdout
    assert sum(str(path) in listed for path in paths) == 24


def test_a_thread_id_resumes_as_the_kind_of_run_it_was_never_over_it(tmp_path: Path) -> None:
    """A finished run at the same id run again with attempts started anew over its trajectory and patch; a run with
    attempts run again without them was refused as if its checkpoint had been emptied."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(RIGHT)], [review(5, "Fixed.")] * 2)
    configs = {most: tmp_path / f"max{most}.yaml" for most in (1, 2)}
    for most, path in configs.items():
        path.write_text(yaml.safe_dump({**NO_TOOLS, "attempts": {"max": most}}))
    out = tmp_path / "out"

    def run(thread: str, most: int) -> subprocess.CompletedProcess:
        spec = model.replace("{attempt}", "1") if most == 1 else model  # a run without attempts: one script
        args = ["run", "--repo", str(repo), "--task", TASK, "--model", spec, "--thread-id", thread, "--output"]
        return invoke(*args, str(out), "--config", str(configs[most]), cwd=tmp_path)

    assert run("T", 1).returncode == 0 and run("U", 2).returncode == 0
    saved = {name: (out / name).read_bytes() for name in ("T.traj.json", "T.patch", "U.traj.json", "U.patch")}
    said = {"T": "without attempts", "U": "with attempts"}
    for thread, most, had in (("T", 2, 1), ("U", 1, 2)):
        done = run(thread, most)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr == (
            f"error: thread {thread} is a run {said[thread]} ({out / thread}.traj.json): resume it as it ran "
            f"(attempts.max: {had}), or give a new --thread-id\n"
        )
    assert {name: (out / name).read_bytes() for name in saved} == saved
    again = run("U", 2)  # as it ran: its result again, said as a single run says it
    assert again.returncode == 0 and "… run U had already finished (submitted): its result again" in again.stdout
    assert {name: (out / name).read_bytes() for name in saved} == saved


@pytest.mark.parametrize(
    ("attempts", "missing", "line"),
    [
        (
            {"max": 2},
            "attemptreview.yaml",
            "attempts.reviewer.model: scripted model: file not found: {s}/attemptreview",
        ),
        ({"max": 2}, "attemptchoose.yaml", "attempts.chooser.model: scripted model: file not found: {s}/attemptchoose"),
        ({"max": 2, "choose": "best_score"}, "attemptchoose.yaml", None),  # no chooser: its file is not needed
        ({"max": 2, "reviewer": {"model": "opneai:gpt"}}, None, "attempts.reviewer.model: model opneai:gpt: unknown"),
    ],  # the reviewer's and chooser's models were first built after the attempts had run (and been paid for)
)
def test_the_reviewers_and_choosers_models_are_checked_before_anything_starts(
    tmp_path: Path, attempts: dict, missing: str | None, line: str | None
) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "s", [attempt_script(RIGHT), attempt_script(RIGHT)], [review(9, "Fixed.")])
    if missing:
        (tmp_path / "s" / missing).unlink()
    (config := tmp_path / "config.yaml").write_text(yaml.safe_dump({**NO_TOOLS, "attempts": attempts}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--config", str(config)]
    done = invoke(*args, "--output", str(tmp_path / "out"), cwd=tmp_path, env={**os.environ, "LLM_IDE_CONFIG": "off"})
    run = dict(model=model, settings=settings(**attempts), output_dir=tmp_path / "api", run_id="T", repo=repo)
    if line is None:
        assert done.returncode == 0 and run_attempts(TASK, **run).exit_status == "submitted", done.stderr
        return
    line = line.replace("{s}", str(tmp_path / "s"))
    assert (done.returncode, done.stderr.count("\n")) == (2, 1) and done.stderr.startswith(f"error: {line}")
    with pytest.raises(UsageError, match=f"^{line}"):
        run_attempts(TASK, **run)
    assert not (tmp_path / "out").exists() and not (tmp_path / "api").exists()
    assert subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout == ""


@pytest.mark.parametrize("most", [None, 1])
def test_a_model_per_attempt_in_a_run_without_attempts_is_one_line(tmp_path: Path, most: int | None) -> None:
    """The preflight checked the first attempt's script, then the run looked for `attempt{attempt}.yaml` itself."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "s", [attempt_script(RIGHT)], [review(9, "Fixed.")])
    config = {**NO_TOOLS, **({"attempts": {"max": most}} if most else {})}
    (path := tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--config", str(path)]
    done = invoke(*args, "--output", str(tmp_path / "out"), cwd=tmp_path, env={**os.environ, "LLM_IDE_CONFIG": "off"})
    line = f"model {model}: `{{attempt}}` names one model per attempt: give attempts.max > 1"
    assert (done.returncode, done.stderr) == (2, f"error: {line}\n")
    run = dict(model=model, settings=load_config("default", **config), output_dir=tmp_path / "api", run_id="T")
    for api in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            api(TASK, **run, repo=repo)
        assert str(raised.value) == line
    assert not (tmp_path / "out").exists() and not (tmp_path / "api").exists()


@pytest.mark.parametrize(
    ("attempts", "k", "passed"),
    [
        ({"a": {}, "b": {}}, 1, 1),  # a batch without attempts (each instance's run is its one try): it said pass@0
        ({}, 1, 1),
        ({"a": {1: "resolved"}, "b": {1: "unresolved", 2: "resolved"}}, 2, 2),
    ],
)
def test_evaluate_attempts_counts_a_run_without_attempts_as_one_try(attempts: dict, k: int, passed: int) -> None:
    graded = AttemptsReport({"a": "resolved", "b": "unresolved"}, attempts).to_json()
    assert (graded["k"], graded["pass_at_k_count"], graded["chosen_resolved_count"]) == (k, passed, 1)
    assert graded["pass_at_k"] == passed / 2
